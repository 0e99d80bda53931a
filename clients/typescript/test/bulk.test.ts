// Bulk uploads as the Python SDK makes them: uploadMany with bounded concurrency (each result as it
// finishes), uploadFolder (recursive, hidden files skipped, every document followed to READY
// through one WatchCollection stream), and full upload slots (TOO_MANY_UPLOADS) waited out by the
// RetryInfo the server sends. Against the real services.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";

import { ResourceExhausted, RateLimited, RetryPolicy, UploadResult, UploadSourceError, findFiles } from "@sluice/client";

import { client as makeClient, collect, stack } from "./helpers.js";

const client = makeClient();
after(() => client.close());
const scratch = mkdtempSync(join(tmpdir(), "sluice-ts-bulk-"));

test("uploadFolder uploads a tree (hidden files skipped) and follows every document to READY through one watch", async () => {
  const root = join(scratch, "tree");
  mkdirSync(join(root, "sub", "deeper"), { recursive: true });
  mkdirSync(join(root, ".hidden"));
  const names = ["a.txt", "b.md", join("sub", "c.txt"), join("sub", "deeper", "d.txt")];
  names.forEach((name, n) => writeFileSync(join(root, name), `document ${n} about leases and workers\n`));
  writeFileSync(join(root, ".secret.txt"), "not uploaded");
  writeFileSync(join(root, ".hidden", "e.txt"), "not uploaded either");
  assert.deepEqual(await findFiles([root]), [join(root, "a.txt"), join(root, "b.md"), join(root, "sub", "c.txt"),
    join(root, "sub", "deeper", "d.txt")]);
  await client.collections.create("ts-folder", { embedder: "hashing" });
  const changes: string[] = [];
  const results = await client.documents.uploadFolder("ts-folder", root, {
    concurrency: 2, timeoutMs: 120_000, onChange: (d) => changes.push(`${d.filename}:${d.statusName}`),
  });
  assert.equal(results.length, 4);
  assert.ok(results.every((r) => r instanceof UploadResult && r.ok), results.map((r) => String(r.error)).join("; "));
  assert.deepEqual(results.map((r) => r.document!.filename), ["a.txt", "b.md", "c.txt", "d.txt"]); // file order
  assert.ok(results.every((r) => r.document!.statusName === "READY"), results.map((r) => r.document!.statusName).join());
  assert.ok(changes.some((c) => c.endsWith(":READY")), changes.join());
  const listed = await collect(client.documents.list("ts-folder"));
  assert.equal(listed.length, 4);
  await assert.rejects(client.documents.uploadFolder("ts-folder", join(scratch, "nope")),
    (error: unknown) => error instanceof UploadSourceError && error.reason === "FILE_NOT_FOUND");
});

test("uploadMany keeps at most `concurrency` uploads in flight and yields each result as it finishes", async () => {
  await client.collections.create("ts-many", { embedder: "hashing" });
  const sources = Array.from({ length: 9 }, (_, n) => Buffer.from(`bytes of source ${n}\n`));
  let inFlight = 0;
  let most = 0;
  const counting = makeClient();
  const upload = counting.documents.upload.bind(counting.documents);
  counting.documents.upload = async (...args: Parameters<typeof upload>) => {
    inFlight += 1;
    most = Math.max(most, inFlight);
    try {
      return await upload(...args);
    } finally {
      inFlight -= 1;
    }
  };
  try {
    const results = await collect(counting.documents.uploadMany("ts-many", sources, { concurrency: 3 }));
    assert.equal(results.length, 9);
    assert.ok(results.every((r) => r.ok));
    assert.equal(most, 3);
    assert.equal(new Set(results.map((r) => r.document!.id)).size, 9);
    // A source that cannot be read is a result with its error; the others go on.
    const mixed = await collect(counting.documents.uploadMany("ts-many", [join(scratch, "missing.txt"), sources[0]]));
    assert.equal(mixed.filter((r) => r.ok).length, 1);
    assert.ok(mixed.find((r) => !r.ok)!.error instanceof UploadSourceError);
  } finally {
    counting.close();
  }
});

test("full upload slots (TOO_MANY_UPLOADS) are waited out as the server's RetryInfo says, and nothing paces the client", async () => {
  // 2 slots, 8 uploads of 3 MiB at once: some are refused, and every one ends stored.
  const slots = makeClient({ address: stack.slots });
  try {
    await slots.collections.create("ts-slots", { embedder: "hashing" });
    const sources = Array.from({ length: 8 }, (_, n) => Buffer.alloc(3 * 1024 * 1024, 65 + n));
    const results = await collect(slots.documents.uploadMany("ts-slots", sources, { concurrency: 8 }));
    assert.ok(results.every((r) => r.ok), results.map((r) => String(r.error)).join("; "));
    assert.equal(new Set(results.map((r) => r.document!.id)).size, 8);
    assert.equal(slots.pacer.rate, undefined);
  } finally {
    slots.close();
  }
});

test("TOO_MANY_UPLOADS with a RetryInfo is retried after that wait (spread by up to 50 %), not as a rate limit", () => {
  const policy = new RetryPolicy({ attempts: 2 });
  const full = new ResourceExhausted("slots full", { reason: "TOO_MANY_UPLOADS", retryAfterMs: 400 });
  assert.ok(!(full instanceof RateLimited));
  for (let attempt = 0; attempt < 10; attempt += 1) { // not bounded by `attempts`: by the deadline only
    const wait = policy.nextWait(full, attempt, 60_000)!;
    assert.ok(wait >= 400 && wait <= 600, String(wait));
  }
  assert.equal(policy.nextWait(full, 0, 300), undefined); // longer than the deadline allows
  // From a server that names no wait: backoff, bounded by `attempts`.
  const bare = new ResourceExhausted("slots full", { reason: "TOO_MANY_UPLOADS" });
  assert.ok(policy.nextWait(bare, 0, 60_000)! <= 200);
  assert.equal(policy.nextWait(bare, 1, 60_000), undefined);
});
