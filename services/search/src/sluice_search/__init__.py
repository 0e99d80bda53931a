"""search: read-only pgvector and full-text search over READY documents."""
