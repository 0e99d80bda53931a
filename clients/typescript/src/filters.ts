/**
 * Typed metadata values and `where` conditions, from JavaScript values or from text (the Python
 * SDK's filters.py; docs/search.md, "Filters").
 *
 * Values keep their type: string, number, boolean, Date (timestamps), string[] (lists). Text is
 * typed by its form: `true` / `false` a boolean, a decimal number a number, an ISO 8601 date or
 * date-time a timestamp, anything else a string; quotes (`"2024"`) force a string. A condition is
 * `KEY OP VALUE` with OP one of `= != > >= < <=`, or `KEY in A,B,C`, `KEY not-in A,B`,
 * `KEY exists`, `KEY not-exists`.
 */
import { create, isMessage } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";

import { InvalidArgument } from "./errors.js";
import { MetadataValueSchema, StringListSchema, type MetadataValue } from "./gen/sluice/v1/document_pb.js";
import {
  FilterOperator,
  MetadataConditionSchema,
  MetadataFilterListSchema,
  MetadataFilterSchema,
  type MetadataFilter,
} from "./gen/sluice/v1/search_service_pb.js";

/** What a typed metadata value may be. */
export type MetadataInput = string | number | boolean | Date | readonly string[] | MetadataValue;

const NUMBER = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;
const DATE = /^\d{4}-\d{2}-\d{2}([T ].+)?$/;
const CONDITION = /^\s*(?<key>[^\s=!<>]+)\s*(?:(?<symbol>>=|<=|!=|=|>|<)\s*(?<value>.*?)|\s+(?<word>in|not-in)\s+(?<values>.+?)|\s+(?<test>exists|not-exists))\s*$/;
const SYMBOLS: Record<string, FilterOperator> = {
  "=": FilterOperator.EQ, "!=": FilterOperator.NE, ">": FilterOperator.GT, ">=": FilterOperator.GTE,
  "<": FilterOperator.LT, "<=": FilterOperator.LTE,
};
const WORDS: Record<string, FilterOperator> = {
  "in": FilterOperator.IN, "not-in": FilterOperator.NOT_IN, "exists": FilterOperator.EXISTS,
  "not-exists": FilterOperator.NOT_EXISTS,
};

/** A MetadataValue from a JavaScript value. */
export function metadataValue(value: MetadataInput): MetadataValue {
  if (isMessage(value, MetadataValueSchema)) return value;
  if (typeof value === "boolean") return create(MetadataValueSchema, { kind: { case: "boolValue", value } });
  if (typeof value === "number") return create(MetadataValueSchema, { kind: { case: "numberValue", value } });
  if (value instanceof Date) {
    return create(MetadataValueSchema, { kind: { case: "timestampValue", value: timestampFromDate(value) } });
  }
  if (Array.isArray(value)) {
    const values = (value as readonly unknown[]).map(String);
    return create(MetadataValueSchema, { kind: { case: "stringListValue", value: create(StringListSchema, { values }) } });
  }
  return create(MetadataValueSchema, { kind: { case: "stringValue", value: String(value) } });
}

/** A MetadataValue typed by the text's form (see the module's comment). */
export function parseValue(raw: string): MetadataValue {
  const text = raw.trim();
  if (text.length >= 2 && text[0] === text[text.length - 1] && (text[0] === '"' || text[0] === "'")) {
    return metadataValue(text.slice(1, -1));
  }
  if (text === "true" || text === "false") return metadataValue(text === "true");
  if (NUMBER.test(text)) return metadataValue(Number.parseFloat(text));
  if (DATE.test(text)) {
    // A date or date-time without a zone is UTC, as in the Python SDK.
    const zoned = /([zZ]|[+-]\d{2}:?\d{2})$/.test(text) || text.length === 10 ? text : `${text.replace(" ", "T")}Z`;
    const moment = new Date(zoned);
    if (!Number.isNaN(moment.getTime())) return metadataValue(moment);
  }
  return metadataValue(text);
}

/** One condition from text; InvalidArgument (reason INVALID_FILTER, as the server names a filter it
 * refuses) with a readable message when it cannot be read, before any call. */
export function condition(text: string): MetadataFilter {
  const match = CONDITION.exec(text);
  const groups = match?.groups;
  if (!groups) {
    throw new InvalidArgument("expected KEY OP VALUE (OP: = != > >= < <=), KEY in A,B, KEY not-in A,B, KEY exists or " +
      `KEY not-exists; got ${JSON.stringify(text)}`, { reason: "INVALID_FILTER" });
  }
  const result = create(MetadataConditionSchema, { key: groups.key });
  const value = (groups.value ?? "").trim();
  if (groups.symbol && "=!<>".includes(value.charAt(0)) && value !== "") {
    // "year>>2024" would compare with the string ">2024" and silently match nothing.
    throw new InvalidArgument(`condition ${JSON.stringify(text)}: its value ${JSON.stringify(value)} starts with an ` +
      `operator; write one operator (= != > >= < <=), or quote the value to compare with that string ('${value}')`,
      { reason: "INVALID_FILTER" });
  }
  if (groups.symbol) {
    result.op = SYMBOLS[groups.symbol];
    result.value = parseValue(groups.value ?? "");
  } else if (groups.word) {
    result.op = WORDS[groups.word];
    result.values = (groups.values ?? "").split(",").filter((item) => item.trim()).map(parseValue);
  } else {
    result.op = WORDS[groups.test];
  }
  return create(MetadataFilterSchema, { node: { case: "condition", value: result } });
}

/** Conditions that must all hold (all_of): text (see `condition`) or MetadataFilter messages. */
export function where(conditions: string | MetadataFilter | readonly (string | MetadataFilter)[] | undefined): MetadataFilter | undefined {
  if (conditions === undefined) return undefined;
  const list = typeof conditions === "string" || isMessage(conditions, MetadataFilterSchema) ? [conditions] : conditions;
  const parsed = list.map((c) => (typeof c === "string" ? condition(c) : c));
  if (parsed.length === 0) return undefined;
  if (parsed.length === 1) return parsed[0];
  return create(MetadataFilterSchema, {
    node: { case: "allOf", value: create(MetadataFilterListSchema, { filters: parsed }) },
  });
}
