"""Chunk vectors stay in the row (docs/search.md, "Vector precision"; docs/scaling.md, "Vectors at
scale").

pgvector gives `vector` EXTERNAL storage: when a row is wider than PostgreSQL's 2 kB TOAST
threshold, which a real chunk is (about 1,000 characters of text, the same words again in
`search_terms`, their `search_tsv`, `search_bm25`, and a 384-d vector of 1,544 bytes), the
toaster moves the vector out of line with the text. Every exact distance then reads it back from
the TOAST table, about 8 buffer reads a row: the 100 candidates a `binary` generation re-scores,
the 10 answers of a `float4` or `halfvec` one, every chunk of an exact (filtered) search, and
every chunk of a document whose vector the triggers of 0026 compute again.

MAIN storage keeps the vector in the row: the toaster moves the EXTENDED columns (text,
search_terms, search_tsv, ...) out first, and a MAIN column only when the row would still not
fit in a page (about 8 kB), as `search_bm25` already is kept since 0016. Measured on 100,000
chunks of ~1,000 characters: the heap grows from 1.9 to 2.7 kB a row (260 against 192 MB) and
the TOAST table shrinks by as much (378 against 431 MB); an exact search over a 1 % filter's
500 chunks reads 420 buffers instead of 4,334.

Existing rows: SET STORAGE changes only how rows are written from now on (no rewrite, no long
lock; this migration is instant). Chunks written after it (new and re-ingested documents, and
every chunk of a reindex's new generation) keep their vector in line; rows already stored keep
their TOAST copy, and are answered exactly as before, only slower, until rewritten. To move them
all at once, in a maintenance window: `VACUUM FULL chunks` (takes an ACCESS EXCLUSIVE lock on
chunks for the whole rewrite, index builds included, and needs the table's size again on
disk), or reindex a collection to move its chunks alone with searches still served. An
`UPDATE chunks SET embedding = embedding` does not move them (PostgreSQL keeps an unchanged
TOAST pointer) and fires the keyword and document-vector triggers for nothing.

Revision ID: 0027
"""

from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE chunks ALTER COLUMN embedding SET STORAGE MAIN")


def downgrade() -> None:
    op.execute("ALTER TABLE chunks ALTER COLUMN embedding SET STORAGE EXTERNAL")
