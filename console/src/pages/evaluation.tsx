/**
 * Evaluation (#/evaluation, or #/evaluation/<collection>): a query set (JSONL, docs/evaluation.md)
 * read in the browser, every bad line reported; run through the Search API in each mode chosen
 * (a few calls at a time, with progress, cancellable), scored as `sluice eval` scores it
 * (eval-metrics.ts: hit@k, MRR@10, nDCG@10, and recall@10), shown as a table and a chart; and the
 * collection's generations with the reindex gate's verdicts (CollectionGeneration.evaluation).
 */
import { EvaluationState, GenerationState, VectorPrecision, type Collection, type CollectionGeneration } from "@gen/collection_pb.js";
import { SearchMode, type SearchHit } from "@gen/search_service_pb.js";
import { useEffect, useRef, useState } from "preact/hooks";
import { documents, errorInfo, search } from "../api";
import { useRoute } from "../router";
import { BarChart } from "../ui/bar-chart";
import { CollectionSelect, useCollectionNames } from "../ui/collection-select";
import { ErrorBanner } from "../ui/error";
import { enumName, time } from "../ui/format";
import { Num } from "../ui/number";
import { Table } from "../ui/table";
import { CUTOFF, parseQuerySet, scoreQuery, summarize, type EvalQuery, type LineError, type ModeSummary, type QueryScore } from "./eval-metrics";
import { modeName } from "./search";

const ALL_MODES = [SearchMode.VECTOR, SearchMode.KEYWORD, SearchMode.HYBRID];
/** The first search of a collection on a local model loads the model: allowed this long, not counted. */
const WARM_UP_MS = 120_000;

interface QueryRow {
  query: EvalQuery;
  score: QueryScore;
  top: string;
}

interface ModeResult {
  mode: SearchMode;
  summary: ModeSummary;
  rows: QueryRow[];
}

interface Run {
  done: number;
  total: number;
  phase: "warm-up" | "searching" | "finished" | "cancelled" | "failed";
  results: ModeResult[];
  error?: unknown;
  settings: string;
}

function stateName(values: object, value: number): string {
  return enumName(values as unknown as Record<number, string>, value, "");
}

/** The query set's file, read and checked line by line. */
function QuerySetInput(props: { onLoad: (name: string, queries: EvalQuery[], errors: LineError[]) => void }) {
  async function read(event: Event) {
    const file = (event.currentTarget as HTMLInputElement).files?.[0];
    if (!file) return;
    let text: string;
    try {
      const bytes = await file.arrayBuffer();
      text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    } catch {
      props.onLoad(file.name, [], [{ line: 0, message: "not UTF-8 text" }]);
      return;
    }
    const parsed = parseQuerySet(text);
    props.onLoad(file.name, parsed.queries, parsed.errors);
  }
  return (
    <div class="row">
      <label for="eval-file">Query set (JSONL: one {'{"id", "query", "relevant": [...]}'} a line)</label>
      <input id="eval-file" type="file" accept=".jsonl,.json,.ndjson,.txt,application/json,text/plain" onChange={read} />
    </div>
  );
}

function SummaryTable(props: { results: ModeResult[] }) {
  return (
    <Table
      caption="Evaluation figures per mode"
      rows={props.results}
      rowKey={(r) => String(r.mode)}
      columns={[
        { header: "Mode", cell: (r) => <span data-mode={modeName(r.mode)}>{modeName(r.mode)}</span> },
        { header: "Queries", numeric: true, cell: (r) => String(r.summary.queries) },
        { header: "hit@1", numeric: true, cell: (r) => <Num value={r.summary.hit1} digits={3} name="hit@1" /> },
        { header: "hit@3", numeric: true, cell: (r) => <Num value={r.summary.hit3} digits={3} name="hit@3" /> },
        { header: "hit@10", numeric: true, cell: (r) => <Num value={r.summary.hit10} digits={3} name="hit@10" /> },
        { header: "MRR@10", numeric: true, cell: (r) => <Num value={r.summary.mrr} digits={3} name="mrr@10" /> },
        { header: "recall@10", numeric: true, cell: (r) => <Num value={r.summary.recall} digits={3} name="recall@10" /> },
        { header: "nDCG@10", numeric: true, cell: (r) => <Num value={r.summary.ndcg} digits={3} name="ndcg@10" /> },
        { header: "p50 ms (client)", numeric: true, cell: (r) => (r.summary.p50Ms === null ? "" : r.summary.p50Ms.toFixed(1)) },
      ]}
    />
  );
}

function PerQuery(props: { result: ModeResult }) {
  const name = modeName(props.result.mode);
  return (
    <details class="more">
      <summary>
        {name}: each query ({props.result.rows.filter((r) => r.score.firstRank === 0).length} without a relevant hit in the first {CUTOFF})
      </summary>
      <Table
        caption={`${name}: each query's first relevant rank`}
        rows={props.result.rows}
        rowKey={(r) => r.query.id}
        rowClass={(r) => (r.score.firstRank === 0 ? "miss" : "")}
        columns={[
          { header: "Id", cell: (r) => r.query.id },
          { header: "Query", cell: (r) => r.query.query },
          { header: "Relevant", cell: (r) => r.query.relevant.join(", ") },
          { header: "First relevant rank", numeric: true, cell: (r) => (r.score.firstRank ? String(r.score.firstRank) : "none") },
          { header: "Reciprocal rank", numeric: true, cell: (r) => <Num value={r.score.mrr} digits={3} /> },
          { header: "Top hit", cell: (r) => r.top },
        ]}
      />
    </details>
  );
}

function ratio(g: CollectionGeneration): string {
  const e = g.evaluation;
  if (!e || e.state === EvaluationState.PENDING || !e.activeScore) return "";
  return `${(e.candidateScore / e.activeScore).toFixed(3)}×`;
}

function History(props: { collection: Collection | null }) {
  const generations = props.collection?.generations ?? [];
  const gated = generations.filter((g) => g.evaluation && g.evaluation.state !== EvaluationState.PENDING);
  return (
    <section aria-labelledby="eval-history">
      <h2 id="eval-history">Generations and the reindex gate</h2>
      <p class="hint">
        A reindex started with an eval set is measured before it may switch: every query searched (HYBRID, top 10, no reranker) on the ACTIVE generation and on the new one, by MRR@10; below min ratio × the ACTIVE score, the new generation is cancelled
        (docs/evaluation.md, "Gating a reindex on an eval set").
      </p>
      <Table
        caption="The collection's generations with their gate verdicts"
        rows={generations}
        rowKey={(g) => String(g.number)}
        empty="No generation to show."
        columns={[
          { header: "Generation", numeric: true, cell: (g) => String(g.number) },
          { header: "State", cell: (g) => <span class={`state-${stateName(GenerationState, g.state)}`}>{stateName(GenerationState, g.state)}</span> },
          { header: "Embedder", cell: (g) => `${g.embedder?.model ?? ""} (${g.embedder?.dimensions ?? ""})` },
          { header: "Precision", cell: (g) => (g.vectorPrecision ? stateName(VectorPrecision, g.vectorPrecision) : "") },
          { header: "Created", cell: (g) => time(g.createTime) },
          { header: "Active from", cell: (g) => time(g.activateTime) },
          { header: "Ended", cell: (g) => time(g.endTime) },
          {
            header: "Gate",
            cell: (g) =>
              g.evaluation ? <span class={`state-${stateName(EvaluationState, g.evaluation.state)}`}>{stateName(EvaluationState, g.evaluation.state)}</span> : <span class="unset">no eval set</span>,
          },
          { header: "Metric", cell: (g) => g.evaluation?.metric ?? "" },
          { header: "Compared with", numeric: true, cell: (g) => (g.evaluation?.activeGeneration ? `generation ${g.evaluation.activeGeneration}` : "") },
          { header: "Its score", numeric: true, cell: (g) => (g.evaluation && g.evaluation.state !== EvaluationState.PENDING ? <Num value={g.evaluation.activeScore} digits={3} /> : "") },
          { header: "New score", numeric: true, cell: (g) => (g.evaluation && g.evaluation.state !== EvaluationState.PENDING ? <Num value={g.evaluation.candidateScore} digits={3} /> : "") },
          { header: "Ratio", numeric: true, cell: ratio },
          { header: "Min ratio", numeric: true, cell: (g) => (g.evaluation ? g.evaluation.minRatio.toFixed(2) : "") },
          { header: "Queries", numeric: true, cell: (g) => (g.evaluation ? String(g.evaluation.queries) : "") },
          { header: "Verdict at", cell: (g) => time(g.evaluation?.evaluateTime) },
        ]}
      />
      {gated.length ? (
        <BarChart
          title="MRR@10 at each gated reindex"
          description={gated
            .map((g) => `generation ${g.number}: ${g.evaluation!.candidateScore.toFixed(3)} against generation ${g.evaluation!.activeGeneration}'s ${g.evaluation!.activeScore.toFixed(3)}, ${stateName(EvaluationState, g.evaluation!.state)}`)
            .join("; ")}
          series={["the ACTIVE generation then", "the new generation"]}
          groups={gated.map((g) => ({ label: `gen. ${g.number} (${stateName(EvaluationState, g.evaluation!.state)})`, values: [g.evaluation!.activeScore, g.evaluation!.candidateScore] }))}
          max={1}
        />
      ) : null}
    </section>
  );
}

export function EvaluationPage() {
  const route = useRoute();
  const [error, setError] = useState<unknown>(null);
  const names = useCollectionNames(setError);
  const [collection, setCollection] = useState(route.segments[1] ?? "");
  const [info, setInfo] = useState<Collection | null>(null);
  const [fileName, setFileName] = useState("");
  const [queries, setQueries] = useState<EvalQuery[]>([]);
  const [lineErrors, setLineErrors] = useState<LineError[]>([]);
  const [modes, setModes] = useState<SearchMode[]>(ALL_MODES);
  const [concurrency, setConcurrency] = useState(4);
  const [generation, setGeneration] = useState(0);
  const [rerankOff, setRerankOff] = useState(false);
  const [run, setRun] = useState<Run | null>(null);
  const abort = useRef<AbortController | null>(null);

  useEffect(() => {
    if (names && names.length && !names.includes(collection)) setCollection(names[0]);
  }, [names]);

  const loadInfo = () => {
    if (!collection) return;
    documents
      .getCollection({ name: collection })
      .then(setInfo)
      .catch(setError);
  };
  useEffect(() => {
    setInfo(null);
    setGeneration(0);
    loadInfo();
  }, [collection]);
  useEffect(() => () => abort.current?.abort(), []);

  const running = run !== null && (run.phase === "warm-up" || run.phase === "searching");

  async function start() {
    const controller = new AbortController();
    abort.current = controller;
    const chosen = ALL_MODES.filter((m) => modes.includes(m));
    const total = chosen.length * queries.length;
    const settings = `${collection}, ${queries.length} queries from ${fileName}, top_k ${CUTOFF}${generation ? `, generation ${generation}` : ""}${rerankOff ? ", no reranking" : ""}`;
    setRun({ done: 0, total, phase: "warm-up", results: [], settings });
    const request = (mode: SearchMode, query: string) => ({
      collection,
      query,
      topK: CUTOFF,
      mode,
      generation,
      rerank: rerankOff ? { disabled: true } : undefined,
    });
    const hits = new Map<SearchMode, SearchHit[][]>(chosen.map((m) => [m, new Array(queries.length)]));
    const latencies = new Map<SearchMode, number[]>(chosen.map((m) => [m, []]));
    let current = "";
    try {
      for (const mode of chosen) {
        current = `query '${queries[0].id}' (${modeName(mode)}, warm-up)`;
        await search.search(request(mode, queries[0].query), { signal: controller.signal, timeoutMs: WARM_UP_MS });
      }
      setRun((r) => r && { ...r, phase: "searching" });
      const tasks = chosen.flatMap((mode) => queries.map((_, index) => ({ mode, index })));
      let next = 0;
      let done = 0;
      const worker = async () => {
        while (next < tasks.length && !controller.signal.aborted) {
          const task = tasks[next++];
          const query = queries[task.index];
          const started = performance.now();
          try {
            const response = await search.search(request(task.mode, query.query), { signal: controller.signal });
            latencies.get(task.mode)!.push(performance.now() - started);
            hits.get(task.mode)![task.index] = response.hits;
          } catch (err) {
            current = `query '${query.id}' (${modeName(task.mode)})`;
            throw err;
          }
          done++;
          setRun((r) => r && { ...r, done });
        }
      };
      await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, tasks.length)) }, worker));
      if (controller.signal.aborted) throw new DOMException("cancelled", "AbortError");
      const results: ModeResult[] = chosen.map((mode) => {
        const rows = queries.map((query, index) => {
          const modeHits = hits.get(mode)![index] ?? [];
          return { query, score: scoreQuery(modeHits, query.relevant), top: modeHits[0]?.filename ?? "" };
        });
        return { mode, rows, summary: summarize(rows.map((r) => r.score), latencies.get(mode)!) };
      });
      setRun((r) => r && { ...r, phase: "finished", results, done: total });
    } catch (err) {
      controller.abort();
      if (abort.current !== controller) return;
      const info = errorInfo(err);
      if (info.code === "canceled" || (err instanceof DOMException && err.name === "AbortError") || controller.signal.reason === "cancel") {
        setRun((r) => r && { ...r, phase: "cancelled" });
      } else {
        setRun((r) => r && { ...r, phase: "failed", error: Object.assign(new Error(`${current}: ${info.message}`), { cause: err }) });
      }
    }
  }

  function cancel() {
    abort.current?.abort("cancel");
  }

  const building = (info?.generations ?? []).filter((g) => g.state === GenerationState.BUILDING);
  const results = run?.phase === "finished" ? run.results : [];
  const canRun = !!collection && queries.length > 0 && lineErrors.length === 0 && modes.length > 0 && !running;

  return (
    <section>
      <h1>Evaluation</h1>
      <ErrorBanner error={error} onDismiss={() => setError(null)} />
      <p class="hint">
        Scores a collection on a labelled query set through the Search API, as <code>sluice eval</code> does: a hit is relevant when its file name, its document id or its metadata <code>source</code> is one of the query's{" "}
        <code>relevant</code> (docs/evaluation.md).
      </p>
      <form
        class="eval-form"
        onSubmit={(e) => {
          e.preventDefault();
          if (canRun) void start();
        }}
      >
        <div class="row">
          <CollectionSelect id="eval-collection" names={names} value={collection} onChange={setCollection} />
          <label for="eval-generation">Generation</label>
          <select id="eval-generation" value={generation} onChange={(e) => setGeneration(Number(e.currentTarget.value))}>
            <option value={0}>active</option>
            {building.map((g) => (
              <option key={g.number} value={g.number}>
                building (generation {g.number}, {g.embedder?.model})
              </option>
            ))}
          </select>
        </div>
        <QuerySetInput
          onLoad={(name, q, errors) => {
            setFileName(name);
            setQueries(q);
            setLineErrors(errors);
            setRun(null);
          }}
        />
        {fileName ? (
          <div aria-live="polite" class="file-status">
            {lineErrors.length ? (
              <>
                <p class="bad">
                  {fileName}: {lineErrors.length} bad line{lineErrors.length === 1 ? "" : "s"}; fix {lineErrors.length === 1 ? "it" : "them"} to run the set ({queries.length} good quer{queries.length === 1 ? "y" : "ies"}).
                </p>
                <ul class="line-errors">
                  {lineErrors.slice(0, 50).map((e) => (
                    <li key={e.line + e.message}>
                      {e.line ? `${fileName}:${e.line}: ` : `${fileName}: `}
                      {e.message}
                    </li>
                  ))}
                  {lineErrors.length > 50 ? <li>… and {lineErrors.length - 50} more</li> : null}
                </ul>
              </>
            ) : (
              <p class="ok">
                {fileName}: {queries.length} quer{queries.length === 1 ? "y" : "ies"}.
              </p>
            )}
          </div>
        ) : null}
        <fieldset>
          <legend>Modes</legend>
          {ALL_MODES.map((mode) => (
            <span key={mode} class="check">
              <input
                type="checkbox"
                id={`eval-mode-${mode}`}
                checked={modes.includes(mode)}
                onChange={(e) => setModes(e.currentTarget.checked ? [...modes, mode] : modes.filter((m) => m !== mode))}
              />
              <label for={`eval-mode-${mode}`}>{modeName(mode)}</label>{" "}
            </span>
          ))}
        </fieldset>
        <div class="row">
          <label for="eval-concurrency">Searches at a time</label>
          <select id="eval-concurrency" value={concurrency} onChange={(e) => setConcurrency(Number(e.currentTarget.value))}>
            {[1, 2, 4, 8].map((n) => (
              <option key={n} value={n}>
                {n}
              </option>
            ))}
          </select>
          <input type="checkbox" id="eval-norerank" checked={rerankOff} onChange={(e) => setRerankOff(e.currentTarget.checked)} />
          <label for="eval-norerank">No reranking (as the reindex gate)</label>
        </div>
        <div class="actions">
          <button type="submit" class="primary" disabled={!canRun}>
            Run
          </button>
          {running ? (
            <button type="button" onClick={cancel}>
              Cancel
            </button>
          ) : null}
        </div>
      </form>
      {run ? (
        <div class="progress" aria-live="polite">
          <label for="eval-progress">{run.phase === "warm-up" ? "Warming up (a local model loads on the first search)…" : "Searches"}</label>
          <progress id="eval-progress" max={run.total || 1} value={run.done} />
          <span class="count">
            {run.done} / {run.total}
          </span>
          {run.phase === "cancelled" ? <span class="bad">cancelled</span> : null}
          {run.phase === "finished" ? <span class="ok">done</span> : null}
        </div>
      ) : null}
      {run?.phase === "failed" ? <ErrorBanner error={run.error} /> : null}
      {results.length ? (
        <section aria-labelledby="eval-results" class="eval-results">
          <h2 id="eval-results">Results</h2>
          <p class="hint">{run!.settings}. p50 is measured in the browser with {concurrency} search{concurrency === 1 ? "" : "es"} at a time.</p>
          <SummaryTable results={results} />
          <BarChart
            title="MRR@10, recall@10 and hit@1 per mode"
            description={results.map((r) => `${modeName(r.mode)}: MRR@10 ${r.summary.mrr.toFixed(3)}, recall@10 ${r.summary.recall.toFixed(3)}, hit@1 ${r.summary.hit1.toFixed(3)}`).join("; ")}
            series={["MRR@10", "recall@10", "hit@1"]}
            groups={results.map((r) => ({ label: modeName(r.mode), values: [r.summary.mrr, r.summary.recall, r.summary.hit1] }))}
            max={1}
          />
          {results.map((r) => (
            <PerQuery key={r.mode} result={r} />
          ))}
        </section>
      ) : null}
      <History collection={info} />
      <button type="button" onClick={loadInfo} disabled={!collection}>
        Refresh generations
      </button>
    </section>
  );
}
