/**
 * The search page's filters (docs/search.md, "Filters"): metadata key = value pairs, file names,
 * media types, and a `where` editor of typed conditions joined by all_of or any_of. Everything
 * typed here goes into SearchFilter as data (bound parameters on the server); a value the
 * console cannot turn into its type is reported before any call.
 */
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { MetadataValueSchema, type MetadataValue } from "@gen/document_pb.js";
import { FilterOperator, type MetadataFilter, MetadataFilterSchema, type SearchFilterSchema } from "@gen/search_service_pb.js";

export type ValueType = "string" | "number" | "boolean" | "timestamp";

export interface Condition {
  key: string;
  op: FilterOperator;
  type: ValueType;
  /** The value; for IN and NOT_IN, values separated by commas. */
  value: string;
}

export interface Filters {
  metadata: { key: string; value: string }[];
  filenames: string;
  mimeTypes: string;
  join: "allOf" | "anyOf";
  conditions: Condition[];
}

export const EMPTY_FILTERS: Filters = { metadata: [], filenames: "", mimeTypes: "", join: "allOf", conditions: [] };

const OPERATORS: [FilterOperator, string][] = [
  [FilterOperator.EQ, "="],
  [FilterOperator.NE, "≠"],
  [FilterOperator.IN, "in"],
  [FilterOperator.NOT_IN, "not in"],
  [FilterOperator.GT, ">"],
  [FilterOperator.GTE, "≥"],
  [FilterOperator.LT, "<"],
  [FilterOperator.LTE, "≤"],
  [FilterOperator.EXISTS, "exists"],
  [FilterOperator.NOT_EXISTS, "does not exist"],
];

const NO_VALUE = new Set([FilterOperator.EXISTS, FilterOperator.NOT_EXISTS]);
const LIST = new Set([FilterOperator.IN, FilterOperator.NOT_IN]);

/** A list typed as "a, b" or one per line. */
export function splitList(text: string): string[] {
  return text
    .split(/[\n,]/)
    .map((s) => s.trim())
    .filter(Boolean);
}

function typedValue(type: ValueType, text: string, where: string): MetadataValue {
  switch (type) {
    case "string":
      return create(MetadataValueSchema, { kind: { case: "stringValue", value: text } });
    case "number": {
      const n = Number(text.trim());
      if (text.trim() === "" || !Number.isFinite(n)) throw new Error(`${where}: "${text}" is not a number`);
      return create(MetadataValueSchema, { kind: { case: "numberValue", value: n } });
    }
    case "boolean": {
      const t = text.trim().toLowerCase();
      if (t !== "true" && t !== "false") throw new Error(`${where}: a boolean is true or false, not "${text}"`);
      return create(MetadataValueSchema, { kind: { case: "boolValue", value: t === "true" } });
    }
    case "timestamp": {
      const date = new Date(text.trim());
      if (text.trim() === "" || Number.isNaN(date.getTime())) throw new Error(`${where}: "${text}" is not a date and time (e.g. 2024-05-01T12:00:00Z)`);
      return create(MetadataValueSchema, { kind: { case: "timestampValue", value: timestampFromDate(date) } });
    }
  }
}

/** The SearchFilter the form describes; throws an Error naming a value of the wrong type. */
export function buildFilter(filters: Filters): MessageInitShape<typeof SearchFilterSchema> | undefined {
  const metadata: Record<string, string> = {};
  for (const pair of filters.metadata) {
    if (pair.key.trim()) metadata[pair.key.trim()] = pair.value;
  }
  const where: MetadataFilter[] = filters.conditions
    .filter((c) => c.key.trim())
    .map((c, i) => {
      const at = `condition ${i + 1} (${c.key.trim()})`;
      const condition: { key: string; op: FilterOperator; value?: MetadataValue; values?: MetadataValue[] } = { key: c.key.trim(), op: c.op };
      if (LIST.has(c.op)) condition.values = splitList(c.value).map((v) => typedValue(c.type, v, at));
      else if (!NO_VALUE.has(c.op)) condition.value = typedValue(c.type, c.value, at);
      return create(MetadataFilterSchema, { node: { case: "condition", value: condition } });
    });
  const filter: MessageInitShape<typeof SearchFilterSchema> = {
    metadata,
    filenames: splitList(filters.filenames),
    mimeTypes: splitList(filters.mimeTypes),
  };
  if (where.length === 1) filter.where = where[0];
  else if (where.length > 1) filter.where = { node: { case: filters.join, value: { filters: where } } };
  const empty = Object.keys(metadata).length === 0 && filter.filenames!.length === 0 && filter.mimeTypes!.length === 0 && where.length === 0;
  return empty ? undefined : filter;
}

/** How many filters are set, for the summary line. */
export function filterCount(filters: Filters): number {
  return (
    filters.metadata.filter((p) => p.key.trim()).length +
    splitList(filters.filenames).length +
    splitList(filters.mimeTypes).length +
    filters.conditions.filter((c) => c.key.trim()).length
  );
}

export function FilterEditor(props: { value: Filters; onChange: (filters: Filters) => void }) {
  const f = props.value;
  const set = (patch: Partial<Filters>) => props.onChange({ ...f, ...patch });
  const setPair = (i: number, patch: Partial<{ key: string; value: string }>) => set({ metadata: f.metadata.map((p, j) => (j === i ? { ...p, ...patch } : p)) });
  const setCondition = (i: number, patch: Partial<Condition>) => set({ conditions: f.conditions.map((c, j) => (j === i ? { ...c, ...patch } : c)) });
  const count = filterCount(f);
  return (
    <details class="filters">
      <summary>Filters{count ? ` (${count})` : ""}</summary>
      <fieldset>
        <legend>Metadata equal to (key = value)</legend>
        {f.metadata.map((pair, i) => (
          <div class="row" key={i}>
            <label for={`meta-key-${i}`} class="visually-hidden">
              Metadata key {i + 1}
            </label>
            <input id={`meta-key-${i}`} placeholder="key" value={pair.key} onInput={(e) => setPair(i, { key: e.currentTarget.value })} />
            <span aria-hidden="true">=</span>
            <label for={`meta-value-${i}`} class="visually-hidden">
              Metadata value {i + 1}
            </label>
            <input id={`meta-value-${i}`} placeholder="value" value={pair.value} onInput={(e) => setPair(i, { value: e.currentTarget.value })} />
            <button type="button" class="link" onClick={() => set({ metadata: f.metadata.filter((_, j) => j !== i) })} aria-label={`Remove metadata pair ${i + 1}`}>
              Remove
            </button>
          </div>
        ))}
        <button type="button" onClick={() => set({ metadata: [...f.metadata, { key: "", value: "" }] })}>
          Add a key = value
        </button>
      </fieldset>
      <div class="row">
        <label for="filter-filenames">File names (one of; comma or line separated)</label>
        <input id="filter-filenames" value={f.filenames} onInput={(e) => set({ filenames: e.currentTarget.value })} placeholder="guide.pdf, notes.md" />
      </div>
      <div class="row">
        <label for="filter-mimetypes">Media types (one of)</label>
        <input id="filter-mimetypes" value={f.mimeTypes} onInput={(e) => set({ mimeTypes: e.currentTarget.value })} placeholder="application/pdf, text/markdown" />
      </div>
      <fieldset>
        <legend>Where (typed metadata conditions)</legend>
        {f.conditions.length > 1 ? (
          <div class="row">
            <label for="filter-join">Combine with</label>
            <select id="filter-join" value={f.join} onChange={(e) => set({ join: e.currentTarget.value as Filters["join"] })}>
              <option value="allOf">all of (AND)</option>
              <option value="anyOf">any of (OR)</option>
            </select>
          </div>
        ) : null}
        {f.conditions.map((c, i) => (
          <div class="row" key={i}>
            <label for={`cond-key-${i}`} class="visually-hidden">
              Condition {i + 1} key
            </label>
            <input id={`cond-key-${i}`} placeholder="key" value={c.key} onInput={(e) => setCondition(i, { key: e.currentTarget.value })} />
            <label for={`cond-op-${i}`} class="visually-hidden">
              Condition {i + 1} operator
            </label>
            <select id={`cond-op-${i}`} value={c.op} onChange={(e) => setCondition(i, { op: Number(e.currentTarget.value) })}>
              {OPERATORS.map(([op, label]) => (
                <option key={op} value={op}>
                  {label}
                </option>
              ))}
            </select>
            {NO_VALUE.has(c.op) ? null : (
              <>
                <label for={`cond-type-${i}`} class="visually-hidden">
                  Condition {i + 1} value type
                </label>
                <select id={`cond-type-${i}`} value={c.type} onChange={(e) => setCondition(i, { type: e.currentTarget.value as ValueType })}>
                  <option value="string">text</option>
                  <option value="number">number</option>
                  <option value="boolean">boolean</option>
                  <option value="timestamp">date-time</option>
                </select>
                <label for={`cond-value-${i}`} class="visually-hidden">
                  Condition {i + 1} value{LIST.has(c.op) ? "s, comma separated" : ""}
                </label>
                <input id={`cond-value-${i}`} placeholder={LIST.has(c.op) ? "a, b, c" : "value"} value={c.value} onInput={(e) => setCondition(i, { value: e.currentTarget.value })} />
              </>
            )}
            <button type="button" class="link" onClick={() => set({ conditions: f.conditions.filter((_, j) => j !== i) })} aria-label={`Remove condition ${i + 1}`}>
              Remove
            </button>
          </div>
        ))}
        <button type="button" onClick={() => set({ conditions: [...f.conditions, { key: "", op: FilterOperator.EQ, type: "string", value: "" }] })}>
          Add a condition
        </button>
      </fieldset>
    </details>
  );
}
