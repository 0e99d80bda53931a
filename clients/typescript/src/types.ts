/**
 * What calls return: plain objects made from the messages, with the message kept as `raw` (the
 * Python SDK's types.py). Enums are the generated ones, named without their protobuf prefix
 * (`DocumentStatus.READY`); times are `Date`s (undefined when unset); int64 fields are `bigint`s;
 * typed metadata holds JavaScript values (string, number, boolean, Date, string[]).
 */
import { create } from "@bufbuild/protobuf";
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";

import { EmbedderProvider, GenerationState, type Collection as CollectionMessage, type CollectionGeneration, type EmbedderConfig as EmbedderConfigMessage } from "./gen/sluice/v1/collection_pb.js";
import { AttemptOutcome, DocumentStatus, type Document as DocumentMessage, type MetadataValue } from "./gen/sluice/v1/document_pb.js";
import {
  CollectionEventType, type CollectionEvent as CollectionEventMessage, type DocumentChunk as DocumentChunkMessage,
  type DownloadDocumentHeader, type ListChunksResponse, type SourceRunEvent as SourceRunEventMessage,
} from "./gen/sluice/v1/document_service_pb.js";
import { SourceRunSchema } from "./gen/sluice/v1/source_service_pb.js";
import { SourceRun } from "./sources.js";
import { RerankStatus, SearchMode, type HitExplanation as HitExplanationMessage, type SearchHit, type SearchResponse } from "./gen/sluice/v1/search_service_pb.js";

export { AttemptOutcome, CollectionEventType, DocumentStatus, EmbedderProvider, GenerationState, RerankStatus, SearchMode };

/** Who computes a collection's vectors: "local" (a model on the servers' CPU, offline), "hashing"
 * (fast, for tests) or "openai" (any OpenAI-compatible API configured on the servers). */
export type Embedder = "local" | "hashing" | "openai" | "unspecified";

const PROVIDERS: Record<Embedder, EmbedderProvider> = {
  hashing: EmbedderProvider.HASHING,
  local: EmbedderProvider.SENTENCE_TRANSFORMERS,
  openai: EmbedderProvider.OPENAI,
  unspecified: EmbedderProvider.UNSPECIFIED,
};

export function embedderProvider(embedder: Embedder | EmbedderProvider | undefined): EmbedderProvider {
  if (embedder === undefined) return EmbedderProvider.UNSPECIFIED;
  if (typeof embedder === "number") return embedder;
  const provider = PROVIDERS[embedder.toLowerCase() as Embedder];
  if (provider === undefined) throw new Error(`unknown embedder ${JSON.stringify(embedder)}; use local, hashing or openai`);
  return provider;
}

export function embedderName(provider: EmbedderProvider): Embedder {
  return (Object.keys(PROVIDERS) as Embedder[]).find((name) => PROVIDERS[name] === provider) ?? "unspecified";
}

/** A status from its name ("ready", "DOCUMENT_STATUS_READY"), number or itself. */
export function documentStatus(value: DocumentStatus | string | undefined): DocumentStatus {
  if (value === undefined) return DocumentStatus.UNSPECIFIED;
  if (typeof value === "number") return value;
  const name = value.trim().toUpperCase().replace(/^DOCUMENT_STATUS_/, "");
  const status = (DocumentStatus as unknown as Record<string, DocumentStatus>)[name];
  if (status === undefined) {
    throw new Error(`unknown status ${JSON.stringify(value)}; use one of pending, parsing, chunking, embedding, indexing, ready, failed`);
  }
  return status;
}

/** A search mode from its name ("hybrid", "SEARCH_MODE_VECTOR"), number or itself. */
export function searchMode(value: SearchMode | string | undefined): SearchMode {
  if (value === undefined) return SearchMode.UNSPECIFIED;
  if (typeof value === "number") return value;
  const mode = (SearchMode as unknown as Record<string, SearchMode>)[value.trim().toUpperCase().replace(/^SEARCH_MODE_/, "")];
  if (mode === undefined) throw new Error(`unknown search mode ${JSON.stringify(value)}; use vector, keyword or hybrid`);
  return mode;
}

function time(stamp: Timestamp | undefined): Date | undefined {
  if (stamp === undefined || (stamp.seconds === 0n && stamp.nanos === 0)) return undefined;
  return timestampDate(stamp);
}

/** A JavaScript value from a MetadataValue. */
export function jsValue(value: MetadataValue): string | number | boolean | Date | string[] | undefined {
  switch (value.kind.case) {
    case "timestampValue":
      return timestampDate(value.kind.value);
    case "stringListValue":
      return [...value.kind.value.values];
    case undefined:
      return undefined;
    default:
      return value.kind.value;
  }
}

/** How far the current stage has come (`done` of `total` `unit`s; total 0 while unknown). */
export interface Progress {
  stage: DocumentStatus;
  done: bigint;
  total: bigint;
  unit: string;
}

/** One processing attempt of a document (`attemptHistory`, from `documents.get`). */
export interface Attempt {
  number: number;
  workerId: string;
  stage: DocumentStatus;
  /** SUCCEEDED, RETRYABLE_FAILURE, PERMANENT_FAILURE, LEASE_EXPIRED, RELEASED, CANCELLED, RUNNING */
  outcome: string;
  errorCode: string;
  errorMessage: string;
  retryable: boolean;
  startTime: Date | undefined;
  endTime: Date | undefined;
}

/** An uploaded file and where its processing is. */
export class Document {
  readonly id: string;
  readonly name: string;
  readonly collection: string;
  readonly filename: string;
  readonly mimeType: string;
  readonly status: DocumentStatus;
  readonly errorMessage: string;
  readonly errorCode: string;
  readonly progress: Progress | undefined;
  readonly attempts: number;
  readonly maxAttempts: number;
  readonly chunkCount: number;
  readonly contentSha256: string;
  readonly sizeBytes: bigint;
  readonly metadata: Record<string, string>;
  readonly typedMetadata: Record<string, ReturnType<typeof jsValue>>;
  readonly createTime: Date | undefined;
  readonly updateTime: Date | undefined;
  readonly nextAttemptTime: Date | undefined;
  readonly attemptHistory: Attempt[];
  /** The path or URL naming the document in its source ("" without one); its versions share it. */
  readonly sourceUri: string;
  /** This version's number among the versions of its sourceUri (0 without a sourceUri). */
  readonly version: number;

  constructor(readonly raw: DocumentMessage) {
    this.id = raw.id;
    this.name = raw.name;
    this.collection = raw.collection;
    this.filename = raw.filename;
    this.mimeType = raw.mimeType;
    this.status = raw.status;
    this.errorMessage = raw.errorMessage;
    this.errorCode = raw.errorCode;
    const p = raw.progress;
    this.progress = p && p.stage ? { stage: p.stage, done: p.done, total: p.total, unit: p.unit } : undefined;
    this.attempts = raw.attempts;
    this.maxAttempts = raw.maxAttempts;
    this.chunkCount = raw.chunkCount;
    this.contentSha256 = raw.contentSha256;
    this.sourceUri = raw.sourceUri;
    this.version = raw.version;
    this.sizeBytes = raw.sizeBytes;
    this.metadata = { ...raw.metadata };
    this.typedMetadata = Object.fromEntries(Object.entries(raw.typedMetadata).map(([k, v]) => [k, jsValue(v)]));
    this.createTime = time(raw.createTime);
    this.updateTime = time(raw.updateTime);
    this.nextAttemptTime = raw.nextAttemptTime ? timestampDate(raw.nextAttemptTime) : undefined;
    this.attemptHistory = raw.attemptHistory.map((a) => ({
      number: a.number, workerId: a.workerId, stage: a.stage, outcome: AttemptOutcome[a.outcome], errorCode: a.errorCode,
      errorMessage: a.errorMessage, retryable: a.retryable, startTime: time(a.startTime), endTime: time(a.endTime),
    }));
  }

  /** The status's name: PENDING, PARSING, …, READY, FAILED. */
  get statusName(): string {
    return DocumentStatus[this.status];
  }

  /** READY or FAILED: nothing more happens to the document unless someone asks. */
  get done(): boolean {
    return this.status === DocumentStatus.READY || this.status === DocumentStatus.FAILED;
  }

  get ready(): boolean {
    return this.status === DocumentStatus.READY;
  }

  get failed(): boolean {
    return this.status === DocumentStatus.FAILED;
  }
}

/** A collection's embedder: who (`provider`), which `model`, how many `dimensions`. */
export interface EmbedderConfig {
  provider: Embedder;
  model: string;
  dimensions: number;
}

/** One index generation of a collection (a reindex builds a new one; docs/search.md). */
export interface Generation {
  number: number;
  /** BUILDING, ACTIVE, RETIRED, CANCELLED */
  state: string;
  embedder: EmbedderConfig;
  documentsTotal: bigint;
  documentsReady: bigint;
  documentsFailed: bigint;
  documentsPending: bigint;
  raw: CollectionGeneration;
}

function embedder(config: EmbedderConfigMessage | undefined): EmbedderConfig {
  return { provider: embedderName(config?.provider ?? EmbedderProvider.UNSPECIFIED), model: config?.model ?? "",
    dimensions: config?.dimensions ?? 0 };
}

/** A named set of documents that share one embedder and chunking. */
export class Collection {
  readonly name: string;
  readonly description: string;
  readonly embedder: EmbedderConfig;
  readonly chunkMaxCharacters: number;
  readonly chunkOverlap: number;
  readonly maxAttempts: number;
  readonly documentCount: bigint;
  readonly readyDocumentCount: bigint;
  readonly createTime: Date | undefined;
  readonly generations: Generation[];

  constructor(readonly raw: CollectionMessage) {
    this.name = raw.name;
    this.description = raw.description;
    this.embedder = embedder(raw.embedder);
    this.chunkMaxCharacters = raw.chunking?.maxCharacters ?? 0;
    this.chunkOverlap = raw.chunking?.overlap ?? 0;
    this.maxAttempts = raw.maxAttempts;
    this.documentCount = raw.documentCount;
    this.readyDocumentCount = raw.readyDocumentCount;
    this.createTime = time(raw.createTime);
    this.generations = raw.generations.map((g) => ({
      number: g.number, state: GenerationState[g.state], embedder: embedder(g.embedder), documentsTotal: g.documentsTotal,
      documentsReady: g.documentsReady, documentsFailed: g.documentsFailed, documentsPending: g.documentsPending, raw: g,
    }));
  }
}

/** Why a hit ranked where it did (`search(…, { explain: true })`; docs/search.md, "Why a hit ranked").
 * A list the hit was not in (the keyword list of a chunk without the query's words, or a side the
 * mode does not use) leaves its rank undefined, and its score too unless search measured it for the
 * explanation (a HYBRID hit outside the keyword list scores 0 there); undefined is never a score of
 * 0. The HYBRID parts are undefined in another mode, the reranker's score when it did not answer in
 * time. Ranks count from 1. */
export class HitExplanation {
  readonly keywordScore: number | undefined;
  readonly keywordRank: number | undefined;
  readonly vectorSimilarity: number | undefined;
  readonly vectorRank: number | undefined;
  /** HYBRID: the fused score (the hit's first-stage score); the mode's score otherwise. */
  readonly fusedScore: number;
  /** HYBRID: the keyword list's part of the fused score. */
  readonly keywordContribution: number | undefined;
  /** HYBRID: the vector list's part of the fused score. */
  readonly vectorContribution: number | undefined;
  /** HYBRID: the vector list's weight for this query (the keyword list's is 1 minus it). */
  readonly vectorWeight: number | undefined;
  readonly firstStageRank: number;
  readonly rerankScore: number | undefined;
  /** As SearchResults.rerankStatus. */
  readonly rerankStatus: string;
  /** The query's terms (stemmed as the keyword index stems them) that the chunk contains. */
  readonly matchedTerms: string[];

  constructor(readonly raw: HitExplanationMessage) {
    // proto3 `optional`: an unset field is undefined here, a real 0 stays 0.
    this.keywordScore = raw.keywordScore;
    this.keywordRank = raw.keywordRank;
    this.vectorSimilarity = raw.vectorSimilarity;
    this.vectorRank = raw.vectorRank;
    this.fusedScore = raw.fusedScore;
    this.keywordContribution = raw.keywordContribution;
    this.vectorContribution = raw.vectorContribution;
    this.vectorWeight = raw.vectorWeight;
    this.firstStageRank = raw.firstStageRank;
    this.rerankScore = raw.rerankScore;
    this.rerankStatus = RerankStatus[raw.rerankStatus] ?? `UNKNOWN_${raw.rerankStatus}`;
    this.matchedTerms = [...raw.matchedTerms];
  }
}

/** One matching chunk: its text, score, document and position. */
export class Hit {
  readonly text: string;
  readonly score: number;
  readonly documentId: string;
  readonly filename: string;
  readonly chunkIndex: number;
  /** The chunk's id, for documents.disableChunk / enableChunk / editChunk. */
  readonly chunkId: string;
  /** 0 when the format has no pages. */
  readonly pageNumber: number;
  readonly metadata: Record<string, string>;
  /** With `neighbors` > 0: this chunk and its neighbours; else "". */
  readonly context: string;
  /** With `explain: true`: why the hit ranked here; else undefined. */
  readonly explanation: HitExplanation | undefined;

  constructor(readonly raw: SearchHit) {
    this.text = raw.text;
    this.score = raw.score;
    this.documentId = raw.documentId;
    this.filename = raw.filename;
    this.chunkIndex = raw.chunkIndex;
    this.chunkId = raw.chunkId;
    this.pageNumber = raw.pageNumber;
    this.metadata = { ...raw.metadata };
    this.context = raw.context;
    this.explanation = raw.explanation ? new HitExplanation(raw.explanation) : undefined;
  }
}

/** The hits, best first (iterate it, or read `hits`), with how they were found. */
export class SearchResults implements Iterable<Hit> {
  readonly hits: Hit[];

  constructor(readonly raw: SearchResponse) {
    this.hits = raw.hits.map((hit) => new Hit(hit));
  }

  get length(): number {
    return this.hits.length;
  }

  get mode(): SearchMode {
    return this.raw.mode;
  }

  /** UNSPECIFIED (not asked for), APPLIED, FAILED, TIMED_OUT or SKIPPED. */
  get rerankStatus(): string {
    return RerankStatus[this.raw.rerank?.status ?? RerankStatus.UNSPECIFIED];
  }

  /** The index generation that answered (`generation` asks for one). */
  get generation(): number {
    return this.raw.generation;
  }

  [Symbol.iterator](): Iterator<Hit> {
    return this.hits[Symbol.iterator]();
  }
}

/** A sync run as one of its events on WatchCollection left it (`CollectionEvent.sourceRun`): the
 * source's name and display name, and the run with its state and counts then. */
export class SourceRunEvent {
  readonly source: string;
  readonly sourceDisplayName: string;
  readonly run: SourceRun;

  constructor(readonly raw: SourceRunEventMessage) {
    this.source = raw.source;
    this.sourceDisplayName = raw.sourceDisplayName;
    this.run = new SourceRun(raw.run ?? create(SourceRunSchema, {}));
  }
}

/** One change of a document of a watched collection, or one event of a sync run of its sources
 * (asked for with `sourceRuns`); `cursor` resumes after it. `kind` is CHANGED, DELETED, HEARTBEAT
 * (no document: the server read up to `cursor`), SOURCE_RUN_STARTED, SOURCE_RUN_PROGRESS or
 * SOURCE_RUN_FINISHED (`sourceRun` is set, `document` is not), or UNKNOWN_<n> for a kind this SDK
 * is older than. */
export class CollectionEvent {
  readonly cursor: string;
  readonly eventId: bigint;
  readonly kind: string;
  readonly document: Document | undefined;
  readonly sourceRun: SourceRunEvent | undefined;
  readonly time: Date | undefined;

  constructor(readonly raw: CollectionEventMessage) {
    this.cursor = raw.cursor;
    this.eventId = raw.eventId;
    this.kind = CollectionEventType[raw.type] ?? `UNKNOWN_${raw.type}`;
    this.document = raw.document ? new Document(raw.document) : undefined;
    this.sourceRun = raw.sourceRun ? new SourceRunEvent(raw.sourceRun) : undefined;
    this.time = time(raw.createTime);
  }

  get isSourceRun(): boolean {
    return this.sourceRun !== undefined;
  }
}

/** Where an element of a chunk lies on its page (PDF and images): edges 0 to 1, page from 1. */
export interface BoundingBox {
  pageNumber: number;
  left: number;
  top: number;
  right: number;
  bottom: number;
}

/** One chunk of a document as an index generation holds it (`documents.listChunks`, and what
 * `disableChunk`, `enableChunk` and `editChunk` resolve to). `etag` changes whenever the chunk
 * does: pass it back to refuse a lost update (Aborted, reason CHUNK_CHANGED). */
export class Chunk {
  readonly id: string;
  readonly documentId: string;
  readonly chunkIndex: number;
  /** The edited text when it was edited. */
  readonly text: string;
  /** 0 when the format has no pages. */
  readonly pageNumber: number;
  readonly elementType: string;
  readonly elementTypes: string[];
  readonly sectionTitle: string;
  /** Tables only. */
  readonly textAsHtml: string;
  readonly boxes: BoundingBox[];
  /** Words as the keyword index counts them. */
  readonly tokenCount: number;
  readonly characterCount: number;
  readonly generation: number;
  /** false: search does not return it. */
  readonly enabled: boolean;
  readonly edited: boolean;
  /** The parser's text, when edited. */
  readonly originalText: string;
  /** text_layer, ocr or mixed. */
  readonly textSource: string;
  readonly ocrConfidence: number;
  readonly updateTime: Date | undefined;
  readonly etag: string;

  constructor(readonly raw: DocumentChunkMessage) {
    this.id = raw.id;
    this.documentId = raw.documentId;
    this.chunkIndex = raw.chunkIndex;
    this.text = raw.text;
    this.pageNumber = raw.pageNumber;
    this.elementType = raw.elementType;
    this.elementTypes = [...raw.elementTypes];
    this.sectionTitle = raw.sectionTitle;
    this.textAsHtml = raw.textAsHtml;
    this.boxes = raw.boxes.map((b) => ({ pageNumber: b.pageNumber, left: b.left, top: b.top, right: b.right, bottom: b.bottom }));
    this.tokenCount = raw.tokenCount;
    this.characterCount = raw.characterCount;
    this.generation = raw.generation;
    this.enabled = raw.enabled;
    this.edited = raw.edited;
    this.originalText = raw.originalText;
    this.textSource = raw.textSource;
    this.ocrConfidence = raw.ocrConfidence;
    this.updateTime = time(raw.updateTime);
    this.etag = raw.etag;
  }
}

/** One page of a document's chunks, in chunk_index order (iterable); `nextPageToken` is empty on the
 * last page; `totalSize` counts the document's chunks in `generation`, enabled or not. */
export class ChunkPage implements Iterable<Chunk> {
  readonly chunks: Chunk[];
  readonly nextPageToken: string;
  readonly totalSize: number;
  readonly generation: number;

  constructor(readonly raw: ListChunksResponse) {
    this.chunks = raw.chunks.map((c) => new Chunk(c));
    this.nextPageToken = raw.nextPageToken;
    this.totalSize = raw.totalSize;
    this.generation = raw.generation;
  }

  get length(): number {
    return this.chunks.length;
  }

  [Symbol.iterator](): Iterator<Chunk> {
    return this.chunks[Symbol.iterator]();
  }
}

/** What `documents.download(id, path)` wrote: the header's description of the bytes (checked: the
 * size and SHA-256 of what arrived are these) and the file they are in. */
export interface DownloadedDocument {
  filename: string;
  mimeType: string;
  sizeBytes: bigint;
  contentSha256: string;
  path: string;
  raw: DownloadDocumentHeader;
}
