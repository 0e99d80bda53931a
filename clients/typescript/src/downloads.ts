/**
 * Downloads: DownloadDocument's stream (a header, then the bytes) kept in memory or written to a
 * path, checked against the header's size and SHA-256 before it counts as done (the Python SDK's
 * downloads.py). A path is written to a temporary file beside it and renamed into place only once
 * the bytes check out, so a download that fails (or is retried) never leaves a partial file under
 * the name asked for.
 */
import { createHash, type Hash } from "node:crypto";
import { constants } from "node:fs";
import { open, rename, rm, stat, type FileHandle } from "node:fs/promises";
import { basename, dirname, join } from "node:path";

import { DownloadError } from "./errors.js";
import type { DownloadDocumentHeader, DownloadDocumentResponse } from "./gen/sluice/v1/document_service_pb.js";
import type { DownloadedDocument } from "./types.js";

const MIB = 1024 * 1024;
/** Without `timeoutMs`, the header must come within the client's timeout, then the bytes within this
 * long at least, plus a second per MiB the header announces (as an upload's deadline). */
export const MIN_TRANSFER_MS = 60_000;

export function transferMs(sizeBytes: bigint): number {
  return Math.max(MIN_TRANSFER_MS, (Number(sizeBytes) / MIB) * 1000);
}

/** The document's file name as a name in a folder (no path parts), or its id when it has none. */
export function safeFilename(filename: string, documentId: string): string {
  const name = basename(filename.replaceAll("\\", "/"));
  return name === "" || name === "." || name === ".." ? documentId : name;
}

/** Where the bytes go: memory (`bytes()`), or a file renamed into place at `commit()`. */
interface Sink {
  open(header: DownloadDocumentHeader, documentId: string): Promise<void>;
  write(data: Uint8Array): Promise<void>;
  commit(): Promise<string | undefined>;
  discard(): Promise<void>;
}

export class MemorySink implements Sink {
  private pieces: Uint8Array[] = [];

  async open(): Promise<void> {
    this.pieces = [];
  }

  async write(data: Uint8Array): Promise<void> {
    this.pieces.push(data);
  }

  async commit(): Promise<undefined> {
    return undefined;
  }

  async discard(): Promise<void> {
    this.pieces = [];
  }

  bytes(): Uint8Array {
    return Buffer.concat(this.pieces);
  }
}

export class PathSink implements Sink {
  private file: FileHandle | undefined;
  private temporary: string | undefined;
  private target: string | undefined;

  constructor(private readonly requested: string) {}

  async open(header: DownloadDocumentHeader, documentId: string): Promise<void> {
    await this.discard();
    let target = this.requested;
    const found = await stat(target).catch(() => undefined);
    if (found?.isDirectory()) target = join(target, safeFilename(header.filename, documentId));
    this.target = target;
    const suffix = `${process.pid}.${Date.now().toString(36)}.${Math.random().toString(36).slice(2, 8)}`;
    this.temporary = join(dirname(target), `.${basename(target)}.${suffix}.part`);
    this.file = await open(this.temporary, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o644);
  }

  async write(data: Uint8Array): Promise<void> {
    await this.file!.write(data);
  }

  async commit(): Promise<string> {
    await this.file!.close();
    this.file = undefined;
    await rename(this.temporary!, this.target!);
    this.temporary = undefined;
    return this.target!;
  }

  async discard(): Promise<void> {
    const file = this.file;
    this.file = undefined;
    await file?.close().catch(() => undefined);
    if (this.temporary !== undefined) await rm(this.temporary, { force: true });
    this.temporary = undefined;
  }
}

/** One attempt's messages: the header first, then the bytes, counted and hashed as written. */
export class Receiver {
  header: DownloadDocumentHeader | undefined;
  received = 0n;
  private readonly sha256: Hash = createHash("sha256");

  constructor(private readonly documentId: string, readonly sink: Sink) {}

  async take(message: DownloadDocumentResponse): Promise<void> {
    const payload = message.payload;
    if (payload.case === "header") {
      if (this.header !== undefined) {
        throw new DownloadError(`the download of ${this.documentId} sent a second header`, { reason: "DOWNLOAD_MALFORMED" });
      }
      this.header = payload.value;
      await this.sink.open(payload.value, this.documentId);
    } else if (payload.case === "data") {
      if (this.header === undefined) {
        throw new DownloadError(`the download of ${this.documentId} sent bytes before its header`, { reason: "DOWNLOAD_MALFORMED" });
      }
      await this.sink.write(payload.value);
      this.received += BigInt(payload.value.length);
      this.sha256.update(payload.value);
    }
  }

  /** Check what arrived against the header; make it visible when it is the same. */
  async finish(): Promise<Omit<DownloadedDocument, "path"> & { path: string | undefined }> {
    const header = this.header;
    if (header === undefined) {
      throw new DownloadError(`the download of ${this.documentId} ended without a header`, { reason: "DOWNLOAD_MALFORMED" });
    }
    const name = header.filename || this.documentId;
    if (this.received !== header.sizeBytes) {
      throw new DownloadError(`${name}: received ${this.received} bytes, the server announced ${header.sizeBytes}`,
        { reason: "SIZE_MISMATCH" });
    }
    const digest = this.sha256.digest("hex");
    if (header.contentSha256 && digest !== header.contentSha256.toLowerCase()) {
      throw new DownloadError(`${name}: the bytes received have SHA-256 ${digest}, the server announced ${header.contentSha256}`,
        { reason: "CHECKSUM_MISMATCH" });
    }
    const path = await this.sink.commit();
    return { filename: header.filename, mimeType: header.mimeType, sizeBytes: header.sizeBytes, contentSha256: digest, path,
      raw: header };
  }
}
