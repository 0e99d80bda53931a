/**
 * `<Highlighted text highlights />`: a hit's text with its matched spans in <mark>, as Preact text
 * nodes and elements only (never markup from the text: docs/console.md, "Data is text").
 *
 * SearchHit.highlights count Unicode code points (search_service.proto, `Highlight`), while a
 * JavaScript string index counts UTF-16 code units: an emoji or a CJK extension character before
 * a span would shift it. The text is split into code points first, and the spans cut there.
 */
import type { ComponentChildren } from "preact";

export interface Span {
  start: number;
  end: number;
}

export interface Piece {
  text: string;
  mark: boolean;
}

/** The text cut at the spans (code points), spans sorted, clamped and merged where they overlap. */
export function highlightPieces(text: string, spans: readonly Span[]): Piece[] {
  const points = Array.from(text); // one entry per code point
  const n = points.length;
  const sorted = spans
    .map((s) => ({ start: Math.max(0, Math.min(n, s.start)), end: Math.max(0, Math.min(n, s.end)) }))
    .filter((s) => s.end > s.start)
    .sort((a, b) => a.start - b.start || a.end - b.end);
  const merged: Span[] = [];
  for (const span of sorted) {
    const last = merged[merged.length - 1];
    if (last && span.start <= last.end) last.end = Math.max(last.end, span.end);
    else merged.push({ ...span });
  }
  const pieces: Piece[] = [];
  let at = 0;
  for (const span of merged) {
    if (span.start > at) pieces.push({ text: points.slice(at, span.start).join(""), mark: false });
    pieces.push({ text: points.slice(span.start, span.end).join(""), mark: true });
    at = span.end;
  }
  if (at < n) pieces.push({ text: points.slice(at).join(""), mark: false });
  return pieces;
}

export function Highlighted(props: { text: string; highlights: readonly Span[]; class?: string }): ComponentChildren {
  return (
    <p class={props.class ?? "hit-text"}>
      {highlightPieces(props.text, props.highlights).map((piece, i) => (piece.mark ? <mark key={i}>{piece.text}</mark> : piece.text))}
    </p>
  );
}
