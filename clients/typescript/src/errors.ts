/**
 * Errors that carry the status code, the ErrorInfo reason and its metadata (docs/clients.md, "Errors").
 *
 * Every failed call throws a `SluiceError` (a subclass per status code: `NotFound`,
 * `InvalidArgument`, `RateLimited`, …) whose `reason` is the server's ErrorInfo reason in
 * UPPER_SNAKE_CASE (`COLLECTION_NOT_FOUND`) and `metadata` its details; `retryAfterMs` is the
 * RetryInfo delay when the server sent one. When the call never reached a server, the error says
 * what failed on the way: `ConnectionFailed` (nothing answers at the address) or `TLSError` (the
 * handshake failed). Errors of the SDK's own checks (a source that cannot be read or changed while
 * uploading, a wait that timed out, a configuration that cannot be read) have `code` undefined.
 * The same classes and fields as the Python SDK's errors.py.
 */
import { Code, ConnectError } from "@connectrpc/connect";

import { ErrorInfoSchema, RetryInfoSchema } from "./gen/google/rpc/error_details_pb.js";

/** gRPC's name of each status code (`NOT_FOUND`), the reason of an error without an ErrorInfo. */
export const CODE_NAMES: Record<Code, string> = {
  [Code.Canceled]: "CANCELLED",
  [Code.Unknown]: "UNKNOWN",
  [Code.InvalidArgument]: "INVALID_ARGUMENT",
  [Code.DeadlineExceeded]: "DEADLINE_EXCEEDED",
  [Code.NotFound]: "NOT_FOUND",
  [Code.AlreadyExists]: "ALREADY_EXISTS",
  [Code.PermissionDenied]: "PERMISSION_DENIED",
  [Code.ResourceExhausted]: "RESOURCE_EXHAUSTED",
  [Code.FailedPrecondition]: "FAILED_PRECONDITION",
  [Code.Aborted]: "ABORTED",
  [Code.OutOfRange]: "OUT_OF_RANGE",
  [Code.Unimplemented]: "UNIMPLEMENTED",
  [Code.Internal]: "INTERNAL",
  [Code.Unavailable]: "UNAVAILABLE",
  [Code.DataLoss]: "DATA_LOSS",
  [Code.Unauthenticated]: "UNAUTHENTICATED",
};

export interface SluiceErrorOptions {
  reason?: string;
  metadata?: Record<string, string>;
  code?: Code;
  retryAfterMs?: number;
  service?: string;
  address?: string;
  cause?: unknown;
}

/** A failed call: `code` (the gRPC status code as connect's `Code`, undefined for the SDK's own
 * errors), `reason`, `metadata` (ErrorInfo), `message`, `retryAfterMs` (RetryInfo), and which
 * `service` at which `address` answered. `toString()` is `message [REASON]`. */
export class SluiceError extends Error {
  readonly code: Code | undefined;
  readonly reason: string;
  readonly metadata: Record<string, string>;
  readonly retryAfterMs: number | undefined;
  readonly service: string;
  readonly address: string;

  constructor(message: string, options: SluiceErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = options.code ?? (new.target as unknown as { defaultCode?: Code }).defaultCode;
    this.reason = options.reason || (this.code !== undefined ? CODE_NAMES[this.code] : "");
    this.metadata = { ...(options.metadata ?? {}) };
    this.retryAfterMs = options.retryAfterMs;
    this.service = options.service ?? "";
    this.address = options.address ?? "";
  }

  /** gRPC's name of `code` (`NOT_FOUND`), "" for the SDK's own errors. */
  get codeName(): string {
    return this.code === undefined ? "" : CODE_NAMES[this.code];
  }

  override toString(): string {
    return this.reason ? `${this.message} [${this.reason}]` : this.message;
  }
}

export class Cancelled extends SluiceError { static defaultCode = Code.Canceled; }
export class Unknown extends SluiceError { static defaultCode = Code.Unknown; }
export class InvalidArgument extends SluiceError { static defaultCode = Code.InvalidArgument; }
export class DeadlineExceeded extends SluiceError { static defaultCode = Code.DeadlineExceeded; }
export class NotFound extends SluiceError { static defaultCode = Code.NotFound; }
export class AlreadyExists extends SluiceError { static defaultCode = Code.AlreadyExists; }
export class PermissionDenied extends SluiceError { static defaultCode = Code.PermissionDenied; }
/** A quota, the upload limit, or (RateLimited) the key's rate limit. */
export class ResourceExhausted extends SluiceError { static defaultCode = Code.ResourceExhausted; }
/** Too many calls with this key; `retryAfterMs` says when to come back. The SDK waits and retries
 * by itself within the call's deadline: this reaches you only when the deadline is shorter. */
export class RateLimited extends ResourceExhausted {}
export class FailedPrecondition extends SluiceError { static defaultCode = Code.FailedPrecondition; }
export class Aborted extends SluiceError { static defaultCode = Code.Aborted; }
export class OutOfRange extends SluiceError { static defaultCode = Code.OutOfRange; }
export class Unimplemented extends SluiceError { static defaultCode = Code.Unimplemented; }
export class Internal extends SluiceError { static defaultCode = Code.Internal; }
/** The service cannot answer now (restarting, its database away): retried by the SDK with
 * backoff; this reaches you when the retries ran out. */
export class Unavailable extends SluiceError { static defaultCode = Code.Unavailable; }
/** Nothing answers at the address (not running, wrong address, a network in between). */
export class ConnectionFailed extends Unavailable {}
/** The TLS handshake failed; `problem` says how (not retried: it will not heal by itself). */
export class TLSError extends Unavailable {
  readonly problem: string;

  constructor(message: string, options: SluiceErrorOptions & { problem: string }) {
    super(message, options);
    this.problem = options.problem;
  }
}
export class DataLoss extends SluiceError { static defaultCode = Code.DataLoss; }
/** No key, or a key that is malformed, unknown or revoked. */
export class Unauthenticated extends SluiceError { static defaultCode = Code.Unauthenticated; }

/** The source to upload could not be read, was empty, or changed while it was sent; nothing was stored. */
export class UploadSourceError extends SluiceError {}

/** The bytes a download received are not the ones its header announced: reason SIZE_MISMATCH (the
 * stream ended early, or ran long) or CHECKSUM_MISMATCH (another SHA-256), or the stream broke its
 * framing (DOWNLOAD_MALFORMED: bytes before the header, a second header). A download to a path
 * leaves nothing there. */
export class DownloadError extends SluiceError {}

/** A wait for a document ended before it was READY or FAILED; `documents` are the last states
 * known (they go on processing on the server). */
export class WaitTimeout extends SluiceError {
  readonly documents: unknown[];

  constructor(message: string, options: SluiceErrorOptions & { documents?: unknown[] } = {}) {
    super(message, { ...options, reason: "TIMEOUT" });
    this.documents = [...(options.documents ?? [])];
  }
}

/** `syncFolder` would delete more than its share of the collection's sources; nothing was uploaded
 * or deleted. `wouldDelete` of `sources`, against `maxDeleteShare`; the `sourceUris` it would
 * have deleted. */
export class MassDeleteRefused extends SluiceError {
  readonly wouldDelete: number;
  readonly sources: number;
  readonly maxDeleteShare: number;
  readonly sourceUris: string[];

  constructor(message: string, options: SluiceErrorOptions & { wouldDelete: number; sources: number; maxDeleteShare: number;
    sourceUris?: string[] }) {
    super(message, { ...options, reason: "MASS_DELETE_REFUSED" });
    this.wouldDelete = options.wouldDelete;
    this.sources = options.sources;
    this.maxDeleteShare = options.maxDeleteShare;
    this.sourceUris = [...(options.sourceUris ?? [])];
  }
}

/** The client's own configuration is wrong (a credentials file or certificate that cannot be read). */
export class ConfigError extends SluiceError {}

type ErrorClass = new (message: string, options: SluiceErrorOptions) => SluiceError;

const BY_CODE: Partial<Record<Code, ErrorClass>> = {
  [Code.Canceled]: Cancelled,
  [Code.Unknown]: Unknown,
  [Code.InvalidArgument]: InvalidArgument,
  [Code.DeadlineExceeded]: DeadlineExceeded,
  [Code.NotFound]: NotFound,
  [Code.AlreadyExists]: AlreadyExists,
  [Code.PermissionDenied]: PermissionDenied,
  [Code.ResourceExhausted]: ResourceExhausted,
  [Code.FailedPrecondition]: FailedPrecondition,
  [Code.Aborted]: Aborted,
  [Code.OutOfRange]: OutOfRange,
  [Code.Unimplemented]: Unimplemented,
  [Code.Internal]: Internal,
  [Code.Unavailable]: Unavailable,
  [Code.DataLoss]: DataLoss,
  [Code.Unauthenticated]: Unauthenticated,
};

/** (ErrorInfo reason, ErrorInfo metadata, RetryInfo delay in ms) of a failed call. */
export function statusDetails(error: ConnectError): { reason: string; metadata: Record<string, string>; retryAfterMs?: number } {
  let reason = "";
  let metadata: Record<string, string> = {};
  let retryAfterMs: number | undefined;
  try {
    const [info] = error.findDetails(ErrorInfoSchema);
    if (info !== undefined) {
      reason = info.reason;
      metadata = { ...info.metadata };
    }
    const [retry] = error.findDetails(RetryInfoSchema);
    if (retry?.retryDelay !== undefined) {
      retryAfterMs = Number(retry.retryDelay.seconds) * 1000 + retry.retryDelay.nanos / 1e6;
    }
  } catch {
    // malformed details must not hide the real error
  }
  return { reason, metadata, retryAfterMs };
}

// What a failed TLS handshake looks like in Node's error codes, and what it means.
const TLS_PROBLEMS: [RegExp, string, string][] = [
  [/CERTIFICATE_REQUIRED|ALERT_BAD_CERTIFICATE|ALERT_UNKNOWN_CA|ALERT_CERTIFICATE_UNKNOWN|ALERT_DECRYPT_ERROR/,
    "client certificate refused",
    "it requires a client certificate signed by a CA it trusts (certFile and keyFile, or SLUICE_TLS_CLIENT_CERT_FILE/_KEY_FILE)"],
  [/WRONG_VERSION_NUMBER|PACKET_LENGTH_TOO_LONG|RECORD_LAYER|HTTP_REQUEST/, "server does not speak TLS",
    "it answers in plaintext: leave out the CA file, or give the server a certificate"],
  [/CERT|SIGNATURE|SELF_SIGNED|UNABLE_TO_(GET|VERIFY)|ALTNAME/, "untrusted certificate",
    "its certificate is not signed by the CA given (caFile / SLUICE_TLS_CA_FILE), or has expired, or names another host"],
  [/HANDSHAKE|ALERT/, "handshake refused", "it refused the handshake"],
];

export interface Where {
  service?: string;
  address?: string;
  tls?: boolean;
}

/** What a call without a key is told. */
export const NO_KEY_MESSAGE = "no API key was sent: set SLUICE_API_KEY, or pass apiKey to the Client " +
  "(or run `make run`, whose credentials file the client reads)";

/** The SluiceError for anything a call threw (a ConnectError, or a Node error underneath). */
export function toSluiceError(reason: unknown, where: Where = {}): SluiceError {
  if (reason instanceof SluiceError) return reason;
  const error = ConnectError.from(reason);
  const { service = "", address = "" } = where;
  const details = statusDetails(error);
  if (!error.isWireError && (error.code === Code.Canceled || (error.code === Code.Aborted && wasReset(error)))) {
    // The HTTP/2 stream was reset under the call (the connection dropped: a restart, a proxy, the
    // network), not cancelled by the server: as gRPC's own clients say, UNAVAILABLE, to be retried.
    // connect-node reports a reset it reads as CANCELED or, with the socket's ECONNRESET, ABORTED.
    return new Unavailable(`the connection to ${service || "the server"} at ${address} was lost (${error.rawMessage})`,
      { reason: "CONNECTION_CLOSED", service, address, cause: reason });
  }
  if ((error.code === Code.Unavailable || error.code === Code.Unknown || error.code === Code.Internal) && !details.reason) {
    const transport = transportError(error, where);
    if (transport !== undefined) return transport;
  }
  let cls = BY_CODE[error.code] ?? SluiceError;
  // Full upload slots are the server's, not this key's: no pacing (retry.ts).
  if (cls === ResourceExhausted && details.retryAfterMs !== undefined && details.reason !== "TOO_MANY_UPLOADS") cls = RateLimited;
  let message = error.rawMessage.trim();
  if (error.code === Code.DeadlineExceeded && !details.reason) {
    message = address ? `${service || "the server"} at ${address} did not answer in time` : "the call timed out";
  }
  // The server's words speak of gRPC metadata; the SDK's user sets a key.
  if (details.reason === "API_KEY_MISSING") message = NO_KEY_MESSAGE;
  return new cls(message || "no details given", {
    code: error.code, reason: details.reason || CODE_NAMES[error.code], metadata: details.metadata,
    retryAfterMs: details.retryAfterMs, service, address, cause: reason,
  });
}

/** True when a Node socket error (ECONNRESET, EPIPE) is among the error's causes. */
function wasReset(error: ConnectError): boolean {
  return causes(error).some((e) => ["ECONNRESET", "EPIPE"].includes(nodeCode(e)));
}

/** The error and its causes, outermost first. */
function causes(reason: unknown): Error[] {
  const chain: Error[] = [];
  for (let e: unknown = reason; e instanceof Error && !chain.includes(e); e = (e as { cause?: unknown }).cause) chain.push(e);
  return chain;
}

function nodeCode(error: Error): string {
  const code = (error as { code?: unknown }).code;
  return typeof code === "string" ? code : "";
}

/** A failure before any server answered: name the cause (TLS, refused, reset) plainly; undefined
 * when the error came from a server. */
function transportError(error: ConnectError, { service = "", address = "", tls = false }: Where): SluiceError | undefined {
  const chain = causes(error);
  const codes = chain.map(nodeCode).filter(Boolean);
  const texts = chain.map((e) => `${nodeCode(e)} ${e.message}`).join(" | ");
  const name = service || "the server";
  const options = { service, address, cause: error };
  const tlsMarkers = codes.filter((c) => /^ERR_SSL|CERT|SELF_SIGNED|UNABLE_TO_(GET|VERIFY)|ERR_TLS/.test(c));
  if (tlsMarkers.length > 0 || /ssl|tls/i.test(texts)) {
    for (const [pattern, problem, explanation] of TLS_PROBLEMS) {
      if (pattern.test(tlsMarkers.join(" ") || texts)) {
        return new TLSError(`TLS handshake with ${name} at ${address} failed (${problem}): ${explanation}`,
          { ...options, problem, reason: "TLS_HANDSHAKE_FAILED" });
      }
    }
    return new TLSError(`TLS handshake with ${name} at ${address} failed`,
      { ...options, problem: "handshake failed", reason: "TLS_HANDSHAKE_FAILED" });
  }
  if (codes.includes("ECONNRESET") || codes.includes("ERR_HTTP2_SESSION_ERROR") || codes.includes("EPIPE")) {
    if (tls) { // the Client tells a refused client certificate from a dropped connection (client.ts)
      return new ConnectionFailed(`${name} at ${address} closed the connection`, { ...options, reason: "CONNECTION_CLOSED" });
    }
    return new ConnectionFailed(`${name} at ${address} closed the connection at once: it probably requires TLS ` +
      "(give the CA of its certificate: caFile or SLUICE_TLS_CA_FILE)", { ...options, reason: "CONNECTION_CLOSED" });
  }
  if (codes.includes("ECONNREFUSED")) {
    return new ConnectionFailed(`cannot reach ${name} at ${address} (connection refused)`, { ...options, reason: "UNAVAILABLE" });
  }
  if (codes.includes("ENOTFOUND") || codes.includes("EAI_AGAIN")) {
    return new ConnectionFailed(`cannot reach ${name} at ${address} (the host name does not resolve)`,
      { ...options, reason: "UNAVAILABLE" });
  }
  if (codes.some((c) => /^E(HOSTUNREACH|NETUNREACH|TIMEDOUT|CONNABORTED)$/.test(c))) {
    return new ConnectionFailed(`cannot reach ${name} at ${address} (no connection)`, { ...options, reason: "UNAVAILABLE" });
  }
  return undefined;
}
