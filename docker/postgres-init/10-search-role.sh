#!/bin/sh
# Runs once, when the PostgreSQL volume is first initialised (docker-entrypoint-initdb.d).
# A login role for the search service that can only read: DESIGN §2 (search may point at a
# replica; it never writes). Tables created later by the migrations (owned by
# $POSTGRES_USER) become readable through the default privileges.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" <<EOSQL
CREATE ROLE sluice_search LOGIN PASSWORD '${SLUICE_SEARCH_DB_PASSWORD:-sluice-search}';
GRANT CONNECT ON DATABASE "$POSTGRES_DB" TO sluice_search;
GRANT USAGE ON SCHEMA public TO sluice_search;
ALTER DEFAULT PRIVILEGES FOR ROLE "$POSTGRES_USER" IN SCHEMA public GRANT SELECT ON TABLES TO sluice_search;
ALTER ROLE sluice_search SET default_transaction_read_only = on;
EOSQL
