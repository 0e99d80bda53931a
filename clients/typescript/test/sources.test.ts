// client.sources as the Python SDK has it: create every kind the proto has (a folder on the server,
// an S3-compatible bucket, a web site by sitemap or crawl, a git repository), list, get, sync (and
// wait for the run), runs, delete. Against the real ingest-api and the real sources runner
// (tests/clients/test_typescript_sdk.py runs it beside these tests).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, test } from "node:test";

import { CollectionEvent, DataSource, InvalidArgument, NotFound, SourceKind, SourceRun, WEBHOOK_EVENT_TYPES, webhookEventName } from "@sluice/client";

import { client as makeClient, collect, stack } from "./helpers.js";

const client = makeClient();
after(() => client.close());

function folder(files: Record<string, string>): string {
  const root = mkdtempSync(join(stack.sourceRoot, "ts-"));
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(join(root, name, ".."), { recursive: true });
    writeFileSync(join(root, name), text);
  }
  return root;
}

async function liveSources(collection: string): Promise<string[]> {
  return (await collect(client.documents.list(collection))).map((d) => d.sourceUri).sort();
}

test("a folder source is created, listed, synced (waiting for its run), synced again after a deletion, and deleted", async () => {
  await client.collections.create("ts-sources", { embedder: "hashing" });
  const root = folder({ "a.md": "the text of a", "guide/b.md": "the text of b", "c.txt": "not a markdown file" });
  const source = await client.sources.create("ts-sources", { folder: root, glob: "**/*.md", displayName: "handbook" });
  assert.ok(source instanceof DataSource);
  assert.equal(source.name, `collections/ts-sources/sources/${source.id}`);
  assert.equal(source.kind, "local_folder");
  assert.deepEqual(source.spec, { folder: root, glob: "**/*.md" });
  assert.equal(source.displayName, "handbook");
  assert.equal(source.lastRun, undefined);
  assert.equal(source.raw.kind, SourceKind.LOCAL_FOLDER);
  assert.deepEqual((await collect(client.sources.list("ts-sources"))).map((s) => s.id), [source.id]);

  const run = await client.sources.sync(source.name, { wait: true, timeoutMs: 120_000, pollMs: 200 });
  assert.ok(run instanceof SourceRun);
  assert.equal(run.state, "succeeded", run.errorMessage);
  assert.ok(run.ended && !run.scheduled && run.endTime instanceof Date);
  assert.deepEqual([run.listed, run.uploaded, run.unchanged, run.deleted, run.failed], [2, 2, 0, 0, 0]);
  assert.deepEqual(await liveSources("ts-sources"), ["a.md", "guide/b.md"]);
  const got = await client.sources.get(source.id); // the bare id works too
  assert.equal(got.lastRun?.id, run.id);
  assert.equal(got.lastRun?.state, "succeeded");

  // The run ends once it has uploaded; the documents are processed after (waitAll follows them).
  const synced = await client.documents.waitAll(await collect(client.documents.list("ts-sources")), { timeoutMs: 120_000 });
  assert.deepEqual(synced.map((d) => d.statusName), ["READY", "READY"]);
  // A file gone: the next run deletes its document (3 or fewer deletions pass the mass-delete guard).
  rmSync(join(root, "a.md"));
  const second = await client.sources.sync(source.id, { wait: true, timeoutMs: 120_000, pollMs: 200 });
  assert.equal(second.state, "succeeded", second.errorMessage);
  assert.deepEqual([second.listed, second.uploaded, second.unchanged, second.deleted], [1, 0, 1, 1]);
  assert.deepEqual((await client.sources.runs(source.name)).map((r) => r.id), [second.id, run.id]); // newest first
  assert.deepEqual((await client.sources.runs(source.name, { limit: 1 })).map((r) => r.id), [second.id]);
  assert.deepEqual(await liveSources("ts-sources"), ["guide/b.md"]);

  // Without wait: the run as it was asked for (pending), then ended by the runner.
  const asked = await client.sources.sync(source.id);
  assert.ok(["pending", "running", "succeeded"].includes(asked.state), asked.state);

  await client.sources.delete(source.id);
  await assert.rejects(client.sources.get(source.id),
    (error: unknown) => error instanceof NotFound && error.reason === "SOURCE_NOT_FOUND");
  assert.deepEqual(await liveSources("ts-sources"), ["guide/b.md"]); // the documents it synced stay
});

test("every kind the proto has is created with its fields, and only one kind at a time", async () => {
  await client.collections.create("ts-kinds", { embedder: "hashing" });
  const s3 = await client.sources.create("ts-kinds", {
    s3Endpoint: "http://127.0.0.1:9", bucket: "docs", prefix: "handbook/", region: "eu-west-1",
    accessKeyIdEnv: "MY_S3_KEY_ID", secretAccessKeyEnv: "MY_S3_SECRET", everySeconds: 3600, maxDeleteShare: 0.5,
  });
  assert.equal(s3.kind, "s3");
  // Credentials by name: the names come back, never a value.
  assert.deepEqual(s3.spec, { s3Endpoint: "http://127.0.0.1:9", bucket: "docs", prefix: "handbook/", region: "eu-west-1",
    accessKeyIdEnv: "MY_S3_KEY_ID", secretAccessKeyEnv: "MY_S3_SECRET" });
  assert.equal(s3.scheduleIntervalSeconds, 3600);
  assert.equal(s3.maxDeleteShare, 0.5);
  assert.ok(s3.nextSyncTime instanceof Date);

  const sitemap = await client.sources.create("ts-kinds", { sitemapUrl: "http://127.0.0.1:9/sitemap.xml", maxPages: 50 });
  assert.equal(sitemap.kind, "http");
  assert.deepEqual(sitemap.spec, { sitemapUrl: "http://127.0.0.1:9/sitemap.xml", maxPages: 50 });
  const crawl = await client.sources.create("ts-kinds", { startUrl: "http://127.0.0.1:9/docs/" });
  assert.deepEqual([crawl.kind, crawl.spec.startUrl], ["http", "http://127.0.0.1:9/docs/"]);
  assert.equal(crawl.nextSyncTime, undefined); // no schedule

  // A git repository on the server (under the operator's roots), synced for real.
  const repository = folder({ "guide/intro.md": "how to begin", "README.md": "outside the subpath" });
  const git = (...args: string[]) => execFileSync("git", ["-C", repository, ...args], { stdio: "pipe" });
  git("init", "-q", "-b", "main");
  git("add", ".");
  git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "first");
  const repo = await client.sources.create("ts-kinds", { git: repository, ref: "main", subpath: "guide" });
  assert.equal(repo.kind, "git");
  assert.deepEqual(repo.spec, { git: repository, ref: "main", subpath: "guide" });
  const run = await client.sources.sync(repo.id, { wait: true, timeoutMs: 120_000, pollMs: 200 });
  assert.equal(run.state, "succeeded", run.errorMessage);
  assert.deepEqual([run.listed, run.uploaded], [1, 1]);
  assert.equal((await client.sources.get(repo.name)).lastRun?.uploaded, 1);

  assert.deepEqual((await collect(client.sources.list("ts-kinds", { pageSize: 2 }))).map((s) => s.id),
    [s3.id, sitemap.id, crawl.id, repo.id]); // oldest first, over pages
  assert.ok((await collect(client.sources.list())).length >= 4); // every collection of the caller

  // Exactly one kind: refused before anything is sent; the server's own checks come back as errors.
  await assert.rejects(client.sources.create("ts-kinds", { folder: repository, git: repository }), TypeError);
  await assert.rejects(client.sources.create("ts-kinds", {}), TypeError);
  await assert.rejects(client.sources.create("ts-kinds", { folder: "/etc" }),
    (error: unknown) => error instanceof InvalidArgument && /not under a folder this server allows/.test(error.message));
  await assert.rejects(client.sources.create("ts-kinds", { sitemapUrl: "ftp://example.com/sitemap.xml" }),
    (error: unknown) => error instanceof InvalidArgument);
  await assert.rejects(client.sources.sync("00000000-0000-0000-0000-000000000000"), (error: unknown) => error instanceof NotFound);
});

test("a run's events come on the collection's watch when asked for: started, progress, finished with its counts", async () => {
  await client.collections.create("ts-run-events", { embedder: "hashing" });
  const root = folder({ "one.md": "first page", "two.md": "second page", "three.md": "third page" });
  const source = await client.sources.create("ts-run-events", { folder: root, displayName: "pages" });
  const watch = client.collections.watch("ts-run-events", { sourceRuns: "only", heartbeats: true });
  const events: CollectionEvent[] = [];
  const iterator = watch[Symbol.asyncIterator]();
  // The stream is open once its first heartbeat came: then ask for the run, so that none of its events is missed.
  const first = await iterator.next();
  assert.equal((first.value as CollectionEvent).kind, "HEARTBEAT");
  const asked = await client.sources.sync(source.id);
  for (;;) {
    const { value, done } = await iterator.next();
    assert.ok(!done);
    const event = value as CollectionEvent;
    if (!event.isSourceRun) continue;
    events.push(event);
    if (event.kind === "SOURCE_RUN_FINISHED") break;
  }
  watch.close();
  assert.equal(events[0].kind, "SOURCE_RUN_STARTED");
  assert.ok(events.slice(1, -1).every((e) => e.kind === "SOURCE_RUN_PROGRESS"), events.map((e) => e.kind).join());
  assert.ok(events.every((e) => e.document === undefined && e.sourceRun!.run.id === asked.id && e.sourceRun!.source === source.name));
  const finished = events[events.length - 1].sourceRun!;
  assert.equal(finished.sourceDisplayName, "pages");
  assert.ok(finished.run instanceof SourceRun);
  assert.deepEqual([finished.run.state, finished.run.listed, finished.run.uploaded], ["succeeded", 3, 3]);
  // Webhooks name the same events.
  assert.ok(["source_run.started", "source_run.progress", "source_run.finished"].every((t) => t in WEBHOOK_EVENT_TYPES));
  assert.equal(webhookEventName(WEBHOOK_EVENT_TYPES["source_run.finished"]), "source_run.finished");
  assert.equal(webhookEventName(WEBHOOK_EVENT_TYPES["document.ready"]), "document.ready");
});
