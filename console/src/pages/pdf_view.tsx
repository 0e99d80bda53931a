/**
 * A PDF's pages drawn by pdf.js, each chunk's boxes over them (loaded lazily by ./document: pdf.js
 * is a chunk of its own, its worker a same-origin asset; docs/console.md). The original comes from
 * GET /v1/documents/{id}/content with the key in a header. A box is a fraction of its page from the
 * top-left corner (DocumentChunk.boxes), so it is placed in percentages over the canvas; a click on
 * it selects its chunk.
 */
import { useEffect, useRef, useState } from "preact/hooks";
import { getDocument, GlobalWorkerOptions, type PDFDocumentProxy } from "pdfjs-dist";
import type { DocumentChunk } from "@gen/document_service_pb.js";
import { fetchOriginal } from "../api";

GlobalWorkerOptions.workerSrc = __PDF_WORKER_URL__;

/** Pages drawn at first; the rest on request, so a 500-page PDF does not draw 500 canvases. */
const FIRST_PAGES = 10;
const PAGE_WIDTH = 640;

function Page(props: { pdf: PDFDocumentProxy; number: number; chunks: DocumentChunk[]; selected: string; onSelect: (id: string) => void }) {
  const canvas = useRef<HTMLCanvasElement>(null);
  const [size, setSize] = useState<{ width: number; height: number } | null>(null);
  useEffect(() => {
    let cancelled = false;
    let task: { cancel(): void } | null = null;
    props.pdf.getPage(props.number).then((page) => {
      if (cancelled || !canvas.current) return;
      const base = page.getViewport({ scale: 1 });
      const scale = PAGE_WIDTH / base.width;
      const ratio = window.devicePixelRatio || 1;
      const viewport = page.getViewport({ scale: scale * ratio });
      canvas.current.width = Math.floor(viewport.width);
      canvas.current.height = Math.floor(viewport.height);
      setSize({ width: PAGE_WIDTH, height: (base.height * scale) | 0 });
      const rendering = page.render({ canvas: canvas.current, viewport });
      task = rendering;
      rendering.promise.catch(() => undefined);
    });
    return () => {
      cancelled = true;
      task?.cancel();
    };
  }, [props.pdf, props.number]);

  const boxes = props.chunks.flatMap((chunk) => chunk.boxes.filter((box) => box.pageNumber === props.number).map((box, i) => ({ chunk, box, i })));
  return (
    <figure class="pdf-page" data-page={props.number}>
      <div class="page-frame" style={size ? { width: `${size.width}px`, height: `${size.height}px` } : undefined}>
        <canvas ref={canvas} aria-label={`Page ${props.number}`} role="img" />
        {boxes.map(({ chunk, box, i }) => (
          <button
            type="button"
            tabIndex={-1}
            key={`${chunk.id}-${i}`}
            class={`box${chunk.id === props.selected ? " selected" : ""}${chunk.enabled ? "" : " disabled"}`}
            data-chunk-index={chunk.chunkIndex}
            aria-label={`Chunk ${chunk.chunkIndex}`}
            title={`Chunk ${chunk.chunkIndex}`}
            style={{
              left: `${box.left * 100}%`,
              top: `${box.top * 100}%`,
              width: `${Math.max(0, box.right - box.left) * 100}%`,
              height: `${Math.max(0, box.bottom - box.top) * 100}%`,
            }}
            onClick={() => props.onSelect(chunk.id)}
          />
        ))}
      </div>
      <figcaption>Page {props.number}</figcaption>
    </figure>
  );
}

export default function PdfPages(props: { documentId: string; chunks: DocumentChunk[]; selected: string; onSelect: (id: string) => void; onError: (err: unknown) => void }) {
  const [pdf, setPdf] = useState<PDFDocumentProxy | null>(null);
  const [shown, setShown] = useState(FIRST_PAGES);
  useEffect(() => {
    let task: ReturnType<typeof getDocument> | null = null;
    let cancelled = false;
    fetchOriginal(props.documentId)
      .then(({ bytes }) => {
        if (cancelled) return null;
        task = getDocument({ data: new Uint8Array(bytes), enableXfa: false });
        return task.promise;
      })
      .then((doc) => {
        if (doc && !cancelled) setPdf(doc);
      })
      .catch((err) => !cancelled && props.onError(err));
    return () => {
      cancelled = true;
      task?.destroy();
    };
  }, [props.documentId]);

  if (!pdf) return <p>Loading the pages…</p>;
  const count = Math.min(shown, pdf.numPages);
  return (
    <div class="pdf">
      {Array.from({ length: count }, (_, i) => (
        <Page key={i + 1} pdf={pdf} number={i + 1} chunks={props.chunks} selected={props.selected} onSelect={props.onSelect} />
      ))}
      {count < pdf.numPages ? (
        <button type="button" onClick={() => setShown(shown + FIRST_PAGES)}>
          More pages ({pdf.numPages - count} left)
        </button>
      ) : null}
    </div>
  );
}
