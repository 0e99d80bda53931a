"""KEYWORD ranked by BM25 inside PostgreSQL (docs/search.md, "Keyword ranking").

Words are stemmed now: `search_tsv` is `to_tsvector('sluice_text', search_terms)`, a copy of
'simple' whose words go through the English Snowball stemmer ("settings" and "setting" meet);
measured on the English eval set, +0.015 MRR@10 for KEYWORD.

Each chunk carries its BM25 document vector, `search_bm25`: a pgvector `sparsevec` with, for
every distinct term, the term's saturated, length-normalised frequency

    w(t, c) = tf · (k1 + 1) / (tf + k1 · (1 - b + b · |c| / avgdl))      k1 = 1.2, b = 0.75

at the dimension `sluice_term_dim(term)` (29 bits of the term's MD5; the search service hashes
query terms the same way). A query is a sparse vector of the query terms' IDF, so the negated
inner product `search_bm25 <#> query` is the chunk's BM25 score, computed in C.

Statistics (`keyword_stats`) are per index generation: the number of chunks (term ''), their
total length, and each term's document frequency. Statement-level triggers on `chunks` append
one delta row per term and statement, in the transaction that writes or deletes the chunks, so
the statistics are exactly those of the chunks committed, whatever path wrote them (a commit, a
reindex, a document deletion, a collection deletion). Appending, never updating, keeps
concurrent commits from waiting on each other's rows of common terms; ingest-api folds the
deltas together in the background (`sluice_compact_keyword_stats`).

`avgdl` is read when the chunk is written (a BEFORE INSERT trigger), from the generation's
statistics; the first chunks of a generation use their own length. Chunk lengths are bounded
by the chunker, so the average moves little once a collection has some documents; a reindex
recomputes every chunk.

Revision ID: 0016
"""

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

# 2^29: every dimension sluice_term_dim returns is in 1..2^29 (pgvector allows 10^9).
TERM_DIMENSIONS = 536870912


def upgrade() -> None:
    op.execute(
        f"""
        SET CONSTRAINTS ALL IMMEDIATE;

        -- Words are stemmed (English Snowball, which leaves other scripts as they are), and no
        -- stop word is dropped from the index: queries drop theirs (sluice_common.textsearch).
        CREATE TEXT SEARCH DICTIONARY sluice_english_stem (TEMPLATE = snowball, Language = english);
        CREATE TEXT SEARCH CONFIGURATION sluice_text (COPY = simple);
        ALTER TEXT SEARCH CONFIGURATION sluice_text
            ALTER MAPPING FOR asciiword, asciihword, hword_asciipart, word, hword, hword_part WITH sluice_english_stem;
        ALTER TABLE chunks ALTER COLUMN search_tsv SET EXPRESSION AS (to_tsvector('sluice_text', search_terms));

        CREATE FUNCTION sluice_term_dim(term text) RETURNS integer
            LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
            RETURN (('x' || left(md5(term), 8))::bit(32)::integer & {TERM_DIMENSIONS - 1}) + 1;

        -- The BM25 document vector of a chunk's words (chunks.search_terms) given the average
        -- chunk length of its generation; NULL when the text has no words.
        CREATE FUNCTION sluice_bm25_vector(terms text, avgdl double precision,
                                           k1 double precision DEFAULT 1.2, b double precision DEFAULT 0.75)
            RETURNS sparsevec LANGUAGE sql IMMUTABLE PARALLEL SAFE
        BEGIN ATOMIC
            WITH t AS (
                SELECT sluice_term_dim(l.lexeme) AS dim, coalesce(array_length(l.positions, 1), 1) AS tf
                FROM unnest(to_tsvector('sluice_text', terms)) AS l
            ), len AS (
                SELECT sum(tf)::double precision AS dl FROM t
            ), w AS (
                SELECT dim, sum(tf)::double precision AS tf FROM t GROUP BY dim
            )
            SELECT ('{{' || string_agg(w.dim || ':' || (w.tf * (k1 + 1)
                        / (w.tf + k1 * (1 - b + b * len.dl / greatest(coalesce(avgdl, len.dl), 1))))::real, ','
                        ORDER BY w.dim) || '}}/{TERM_DIMENSIONS}')::sparsevec
            FROM w, len;
        END;

        CREATE FUNCTION sluice_term_count(terms text) RETURNS integer
            LANGUAGE sql IMMUTABLE PARALLEL SAFE
            RETURN (SELECT coalesce(sum(coalesce(array_length(l.positions, 1), 1)), 0)
                    FROM unnest(to_tsvector('sluice_text', terms)) AS l);

        CREATE TABLE keyword_stats (
            tenant_id     bigint NOT NULL,
            generation_id bigint NOT NULL REFERENCES collection_generations (id) ON DELETE CASCADE,
            -- '' is the generation's row: df counts its chunks, tokens their total length.
            term          text NOT NULL,
            df            bigint NOT NULL,
            tokens        bigint NOT NULL DEFAULT 0
        );
        CREATE INDEX keyword_stats_term ON keyword_stats (generation_id, term);
        -- One '' row per statement since the last compaction: how the sweeper finds work.
        CREATE INDEX keyword_stats_statements ON keyword_stats (generation_id) WHERE term = '';
        ALTER TABLE keyword_stats ENABLE ROW LEVEL SECURITY;
        CREATE POLICY search_tenant ON keyword_stats FOR SELECT TO sluice_search_reader
            USING (tenant_id = NULLIF(current_setting('sluice.tenant_id', true), '')::bigint);
        GRANT SELECT ON keyword_stats TO sluice_search_reader;

        ALTER TABLE chunks ADD COLUMN search_length integer NOT NULL DEFAULT 0,
                           ADD COLUMN search_bm25 sparsevec;
        -- Kept in the row when it fits (the text and vectors go to TOAST first): every keyword
        -- candidate reads it, and a TOAST fetch per candidate was most of a query's time.
        ALTER TABLE chunks ALTER COLUMN search_bm25 SET STORAGE MAIN;

        -- Before a chunk is stored: its length and BM25 vector, with its generation's average
        -- length so far. Named to run after chunks_active_generation, which fills generation_id.
        CREATE FUNCTION sluice_chunk_keyword_weights() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            avgdl double precision;
        BEGIN
            SELECT sum(s.tokens)::double precision / nullif(sum(s.df), 0) INTO avgdl
              FROM keyword_stats s WHERE s.generation_id = NEW.generation_id AND s.term = '';
            NEW.search_length := sluice_term_count(NEW.search_terms);
            NEW.search_bm25 := sluice_bm25_vector(NEW.search_terms, avgdl);
            RETURN NEW;
        END $$;
        CREATE TRIGGER chunks_keyword_weights BEFORE INSERT OR UPDATE OF search_terms ON chunks
            FOR EACH ROW EXECUTE FUNCTION sluice_chunk_keyword_weights();

        -- After each statement: the statistics' deltas. Only live generations count: the chunks
        -- of a retired or cancelled generation are being dropped, and so are its statistics.
        CREATE FUNCTION sluice_chunks_stats_added() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO keyword_stats (tenant_id, generation_id, term, df, tokens)
            SELECT n.tenant_id, n.generation_id, l.lexeme, count(*), 0
              FROM added n JOIN collection_generations g ON g.id = n.generation_id AND g.state IN ('ACTIVE', 'BUILDING'),
                   unnest(n.search_tsv) AS l
             GROUP BY 1, 2, 3
            UNION ALL
            SELECT n.tenant_id, n.generation_id, '', count(*), sum(n.search_length)
              FROM added n JOIN collection_generations g ON g.id = n.generation_id AND g.state IN ('ACTIVE', 'BUILDING')
             GROUP BY 1, 2;
            RETURN NULL;
        END $$;
        CREATE FUNCTION sluice_chunks_stats_removed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO keyword_stats (tenant_id, generation_id, term, df, tokens)
            SELECT o.tenant_id, o.generation_id, l.lexeme, -count(*), 0
              FROM removed o JOIN collection_generations g ON g.id = o.generation_id AND g.state IN ('ACTIVE', 'BUILDING'),
                   unnest(o.search_tsv) AS l
             GROUP BY 1, 2, 3
            UNION ALL
            SELECT o.tenant_id, o.generation_id, '', -count(*), -sum(o.search_length)
              FROM removed o JOIN collection_generations g ON g.id = o.generation_id AND g.state IN ('ACTIVE', 'BUILDING')
             GROUP BY 1, 2;
            -- A generation no longer live keeps no statistics.
            DELETE FROM keyword_stats s USING collection_generations g
             WHERE s.generation_id = g.id AND g.state NOT IN ('ACTIVE', 'BUILDING')
               AND g.id IN (SELECT DISTINCT generation_id FROM removed);
            RETURN NULL;
        END $$;
        CREATE TRIGGER chunks_stats_added AFTER INSERT ON chunks REFERENCING NEW TABLE AS added
            FOR EACH STATEMENT EXECUTE FUNCTION sluice_chunks_stats_added();
        CREATE TRIGGER chunks_stats_removed AFTER DELETE ON chunks REFERENCING OLD TABLE AS removed
            FOR EACH STATEMENT EXECUTE FUNCTION sluice_chunks_stats_removed();
        CREATE TRIGGER chunks_stats_updated_old AFTER UPDATE ON chunks REFERENCING OLD TABLE AS removed
            FOR EACH STATEMENT EXECUTE FUNCTION sluice_chunks_stats_removed();
        CREATE TRIGGER chunks_stats_updated_new AFTER UPDATE ON chunks REFERENCING NEW TABLE AS added
            FOR EACH STATEMENT EXECUTE FUNCTION sluice_chunks_stats_added();

        -- Fold a generation's deltas: every term with more than one row becomes one row (terms
        -- whose count reached zero go). Rows appended by transactions that commit meanwhile are
        -- not in this statement's snapshot, so they are neither deleted nor counted twice; a
        -- concurrent compaction deletes only the rows this one did not (RETURNING says which).
        CREATE FUNCTION sluice_compact_keyword_stats(generation bigint) RETURNS bigint LANGUAGE sql AS $$
            WITH multi AS (
                SELECT term FROM keyword_stats WHERE generation_id = generation GROUP BY term HAVING count(*) > 1
            ), gone AS (
                DELETE FROM keyword_stats s USING multi
                 WHERE s.generation_id = generation AND s.term = multi.term
                RETURNING s.tenant_id, s.generation_id, s.term, s.df, s.tokens
            ), folded AS (
                INSERT INTO keyword_stats (tenant_id, generation_id, term, df, tokens)
                SELECT tenant_id, generation_id, term, sum(df), sum(tokens) FROM gone
                 GROUP BY 1, 2, 3 HAVING sum(df) <> 0 OR term = ''
                RETURNING 1
            )
            SELECT (SELECT count(*) FROM gone) - (SELECT count(*) FROM folded);
        $$;
        """
    )
    # Existing chunks: weights from their generation's statistics, computed here once.
    op.execute(
        """
        ALTER TABLE chunks DISABLE TRIGGER chunks_stats_updated_old;
        ALTER TABLE chunks DISABLE TRIGGER chunks_stats_updated_new;
        ALTER TABLE chunks DISABLE TRIGGER chunks_keyword_weights;
        UPDATE chunks SET search_length = sluice_term_count(search_terms);
        INSERT INTO keyword_stats (tenant_id, generation_id, term, df, tokens)
        SELECT c.tenant_id, c.generation_id, l.lexeme, count(*), 0
          FROM chunks c JOIN collection_generations g ON g.id = c.generation_id AND g.state IN ('ACTIVE', 'BUILDING'),
               unnest(c.search_tsv) AS l
         GROUP BY 1, 2, 3
        UNION ALL
        SELECT c.tenant_id, c.generation_id, '', count(*), sum(c.search_length)
          FROM chunks c JOIN collection_generations g ON g.id = c.generation_id AND g.state IN ('ACTIVE', 'BUILDING')
         GROUP BY 1, 2;
        UPDATE chunks c SET search_bm25 = sluice_bm25_vector(c.search_terms, s.avgdl)
          FROM (SELECT generation_id, tokens::double precision / nullif(df, 0) AS avgdl
                  FROM keyword_stats WHERE term = '') s
         WHERE s.generation_id = c.generation_id;
        ALTER TABLE chunks ENABLE TRIGGER chunks_keyword_weights;
        ALTER TABLE chunks ENABLE TRIGGER chunks_stats_updated_old;
        ALTER TABLE chunks ENABLE TRIGGER chunks_stats_updated_new;
        """
    )


def downgrade() -> None:
    op.execute(
        """
        DROP TRIGGER chunks_stats_updated_new ON chunks;
        DROP TRIGGER chunks_stats_updated_old ON chunks;
        DROP TRIGGER chunks_stats_removed ON chunks;
        DROP TRIGGER chunks_stats_added ON chunks;
        DROP TRIGGER chunks_keyword_weights ON chunks;
        DROP FUNCTION sluice_compact_keyword_stats(bigint);
        DROP FUNCTION sluice_chunks_stats_removed();
        DROP FUNCTION sluice_chunks_stats_added();
        DROP FUNCTION sluice_chunk_keyword_weights();
        ALTER TABLE chunks DROP COLUMN search_bm25, DROP COLUMN search_length;
        DROP TABLE keyword_stats;
        DROP FUNCTION sluice_term_count(text);
        DROP FUNCTION sluice_bm25_vector(text, double precision, double precision, double precision);
        DROP FUNCTION sluice_term_dim(text);
        ALTER TABLE chunks ALTER COLUMN search_tsv SET EXPRESSION AS (to_tsvector('simple', search_terms));
        DROP TEXT SEARCH CONFIGURATION sluice_text;
        DROP TEXT SEARCH DICTIONARY sluice_english_stem;
        """
    )
