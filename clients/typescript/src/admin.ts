/**
 * Webhooks and administration, as the Python SDK has them (`client.webhooks`, `client.admin`;
 * docs/webhooks.md, docs/clients.md). Each call retries as any call does (retry.ts); administration
 * goes with the admin key (the credentials file's, or `apiKey`).
 */
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import type { Client as ConnectClient } from "@connectrpc/connect";

import {
  AdminService, ApiKeyRole, type ApiKey as ApiKeyMessage, type Tenant as TenantMessage,
} from "./gen/sluice/v1/admin_service_pb.js";
import {
  WebhookDeliveryState, WebhookEventType, WebhookService, WebhookState, type Webhook as WebhookMessage,
  type WebhookDelivery as WebhookDeliveryMessage,
} from "./gen/sluice/v1/webhook_service_pb.js";

/** What these calls need of a client (client.ts's Client). */
export interface AdminClient {
  invoke<T>(attempt: (msLeft: number) => Promise<T>, options?: { timeoutMs?: number }): Promise<T>;
  readonly headers: Record<string, string>;
  readonly adminHeaders: Record<string, string>;
  readonly raw: { webhooks: ConnectClient<typeof WebhookService>; admin: ConnectClient<typeof AdminService> };
}

function date(value: Timestamp | undefined): Date | undefined {
  return value ? timestampDate(value) : undefined;
}

/** WEBHOOK_EVENT_TYPE_DOCUMENT_READY → "document.ready", _SOURCE_RUN_FINISHED → "source_run.finished"
 * (the payload's `type`). */
export function webhookEventName(value: WebhookEventType): string {
  const name = WebhookEventType[value].toLowerCase();
  const kind = name.startsWith("source_run_") ? "source_run" : name.split("_")[0];
  return name === kind ? name : `${kind}.${name.slice(kind.length + 1)}`;
}

/** "document.ready" → WebhookEventType.DOCUMENT_READY. */
export const WEBHOOK_EVENT_TYPES: Record<string, WebhookEventType> = Object.fromEntries(
  Object.values(WebhookEventType).filter((v): v is WebhookEventType => typeof v === "number" && v !== WebhookEventType.UNSPECIFIED)
    .map((v) => [webhookEventName(v), v]),
);

export const ROLES: Record<string, ApiKeyRole> = {
  admin: ApiKeyRole.ADMIN, client: ApiKeyRole.CLIENT, reader: ApiKeyRole.READER, worker: ApiKeyRole.WORKER,
};

export class Webhook {
  readonly id: string;
  readonly collection: string;
  readonly url: string;
  /** "document.ready", "document.failed", … */
  readonly eventTypes: string[];
  readonly description: string;
  /** "active" or "disabled". */
  readonly state: string;
  readonly disabledReason: string;
  readonly createTime: Date | undefined;
  readonly pendingDeliveries: bigint;
  readonly failedDeliveries: bigint;

  constructor(readonly raw: WebhookMessage) {
    this.id = raw.id;
    this.collection = raw.collection;
    this.url = raw.url;
    this.eventTypes = raw.eventTypes.map(webhookEventName);
    this.description = raw.description;
    this.state = WebhookState[raw.state].toLowerCase();
    this.disabledReason = raw.disabledReason;
    this.createTime = date(raw.createTime);
    this.pendingDeliveries = raw.pendingDeliveries;
    this.failedDeliveries = raw.failedDeliveries;
  }
}

/** A webhook just made (or its secret rotated): `secret` signs its deliveries, shown this once. */
export interface NewWebhook {
  webhook: Webhook;
  secret: string;
}

export class WebhookDelivery {
  readonly id: string;
  readonly eventType: string;
  readonly documentId: string;
  /** "pending", "delivered" or "failed". */
  readonly state: string;
  readonly attempts: number;
  readonly lastStatusCode: number;
  readonly lastError: string;
  readonly eventTime: Date | undefined;
  readonly deliveredTime: Date | undefined;

  constructor(readonly raw: WebhookDeliveryMessage) {
    this.id = raw.id;
    this.eventType = raw.eventType;
    this.documentId = raw.documentId;
    this.state = WebhookDeliveryState[raw.state].toLowerCase();
    this.attempts = raw.attempts;
    this.lastStatusCode = raw.lastStatusCode;
    this.lastError = raw.lastError;
    this.eventTime = date(raw.eventTime);
    this.deliveredTime = date(raw.deliveredTime);
  }
}

/** Signed POSTs of a collection's document events to a URL (docs/webhooks.md). */
export class Webhooks {
  constructor(private readonly client: AdminClient) {}

  private call<T>(attempt: (service: ConnectClient<typeof WebhookService>, options: { headers: Record<string, string>; timeoutMs: number }) => Promise<T>): Promise<T> {
    return this.client.invoke((timeoutMs) => attempt(this.client.raw.webhooks, { headers: this.client.headers, timeoutMs }));
  }

  /** Subscribe `url` to the collection's events (all, or `eventTypes` such as "document.ready");
   * the signing secret is returned this once. */
  async create(collection: string, url: string, options: { eventTypes?: string[]; description?: string } = {}): Promise<NewWebhook> {
    const unknown = (options.eventTypes ?? []).filter((t) => !(t in WEBHOOK_EVENT_TYPES));
    if (unknown.length > 0) {
      throw new TypeError(`unknown event type ${JSON.stringify(unknown[0])}; choose from ${Object.keys(WEBHOOK_EVENT_TYPES).join(", ")}`);
    }
    const webhook = { collection, url, description: options.description ?? "",
      eventTypes: (options.eventTypes ?? []).map((t) => WEBHOOK_EVENT_TYPES[t]) };
    const response = await this.call((s, o) => s.createWebhook({ webhook }, o));
    return { webhook: new Webhook(response.webhook!), secret: response.secret };
  }

  async get(id: string): Promise<Webhook> {
    return new Webhook(await this.call((s, o) => s.getWebhook({ id }, o)));
  }

  /** The webhooks, of one collection or all; fetched a page at a time as you iterate. */
  async *list(collection?: string): AsyncGenerator<Webhook> {
    let pageToken = "";
    do {
      const token = pageToken;
      const page = await this.call((s, o) => s.listWebhooks({ collection: collection ?? "", pageSize: 200, pageToken: token }, o));
      for (const webhook of page.webhooks) yield new Webhook(webhook);
      pageToken = page.nextPageToken;
    } while (pageToken);
  }

  /** Delete a webhook; resolves to the pending deliveries dropped with it. */
  async delete(id: string): Promise<bigint> {
    return (await this.call((s, o) => s.deleteWebhook({ id }, o))).droppedPendingDeliveries;
  }

  async rotateSecret(id: string): Promise<NewWebhook> {
    const response = await this.call((s, o) => s.rotateWebhookSecret({ id }, o));
    return { webhook: new Webhook(response.webhook!), secret: response.secret };
  }

  /** A webhook's deliveries, newest first (with `failed`, only those given up), at most `limit` (50). */
  async deliveries(id: string, options: { failed?: boolean; limit?: number } = {}): Promise<WebhookDelivery[]> {
    const limit = options.limit ?? 50;
    const state = options.failed ? WebhookDeliveryState.FAILED : WebhookDeliveryState.UNSPECIFIED;
    const rows: WebhookDelivery[] = [];
    let pageToken = "";
    while (rows.length < limit) {
      const token = pageToken;
      const page = await this.call((s, o) => s.listWebhookDeliveries(
        { webhookId: id, state, pageSize: Math.min(limit - rows.length, 1000), pageToken: token }, o));
      rows.push(...page.deliveries.map((d) => new WebhookDelivery(d)));
      pageToken = page.nextPageToken;
      if (!pageToken) break;
    }
    return rows;
  }
}

export class Tenant {
  readonly name: string;
  /** Quotas, 0 = unlimited. */
  readonly maxDocuments: bigint;
  readonly maxStoredBytes: bigint;
  readonly maxCollections: number;
  readonly documents: bigint;
  readonly storedBytes: bigint;
  readonly collections: number;
  readonly createTime: Date | undefined;

  constructor(readonly raw: TenantMessage) {
    this.name = raw.name;
    this.maxDocuments = raw.quota?.maxDocuments ?? 0n;
    this.maxStoredBytes = raw.quota?.maxStoredBytes ?? 0n;
    this.maxCollections = raw.quota?.maxCollections ?? 0;
    this.documents = raw.usage?.documents ?? 0n;
    this.storedBytes = raw.usage?.storedBytes ?? 0n;
    this.collections = raw.usage?.collections ?? 0;
    this.createTime = date(raw.createTime);
  }
}

/** An API key as listed: its public id and prefix, never its secret. */
export class ApiKey {
  readonly id: string;
  readonly prefix: string;
  readonly tenant: string;
  /** "admin", "client", "reader" or "worker". */
  readonly role: string;
  readonly name: string;
  readonly createTime: Date | undefined;
  readonly revokeTime: Date | undefined;
  /** The collections the key is limited to; empty: every collection of its tenant. */
  readonly collections: string[];

  constructor(readonly raw: ApiKeyMessage) {
    this.id = raw.id;
    this.prefix = raw.prefix;
    this.tenant = raw.tenant;
    this.role = ApiKeyRole[raw.role].toLowerCase();
    this.name = raw.name;
    this.collections = [...raw.collections];
    this.createTime = date(raw.createTime);
    this.revokeTime = date(raw.revokeTime);
  }
}

/** A key just made: `secret` is the whole key, shown this once. */
export interface NewApiKey {
  key: ApiKey;
  secret: string;
}

/** Tenants and API keys (with the admin key). */
export class Admin {
  constructor(private readonly client: AdminClient) {}

  private call<T>(attempt: (service: ConnectClient<typeof AdminService>, options: { headers: Record<string, string>; timeoutMs: number }) => Promise<T>): Promise<T> {
    return this.client.invoke((timeoutMs) => attempt(this.client.raw.admin, { headers: this.client.adminHeaders, timeoutMs }));
  }

  /** A tenant with quotas (0 = unlimited). */
  async createTenant(name: string, quota: { maxDocuments?: number | bigint; maxStoredBytes?: number | bigint; maxCollections?: number } = {}): Promise<Tenant> {
    const tenant = { name, quota: { maxDocuments: BigInt(quota.maxDocuments ?? 0), maxStoredBytes: BigInt(quota.maxStoredBytes ?? 0),
      maxCollections: quota.maxCollections ?? 0 } };
    return new Tenant(await this.call((s, o) => s.createTenant({ tenant }, o)));
  }

  async listTenants(): Promise<Tenant[]> {
    return (await this.call((s, o) => s.listTenants({}, o))).tenants.map((t) => new Tenant(t));
  }

  /** A key of `tenant` with `role` (admin, client, reader, worker), limited to `collections` when
   * some are given (client and reader keys only); its secret is returned this once. */
  async createKey(tenant: string, role: string, options: { name?: string; collections?: string[] } = {}): Promise<NewApiKey> {
    if (!(role in ROLES)) throw new TypeError(`unknown role ${JSON.stringify(role)}; choose from ${Object.keys(ROLES).join(", ")}`);
    const request = { tenant, role: ROLES[role], name: options.name ?? "", collections: options.collections ?? [] };
    const response = await this.call((s, o) => s.createApiKey(request, o));
    return { key: new ApiKey(response.apiKey!), secret: response.secret };
  }

  async listKeys(tenant = ""): Promise<ApiKey[]> {
    return (await this.call((s, o) => s.listApiKeys({ tenant }, o))).apiKeys.map((k) => new ApiKey(k));
  }

  /** Revoke a key by id or prefix (slk_<id>_): refused by every process within a second. */
  async revokeKey(key: string): Promise<ApiKey> {
    return new ApiKey(await this.call((s, o) => s.revokeApiKey({ id: key }, o)));
  }
}
