"""KEYWORD's candidates from a narrow table of their own (docs/search.md, "A narrow table for
the candidates").

A keyword query scores every chunk holding one of its candidate words: thousands for a query with
a common word. Each candidate was a row of `chunks`, found through the GIN index on `search_tsv`,
its BM25 vector read from the heap. That row starts with the text, the section, the HTML, the
embedding's TOAST pointer, the search terms and the tsvector, so reading `generation_id`,
`tenant_id` and `search_bm25` (the 16th to 18th columns) walks every variable-length column before
them, and the rows are 1.7 kB: about one heap page per two candidates.

`keyword_chunks` holds what scoring reads and nothing else, fixed-width columns first: the
chunk's id, generation and tenant, its BM25 vector (0016) and its words as a stripped tsvector
(the lexemes without positions: matching a query of words joined by | & ! needs none), with the
GIN index on them. At 94,190 chunks every query word's chunks scored at once (234 queries, median
21,912 postings): p50 35.0 ms from `chunks`, 22.8 ms from this table, the same answers.

Kept exact by `chunks`' own triggers, as the keyword statistics (0016) and the document vectors
(0026) are: the rows a statement inserts are copied after it, in its transaction (their BM25
vectors computed by then, by the BEFORE trigger of 0016); a deleted chunk's row goes with it
(the foreign key cascades, a TRUNCATE included); an update of a chunk's terms copies them again.
So whatever writes chunks (a commit, a reindex's EMBED jobs, a reprocess, a deletion, a generation
dropped, a test's raw SQL) keeps the table equal to `chunks`' columns.

`sluice_keyword_scores` (0019) keeps its signature and reads this table: search's statements do
not change. Only that function (SECURITY DEFINER, the owner's) reads it; search's role has no
grant, and row-level security holds it to the tenant as `chunks` is. The GIN index on
`chunks.search_tsv` goes (nothing else searched it); the column stays: the statistics' triggers
read the lexemes from it.

Revision ID: 0028
"""

from alembic import op

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None

TENANT_SETTING = "NULLIF(current_setting('sluice.tenant_id', true), '')::bigint"


def upgrade() -> None:
    op.execute(
        f"""
        -- No chunk is written between the copy below and the triggers that copy new ones: writers
        -- wait for this migration's commit (reads go on).
        LOCK TABLE chunks IN SHARE ROW EXCLUSIVE MODE;
        CREATE TABLE keyword_chunks (
            chunk_id      bigint PRIMARY KEY REFERENCES chunks (id) ON DELETE CASCADE,
            generation_id bigint NOT NULL,
            tenant_id     bigint NOT NULL,
            search_bm25   sparsevec,
            terms         tsvector NOT NULL
        );
        ALTER TABLE keyword_chunks ALTER COLUMN search_bm25 SET STORAGE MAIN;
        ALTER TABLE keyword_chunks ENABLE ROW LEVEL SECURITY;
        CREATE POLICY search_tenant ON keyword_chunks FOR SELECT TO sluice_search_reader
            USING (tenant_id = {TENANT_SETTING});

        CREATE FUNCTION sluice_keyword_chunks_added() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO keyword_chunks (chunk_id, generation_id, tenant_id, search_bm25, terms)
            SELECT n.id, n.generation_id, n.tenant_id, n.search_bm25, strip(coalesce(n.search_tsv, ''::tsvector))
              FROM added n;
            RETURN NULL;
        END $$;
        CREATE FUNCTION sluice_keyword_chunks_updated() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE keyword_chunks k
               SET generation_id = n.generation_id, tenant_id = n.tenant_id, search_bm25 = n.search_bm25,
                   terms = strip(coalesce(n.search_tsv, ''::tsvector))
              FROM added n WHERE k.chunk_id = n.id;
            RETURN NULL;
        END $$;
        CREATE TRIGGER chunks_keyword_chunks_added AFTER INSERT ON chunks REFERENCING NEW TABLE AS added
            FOR EACH STATEMENT EXECUTE FUNCTION sluice_keyword_chunks_added();
        CREATE TRIGGER chunks_keyword_chunks_updated AFTER UPDATE ON chunks REFERENCING NEW TABLE AS added
            FOR EACH STATEMENT EXECUTE FUNCTION sluice_keyword_chunks_updated();

        -- The chunks already written.
        INSERT INTO keyword_chunks (chunk_id, generation_id, tenant_id, search_bm25, terms)
        SELECT id, generation_id, tenant_id, search_bm25, strip(coalesce(search_tsv, ''::tsvector)) FROM chunks;
        CREATE INDEX keyword_chunks_terms ON keyword_chunks USING gin (terms);
        ANALYZE keyword_chunks;
        DROP INDEX chunks_search_tsv;

        CREATE OR REPLACE FUNCTION sluice_keyword_scores(generation bigint, query tsquery, weights sparsevec)
            RETURNS TABLE (chunk_id bigint, score double precision)
            LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public
            AS $$
                SELECT k.chunk_id, -(k.search_bm25 <#> weights) FROM keyword_chunks k
                WHERE k.terms @@ query AND k.generation_id = generation
                  AND k.tenant_id = {TENANT_SETTING}
            $$;
        """
    )


def downgrade() -> None:
    op.execute(
        f"""
        CREATE OR REPLACE FUNCTION sluice_keyword_scores(generation bigint, query tsquery, weights sparsevec)
            RETURNS TABLE (chunk_id bigint, score double precision)
            LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public
            AS $$
                SELECT c.id, -(c.search_bm25 <#> weights) FROM chunks c
                WHERE c.search_tsv @@ query AND c.generation_id = generation
                  AND c.tenant_id = {TENANT_SETTING}
            $$;
        CREATE INDEX chunks_search_tsv ON chunks USING gin (search_tsv);
        DROP TRIGGER chunks_keyword_chunks_added ON chunks;
        DROP TRIGGER chunks_keyword_chunks_updated ON chunks;
        DROP FUNCTION sluice_keyword_chunks_added();
        DROP FUNCTION sluice_keyword_chunks_updated();
        DROP TABLE keyword_chunks;
        """
    )
