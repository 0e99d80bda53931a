/**
 * Sources (#/sources, or #/sources/<collection>): the places collections are kept in step with
 * (SourceService, docs/sources.md), each with its kind, where it reads from (shown as text, never
 * a link), its schedule, its last run and that run's counts; "Sync now" for a key that may write
 * (and "Sync, allowing the deletions" after a run was blocked); a source's runs, newest first.
 * The list refreshes itself while a run is waiting or running.
 */
import { SourceKind, SourceRunState, type Source, type SourceRun } from "@gen/source_service_pb.js";
import { useEffect, useState } from "preact/hooks";
import { sources } from "../api";
import { useRoute } from "../router";
import { CollectionSelect, useCollectionNames } from "../ui/collection-select";
import { ErrorBanner } from "../ui/error";
import { enumName, time } from "../ui/format";
import { useSession } from "../ui/session";
import { Table } from "../ui/table";

const POLL_MS = 2000;

export function runStateName(state: SourceRunState): string {
  return enumName(SourceRunState as unknown as Record<number, string>, state, "");
}

function kindName(kind: SourceKind): string {
  return enumName(SourceKind as unknown as Record<number, string>, kind, "");
}

function busy(run: SourceRun | undefined): boolean {
  return !!run && (run.state === SourceRunState.PENDING || run.state === SourceRunState.RUNNING);
}

/** Where a source reads from, as text. */
function where(source: Source): string {
  const spec = source.spec;
  switch (spec.case) {
    case "localFolder":
      return spec.value.path + (spec.value.glob ? ` (${spec.value.glob})` : "");
    case "s3":
      return `s3://${spec.value.bucket}/${spec.value.prefix} at ${spec.value.endpoint}`;
    case "http":
      return spec.value.sitemapUrl ? `sitemap ${spec.value.sitemapUrl}` : `crawl from ${spec.value.startUrl}${spec.value.maxPages ? ` (at most ${spec.value.maxPages} pages)` : ""}`;
    case "git":
      return `${spec.value.repository}${spec.value.ref ? ` @ ${spec.value.ref}` : ""}${spec.value.subpath ? ` : ${spec.value.subpath}` : ""}`;
    default:
      return "";
  }
}

function schedule(source: Source): string {
  const every = Number(source.scheduleIntervalSeconds);
  if (!every) return "on demand";
  const text = every % 3600 === 0 ? `${every / 3600} h` : every % 60 === 0 ? `${every / 60} min` : `${every} s`;
  return `every ${text}`;
}

export function RunState(props: { run: SourceRun | undefined }) {
  if (!props.run) return <span class="unset">never synced</span>;
  const name = runStateName(props.run.state);
  return <span class={`state-${name}`}>{name}</span>;
}

function counts(run: SourceRun | undefined): string {
  if (!run) return "";
  const parts = [`${run.listed} listed`, `${run.uploaded} uploaded`, `${run.unchanged} unchanged`, `${run.deleted} deleted`];
  if (run.failed) parts.push(`${run.failed} failed`);
  if (run.state === SourceRunState.BLOCKED_MASS_DELETE) parts.push(`${run.wouldDelete} would be deleted`);
  return parts.join(", ");
}

function Runs(props: { source: Source; refresh: number; onError: (err: unknown) => void }) {
  const [runs, setRuns] = useState<SourceRun[] | null>(null);
  const [pageToken, setPageToken] = useState("");
  const load = async (token: string) => {
    try {
      const page = await sources.listSourceRuns({ name: props.source.name, pageSize: 20, pageToken: token });
      setRuns((previous) => (token ? [...(previous ?? []), ...page.runs] : page.runs));
      setPageToken(page.nextPageToken);
    } catch (err) {
      props.onError(err);
    }
  };
  useEffect(() => {
    void load("");
  }, [props.source.name, props.refresh]);
  const label = props.source.displayName || props.source.id;
  return (
    <section class="runs" aria-labelledby={`runs-${props.source.id}`}>
      <h2 id={`runs-${props.source.id}`}>Runs of {label}</h2>
      {runs === null ? (
        <p aria-live="polite">Loading…</p>
      ) : (
        <Table
          caption={`Sync runs of ${label}, newest first`}
          rows={runs}
          rowKey={(r) => r.id}
          empty="No run yet."
          columns={[
            { header: "State", cell: (r) => <RunState run={r} /> },
            { header: "Asked by", cell: (r) => (r.scheduled ? "schedule" : r.allowMassDelete ? "sync now (deletions allowed)" : "sync now") },
            { header: "Listed", numeric: true, cell: (r) => String(r.listed) },
            { header: "Uploaded", numeric: true, cell: (r) => String(r.uploaded) },
            { header: "Unchanged", numeric: true, cell: (r) => String(r.unchanged) },
            { header: "Deleted", numeric: true, cell: (r) => String(r.deleted) },
            { header: "Failed", numeric: true, cell: (r) => String(r.failed) },
            { header: "Would delete", numeric: true, cell: (r) => (r.wouldDelete ? String(r.wouldDelete) : "") },
            { header: "Attempts", numeric: true, cell: (r) => String(r.attempts) },
            { header: "Asked at", cell: (r) => time(r.createTime) },
            { header: "Started", cell: (r) => time(r.startTime) },
            { header: "Ended", cell: (r) => time(r.endTime) },
            { header: "Error", cell: (r) => r.errorMessage },
          ]}
        />
      )}
      {pageToken ? (
        <button type="button" onClick={() => void load(pageToken)}>
          Older runs
        </button>
      ) : null}
    </section>
  );
}

export function SourcesPage() {
  const route = useRoute();
  const { canWrite } = useSession();
  const [error, setError] = useState<unknown>(null);
  const names = useCollectionNames(setError);
  const [collection, setCollection] = useState(route.segments[1] ?? "");
  const [list, setList] = useState<Source[] | null>(null);
  const [selected, setSelected] = useState<string>("");
  const [syncing, setSyncing] = useState<string>("");
  const [refresh, setRefresh] = useState(0);

  const load = async () => {
    try {
      const all: Source[] = [];
      let pageToken = "";
      do {
        const page = await sources.listSources({ collection, pageSize: 1000, pageToken });
        all.push(...page.sources);
        pageToken = page.nextPageToken;
      } while (pageToken);
      setList(all);
    } catch (err) {
      setList([]);
      setError(err);
    }
  };
  useEffect(() => {
    setList(null);
    void load();
  }, [collection]);

  // While a run waits or runs, follow it.
  const active = (list ?? []).some((s) => busy(s.lastRun));
  useEffect(() => {
    if (!active) return;
    const timer = setTimeout(() => {
      void load();
      setRefresh((n) => n + 1);
    }, POLL_MS);
    return () => clearTimeout(timer);
  }, [list]);

  async function sync(source: Source, allowMassDelete: boolean) {
    if (allowMassDelete && !confirm(`Sync ${source.displayName || source.id} and delete the documents of every item that is gone, however many?`)) return;
    setSyncing(source.name);
    try {
      await sources.syncSource({ name: source.name, allowMassDelete });
      setSelected(source.name);
      await load();
      setRefresh((n) => n + 1);
    } catch (err) {
      setError(err);
    } finally {
      setSyncing("");
    }
  }

  const chosen = (list ?? []).find((s) => s.name === selected);
  return (
    <section>
      <h1>Sources</h1>
      <ErrorBanner error={error} onDismiss={() => setError(null)} />
      <p class="hint">
        A source keeps a collection in step with a folder on the server, a bucket, a web site or a git repository (docs/sources.md). Sources are added with <code>sluice sources add</code> or the SDKs.
      </p>
      <div class="row">
        <CollectionSelect id="sources-collection" names={names} value={collection} onChange={setCollection} any="every collection" />
        <button type="button" onClick={() => (void load(), setRefresh((n) => n + 1))}>
          Refresh
        </button>
        {active ? <span class="hint">following the runs in progress…</span> : null}
      </div>
      {list === null ? (
        <p aria-live="polite">Loading…</p>
      ) : (
        <Table
          caption="Sources"
          rows={list}
          rowKey={(s) => s.name}
          rowClass={(s) => (s.name === selected ? "selected" : "")}
          empty={collection ? `No source in ${collection}.` : "No source yet."}
          columns={[
            { header: "Source", cell: (s) => s.displayName || s.id },
            { header: "Collection", cell: (s) => s.collection },
            { header: "Kind", cell: (s) => <span class="nowrap">{kindName(s.kind)}</span> },
            { header: "Reads", cell: where },
            { header: "Schedule", cell: (s) => schedule(s) + (s.nextSyncTime ? `, next ${time(s.nextSyncTime)}` : "") },
            { header: "Last run", cell: (s) => <RunState run={s.lastRun} /> },
            { header: "Its counts", cell: (s) => counts(s.lastRun) },
            { header: "Ended", cell: (s) => time(s.lastRun?.endTime) },
            { header: "Error", cell: (s) => s.lastRun?.errorMessage ?? "" },
            {
              header: "Actions",
              cell: (s) => (
                <span class="actions">
                  <button type="button" onClick={() => setSelected(s.name === selected ? "" : s.name)} aria-expanded={s.name === selected} aria-label={`Runs of ${s.displayName || s.id}`}>
                    Runs
                  </button>
                  {canWrite ? (
                    <button type="button" class="primary" disabled={syncing === s.name || busy(s.lastRun)} onClick={() => void sync(s, false)} aria-label={`Sync now: ${s.displayName || s.id}`}>
                      Sync now
                    </button>
                  ) : null}
                  {canWrite && s.lastRun?.state === SourceRunState.BLOCKED_MASS_DELETE ? (
                    <button type="button" class="danger" disabled={syncing === s.name} onClick={() => void sync(s, true)}>
                      Sync, allowing the deletions
                    </button>
                  ) : null}
                </span>
              ),
            },
          ]}
        />
      )}
      {chosen ? <Runs source={chosen} refresh={refresh} onError={setError} /> : null}
    </section>
  );
}
