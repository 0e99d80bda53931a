"""Vector precision per index generation (docs/search.md, "Vector precision").

`collection_generations.vector_precision` records which HNSW index the generation's partial
index is (sluice_common.vector_index): `float4` (embedding::vector(d), vector_cosine_ops),
`halfvec` (embedding::halfvec(d), halfvec_cosine_ops) or `binary`
(binary_quantize(embedding)::bit(d), bit_hamming_ops, candidates re-scored exactly). Search
repeats that generation's expression in its ORDER BY, so the column must never disagree with
the index: it is set when the generation is created and never updated.

`collections.vector_precision` is the precision the collection asks for: its first generation
takes it (the trigger of migration 0009, replaced here), and a reindex takes the one it is given
or this one. Chunks keep their full float4 vector whatever the precision: every score is exact.

Existing collections and generations keep float4 (the column's default); a reindex can switch.

Revision ID: 0023
"""

from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        ALTER TABLE collections ADD COLUMN vector_precision text NOT NULL DEFAULT 'float4'
            CHECK (vector_precision IN ('float4', 'halfvec', 'binary'));
        ALTER TABLE collection_generations ADD COLUMN vector_precision text NOT NULL DEFAULT 'float4'
            CHECK (vector_precision IN ('float4', 'halfvec', 'binary'));

        CREATE OR REPLACE FUNCTION sluice_first_generation() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO collection_generations (tenant_id, collection_id, number, embedder_provider, embedder_model,
                                                dimensions, state, activated_at, vector_precision)
            VALUES (NEW.tenant_id, NEW.id, 1, NEW.embedder_provider, NEW.embedder_model, NEW.dimensions, 'ACTIVE', now(),
                    NEW.vector_precision);
            RETURN NEW;
        END $$;
        """
    )


def downgrade() -> None:
    op.execute(
        """
        CREATE OR REPLACE FUNCTION sluice_first_generation() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO collection_generations (tenant_id, collection_id, number, embedder_provider, embedder_model,
                                                dimensions, state, activated_at)
            VALUES (NEW.tenant_id, NEW.id, 1, NEW.embedder_provider, NEW.embedder_model, NEW.dimensions, 'ACTIVE', now());
            RETURN NEW;
        END $$;
        ALTER TABLE collection_generations DROP COLUMN vector_precision;
        ALTER TABLE collections DROP COLUMN vector_precision;
        """
    )
