/**
 * What an upload sends: the metadata (with size, SHA-256 and a request_id), the bytes, the trailer
 * (docs/architecture.md#the-public-contract; framed exactly as the Python SDK's uploads.py).
 *
 * A source is a path or bytes (Buffer, Uint8Array). It is hashed before the first message so that
 * the metadata can announce its size and SHA-256 (the server refuses a mismatch before storing
 * anything), and hashed again as it is streamed in 1 MiB pieces: a source that changed in between
 * gets no trailer, so the server stores nothing. The request_id is stable for (collection, file,
 * content), so a retried upload, or the same file uploaded again, returns the same document.
 */
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { open } from "node:fs/promises";
import { basename, extname, resolve } from "node:path";

import { create, type MessageInitShape } from "@bufbuild/protobuf";

import { UploadSourceError } from "./errors.js";
import { MEDIA_TYPES } from "./media_types.js";
import { metadataValue, type MetadataInput } from "./filters.js";
import {
  UploadDocumentMetadataSchema,
  UploadDocumentRequestSchema,
  UploadDocumentTrailerSchema,
  type UploadDocumentMetadata,
} from "./gen/sluice/v1/document_service_pb.js";

/** Bytes per upload message. */
export const CHUNK_BYTES = 1024 * 1024;

/** What `documents.upload` takes: a path, or the bytes themselves. */
export type Source = string | Uint8Array;


/** The media type of a file name, from the one table ingest-api reads too (media_types.ts, generated);
 * "" when the table has none: the server then detects it. */
export function guessMimeType(name: string): string {
  return MEDIA_TYPES[extname(name).toLowerCase()] ?? "";
}

/** Stable per (collection, file, content): the same upload again is the same request, and a changed
 * file a new one. `identity` is the file's absolute path, or its name for bytes. */
export function requestId(collection: string, identity: string, sha256: string, prefix = "ts-"): string {
  return prefix + createHash("sha256").update([collection, identity, sha256].join("\0"), "utf8").digest("hex").slice(0, 40);
}

type UploadRequestInit = MessageInitShape<typeof UploadDocumentRequestSchema>;

/** A source ready to send: its name, size and SHA-256, and how to read it again for a retry. */
export class PreparedUpload {
  /** Why our side abandoned the stream (the source changed or could not be read), if it did. */
  readonly readFailure: string[] = [];

  constructor(
    readonly filename: string,
    readonly size: number,
    readonly sha256: string,
    readonly identity: string,
    private readonly read: () => AsyncIterable<Uint8Array>,
    readonly path?: string,
  ) {}

  /** The stream of one attempt: metadata, the bytes (hashed as they go), then the trailer only if
   * they are still the bytes announced. */
  async *messages(metadata: UploadDocumentMetadata): AsyncGenerator<UploadRequestInit> {
    yield { payload: { case: "metadata", value: metadata } };
    const digest = createHash("sha256");
    let sent = 0;
    const blocks = this.read()[Symbol.asyncIterator]();
    try {
      for (;;) {
        let next: IteratorResult<Uint8Array>;
        try {
          next = await blocks.next();
        } catch (error) {
          // the file went away or became unreadable: abandon the stream (no trailer, nothing stored)
          this.readFailure.push(`cannot read ${this.path ?? "the source"}: ${(error as NodeJS.ErrnoException).code ?? error}`);
          throw error;
        }
        if (next.done) break;
        digest.update(next.value);
        sent += next.value.length;
        // It grew since it was hashed: say so below, before the extra bytes go out (else the
        // server's SIZE_MISMATCH may answer first, a race).
        if (sent > this.size) break;
        // What the transport throws in here (the server refused the stream midway, say
        // TOO_MANY_UPLOADS) is not a read failure: it goes to the call, which may retry.
        yield { payload: { case: "data", value: next.value } };
      }
    } finally {
      await blocks.return?.();
    }
    const hex = digest.digest("hex");
    if (sent !== this.size || hex !== this.sha256) {
      this.readFailure.push(`${this.path ?? this.filename} changed while it was being uploaded; nothing was stored, ` +
        "upload it again");
      throw new UploadSourceError(this.readFailure[this.readFailure.length - 1], { reason: "SOURCE_CHANGED" });
    }
    yield { payload: { case: "trailer", value: create(UploadDocumentTrailerSchema, { sizeBytes: BigInt(sent), sha256: hex }) } };
  }
}

/** Hash a source once (size and SHA-256) and remember how to read it again. Bytes are hashed before
 * this function first awaits, so the promise it returns already describes them.
 * UploadSourceError (reason SOURCE_UNREADABLE, SOURCE_EMPTY) when it cannot be sent. */
export async function prepare(source: Source, filename?: string): Promise<PreparedUpload> {
  let prepared: PreparedUpload;
  if (source instanceof Uint8Array) {
    const name = filename || "document";
    const sha256 = createHash("sha256").update(source).digest("hex");
    prepared = new PreparedUpload(name, source.length, sha256, name, () => pieces(source));
  } else if (typeof source === "string") {
    const path = source;
    const digest = createHash("sha256");
    let size = 0;
    try {
      const handle = await open(path, "r");
      try {
        for await (const block of handle.createReadStream({ highWaterMark: CHUNK_BYTES, autoClose: false })) {
          digest.update(block as Buffer);
          size += (block as Buffer).length;
        }
      } finally {
        await handle.close();
      }
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      const why = code === "EISDIR" ? "is a directory" : code === "ENOENT" ? "no such file" : String(code ?? error);
      throw new UploadSourceError(`cannot read ${path}: ${why}`, { reason: "SOURCE_UNREADABLE" });
    }
    prepared = new PreparedUpload(filename || basename(path), size, digest.digest("hex"), resolve(path),
      () => createReadStream(path, { highWaterMark: CHUNK_BYTES }), path);
  } else {
    throw new TypeError("cannot upload this: give a path or the bytes (a Buffer or Uint8Array)");
  }
  if (prepared.size === 0) {
    throw new UploadSourceError(`${prepared.path ?? prepared.filename} is empty: nothing to index`, { reason: "SOURCE_EMPTY" });
  }
  return prepared;
}

async function* pieces(data: Uint8Array): AsyncGenerator<Uint8Array> {
  for (let start = 0; start < data.length; start += CHUNK_BYTES) {
    yield data.slice(start, start + CHUNK_BYTES);
  }
}

export interface UploadOptions {
  /** The file name to store (default: the path's name, or "document" for bytes). */
  filename?: string;
  /** The media type (default: from the file name's extension; "" lets the server detect it). */
  mimeType?: string;
  /** String metadata. */
  metadata?: Record<string, string>;
  /** Metadata that keeps its type: numbers, booleans, Dates, lists of strings. */
  typedMetadata?: Record<string, MetadataInput>;
  /** The idempotency key (default: stable for collection, file, content and sourceUri). */
  requestId?: string;
  /** The path or URL naming the document in its source: new content for a sourceUri the
   * collection holds becomes a new version, swapped in when READY (docs/architecture.md,
   * "Document versions"); the same content again is not a new version. */
  sourceUri?: string;
  /** The deadline of the upload, retries included (default: at least 60 s, and a second per MiB). */
  timeoutMs?: number;
}

export function metadataMessage(collection: string, prepared: PreparedUpload, options: UploadOptions,
  requestIdValue: string): UploadDocumentMetadata {
  return create(UploadDocumentMetadataSchema, {
    collection,
    filename: prepared.filename,
    mimeType: options.mimeType ?? guessMimeType(prepared.filename),
    metadata: { ...(options.metadata ?? {}) },
    typedMetadata: Object.fromEntries(Object.entries(options.typedMetadata ?? {}).map(([k, v]) => [k, metadataValue(v)])),
    requestId: requestIdValue,
    sourceUri: options.sourceUri ?? "",
    expectedSizeBytes: BigInt(prepared.size),
    expectedSha256: prepared.sha256,
  });
}
