/**
 * Webhooks (#/webhooks, or #/webhooks/<collection>): the tenant's subscriptions (WebhookService,
 * docs/webhooks.md), each with its URL (text, never a link), events, state and delivery counts;
 * a subscription's deliveries, newest first, filtered by state, each with its attempts, the last
 * status code and error, and the JSON body it POSTs (shown as text).
 */
import { WebhookDeliveryState, WebhookEventType, WebhookState, type Webhook, type WebhookDelivery } from "@gen/webhook_service_pb.js";
import { useEffect, useState } from "preact/hooks";
import { webhooks } from "../api";
import { href, useRoute } from "../router";
import { CollectionSelect, useCollectionNames } from "../ui/collection-select";
import { ErrorBanner } from "../ui/error";
import { enumName, time } from "../ui/format";
import { Table } from "../ui/table";

const EVENT_NAMES: Record<number, string> = {
  [WebhookEventType.DOCUMENT_READY]: "document.ready",
  [WebhookEventType.DOCUMENT_FAILED]: "document.failed",
  [WebhookEventType.DOCUMENT_DELETED]: "document.deleted",
  [WebhookEventType.DOCUMENT_STATUS_CHANGED]: "document.status_changed",
  [WebhookEventType.SOURCE_RUN_STARTED]: "source_run.started",
  [WebhookEventType.SOURCE_RUN_PROGRESS]: "source_run.progress",
  [WebhookEventType.SOURCE_RUN_FINISHED]: "source_run.finished",
};

function name(values: object, value: number): string {
  return enumName(values as unknown as Record<number, string>, value, "");
}

function State(props: { name: string }) {
  return <span class={`state-${props.name}`}>{props.name}</span>;
}

/** A payload as indented JSON when it parses, as it is otherwise: text either way. */
function pretty(payload: string): string {
  try {
    return JSON.stringify(JSON.parse(payload), null, 2);
  } catch {
    return payload;
  }
}

function Deliveries(props: { webhook: Webhook; onError: (err: unknown) => void }) {
  const [state, setState] = useState(WebhookDeliveryState.UNSPECIFIED);
  const [rows, setRows] = useState<WebhookDelivery[] | null>(null);
  const [pageToken, setPageToken] = useState("");
  const load = async (token: string) => {
    try {
      const page = await webhooks.listWebhookDeliveries({ webhookId: props.webhook.id, state, pageSize: 50, pageToken: token });
      setRows((previous) => (token ? [...(previous ?? []), ...page.deliveries] : page.deliveries));
      setPageToken(page.nextPageToken);
    } catch (err) {
      props.onError(err);
      setRows([]);
    }
  };
  useEffect(() => {
    setRows(null);
    void load("");
  }, [props.webhook.id, state]);
  return (
    <section aria-labelledby={`deliveries-${props.webhook.id}`}>
      <h2 id={`deliveries-${props.webhook.id}`}>Deliveries to {props.webhook.url}</h2>
      <div class="row">
        <label for="delivery-state">State</label>
        <select id="delivery-state" value={state} onChange={(e) => setState(Number(e.currentTarget.value))}>
          <option value={WebhookDeliveryState.UNSPECIFIED}>every state</option>
          <option value={WebhookDeliveryState.PENDING}>pending</option>
          <option value={WebhookDeliveryState.DELIVERED}>delivered</option>
          <option value={WebhookDeliveryState.FAILED}>failed</option>
        </select>
        <button type="button" onClick={() => void load("")}>
          Refresh
        </button>
      </div>
      {rows === null ? (
        <p aria-live="polite">Loading…</p>
      ) : (
        <Table
          caption={`Deliveries to ${props.webhook.url}, newest first`}
          rows={rows}
          rowKey={(d) => d.id}
          empty="No delivery."
          columns={[
            { header: "Event", cell: (d) => d.eventType },
            {
              header: "Of",
              cell: (d) =>
                d.documentId ? (
                  <a href={href("documents", d.documentId)} title={d.documentId}>
                    document {d.documentId.slice(0, 8)}…
                  </a>
                ) : d.sourceRunId ? (
                  `run ${d.sourceRunId.slice(0, 8)}…`
                ) : (
                  ""
                ),
            },
            { header: "State", cell: (d) => <State name={name(WebhookDeliveryState, d.state)} /> },
            { header: "Attempts", numeric: true, cell: (d) => String(d.attempts) },
            { header: "Last status", numeric: true, cell: (d) => (d.lastStatusCode ? String(d.lastStatusCode) : d.attempts ? "no answer" : "") },
            { header: "Last error", cell: (d) => d.lastError },
            { header: "Event at", cell: (d) => time(d.eventTime) },
            { header: "Next attempt", cell: (d) => time(d.nextAttemptTime) },
            { header: "Delivered", cell: (d) => time(d.deliveredTime) },
            {
              header: "Payload",
              cell: (d) => (
                <details class="more">
                  <summary>Body</summary>
                  <pre class="payload">{pretty(d.payload)}</pre>
                </details>
              ),
            },
          ]}
        />
      )}
      {pageToken ? (
        <button type="button" onClick={() => void load(pageToken)}>
          Older deliveries
        </button>
      ) : null}
    </section>
  );
}

export function WebhooksPage() {
  const route = useRoute();
  const [error, setError] = useState<unknown>(null);
  const names = useCollectionNames(setError);
  const [collection, setCollection] = useState(route.segments[1] ?? "");
  const [list, setList] = useState<Webhook[] | null>(null);
  const [selected, setSelected] = useState("");

  const load = async () => {
    try {
      const all: Webhook[] = [];
      let pageToken = "";
      do {
        const page = await webhooks.listWebhooks({ collection, pageSize: 1000, pageToken });
        all.push(...page.webhooks);
        pageToken = page.nextPageToken;
      } while (pageToken);
      setList(all);
    } catch (err) {
      setList([]);
      setError(err);
    }
  };
  useEffect(() => {
    setList(null);
    void load();
  }, [collection]);

  const chosen = (list ?? []).find((w) => w.id === selected);
  return (
    <section>
      <h1>Webhooks</h1>
      <ErrorBanner error={error} onDismiss={() => setError(null)} />
      <p class="hint">
        Subscriptions POST a collection's events, signed, to a URL, at least once and in order per document (docs/webhooks.md). They are added with <code>sluice webhooks add</code> or the SDKs.
      </p>
      <div class="row">
        <CollectionSelect id="webhooks-collection" names={names} value={collection} onChange={setCollection} any="every collection" />
        <button type="button" onClick={() => void load()}>
          Refresh
        </button>
      </div>
      {list === null ? (
        <p aria-live="polite">Loading…</p>
      ) : (
        <Table
          caption="Webhook subscriptions"
          rows={list}
          rowKey={(w) => w.id}
          rowClass={(w) => (w.id === selected ? "selected" : "")}
          empty={collection ? `No webhook for ${collection}.` : "No webhook yet."}
          columns={[
            { header: "URL", cell: (w) => <code class="url">{w.url}</code> },
            { header: "Collection", cell: (w) => w.collection },
            { header: "Events", cell: (w) => (w.eventTypes.length ? w.eventTypes.map((t) => EVENT_NAMES[t] ?? String(t)).join(", ") : "the document events") },
            { header: "Description", cell: (w) => w.description },
            { header: "State", cell: (w) => <span>{<State name={name(WebhookState, w.state)} />}{w.disabledReason ? ` (${w.disabledReason})` : ""}</span> },
            { header: "Pending", numeric: true, cell: (w) => String(w.pendingDeliveries) },
            { header: "Failed", numeric: true, cell: (w) => String(w.failedDeliveries) },
            { header: "Lost gaps", numeric: true, cell: (w) => String(w.lostEventGaps) },
            { header: "Created", cell: (w) => time(w.createTime) },
            {
              header: "Deliveries",
              cell: (w) => (
                <button type="button" onClick={() => setSelected(w.id === selected ? "" : w.id)} aria-expanded={w.id === selected} aria-label={`Deliveries to ${w.url}`}>
                  Deliveries
                </button>
              ),
            },
          ]}
        />
      )}
      {chosen ? <Deliveries webhook={chosen} onError={setError} /> : null}
    </section>
  );
}
