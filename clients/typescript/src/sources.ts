/**
 * `client.sources`: places the server keeps a collection in step with (the Python SDK's
 * sources.py; docs/sources.md). A source is a folder on the server, an S3-compatible bucket, a web
 * site (a sitemap, or a bounded crawl that obeys robots.txt) or a git repository; `sync` asks for a
 * run, which the server's `sluice-sources` carries out: it uploads what is new or changed as new
 * versions and deletes what is gone. Names are `collections/{collection}/sources/{id}`; every call
 * also takes the bare id. The class is `DataSource` because `Source` is already what an upload
 * takes (a path or bytes).
 */
import { create } from "@bufbuild/protobuf";
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import type { Client as ConnectClient } from "@connectrpc/connect";

import { WaitTimeout } from "./errors.js";
import {
  GitSourceSchema, HttpSourceSchema, LocalFolderSourceSchema, S3SourceSchema, SourceKind, SourceRunState, SourceSchema, SourceService,
  type Source as SourceMessage, type SourceRun as SourceRunMessage,
} from "./gen/sluice/v1/source_service_pb.js";
import { sleep } from "./retry.js";

export { SourceKind, SourceRunState };

/** What these calls need of a client (client.ts's Client). */
export interface SourcesClient {
  invoke<T>(attempt: (msLeft: number) => Promise<T>, options?: { timeoutMs?: number }): Promise<T>;
  readonly headers: Record<string, string>;
  readonly raw: { sources: ConnectClient<typeof SourceService> };
}

/** Where a run stands: pending, running, succeeded, failed, blocked_mass_delete. */
export type SourceRunStateName = "unspecified" | "pending" | "running" | "succeeded" | "failed" | "blocked_mass_delete";
/** Where a source's documents live. */
export type SourceKindName = "unspecified" | "local_folder" | "s3" | "http" | "git";

/** The states in which a run does nothing more. */
export const ENDED_STATES: readonly SourceRunStateName[] = ["succeeded", "failed", "blocked_mass_delete"];

function date(value: Timestamp | undefined): Date | undefined {
  return value ? timestampDate(value) : undefined;
}

/** One sync of a source: its state and counts (the Python SDK's SourceRun; int64 counts as numbers). */
export class SourceRun {
  readonly id: string;
  readonly name: string;
  readonly state: SourceRunStateName;
  /** Items the source listed so far. */
  readonly listed: number;
  /** Items uploaded as a new document or a new version. */
  readonly uploaded: number;
  /** Items whose content the collection already serves. */
  readonly unchanged: number;
  /** Documents deleted because their item is gone. */
  readonly deleted: number;
  /** Items that could not be read or uploaded (`errorMessage` names the first). */
  readonly failed: number;
  /** Deletions the run found (set when blocked_mass_delete, and after the deletion step). */
  readonly wouldDelete: number;
  readonly errorMessage: string;
  readonly allowMassDelete: boolean;
  readonly attempts: number;
  /** Whether the schedule asked for it (false: `sync`). */
  readonly scheduled: boolean;
  readonly createTime: Date | undefined;
  readonly startTime: Date | undefined;
  readonly endTime: Date | undefined;

  constructor(readonly raw: SourceRunMessage) {
    this.id = raw.id;
    this.name = raw.name;
    this.state = SourceRunState[raw.state].toLowerCase() as SourceRunStateName;
    this.listed = Number(raw.listed);
    this.uploaded = Number(raw.uploaded);
    this.unchanged = Number(raw.unchanged);
    this.deleted = Number(raw.deleted);
    this.failed = Number(raw.failed);
    this.wouldDelete = Number(raw.wouldDelete);
    this.errorMessage = raw.errorMessage;
    this.allowMassDelete = raw.allowMassDelete;
    this.attempts = raw.attempts;
    this.scheduled = raw.scheduled;
    this.createTime = date(raw.createTime);
    this.startTime = date(raw.startTime);
    this.endTime = date(raw.endTime);
  }

  /** succeeded, failed or blocked_mass_delete: nothing more happens in this run. */
  get ended(): boolean {
    return ENDED_STATES.includes(this.state);
  }
}

/** A source of a collection, as the server keeps it (credentials are named, never returned). */
export class DataSource {
  readonly id: string;
  readonly name: string;
  readonly collection: string;
  readonly kind: SourceKindName;
  readonly displayName: string;
  /** Synced on its own every this many seconds; 0: only on `sync`. */
  readonly scheduleIntervalSeconds: number;
  /** The share of the collection a run may delete without allowMassDelete (0: the server's default). */
  readonly maxDeleteShare: number;
  /** Where the documents live: the kind's fields as the server holds them. */
  readonly spec: SourceSpec;
  readonly lastRun: SourceRun | undefined;
  readonly createTime: Date | undefined;
  readonly nextSyncTime: Date | undefined;

  constructor(readonly raw: SourceMessage) {
    this.id = raw.id;
    this.name = raw.name;
    this.collection = raw.collection;
    this.kind = SourceKind[raw.kind].toLowerCase() as SourceKindName;
    this.displayName = raw.displayName;
    this.scheduleIntervalSeconds = Number(raw.scheduleIntervalSeconds);
    this.maxDeleteShare = raw.maxDeleteShare;
    this.spec = specOf(raw);
    this.lastRun = raw.lastRun ? new SourceRun(raw.lastRun) : undefined;
    this.createTime = date(raw.createTime);
    this.nextSyncTime = date(raw.nextSyncTime);
  }
}

/** Exactly one kind of source (the Python SDK's `spec`): `folder` (with `glob`), `s3Endpoint`
 * (with `bucket`, `prefix`, `region` and the names of the server's environment variables holding
 * the keys), `sitemapUrl` or `startUrl` (with `maxPages`), or `git` (with `ref`, `subpath`). */
export interface SourceSpec {
  /** An absolute path on the server, under one of the operator's roots (SLUICE_SOURCE_LOCAL_ROOTS). */
  folder?: string;
  /** Which files of the folder (`**\/*.md`); empty: every file. */
  glob?: string;
  /** An S3-compatible API's base URL (`https://s3.eu-west-1.amazonaws.com`, a MinIO's). */
  s3Endpoint?: string;
  bucket?: string;
  prefix?: string;
  region?: string;
  /** Names of the server's environment variables with the keys (both empty: anonymous). */
  accessKeyIdEnv?: string;
  secretAccessKeyEnv?: string;
  /** A sitemap: its URLs are the items. */
  sitemapUrl?: string;
  /** Where a same-host crawl starts (robots.txt obeyed). */
  startUrl?: string;
  /** The most pages listed (0: the server's default, 100). */
  maxPages?: number;
  /** An http(s) URL of a repository, or an absolute path on the server under the operator's roots. */
  git?: string;
  /** A branch or tag (empty: the default branch). */
  ref?: string;
  /** Only files under this directory of the repository. */
  subpath?: string;
}

export interface CreateSourceOptions extends SourceSpec {
  /** A label for people (at most 200 characters). */
  displayName?: string;
  /** Sync on its own every this many seconds (at least 60); 0 (the default): only on `sync`. */
  everySeconds?: number;
  /** A run that would delete more than this share of the collection stops (0: the server's default, 0.2). */
  maxDeleteShare?: number;
  timeoutMs?: number;
}

export interface SyncSourceOptions {
  /** Let this run delete more than the source's maxDeleteShare of the collection. */
  allowMassDelete?: boolean;
  /** Return once the run ended (succeeded, failed, blocked_mass_delete) rather than at once. */
  wait?: boolean;
  /** With `wait`: give up after this long (ms; 1 hour), with WaitTimeout (the run goes on). */
  timeoutMs?: number;
  /** With `wait`: how often to read the run (ms; 1 s). */
  pollMs?: number;
}

type SpecCase = SourceMessage["spec"];

/** The oneof of exactly one kind; TypeError otherwise (nothing is sent). */
export function specMessage(spec: SourceSpec): SpecCase {
  const chosen: SpecCase[] = [];
  if (spec.folder !== undefined) {
    chosen.push({ case: "localFolder", value: create(LocalFolderSourceSchema, { path: spec.folder, glob: spec.glob ?? "" }) });
  }
  if (spec.s3Endpoint !== undefined) {
    chosen.push({ case: "s3", value: create(S3SourceSchema, {
      endpoint: spec.s3Endpoint, bucket: spec.bucket ?? "", prefix: spec.prefix ?? "", region: spec.region ?? "",
      accessKeyIdEnv: spec.accessKeyIdEnv ?? "", secretAccessKeyEnv: spec.secretAccessKeyEnv ?? "",
    }) });
  }
  if (spec.sitemapUrl !== undefined || spec.startUrl !== undefined) {
    chosen.push({ case: "http", value: create(HttpSourceSchema, {
      sitemapUrl: spec.sitemapUrl ?? "", startUrl: spec.startUrl ?? "", maxPages: spec.maxPages ?? 0,
    }) });
  }
  if (spec.git !== undefined) {
    chosen.push({ case: "git", value: create(GitSourceSchema, { repository: spec.git, ref: spec.ref ?? "", subpath: spec.subpath ?? "" }) });
  }
  if (chosen.length !== 1) {
    throw new TypeError("give exactly one kind of source: folder, s3Endpoint, sitemapUrl or startUrl, or git");
  }
  return chosen[0];
}

function specOf(raw: SourceMessage): SourceSpec {
  const { spec } = raw;
  switch (spec.case) {
    case "localFolder":
      return { folder: spec.value.path, glob: spec.value.glob };
    case "s3":
      return { s3Endpoint: spec.value.endpoint, bucket: spec.value.bucket, prefix: spec.value.prefix, region: spec.value.region,
        accessKeyIdEnv: spec.value.accessKeyIdEnv, secretAccessKeyEnv: spec.value.secretAccessKeyEnv };
    case "http":
      return spec.value.sitemapUrl ? { sitemapUrl: spec.value.sitemapUrl, maxPages: spec.value.maxPages }
        : { startUrl: spec.value.startUrl, maxPages: spec.value.maxPages };
    case "git":
      return { git: spec.value.repository, ref: spec.value.ref, subpath: spec.value.subpath };
    default:
      return {};
  }
}

/** Create, list, sync and delete the sources of the caller's collections. */
export class Sources {
  constructor(private readonly client: SourcesClient) {}

  private get service() {
    return this.client.raw.sources;
  }

  /** A source of one kind (SourceSpec), synced every `everySeconds` (0: only on `sync`); it is not
   * synced until then. */
  async create(collection: string, options: CreateSourceOptions): Promise<DataSource> {
    const source = create(SourceSchema, {
      collection, displayName: options.displayName ?? "", scheduleIntervalSeconds: BigInt(options.everySeconds ?? 0),
      maxDeleteShare: options.maxDeleteShare ?? 0, spec: specMessage(options),
    });
    return new DataSource(await this.client.invoke((timeoutMs) =>
      this.service.createSource({ source }, { headers: this.client.headers, timeoutMs }), { timeoutMs: options.timeoutMs }));
  }

  /** One source with its last run (by name or bare id). */
  async get(name: string, options: { timeoutMs?: number } = {}): Promise<DataSource> {
    return new DataSource(await this.client.invoke((timeoutMs) =>
      this.service.getSource({ name }, { headers: this.client.headers, timeoutMs }), options));
  }

  /** The caller's sources (of one collection, if named), oldest first, fetched a page at a time as you iterate. */
  async *list(collection?: string, options: { pageSize?: number } = {}): AsyncGenerator<DataSource> {
    let pageToken = "";
    do {
      const token = pageToken;
      const page = await this.client.invoke((timeoutMs) => this.service.listSources(
        { collection: collection ?? "", pageSize: options.pageSize ?? 200, pageToken: token }, { headers: this.client.headers, timeoutMs }));
      for (const source of page.sources) yield new DataSource(source);
      pageToken = page.nextPageToken;
    } while (pageToken);
  }

  /** Delete the source and its runs; the documents it synced stay. */
  async delete(name: string, options: { timeoutMs?: number } = {}): Promise<void> {
    await this.client.invoke((timeoutMs) => this.service.deleteSource({ name }, { headers: this.client.headers, timeoutMs }), options);
  }

  /** Ask for a run (or get the one already pending or running); with `wait`, the run once it
   * ended (WaitTimeout after `timeoutMs`: it goes on on the server). */
  async sync(name: string, options: SyncSourceOptions = {}): Promise<SourceRun> {
    let run = new SourceRun(await this.client.invoke((timeoutMs) => this.service.syncSource(
      { name, allowMassDelete: options.allowMassDelete ?? false }, { headers: this.client.headers, timeoutMs })));
    if (!options.wait) return run;
    const timeoutMs = options.timeoutMs ?? 3_600_000;
    const deadline = performance.now() + timeoutMs;
    while (!run.ended) {
      if (performance.now() > deadline) {
        throw new WaitTimeout(`the sync run ${run.id} did not end within ${Math.round(timeoutMs / 1000)} s (it is ${run.state})`);
      }
      await sleep(options.pollMs ?? 1000);
      run = (await this.runs(name, { limit: 20 })).find((r) => r.id === run.id) ?? run;
    }
    return run;
  }

  /** The source's runs, newest first, at most `limit` (20). */
  async runs(name: string, options: { limit?: number } = {}): Promise<SourceRun[]> {
    const limit = options.limit ?? 20;
    const rows: SourceRun[] = [];
    let pageToken = "";
    while (rows.length < limit) {
      const token = pageToken;
      const page = await this.client.invoke((timeoutMs) => this.service.listSourceRuns(
        { name, pageSize: Math.min(limit - rows.length, 1000), pageToken: token }, { headers: this.client.headers, timeoutMs }));
      rows.push(...page.runs.map((r) => new SourceRun(r)));
      pageToken = page.nextPageToken;
      if (!pageToken) break;
    }
    return rows;
  }
}
