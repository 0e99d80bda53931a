/**
 * Where the services are, which key to send and how to speak TLS (docs/clients.md, "Connecting").
 *
 * Each setting is taken from the option when given, else from the environment, else from the
 * default (the embedded `make run` on localhost), exactly as the Python SDK's config.py does:
 *
 * | setting              | option                     | environment                               |
 * |----------------------|----------------------------|-------------------------------------------|
 * | ingest-api           | `address`                  | SLUICE_INGEST_ADDRESS (localhost:50051)   |
 * | search               | `searchAddress`            | SLUICE_SEARCH_ADDRESS (localhost:50052)   |
 * | API key              | `apiKey`                   | SLUICE_API_KEY, else the credentials file |
 * | TLS: servers' CA     | `caFile`                   | SLUICE_TLS_CA_FILE                        |
 * | TLS: client cert/key | `certFile`, `keyFile`      | SLUICE_TLS_CLIENT_CERT_FILE / _KEY_FILE   |
 * | act for a tenant     | `tenant` (admin keys)      | SLUICE_TENANT                             |
 *
 * The credentials file is the one `make run` writes: SLUICE_CREDENTIALS, else ./.sluice/credentials,
 * else $SLUICE_DEV_HOME/credentials; its client key serves the calls of this SDK.
 */
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";

import { ConfigError } from "./errors.js";

export const DEFAULT_INGEST_ADDRESS = "localhost:50051";
export const DEFAULT_SEARCH_ADDRESS = "localhost:50052";

function env(name: string): string {
  return process.env[name] ?? "";
}

export function ingestAddress(explicit?: string): string {
  return explicit || env("SLUICE_INGEST_ADDRESS") || DEFAULT_INGEST_ADDRESS;
}

export function searchAddress(explicit?: string): string {
  return explicit || env("SLUICE_SEARCH_ADDRESS") || DEFAULT_SEARCH_ADDRESS;
}

/** The credentials file `make run` wrote, if one is found. */
export function credentialsFile(): string | undefined {
  const candidates = [env("SLUICE_CREDENTIALS"), join(".sluice", "credentials")];
  if (env("SLUICE_DEV_HOME")) candidates.push(join(env("SLUICE_DEV_HOME"), "credentials"));
  return candidates.find((path) => path && existsSync(path) && statSync(path).isFile());
}

/** The key for ordinary calls and the one for administration (the same when one key was given). */
export interface Keys {
  client: string;
  admin: string;
}

export function resolveKeys(apiKey?: string): Keys {
  const explicit = (apiKey || env("SLUICE_API_KEY")).trim();
  if (explicit) return { client: explicit, admin: explicit };
  const path = credentialsFile();
  if (path === undefined) return { client: "", admin: "" };
  let keys: unknown;
  try {
    keys = (JSON.parse(readFileSync(path, "utf8")) as { keys?: unknown }).keys ?? {};
  } catch {
    throw new ConfigError(`the credentials file ${path} is not valid JSON; delete it and restart \`make run\``,
      { reason: "CREDENTIALS_INVALID" });
  }
  if (typeof keys !== "object" || keys === null || Array.isArray(keys)) return { client: "", admin: "" };
  const record = keys as Record<string, unknown>;
  const client = String(record.client ?? "");
  return { client, admin: String(record.admin || client) };
}

/** TLS towards the services: the CA that signed their certificates and, for mutual TLS, the
 * client's certificate and key (PEM files). None given: plaintext (fine on localhost). */
export interface TlsFiles {
  caFile?: string;
  certFile?: string;
  keyFile?: string;
}

export interface ResolvedTls {
  enabled: boolean;
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
}

/** Options first, then SLUICE_TLS_CA_FILE, SLUICE_TLS_CLIENT_CERT_FILE, SLUICE_TLS_CLIENT_KEY_FILE;
 * the files are read at once (ConfigError when one cannot be). */
export function resolveTls(files: TlsFiles = {}): ResolvedTls {
  const caFile = files.caFile || env("SLUICE_TLS_CA_FILE");
  const certFile = files.certFile || env("SLUICE_TLS_CLIENT_CERT_FILE");
  const keyFile = files.keyFile || env("SLUICE_TLS_CLIENT_KEY_FILE");
  if (!caFile && !certFile) return { enabled: false };
  if (Boolean(certFile) !== Boolean(keyFile)) {
    throw new ConfigError("a client certificate needs its key, and a key its certificate (give both: certFile and " +
      "keyFile, or SLUICE_TLS_CLIENT_CERT_FILE and SLUICE_TLS_CLIENT_KEY_FILE)", { reason: "TLS_CONFIG_INVALID" });
  }
  return {
    enabled: true,
    ca: caFile ? read(caFile, "CA certificate") : undefined,
    cert: certFile ? read(certFile, "client certificate") : undefined,
    key: keyFile ? read(keyFile, "client key") : undefined,
  };
}

function read(path: string, what: string): Buffer {
  try {
    return readFileSync(path);
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code ?? String(error);
    throw new ConfigError(`cannot read the ${what} ${path}: ${reason}`, { reason: "TLS_CONFIG_INVALID" });
  }
}
