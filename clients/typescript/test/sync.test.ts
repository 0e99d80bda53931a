// documents.syncFolder and documents.waitAll as the Python SDK has them (sync_folder, wait_all):
// a folder compared by sourceUri and SHA-256 with the collection's live versions (unchanged files
// not sent, changed ones new versions swapped in at READY, gone ones deleted on request, a mass
// deletion refused unless allowed), and many documents followed to READY or FAILED through one
// watch per collection. Against the real services.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";

import { Document, DocumentTracker, MassDeleteRefused, SyncReport, UploadSourceError, WaitTimeout, sourceUriOf } from "@sluice/client";

import { client as makeClient, collect } from "./helpers.js";

const client = makeClient();
after(() => client.close());
const scratch = mkdtempSync(join(tmpdir(), "sluice-ts-sync-"));

function write(root: string, files: Record<string, string>): void {
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(join(root, name, ".."), { recursive: true });
    writeFileSync(join(root, name), text);
  }
}

/** sourceUri → [version, status] of the collection's live documents. */
async function live(collection: string): Promise<Record<string, [number, string][]>> {
  const found: Record<string, [number, string][]> = {};
  for (const d of await collect(client.documents.list(collection))) (found[d.sourceUri] ??= []).push([d.version, d.statusName]);
  for (const versions of Object.values(found)) versions.sort((a, b) => a[0] - b[0]);
  return found;
}

test("syncFolder uploads new files, skips unchanged ones, swaps in changed ones and deletes gone ones on request", async () => {
  await client.collections.create("ts-sync", { embedder: "hashing" });
  const root = join(scratch, "handbook");
  write(root, { "a.md": "The keeper logs the amber signal.\n", "notes/b.txt": "Leases expire when nobody renews them.\n",
    "c.txt": "A file that will go away.\n", ".hidden.txt": "never synced" });
  assert.equal(sourceUriOf(join(root, "notes", "b.txt"), root), "notes/b.txt");
  const plans: number[] = [];
  const first = await client.documents.syncFolder("ts-sync", root, { timeoutMs: 120_000, onPlan: (p) => plans.push(p.uploads.length) });
  assert.ok(first instanceof SyncReport && first.ok, JSON.stringify(first.failed));
  assert.deepEqual(plans, [3]);
  assert.deepEqual(first.counts, { new: 3, updated: 0, unchanged: 0, deleted: 0, failed: 0 });
  assert.ok(first.new.every((d) => d instanceof Document && d.ready), first.new.map((d) => d.statusName).join());
  assert.deepEqual(first.new.map((d) => d.sourceUri), ["a.md", "c.txt", "notes/b.txt"]);

  // Nothing changed: nothing is sent.
  const started: unknown[] = [];
  const again = await client.documents.syncFolder("ts-sync", root, { onStart: (s) => started.push(s) });
  assert.deepEqual(again.counts, { new: 0, updated: 0, unchanged: 3, deleted: 0, failed: 0 });
  assert.deepEqual(started, []);

  // One changed, one gone, one new; without `delete` the gone one is kept.
  write(root, { "notes/b.txt": "Leases expire after thirty seconds without a heartbeat.\n", "d.md": "A new page.\n" });
  rmSync(join(root, "c.txt"));
  const kept = await client.documents.syncFolder("ts-sync", root, { wait: false });
  assert.deepEqual([kept.new.map((d) => d.sourceUri), kept.updated.map((d) => d.sourceUri), kept.kept, kept.deleted],
    [["d.md"], ["notes/b.txt"], ["c.txt"], []]);
  assert.equal(kept.waited, false);
  const synced = await client.documents.syncFolder("ts-sync", root, { delete: true, timeoutMs: 120_000 });
  assert.ok(synced.ok, JSON.stringify(synced.failed));
  assert.deepEqual(synced.deleted, ["c.txt"]);
  // The versions the unwaited sync sent are its newest live ones already, READY or not: not sent again.
  assert.deepEqual(synced.unchanged.sort(), ["a.md", "d.md", "notes/b.txt"]);
  const settled = await client.documents.waitAll([...kept.new, ...kept.updated], { timeoutMs: 120_000 });
  assert.deepEqual(settled.map((d) => [d.sourceUri, d.version, d.statusName]), [["d.md", 1, "READY"], ["notes/b.txt", 2, "READY"]]);
  // The changed file's new version replaced the old one at READY: one live version of each source.
  assert.deepEqual(await live("ts-sync"), { "a.md": [[1, "READY"]], "d.md": [[1, "READY"]], "notes/b.txt": [[2, "READY"]] });
  const hits = await client.search("ts-sync", "heartbeat", { mode: "keyword" });
  assert.ok(hits.hits.some((h) => h.text.includes("thirty seconds")));
  assert.ok(!hits.hits.some((h) => h.text.includes("nobody renews")));

  await assert.rejects(client.documents.syncFolder("ts-sync", join(scratch, "nope")),
    (error: unknown) => error instanceof UploadSourceError && error.reason === "FILE_NOT_FOUND");
});

test("syncFolder refuses a mass deletion unless allowed, and reports a failed version until the file changes", async () => {
  await client.collections.create("ts-sync-guard", { embedder: "hashing" });
  const root = join(scratch, "guarded");
  write(root, Object.fromEntries(Array.from({ length: 6 }, (_, n) => [`p${n}.txt`, `page ${n} about workers\n`])));
  assert.equal((await client.documents.syncFolder("ts-sync-guard", root, { timeoutMs: 120_000 })).new.length, 6);
  for (let n = 1; n < 6; n++) rmSync(join(root, `p${n}.txt`));
  await assert.rejects(client.documents.syncFolder("ts-sync-guard", root, { delete: true }), (error: unknown) => {
    assert.ok(error instanceof MassDeleteRefused);
    assert.equal(error.reason, "MASS_DELETE_REFUSED");
    assert.deepEqual([error.wouldDelete, error.sources, error.maxDeleteShare], [5, 6, 0.2]);
    assert.deepEqual(error.sourceUris, ["p1.txt", "p2.txt", "p3.txt", "p4.txt", "p5.txt"]);
    return true;
  });
  assert.equal(Object.keys(await live("ts-sync-guard")).length, 6); // nothing was deleted
  const allowed = await client.documents.syncFolder("ts-sync-guard", root, { delete: true, allowMassDelete: true });
  assert.equal(allowed.deleted.length, 5);
  assert.deepEqual(Object.keys(await live("ts-sync-guard")), ["p0.txt"]);

  // A version that FAILS (the test worker fails content holding FAIL) is a failure of the sync,
  // and stays one while the file is unchanged.
  write(root, { "broken.txt": "FAIL this one\n" });
  const failing = await client.documents.syncFolder("ts-sync-guard", root, { timeoutMs: 120_000 });
  assert.deepEqual(failing.failed.map((f) => [f.sourceUri, f.document?.statusName]), [["broken.txt", "FAILED"]]);
  assert.equal(failing.ok, false);
  const still = await client.documents.syncFolder("ts-sync-guard", root);
  assert.deepEqual(still.failed.map((f) => f.sourceUri), ["broken.txt"]);
  assert.match(still.failed[0].error, /unchanged since it failed/);
});

test("waitAll follows documents of several collections, by id or Document, to READY or FAILED, in the order given", async () => {
  await client.collections.create("ts-wait-a", { embedder: "hashing" });
  await client.collections.create("ts-wait-b", { embedder: "hashing" });
  const a1 = await client.documents.upload("ts-wait-a", Buffer.from("first of a\n"), { filename: "a1.txt" });
  const b1 = await client.documents.upload("ts-wait-b", Buffer.from("first of b\n"), { filename: "b1.txt" });
  const bad = await client.documents.upload("ts-wait-b", Buffer.from("FAIL here\n"), { filename: "bad.txt" });
  const a2 = await client.documents.upload("ts-wait-a", Buffer.from("second of a\n"), { filename: "a2.txt" });
  const changes: string[] = [];
  const done = await client.documents.waitAll([a1.id, b1, bad.id, a2], { timeoutMs: 120_000, onChange: (d) => changes.push(d.filename) });
  assert.deepEqual(done.map((d) => [d.filename, d.statusName]),
    [["a1.txt", "READY"], ["b1.txt", "READY"], ["bad.txt", "FAILED"], ["a2.txt", "READY"]]);
  assert.ok(changes.length > 0);
  // Documents already done (even as stale objects from before): answered at once, fresh; read one
  // by one, or (past REFRESH_BY_GET of them) from a listing of each collection.
  const again = await client.documents.waitAll([a1, b1]);
  assert.deepEqual(again.map((d) => d.statusName), ["READY", "READY"]);
  DocumentTracker.REFRESH_BY_GET = 0;
  try {
    const listed = await client.documents.waitAll([a1, b1, a2], { timeoutMs: 30_000 });
    assert.deepEqual(listed.map((d) => [d.filename, d.statusName]), [["a1.txt", "READY"], ["b1.txt", "READY"], ["a2.txt", "READY"]]);
  } finally {
    DocumentTracker.REFRESH_BY_GET = 100;
  }
  // A deadline that passes first: WaitTimeout with the states known then.
  const slow = await client.documents.upload("ts-wait-a", Buffer.from("third of a\n"), { filename: "a3.txt" });
  await assert.rejects(client.documents.waitAll([a1, slow], { timeoutMs: 0 }), (error: unknown) => {
    assert.ok(error instanceof WaitTimeout);
    assert.deepEqual((error.documents as Document[]).map((d) => d.id), [a1.id, slow.id]);
    return true;
  });
  assert.equal((await client.documents.waitAll([slow.id], { timeoutMs: 120_000 }))[0].statusName, "READY");
});
