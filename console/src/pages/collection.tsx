/**
 * A collection's documents (#/collections/{name}): one page of ListDocuments at a time (page
 * tokens, so 10,000 documents cost one page), kept live by one WatchCollection stream; the
 * counts by status; retry, reprocess and delete; uploads by drag and drop or file pickers.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import type { Collection } from "@gen/collection_pb.js";
import { GenerationState } from "@gen/collection_pb.js";
import type { Document } from "@gen/document_pb.js";
import { DocumentStatus } from "@gen/document_pb.js";
import { CollectionEventType } from "@gen/document_service_pb.js";
import { documents, streams } from "../api";
import { href } from "../router";
import { ErrorBanner } from "../ui/error";
import { bytes, millis, statusName, time } from "../ui/format";
import { useSession } from "../ui/session";
import { StatusBadge } from "../ui/status";
import { Table } from "../ui/table";
import { Uploads } from "./uploads";

const PAGE_SIZE = 100;
/** New documents shown above the first page; past this many, the page says how many more. */
const MAX_NEW_ROWS = 200;

/** The longest stretch of stream decoding before the main thread is handed back. */
const SLICE_MS = 8;

/** Resolves after the browser had a turn: input, rendering, other tasks. */
function yieldToBrowser(): Promise<void> {
  const scheduler = (globalThis as { scheduler?: { yield?: () => Promise<void> } }).scheduler;
  if (scheduler?.yield) return scheduler.yield();
  return new Promise((resolve) => {
    const channel = new MessageChannel();
    channel.port1.onmessage = () => resolve();
    channel.port2.postMessage(null);
  });
}

/** Everything one WatchCollection stream has said. The maps are the stream's own, updated in
 * place; `version` changes whenever they did, at most every PUBLISH_MS (memoize on it). */
export interface LiveState {
  /** The latest state of every document an event named. */
  byId: Map<string, Document>;
  /** Ids deleted since the page opened. */
  deleted: Set<string>;
  /** Ids first seen in events, oldest first. */
  arrived: string[];
  /** "live", "connecting", "reconnecting", or "stopped" (see `error`). */
  stream: string;
  /** Why the stream stopped for good (no key, no such collection): not worth opening again. */
  error?: unknown;
  /** The number of document events received. */
  events: number;
  version: number;
}

/** Failures a new stream would meet again. */
const FINAL = new Set([Code.Unauthenticated, Code.PermissionDenied, Code.NotFound, Code.InvalidArgument]);

/** How often the page shows what the stream said: live to a person, cheap with thousands of events a second. */
const PUBLISH_MS = 150;

function useLiveCollection(collection: string): LiveState {
  const [state, setState] = useState<LiveState>({ byId: new Map(), deleted: new Set(), arrived: [], stream: "connecting", events: 0, version: 0 });
  useEffect(() => {
    const abort = new AbortController();
    const live: LiveState = { byId: new Map(), deleted: new Set(), arrived: [], stream: "connecting", events: 0, version: 0 };
    let timer = 0;
    // Events come in bursts (a folder being processed): one render per PUBLISH_MS, whatever their number.
    const publish = () => {
      if (!timer)
        timer = window.setTimeout(() => {
          timer = 0;
          live.version++;
          setState({ ...live });
        }, PUBLISH_MS);
    };
    (async () => {
      let cursor = "";
      while (!abort.signal.aborted) {
        try {
          let slice = performance.now();
          for await (const event of streams.watchCollection({ collection, afterCursor: cursor }, { signal: abort.signal })) {
            // A burst (2,000 documents moving at once) arrives as a few large reads, and the
            // stream decodes its messages one by one as they are asked for: give the browser
            // the main thread back every few milliseconds, so no task grows long (docs/console.md#speed).
            if (performance.now() - slice > SLICE_MS) {
              await yieldToBrowser();
              slice = performance.now();
            }
            cursor = event.cursor || cursor;
            if (live.stream !== "live") ((live.stream = "live"), publish());
            const doc = event.document;
            if (!doc) continue;
            live.events++;
            if (!live.byId.has(doc.id) && !live.deleted.has(doc.id)) live.arrived.push(doc.id);
            if (event.type === CollectionEventType.DELETED) live.deleted.add(doc.id);
            else if (event.type === CollectionEventType.CHANGED) live.byId.set(doc.id, doc);
            publish();
          }
        } catch (err) {
          if (abort.signal.aborted) return;
          if (err instanceof ConnectError && FINAL.has(err.code)) {
            live.stream = "stopped";
            live.error = err;
            publish();
            return;
          }
        }
        // The stream ended or dropped: resume after the last cursor, missing nothing.
        live.stream = "reconnecting";
        publish();
        await new Promise((resolve) => setTimeout(resolve, 1000));
      }
    })();
    return () => {
      abort.abort();
      clearTimeout(timer);
    };
  }, [collection]);
  return state;
}

function Progress(props: { doc: Document }) {
  const { doc } = props;
  const progress = doc.progress;
  if (doc.status === DocumentStatus.FAILED) {
    return (
      <span class="failure">
        {doc.errorCode ? <code>{doc.errorCode}</code> : null} {doc.errorMessage}
      </span>
    );
  }
  if (!progress || doc.status === DocumentStatus.READY || !progress.total) return null;
  const done = Number(progress.done);
  const total = Number(progress.total);
  return (
    <span>
      <progress max={total} value={done} aria-label={`${statusName(progress.stage)} ${doc.filename}`} /> {done}/{total} {progress.unit}
    </span>
  );
}

function Actions(props: { doc: Document; onError: (err: unknown) => void }) {
  const { doc } = props;
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState(false);
  const run = async (action: () => Promise<unknown>) => {
    setBusy(true);
    try {
      await action();
    } catch (err) {
      props.onError(err);
    } finally {
      setBusy(false);
      setConfirming(false);
    }
  };
  return (
    <span class="actions">
      {doc.status === DocumentStatus.FAILED ? (
        <button type="button" disabled={busy} onClick={() => run(() => documents.retryDocument({ id: doc.id }))} aria-label={`Retry ${doc.filename}`}>
          Retry
        </button>
      ) : null}
      {doc.status === DocumentStatus.READY ? (
        <button type="button" disabled={busy} onClick={() => run(() => documents.reprocessDocument({ id: doc.id }))} aria-label={`Reprocess ${doc.filename}`}>
          Reprocess
        </button>
      ) : null}
      {confirming ? (
        <>
          <button type="button" class="danger" disabled={busy} onClick={() => run(() => documents.deleteDocument({ id: doc.id }))} aria-label={`Confirm: delete ${doc.filename}`}>
            Confirm delete
          </button>
          <button type="button" onClick={() => setConfirming(false)}>
            Keep
          </button>
        </>
      ) : (
        <button type="button" class="danger" disabled={busy} onClick={() => setConfirming(true)} aria-label={`Delete ${doc.filename}`}>
          Delete
        </button>
      )}
    </span>
  );
}

function Counts(props: { collection: Collection | null; live: LiveState }) {
  const { collection, live } = props;
  // In flight now, from the stream: documents whose latest event is neither READY nor FAILED.
  let inFlight = 0;
  for (const doc of live.byId.values()) if (doc.status !== DocumentStatus.READY && doc.status !== DocumentStatus.FAILED) inFlight++;
  const active = collection?.generations.find((g) => g.state === GenerationState.ACTIVE);
  const building = collection?.generations.find((g) => g.state === GenerationState.BUILDING);
  return (
    <dl class="counts" aria-label="Documents by status">
      <div>
        <dt>Documents</dt>
        <dd>{collection ? String(collection.documentCount) : "…"}</dd>
      </div>
      <div>
        <dt>Ready</dt>
        <dd>{collection ? String(collection.readyDocumentCount) : "…"}</dd>
      </div>
      <div>
        <dt>Failed</dt>
        <dd>{active ? String(active.documentsFailed) : "…"}</dd>
      </div>
      <div>
        <dt>In flight (live)</dt>
        <dd>{inFlight}</dd>
      </div>
      <div>
        <dt>Stream</dt>
        <dd class={`stream ${live.stream}`}>{live.stream}</dd>
      </div>
      {building ? (
        <div>
          <dt>Reindex (generation {building.number})</dt>
          <dd>
            {String(building.documentsReady + building.documentsFailed)}/{String(building.documentsTotal)}
          </dd>
        </div>
      ) : null}
    </dl>
  );
}

export function CollectionPage(props: { name: string }) {
  const { canWrite } = useSession();
  const [collection, setCollection] = useState<Collection | null>(null);
  const [status, setStatus] = useState<DocumentStatus>(DocumentStatus.UNSPECIFIED);
  // Page tokens of the pages before this one (the first page's is ""), and this page's.
  const [tokens, setTokens] = useState<string[]>([""]);
  const [page, setPage] = useState<{ documents: Document[]; next: string } | null>(null);
  const [error, setError] = useState<unknown>(null);
  const live = useLiveCollection(props.name);
  const seenOnPages = useRef(new Set<string>());

  const token = tokens[tokens.length - 1];
  useEffect(() => {
    let stale = false;
    setPage(null);
    documents
      .listDocuments({ collection: props.name, status, pageSize: PAGE_SIZE, pageToken: token })
      .then((answer) => {
        if (stale) return;
        for (const doc of answer.documents) seenOnPages.current.add(doc.id);
        setPage({ documents: answer.documents, next: answer.nextPageToken });
      })
      .catch((err) => !stale && setError(err));
    return () => {
      stale = true;
    };
  }, [props.name, status, token]);

  // The counts: GetCollection again at most every 2 s while events arrive.
  const lastEvents = useRef(-1);
  const lastEventsCount = useRef(0);
  lastEventsCount.current = live.events;
  useEffect(() => {
    const refresh = () => documents.getCollection({ name: props.name }).then(setCollection).catch(setError);
    refresh();
    const timer = setInterval(() => {
      const events = lastEventsCount.current;
      if (events !== lastEvents.current) ((lastEvents.current = events), refresh());
    }, 2000);
    return () => clearInterval(timer);
  }, [props.name]);

  const rows = useMemo(() => {
    if (!page) return [];
    const matches = (doc: Document) => status === DocumentStatus.UNSPECIFIED || doc.status === status;
    const current = page.documents.filter((doc) => !live.deleted.has(doc.id)).map((doc) => live.byId.get(doc.id) ?? doc);
    if (tokens.length > 1) return current;
    // On the first page (newest first), documents created since it was read go on top: those
    // newer than its newest (an older document that changed stays on its own page).
    const newest = page.documents.length ? millis(page.documents[0].createTime) : -Infinity;
    const fresh: Document[] = [];
    for (let i = live.arrived.length - 1; i >= 0 && fresh.length < MAX_NEW_ROWS; i--) {
      const id = live.arrived[i];
      const doc = live.byId.get(id);
      if (doc && !seenOnPages.current.has(id) && !live.deleted.has(id) && millis(doc.createTime) > newest && matches(doc)) fresh.push(doc);
    }
    return [...fresh, ...current];
  }, [page, live.version, tokens.length, status]);

  return (
    <section>
      <p class="crumbs">
        <a href={href("collections")}>Collections</a> / <span>{props.name}</span>
      </p>
      <h1>{props.name}</h1>
      <ErrorBanner error={error} onDismiss={() => setError(null)} />
      <ErrorBanner error={live.error} />
      <Counts collection={collection} live={live} />
      {canWrite ? <Uploads collection={props.name} live={live} /> : null}
      <h2 id="documents-heading">Documents</h2>
      <form class="inline" onSubmit={(e) => e.preventDefault()}>
        <label for="status-filter">Status</label>
        <select
          id="status-filter"
          value={status}
          onChange={(e) => {
            setStatus(Number(e.currentTarget.value) as DocumentStatus);
            setTokens([""]);
          }}
        >
          <option value={DocumentStatus.UNSPECIFIED}>any</option>
          {[1, 2, 3, 4, 5, 6, 7].map((value) => (
            <option value={value} key={value}>
              {statusName(value)}
            </option>
          ))}
        </select>
      </form>
      {page === null ? (
        <p aria-live="polite">Loading…</p>
      ) : (
        <Table
          caption={`Documents of ${props.name}`}
          rows={rows}
          rowKey={(d) => d.id}
          empty="No document here."
          columns={[
            { header: "File", cell: (d) => <a href={href("documents", d.id)}>{d.filename || d.id}</a> },
            { header: "Status", cell: (d) => <StatusBadge status={d.status} /> },
            { header: "Progress or failure", cell: (d) => <Progress doc={d} /> },
            { header: "Chunks", numeric: true, cell: (d) => (d.status === DocumentStatus.READY ? String(d.chunkCount) : "") },
            { header: "Size", numeric: true, cell: (d) => bytes(d.sizeBytes) },
            { header: "Version", numeric: true, cell: (d) => String(d.version || "") },
            { header: "Updated", cell: (d) => time(d.updateTime) },
            ...(canWrite ? [{ header: "Actions", cell: (d: Document) => <Actions doc={d} onError={setError} /> }] : []),
          ]}
        />
      )}
      <nav class="pager" aria-label="Pages of documents">
        <button type="button" disabled={tokens.length < 2} onClick={() => setTokens(tokens.slice(0, -1))}>
          Previous page
        </button>
        <span>Page {tokens.length}</span>
        <button type="button" disabled={!page?.next} onClick={() => page && setTokens([...tokens, page.next])}>
          Next page
        </button>
      </nav>
    </section>
  );
}
