// The console API (issue 34) through the TypeScript SDK: a document's chunks a page at a time,
// disabling, enabling and editing one (what search returns then, a stale etag refused), the original
// bytes back checked against their SHA-256, and search's explanations. The last tests feed the
// download Receiver what a real server never sends (a wrong SHA-256, an early end, bytes before the
// header), since ingest-api cannot be made to.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { create } from "@bufbuild/protobuf";
import { Aborted, Chunk, ChunkPage, DownloadError, HitExplanation, InvalidArgument, NotFound, safeFilename } from "@sluice/client";

import { MemorySink, PathSink, Receiver } from "../src/downloads.js";
import { DownloadDocumentHeaderSchema, DownloadDocumentResponseSchema } from "../src/gen/sluice/v1/document_service_pb.js";
import { client as makeClient, collect } from "./helpers.js";

const client = makeClient();
after(() => client.close());
const scratch = mkdtempSync(join(tmpdir(), "sluice-ts-console-"));
const PARAGRAPHS = [
  "Leases expire when the worker stops renewing them.",
  "A worker claims a job with FOR UPDATE SKIP LOCKED.",
  "Hybrid search fuses keyword and vector ranks.",
  "Webhooks are signed with a secret shown once.",
  "Quokkas are marsupials that live on Rottnest Island.",
];
const COLLECTION = "ts-console";
let documentId = "";
let original: Buffer;

before(async () => {
  await client.collections.create(COLLECTION, { embedder: "hashing" });
  const path = join(scratch, "handbook.md");
  writeFileSync(path, PARAGRAPHS.join("\n\n") + "\n");
  original = readFileSync(path);
  const doc = await client.documents.wait((await client.documents.upload(COLLECTION, path)).id, { timeoutMs: 60_000 });
  assert.ok(doc.ready, doc.statusName);
  documentId = doc.id;
});

async function keywordChunkIds(query: string): Promise<string[]> {
  return (await client.search(COLLECTION, query, { mode: "keyword" })).hits.map((h) => h.chunkId);
}

test("a document's chunks come a page at a time with every field", async () => {
  const first = await client.documents.listChunks(documentId, { pageSize: 2 });
  assert.ok(first instanceof ChunkPage);
  assert.equal(first.length, 2);
  assert.ok(first.nextPageToken);
  assert.equal(first.totalSize, PARAGRAPHS.length);
  const second = await client.documents.listChunks(documentId, { pageSize: 2, pageToken: first.nextPageToken });
  assert.deepEqual([...second].map((c) => c.chunkIndex), [2, 3]);
  const chunks = await collect(client.documents.iterChunks(documentId, { pageSize: 2 }));
  assert.deepEqual(chunks.map((c) => c.text), PARAGRAPHS);
  const chunk = chunks[0];
  assert.ok(chunk instanceof Chunk);
  assert.equal(chunk.documentId, documentId);
  assert.equal(chunk.pageNumber, 1);
  assert.equal(chunk.generation, first.generation);
  assert.ok(chunk.enabled && !chunk.edited && chunk.etag && chunk.id);
  assert.equal(chunk.characterCount, PARAGRAPHS[0].length);
  assert.ok(chunk.tokenCount > 0 && chunk.updateTime instanceof Date);
  const same = await collect(client.documents.iterChunks(documentId, { generation: first.generation }));
  assert.deepEqual(same.map((c) => c.id), chunks.map((c) => c.id));
  await assert.rejects(client.documents.listChunks(documentId, { generation: first.generation + 40 }), NotFound);
  await assert.rejects(client.documents.listChunks("00000000-0000-4000-8000-000000000000"), NotFound);
});

test("a disabled chunk leaves search, a stale etag is refused, an enabled one comes back", async () => {
  const quokka = (await collect(client.documents.iterChunks(documentId))).find((c) => c.text.startsWith("Quokkas"))!;
  assert.deepEqual(await keywordChunkIds("quokkas"), [quokka.id]);
  const disabled = await client.documents.disableChunk(quokka.id, { etag: quokka.etag });
  assert.ok(!disabled.enabled && disabled.etag !== quokka.etag);
  assert.deepEqual(await keywordChunkIds("quokkas"), []);
  await assert.rejects(client.documents.enableChunk(quokka.id, { etag: quokka.etag }),
    (e: unknown) => e instanceof Aborted && e.reason === "CHUNK_CHANGED");
  assert.deepEqual(await keywordChunkIds("quokkas"), []);
  assert.ok((await client.documents.enableChunk(quokka.id, { etag: disabled.etag })).enabled);
  assert.deepEqual(await keywordChunkIds("quokkas"), [quokka.id]);
});

test("an edited chunk is searched by its new text and keeps the parser's", async () => {
  const webhooks = (await client.documents.listChunks(documentId)).chunks[3];
  const edited = await client.documents.editChunk(webhooks.id, "Webhooks carry an HMAC signature of the platypus payload.");
  assert.ok(edited.edited);
  assert.equal(edited.originalText, PARAGRAPHS[3]);
  assert.deepEqual(await keywordChunkIds("platypus"), [webhooks.id]);
  await assert.rejects(client.documents.editChunk(webhooks.id, "   "), InvalidArgument);
  await assert.rejects(client.documents.editChunk(webhooks.id, "other", { etag: webhooks.etag }), Aborted);
  await assert.rejects(client.documents.disableChunk("999999999"), NotFound);
  await assert.rejects(client.documents.disableChunk(""), TypeError);
});

test("the original bytes come back checked, to memory, a path or a folder", async () => {
  assert.deepEqual(Buffer.from(await client.documents.download(documentId)), original);
  const written = await client.documents.download(documentId, join(scratch, "copy.md"));
  assert.deepEqual(readFileSync(written.path), original);
  assert.equal(written.filename, "handbook.md");
  assert.equal(written.mimeType, "text/markdown");
  assert.equal(written.sizeBytes, BigInt(original.length));
  assert.equal(written.contentSha256, createHash("sha256").update(original).digest("hex"));
  const folder = join(scratch, "into");
  mkdirSync(folder);
  assert.equal((await client.documents.download(documentId, folder)).path, join(folder, "handbook.md"));
  await assert.rejects(client.documents.download("00000000-0000-4000-8000-000000000000", join(scratch, "none.md")), NotFound);
  await assert.rejects(client.documents.download(documentId, join(scratch, "no-such-folder", "x.md")), { code: "ENOENT" });
  assert.deepEqual(readdirSync(folder), ["handbook.md"]);
  assert.ok(!readdirSync(scratch).includes("none.md"));
});

test("an explanation says which lists a hit was in, undefined where it was not", async () => {
  const plain = await client.search(COLLECTION, "quokkas marsupials");
  assert.equal(plain.hits[0].explanation, undefined);
  const keyword = await client.search(COLLECTION, "quokkas", { mode: "keyword", explain: true });
  const e = keyword.hits[0].explanation!;
  assert.ok(e instanceof HitExplanation);
  assert.equal(e.keywordRank, 1);
  assert.ok(e.keywordScore !== undefined && e.keywordScore > 0);
  assert.equal(e.vectorSimilarity, undefined);
  assert.equal(e.vectorRank, undefined);
  assert.equal(e.firstStageRank, 1);
  assert.equal(e.rerankStatus, "UNSPECIFIED");
  assert.ok(e.matchedTerms.length > 0);
  const hybrid = await client.search(COLLECTION, "quokkas marsupials", { explain: true });
  assert.deepEqual(hybrid.hits.map((h) => h.chunkId), plain.hits.map((h) => h.chunkId)); // explaining changes no order
  assert.ok(hybrid.hits[0].explanation!.vectorRank !== undefined && hybrid.hits[0].explanation!.vectorWeight !== undefined);
  const generation = (await client.documents.listChunks(documentId)).generation;
  assert.equal((await client.search(COLLECTION, "quokkas", { generation })).generation, generation);
  await assert.rejects(client.search(COLLECTION, "quokkas", { generation: generation + 40 }), NotFound);
});

// ------------------------------------------------------------------ the download's own checks

const CONTENT = Buffer.from("the original bytes of report.txt\n".repeat(100));

function header(fields: Partial<{ sizeBytes: bigint; contentSha256: string }> = {}) {
  return create(DownloadDocumentResponseSchema, { payload: { case: "header", value: create(DownloadDocumentHeaderSchema, {
    filename: "report.txt", mimeType: "text/plain", sizeBytes: BigInt(CONTENT.length),
    contentSha256: createHash("sha256").update(CONTENT).digest("hex"), ...fields,
  }) } });
}

function data(bytes: Uint8Array) {
  return create(DownloadDocumentResponseSchema, { payload: { case: "data", value: bytes } });
}

test("the Receiver keeps bytes that check out and refuses others, leaving no file", async () => {
  const good = new Receiver("d1", new MemorySink());
  for (const message of [header(), data(CONTENT.subarray(0, 1000)), data(CONTENT.subarray(1000))]) await good.take(message);
  assert.equal((await good.finish()).sizeBytes, BigInt(CONTENT.length));

  const folder = join(scratch, "refused");
  mkdirSync(folder);
  writeFileSync(join(folder, "report.txt"), "what was there before");
  const cases: [string, ReturnType<typeof header>[]][] = [
    ["CHECKSUM_MISMATCH", [header({ contentSha256: "0".repeat(64) }), data(CONTENT)]],
    ["SIZE_MISMATCH", [header(), data(CONTENT.subarray(1))]],
    ["SIZE_MISMATCH", [header({ sizeBytes: BigInt(CONTENT.length - 1) }), data(CONTENT)]],
    ["DOWNLOAD_MALFORMED", [data(CONTENT)]],
    ["DOWNLOAD_MALFORMED", [header(), header()]],
    ["DOWNLOAD_MALFORMED", []],
  ];
  for (const [reason, messages] of cases) {
    const sink = new PathSink(folder);
    const receiver = new Receiver("d1", sink);
    await assert.rejects(async () => {
      try {
        for (const message of messages) await receiver.take(message);
        await receiver.finish();
      } catch (error) {
        await sink.discard();
        throw error;
      }
    }, (e: unknown) => e instanceof DownloadError && e.reason === reason && e.code === undefined);
  }
  assert.deepEqual(readdirSync(folder), ["report.txt"]);
  assert.equal(readFileSync(join(folder, "report.txt"), "utf8"), "what was there before");
  assert.equal(safeFilename("../../etc/passwd", "d1"), "passwd");
  assert.equal(safeFilename("..", "d1"), "d1");
});
