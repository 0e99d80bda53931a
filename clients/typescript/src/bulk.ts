/**
 * Bulk work, as the Python SDK does it (docs/clients.md, "Folders and bulk uploads"):
 * `documents.uploadMany` (sources `concurrency` at a time, each result as it finishes),
 * `documents.uploadFolder` (files and folders, recursively, hidden files skipped, then every
 * document followed to READY or FAILED through one WatchCollection stream), and the
 * `DocumentTracker` behind it. Each upload retries as any call does (retry.ts): rate limits by
 * their RetryInfo, full upload slots (TOO_MANY_UPLOADS) by the wait the server names, a lost
 * server with backoff; a source that still fails is a result with `error`, and the others go on.
 */
import { readdir, stat } from "node:fs/promises";
import { join, resolve } from "node:path";

import { clone } from "@bufbuild/protobuf";

import { SluiceError, UploadSourceError, WaitTimeout } from "./errors.js";
import { DocumentSchema } from "./gen/sluice/v1/document_pb.js";
import { Document } from "./types.js";
import type { MetadataInput } from "./filters.js";
import type { Source, UploadOptions } from "./uploads.js";

/** What bulk uploads need of a client (client.ts's Documents and Collections). */
export interface BulkClient {
  upload(collection: string, source: Source, options?: UploadOptions): Promise<Document>;
  get(id: string, options?: { timeoutMs?: number }): Promise<Document>;
  watchCollection(collection: string): AsyncIterable<{ kind: string; document: Document | undefined }> & { close(): void };
  /** The collection's documents, a page at a time (a tracker's refresh of many documents). */
  list?(collection: string): AsyncIterable<Document>;
}

/** One source of a bulk upload: its document, or the error that stopped it. */
export class UploadResult {
  constructor(readonly source: Source, readonly document?: Document, readonly error?: SluiceError) {}

  get ok(): boolean {
    return this.error === undefined;
  }

  /** The same source, with the newest state of its document. */
  withDocument(document: Document): UploadResult {
    return new UploadResult(this.source, document, this.error);
  }
}

export interface UploadManyOptions {
  /** Uploads at once (4). */
  concurrency?: number;
  metadata?: Record<string, string>;
  typedMetadata?: Record<string, MetadataInput>;
  /** Hears of each source as its upload starts. */
  onStart?: (source: Source) => void;
  /** Names each upload's document in its source (a new version when its content changed). */
  sourceUriOf?: (source: Source) => string | undefined;
}

export interface UploadFolderOptions extends UploadManyOptions {
  /** Follow every document to READY or FAILED (true). */
  wait?: boolean;
  /** Stop waiting after this long (ms); the documents still processing are returned as they are. */
  timeoutMs?: number;
  /** Hears of every change of an uploaded document while it is followed. */
  onChange?: (document: Document) => void;
  /** Take hidden files and folders under the named folders too (false). */
  includeHidden?: boolean;
}

function asSluiceError(reason: unknown): SluiceError {
  if (reason instanceof SluiceError) return reason;
  const message = reason instanceof Error ? reason.message : String(reason);
  return new UploadSourceError(message, { reason: "SOURCE_UNREADABLE", cause: reason });
}

/** Upload `sources` `concurrency` at a time; yields each result as it finishes (not in order).
 * Stop iterating to stop early: the uploads not yet started are not started. */
export async function* uploadMany(client: BulkClient, collection: string, sources: Iterable<Source>,
  options: UploadManyOptions = {}): AsyncGenerator<UploadResult> {
  const queue = [...sources];
  const limit = Math.max(1, Math.min(options.concurrency ?? 4, queue.length));
  const running = new Map<number, Promise<[number, UploadResult]>>();
  let next = 0;
  const start = (index: number): void => {
    const source = queue[index];
    options.onStart?.(source);
    const upload = client.upload(collection, source, {
      metadata: options.metadata, typedMetadata: options.typedMetadata, sourceUri: options.sourceUriOf?.(source),
    });
    running.set(index, upload.then(
      (document): [number, UploadResult] => [index, new UploadResult(source, document)],
      (reason): [number, UploadResult] => [index, new UploadResult(source, undefined, asSluiceError(reason))],
    ));
  };
  while (next < queue.length && running.size < limit) start(next++);
  while (running.size > 0) {
    const [index, result] = await Promise.race(running.values());
    running.delete(index);
    if (next < queue.length) start(next++);
    yield result;
  }
}

/** Files named directly (hidden or not), and every non-hidden file under named folders, each
 * folder's in name order. A path that does not exist is an UploadSourceError naming it. */
export async function findFiles(paths: string[], includeHidden = false): Promise<string[]> {
  const found: string[] = [];
  const missing: string[] = [];
  const walk = async (folder: string): Promise<void> => {
    const entries = (await readdir(folder, { withFileTypes: true })).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const entry of entries) {
      if (!includeHidden && entry.name.startsWith(".")) continue;
      const path = join(folder, entry.name);
      if (entry.isDirectory()) await walk(path);
      else if (entry.isFile()) found.push(path);
    }
  };
  for (const path of paths) {
    const info = await stat(path).catch(() => undefined);
    if (info === undefined) missing.push(path);
    else if (info.isDirectory()) await walk(resolve(path));
    else found.push(resolve(path));
  }
  if (missing.length > 0) {
    throw new UploadSourceError(`no such file or folder: ${missing.join(", ")}`, { reason: "FILE_NOT_FOUND" });
  }
  return found;
}

/** The newer of two states of a document. A collection event carries only what changes while a
 * document is processed (no createTime, sourceUri, version, SHA-256, size, metadata): laid over a
 * full state (an upload's answer, a GetDocument), it keeps the full state's other fields. */
function later(known: Document | undefined, other: Document): Document {
  if (known === undefined) return other;
  const [newer, older] = known.updateTime && other.updateTime && other.updateTime < known.updateTime ? [known, other] : [other, known];
  if (newer.createTime !== undefined || older.createTime === undefined) return newer;
  const merged = clone(DocumentSchema, older.raw);
  const event = newer.raw;
  Object.assign(merged, {
    status: event.status, errorMessage: event.errorMessage, errorCode: event.errorCode, progress: event.progress,
    attempts: event.attempts, maxAttempts: event.maxAttempts, chunkCount: event.chunkCount, jobStatus: event.jobStatus,
    updateTime: event.updateTime, consistencyToken: event.consistencyToken || merged.consistencyToken,
  });
  return new Document(merged);
}

/**
 * Follows many documents of one collection to READY or FAILED through one WatchCollection stream,
 * so a bulk job costs one call however many documents it waits for. Start it before uploading so
 * that no event is missed, `track()` each uploaded document, then `wait()`. The stream resumes
 * after its cursor when the connection drops (CollectionWatch); when nothing has moved for a
 * while, or the stream failed for good, each document still processing is read once (GetDocument).
 */
export class DocumentTracker {
  static QUIET_RECHECK_MS = 60_000;
  static REFRESH_BY_GET = 100;
  private readonly states = new Map<string, Document>(); // every document seen, tracked or not yet
  private readonly tracked = new Set<string>();
  private readonly deleted = new Set<string>(); // deleted while followed: nothing more will happen to them
  private watch: (AsyncIterable<{ kind: string; document: Document | undefined }> & { close(): void }) | undefined;
  private following: Promise<void> | undefined;
  private failed: SluiceError | undefined;
  private lastChange = performance.now();
  private wake: (() => void) | undefined;

  constructor(private readonly client: BulkClient, readonly collection: string,
    private readonly onChange?: (document: Document) => void) {}

  /** Open the stream; resolves once the server has confirmed where it starts (its first heartbeat). */
  async start(): Promise<this> {
    if (this.watch !== undefined) return this;
    const watch = this.client.watchCollection(this.collection);
    this.watch = watch;
    let opened!: () => void;
    let refused!: (error: SluiceError) => void;
    const confirmed = new Promise<void>((resolveOpened, reject) => { opened = resolveOpened; refused = reject; });
    this.following = (async () => {
      try {
        for await (const event of watch) {
          opened();
          if (event.document === undefined) continue; // a heartbeat
          if (event.kind === "DELETED") this.deleted.add(event.document.id);
          this.apply(event.document);
        }
      } catch (reason) {
        this.failed = asSluiceError(reason);
        refused(this.failed);
        this.notify();
      }
    })();
    await confirmed;
    return this;
  }

  private apply(document: Document): void {
    const known = this.states.get(document.id);
    const state = later(known, document);
    if (state === known) return;
    this.states.set(document.id, state);
    if (this.tracked.has(document.id) || this.deleted.has(document.id)) {
      this.lastChange = performance.now();
      this.onChange?.(state);
      this.notify();
    }
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  /** Follow this document too; returns its newest known state. */
  track(document: Document): Document {
    this.tracked.add(document.id);
    const state = later(this.states.get(document.id), document);
    this.states.set(document.id, state);
    return state;
  }

  /** Read each tracked document still processing once: for documents that may have changed before
   * the stream opened (their events are not replayed). Up to REFRESH_BY_GET of them by GetDocument,
   * `concurrency` at a time; more by one listing of the collection (a call per 1,000 documents). */
  async refresh(concurrency = 8): Promise<void> {
    const pending = this.documents.filter((d) => !d.done && !this.deleted.has(d.id));
    if (pending.length > DocumentTracker.REFRESH_BY_GET && this.client.list !== undefined) {
      for await (const document of this.client.list(this.collection)) {
        if (this.tracked.has(document.id)) this.apply(document);
      }
      return;
    }
    let next = 0;
    const reader = async (): Promise<void> => {
      while (next < pending.length) this.apply(await this.client.get(pending[next++].id));
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, pending.length) }, reader));
  }

  /** The tracked documents' newest states, in the order they were tracked. */
  get documents(): Document[] {
    return [...this.tracked].map((id) => this.states.get(id)!);
  }

  /** Every tracked document once READY or FAILED; WaitTimeout after `timeoutMs` (its
   * `documents` hold their states then). */
  async wait(timeoutMs?: number): Promise<Document[]> {
    const deadline = timeoutMs === undefined ? undefined : performance.now() + timeoutMs;
    for (;;) {
      const pending = this.documents.filter((d) => !d.done && !this.deleted.has(d.id));
      if (pending.length === 0) return this.documents;
      const remaining = deadline === undefined ? Infinity : deadline - performance.now();
      if (remaining <= 0) {
        throw new WaitTimeout(`timed out waiting for ${pending.length} document(s) (still processing on the server)`,
          { documents: this.documents });
      }
      if (this.failed !== undefined || performance.now() - this.lastChange > DocumentTracker.QUIET_RECHECK_MS) {
        this.lastChange = performance.now();
        for (const document of pending) this.apply(await this.client.get(document.id));
        if (this.failed !== undefined) await new Promise((r) => setTimeout(r, Math.min(1000, remaining)));
        continue;
      }
      await new Promise<void>((resolveWait) => {
        const timer = setTimeout(() => { this.wake = undefined; resolveWait(); }, Math.min(1000, remaining));
        this.wake = () => { clearTimeout(timer); resolveWait(); };
      });
    }
  }

  /** As wait, but a timeout answers with the states reached by then instead of throwing (a
   * folder upload or sync reports what is still processing rather than failing). */
  async settle(timeoutMs?: number): Promise<Document[]> {
    try {
      return await this.wait(timeoutMs);
    } catch (error) {
      if (!(error instanceof WaitTimeout)) throw error;
      return error.documents as Document[];
    }
  }

  close(): void {
    this.watch?.close();
  }
}

/** Upload files and folders, then (with `wait`) follow every document through one tracker;
 * results in file order. */
export async function uploadFolder(client: BulkClient, collection: string, paths: string[],
  options: UploadFolderOptions = {}): Promise<UploadResult[]> {
  const files = await findFiles(paths, options.includeHidden);
  const results = new Map<Source, UploadResult>();
  const tracker = options.wait === false ? undefined : new DocumentTracker(client, collection, options.onChange);
  try {
    await tracker?.start();
    for await (const result of uploadMany(client, collection, files, options)) {
      results.set(result.source, tracker && result.document ? result.withDocument(tracker.track(result.document)) : result);
    }
    if (tracker !== undefined) {
      const final = await tracker.settle(options.timeoutMs);
      const byId = new Map(final.map((d) => [d.id, d]));
      for (const [source, result] of results) {
        if (result.document) results.set(source, result.withDocument(byId.get(result.document.id) ?? result.document));
      }
    }
  } finally {
    tracker?.close();
  }
  return files.map((file) => results.get(file)!);
}
