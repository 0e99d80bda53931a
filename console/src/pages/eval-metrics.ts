/**
 * Query sets and their metrics, as docs/evaluation.md defines them and
 * libs/common/src/sluice_common/evaluation.py computes them (`sluice eval` gives the same figures):
 *
 * - a query set is JSONL, one {"id", "query", "relevant": [...], "lang"?} object a line, blank
 *   lines skipped; a hit is relevant when its filename, its document_id or its metadata "source"
 *   is one of `relevant`; a relevant label is credited once, at its first hit;
 * - hit@k (1, 3, 10), MRR@10, nDCG@10 per query, averaged over the queries;
 * - recall@10 (the console's addition): the share of a query's relevant labels credited within
 *   the first 10 hits (with one relevant document, hit@10).
 *
 * Unlike the CLI, which stops at the first bad line, every bad line is reported, so a file can be
 * fixed in one go; a file with any bad line is not run.
 */

export const CUTOFF = 10;

export interface EvalQuery {
  id: string;
  query: string;
  relevant: string[];
  lang: string;
  line: number;
}

export interface LineError {
  /** 1-based; 0 for the whole file. */
  line: number;
  message: string;
}

export interface ParsedSet {
  queries: EvalQuery[];
  errors: LineError[];
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "list";
  return typeof value === "string" ? "str" : typeof value === "number" ? (Number.isInteger(value) ? "int" : "float") : typeof value === "boolean" ? "bool" : typeof value;
}

/** One query object, as sluice_common.evaluation.parse_query; throws an Error naming what is wrong. */
export function parseQuery(obj: unknown, line: number): EvalQuery {
  if (typeof obj !== "object" || obj === null || Array.isArray(obj)) throw new Error(`expected a JSON object, got ${describe(obj)}`);
  const o = obj as Record<string, unknown>;
  const { id, query, relevant } = o;
  const lang = o.lang ?? "";
  if (typeof id !== "string" || !id) throw new Error('"id" must be a non-empty string');
  if (typeof query !== "string" || !query.trim()) throw new Error(`query '${id}': "query" must be a non-empty string`);
  if (!Array.isArray(relevant) || relevant.length === 0 || !relevant.every((r) => typeof r === "string" && r))
    throw new Error(`query '${id}': "relevant" must be a non-empty list of strings`);
  if (typeof lang !== "string") throw new Error(`query '${id}': "lang" must be a string`);
  return { id, query, relevant: [...new Set(relevant as string[])], lang, line };
}

export function parseQuerySet(text: string): ParsedSet {
  const queries: EvalQuery[] = [];
  const errors: LineError[] = [];
  const seen = new Map<string, number>();
  const lines = text.replace(/^\uFEFF/, "").split(/\r\n|\r|\n/);
  lines.forEach((raw, i) => {
    const line = i + 1;
    if (!raw.trim()) return;
    let obj: unknown;
    try {
      obj = JSON.parse(raw);
    } catch (err) {
      errors.push({ line, message: `not valid JSON: ${(err as Error).message}` });
      return;
    }
    let q: EvalQuery;
    try {
      q = parseQuery(obj, line);
    } catch (err) {
      errors.push({ line, message: (err as Error).message });
      return;
    }
    const first = seen.get(q.id);
    if (first !== undefined) {
      errors.push({ line, message: `query id '${q.id}' repeats line ${first}` });
      return;
    }
    seen.set(q.id, line);
    queries.push(q);
  });
  if (queries.length === 0 && errors.length === 0) errors.push({ line: 0, message: "no queries in the file" });
  return { queries, errors };
}

/** What the metrics read of a hit (a SearchHit has these). */
export interface JudgedHit {
  filename: string;
  documentId: string;
  metadata: { [key: string]: string };
}

export function hitLabels(hit: JudgedHit): Set<string> {
  const labels = new Set([hit.filename, hit.documentId]);
  if (hit.metadata && Object.prototype.hasOwnProperty.call(hit.metadata, "source")) labels.add(hit.metadata["source"]);
  labels.delete("");
  return labels;
}

export interface QueryScore {
  /** The rank of the first relevant hit within the first 10, or 0. */
  firstRank: number;
  hit1: number;
  hit3: number;
  hit10: number;
  mrr: number;
  ndcg: number;
  recall: number;
}

/** The metrics of one query's ranked hits (best first), as sluice_common.evaluation.score. */
export function scoreQuery(hits: readonly JudgedHit[], relevant: readonly string[]): QueryScore {
  const wanted = new Set(relevant);
  const credited = new Set<string>();
  const gains: boolean[] = [];
  for (const hit of hits.slice(0, CUTOFF)) {
    let gained = false;
    for (const label of hitLabels(hit)) {
      if (wanted.has(label) && !credited.has(label)) {
        credited.add(label);
        gained = true;
      }
    }
    gains.push(gained);
  }
  const index = gains.indexOf(true);
  const first = index < 0 ? 0 : index + 1;
  let dcg = 0;
  gains.forEach((gain, i) => {
    if (gain) dcg += 1 / Math.log2(i + 2);
  });
  let ideal = 0;
  for (let rank = 1; rank <= Math.min(wanted.size, CUTOFF); rank++) ideal += 1 / Math.log2(rank + 1);
  const within = (k: number) => (first > 0 && first <= k ? 1 : 0);
  return {
    firstRank: first,
    hit1: within(1),
    hit3: within(3),
    hit10: within(10),
    mrr: first ? 1 / first : 0,
    ndcg: ideal ? dcg / ideal : 0,
    recall: wanted.size ? credited.size / wanted.size : 0,
  };
}

export interface ModeSummary {
  queries: number;
  hit1: number;
  hit3: number;
  hit10: number;
  mrr: number;
  ndcg: number;
  recall: number;
  /** The median of the calls' client-side latencies, in milliseconds. */
  p50Ms: number | null;
}

const MEAN_KEYS = ["hit1", "hit3", "hit10", "mrr", "ndcg", "recall"] as const;

export function summarize(scores: readonly QueryScore[], latenciesMs: readonly number[]): ModeSummary {
  const summary: ModeSummary = { queries: scores.length, hit1: 0, hit3: 0, hit10: 0, mrr: 0, ndcg: 0, recall: 0, p50Ms: null };
  if (scores.length) {
    for (const key of MEAN_KEYS) summary[key] = scores.reduce((sum, s) => sum + s[key], 0) / scores.length;
  }
  if (latenciesMs.length) {
    const sorted = [...latenciesMs].sort((a, b) => a - b);
    const mid = sorted.length >> 1;
    summary.p50Ms = sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  }
  return summary;
}
