// Webhooks and administration, as the Python SDK has them, against the real ingest-api (webhook
// receivers on this machine allowed there; none is called here).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, test } from "node:test";

import { ApiKey, NotFound, PermissionDenied, Tenant, Unauthenticated, Webhook } from "@sluice/client";

import { client as makeClient, collect, stack } from "./helpers.js";

const client = makeClient();
after(() => client.close());

test("webhooks: create (the secret once), get, list, rotate the secret, deliveries, delete", async () => {
  await client.collections.create("ts-hooks", { embedder: "hashing" });
  const made = await client.webhooks.create("ts-hooks", "http://127.0.0.1:9/sluice",
    { eventTypes: ["document.ready"], description: "ready documents" });
  assert.ok(made.webhook instanceof Webhook);
  assert.ok(made.secret.length > 10);
  assert.deepEqual(made.webhook.eventTypes, ["document.ready"]);
  assert.equal(made.webhook.state, "active");
  const fetched = await client.webhooks.get(made.webhook.id);
  assert.equal(fetched.description, "ready documents");
  assert.deepEqual((await collect(client.webhooks.list("ts-hooks"))).map((w) => w.id), [made.webhook.id]);
  const rotated = await client.webhooks.rotateSecret(made.webhook.id);
  assert.notEqual(rotated.secret, made.secret);
  assert.deepEqual(await client.webhooks.deliveries(made.webhook.id), []);
  assert.equal(await client.webhooks.delete(made.webhook.id), 0n);
  await assert.rejects(client.webhooks.get(made.webhook.id), NotFound);
  await assert.rejects(client.webhooks.create("ts-hooks", "http://127.0.0.1:9/x", { eventTypes: ["document.nope"] }),
    /unknown event type "document.nope"/);
});

test("administration with the admin key: tenants, keys, revocation; refused with a client key", async () => {
  const adminKey = JSON.parse(readFileSync(stack.credentials, "utf8")).keys.admin as string;
  const admin = makeClient({ apiKey: adminKey });
  try {
    const tenant = await admin.admin.createTenant("ts-acme", { maxDocuments: 10 });
    assert.ok(tenant instanceof Tenant);
    assert.equal(tenant.maxDocuments, 10n);
    assert.ok((await admin.admin.listTenants()).some((t) => t.name === "ts-acme"));
    const made = await admin.admin.createKey("ts-acme", "client", { name: "ci" });
    assert.ok(made.key instanceof ApiKey && made.secret.startsWith("slk_"));
    assert.equal(made.key.role, "client");
    assert.ok((await admin.admin.listKeys("ts-acme")).some((k) => k.id === made.key.id));
    const acme = makeClient({ apiKey: made.secret });
    try {
      await acme.collections.create("ts-acme-docs", { embedder: "hashing" });
      const revoked = await admin.admin.revokeKey(made.key.id);
      assert.ok(revoked.revokeTime instanceof Date);
      await assert.rejects(acme.collections.get("ts-acme-docs", { timeoutMs: 5_000 }), Unauthenticated);
    } finally {
      acme.close();
    }
    await assert.rejects(admin.admin.createKey("ts-acme", "superuser"), /unknown role "superuser"/);
    // A key scoped to one collection reaches it and may not make another.
    const scoped = await admin.admin.createKey("ts-acme", "client", { collections: ["ts-acme-docs"] });
    assert.deepEqual(scoped.key.collections, ["ts-acme-docs"]);
    assert.deepEqual(made.key.collections, []);
    const reader = makeClient({ apiKey: scoped.secret });
    try {
      assert.equal((await reader.collections.get("ts-acme-docs")).name, "ts-acme-docs");
      await assert.rejects(reader.collections.create("ts-acme-other", { embedder: "hashing" }), PermissionDenied);
    } finally {
      reader.close();
    }
  } finally {
    admin.close();
  }
  await assert.rejects(client.admin.listTenants(), (e: unknown) => e instanceof PermissionDenied || e instanceof Unauthenticated);
});
