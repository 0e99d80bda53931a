"""Fair queues (docs/tenancy.md, "Fair queues"): workers share their time among tenants and,
within a tenant, among its collections, instead of serving every job first in, first out.

Start-time fair queueing with the tags written at enqueue, so that a claim stays one ordered
index scan, as cheap as the first-in-first-out claim it replaces, and writes no shared row:

- A job carries its collection, tenant and priority (1 INTERACTIVE, 2 BULK: JobPriority's
  numbers; an EMBED job is BULK), filled from its document on insert by a trigger, so that no
  insert statement has to; and `fair_key`, its start tag. Claims take the due job with the
  smallest `fair_key` (then the smaller priority).
- A lane is a collection's work of one priority (`queue_lanes`). A job entering PENDING from
  nothing (an insert), or again after it ended (a reprocess, a retry by hand), gets the tag
  `greatest(lane.next_start, V)`, and the lane's `next_start` moves on by the tenant's lanes
  with work over the tenant's weight: a tenant's lanes together advance at 1/weight per job.
  V, the virtual time, is the smallest tag among the due PENDING jobs (the front of the queue),
  or when nothing is due the largest `next_start` of any lane: a lane idle for a while starts at
  the front, without credit for the time it was idle. A retry after a failure, and a job
  handed back, keep their tag.
- A tenant has a weight (1 to 100) and an optional cap on its RUNNING jobs. A job of a capped
  tenant is marked `capped` (kept in step by UpdateTenant) and claimed under an advisory lock of
  its tenant, so the cap holds exactly; the others are claimed without any lock but the job's.

Revision ID: 0032
"""

from alembic import op

revision = "0032"
down_revision = "0031"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        ALTER TABLE tenants
            ADD COLUMN queue_weight integer NOT NULL DEFAULT 1 CHECK (queue_weight BETWEEN 1 AND 100),
            ADD COLUMN max_running_jobs integer CHECK (max_running_jobs BETWEEN 1 AND 10000);
        CREATE INDEX tenants_capped ON tenants (id) WHERE max_running_jobs IS NOT NULL;

        CREATE TABLE queue_lanes (
            collection_id bigint NOT NULL REFERENCES collections (id) ON DELETE CASCADE,
            priority      smallint NOT NULL CHECK (priority IN (1, 2)),
            tenant_id     bigint NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
            next_start    double precision NOT NULL DEFAULT 0,
            PRIMARY KEY (collection_id, priority)
        );
        CREATE INDEX queue_lanes_tenant ON queue_lanes (tenant_id, next_start);
        CREATE INDEX queue_lanes_next_start ON queue_lanes (next_start);

        ALTER TABLE ingestion_jobs
            ADD COLUMN collection_id bigint,
            ADD COLUMN tenant_id bigint,
            ADD COLUMN priority smallint NOT NULL DEFAULT 1 CHECK (priority IN (1, 2)),
            ADD COLUMN capped boolean NOT NULL DEFAULT false,
            ADD COLUMN fair_key double precision NOT NULL DEFAULT 0;
        -- Jobs queued before keep their order: their tags are their places in the old queue.
        UPDATE ingestion_jobs j
        SET collection_id = d.collection_id, tenant_id = d.tenant_id,
            priority = CASE WHEN j.kind = 'EMBED' THEN 2 ELSE 1 END,
            fair_key = extract(epoch FROM j.available_at) - extract(epoch FROM now())
        FROM documents d WHERE d.id = j.document_id;
        ALTER TABLE ingestion_jobs
            ALTER COLUMN collection_id SET NOT NULL,
            ALTER COLUMN tenant_id SET NOT NULL;

        CREATE FUNCTION queue_start_tag(lane_collection bigint, lane_priority smallint, lane_tenant bigint)
        RETURNS double precision LANGUAGE plpgsql AS $$
        DECLARE
            virtual_time double precision := coalesce(
                (SELECT fair_key FROM ingestion_jobs
                 WHERE status = 'PENDING' AND NOT capped AND available_at <= now()
                 ORDER BY fair_key LIMIT 1),
                (SELECT max(next_start) FROM queue_lanes),
                0);
            lanes integer;
            tag double precision;
        BEGIN
            INSERT INTO queue_lanes (collection_id, priority, tenant_id, next_start)
            VALUES (lane_collection, lane_priority, lane_tenant, virtual_time)
            ON CONFLICT (collection_id, priority) DO NOTHING;
            SELECT greatest(next_start, virtual_time) INTO tag FROM queue_lanes
            WHERE collection_id = lane_collection AND priority = lane_priority FOR UPDATE;
            -- This lane, and the tenant's other lanes with work ahead of the front.
            SELECT count(*) INTO lanes FROM queue_lanes
            WHERE tenant_id = lane_tenant
              AND (next_start > virtual_time OR (collection_id = lane_collection AND priority = lane_priority));
            UPDATE queue_lanes
            SET next_start = tag + lanes::double precision / (SELECT queue_weight FROM tenants WHERE id = lane_tenant)
            WHERE collection_id = lane_collection AND priority = lane_priority;
            RETURN tag;
        END $$;

        CREATE FUNCTION ingestion_jobs_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'INSERT' THEN
                SELECT d.collection_id, d.tenant_id INTO NEW.collection_id, NEW.tenant_id
                FROM documents d WHERE d.id = NEW.document_id;
                IF NEW.kind = 'EMBED' THEN
                    NEW.priority := 2;
                END IF;
                -- FOR SHARE: an UpdateTenant changing the cap waits for this enqueue, or this
                -- enqueue for it, so no job is marked by a cap that has just changed.
                NEW.capped := (SELECT t.max_running_jobs IS NOT NULL FROM tenants t WHERE t.id = NEW.tenant_id FOR SHARE);
            END IF;
            IF NEW.status = 'PENDING' AND (TG_OP = 'INSERT' OR OLD.status IN ('SUCCEEDED', 'FAILED')) THEN
                NEW.fair_key := queue_start_tag(NEW.collection_id, NEW.priority, NEW.tenant_id);
            END IF;
            RETURN NEW;
        END $$;
        CREATE TRIGGER ingestion_jobs_enqueue BEFORE INSERT OR UPDATE OF status ON ingestion_jobs
            FOR EACH ROW EXECUTE FUNCTION ingestion_jobs_enqueue();

        INSERT INTO queue_lanes (collection_id, priority, tenant_id, next_start)
        SELECT collection_id, priority, min(tenant_id), max(fair_key) + 1 FROM ingestion_jobs
        WHERE status = 'PENDING' GROUP BY collection_id, priority;

        -- The claim's scans: the front of the queue of the tenants without a cap, and each capped
        -- tenant's own front; and a tenant's RUNNING jobs (its cap).
        CREATE INDEX ingestion_jobs_fair ON ingestion_jobs (fair_key, priority)
            WHERE status = 'PENDING' AND NOT capped;
        CREATE INDEX ingestion_jobs_fair_capped ON ingestion_jobs (tenant_id, fair_key, priority)
            WHERE status = 'PENDING' AND capped;
        CREATE INDEX ingestion_jobs_tenant_running ON ingestion_jobs (tenant_id) WHERE status = 'RUNNING';
        """
    )


def downgrade() -> None:
    op.execute(
        """
        DROP INDEX ingestion_jobs_tenant_running;
        DROP INDEX ingestion_jobs_fair_capped;
        DROP INDEX ingestion_jobs_fair;
        DROP TRIGGER ingestion_jobs_enqueue ON ingestion_jobs;
        DROP FUNCTION ingestion_jobs_enqueue();
        DROP FUNCTION queue_start_tag(bigint, smallint, bigint);
        ALTER TABLE ingestion_jobs
            DROP COLUMN fair_key, DROP COLUMN capped, DROP COLUMN priority, DROP COLUMN tenant_id, DROP COLUMN collection_id;
        DROP TABLE queue_lanes;
        DROP INDEX tenants_capped;
        ALTER TABLE tenants DROP COLUMN max_running_jobs, DROP COLUMN queue_weight;
        """
    )
