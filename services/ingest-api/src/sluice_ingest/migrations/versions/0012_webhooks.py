"""Webhook subscriptions and their deliveries: the events log's outbox, one cursor per subscription.

A subscription follows its collection's events log from its own cursor (txid, event id) and
turns every matching event into a delivery row (the payload is copied then, so pruning the log
or deleting the document does not lose it). One ingest-api replica serves a subscription at a
time: it holds the subscription's lease (`lease_owner`, `lease_expires_at`), taken with
FOR UPDATE SKIP LOCKED in a short transaction and renewed; every write of the dispatcher is
fenced by it. No row lock is held while a request is in flight. Both tables go with their
collection (a deleted collection ends its subscriptions).

Revision ID: 0012
"""

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE webhook_subscriptions (
            id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
            tenant_id bigint NOT NULL,
            collection_id bigint NOT NULL,
            url text NOT NULL CHECK (length(url) BETWEEN 1 AND 2000),
            event_types text[] NOT NULL CHECK (cardinality(event_types) > 0),
            description text NOT NULL DEFAULT '' CHECK (length(description) <= 500),
            secret text NOT NULL,
            state text NOT NULL DEFAULT 'ACTIVE' CHECK (state IN ('ACTIVE', 'DISABLED')),
            disabled_reason text,
            cursor_txid bigint NOT NULL,
            cursor_event_id bigint NOT NULL,
            lost_events bigint NOT NULL DEFAULT 0,
            lease_owner text,
            lease_expires_at timestamptz,
            created_at timestamptz NOT NULL DEFAULT now(),
            FOREIGN KEY (collection_id, tenant_id) REFERENCES collections (id, tenant_id) ON DELETE CASCADE
        );
        CREATE INDEX webhook_subscriptions_tenant ON webhook_subscriptions (tenant_id, created_at, id);
        CREATE INDEX webhook_subscriptions_collection ON webhook_subscriptions (collection_id);

        CREATE TABLE webhook_deliveries (
            seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id uuid NOT NULL UNIQUE DEFAULT gen_random_uuid(),
            subscription_id uuid NOT NULL REFERENCES webhook_subscriptions (id) ON DELETE CASCADE,
            event_id bigint NOT NULL,
            event_txid bigint NOT NULL,
            document_id uuid NOT NULL,
            event_type text NOT NULL,
            payload json NOT NULL,  -- json, not jsonb: the exact bytes that are POSTed and signed
            event_time timestamptz NOT NULL,
            state text NOT NULL DEFAULT 'PENDING' CHECK (state IN ('PENDING', 'DELIVERED', 'FAILED')),
            attempts integer NOT NULL DEFAULT 0,
            next_attempt_at timestamptz NOT NULL DEFAULT now(),
            last_status_code integer,
            last_error text,
            delivered_at timestamptz,
            created_at timestamptz NOT NULL DEFAULT now(),
            UNIQUE (subscription_id, event_id, event_type)
        );
        -- The dispatcher's scan: a subscription's oldest pending deliveries.
        CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (subscription_id, seq)
            WHERE state = 'PENDING';
        -- Retention of delivered and failed deliveries.
        CREATE INDEX webhook_deliveries_done ON webhook_deliveries (created_at) WHERE state <> 'PENDING';
        CREATE INDEX webhook_deliveries_listing ON webhook_deliveries (subscription_id, seq DESC);

        -- Wakes dispatchers when a subscription is created (the events log wakes them otherwise).
        CREATE FUNCTION sluice_webhooks_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('sluice_webhooks_changed', NEW.collection_id::text);
            RETURN NEW;
        END $$;
        CREATE TRIGGER webhook_subscriptions_changed AFTER INSERT ON webhook_subscriptions
            FOR EACH ROW EXECUTE FUNCTION sluice_webhooks_changed();
        """
    )


def downgrade() -> None:
    op.execute(
        """
        DROP TABLE IF EXISTS webhook_deliveries;
        DROP TABLE IF EXISTS webhook_subscriptions;
        DROP FUNCTION IF EXISTS sluice_webhooks_changed;
        """
    )
