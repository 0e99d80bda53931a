/**
 * A one-off sync of a local folder into a collection: the plan (what to upload, what is unchanged,
 * what to delete) and the report (`documents.syncFolder`; the Python SDK's sync.py, rule for rule;
 * docs/clients.md, "Keeping a collection in step with a folder").
 *
 * Each file is named in its source by its path relative to the folder ("notes/a.md", as the Python
 * SDK and `sluice upload --source-uri-from-path` name it), and compared with the live versions of
 * that sourceUri in one listing of the collection: the same SHA-256 as its newest live version is
 * unchanged and not sent at all; other content is uploaded and becomes a new version, swapped in at
 * its READY commit (docs/architecture.md#document-versions). Sources of the collection with no file
 * any more are deleted only when asked, and never more than a set share of the collection's sources
 * unless allowed. Documents without a sourceUri are never compared nor deleted.
 */
import { relative, resolve, sep } from "node:path";
import { stat } from "node:fs/promises";

import { DocumentTracker, findFiles, uploadMany, type BulkClient, type UploadResult } from "./bulk.js";
import { MassDeleteRefused, NotFound, SluiceError, UploadSourceError } from "./errors.js";
import { Document } from "./types.js";
import { prepare, type Source } from "./uploads.js";

export const DEFAULT_MAX_DELETE_SHARE = 0.2;
/** So many deletions are never a mass deletion, whatever the share (unless they are every source):
 * in a small collection one removed file is already a large share. */
export const MASS_DELETE_FLOOR = 3;

/** A file to send: new (its sourceUri has no live version) or changed. */
export interface SyncUpload {
  sourceUri: string;
  path: string;
  isNew: boolean;
}

/** A file or source the sync could not bring up to date, and why. */
export interface SyncFailure {
  sourceUri: string;
  error: string;
  path?: string;
  document?: Document;
}

/** What a sync will do, decided from the folder and one listing of the collection. */
export interface SyncPlan {
  uploads: SyncUpload[];
  unchanged: string[];
  failed: SyncFailure[];
  /** Sources of the collection with no file any more: deleted with `delete`, else kept. */
  gone: string[];
  /** Distinct sourceUris in the collection. */
  sources: number;
}

/** What a sync did. `new` and `updated` hold the uploaded documents (READY once waited for; one that
 * FAILED or was still processing at the timeout is in `failed` instead); `deleted` and `unchanged`
 * the sourceUris; `kept` the sources with no file that were not deleted (no `delete`). */
export class SyncReport {
  readonly new: Document[] = [];
  readonly updated: Document[] = [];
  readonly deleted: string[] = [];
  kept: string[] = [];

  constructor(readonly collection: string, readonly folder: string, readonly unchanged: string[], readonly failed: SyncFailure[],
    readonly waited: boolean) {}

  get ok(): boolean {
    return this.failed.length === 0;
  }

  get counts(): { new: number; updated: number; unchanged: number; deleted: number; failed: number } {
    return { new: this.new.length, updated: this.updated.length, unchanged: this.unchanged.length, deleted: this.deleted.length,
      failed: this.failed.length };
  }
}

/** How a file under `folder` is named in its source: its relative path with "/" between parts. */
export function sourceUriOf(path: string, folder: string): string {
  return relative(resolve(folder), resolve(path)).split(sep).join("/");
}

/** The folder's files by sourceUri (hidden ones skipped unless `includeHidden`). UploadSourceError
 * (FILE_NOT_FOUND, NOT_A_FOLDER) when it is not a folder. */
export async function folderFiles(folder: string, includeHidden = false): Promise<Map<string, string>> {
  const info = await stat(folder).catch(() => undefined);
  if (info === undefined) throw new UploadSourceError(`no such folder: ${folder}`, { reason: "FILE_NOT_FOUND" });
  if (!info.isDirectory()) throw new UploadSourceError(`not a folder: ${folder}`, { reason: "NOT_A_FOLDER" });
  const files = await findFiles([folder], includeHidden);
  return new Map(files.map((path) => [sourceUriOf(path, folder), path]));
}

/** [sha256, ""] or ["", why it cannot be read or sent]. */
export async function hashFile(path: string): Promise<[string, string]> {
  try {
    return [(await prepare(path)).sha256, ""];
  } catch (error) {
    return ["", error instanceof SluiceError ? error.message : String(error)];
  }
}

/** Compare the folder (`hashes`: sourceUri to [sha256, error]) with the collection's live
 * documents. Per source, the newest live version is the one it will serve (the pending or failed
 * next one, else the current one): the same bytes are unchanged (or a failure, when that version
 * FAILED: a retry or new content fixes it); other bytes are uploaded, the current version's bytes
 * too when a different next version is live, so that the server supersedes it (the source went back). */
export function plan(files: Map<string, string>, hashes: Map<string, [string, string]>, listed: Iterable<Document>): SyncPlan {
  const versions = new Map<string, Document[]>();
  for (const document of listed) {
    if (!document.sourceUri) continue; // plain uploads are not the folder's
    const known = versions.get(document.sourceUri);
    if (known) known.push(document);
    else versions.set(document.sourceUri, [document]);
  }
  const result: SyncPlan = { uploads: [], unchanged: [], failed: [], gone: [], sources: versions.size };
  for (const [sourceUri, path] of files) {
    const [sha256, error] = hashes.get(sourceUri) ?? ["", "not hashed"];
    if (error) {
      result.failed.push({ sourceUri, error, path });
      continue;
    }
    const live = versions.get(sourceUri) ?? [];
    const newest = live.reduce<Document | undefined>((best, d) => (best === undefined || d.version > best.version ? d : best), undefined);
    if (newest === undefined) {
      result.uploads.push({ sourceUri, path, isNew: true });
    } else if (newest.contentSha256 !== sha256) {
      result.uploads.push({ sourceUri, path, isNew: false });
    } else if (newest.failed) {
      const message = newest.errorMessage || "processing failed";
      result.failed.push({ sourceUri, error: `${message} (unchanged since it failed: retry it, or change the file)`, path, document: newest });
    } else {
      result.unchanged.push(sourceUri);
    }
  }
  result.gone = [...versions.keys()].filter((uri) => !files.has(uri)).sort();
  return result;
}

/** MassDeleteRefused when deleting the gone sources would remove every source of the collection,
 * or more than `maxDeleteShare` of them and more than MASS_DELETE_FLOOR: a folder that lost most of
 * its files (an unmounted disk, the wrong path) must not empty the collection without being asked
 * to, while removing a file or two from a small folder needs no flag. */
export function checkMassDelete(collection: string, syncPlan: SyncPlan, maxDeleteShare: number): void {
  const wouldDelete = syncPlan.gone.length;
  const { sources } = syncPlan;
  if (wouldDelete && (wouldDelete === sources || (wouldDelete > maxDeleteShare * sources && wouldDelete > MASS_DELETE_FLOOR))) {
    const pct = (share: number): string => `${Math.round(share * 100)}%`;
    throw new MassDeleteRefused(
      `refusing to delete ${wouldDelete} of the ${sources} sources of collection ${collection} (${pct(wouldDelete / sources)}, ` +
      `more than the limit of ${pct(maxDeleteShare)}): nothing was uploaded or deleted; if the folder really lost these files, ` +
      "allow it (allowMassDelete)", { wouldDelete, sources, maxDeleteShare, sourceUris: syncPlan.gone });
  }
}

export interface SyncFolderOptions {
  /** Delete the collection's sources that have no file any more (every version); false: keep them (`kept`). */
  delete?: boolean;
  /** Let `delete` remove more than `maxDeleteShare` of the collection's sources. */
  allowMassDelete?: boolean;
  /** 0.2 */
  maxDeleteShare?: number;
  /** Hashes, uploads and deletions at once (4). */
  concurrency?: number;
  includeHidden?: boolean;
  /** Follow every upload to READY or FAILED (true). */
  wait?: boolean;
  /** Stop waiting after this long (ms); documents still processing are failures "timed out waiting". */
  timeoutMs?: number;
  onPlan?: (plan: SyncPlan) => void;
  onStart?: (source: Source) => void;
  onUploaded?: (result: UploadResult) => void;
  onChange?: (document: Document) => void;
}

/** What syncFolder needs of a client (client.ts's Documents). */
export interface SyncClient extends BulkClient {
  list(collection: string): AsyncIterable<Document>;
  deleteSource(collection: string, sourceUri: string): Promise<unknown>;
}

async function mapLimit<T, R>(items: T[], limit: number, each: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const index = next++;
      results[index] = await each(items[index]);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker));
  return results;
}

/** Bring a collection up to date with a local folder, once (Documents.syncFolder says how). */
export async function syncFolder(client: SyncClient, collection: string, folder: string,
  options: SyncFolderOptions = {}): Promise<SyncReport> {
  const concurrency = Math.max(1, options.concurrency ?? 4);
  const wait = options.wait ?? true;
  const files = await folderFiles(folder, options.includeHidden);
  const listed: Document[] = [];
  for await (const document of client.list(collection)) listed.push(document);
  const entries = [...files.entries()];
  const hashed = await mapLimit(entries, concurrency, async ([, path]) => hashFile(path));
  const hashes = new Map(entries.map(([uri], i) => [uri, hashed[i]]));
  const syncPlan = plan(files, hashes, listed);
  if (options.delete && !options.allowMassDelete) checkMassDelete(collection, syncPlan, options.maxDeleteShare ?? DEFAULT_MAX_DELETE_SHARE);
  options.onPlan?.(syncPlan);
  const report = new SyncReport(collection, folder, syncPlan.unchanged, [...syncPlan.failed], wait);
  const uploaded = new Map<string, [SyncUpload, Document]>();
  const byPath = new Map(syncPlan.uploads.map((item) => [item.path, item]));
  const tracker = wait && syncPlan.uploads.length > 0 ? new DocumentTracker(client, collection, options.onChange) : undefined;
  try {
    await tracker?.start(); // before the first upload, so that no event is missed
    const results = uploadMany(client, collection, [...byPath.keys()], {
      concurrency, onStart: options.onStart, sourceUriOf: (source) => byPath.get(source as string)?.sourceUri,
    });
    for await (let result of results) {
      const item = byPath.get(result.source as string)!;
      if (result.document === undefined) {
        report.failed.push({ sourceUri: item.sourceUri, error: result.error?.message ?? "no document", path: item.path });
      } else {
        if (tracker !== undefined) result = result.withDocument(tracker.track(result.document));
        uploaded.set(result.document!.id, [item, result.document!]);
      }
      options.onUploaded?.(result);
    }
    if (tracker !== undefined) {
      for (const document of await tracker.settle(options.timeoutMs)) {
        const known = uploaded.get(document.id);
        if (known) uploaded.set(document.id, [known[0], document]);
      }
    }
  } finally {
    tracker?.close();
  }
  const done = [...uploaded.values()].sort(([a], [b]) => (a.sourceUri < b.sourceUri ? -1 : a.sourceUri > b.sourceUri ? 1 : 0));
  for (const [item, document] of done) {
    if (document.failed) {
      report.failed.push({ sourceUri: item.sourceUri, error: document.errorMessage || "processing failed", path: item.path, document });
    } else if (wait && !document.done) {
      report.failed.push({ sourceUri: item.sourceUri, error: `timed out waiting for it (still ${document.statusName})`, path: item.path,
        document });
    } else {
      (item.isNew ? report.new : report.updated).push(document);
    }
  }
  if (!options.delete) {
    report.kept = syncPlan.gone;
    return report;
  }
  // Every version of each gone source; one already gone counts as deleted.
  const outcomes = await mapLimit(syncPlan.gone, concurrency, async (sourceUri): Promise<SluiceError | undefined> => {
    try {
      await client.deleteSource(collection, sourceUri);
    } catch (error) {
      if (error instanceof NotFound) return undefined;
      if (error instanceof SluiceError) return error;
      throw error;
    }
    return undefined;
  });
  syncPlan.gone.forEach((sourceUri, i) => {
    const error = outcomes[i];
    if (error === undefined) report.deleted.push(sourceUri);
    else report.failed.push({ sourceUri, error: `could not delete it: ${error.message}` });
  });
  return report;
}
