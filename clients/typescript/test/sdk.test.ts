// The TypeScript SDK against the real services: typed results, uploads that never duplicate and
// are refused when not whole, pages, errors with code and reason.
import assert from "node:assert/strict";
import { mkdtempSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";

import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  AlreadyExists, Client, ConnectionFailed, Document, DocumentStatus, NotFound, SearchMode, SluiceError, Unauthenticated,
  Unavailable, UploadSourceError, metadataMessage, prepare, toSluiceError,
} from "@sluice/client";

import { UploadDocumentTrailerSchema } from "../src/gen/sluice/v1/document_service_pb.js";
import { client as makeClient, collect, freePort, stack } from "./helpers.js";

const client = makeClient();
after(() => client.close());
const scratch = mkdtempSync(join(tmpdir(), "sluice-ts-"));

test("upload, wait READY and search, as typed results with int64 as bigint", async () => {
  const collection = await client.collections.create("ts-docs", { embedder: "hashing" });
  assert.equal(collection.name, "ts-docs");
  assert.equal(collection.embedder.provider, "hashing");
  assert.equal(collection.embedder.dimensions, 256);
  assert.equal(collection.documentCount, 0n);
  const path = join(scratch, "leases.md");
  writeFileSync(path, "# Leases\n\nA lease expires when the worker stops renewing it.\n");
  const doc = await client.documents.upload("ts-docs", path);
  assert.ok(doc instanceof Document);
  assert.equal(doc.filename, "leases.md");
  assert.equal(doc.mimeType, "text/markdown");
  assert.equal(doc.sizeBytes, BigInt(statSync(path).size));
  assert.ok([DocumentStatus.PENDING, DocumentStatus.PARSING].includes(doc.status), doc.statusName);
  const ready = await client.documents.wait(doc.id, { timeoutMs: 60_000 });
  assert.ok(ready.ready && ready.done && !ready.failed);
  assert.equal(ready.statusName, "READY");
  assert.equal(ready.chunkCount, 2);
  assert.ok(ready.createTime instanceof Date);
  const hits = await client.search("ts-docs", "how do leases expire", { topK: 5 });
  assert.equal(hits.mode, SearchMode.HYBRID);
  assert.ok(hits.length >= 1);
  assert.equal(hits.hits[0].filename, "leases.md");
  assert.equal(hits.hits[0].documentId, doc.id);
  assert.equal(hits.hits[0].pageNumber, 1);
  assert.ok(typeof hits.hits[0].score === "number" && hits.hits[0].score > 0);
  assert.match([...hits].map((h) => h.text).join(" "), /lease expires/);
  const keyword = await client.search("ts-docs", "renewing", { mode: "keyword", where: ["lang not-exists"] });
  assert.deepEqual(keyword.hits.map((h) => h.chunkIndex), [1]);
  assert.equal((await client.collections.get("ts-docs")).readyDocumentCount, 1n);
});

test("uploads carry size, SHA-256 and a request_id, so a repeat never duplicates", async () => {
  await client.collections.create("ts-idem", { embedder: "hashing" });
  const path = join(scratch, "same.txt");
  writeFileSync(path, "the same bytes, uploaded twice");
  const first = await client.documents.upload("ts-idem", path);
  const again = await client.documents.upload("ts-idem", path); // as a retry would send it: same request_id
  assert.equal(again.id, first.id);
  const keyed = await client.documents.upload("ts-idem", Buffer.from("one version"), { filename: "k.txt", requestId: "ts-test-key" });
  const sameKey = await client.documents.upload("ts-idem", Buffer.from("one version"), { filename: "k.txt", requestId: "ts-test-key" });
  assert.equal(sameKey.id, keyed.id);
  // The request_id reaches the server: the same key with other bytes is refused.
  await assert.rejects(client.documents.upload("ts-idem", Buffer.from("another version"), { filename: "k.txt", requestId: "ts-test-key" }),
    (e: unknown) => e instanceof AlreadyExists && e.reason === "REQUEST_ID_REUSED" && e.metadata.request_id === "ts-test-key");
  const typed = await client.documents.upload("ts-idem", new TextEncoder().encode("typed metadata"), {
    filename: "t.txt", metadata: { team: "x" }, typedMetadata: { year: 2024, draft: false, tags: ["a", "b"] },
  });
  assert.equal(typed.metadata.team, "x");
  assert.deepEqual(typed.typedMetadata, { team: "x", year: 2024, draft: false, tags: ["a", "b"] });
  const names = (await collect(client.documents.list("ts-idem"))).map((d) => d.filename).sort();
  assert.deepEqual(names, ["k.txt", "same.txt", "t.txt"]);
});

test("a connection reset under a call is UNAVAILABLE (retried), a server's ABORTED stays ABORTED", () => {
  // connect-node reads a dropped connection as ABORTED "read ECONNRESET" (no wire status).
  const socket = Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" });
  const reset = toSluiceError(new ConnectError("read ECONNRESET", Code.Aborted, undefined, undefined, socket),
    { service: "ingest-api", address: "127.0.0.1:1" });
  assert.ok(reset instanceof Unavailable, reset.constructor.name);
  assert.equal(reset.reason, "CONNECTION_CLOSED");
  const server = toSluiceError(new ConnectError("the lease moved", Code.Aborted), { service: "ingest-api", address: "127.0.0.1:1" });
  assert.equal(server.code, Code.Aborted);
  assert.ok(!(server instanceof Unavailable));
});

test("the server refuses bytes that are not what the metadata or the trailer announce", async () => {
  await client.collections.create("ts-integrity", { embedder: "hashing" });
  const data = Buffer.from("bytes whose hash is announced");
  const prepared = await prepare(data, "x.txt");
  const send = async (messages: AsyncIterable<any>) => {
    try {
      await client.raw.documents.uploadDocument(messages, { headers: client.headers, timeoutMs: 10_000 });
    } catch (reason) {
      return toSluiceError(reason, { service: "ingest-api", address: stack.ingest });
    }
    assert.fail("the upload was accepted");
  };
  // A SHA-256 in the metadata that the bytes do not have.
  const wrongSha = metadataMessage("ts-integrity", prepared, {}, "ts-wrong-sha");
  wrongSha.expectedSha256 = "0".repeat(64);
  const shaError = await send(prepared.messages(wrongSha));
  assert.equal(shaError.code, Code.InvalidArgument);
  assert.equal(shaError.reason, "CHECKSUM_MISMATCH");
  // A trailer that announces fewer bytes than were sent; a stream that ends without its trailer.
  async function* stream(trailerSize: number | undefined) {
    const metadata = metadataMessage("ts-integrity", prepared, {}, `ts-trailer-${trailerSize}`);
    metadata.expectedSizeBytes = 0n;
    metadata.expectedSha256 = "";
    yield { payload: { case: "metadata" as const, value: metadata } };
    yield { payload: { case: "data" as const, value: data } };
    if (trailerSize !== undefined) {
      yield { payload: { case: "trailer" as const, value: create(UploadDocumentTrailerSchema, { sizeBytes: BigInt(trailerSize), sha256: prepared.sha256 }) } };
    }
  }
  assert.equal((await send(stream(data.length - 1))).reason, "SIZE_MISMATCH");
  const incomplete = await send(stream(undefined));
  assert.equal(incomplete.reason, "UPLOAD_INCOMPLETE");
  assert.equal(incomplete.metadata.received_bytes, String(data.length));
  // Bytes that change after the SDK hashed them: no trailer is sent, nothing is stored.
  const shifty = Buffer.from("original content");
  const upload = client.documents.upload("ts-integrity", shifty, { filename: "shifty.txt" });
  shifty.write("XXXX");
  await assert.rejects(upload, (error: unknown) => {
    assert.ok(error instanceof UploadSourceError);
    assert.equal(error.reason, "SOURCE_CHANGED");
    assert.equal(error.code, undefined);
    assert.match(String(error), /changed while it was being uploaded/);
    return true;
  });
  await assert.rejects(client.documents.upload("ts-integrity", new Uint8Array(), { filename: "empty.txt" }),
    { name: "UploadSourceError", reason: "SOURCE_EMPTY" });
  await assert.rejects(client.documents.upload("ts-integrity", join(scratch, "missing.txt")),
    { name: "UploadSourceError", reason: "SOURCE_UNREADABLE" });
  assert.deepEqual(await collect(client.documents.list("ts-integrity")), []);
});

test("lists are async iterators over pages", async () => {
  for (const name of ["ts-page-1", "ts-page-2", "ts-page-3"]) await client.collections.create(name, { embedder: "hashing" });
  const names = (await collect(client.collections.list({ pageSize: 2 }))).map((c) => c.name).filter((n) => n.startsWith("ts-page-"));
  assert.deepEqual(names, ["ts-page-1", "ts-page-2", "ts-page-3"]);
  const ids = new Set<string>();
  for (let n = 0; n < 5; n += 1) {
    ids.add((await client.documents.upload("ts-page-1", Buffer.from(`document ${n}`), { filename: `d${n}.txt` })).id);
  }
  const listed = await collect(client.documents.list("ts-page-1", { pageSize: 2 }));
  assert.deepEqual(new Set(listed.map((d) => d.id)), ids);
  assert.equal(listed.length, 5);
  assert.equal((await collect(client.documents.list(undefined, { pageSize: 2, limit: 3 }))).length, 3);
  assert.deepEqual(await collect(client.documents.list("ts-page-1", { status: "failed" })), []);
});

test("errors carry the code, the ErrorInfo reason and its metadata", async () => {
  const missing = await client.collections.get("nope").then(() => assert.fail("found"), (e: unknown) => e);
  assert.ok(missing instanceof NotFound && missing instanceof SluiceError);
  assert.equal(missing.code, Code.NotFound);
  assert.equal(missing.codeName, "NOT_FOUND");
  assert.equal(missing.reason, "COLLECTION_NOT_FOUND");
  assert.match(missing.message, /nope/);
  assert.equal(missing.service, "ingest-api");
  assert.equal(missing.address, stack.ingest);
  assert.match(String(missing), /\[COLLECTION_NOT_FOUND\]$/);
  await assert.rejects(client.documents.get("00000000-0000-0000-0000-000000000000"), NotFound);
  await client.collections.create("ts-errors", { embedder: "hashing" });
  await assert.rejects(client.collections.create("ts-errors", { embedder: "hashing" }), (e: unknown) =>
    e instanceof AlreadyExists && e.reason === "COLLECTION_EXISTS" && e.metadata.collection === "ts-errors");
  assert.equal((await client.collections.create("ts-errors", { embedder: "hashing", existOk: true })).name, "ts-errors");
  const stranger = new Client({ address: stack.ingest, apiKey: "slk_not_a_real_key" });
  await assert.rejects(stranger.collections.get("ts-errors"), (e: unknown) =>
    e instanceof Unauthenticated && e.code === Code.Unauthenticated && /^API_KEY_/.test(e.reason));
  stranger.close();
  const nowhere = new Client({ address: `127.0.0.1:${await freePort()}`, apiKey: "x", timeoutMs: 5_000 });
  await assert.rejects(collect(nowhere.collections.list()), (e: unknown) => {
    assert.ok(e instanceof ConnectionFailed);
    assert.equal(e.code, Code.Unavailable);
    assert.equal(e.reason, "UNAVAILABLE");
    assert.match(e.message, /cannot reach ingest-api at 127\.0\.0\.1:\d+ \(connection refused\)/);
    return true;
  });
  nowhere.close();
});

test("the key comes from the option, else SLUICE_API_KEY, else the credentials file", async () => {
  const saved = { key: process.env.SLUICE_API_KEY, credentials: process.env.SLUICE_CREDENTIALS };
  try {
    delete process.env.SLUICE_API_KEY;
    process.env.SLUICE_CREDENTIALS = stack.credentials;
    const fromFile = new Client({ address: stack.ingest });
    assert.equal(fromFile.headers.authorization, `Bearer ${stack.apiKey}`); // the file's client key
    assert.equal((await fromFile.collections.get("ts-docs")).name, "ts-docs");
    fromFile.close();
    process.env.SLUICE_API_KEY = "slk_from_the_environment";
    const fromEnv = new Client({ address: stack.ingest });
    assert.equal(fromEnv.headers.authorization, "Bearer slk_from_the_environment");
    await assert.rejects(fromEnv.collections.get("ts-docs"), Unauthenticated);
    fromEnv.close();
    assert.equal(new Client({ address: stack.ingest, apiKey: "slk_given" }).headers.authorization, "Bearer slk_given");
    // No key anywhere: the error says how to give one, in this SDK's words.
    delete process.env.SLUICE_API_KEY;
    process.env.SLUICE_CREDENTIALS = "/nonexistent/credentials";
    const keyless = new Client({ address: stack.ingest });
    await assert.rejects(keyless.collections.get("ts-docs"), (e: unknown) =>
      e instanceof Unauthenticated && e.reason === "API_KEY_MISSING" && /set SLUICE_API_KEY, or pass apiKey/.test(e.message));
    keyless.close();
  } finally {
    if (saved.key === undefined) delete process.env.SLUICE_API_KEY; else process.env.SLUICE_API_KEY = saved.key;
    if (saved.credentials === undefined) delete process.env.SLUICE_CREDENTIALS; else process.env.SLUICE_CREDENTIALS = saved.credentials;
  }
});

test("a sourceUri makes new content a new version: swapped in at READY, found by source, deleted by source", async () => {
  await client.collections.create("ts-versions", { embedder: "hashing" });
  const source = { collection: "ts-versions", sourceUri: "notes/notes.txt" };
  const first = await client.documents.upload("ts-versions", Buffer.from("The keeper logs the amber signal.\n"),
    { filename: "notes.txt", sourceUri: source.sourceUri });
  assert.equal(first.sourceUri, "notes/notes.txt");
  assert.equal(first.version, 1);
  await client.documents.wait(first.id, { timeoutMs: 60_000 });
  const same = await client.documents.upload("ts-versions", Buffer.from("The keeper logs the amber signal.\n"),
    { filename: "notes.txt", sourceUri: source.sourceUri });
  assert.equal(same.id, first.id, "the same content again is not a new version");
  const second = await client.documents.upload("ts-versions", Buffer.from("The keeper logs the violet signal.\n"),
    { filename: "notes.txt", sourceUri: source.sourceUri });
  assert.notEqual(second.id, first.id);
  assert.equal(second.version, 2);
  await client.documents.wait(second.id, { timeoutMs: 60_000 });
  const current = await client.documents.get(source);
  assert.equal(current.id, second.id);
  assert.equal(current.statusName, "READY");
  const listed = await collect(client.documents.list("ts-versions", { sourceUri: source.sourceUri }));
  assert.deepEqual(listed.map((d) => d.id), [second.id], "the old version left with the swap");
  const hits = await client.search("ts-versions", "signal", { mode: "keyword" });
  assert.deepEqual(hits.hits.map((h) => h.documentId), [second.id]);
  assert.match(hits.hits[0].text, /violet/);
  await assert.rejects(client.documents.get(first.id), NotFound);
  await client.documents.delete(source);
  await assert.rejects(client.documents.get(source), NotFound);
  await assert.rejects(client.documents.get({ collection: "", sourceUri: "x" }), TypeError);
});
