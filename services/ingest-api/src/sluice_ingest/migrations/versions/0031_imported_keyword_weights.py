"""An INSERT into chunks that carries search_bm25 keeps it (docs/bundles.md).

A chunk's BM25 vector is computed when it is written, with its generation's average length at that
moment (docs/search.md, "Trade-offs we accept"), so it cannot be computed again later: a
collection imported from a bundle would score its keywords otherwise than where it was exported.
The import writes the weights the bundle carries; every other writer (a worker's commit, an
enabled chunk coming back from disabled_chunks) writes none and gets them computed as before. An
UPDATE of search_terms (an edit) still computes them. The length is computed either way.
CREATE OR REPLACE of the trigger's function: no lock on chunks beyond the catalog's.

Revision ID: 0031
"""

from alembic import op

revision = "0031"
down_revision = "0030"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE OR REPLACE FUNCTION sluice_chunk_keyword_weights() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            avgdl double precision;
        BEGIN
            NEW.search_length := sluice_term_count(NEW.search_terms);
            IF TG_OP = 'INSERT' AND NEW.search_bm25 IS NOT NULL THEN
                RETURN NEW;  -- an import's weights, as they were scored where it was exported
            END IF;
            SELECT sum(s.tokens)::double precision / nullif(sum(s.df), 0) INTO avgdl
              FROM keyword_stats s WHERE s.generation_id = NEW.generation_id AND s.term = '';
            NEW.search_bm25 := sluice_bm25_vector(NEW.search_terms, avgdl);
            RETURN NEW;
        END $$;
        """
    )


def downgrade() -> None:
    op.execute(
        """
        CREATE OR REPLACE FUNCTION sluice_chunk_keyword_weights() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            avgdl double precision;
        BEGIN
            SELECT sum(s.tokens)::double precision / nullif(sum(s.df), 0) INTO avgdl
              FROM keyword_stats s WHERE s.generation_id = NEW.generation_id AND s.term = '';
            NEW.search_length := sluice_term_count(NEW.search_terms);
            NEW.search_bm25 := sluice_bm25_vector(NEW.search_terms, avgdl);
            RETURN NEW;
        END $$;
        """
    )
