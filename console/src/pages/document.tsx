/**
 * A document (#/documents/{id}): its fields, attempts and versions (GetDocument), the original to
 * download, its chunks (ListChunks, a page at a time) with disable, enable and edit (UpdateChunk),
 * and for a PDF its pages with each chunk's boxes (./pdf_view, loaded only then).
 */
import { lazy, Suspense } from "preact/compat";
import { useEffect, useRef, useState } from "preact/hooks";
import type { Document, DocumentVersion } from "@gen/document_pb.js";
import { AttemptOutcome, DocumentStatus, VersionState } from "@gen/document_pb.js";
import type { DocumentChunk } from "@gen/document_service_pb.js";
import { documents, downloadOriginal, streams } from "../api";
import { href } from "../router";
import { ErrorBanner } from "../ui/error";
import { bytes, enumName, statusName, time } from "../ui/format";
import { useSession } from "../ui/session";
import { StatusBadge } from "../ui/status";
import { Table } from "../ui/table";

const PdfPages = lazy(() => import("./pdf_view"));
const CHUNK_PAGE_SIZE = 100;

function Chunk(props: {
  chunk: DocumentChunk;
  selected: boolean;
  canWrite: boolean;
  hasPages: boolean;
  onSelect: () => void;
  onChanged: (chunk: DocumentChunk) => void;
  onError: (err: unknown) => void;
}) {
  const { chunk } = props;
  const [editing, setEditing] = useState(false);
  const [text, setText] = useState(chunk.text);
  const [busy, setBusy] = useState(false);
  const ref = useRef<HTMLLIElement>(null);
  useEffect(() => {
    if (props.selected) ref.current?.scrollIntoView({ block: "nearest" });
  }, [props.selected]);

  const update = async (change: { enabled?: boolean; text?: string }) => {
    setBusy(true);
    try {
      props.onChanged(await documents.updateChunk({ chunkId: chunk.id, etag: chunk.etag, ...change }));
      setEditing(false);
    } catch (err) {
      props.onError(err);
    } finally {
      setBusy(false);
    }
  };

  return (
    <li ref={ref} class={`chunk${props.selected ? " selected" : ""}${chunk.enabled ? "" : " disabled"}`} id={`chunk-${chunk.id}`} data-chunk-index={chunk.chunkIndex}>
      <div class="chunk-head">
        <strong>#{chunk.chunkIndex}</strong>
        {chunk.pageNumber ? <span>page {chunk.pageNumber}</span> : null}
        <span>{chunk.elementTypes.length ? chunk.elementTypes.join(", ") : chunk.elementType}</span>
        <span>{chunk.tokenCount} tokens</span>
        {chunk.sectionTitle ? <span class="section">§ {chunk.sectionTitle}</span> : null}
        {chunk.enabled ? null : <span class="status FAILED">DISABLED</span>}
        {chunk.edited ? <span class="status busy">EDITED</span> : null}
        {props.hasPages && chunk.boxes.length ? (
          <button type="button" class="link" aria-pressed={props.selected} onClick={props.onSelect}>
            {props.selected ? "Shown on the page" : "Show on the page"}
          </button>
        ) : null}
        {props.canWrite ? (
          <span class="actions">
            <button type="button" disabled={busy} onClick={() => update({ enabled: !chunk.enabled })} aria-label={`${chunk.enabled ? "Disable" : "Enable"} chunk ${chunk.chunkIndex}`}>
              {chunk.enabled ? "Disable" : "Enable"}
            </button>
            {editing ? null : (
              <button type="button" disabled={busy} onClick={() => (setText(chunk.text), setEditing(true))} aria-label={`Edit chunk ${chunk.chunkIndex}`}>
                Edit
              </button>
            )}
          </span>
        ) : null}
      </div>
      {editing ? (
        <form
          class="edit"
          onSubmit={(e) => {
            e.preventDefault();
            update({ text });
          }}
        >
          <label for={`edit-${chunk.id}`}>Text of chunk {chunk.chunkIndex}</label>
          <textarea id={`edit-${chunk.id}`} rows={8} value={text} onInput={(e) => setText(e.currentTarget.value)} />
          <span class="actions">
            <button type="submit" class="primary" disabled={busy || !text.trim()}>
              Save
            </button>
            <button type="button" onClick={() => setEditing(false)}>
              Cancel
            </button>
          </span>
        </form>
      ) : (
        <pre class="chunk-text">{chunk.text}</pre>
      )}
      {chunk.textAsHtml ? (
        <details>
          <summary>The table's HTML, as text</summary>
          <pre class="chunk-text">{chunk.textAsHtml}</pre>
        </details>
      ) : null}
      {chunk.edited && chunk.originalText ? (
        <details>
          <summary>The parser's text</summary>
          <pre class="chunk-text">{chunk.originalText}</pre>
        </details>
      ) : null}
    </li>
  );
}

function Versions(props: { doc: Document }) {
  const versions = props.doc.versions;
  if (!versions) return <p>Version {props.doc.version || 1}; no other version.</p>;
  const rows: DocumentVersion[] = [versions.next, versions.current, ...versions.history].filter((v): v is DocumentVersion => !!v);
  return (
    <Table
      caption="Versions"
      rows={rows}
      rowKey={(v) => `${v.version}-${v.documentId}`}
      columns={[
        { header: "Version", numeric: true, cell: (v) => String(v.version) },
        { header: "State", cell: (v) => enumName(VersionState as unknown as Record<number, string>, v.state, "") },
        { header: "Status", cell: (v) => <StatusBadge status={v.status} /> },
        { header: "Document", cell: (v) => (v.documentId === props.doc.id ? "this one" : <a href={href("documents", v.documentId)}>{v.documentId}</a>) },
        { header: "Created", cell: (v) => time(v.createTime) },
        { header: "Serving since", cell: (v) => time(v.servingTime) },
        { header: "Error", cell: (v) => v.errorMessage },
      ]}
    />
  );
}

export function DocumentPage(props: { id: string }) {
  const { canWrite } = useSession();
  const [doc, setDoc] = useState<Document | null>(null);
  const [chunks, setChunks] = useState<DocumentChunk[]>([]);
  const [chunkTotal, setChunkTotal] = useState<number | null>(null);
  const [nextToken, setNextToken] = useState("");
  const [selected, setSelected] = useState("");
  const [error, setError] = useState<unknown>(null);
  const [downloading, setDownloading] = useState(false);

  const loadChunks = async (pageToken: string) => {
    try {
      const page = await documents.listChunks({ documentId: props.id, pageSize: CHUNK_PAGE_SIZE, pageToken });
      setChunks((list) => (pageToken ? [...list, ...page.chunks] : page.chunks));
      setChunkTotal(page.totalSize);
      setNextToken(page.nextPageToken);
    } catch (err) {
      setError(err);
    }
  };

  useEffect(() => {
    const abort = new AbortController();
    const terminal = (d: Document) => d.status === DocumentStatus.READY || d.status === DocumentStatus.FAILED;
    (async () => {
      try {
        let d = await documents.getDocument({ id: props.id }, { signal: abort.signal });
        setDoc(d);
        if (!terminal(d)) {
          // Still being processed: follow it (WatchDocument ends at READY or FAILED), then show it.
          setChunkTotal(0);
          for await (const event of streams.watchDocument({ id: props.id }, { signal: abort.signal })) {
            if (event.document) setDoc((d = event.document));
          }
          d = await documents.getDocument({ id: props.id }, { signal: abort.signal });
          setDoc(d);
        }
        if (d.status === DocumentStatus.READY) loadChunks("");
        else setChunkTotal(0);
      } catch (err) {
        if (!abort.signal.aborted) setError(err);
      }
    })();
    return () => abort.abort();
  }, [props.id]);

  const isPdf = doc?.mimeType === "application/pdf" || /\.pdf$/i.test(doc?.filename ?? "");
  const changed = (chunk: DocumentChunk) => setChunks((list) => list.map((c) => (c.id === chunk.id ? chunk : c)));

  const download = async () => {
    if (!doc) return;
    setDownloading(true);
    try {
      await downloadOriginal(doc.id, doc.filename);
    } catch (err) {
      setError(err);
    } finally {
      setDownloading(false);
    }
  };

  return (
    <section>
      <p class="crumbs">
        <a href={href("collections")}>Collections</a> / {doc ? <a href={href("collections", doc.collection)}>{doc.collection}</a> : "…"} / <span>{doc?.filename ?? props.id}</span>
      </p>
      <h1>{doc ? doc.filename || doc.id : "Document"}</h1>
      <ErrorBanner error={error} onDismiss={() => setError(null)} />
      {doc ? (
        <>
          <dl class="fields">
            <dt>Status</dt>
            <dd>
              <StatusBadge status={doc.status} /> {doc.status === DocumentStatus.FAILED ? <span class="failure">{doc.errorCode} {doc.errorMessage}</span> : null}
            </dd>
            <dt>Id</dt>
            <dd>
              <code>{doc.id}</code>
            </dd>
            <dt>Media type</dt>
            <dd>{doc.mimeType}</dd>
            <dt>Size</dt>
            <dd>{bytes(doc.sizeBytes)}</dd>
            <dt>SHA-256</dt>
            <dd>
              <code>{doc.contentSha256}</code>
            </dd>
            <dt>Chunks</dt>
            <dd>{doc.chunkCount}</dd>
            <dt>Created</dt>
            <dd>{time(doc.createTime)}</dd>
            {doc.sourceUri ? (
              <>
                <dt>Source</dt>
                <dd>{doc.sourceUri}</dd>
              </>
            ) : null}
            {Object.entries(doc.metadata).map(([key, value]) => (
              <>
                <dt key={`k-${key}`}>{key}</dt>
                <dd key={`v-${key}`}>{value}</dd>
              </>
            ))}
          </dl>
          <button type="button" onClick={download} disabled={downloading}>
            {downloading ? "Downloading…" : "Download the original"}
          </button>
          <h2>Versions</h2>
          <Versions doc={doc} />
          {doc.attemptHistory.length ? (
            <>
              <h2>Attempts</h2>
              <Table
                caption="Processing attempts"
                rows={doc.attemptHistory}
                rowKey={(a) => String(a.number)}
                columns={[
                  { header: "Attempt", numeric: true, cell: (a) => String(a.number) },
                  { header: "Stage", cell: (a) => statusName(a.stage) },
                  { header: "Outcome", cell: (a) => enumName(AttemptOutcome as unknown as Record<number, string>, a.outcome, "") },
                  { header: "Error", cell: (a) => (a.errorCode ? `${a.errorCode}: ${a.errorMessage}` : a.errorMessage) },
                  { header: "Started", cell: (a) => time(a.startTime) },
                ]}
              />
            </>
          ) : null}
        </>
      ) : null}
      <div class={isPdf ? "doc-body with-pages" : "doc-body"}>
        {isPdf && doc && doc.status === DocumentStatus.READY ? (
          <section class="pages" aria-label="Pages" tabIndex={0}>
            <h2>Pages</h2>
            <Suspense fallback={<p>Loading the PDF viewer…</p>}>
              <PdfPages documentId={doc.id} chunks={chunks} selected={selected} onSelect={setSelected} onError={setError} />
            </Suspense>
          </section>
        ) : null}
        <section class="chunks" aria-labelledby="chunks-heading">
          <h2 id="chunks-heading">Chunks {chunkTotal !== null ? `(${chunks.length} of ${chunkTotal})` : ""}</h2>
          {doc && doc.status !== DocumentStatus.READY ? <p>The document is not READY: it has no chunks to show yet.</p> : null}
          <ol class="chunk-list">
            {chunks.map((chunk) => (
              <Chunk
                key={chunk.id}
                chunk={chunk}
                selected={chunk.id === selected}
                canWrite={canWrite}
                hasPages={isPdf}
                onSelect={() => setSelected(chunk.id === selected ? "" : chunk.id)}
                onChanged={changed}
                onError={setError}
              />
            ))}
          </ol>
          {nextToken ? (
            <button type="button" onClick={() => loadChunks(nextToken)}>
              More chunks
            </button>
          ) : null}
        </section>
      </div>
    </section>
  );
}
