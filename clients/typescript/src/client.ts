/**
 * The client: `Client`, with `collections`, `documents` and `search` (the Python SDK's surface, as
 * its AsyncClient offers it: promises, and async iterators for lists and watches).
 *
 *     const client = new Client({ address: "localhost:50051", searchAddress: "localhost:50052", apiKey: KEY });
 *     await client.collections.create("docs");
 *     const doc = await client.documents.wait((await client.documents.upload("docs", "report.pdf")).id);
 *     for (const hit of await client.search("docs", "how do leases expire", { topK: 5 })) console.log(hit.filename, hit.text);
 *
 * Every call retries what can heal (retry.ts) within its deadline (`timeoutMs`, 30 s unless given)
 * and throws a SluiceError (errors.ts) otherwise. Calls go over gRPC (HTTP/2) with
 * @connectrpc/connect-node; `close()` ends the connections. docs/clients.md.
 */
import { create, equals } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client as ConnectClient, type Transport } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";

import * as config from "./config.js";
import {
  AlreadyExists, DeadlineExceeded, RateLimited, SluiceError, TLSError, Unavailable, UploadSourceError, WaitTimeout, toSluiceError,
} from "./errors.js";
import { MemorySink, PathSink, Receiver, transferMs } from "./downloads.js";
import { where as whereFilter, type MetadataInput } from "./filters.js";
import { ChunkingConfigSchema, CollectionSchema, EmbedderConfigSchema, type EmbedderProvider } from "./gen/sluice/v1/collection_pb.js";
import { DocumentSchema, DocumentStatus } from "./gen/sluice/v1/document_pb.js";
import {
  CollectionEventType, DocumentService, SourceRunEvents, UpdateChunkRequestSchema, WatchCollectionRequestSchema,
} from "./gen/sluice/v1/document_service_pb.js";
import { AdminService } from "./gen/sluice/v1/admin_service_pb.js";
import { WebhookService } from "./gen/sluice/v1/webhook_service_pb.js";
import { SearchFilterSchema, SearchRequestSchema, SearchRerankSchema, SearchService, type MetadataFilter, type SearchMode } from "./gen/sluice/v1/search_service_pb.js";
import { Pacer, RetryPolicy, sleep, type RetryPolicyOptions } from "./retry.js";
import {
  Chunk, ChunkPage, Collection, CollectionEvent, Document, SearchResults, documentStatus, embedderProvider, searchMode,
  type DownloadedDocument, type Embedder,
} from "./types.js";
import { Admin, Webhooks } from "./admin.js";
import { DocumentTracker, uploadFolder, uploadMany, type BulkClient, type UploadFolderOptions, type UploadManyOptions, type UploadResult } from "./bulk.js";
import { SourceService } from "./gen/sluice/v1/source_service_pb.js";
import { Sources } from "./sources.js";
import { syncFolder, type SyncFolderOptions, type SyncReport } from "./sync.js";
import { metadataMessage, prepare, requestId, type Source, type UploadOptions } from "./uploads.js";

export const INGEST = "ingest-api";
export const SEARCH = "search";
/** A watch that has connected once reconnects until the server has been away this long (ms). */
export const RECONNECT_WINDOW_MS = 300_000;
/** The largest page the servers give. */
export const PAGE_SIZE = 1000;
const MAX_MESSAGE_BYTES = 16 * 1024 * 1024;
const TENANT_HEADER = "x-sluice-tenant";
const MIB = 1024 * 1024;

export interface ClientOptions {
  /** ingest-api, host:port (SLUICE_INGEST_ADDRESS, else localhost:50051). */
  address?: string;
  /** search, host:port (SLUICE_SEARCH_ADDRESS, else localhost:50052). */
  searchAddress?: string;
  /** The API key (SLUICE_API_KEY, else the client key of the credentials file `make run` wrote). */
  apiKey?: string;
  /** The CA of the servers' certificates, PEM (SLUICE_TLS_CA_FILE): TLS when given. */
  caFile?: string;
  /** Mutual TLS: the client's certificate and key, PEM (SLUICE_TLS_CLIENT_CERT_FILE, _KEY_FILE). */
  certFile?: string;
  keyFile?: string;
  /** Act for this tenant (admin keys; SLUICE_TENANT). */
  tenant?: string;
  /** The deadline of each call, retries included (ms; 30 s). */
  timeoutMs?: number;
  /** How calls retry (retry.ts). */
  retry?: RetryPolicyOptions;
  /** Start no more calls a second than this from the start (otherwise: paced once the server reports its limit). */
  maxCallsPerSecond?: number;
  /** The prefix of the request_ids this client makes for uploads. */
  requestIdPrefix?: string;
}

function now(): number {
  return performance.now();
}

/** host:port of an address written as a gRPC target (`dns:///host:port`, `ipv4:host:port`). */
function authority(address: string): string {
  return address.replace(/^dns:\/\/[^/]*\//, "").replace(/^(dns|ipv4|ipv6):/, "");
}

const SOURCE_RUN_EVENTS = { none: SourceRunEvents.UNSPECIFIED, included: SourceRunEvents.INCLUDED, only: SourceRunEvents.ONLY };

function sourceRunEvents(value: string | undefined): SourceRunEvents {
  const found = SOURCE_RUN_EVENTS[(value ?? "none") as keyof typeof SOURCE_RUN_EVENTS];
  if (found === undefined) throw new TypeError(`sourceRuns must be one of none, included, only, not ${JSON.stringify(value)}`);
  return found;
}

/** A connection to Sluice's ingest-api and search (config.ts says where each setting comes from). */
export class Client {
  readonly ingestAddress: string;
  readonly searchAddress: string;
  readonly policy: RetryPolicy;
  readonly pacer: Pacer;
  readonly requestIdPrefix: string;
  readonly collections: Collections;
  readonly documents: Documents;
  /** Signed POSTs of a collection's events (docs/webhooks.md). */
  readonly webhooks: Webhooks;
  /** Tenants and API keys, with the admin key. */
  readonly admin: Admin;
  /** Folders, buckets, sites and repositories the server keeps collections in step with (docs/sources.md). */
  readonly sources: Sources;
  /** The generated Connect clients, for a call this SDK does not wrap (`headers` carries the key). */
  readonly raw: {
    documents: ConnectClient<typeof DocumentService>; search: ConnectClient<typeof SearchService>;
    webhooks: ConnectClient<typeof WebhookService>; admin: ConnectClient<typeof AdminService>;
    sources: ConnectClient<typeof SourceService>;
  };
  /** The metadata of every call: the key (`authorization: Bearer …`) and the tenant, if any. */
  readonly headers: Record<string, string>;
  /** The metadata of administration calls: the admin key (the credentials file's, or `apiKey`). */
  readonly adminHeaders: Record<string, string>;
  readonly tls: boolean;
  private readonly sessions = new Map<string, Http2SessionManager>();
  private readonly answered = new Set<string>();

  constructor(addressOrOptions?: string | ClientOptions, more: ClientOptions = {}) {
    const options = typeof addressOrOptions === "string" ? { ...more, address: addressOrOptions } : { ...more, ...(addressOrOptions ?? {}) };
    this.ingestAddress = config.ingestAddress(options.address);
    this.searchAddress = config.searchAddress(options.searchAddress);
    const keys = config.resolveKeys(options.apiKey);
    const tls = config.resolveTls(options);
    this.tls = tls.enabled;
    const tenant = options.tenant ?? process.env.SLUICE_TENANT ?? "";
    this.headers = {};
    if (keys.client) this.headers.authorization = `Bearer ${keys.client}`;
    if (tenant) this.headers[TENANT_HEADER] = tenant;
    this.adminHeaders = { ...this.headers };
    if (keys.admin) this.adminHeaders.authorization = `Bearer ${keys.admin}`;
    this.policy = new RetryPolicy({ ...(options.retry ?? {}), timeoutMs: options.timeoutMs ?? options.retry?.timeoutMs ?? 30_000 });
    this.pacer = new Pacer(options.maxCallsPerSecond);
    this.requestIdPrefix = options.requestIdPrefix ?? "ts-";
    const transports = new Map<string, Transport>();
    const transport = (address: string): Transport => {
      let found = transports.get(address);
      if (found === undefined) {
        const baseUrl = `${tls.enabled ? "https" : "http"}://${authority(address)}`;
        const session = new Http2SessionManager(baseUrl, {}, tls.enabled ? { ca: tls.ca, cert: tls.cert, key: tls.key } : {});
        this.sessions.set(address, session);
        found = createGrpcTransport({ baseUrl, sessionManager: session, readMaxBytes: MAX_MESSAGE_BYTES, writeMaxBytes: MAX_MESSAGE_BYTES });
        transports.set(address, found);
      }
      return found;
    };
    this.raw = {
      documents: createClient(DocumentService, transport(this.ingestAddress)),
      search: createClient(SearchService, transport(this.searchAddress)),
      webhooks: createClient(WebhookService, transport(this.ingestAddress)),
      admin: createClient(AdminService, transport(this.ingestAddress)),
      sources: createClient(SourceService, transport(this.ingestAddress)),
    };
    this.collections = new Collections(this);
    this.documents = new Documents(this);
    this.webhooks = new Webhooks(this);
    this.admin = new Admin(this);
    this.sources = new Sources(this);
  }

  /** The SluiceError for what a call to `service` threw. */
  error(reason: unknown, service: string = INGEST): SluiceError {
    const address = service === SEARCH ? this.searchAddress : this.ingestAddress;
    const error = toSluiceError(reason, { service, address, tls: this.tls });
    if (reason instanceof ConnectError && reason.isWireError) this.answered.add(address);
    if (this.tls && error.reason === "CONNECTION_CLOSED" && !this.answered.has(address)) {
      // A TLS server that closes the connection before it ever answered has refused the handshake's
      // outcome: under mutual TLS, our client certificate (gRPC servers close without a TLS alert).
      return new TLSError(`${service} at ${address} closed the connection after the TLS handshake: it probably requires ` +
        "a client certificate signed by a CA it trusts (certFile and keyFile, or SLUICE_TLS_CLIENT_CERT_FILE/_KEY_FILE)",
      { problem: "client certificate refused", reason: "TLS_HANDSHAKE_FAILED", service, address, cause: reason });
    }
    return error;
  }

  /** A server at this address has answered: from now on a closed connection is a drop, not a refusal. */
  heard(service: string = INGEST): void {
    this.answered.add(service === SEARCH ? this.searchAddress : this.ingestAddress);
  }

  /** Run `attempt(msLeft)` until it succeeds, retrying as the RetryPolicy says, within the deadline. */
  async invoke<T>(attempt: (msLeft: number) => Promise<T>, options: { service?: string; timeoutMs?: number;
    translate?: (error: SluiceError) => SluiceError } = {}): Promise<T> {
    const deadline = now() + (options.timeoutMs ?? this.policy.timeoutMs);
    let failures = 0;
    for (;;) {
      const delay = this.pacer.reserve();
      if (delay > 0) await sleep(Math.min(delay, Math.max(0, deadline - now())));
      let error: SluiceError;
      try {
        const result = await attempt(Math.max(1, Math.ceil(deadline - now())));
        this.heard(options.service);
        return result;
      } catch (reason) {
        error = this.error(reason, options.service);
      }
      if (options.translate) error = options.translate(error);
      const wait = this.policy.nextWait(error, failures, deadline - now());
      if (wait === undefined) throw error;
      if (error instanceof RateLimited) this.pacer.refused(error);
      else failures += 1;
      await sleep(wait);
    }
  }

  /** The chunks of READY documents that best match `query`, best first (typed hits). */
  async search(collection: string, query = "", options: SearchOptions = {}): Promise<SearchResults> {
    const request = create(SearchRequestSchema, {
      collection, query, topK: options.topK ?? 10, mode: searchMode(options.mode), queryVector: options.queryVector ?? [],
      neighborChunks: options.neighbors ?? 0, maxHitsPerDocument: options.maxPerDocument ?? 0, minScore: options.minScore,
      explain: options.explain ?? false, generation: options.generation ?? 0,
    });
    const filter = create(SearchFilterSchema, {
      metadata: options.filter ?? {}, filenames: options.filenames ?? [], documentIds: options.documentIds ?? [],
      where: whereFilter(options.where),
    });
    if (options.filter || options.filenames || options.documentIds || filter.where) request.filter = filter;
    if (options.rerank === false) request.rerank = create(SearchRerankSchema, { disabled: true });
    const response = await this.invoke((timeoutMs) => this.raw.search.search(request, { headers: this.headers, timeoutMs }),
      { service: SEARCH, timeoutMs: options.timeoutMs });
    return new SearchResults(response);
  }

  /** Close the connections; calls still running end with an error. */
  close(): void {
    for (const session of this.sessions.values()) session.abort();
    this.sessions.clear();
  }

  [Symbol.dispose](): void {
    this.close();
  }
}

/** A document named by its source instead of its id (docs/architecture.md, "Document versions"). */
export interface SourceKey {
  collection: string;
  sourceUri: string;
}

function documentKey(key: string | SourceKey): { id?: string; collection?: string; sourceUri?: string } {
  if (typeof key === "string") {
    if (!key) throw new TypeError("a document id (or { collection, sourceUri }) is required");
    return { id: key };
  }
  if (!key.collection || !key.sourceUri) throw new TypeError("name a document by its id, or by { collection, sourceUri }");
  return { collection: key.collection, sourceUri: key.sourceUri };
}

export interface SearchOptions {
  /** How many hits (10). */
  topK?: number;
  /** "hybrid" (the default for text), "vector" or "keyword". */
  mode?: SearchMode | "hybrid" | "vector" | "keyword";
  /** Metadata that must be equal. */
  filter?: Record<string, string>;
  /** Typed conditions: "year>=2024", "lang in en,de", "tags exists" (filters.ts), or MetadataFilter messages. */
  where?: string | MetadataFilter | (string | MetadataFilter)[];
  filenames?: string[];
  documentIds?: string[];
  /** Join N chunks around each hit into `hit.context`. */
  neighbors?: number;
  maxPerDocument?: number;
  minScore?: number;
  /** false: skip the collection's reranker. */
  rerank?: boolean;
  queryVector?: number[];
  /** Each hit's `explanation`: why it ranked there (keyword and vector scores and ranks, the fused
   * parts, the reranker's score). It changes no hit and no order. */
  explain?: boolean;
  /** Search this index generation (the BUILDING one of a reindex, to compare it) instead of the ACTIVE one. */
  generation?: number;
  timeoutMs?: number;
}

export interface ListChunksOptions {
  /** 1 to 1000 (100). */
  pageSize?: number;
  /** The `nextPageToken` of the previous page. */
  pageToken?: string;
  /** The index generation (a CollectionGeneration's number); 0, the default, is the ACTIVE one. */
  generation?: number;
  timeoutMs?: number;
}

export interface UpdateChunkOptions {
  /** The etag of the Chunk read: the change is refused (Aborted, CHUNK_CHANGED) if the chunk changed since. */
  etag?: string;
  timeoutMs?: number;
}

export interface CreateCollectionOptions {
  /** "local" (offline, the default), "hashing" (tests) or "openai"; fixed at creation. */
  embedder?: Embedder | EmbedderProvider;
  model?: string;
  dimensions?: number;
  chunkSize?: number;
  overlap?: number;
  maxAttempts?: number;
  description?: string;
  /** The existing collection instead of AlreadyExists when the name is taken (whatever its settings). */
  existOk?: boolean;
  timeoutMs?: number;
}

export interface WatchCollectionOptions {
  /** Resume after this cursor (a CollectionEvent's, or a CollectionWatch's `.cursor`). */
  cursor?: string;
  /** Start with the oldest event the server retains instead of now. */
  fromStart?: boolean;
  statuses?: (DocumentStatus | string)[];
  terminalOnly?: boolean;
  /** Yield the server's heartbeats too (kind HEARTBEAT). */
  heartbeats?: boolean;
  /** The sync-run events of the collection's sources too ("included"), or only them ("only");
   * "none" (the default): document events only (docs/sources.md, "Run events"). */
  sourceRuns?: "none" | "included" | "only";
  /** Hears of every reconnection, with the cursor it resumes after. */
  onReconnect?: (cursor: string, error: SluiceError) => void;
}

/** Create, read, list, reindex, delete and watch collections. */
export class Collections {
  constructor(private readonly client: Client) {}

  private get service() {
    return this.client.raw.documents;
  }

  /** A new collection; its embedder is fixed at creation. AlreadyExists when the name is taken, unless `existOk`. */
  async create(name: string, options: CreateCollectionOptions = {}): Promise<Collection> {
    const chunking = create(ChunkingConfigSchema, {});
    if (options.chunkSize) {
      chunking.maxCharacters = options.chunkSize;
      // unstructured closes a chunk softly at new_after_n_chars, hard at max_characters.
      chunking.newAfterNChars = Math.max(1, Math.floor((options.chunkSize * 2) / 3));
    }
    if (options.overlap !== undefined) chunking.overlap = options.overlap;
    const collection = create(CollectionSchema, {
      name, description: options.description ?? "", chunking, maxAttempts: options.maxAttempts ?? 0,
      embedder: create(EmbedderConfigSchema, {
        provider: embedderProvider(options.embedder ?? "local"), model: options.model ?? "", dimensions: options.dimensions ?? 0,
      }),
    });
    try {
      return new Collection(await this.client.invoke((timeoutMs) =>
        this.service.createCollection({ collection }, { headers: this.client.headers, timeoutMs }), { timeoutMs: options.timeoutMs }));
    } catch (error) {
      if (!(error instanceof AlreadyExists) || !options.existOk) throw error;
      return this.get(name, { timeoutMs: options.timeoutMs });
    }
  }

  async get(name: string, options: { timeoutMs?: number } = {}): Promise<Collection> {
    return new Collection(await this.client.invoke((timeoutMs) =>
      this.service.getCollection({ name }, { headers: this.client.headers, timeoutMs }), options));
  }

  /** Every collection, in name order, fetched a page at a time as you iterate. */
  async *list(options: { pageSize?: number } = {}): AsyncGenerator<Collection> {
    let pageToken = "";
    do {
      const token = pageToken;
      const page = await this.client.invoke((timeoutMs) => this.service.listCollections(
        { pageSize: options.pageSize ?? PAGE_SIZE, pageToken: token }, { headers: this.client.headers, timeoutMs }));
      for (const collection of page.collections) yield new Collection(collection);
      pageToken = page.nextPageToken;
    } while (pageToken);
  }

  /** Delete a collection (with `force`, also its documents); returns the documents deleted. */
  async delete(name: string, options: { force?: boolean; timeoutMs?: number } = {}): Promise<bigint> {
    const response = await this.client.invoke((timeoutMs) => this.service.deleteCollection(
      { name, force: options.force ?? false }, { headers: this.client.headers, timeoutMs }), options);
    return response.deletedDocuments;
  }

  /** Start building a new index generation with another embedder (docs/search.md). */
  async reindex(name: string, options: { embedder?: Embedder | EmbedderProvider; model?: string; dimensions?: number;
    evalQueries?: { query: string; relevant: string[]; id?: string }[]; minRatio?: number; timeoutMs?: number } = {}): Promise<Collection> {
    const embedder = create(EmbedderConfigSchema, {
      provider: embedderProvider(options.embedder ?? "local"), model: options.model ?? "", dimensions: options.dimensions ?? 0,
    });
    const evalQueries = (options.evalQueries ?? []).map((q) => ({ query: q.query, relevant: q.relevant, id: q.id ?? "" }));
    return new Collection(await this.client.invoke((timeoutMs) => this.service.reindexCollection(
      { name, embedder, evalQueries, minRatio: options.minRatio ?? 0 }, { headers: this.client.headers, timeoutMs }), options));
  }

  async cancelReindex(name: string, options: { timeoutMs?: number } = {}): Promise<Collection> {
    return new Collection(await this.client.invoke((timeoutMs) =>
      this.service.cancelReindex({ name }, { headers: this.client.headers, timeoutMs }), options));
  }

  /** Every document event of the collection, as an async iterator that resumes by itself: when the
   * connection drops it reconnects after the last cursor received, so nothing is missed or seen
   * twice. `.cursor` is where to resume later; `.close()` ends it. */
  watch(name: string, options: WatchCollectionOptions = {}): CollectionWatch {
    return new CollectionWatch(this.client, name, options);
  }
}

/** The async iterator of `collections.watch`. */
export class CollectionWatch implements AsyncIterable<CollectionEvent> {
  /** Where the watch is: the cursor of the last event received (resume later with `cursor:`). */
  cursor: string;
  private closed = false;
  private readonly abort = new AbortController();

  constructor(private readonly client: Client, readonly collection: string, private readonly options: WatchCollectionOptions) {
    this.cursor = options.cursor ?? "";
  }

  [Symbol.asyncIterator](): AsyncIterator<CollectionEvent> {
    return this.run();
  }

  close(): void {
    this.closed = true;
    this.abort.abort();
  }

  private async *run(): AsyncGenerator<CollectionEvent> {
    const { client, options } = this;
    const policy = client.policy;
    const request = create(WatchCollectionRequestSchema, {
      collection: this.collection, afterCursor: this.cursor, startFromOldest: Boolean(options.fromStart) && !this.cursor,
      terminalOnly: options.terminalOnly ?? false, statuses: (options.statuses ?? []).map(documentStatus),
      sourceRuns: sourceRunEvents(options.sourceRuns),
    });
    let connected = false;
    let failures = 0;
    let awaySince: number | undefined;
    while (!this.closed) {
      if (this.cursor) { // every connection after a message resumes where the last one ended
        request.afterCursor = this.cursor;
        request.startFromOldest = false;
      }
      await sleep(client.pacer.reserve(), this.abort.signal);
      let error: SluiceError;
      let ended = false;
      try {
        for await (const message of client.raw.documents.watchCollection(request, { headers: client.headers, signal: this.abort.signal })) {
          connected = true;
          client.heard();
          failures = 0;
          awaySince = undefined;
          this.cursor = message.cursor;
          if (message.type === CollectionEventType.HEARTBEAT && !options.heartbeats) continue;
          yield new CollectionEvent(message);
        }
        ended = true;
      } catch (reason) {
        if (this.closed) return;
        error = client.error(reason);
      }
      if (ended) {
        if (!connected) throw new Unavailable("ingest-api ended the stream before sending anything", { reason: "STREAM_ENDED" });
        await sleep(200, this.abort.signal); // ended without an error (a proxy closed it): reconnect, not too fast
        continue;
      }
      error = error!;
      if (error instanceof RateLimited && error.retryAfterMs !== undefined) {
        client.pacer.refused(error);
        await sleep(error.retryAfterMs, this.abort.signal);
        continue;
      }
      if (!(error instanceof Unavailable) || error instanceof TLSError) throw error;
      awaySince ??= now();
      if ((!connected && failures + 1 >= policy.attempts) || now() - awaySince > RECONNECT_WINDOW_MS) throw error;
      if (connected) options.onReconnect?.(this.cursor, error);
      await sleep(policy.backoff(failures), this.abort.signal);
      failures += 1;
    }
  }
}

/** Upload, read, list, retry, delete and follow documents. */
export class Documents {
  constructor(private readonly client: Client) {}

  private get service() {
    return this.client.raw.documents;
  }

  /** Upload a file (a path, or bytes) into a collection; returns the document, PENDING (or the
   * existing one, when the collection already holds these bytes).
   *
   * The size and SHA-256 go first and the trailer last, so the server stores the bytes only if
   * they arrived whole; `requestId` (by default stable for collection, file and content) makes a
   * retried upload return the same document, never a second one. Bytes are hashed before this
   * returns its promise; if they change before they are sent, nothing is stored (UploadSourceError,
   * reason SOURCE_CHANGED). */
  async upload(collection: string, source: Source, options: UploadOptions = {}): Promise<Document> {
    const prepared = await prepare(source, options.filename);
    const client = this.client;
    const message = metadataMessage(collection, prepared, options,
      options.requestId ?? requestId(collection, prepared.identity + (options.sourceUri ? "\0" + options.sourceUri : ""),
        prepared.sha256, client.requestIdPrefix));
    const translate = (error: SluiceError): SluiceError =>
      // our side failed: nothing was stored, and a retry would fail the same way
      prepared.readFailure.length > 0 ? new UploadSourceError(prepared.readFailure[0], { reason: "SOURCE_CHANGED" }) : error;
    const response = await client.invoke((timeoutMs) => this.service.uploadDocument(prepared.messages(message),
      { headers: client.headers, timeoutMs }), { timeoutMs: options.timeoutMs ?? Math.max(60_000, (prepared.size / MIB) * 1000), translate });
    return new Document(response);
  }

  /** Upload sources (paths or bytes) `concurrency` at a time (4); yields each result as it
   * finishes, not in order. A source that fails is a result with `error`; the others go on. */
  uploadMany(collection: string, sources: Iterable<Source>, options: UploadManyOptions = {}): AsyncGenerator<UploadResult> {
    return uploadMany(this.bulk, collection, sources, options);
  }

  /** Upload files and folders (recursively, hidden files skipped), `concurrency` at a time, and
   * unless `wait: false` follow every document to READY or FAILED through one watch of the
   * collection (not one per file). Results in file order; after `timeoutMs` the documents still
   * processing are returned as they are (check `.document.done`). */
  uploadFolder(collection: string, paths: string | string[], options: UploadFolderOptions = {}): Promise<UploadResult[]> {
    return uploadFolder(this.bulk, collection, typeof paths === "string" ? [paths] : paths, options);
  }

  /** Many documents once each is READY or FAILED (or deleted), in the order given, followed
   * through one WatchCollection stream per collection rather than one watch per document; ids or
   * Documents (an upload's answer). WaitTimeout after `timeoutMs` (its `documents` hold the states then). */
  async waitAll(documents: Iterable<string | Document>, options: { timeoutMs?: number;
    onChange?: (document: Document) => void } = {}): Promise<Document[]> {
    const deadline = options.timeoutMs === undefined ? undefined : now() + options.timeoutMs;
    const given = [...documents];
    // An id says nothing of its collection: read it (which is also its state now).
    const known = await Promise.all(given.map((d) => (typeof d === "string" ? this.get(d) : d)));
    const byCollection = new Map<string, Document[]>();
    for (const document of known) {
      const members = byCollection.get(document.collection);
      if (members) members.push(document);
      else byCollection.set(document.collection, [document]);
    }
    const final = new Map<string, Document>();
    const trackers: DocumentTracker[] = [];
    try {
      // Settled, not raced: each tracker ends by the same deadline, and none is left waiting.
      const outcomes = await Promise.allSettled([...byCollection].map(async ([collection, members]) => {
        if (members.every((d) => d.done)) {
          for (const d of members) final.set(d.id, d);
          return;
        }
        const tracker = new DocumentTracker(this.bulk, collection, options.onChange);
        trackers.push(tracker);
        await tracker.start();
        for (const d of members) tracker.track(d);
        // What changed before the stream opened is not replayed: read what is still processing once.
        await tracker.refresh();
        let states: Document[];
        try {
          states = await tracker.wait(deadline === undefined ? undefined : Math.max(0, deadline - now()));
        } catch (error) {
          if (!(error instanceof WaitTimeout)) throw error;
          for (const d of error.documents as Document[]) final.set(d.id, d);
          throw error;
        }
        for (const d of states) final.set(d.id, d);
      }));
      const failure = outcomes.find((o): o is PromiseRejectedResult => o.status === "rejected" && !(o.reason instanceof WaitTimeout));
      if (failure !== undefined) throw failure.reason;
      if (outcomes.some((o) => o.status === "rejected")) throw timeoutError(known.map((d) => final.get(d.id) ?? d));
    } finally {
      for (const tracker of trackers) tracker.close();
    }
    return known.map((d) => final.get(d.id) ?? d);
  }

  /** Bring a collection up to date with a local folder, once (sync.ts): each file's sourceUri is
   * its path relative to the folder; a file whose SHA-256 is its source's newest live version is
   * unchanged and not sent; new and changed files are uploaded `concurrency` at a time (a changed
   * one becomes a new version, swapped in at READY) and, unless `wait: false`, followed to READY or
   * FAILED; then, with `delete`, the collection's sources that have no file any more are deleted
   * (every version). Documents without a sourceUri are never touched. MassDeleteRefused, before
   * anything is sent, when that would delete more than `maxDeleteShare` (0.2) of the collection's
   * sources, unless `allowMassDelete`. The same plan and rules as the Python SDK's `sync_folder`. */
  syncFolder(collection: string, folder: string, options: SyncFolderOptions = {}): Promise<SyncReport> {
    return syncFolder({
      ...this.bulk,
      list: (name) => this.list(name),
      deleteSource: (name, sourceUri) => this.delete({ collection: name, sourceUri }),
    }, collection, folder, options);
  }

  /** A follower of many documents of one collection through one WatchCollection stream
   * (`start()` it before uploading, `track()` each document, `wait()`, `close()`). */
  tracker(collection: string, options: { onChange?: (document: Document) => void } = {}): DocumentTracker {
    return new DocumentTracker(this.bulk, collection, options.onChange);
  }

  private get bulk(): BulkClient {
    return {
      upload: (collection, source, options) => this.upload(collection, source, options),
      get: (id, options) => this.get(id, options),
      watchCollection: (collection) => this.client.collections.watch(collection, { heartbeats: true }),
      list: (collection) => this.list(collection),
    };
  }

  /** One document, with its attempt history: by id, or by `{ collection, sourceUri }` (the
   * source's current version, or its pending one when it has none yet). */
  async get(key: string | SourceKey, options: { timeoutMs?: number } = {}): Promise<Document> {
    const request = documentKey(key);
    return new Document(await this.client.invoke((timeoutMs) =>
      this.service.getDocument(request, { headers: this.client.headers, timeoutMs }), options));
  }

  /** Documents, newest first, optionally of one collection and status; fetched a page at a time as
   * you iterate, at most `limit`. */
  async *list(collection?: string,
    options: { status?: DocumentStatus | string; pageSize?: number; limit?: number; sourceUri?: string } = {}): AsyncGenerator<Document> {
    const pageSize = options.pageSize ?? PAGE_SIZE;
    const status = documentStatus(options.status);
    let pageToken = "";
    let count = 0;
    do {
      const token = pageToken;
      const size = options.limit ? Math.min(pageSize, options.limit - count) : pageSize;
      const page = await this.client.invoke((timeoutMs) => this.service.listDocuments(
        { collection: collection ?? "", status, pageSize: size, pageToken: token, sourceUri: options.sourceUri ?? "" },
        { headers: this.client.headers, timeoutMs }));
      for (const document of page.documents) {
        yield new Document(document);
        count += 1;
        if (options.limit && count >= options.limit) return;
      }
      pageToken = page.nextPageToken;
    } while (pageToken);
  }

  /** Delete a document, its content and chunks (by `{ collection, sourceUri }`: every version of
   * the source); true when a running job was cancelled. */
  async delete(key: string | SourceKey, options: { timeoutMs?: number } = {}): Promise<boolean> {
    const request = documentKey(key);
    const response = await this.client.invoke((timeoutMs) =>
      this.service.deleteDocument(request, { headers: this.client.headers, timeoutMs }), options);
    return response.cancelledRunningJob;
  }

  /** Process a FAILED document again (PENDING, with fresh attempts). */
  async retry(id: string, options: { timeoutMs?: number } = {}): Promise<Document> {
    return new Document(await this.client.invoke((timeoutMs) =>
      this.service.retryDocument({ id }, { headers: this.client.headers, timeoutMs }), options));
  }

  /** Process a READY document again; it leaves search until READY again. */
  async reprocess(id: string, options: { timeoutMs?: number } = {}): Promise<Document> {
    return new Document(await this.client.invoke((timeoutMs) =>
      this.service.reprocessDocument({ id }, { headers: this.client.headers, timeoutMs }), options));
  }

  /** One page of a document's chunks in chunk_index order, as the ACTIVE index generation holds them
   * (or `generation`, e.g. the BUILDING one of a reindex). Pass the page's `nextPageToken` for the
   * next; a document that is not READY has none. */
  async listChunks(documentId: string, options: ListChunksOptions = {}): Promise<ChunkPage> {
    const request = { documentId, pageSize: options.pageSize ?? 100, pageToken: options.pageToken ?? "",
      generation: options.generation ?? 0 };
    return new ChunkPage(await this.client.invoke((timeoutMs) =>
      this.service.listChunks(request, { headers: this.client.headers, timeoutMs }), { timeoutMs: options.timeoutMs }));
  }

  /** Every chunk of a document in chunk_index order, fetched a page at a time as you iterate. */
  async *iterChunks(documentId: string, options: { generation?: number; pageSize?: number } = {}): AsyncGenerator<Chunk> {
    let pageToken = "";
    do {
      const page = await this.listChunks(documentId, { pageSize: options.pageSize ?? PAGE_SIZE, pageToken,
        generation: options.generation });
      yield* page.chunks;
      pageToken = page.nextPageToken;
    } while (pageToken);
  }

  /** Take a chunk out of search (in every generation that holds it) from this call's commit;
   * nothing is re-embedded. */
  disableChunk(chunkId: string, options: UpdateChunkOptions = {}): Promise<Chunk> {
    return this.updateChunk(chunkId, { enabled: false }, options);
  }

  /** Put a disabled chunk back into search. */
  enableChunk(chunkId: string, options: UpdateChunkOptions = {}): Promise<Chunk> {
    return this.updateChunk(chunkId, { enabled: true }, options);
  }

  /** Replace a chunk's text: its vector (embedded again, this chunk alone) and keyword terms change
   * with it in one transaction; `originalText` keeps the parser's. InvalidArgument for empty or
   * over-long text (over 100,000 characters); Aborted (CHUNK_CHANGED) on a stale `etag`. */
  editChunk(chunkId: string, text: string, options: UpdateChunkOptions = {}): Promise<Chunk> {
    return this.updateChunk(chunkId, { text }, options);
  }

  private async updateChunk(chunkId: string, change: { enabled?: boolean; text?: string },
    options: UpdateChunkOptions): Promise<Chunk> {
    if (!chunkId) throw new TypeError("a chunk id is required (Chunk.id, or a hit's chunkId)");
    // `enabled` and `text` are proto3 optional: only the one given is sent (unset leaves it as it is).
    const request = create(UpdateChunkRequestSchema, { chunkId, etag: options.etag ?? "", ...change });
    return new Chunk(await this.client.invoke((timeoutMs) =>
      this.service.updateChunk(request, { headers: this.client.headers, timeoutMs }), { timeoutMs: options.timeoutMs }));
  }

  /** A document's original bytes, streamed: resolved as bytes without a `destination`; else written
   * to that path (a folder: the document's file name in it) and described (`DownloadedDocument`).
   *
   * What arrives is counted and hashed and must be what the header announced, or DownloadError
   * (SIZE_MISMATCH, CHECKSUM_MISMATCH); a path is written beside itself and renamed into place only
   * then, so a failed download leaves no partial file. A dropped connection starts the download
   * again. Without `timeoutMs`, the header must come within the client's timeout and the bytes
   * within 60 s and a second per MiB after it. */
  download(id: string, destination?: undefined, options?: { timeoutMs?: number }): Promise<Uint8Array>;
  download(id: string, destination: string, options?: { timeoutMs?: number }): Promise<DownloadedDocument>;
  async download(id: string, destination?: string, options: { timeoutMs?: number } = {}): Promise<Uint8Array | DownloadedDocument> {
    const client = this.client;
    const policy = client.policy;
    const sink = destination === undefined ? new MemorySink() : new PathSink(destination);
    const deadline = options.timeoutMs ? now() + options.timeoutMs : undefined;
    let failures = 0;
    try {
      for (;;) {
        await sleep(client.pacer.reserve());
        const receiver = new Receiver(id, sink);
        let error: SluiceError;
        try {
          await this.receive(id, receiver, deadline);
          const done = await receiver.finish();
          return sink instanceof MemorySink ? sink.bytes() : { ...done, path: done.path! };
        } catch (reason) {
          // The bytes' checks, our deadline and the file system's errors (a folder that is not
          // there) are not the server's: thrown as they are, never retried.
          if (!(reason instanceof ConnectError)) throw reason;
          error = client.error(reason);
        }
        const wait = policy.nextWait(error, failures, deadline !== undefined ? deadline - now() : policy.timeoutMs);
        if (wait === undefined) throw error;
        if (error instanceof RateLimited) client.pacer.refused(error);
        else failures += 1;
        await sink.discard();
        await sleep(wait);
      }
    } catch (error) {
      await sink.discard();
      throw error;
    }
  }

  /** One attempt: every message of the stream into `receiver`. With a deadline, the call's; without
   * one, a timer that ends the call when the header or the bytes are late (see download). */
  private async receive(id: string, receiver: Receiver, deadline: number | undefined): Promise<void> {
    const client = this.client;
    const abort = new AbortController();
    let late = false;
    let timer: NodeJS.Timeout | undefined;
    const expireIn = (ms: number): void => {
      clearTimeout(timer);
      timer = setTimeout(() => { late = true; abort.abort(); }, ms);
    };
    if (deadline === undefined) expireIn(client.policy.timeoutMs);
    try {
      const stream = this.service.downloadDocument({ id }, { headers: client.headers, signal: abort.signal,
        timeoutMs: deadline === undefined ? undefined : Math.max(1, Math.ceil(deadline - now())) });
      for await (const message of stream) {
        client.heard();
        const hadHeader = receiver.header !== undefined;
        await receiver.take(message);
        if (deadline === undefined && !hadHeader && receiver.header !== undefined) expireIn(transferMs(receiver.header.sizeBytes));
      }
    } catch (reason) {
      if (late) {
        throw new DeadlineExceeded(`ingest-api at ${client.ingestAddress} did not send ${id} in time`,
          { reason: "DEADLINE_EXCEEDED", service: INGEST, address: client.ingestAddress });
      }
      throw reason;
    } finally {
      clearTimeout(timer);
    }
  }

  /** The document now, then each change, until READY or FAILED (pushed by the server). A dropped
   * connection is reopened and the watch goes on; after `timeoutMs`, WaitTimeout (its `documents`
   * hold the last state). */
  async *watch(id: string, options: { timeoutMs?: number } = {}): AsyncGenerator<Document> {
    const client = this.client;
    const policy = client.policy;
    const deadline = options.timeoutMs ? now() + options.timeoutMs : undefined;
    let last: Document | undefined;
    let failures = 0;
    while (last === undefined || !last.done) {
      const remaining = deadline === undefined ? undefined : deadline - now();
      if (remaining !== undefined && remaining <= 0) throw timeoutError([last ?? new Document(create(DocumentSchema, { id }))]);
      await sleep(client.pacer.reserve());
      let error: SluiceError;
      try {
        const stream = this.service.watchDocument({ id }, { headers: client.headers,
          timeoutMs: remaining === undefined ? undefined : Math.max(1, Math.ceil(remaining)) });
        for await (const event of stream) {
          client.heard();
          failures = 0;
          const state = new Document(event.document ?? create(DocumentSchema, { id }));
          if (last === undefined || !equals(DocumentSchema, state.raw, last.raw)) {
            last = state;
            yield state;
          }
          if (state.done) return;
        }
        await sleep(200); // ended before READY or FAILED (a proxy closed it): reconnect, not in a busy loop
        continue;
      } catch (reason) {
        if (reason instanceof ConnectError && reason.code === Code.DeadlineExceeded && deadline !== undefined) continue;
        error = client.error(reason);
      }
      const wait = policy.nextWait(error, failures, deadline !== undefined ? deadline - now() : RECONNECT_WINDOW_MS);
      if (wait === undefined) throw error;
      if (error instanceof RateLimited) client.pacer.refused(error);
      else failures += 1;
      await sleep(wait);
    }
  }

  /** The document once READY or FAILED (WaitTimeout after `timeoutMs`). */
  async wait(id: string, options: { timeoutMs?: number; onChange?: (document: Document) => void } = {}): Promise<Document> {
    let last: Document | undefined;
    for await (const state of this.watch(id, options)) {
      last = state;
      options.onChange?.(state);
    }
    return last!;
  }
}

function timeoutError(documents: Document[]): WaitTimeout {
  const waiting = documents.filter((d) => !d.done);
  const message = waiting.length === 1
    ? `timed out waiting for ${waiting[0].filename || waiting[0].id} (still ${waiting[0].statusName})`
    : `timed out waiting for ${waiting.length} documents (still processing on the server)`;
  return new WaitTimeout(message, { documents });
}

export type { MetadataInput, Source, UploadOptions };
