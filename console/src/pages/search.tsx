/**
 * The search playground (#/search, or #/search/<collection>): a query, its filters and top k,
 * searched with one setting or two side by side (each its own mode, reranking and generation:
 * the ACTIVE one or a reindex's BUILDING one, SearchRequest.generation). Each hit shows its text
 * with the matched spans marked, where it comes from (a link to its document page), its scores,
 * and with `explain` why it ranked there (SearchHit.explanation: docs/search.md).
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { ComponentChildren } from "preact";
import { GenerationState, RerankerProvider, type Collection } from "@gen/collection_pb.js";
import { RerankStatus, SearchMode, type SearchHit, type SearchRequestSchema, type SearchResponse } from "@gen/search_service_pb.js";
import { useEffect, useMemo, useState } from "preact/hooks";
import { documents, search } from "../api";
import { href, useRoute } from "../router";
import { CollectionSelect, useCollectionNames } from "../ui/collection-select";
import { ErrorBanner } from "../ui/error";
import { enumName } from "../ui/format";
import { Highlighted } from "../ui/highlight";
import { Num } from "../ui/number";
import { buildFilter, EMPTY_FILTERS, FilterEditor, type Filters } from "./search-filters";

type RerankChoice = "default" | "off" | "other";

interface Setting {
  mode: SearchMode;
  rerank: RerankChoice;
  provider: RerankerProvider;
  model: string;
  candidates: string;
  timeoutMs: string;
  /** SearchRequest.generation: 0 for the ACTIVE one. */
  generation: number;
  explain: boolean;
}

interface Outcome {
  response?: SearchResponse;
  error?: unknown;
  elapsedMs: number;
  request: { query: string; setting: Setting };
}

const MODES: [SearchMode, string][] = [
  [SearchMode.HYBRID, "Hybrid (keyword and vector, fused)"],
  [SearchMode.VECTOR, "Vector (embedding similarity)"],
  [SearchMode.KEYWORD, "Keyword (BM25)"],
];

const PROVIDERS: [RerankerProvider, string][] = [
  [RerankerProvider.CROSS_ENCODER, "cross-encoder (on search's CPU)"],
  [RerankerProvider.COHERE, "Cohere"],
  [RerankerProvider.JINA, "Jina"],
  [RerankerProvider.TEI, "Text Embeddings Inference"],
];

const DEFAULT_SETTING: Setting = {
  mode: SearchMode.HYBRID,
  rerank: "default",
  provider: RerankerProvider.CROSS_ENCODER,
  model: "",
  candidates: "",
  timeoutMs: "",
  generation: 0,
  explain: true,
};

export function modeName(mode: SearchMode): string {
  return enumName(SearchMode as unknown as Record<number, string>, mode, "");
}

function rerankStatusName(status: RerankStatus): string {
  return status === RerankStatus.UNSPECIFIED ? "not asked" : enumName(RerankStatus as unknown as Record<number, string>, status, "");
}

function providerName(provider: RerankerProvider): string {
  return enumName(RerankerProvider as unknown as Record<number, string>, provider, "");
}

/** The request of one setting; throws an Error for a field the console cannot read. */
function requestOf(collection: string, query: string, topK: number, filters: Filters, setting: Setting): MessageInitShape<typeof SearchRequestSchema> {
  const request: MessageInitShape<typeof SearchRequestSchema> = {
    collection,
    query,
    topK,
    mode: setting.mode,
    filter: buildFilter(filters),
    explain: setting.explain,
    generation: setting.generation,
  };
  if (setting.rerank === "off") request.rerank = { disabled: true };
  if (setting.rerank === "other") {
    const whole = (text: string, what: string) => {
      const n = text.trim() === "" ? 0 : Number(text);
      if (!Number.isInteger(n) || n < 0) throw new Error(`${what} must be a whole number`);
      return n;
    };
    request.rerank = {
      reranker: {
        provider: setting.provider,
        model: setting.model.trim(),
        candidates: whole(setting.candidates, "Reranker candidates"),
        timeoutMs: whole(setting.timeoutMs, "Reranker time budget"),
      },
    };
  }
  return request;
}

function SettingEditor(props: { id: string; label: string; value: Setting; onChange: (s: Setting) => void; collection: Collection | null }) {
  const s = props.value;
  const set = (patch: Partial<Setting>) => props.onChange({ ...s, ...patch });
  const id = props.id;
  const reranker = props.collection?.reranker;
  const hasReranker = !!reranker && reranker.provider !== RerankerProvider.UNSPECIFIED;
  const generations = (props.collection?.generations ?? []).filter((g) => g.state === GenerationState.ACTIVE || g.state === GenerationState.BUILDING);
  return (
    <fieldset class="setting">
      <legend>{props.label}</legend>
      <div class="row">
        <label for={`${id}-mode`}>Mode</label>
        <select id={`${id}-mode`} value={s.mode} onChange={(e) => set({ mode: Number(e.currentTarget.value) })}>
          {MODES.map(([mode, label]) => (
            <option key={mode} value={mode}>
              {label}
            </option>
          ))}
        </select>
      </div>
      <div class="row">
        <label for={`${id}-rerank`}>Reranking</label>
        <select id={`${id}-rerank`} value={s.rerank} onChange={(e) => set({ rerank: e.currentTarget.value as RerankChoice })}>
          <option value="default">collection default ({hasReranker ? `${providerName(reranker!.provider).toLowerCase()} ${reranker!.model}` : "none"})</option>
          <option value="off">off</option>
          <option value="other">another reranker…</option>
        </select>
      </div>
      {s.rerank === "other" ? (
        <div class="row sub">
          <label for={`${id}-provider`}>Provider</label>
          <select id={`${id}-provider`} value={s.provider} onChange={(e) => set({ provider: Number(e.currentTarget.value) })}>
            {PROVIDERS.map(([p, label]) => (
              <option key={p} value={p}>
                {label}
              </option>
            ))}
          </select>
          <label for={`${id}-model`}>Model</label>
          <input id={`${id}-model`} value={s.model} onInput={(e) => set({ model: e.currentTarget.value })} placeholder="provider default" size={16} />
          <label for={`${id}-candidates`}>Candidates</label>
          <input id={`${id}-candidates`} value={s.candidates} inputMode="numeric" onInput={(e) => set({ candidates: e.currentTarget.value })} placeholder="50" size={4} />
          <label for={`${id}-timeout`}>Time budget (ms)</label>
          <input id={`${id}-timeout`} value={s.timeoutMs} inputMode="numeric" onInput={(e) => set({ timeoutMs: e.currentTarget.value })} placeholder="1000" size={5} />
        </div>
      ) : null}
      <div class="row">
        <label for={`${id}-generation`}>Generation</label>
        <select id={`${id}-generation`} value={s.generation} onChange={(e) => set({ generation: Number(e.currentTarget.value) })}>
          {generations.length === 0 ? <option value={0}>active</option> : null}
          {generations.map((g) =>
            g.state === GenerationState.ACTIVE ? (
              <option key={g.number} value={0}>
                active (generation {g.number}, {g.embedder?.model})
              </option>
            ) : (
              <option key={g.number} value={g.number}>
                building (generation {g.number}, {g.embedder?.model}, {String(g.documentsReady)}/{String(g.documentsTotal)} embedded)
              </option>
            ),
          )}
        </select>
      </div>
      <div class="row">
        <input type="checkbox" id={`${id}-explain`} checked={s.explain} onChange={(e) => set({ explain: e.currentTarget.checked })} />
        <label for={`${id}-explain`}>Explain each hit's rank</label>
      </div>
    </fieldset>
  );
}

/** One figure of an explanation: a row of its table, the value in `data-name` for tests and tools. */
function Row(props: { name: string; label: string; children: ComponentChildren }) {
  return (
    <tr data-name={props.name}>
      <th scope="row">{props.label}</th>
      <td class="num">{props.children}</td>
    </tr>
  );
}

function rank(value: number | undefined) {
  return value === undefined ? <span class="unset">not a candidate</span> : <span class="fig" data-value={String(value)}>{value}</span>;
}

function Explanation(props: { hit: SearchHit; rank: number; open: boolean; panel: string }) {
  const x = props.hit.explanation;
  if (!x) return null;
  return (
    <details class="explain" open={props.open}>
      <summary>Why #{props.rank}</summary>
      <table class="explain-table" data-panel={props.panel}>
        <caption class="visually-hidden">Why hit {props.rank} ranked there</caption>
        <tbody>
          <Row name="keywordScore" label="Keyword (BM25) score">
            <Num value={x.keywordScore} />
          </Row>
          <Row name="keywordRank" label="Keyword rank">
            {rank(x.keywordRank)}
          </Row>
          <Row name="vectorSimilarity" label="Vector similarity (cosine)">
            <Num value={x.vectorSimilarity} />
          </Row>
          <Row name="vectorRank" label="Vector rank">
            {rank(x.vectorRank)}
          </Row>
          <Row name="fusedScore" label="Fused score (the mode's score)">
            <Num value={x.fusedScore} />
          </Row>
          <Row name="keywordContribution" label="Keyword part of the fused score">
            <Num value={x.keywordContribution} />
          </Row>
          <Row name="vectorContribution" label="Vector part of the fused score">
            <Num value={x.vectorContribution} />
          </Row>
          <Row name="vectorWeight" label="Vector weight (keyword: 1 − it)">
            <Num value={x.vectorWeight} />
          </Row>
          <Row name="firstStageRank" label="Rank before reranking">
            <span class="fig" data-value={String(x.firstStageRank)}>
              {x.firstStageRank}
            </span>
          </Row>
          <Row name="rerankScore" label="Reranker score">
            <Num value={x.rerankScore} />
          </Row>
          <Row name="rerankStatus" label="Reranker">
            <span class="fig" data-value={rerankStatusName(x.rerankStatus)}>
              {rerankStatusName(x.rerankStatus)}
            </span>
          </Row>
          <Row name="matchedTerms" label="Matched terms">
            {x.matchedTerms.length ? (
              <span class="terms">
                {x.matchedTerms.map((t) => (
                  <code key={t}>{t}</code>
                ))}
              </span>
            ) : (
              <span class="unset">none</span>
            )}
          </Row>
        </tbody>
      </table>
    </details>
  );
}

function HitItem(props: { hit: SearchHit; rank: number; panel: string; other?: { label: string; ranks: Map<string, number> } }) {
  const hit = props.hit;
  const otherRank = props.other?.ranks.get(hit.chunkId);
  return (
    <li class="hit" data-chunk-id={hit.chunkId} data-document-id={hit.documentId}>
      <div class="hit-head">
        <span class="rank">#{props.rank}</span>
        <a href={href("documents", hit.documentId)} class="filename">
          {hit.filename || hit.documentId}
        </a>
        <span class="where">
          {hit.pageNumber ? `page ${hit.pageNumber}, ` : ""}chunk {hit.chunkIndex}
          {hit.elementType ? `, ${hit.elementType}` : ""}
        </span>
        {props.other ? (
          <span class="other-rank">
            {otherRank ? `#${otherRank} in ${props.other.label}` : `not in ${props.other.label}`}
          </span>
        ) : null}
      </div>
      <div class="scores">
        <span>
          score <Num value={hit.score} name="score" />
        </span>
        <span>
          first stage <Num value={hit.firstStageScore} name="firstStageScore" />
        </span>
        {hit.rerankScore ? (
          <span>
            reranker <Num value={hit.rerankScore} name="hitRerankScore" />
          </span>
        ) : null}
      </div>
      <Highlighted text={hit.text} highlights={hit.highlights} />
      <Explanation hit={hit} rank={props.rank} open={props.rank === 1} panel={props.panel} />
    </li>
  );
}

function Results(props: { label: string; panel: string; outcome: Outcome | null; running: boolean; other?: { label: string; ranks: Map<string, number> } }) {
  const { outcome } = props;
  return (
    <section class="results" aria-labelledby={`${props.panel}-results`} aria-busy={props.running}>
      <h2 id={`${props.panel}-results`}>{props.label}</h2>
      {props.running ? <p aria-live="polite">Searching…</p> : null}
      {outcome?.error ? <ErrorBanner error={outcome.error} /> : null}
      {outcome?.response ? <ResponseView response={outcome.response} elapsedMs={outcome.elapsedMs} panel={props.panel} other={props.other} /> : null}
      {!outcome && !props.running ? <p class="hint">No search yet.</p> : null}
    </section>
  );
}

function ResponseView(props: { response: SearchResponse; elapsedMs: number; panel: string; other?: { label: string; ranks: Map<string, number> } }) {
  const r = props.response;
  const rerank = r.rerank;
  return (
    <>
      <p class="summary" aria-live="polite" data-panel-summary={props.panel}>
        {r.hits.length} hit{r.hits.length === 1 ? "" : "s"}, {modeName(r.mode).toLowerCase()} search, generation {r.generation} ({r.embedderModel}),{" "}
        {Math.round(props.elapsedMs)} ms
        {rerank && rerank.status !== RerankStatus.UNSPECIFIED ? (
          <>
            {"; reranker "}
            {providerName(rerank.provider).toLowerCase()} {rerank.model}: {rerankStatusName(rerank.status)} ({rerank.candidates} candidates, {Math.round(rerank.elapsedMs)} ms)
            {rerank.message ? ` — ${rerank.message}` : ""}
          </>
        ) : null}
      </p>
      {r.hits.length === 0 ? (
        <p class="empty">No hit: no READY chunk matches (check the filters, or the mode: KEYWORD needs the query's words).</p>
      ) : (
        <ol class="hits" data-panel={props.panel}>
          {r.hits.map((hit, i) => (
            <HitItem key={hit.chunkId || i} hit={hit} rank={i + 1} panel={props.panel} other={props.other} />
          ))}
        </ol>
      )}
    </>
  );
}

function ranksOf(outcome: Outcome | null): Map<string, number> {
  return new Map((outcome?.response?.hits ?? []).map((hit, i) => [hit.chunkId, i + 1] as const));
}

export function SearchPage() {
  const route = useRoute();
  const [error, setError] = useState<unknown>(null);
  const names = useCollectionNames(setError);
  const [collection, setCollection] = useState(route.segments[1] ?? "");
  const [info, setInfo] = useState<Collection | null>(null);
  const [query, setQuery] = useState("");
  const [topK, setTopK] = useState("10");
  const [filters, setFilters] = useState<Filters>(EMPTY_FILTERS);
  const [twoSettings, setTwoSettings] = useState(false);
  const [settings, setSettings] = useState<[Setting, Setting]>([DEFAULT_SETTING, { ...DEFAULT_SETTING, mode: SearchMode.KEYWORD }]);
  const [outcomes, setOutcomes] = useState<[Outcome | null, Outcome | null]>([null, null]);
  const [running, setRunning] = useState<[boolean, boolean]>([false, false]);

  useEffect(() => {
    if (names && names.length && !names.includes(collection)) setCollection(names[0]);
  }, [names]);

  useEffect(() => {
    setInfo(null);
    if (!collection) return;
    let live = true;
    documents
      .getCollection({ name: collection })
      .then((c) => live && setInfo(c))
      .catch((err) => live && setError(err));
    // A generation picked for another collection means nothing here.
    setSettings(([a, b]) => [{ ...a, generation: 0 }, { ...b, generation: 0 }]);
    return () => {
      live = false;
    };
  }, [collection]);

  const ranks = useMemo(() => [ranksOf(outcomes[0]), ranksOf(outcomes[1])], [outcomes]);

  async function runOne(index: 0 | 1, request: MessageInitShape<typeof SearchRequestSchema>, setting: Setting) {
    setRunning((r) => (index === 0 ? [true, r[1]] : [r[0], true]));
    const started = performance.now();
    let outcome: Outcome;
    try {
      const response = await search.search(request);
      outcome = { response, elapsedMs: performance.now() - started, request: { query, setting } };
    } catch (err) {
      outcome = { error: err, elapsedMs: performance.now() - started, request: { query, setting } };
    }
    setOutcomes((o) => (index === 0 ? [outcome, o[1]] : [o[0], outcome]));
    setRunning((r) => (index === 0 ? [false, r[1]] : [r[0], false]));
  }

  function submit(event: Event) {
    event.preventDefault();
    setError(null);
    let requests;
    try {
      const k = Number(topK);
      if (!Number.isInteger(k) || k < 1 || k > 100) throw new Error(`Top k is a whole number from 1 to 100, not "${topK}"`);
      const panels = twoSettings ? settings : [settings[0]];
      requests = panels.map((s) => requestOf(collection, query, k, filters, s));
    } catch (err) {
      setError(err);
      return;
    }
    if (!twoSettings) setOutcomes((o) => [o[0], null]);
    requests.forEach((request, i) => void runOne(i as 0 | 1, request, settings[i]));
  }

  const busy = running[0] || running[1];
  const labels = ["Setting A", "Setting B"];
  return (
    <section class="search-page">
      <h1>Search</h1>
      <ErrorBanner error={error} onDismiss={() => setError(null)} />
      <form class="search-form" onSubmit={submit}>
        <div class="row">
          <CollectionSelect id="search-collection" names={names} value={collection} onChange={setCollection} />
          <label for="search-topk">Top k</label>
          <input id="search-topk" type="number" min={1} max={100} step={1} value={topK} onInput={(e) => setTopK(e.currentTarget.value)} />
        </div>
        <div class="row query">
          <label for="search-query">Query</label>
          <input id="search-query" type="search" value={query} onInput={(e) => setQuery(e.currentTarget.value)} required placeholder="what happens when a worker crashes" />
          <button type="submit" class="primary" disabled={busy || !collection}>
            Search
          </button>
        </div>
        <FilterEditor value={filters} onChange={setFilters} />
        <div class="row">
          <input type="checkbox" id="search-two" checked={twoSettings} onChange={(e) => setTwoSettings(e.currentTarget.checked)} />
          <label for="search-two">Two settings side by side (the same query and filters)</label>
        </div>
        <div class={twoSettings ? "settings two" : "settings"}>
          <SettingEditor id="a" label={twoSettings ? labels[0] : "Setting"} value={settings[0]} onChange={(s) => setSettings([s, settings[1]])} collection={info} />
          {twoSettings ? <SettingEditor id="b" label={labels[1]} value={settings[1]} onChange={(s) => setSettings([settings[0], s])} collection={info} /> : null}
        </div>
      </form>
      <div class={twoSettings ? "panels two" : "panels"}>
        <Results
          label={twoSettings ? `${labels[0]}: results` : "Results"}
          panel="a"
          outcome={outcomes[0]}
          running={running[0]}
          other={twoSettings && outcomes[1]?.response ? { label: "B", ranks: ranks[1] } : undefined}
        />
        {twoSettings ? (
          <Results label={`${labels[1]}: results`} panel="b" outcome={outcomes[1]} running={running[1]} other={outcomes[0]?.response ? { label: "A", ranks: ranks[0] } : undefined} />
        ) : null}
      </div>
    </section>
  );
}
