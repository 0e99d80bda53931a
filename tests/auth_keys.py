"""API keys of the test databases' `default` tenant, created once in the migrated template
(tests/conftest.py), so every test database starts with them. Test clients pick the key by
method: worker for JobService, admin for AdminService, client for the rest."""

from __future__ import annotations

from sluice_common.auth import generate_key
from sluice_common.channels import key_for_role, keyed_aio_channel, keyed_channel

# One key per role, made when the tests start; `install()` puts them into a database (the
# migrated template gets them, so every test database has them).
KEYS: dict[str, str] = {role: generate_key().secret for role in ("admin", "client", "reader", "worker")}


def channel(address: str, role: str | None = None, **kwargs):
    """A sync channel with the default tenant's key for each method (or one role's key)."""
    return keyed_channel(address, KEYS[role] if role else key_for_role(KEYS), **kwargs)


def aio_channel(address: str, role: str | None = None, **kwargs):
    return keyed_aio_channel(address, KEYS[role] if role else key_for_role(KEYS), **kwargs)


def metadata(role: str = "client") -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {KEYS[role]}"),)


def search_url(database_url: str) -> str:
    """The URL of `database_url` for search's read-only login (sluice_search, made by conftest)."""
    from sluice_common.embedded_pg import user_uri

    return user_uri(database_url, "sluice_search")


def install(database_url: str) -> None:
    """Put KEYS into another migrated database (of another PostgreSQL server), with the
    sluice_search login; for tests that run their own server."""
    import hashlib

    import psycopg
    from sluice_common.auth import parse_key

    with psycopg.connect(database_url, autocommit=True) as conn:
        for role, key in KEYS.items():
            key_id, secret = parse_key(key)
            conn.execute(
                "INSERT INTO api_keys (id, tenant_id, role, name, secret_sha256)"
                " SELECT %s, id, %s, 'test', %s FROM tenants WHERE name = 'default' ON CONFLICT DO NOTHING",
                (key_id, role, hashlib.sha256(secret.encode()).digest()),
            )
        conn.execute(
            "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'sluice_search') THEN"
            " CREATE ROLE sluice_search LOGIN IN ROLE sluice_search_reader; END IF; END $$"
        )
