#!/bin/sh
# Runs once, when the PostgreSQL volume is first initialised (docker-entrypoint-initdb.d).
# The login of the search service: a member of sluice_search_reader, the read-only group
# role that migration 0003 grants SELECT on collections, documents and chunks
# (docs/architecture.md#services: search never writes). The group is created here too, so the login can join it before the
# migrations run; the migration leaves an existing role as it is.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" <<EOSQL
CREATE ROLE sluice_search_reader NOLOGIN;
CREATE ROLE sluice_search LOGIN PASSWORD '${SLUICE_SEARCH_DB_PASSWORD:-sluice-search}' IN ROLE sluice_search_reader;
ALTER ROLE sluice_search SET default_transaction_read_only = on;
GRANT CONNECT ON DATABASE "$POSTGRES_DB" TO sluice_search;
EOSQL
