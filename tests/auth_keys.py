"""API keys of the test databases' `default` tenant, created once in the migrated template
(tests/conftest.py), so every test database starts with them. Test clients pick the key by
method: worker for JobService, admin for AdminService, client for the rest."""

from __future__ import annotations

from sluice_common.channels import key_for_role, keyed_aio_channel, keyed_channel

KEYS: dict[str, str] = {}


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
