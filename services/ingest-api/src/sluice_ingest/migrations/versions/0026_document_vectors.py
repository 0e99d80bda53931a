"""Each document's vector per index generation, for HYBRID's document context (docs/search.md,
"Document context").

A chunk is scored alone, but a summary-like query often matches what a whole document is
about better than any one of its passages. `document_vectors` holds, per (generation, document),
the normalised mean of the document's chunk embeddings in that generation (its centroid);
HYBRID blends a candidate chunk's cosine similarity with its document's.

Kept exact by statement-level triggers on `chunks`, as the keyword statistics are (0016): after
chunks are inserted, the vectors of the (generation, document) pairs they belong to are computed
again from all of that pair's chunks; after chunks are deleted, those pairs' vectors go; an
update is both. A commit
deletes a document's chunks and then copies the new ones in, so the vector of the commit is the
vector of the chunks it committed, whatever path wrote them (a commit, a reindex, a deletion).
A row belongs to its document (and tenant) and its generation, and goes with either.

Revision ID: 0026
"""

from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE document_vectors (
            generation_id bigint NOT NULL REFERENCES collection_generations (id) ON DELETE CASCADE,
            document_id   uuid NOT NULL,
            tenant_id     bigint NOT NULL,
            -- l2_normalize(avg(chunk embeddings)): untyped, as chunks.embedding is.
            embedding     vector NOT NULL,
            PRIMARY KEY (generation_id, document_id),
            FOREIGN KEY (document_id, tenant_id) REFERENCES documents (id, tenant_id) ON DELETE CASCADE
        );
        CREATE INDEX document_vectors_document ON document_vectors (document_id);
        ALTER TABLE document_vectors ENABLE ROW LEVEL SECURITY;
        CREATE POLICY search_tenant ON document_vectors FOR SELECT TO sluice_search_reader
            USING (tenant_id = NULLIF(current_setting('sluice.tenant_id', true), '')::bigint);
        GRANT SELECT ON document_vectors TO sluice_search_reader;

        CREATE FUNCTION sluice_document_vectors_added() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO document_vectors (generation_id, document_id, tenant_id, embedding)
            SELECT c.generation_id, c.document_id, min(c.tenant_id), l2_normalize(avg(c.embedding))
              FROM chunks c
             WHERE (c.document_id, c.generation_id) IN (SELECT DISTINCT n.document_id, n.generation_id FROM added n)
             GROUP BY c.generation_id, c.document_id
            ON CONFLICT (generation_id, document_id) DO UPDATE SET embedding = EXCLUDED.embedding;
            RETURN NULL;
        END $$;
        CREATE FUNCTION sluice_document_vectors_removed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM document_vectors v
             USING (SELECT DISTINCT o.document_id, o.generation_id FROM removed o) o
             WHERE v.document_id = o.document_id AND v.generation_id = o.generation_id;
            RETURN NULL;
        END $$;
        CREATE TRIGGER chunks_document_vectors_added AFTER INSERT ON chunks REFERENCING NEW TABLE AS added
            FOR EACH STATEMENT EXECUTE FUNCTION sluice_document_vectors_added();
        CREATE TRIGGER chunks_document_vectors_removed AFTER DELETE ON chunks REFERENCING OLD TABLE AS removed
            FOR EACH STATEMENT EXECUTE FUNCTION sluice_document_vectors_removed();
        -- An UPDATE (none but a migration's) is a removal then an insertion, in that order (triggers
        -- of one event fire by name): the pairs the rows left lose their vectors, the pairs they
        -- are in now get theirs computed again.
        CREATE TRIGGER chunks_document_vectors_updated_1_old AFTER UPDATE ON chunks REFERENCING OLD TABLE AS removed
            FOR EACH STATEMENT EXECUTE FUNCTION sluice_document_vectors_removed();
        CREATE TRIGGER chunks_document_vectors_updated_2_new AFTER UPDATE ON chunks REFERENCING NEW TABLE AS added
            FOR EACH STATEMENT EXECUTE FUNCTION sluice_document_vectors_added();

        -- The documents already indexed.
        INSERT INTO document_vectors (generation_id, document_id, tenant_id, embedding)
        SELECT c.generation_id, c.document_id, min(c.tenant_id), l2_normalize(avg(c.embedding))
          FROM chunks c
         GROUP BY c.generation_id, c.document_id;
        """
    )


def downgrade() -> None:
    op.execute(
        """
        DROP TRIGGER chunks_document_vectors_updated_2_new ON chunks;
        DROP TRIGGER chunks_document_vectors_updated_1_old ON chunks;
        DROP TRIGGER chunks_document_vectors_removed ON chunks;
        DROP TRIGGER chunks_document_vectors_added ON chunks;
        DROP FUNCTION sluice_document_vectors_removed();
        DROP FUNCTION sluice_document_vectors_added();
        DROP TABLE document_vectors;
        """
    )
