/**
 * The TypeScript client of Sluice: upload documents, follow their processing, search them.
 *
 *     import { Client } from "@sluice/client";
 *
 *     const client = new Client(); // SLUICE_* variables, else make run's localhost and .sluice/credentials
 *     const doc = await client.documents.wait((await client.documents.upload("docs", "report.pdf")).id);
 *     for (const hit of await client.search("docs", "how do leases expire", { topK: 5 })) console.log(hit.filename, hit.text);
 *
 * The same surface, retries, upload integrity and errors as the Python SDK (clients/python);
 * docs/clients.md is the guide.
 */
export {
  Client, CollectionWatch, Collections, Documents, INGEST, PAGE_SIZE, RECONNECT_WINDOW_MS, SEARCH,
  type ClientOptions, type CreateCollectionOptions, type ListChunksOptions, type SearchOptions, type SourceKey,
  type UpdateChunkOptions, type WatchCollectionOptions,
} from "./client.js";
export { MIN_TRANSFER_MS, safeFilename } from "./downloads.js";
export { Admin, ApiKey, ROLES, Tenant, WEBHOOK_EVENT_TYPES, Webhook, WebhookDelivery, Webhooks, webhookEventName, type NewApiKey,
  type NewWebhook } from "./admin.js";
export { DocumentTracker, UploadResult, findFiles, type UploadFolderOptions, type UploadManyOptions } from "./bulk.js";
export * from "./errors.js";
export { condition, metadataValue, parseValue, where, type MetadataInput } from "./filters.js";
export { PACE_FRACTION, Pacer, RetryPolicy, type RetryPolicyOptions } from "./retry.js";
export * from "./types.js";
export { CHUNK_BYTES, PreparedUpload, guessMimeType, metadataMessage, prepare, requestId, type Source, type UploadOptions } from "./uploads.js";
export { credentialsFile, resolveKeys, type TlsFiles } from "./config.js";
export { DataSource, ENDED_STATES, SourceKind, SourceRun, SourceRunState, Sources, specMessage, type CreateSourceOptions,
  type SourceKindName, type SourceRunStateName, type SourceSpec, type SyncSourceOptions } from "./sources.js";
export { DEFAULT_MAX_DELETE_SHARE, MASS_DELETE_FLOOR, SyncReport, checkMassDelete, folderFiles, plan as planSync, sourceUriOf,
  type SyncFailure, type SyncFolderOptions, type SyncPlan, type SyncUpload } from "./sync.js";
