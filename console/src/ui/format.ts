/** Small formatters shared by the pages: enum names without their prefix, sizes, times. */
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { DocumentStatus } from "@gen/document_pb.js";

/** "DOCUMENT_STATUS_READY" → "READY": an enum value's name without the enum's prefix. */
export function enumName(values: Record<number | string, string | number>, value: number, prefix: string): string {
  const name = values[value];
  return typeof name === "string" ? name.replace(prefix, "") : String(value);
}

export function statusName(status: DocumentStatus): string {
  return enumName(DocumentStatus as unknown as Record<number, string>, status, "");
}

export function bytes(n: bigint | number): string {
  const value = Number(n);
  if (value < 1024) return `${value} B`;
  if (value < 1024 * 1024) return `${(value / 1024).toFixed(1)} KiB`;
  return `${(value / 1024 / 1024).toFixed(1)} MiB`;
}

// One formatter for every time shown: toLocaleString() builds a new one at every call.
const TIME_FORMAT = new Intl.DateTimeFormat(undefined, { dateStyle: "short", timeStyle: "medium" });

/** A timestamp in milliseconds since the epoch; 0 when unset. */
export function millis(ts: Timestamp | undefined): number {
  return ts ? Number(ts.seconds) * 1000 + Math.floor(ts.nanos / 1e6) : 0;
}

// A table shown again and again (a live page) formats the same timestamps: each once.
const formatted = new WeakMap<Timestamp, string>();

export function time(ts: Timestamp | undefined): string {
  if (!ts) return "";
  let text = formatted.get(ts);
  if (text === undefined) formatted.set(ts, (text = TIME_FORMAT.format(new Date(millis(ts)))));
  return text;
}
