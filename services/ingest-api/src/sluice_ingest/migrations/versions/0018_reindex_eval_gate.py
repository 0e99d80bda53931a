"""The reindex quality gate (issue 18 item 7; docs/search.md, "Reindexing with a quality gate").

- `collection_generations.eval_set` / `eval_min_ratio`: the eval set a ReindexCollection call
  gave (a JSON array of {"query", "relevant", "id"}), NULL when the reindex is not gated.
- `generation_evaluations`: search's verdict on a gated generation, one row per generation
  (kept when the generation is CANCELLED, dropped with it when its collection is deleted).
  `passed` follows from the scores and the ratio by a CHECK: the rule lives here, not in a
  client.
- `sluice_generation_complete(id)`: the switch's definition of a complete BUILDING generation
  (nothing left to embed or failed, every READY document embedded into it), now written once
  and used by ingest-api's switch and by the listing below.
- search's only write: `sluice_record_generation_verdict(...)`, SECURITY DEFINER, which inserts
  a verdict for a gated BUILDING generation compared with its collection's ACTIVE one, and
  nothing else; and `sluice_generations_awaiting_verdict()`, SECURITY DEFINER, listing the
  gated generations that are complete, indexed and without a verdict, across tenants. Both
  executable by sluice_search_reader only. search calls the first in a READ WRITE transaction
  (its sessions default to read-only), so the search instance that runs the gate must reach the
  primary.

Revision ID: 0018
"""

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

TENANT_SETTING = "NULLIF(current_setting('sluice.tenant_id', true), '')::bigint"


def upgrade() -> None:
    op.execute(
        f"""
        SET CONSTRAINTS ALL IMMEDIATE;
        ALTER TABLE collection_generations
            ADD COLUMN eval_set jsonb
                CHECK (eval_set IS NULL OR (jsonb_typeof(eval_set) = 'array'
                                            AND jsonb_array_length(eval_set) BETWEEN 1 AND 1000)),
            ADD COLUMN eval_min_ratio real CHECK (eval_min_ratio > 0 AND eval_min_ratio <= 2),
            ADD CONSTRAINT eval_set_has_ratio CHECK ((eval_set IS NULL) = (eval_min_ratio IS NULL));

        CREATE TABLE generation_evaluations (
            generation_id        bigint PRIMARY KEY REFERENCES collection_generations (id) ON DELETE CASCADE,
            tenant_id            bigint NOT NULL,
            -- The ACTIVE generation it was compared with (its number stays readable once retired).
            active_generation_id bigint NOT NULL,
            active_generation    integer NOT NULL,
            metric               text NOT NULL DEFAULT 'mrr@10',
            active_score         double precision NOT NULL CHECK (active_score BETWEEN 0 AND 1),
            candidate_score      double precision NOT NULL CHECK (candidate_score BETWEEN 0 AND 1),
            queries              integer NOT NULL CHECK (queries BETWEEN 1 AND 1000),
            min_ratio            real NOT NULL CHECK (min_ratio > 0 AND min_ratio <= 2),
            passed               boolean NOT NULL,
            -- Which search instance measured it, for people.
            evaluated_by         text NOT NULL DEFAULT '',
            evaluated_at         timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT passed_by_the_rule CHECK (passed = (candidate_score >= min_ratio * active_score))
        );
        ALTER TABLE generation_evaluations ENABLE ROW LEVEL SECURITY;
        CREATE POLICY search_tenant ON generation_evaluations FOR SELECT TO sluice_search_reader
            USING (tenant_id = {TENANT_SETTING});
        GRANT SELECT ON generation_evaluations TO sluice_search_reader;

        CREATE FUNCTION sluice_generation_complete(generation bigint) RETURNS boolean
            LANGUAGE plpgsql STABLE SET search_path = public AS $$
        BEGIN
            -- Nothing left to embed or failed (cheap: the partial index ingestion_jobs_embed_open) ...
            IF EXISTS (SELECT 1 FROM ingestion_jobs j WHERE j.generation_id = generation AND j.kind = 'EMBED'
                       AND j.status <> 'SUCCEEDED') THEN
                RETURN false;
            END IF;
            -- ... and every READY document of the collection embedded into it (a scan of the
            -- collection: asked only when the first holds).
            RETURN EXISTS (
                SELECT 1 FROM collection_generations g WHERE g.id = generation AND g.state = 'BUILDING'
                AND NOT EXISTS (
                    SELECT 1 FROM documents d WHERE d.collection_id = g.collection_id AND d.status = 'READY'
                    AND NOT EXISTS (SELECT 1 FROM ingestion_jobs j WHERE j.kind = 'EMBED' AND j.generation_id = g.id
                                    AND j.document_id = d.id AND j.status = 'SUCCEEDED')));
        END $$;
        REVOKE ALL ON FUNCTION sluice_generation_complete(bigint) FROM PUBLIC;

        CREATE FUNCTION sluice_generations_awaiting_verdict()
            RETURNS TABLE (generation_id bigint, tenant_id bigint, collection text, generation integer,
                           active_generation_id bigint, eval_set jsonb, min_ratio real)
            LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public
            AS $$
            SELECT g.id, g.tenant_id, c.name, g.number, a.id, g.eval_set, g.eval_min_ratio
              FROM collection_generations g
              JOIN collections c ON c.id = g.collection_id
              JOIN collection_generations a ON a.collection_id = g.collection_id AND a.state = 'ACTIVE'
             WHERE g.state = 'BUILDING' AND g.eval_set IS NOT NULL
               AND NOT EXISTS (SELECT 1 FROM generation_evaluations e WHERE e.generation_id = g.id)
               AND EXISTS (SELECT 1 FROM pg_index i WHERE i.indexrelid = to_regclass('chunks_embedding_g' || g.id)
                           AND i.indisvalid)
               AND sluice_generation_complete(g.id)
             ORDER BY g.id
            $$;
        REVOKE ALL ON FUNCTION sluice_generations_awaiting_verdict() FROM PUBLIC;
        GRANT EXECUTE ON FUNCTION sluice_generations_awaiting_verdict() TO sluice_search_reader;

        -- Returns 'PASSED' or 'FAILED', or NULL when nothing was recorded: the generation is no
        -- longer a gated BUILDING one, the ACTIVE generation is not the one measured, or a verdict
        -- exists already (another search instance was first).
        CREATE FUNCTION sluice_record_generation_verdict(
                p_generation bigint, p_active_generation bigint, p_active_score double precision,
                p_candidate_score double precision, p_queries integer, p_evaluated_by text)
            RETURNS text LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public AS $$
        DECLARE
            g record;
            a record;
            verdict boolean;
        BEGIN
            SELECT cg.tenant_id, cg.collection_id, cg.eval_set, cg.eval_min_ratio, cg.state
              INTO g FROM collection_generations cg WHERE cg.id = p_generation;
            IF NOT FOUND OR g.state <> 'BUILDING' OR g.eval_set IS NULL THEN
                RETURN NULL;
            END IF;
            IF p_queries <> jsonb_array_length(g.eval_set) THEN
                RAISE EXCEPTION 'generation % has % eval queries, not %', p_generation,
                    jsonb_array_length(g.eval_set), p_queries USING ERRCODE = 'check_violation';
            END IF;
            SELECT cg.id, cg.number INTO a FROM collection_generations cg
             WHERE cg.collection_id = g.collection_id AND cg.state = 'ACTIVE';
            IF NOT FOUND OR a.id <> p_active_generation THEN
                RETURN NULL;
            END IF;
            INSERT INTO generation_evaluations (generation_id, tenant_id, active_generation_id, active_generation,
                                                active_score, candidate_score, queries, min_ratio, passed,
                                                evaluated_by)
            VALUES (p_generation, g.tenant_id, a.id, a.number, p_active_score, p_candidate_score, p_queries,
                    g.eval_min_ratio, p_candidate_score >= g.eval_min_ratio * p_active_score, left(p_evaluated_by, 200))
            ON CONFLICT ON CONSTRAINT generation_evaluations_pkey DO NOTHING
            RETURNING passed INTO verdict;
            IF NOT FOUND THEN
                RETURN NULL;
            END IF;
            RETURN CASE WHEN verdict THEN 'PASSED' ELSE 'FAILED' END;
        END $$;
        REVOKE ALL ON FUNCTION sluice_record_generation_verdict(bigint, bigint, double precision, double precision,
                                                                integer, text) FROM PUBLIC;
        GRANT EXECUTE ON FUNCTION sluice_record_generation_verdict(bigint, bigint, double precision, double precision,
                                                                   integer, text) TO sluice_search_reader;
        """
    )


def downgrade() -> None:
    op.execute(
        """
        SET CONSTRAINTS ALL IMMEDIATE;
        DROP FUNCTION sluice_record_generation_verdict(bigint, bigint, double precision, double precision, integer, text);
        DROP FUNCTION sluice_generations_awaiting_verdict();
        DROP FUNCTION sluice_generation_complete(bigint);
        REVOKE ALL ON generation_evaluations FROM sluice_search_reader;
        DROP TABLE generation_evaluations;
        ALTER TABLE collection_generations DROP CONSTRAINT eval_set_has_ratio, DROP COLUMN eval_min_ratio,
            DROP COLUMN eval_set;
        """
    )
