"""KEYWORD's candidates from posting lists of BM25 weights (docs/search.md, "Keyword ranking",
"Latency at 100,000 chunks").

Until now every KEYWORD candidate (a chunk holding one of the query's rarer words, found through
the GIN index) was scored by reading its chunk row: a heap page of a wide row (text, embedding,
tsvector) and a sparse dot product, thousands of times for a typical query. MaxScore (keyword.py)
needs far fewer exact scores than that: only those of the candidates whose score over the rarer
("essential") words is near the top, because the other words can add at most Σ idf·(k1 + 1).

`keyword_postings` is an inverted index of the chunks' BM25 weights, one row per (generation,
term dimension, chunk) with the weight of `chunks.search_bm25` at that dimension, its primary key
(generation_id, dim, chunk_id) INCLUDE (weight) read by index-only scans: a posting costs a few
bytes of an index page instead of a heap page. `sluice_keyword_candidates(generation, terms,
weights, n)` (SECURITY DEFINER, as sluice_keyword_scores of 0019, reading the tenant from the
session setting row-level security reads) sums the weights of the given terms per chunk and
returns the n best chunks with that partial score; search then scores those n exactly from their
chunk rows and checks that no other chunk can beat its answer.

The postings follow the chunks through the same statement-level triggers as the statistics
(migration 0016): an insert adds the new chunks' postings, a deletion removes theirs, an update
that changes a chunk's weights (its search_terms, as a reweighting does) replaces them; the
chunks of a generation that is no longer live (RETIRED, CANCELLED) take their generation's
postings with them at once. The weights are read from `search_bm25` itself, so a posting always
equals the chunk's own weight (the same float, also for two words that share a dimension).

Existing chunks get their postings here, once.

Revision ID: 0020
"""

from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

TENANT_SETTING = "NULLIF(current_setting('sluice.tenant_id', true), '')::bigint"

# The trigger functions join transition tables (whose size the planner does not know) to the
# postings: a hash join would read every posting of the table, so they take index probes.
PROBES_ONLY = "SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off"


def upgrade() -> None:
    op.execute(
        f"""
        -- The (dimension, weight) entries of a sparse vector, from its text form '{{d:w,…}}/n'
        -- (pgvector has no function for them; the shortest decimal form reads back as the same real).
        CREATE FUNCTION sluice_sparsevec_entries(v sparsevec) RETURNS TABLE (dim integer, weight real)
            LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
            AS $$
                SELECT split_part(e, ':', 1)::integer, split_part(e, ':', 2)::real
                FROM unnest(string_to_array(btrim(split_part(v::text, '/', 1), '{{}}'), ',')) AS e
            $$;

        CREATE TABLE keyword_postings (
            generation_id bigint NOT NULL,
            dim           integer NOT NULL,
            chunk_id      bigint NOT NULL,
            weight        real NOT NULL
        );
        -- Only sluice_keyword_candidates reads it, as its owner: no grant to search's role.
        REVOKE ALL ON keyword_postings FROM PUBLIC;

        CREATE FUNCTION sluice_chunks_postings_added() RETURNS trigger LANGUAGE plpgsql {PROBES_ONLY} AS $$
        BEGIN
            INSERT INTO keyword_postings (generation_id, dim, chunk_id, weight)
            SELECT n.generation_id, e.dim, n.id, e.weight
              FROM added n JOIN collection_generations g ON g.id = n.generation_id AND g.state IN ('ACTIVE', 'BUILDING'),
                   sluice_sparsevec_entries(n.search_bm25) e;
            RETURN NULL;
        END $$;

        CREATE FUNCTION sluice_chunks_postings_removed() RETURNS trigger LANGUAGE plpgsql {PROBES_ONLY} AS $$
        BEGIN
            DELETE FROM keyword_postings p
             USING (SELECT o.generation_id, e.dim, o.id
                      FROM removed o JOIN collection_generations g ON g.id = o.generation_id
                                      AND g.state IN ('ACTIVE', 'BUILDING'),
                           sluice_sparsevec_entries(o.search_bm25) e) x
             WHERE p.generation_id = x.generation_id AND p.dim = x.dim AND p.chunk_id = x.id;
            -- A generation no longer live keeps no postings (its chunks are being dropped).
            DELETE FROM keyword_postings p
             WHERE p.generation_id IN (SELECT DISTINCT o.generation_id FROM removed o
                                         JOIN collection_generations g ON g.id = o.generation_id
                                        WHERE g.state NOT IN ('ACTIVE', 'BUILDING'));
            RETURN NULL;
        END $$;

        -- An update replaces the updated chunks' postings (only tests and migrations update chunks,
        -- and then their weights: a reweighting).
        CREATE FUNCTION sluice_chunks_postings_updated() RETURNS trigger LANGUAGE plpgsql {PROBES_ONLY} AS $$
        BEGIN
            DELETE FROM keyword_postings p
             USING (SELECT o.generation_id, e.dim, o.id FROM removed o, sluice_sparsevec_entries(o.search_bm25) e) x
             WHERE p.generation_id = x.generation_id AND p.dim = x.dim AND p.chunk_id = x.id;
            INSERT INTO keyword_postings (generation_id, dim, chunk_id, weight)
            SELECT n.generation_id, e.dim, n.id, e.weight
              FROM added n JOIN collection_generations g ON g.id = n.generation_id AND g.state IN ('ACTIVE', 'BUILDING'),
                   sluice_sparsevec_entries(n.search_bm25) e;
            RETURN NULL;
        END $$;

        CREATE TRIGGER chunks_postings_added AFTER INSERT ON chunks REFERENCING NEW TABLE AS added
            FOR EACH STATEMENT EXECUTE FUNCTION sluice_chunks_postings_added();
        CREATE TRIGGER chunks_postings_removed AFTER DELETE ON chunks REFERENCING OLD TABLE AS removed
            FOR EACH STATEMENT EXECUTE FUNCTION sluice_chunks_postings_removed();
        CREATE TRIGGER chunks_postings_updated AFTER UPDATE ON chunks REFERENCING OLD TABLE AS removed NEW TABLE AS added
            FOR EACH STATEMENT EXECUTE FUNCTION sluice_chunks_postings_updated();

        -- Existing chunks of live generations: their postings, then the index (faster than
        -- inserting into it row by row).
        INSERT INTO keyword_postings (generation_id, dim, chunk_id, weight)
        SELECT c.generation_id, e.dim, c.id, e.weight
          FROM chunks c JOIN collection_generations g ON g.id = c.generation_id AND g.state IN ('ACTIVE', 'BUILDING'),
               sluice_sparsevec_entries(c.search_bm25) e;
        ALTER TABLE keyword_postings ADD CONSTRAINT keyword_postings_pkey
            PRIMARY KEY (generation_id, dim, chunk_id) INCLUDE (weight);
        ANALYZE keyword_postings;

        -- The n chunks of the generation with the highest Σ weights[i] · w(terms[i], chunk) (the
        -- partial BM25 score over these terms), best first; the caller's tenant's generation only.
        CREATE FUNCTION sluice_keyword_candidates(generation bigint, terms text[], weights double precision[], n integer)
            RETURNS TABLE (chunk_id bigint, partial double precision)
            LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public
            AS $$
                SELECT p.chunk_id, sum(q.w * p.weight) AS partial
                FROM (SELECT sluice_term_dim(x.t) AS dim, sum(x.w) AS w
                        FROM unnest(terms, weights) AS x(t, w) GROUP BY 1) q
                JOIN keyword_postings p ON p.generation_id = generation AND p.dim = q.dim
                WHERE EXISTS (SELECT 1 FROM collection_generations g
                               WHERE g.id = generation AND g.tenant_id = {TENANT_SETTING})
                GROUP BY p.chunk_id
                ORDER BY partial DESC, p.chunk_id
                LIMIT n
            $$;
        REVOKE ALL ON FUNCTION sluice_keyword_candidates(bigint, text[], double precision[], integer) FROM PUBLIC;
        GRANT EXECUTE ON FUNCTION sluice_keyword_candidates(bigint, text[], double precision[], integer)
            TO sluice_search_reader;
        """
    )


def downgrade() -> None:
    op.execute(
        """
        DROP FUNCTION sluice_keyword_candidates(bigint, text[], double precision[], integer);
        DROP TRIGGER chunks_postings_updated ON chunks;
        DROP TRIGGER chunks_postings_removed ON chunks;
        DROP TRIGGER chunks_postings_added ON chunks;
        DROP FUNCTION sluice_chunks_postings_updated();
        DROP FUNCTION sluice_chunks_postings_removed();
        DROP FUNCTION sluice_chunks_postings_added();
        DROP TABLE keyword_postings;
        DROP FUNCTION sluice_sparsevec_entries(sparsevec);
        """
    )
