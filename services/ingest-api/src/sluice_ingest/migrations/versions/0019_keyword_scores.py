"""KEYWORD's candidates through the GIN index under row-level security (docs/search.md,
"Keyword ranking", "Row-level security and the GIN index").

search reads chunks as sluice_search_reader, held by the policy `tenant_id = <its setting>`.
PostgreSQL applies a policy's condition before any condition of the query whose function is not
LEAKPROOF, so that a query cannot leak rows through a function's errors; the text search match
`tsvector @@ tsquery` is not LEAKPROOF, so under the policy the planner cannot use the GIN index
on `search_tsv` and read every chunk of the table instead: at 94,000 chunks a KEYWORD query took
3.1 s where the same statement as the table's owner took 60 ms.

`sluice_keyword_scores(generation, query, weights)` runs as the table's owner (SECURITY
DEFINER): the generation's chunks that match `query`, found through the GIN index, each with its
BM25 score (the inner product of its weights with the query's). It reads the tenant from the same
session setting the policy reads, so it shows search exactly the rows the policy would: no
setting, no rows. Executable by sluice_search_reader only.

Revision ID: 0019
"""

from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

TENANT_SETTING = "NULLIF(current_setting('sluice.tenant_id', true), '')::bigint"


def upgrade() -> None:
    op.execute(
        f"""
        CREATE FUNCTION sluice_keyword_scores(generation bigint, query tsquery, weights sparsevec)
            RETURNS TABLE (chunk_id bigint, score double precision)
            LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public
            AS $$
                SELECT c.id, -(c.search_bm25 <#> weights) FROM chunks c
                WHERE c.search_tsv @@ query AND c.generation_id = generation
                  AND c.tenant_id = {TENANT_SETTING}
            $$;
        REVOKE ALL ON FUNCTION sluice_keyword_scores(bigint, tsquery, sparsevec) FROM PUBLIC;
        GRANT EXECUTE ON FUNCTION sluice_keyword_scores(bigint, tsquery, sparsevec) TO sluice_search_reader;
        """
    )


def downgrade() -> None:
    op.execute("DROP FUNCTION sluice_keyword_scores(bigint, tsquery, sparsevec)")
