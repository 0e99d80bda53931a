// Retries as the Python SDK's retry.py makes them: RATE_LIMITED honours the server's RetryInfo and
// paces the client at 90 % of the reported limit; UNAVAILABLE is retried with backoff within the deadline.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Code } from "@connectrpc/connect";
import { RateLimited, ResourceExhausted } from "@sluice/client";

import { client as makeClient, freePort, Proxy, stack } from "./helpers.js";

test("every call honours RetryInfo and paces itself at 90 % of the reported limit", async () => {
  // ingest-api at 5 calls a second in bursts of 2: 15 calls all succeed because the SDK waits as told.
  const client = makeClient({ address: stack.limited });
  try {
    assert.equal(client.pacer.rate, undefined);
    await client.collections.create("ts-limited", { embedder: "hashing" });
    for (let n = 0; n < 14; n += 1) {
      if (n % 2) await client.collections.get("ts-limited");
      else await client.documents.upload("ts-limited", Buffer.from(`doc ${n}`), { filename: `${n}.txt` });
    }
    assert.ok(Math.abs((client.pacer.rate ?? 0) - 4.5) < 1e-9, `pace: ${client.pacer.rate}`);
  } finally {
    client.close();
  }
});

test("a refusal the deadline cannot wait out surfaces as RateLimited with its RetryInfo and limit", async () => {
  const client = makeClient({ address: stack.limited });
  try {
    // More calls at once than the burst; a deadline shorter than one token interval (200 ms).
    const outcomes = await Promise.allSettled(Array.from({ length: 8 }, () => client.collections.get("ts-limited", { timeoutMs: 100 })));
    const refused = outcomes.flatMap((o) => (o.status === "rejected" && o.reason instanceof RateLimited ? [o.reason] : []));
    assert.ok(refused.length >= 1, JSON.stringify(outcomes.map((o) => o.status === "rejected" ? String(o.reason) : "ok")));
    const error = refused[0];
    assert.ok(error instanceof ResourceExhausted);
    assert.equal(error.code, Code.ResourceExhausted);
    assert.equal(error.reason, "RATE_LIMITED");
    assert.equal(error.metadata.limit_per_second, "5");
    assert.ok(error.retryAfterMs !== undefined && error.retryAfterMs > 0);
  } finally {
    client.close();
  }
});

test("UNAVAILABLE is retried with backoff until the server is there, within the deadline", async () => {
  const port = await freePort();
  let proxy: Proxy | undefined;
  // Nothing listens for the first second; then the port leads to ingest-api.
  const timer = setTimeout(async () => { proxy = await Proxy.start(stack.ingest, port); }, 1000);
  const client = makeClient({ address: `127.0.0.1:${port}`, timeoutMs: 20_000 });
  try {
    assert.equal((await client.collections.create("ts-late", { embedder: "hashing" })).name, "ts-late");
  } finally {
    clearTimeout(timer);
    client.close();
    await proxy?.close();
  }
});
