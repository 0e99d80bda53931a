/** The collections (#/collections): each with its documents by status, its embedder, its ACTIVE
 * and BUILDING generations and a reindex's progress, from ListCollections and GetCollection. */
import { useEffect, useState } from "preact/hooks";
import type { Collection, CollectionGeneration } from "@gen/collection_pb.js";
import { EmbedderProvider, GenerationState } from "@gen/collection_pb.js";
import { documents } from "../api";
import { href } from "../router";
import { ErrorBanner } from "../ui/error";
import { useSession } from "../ui/session";
import { Table } from "../ui/table";

function generation(collection: Collection, state: GenerationState): CollectionGeneration | undefined {
  return collection.generations.find((g) => g.state === state);
}

function embedder(collection: Collection): string {
  const config = collection.embedder;
  if (!config) return "";
  return `${EmbedderProvider[config.provider]?.toLowerCase() ?? config.provider} ${config.model} (${config.dimensions})`;
}

async function loadAll(): Promise<Collection[]> {
  const listed: Collection[] = [];
  let pageToken = "";
  do {
    const page = await documents.listCollections({ pageSize: 1000, pageToken });
    listed.push(...page.collections);
    pageToken = page.nextPageToken;
  } while (pageToken);
  // ListCollections leaves the generations out; GetCollection has them.
  return Promise.all(listed.map((c) => documents.getCollection({ name: c.name })));
}

export function CollectionsPage() {
  const { canWrite } = useSession();
  const [collections, setCollections] = useState<Collection[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [name, setName] = useState("");
  const [provider, setProvider] = useState(EmbedderProvider.SENTENCE_TRANSFORMERS);
  const [creating, setCreating] = useState(false);

  const reload = () =>
    loadAll()
      .then((c) => (setCollections(c), setError(null)))
      .catch(setError);
  useEffect(() => {
    reload();
  }, []);

  async function create(event: Event) {
    event.preventDefault();
    setCreating(true);
    try {
      await documents.createCollection({ collection: { name: name.trim(), embedder: { provider } } });
      setName("");
      await reload();
    } catch (err) {
      setError(err);
    } finally {
      setCreating(false);
    }
  }

  return (
    <section>
      <h1>Collections</h1>
      <ErrorBanner error={error} onDismiss={() => setError(null)} />
      {canWrite ? (
        <form class="inline" onSubmit={create}>
          <label for="new-collection">New collection</label>
          <input id="new-collection" value={name} onInput={(e) => setName(e.currentTarget.value)} pattern="[a-z0-9][a-z0-9_\-]{0,62}" required placeholder="name" />
          <label for="new-embedder">embedder</label>
          <select id="new-embedder" value={provider} onChange={(e) => setProvider(Number(e.currentTarget.value))}>
            <option value={EmbedderProvider.SENTENCE_TRANSFORMERS}>all-MiniLM-L6-v2 (local)</option>
            <option value={EmbedderProvider.HASHING}>hashing (fast, for trials)</option>
          </select>
          <button type="submit" disabled={creating}>
            Create
          </button>
        </form>
      ) : null}
      {collections === null ? (
        <p aria-live="polite">Loading…</p>
      ) : (
        <Table
          caption="Collections"
          rows={collections}
          rowKey={(c) => c.name}
          empty="No collection yet."
          columns={[
            { header: "Name", cell: (c) => <a href={href("collections", c.name)}>{c.name}</a> },
            { header: "Documents", numeric: true, cell: (c) => String(c.documentCount) },
            { header: "Ready", numeric: true, cell: (c) => String(c.readyDocumentCount) },
            { header: "Failed", numeric: true, cell: (c) => String(generation(c, GenerationState.ACTIVE)?.documentsFailed ?? 0n) },
            {
              header: "In progress",
              numeric: true,
              cell: (c) => {
                const active = generation(c, GenerationState.ACTIVE);
                return String(active ? active.documentsPending : c.documentCount - c.readyDocumentCount);
              },
            },
            { header: "Embedder", cell: embedder },
            { header: "Active generation", numeric: true, cell: (c) => String(generation(c, GenerationState.ACTIVE)?.number ?? "") },
            {
              header: "Reindex",
              cell: (c) => {
                const building = generation(c, GenerationState.BUILDING);
                if (!building) return "";
                const total = Number(building.documentsTotal) || 1;
                const done = Number(building.documentsReady + building.documentsFailed);
                return (
                  <span>
                    generation {building.number}: <progress max={total} value={done} aria-label={`reindex of ${c.name}`} /> {done}/{Number(building.documentsTotal)}
                  </span>
                );
              },
            },
          ]}
        />
      )}
    </section>
  );
}
