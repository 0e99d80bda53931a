/**
 * The console's one door to Sluice: the public API through the gateway, on the page's own origin
 * (docs/console.md, "The API"). Every call carries the session's key as `Authorization: Bearer`.
 *
 * - `documents`, `search`, `admin`, `sources`, `webhooks`: Connect clients of the SDK's generated
 *   service descriptors (clients/typescript/src/gen), JSON over the Connect protocol (POSTs), the
 *   watches as Connect server streams.
 * - `uploadFile`: the gateway's HTTP upload route, with upload progress.
 * - `fetchOriginal`: a document's original bytes (GET /v1/documents/{id}/content, the key in a header).
 * - `errorInfo`: any failure as {code, message, reason}, for ui/error.tsx.
 */
import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { MethodOptions_IdempotencyLevel } from "@bufbuild/protobuf/wkt";
import { AdminService } from "@gen/admin_service_pb.js";
import { DocumentService } from "@gen/document_service_pb.js";
import { SearchService } from "@gen/search_service_pb.js";
import { SourceService } from "@gen/source_service_pb.js";
import { WebhookService } from "@gen/webhook_service_pb.js";
import { authHeaders, lowerToReader } from "./session";

const withKey: Interceptor = (next) => async (req) => {
  for (const [name, value] of Object.entries(authHeaders())) req.header.set(name, value);
  try {
    return await next(req);
  } catch (err) {
    // A write the server refused for the key's role: hide the write actions from now on.
    const write = req.method.methodKind === "unary" && req.method.idempotency !== MethodOptions_IdempotencyLevel.NO_SIDE_EFFECTS;
    if (write && err instanceof ConnectError && err.code === Code.PermissionDenied && reasonOf(err) === "ROLE_NOT_ALLOWED") {
      lowerToReader();
    }
    throw err;
  }
};

/** The transport every client shares: Connect's protocol in JSON. */
export const transport = createConnectTransport({
  baseUrl: location.origin,
  useBinaryFormat: false,
  useHttpGet: false, // a GET puts the request (a search query) in the URL, hence in access logs
  interceptors: [withKey],
});

export const documents = createClient(DocumentService, transport);

/** The watches (WatchCollection, WatchDocument) in binary protobuf: thousands of events a second
 * decode several times faster than their JSON (docs/console.md#speed). */
export const streams = createClient(
  DocumentService,
  createConnectTransport({ baseUrl: location.origin, useBinaryFormat: true, interceptors: [withKey] }),
);
export const search = createClient(SearchService, transport);
export const admin = createClient(AdminService, transport);
export const sources = createClient(SourceService, transport);
export const webhooks = createClient(WebhookService, transport);

/** A failure as a person should read it. */
export interface ErrorInfo {
  /** The Connect code, e.g. "permission_denied". */
  code: string;
  message: string;
  /** The ErrorInfo reason in UPPER_SNAKE_CASE, when the server gave one. */
  reason: string;
}

const CODE_NAMES: Record<number, string> = Object.fromEntries(
  Object.entries(Code)
    .filter(([, value]) => typeof value === "number")
    .map(([name, value]) => [value, name.replace(/[A-Z]/g, (c, i) => (i ? "_" : "") + c.toLowerCase())]),
);

function reasonOf(err: ConnectError): string {
  for (const detail of err.details) {
    if ("debug" in detail && detail.type === "google.rpc.ErrorInfo") {
      const debug = detail.debug as { reason?: string } | undefined;
      if (debug?.reason) return debug.reason;
    }
  }
  return "";
}

/** A failure thrown by the HTTP routes (upload, content): the gateway's Connect error body. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly info: ErrorInfo,
  ) {
    super(info.message);
  }
}

export function errorInfo(err: unknown): ErrorInfo {
  if (err instanceof HttpError) return err.info;
  if (err instanceof ConnectError) return { code: CODE_NAMES[err.code] ?? "unknown", message: err.rawMessage, reason: reasonOf(err) };
  if (err instanceof Error) return { code: "unknown", message: err.message, reason: "" };
  return { code: "unknown", message: String(err), reason: "" };
}

function httpError(status: number, body: string): HttpError {
  try {
    const parsed = JSON.parse(body) as { code?: string; message?: string; reason?: string };
    return new HttpError(status, { code: parsed.code ?? `http_${status}`, message: parsed.message ?? body, reason: parsed.reason ?? "" });
  } catch {
    return new HttpError(status, { code: `http_${status}`, message: body.slice(0, 300) || `HTTP ${status}`, reason: "" });
  }
}

export interface UploadHandle {
  /** The Document as JSON (protobuf's JSON mapping), once stored. */
  done: Promise<{ id: string; filename: string; status?: string }>;
  abort(): void;
}

/** Uploads one file through POST /v1/collections/{collection}/documents (docs/http.md#uploads),
 * reporting the bytes sent. XMLHttpRequest, because fetch() reports no upload progress. */
export function uploadFile(collection: string, file: Blob, filename: string, onProgress: (sent: number, total: number) => void): UploadHandle {
  const xhr = new XMLHttpRequest();
  const done = new Promise<{ id: string; filename: string; status?: string }>((resolve, reject) => {
    xhr.open("POST", `/v1/collections/${encodeURIComponent(collection)}/documents?filename=${encodeURIComponent(filename)}`);
    for (const [name, value] of Object.entries(authHeaders())) xhr.setRequestHeader(name, value);
    if (file.type) xhr.setRequestHeader("Content-Type", file.type);
    xhr.upload.onprogress = (event) => onProgress(event.loaded, event.lengthComputable ? event.total : file.size);
    xhr.onload = () => {
      if (xhr.status === 200) resolve(JSON.parse(xhr.responseText));
      else {
        const error = httpError(xhr.status, xhr.responseText);
        if (xhr.status === 403 && error.info.reason === "ROLE_NOT_ALLOWED") lowerToReader();
        reject(error);
      }
    };
    xhr.onerror = () => reject(new HttpError(0, { code: "unavailable", message: "the upload's connection failed", reason: "" }));
    xhr.onabort = () => reject(new HttpError(0, { code: "cancelled", message: "upload cancelled", reason: "" }));
    xhr.send(file);
  });
  return { done, abort: () => xhr.abort() };
}

/** A document's original bytes, with the media type stored with it. The key goes in a header,
 * never in the URL. */
export async function fetchOriginal(documentId: string): Promise<{ bytes: ArrayBuffer; mimeType: string }> {
  const response = await fetch(`/v1/documents/${encodeURIComponent(documentId)}/content`, { headers: authHeaders(), cache: "no-store" });
  if (!response.ok) throw httpError(response.status, await response.text());
  return { bytes: await response.arrayBuffer(), mimeType: response.headers.get("Content-Type") ?? "application/octet-stream" };
}

/** Saves a document's original under its file name: fetch, a Blob URL and a download attribute. */
export async function downloadOriginal(documentId: string, filename: string): Promise<void> {
  const { bytes, mimeType } = await fetchOriginal(documentId);
  const url = URL.createObjectURL(new Blob([bytes], { type: mimeType }));
  const link = document.createElement("a");
  link.href = url;
  link.download = filename.split("/").pop() || "document";
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}
