"""Access control: tenants, API keys, tenant-owned collections, row-level security for search.

Every collection belongs to a tenant and its name is unique within the tenant. Documents and
chunks carry their tenant too, tied to their collection / document by composite foreign keys,
so a row can never claim another tenant than its parent's. That column is what row-level
security filters for search's read-only role (the second wall: search sets `sluice.tenant_id`
for each transaction; a query that forgets the tenant still sees only that tenant's rows, and
a session that set nothing sees nothing). The owner (ingest-api) is not subject to the
policies; its queries are scoped in their SQL.

request_id idempotency and chunk snapshots become per tenant, so one tenant can neither learn
through them that another holds a file nor have its documents indexed from another's chunks.

API keys are stored as the SHA-256 of their secret (a 256-bit random value, so a fast hash is
enough: there is nothing to brute-force), under a short public id that is the key's prefix.

Existing collections move to a tenant named `default`, created here.

Revision ID: 0004
"""

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

TENANT_SETTING = "NULLIF(current_setting('sluice.tenant_id', true), '')::bigint"


def upgrade() -> None:
    op.execute(
        f"""
        CREATE TYPE api_key_role AS ENUM ('admin', 'client', 'reader', 'worker');

        CREATE TABLE tenants (
            id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            name             text NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9][a-z0-9_-]{{0,62}}$'),
            -- Quotas; NULL means unlimited.
            max_documents    bigint CHECK (max_documents >= 0),
            max_stored_bytes bigint CHECK (max_stored_bytes >= 0),
            max_collections  integer CHECK (max_collections >= 0),
            created_at       timestamptz NOT NULL DEFAULT now()
        );
        INSERT INTO tenants (name) VALUES ('default');

        CREATE TABLE api_keys (
            id            text PRIMARY KEY CHECK (id ~ '^[a-z0-9]{{12}}$'),
            tenant_id     bigint NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
            role          api_key_role NOT NULL,
            name          text NOT NULL DEFAULT '' CHECK (length(name) <= 200),
            secret_sha256 bytea NOT NULL CHECK (length(secret_sha256) = 32),
            created_at    timestamptz NOT NULL DEFAULT now(),
            revoked_at    timestamptz
        );
        CREATE INDEX api_keys_tenant ON api_keys (tenant_id, created_at);

        -- Collections: owned by a tenant, named uniquely within it.
        ALTER TABLE collections ADD COLUMN tenant_id bigint REFERENCES tenants (id);
        UPDATE collections SET tenant_id = (SELECT id FROM tenants WHERE name = 'default');
        ALTER TABLE collections ALTER COLUMN tenant_id SET NOT NULL;
        ALTER TABLE collections DROP CONSTRAINT collections_name_key;
        ALTER TABLE collections ADD CONSTRAINT collections_tenant_name UNIQUE (tenant_id, name);
        ALTER TABLE collections ADD CONSTRAINT collections_id_tenant UNIQUE (id, tenant_id);

        -- Documents: the collection's tenant, enforced by a composite foreign key.
        ALTER TABLE documents ADD COLUMN tenant_id bigint;
        UPDATE documents d SET tenant_id = c.tenant_id FROM collections c WHERE c.id = d.collection_id;
        ALTER TABLE documents ALTER COLUMN tenant_id SET NOT NULL;
        ALTER TABLE documents DROP CONSTRAINT documents_collection_id_fkey;
        ALTER TABLE documents ADD CONSTRAINT documents_collection_tenant_fkey
            FOREIGN KEY (collection_id, tenant_id) REFERENCES collections (id, tenant_id) ON DELETE CASCADE;
        ALTER TABLE documents ADD CONSTRAINT documents_id_tenant UNIQUE (id, tenant_id);
        DROP INDEX documents_request_id;
        CREATE UNIQUE INDEX documents_request_id ON documents (tenant_id, request_id) WHERE request_id IS NOT NULL;
        CREATE INDEX documents_tenant_created ON documents (tenant_id, created_at DESC, id DESC);

        -- Chunks: the document's tenant, enforced the same way.
        ALTER TABLE chunks ADD COLUMN tenant_id bigint;
        UPDATE chunks c SET tenant_id = d.tenant_id FROM documents d WHERE d.id = c.document_id;
        ALTER TABLE chunks ALTER COLUMN tenant_id SET NOT NULL;
        ALTER TABLE chunks DROP CONSTRAINT chunks_document_id_fkey;
        ALTER TABLE chunks ADD CONSTRAINT chunks_document_tenant_fkey
            FOREIGN KEY (document_id, tenant_id) REFERENCES documents (id, tenant_id) ON DELETE CASCADE;

        -- Snapshots are reused within a tenant only. They are a cache: start empty.
        DELETE FROM chunk_snapshots;
        ALTER TABLE chunk_snapshots ADD COLUMN tenant_id bigint NOT NULL REFERENCES tenants (id) ON DELETE CASCADE;
        ALTER TABLE chunk_snapshots DROP CONSTRAINT chunk_snapshots_pkey;
        ALTER TABLE chunk_snapshots ADD PRIMARY KEY (tenant_id, content_sha256, pipeline_version);

        -- The second wall: search's role sees one tenant's rows, the one its transaction set.
        ALTER TABLE collections ENABLE ROW LEVEL SECURITY;
        ALTER TABLE documents ENABLE ROW LEVEL SECURITY;
        ALTER TABLE chunks ENABLE ROW LEVEL SECURITY;
        CREATE POLICY search_tenant ON collections FOR SELECT TO sluice_search_reader
            USING (tenant_id = {TENANT_SETTING});
        CREATE POLICY search_tenant ON documents FOR SELECT TO sluice_search_reader
            USING (tenant_id = {TENANT_SETTING});
        CREATE POLICY search_tenant ON chunks FOR SELECT TO sluice_search_reader
            USING (tenant_id = {TENANT_SETTING});
        -- search authenticates its callers itself: it reads keys (hashes only) and tenant names.
        GRANT SELECT (id, tenant_id, role, secret_sha256, revoked_at) ON api_keys TO sluice_search_reader;
        GRANT SELECT (id, name) ON tenants TO sluice_search_reader;
        -- search warms up every tenant's embedders: these three columns, nothing else.
        CREATE FUNCTION sluice_embedders_in_use() RETURNS TABLE (provider text, model text, dimensions integer)
            LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public
            AS $$ SELECT DISTINCT embedder_provider, embedder_model, dimensions FROM collections $$;
        REVOKE ALL ON FUNCTION sluice_embedders_in_use() FROM PUBLIC;
        GRANT EXECUTE ON FUNCTION sluice_embedders_in_use() TO sluice_search_reader;
        """
    )


def downgrade() -> None:
    op.execute(
        """
        DROP FUNCTION sluice_embedders_in_use();
        REVOKE ALL ON api_keys, tenants FROM sluice_search_reader;
        DROP POLICY search_tenant ON chunks;
        DROP POLICY search_tenant ON documents;
        DROP POLICY search_tenant ON collections;
        ALTER TABLE chunks DISABLE ROW LEVEL SECURITY;
        ALTER TABLE documents DISABLE ROW LEVEL SECURITY;
        ALTER TABLE collections DISABLE ROW LEVEL SECURITY;
        DELETE FROM chunk_snapshots;
        ALTER TABLE chunk_snapshots DROP CONSTRAINT chunk_snapshots_pkey;
        ALTER TABLE chunk_snapshots DROP COLUMN tenant_id;
        ALTER TABLE chunk_snapshots ADD PRIMARY KEY (content_sha256, pipeline_version);
        ALTER TABLE chunks DROP CONSTRAINT chunks_document_tenant_fkey;
        ALTER TABLE chunks ADD CONSTRAINT chunks_document_id_fkey
            FOREIGN KEY (document_id) REFERENCES documents (id) ON DELETE CASCADE;
        ALTER TABLE chunks DROP COLUMN tenant_id;
        DROP INDEX documents_tenant_created;
        DROP INDEX documents_request_id;
        CREATE UNIQUE INDEX documents_request_id ON documents (request_id) WHERE request_id IS NOT NULL;
        ALTER TABLE documents DROP CONSTRAINT documents_id_tenant;
        ALTER TABLE documents DROP CONSTRAINT documents_collection_tenant_fkey;
        ALTER TABLE documents ADD CONSTRAINT documents_collection_id_fkey
            FOREIGN KEY (collection_id) REFERENCES collections (id) ON DELETE CASCADE;
        ALTER TABLE documents DROP COLUMN tenant_id;
        ALTER TABLE collections DROP CONSTRAINT collections_id_tenant;
        ALTER TABLE collections DROP CONSTRAINT collections_tenant_name;
        ALTER TABLE collections ADD CONSTRAINT collections_name_key UNIQUE (name);
        ALTER TABLE collections DROP COLUMN tenant_id;
        DROP TABLE api_keys;
        DROP TABLE tenants;
        DROP TYPE api_key_role;
        """
    )
