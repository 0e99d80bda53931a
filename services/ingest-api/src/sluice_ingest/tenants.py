"""The bootstrap of a first tenant and its keys (`sluice-bootstrap`, and the tests' databases).

The SQL of AdminService is store/tenants.py; a tenant's name is checked by domain.check_tenant_name.
"""

from __future__ import annotations

import os

import psycopg
from sluice_common.auth import Role, generate_key, parse_key

from .domain import check_tenant_name

DEFAULT_TENANT = "default"


# ---------------------------------------------------------------- bootstrap (sync, for tools)


def key_is_valid(conn: psycopg.Connection, key: str, role: Role) -> bool:
    """True when `key` exists with `role`, is not revoked and its secret matches."""
    import hashlib
    import hmac

    parsed = parse_key(key)
    if parsed is None:
        return False
    row = conn.execute(
        "SELECT secret_sha256 FROM api_keys WHERE id = %s AND role = %s AND revoked_at IS NULL", (parsed[0], str(role))
    ).fetchone()
    return row is not None and hmac.compare_digest(bytes(row[0]), hashlib.sha256(parsed[1].encode()).digest())


def bootstrap_keys(database_url: str, existing: dict[str, str] | None = None, tenant: str = DEFAULT_TENANT) -> dict[str, str]:
    """Keys for a first start: an admin, a client and a worker key of `tenant` (created if
    missing). Keys in `existing` (role → key) that are still valid are kept; the rest are new.
    Returns role → key."""
    existing = existing or {}
    check_tenant_name(tenant)
    keys: dict[str, str] = {}
    with psycopg.connect(database_url, autocommit=True) as conn, conn.transaction():
        conn.execute("INSERT INTO tenants (name) VALUES (%s) ON CONFLICT (name) DO NOTHING", (tenant,))
        row = conn.execute("SELECT id FROM tenants WHERE name = %s", (tenant,)).fetchone()
        assert row is not None  # inserted just above if it was missing
        (tenant_id,) = row
        for role in (Role.ADMIN, Role.CLIENT, Role.WORKER):
            current = existing.get(str(role), "")
            if current and key_is_valid(conn, current, role):
                keys[str(role)] = current
                continue
            new = generate_key()
            conn.execute(
                "INSERT INTO api_keys (id, tenant_id, role, name, secret_sha256) VALUES (%s, %s, %s, %s, %s)",
                (new.id, tenant_id, str(role), f"bootstrap {role}", new.secret_sha256),
            )
            keys[str(role)] = new.secret
    return keys


def bootstrap_main(argv: list[str] | None = None) -> None:
    """`sluice-bootstrap`: create the first tenant and keys (docker-compose's one-shot service).

    Writes the keys as a credentials file (JSON, mode 0600) and, with --env-dir, one file per
    role (`admin_key`, `client_key`, `worker_key`) for services to read. Idempotent: keys
    already in the file that are still valid are kept.
    """
    import argparse
    import json
    from pathlib import Path

    from .settings import IngestSettings

    parser = argparse.ArgumentParser(prog="sluice-bootstrap", description=(bootstrap_main.__doc__ or "").split("\n\n")[0])
    parser.add_argument("--credentials", required=True, help="credentials file to write (JSON, mode 0600)")
    parser.add_argument("--tenant", default=DEFAULT_TENANT)
    parser.add_argument("--key-dir", help="also write admin_key, client_key and worker_key files here")
    args = parser.parse_args(argv)
    path = Path(args.credentials)
    try:
        existing = json.loads(path.read_text())
    except (OSError, ValueError):
        existing = {}
    keys = bootstrap_keys(IngestSettings().database_url, existing.get("keys", {}), args.tenant)
    write_private(path, json.dumps({"tenant": args.tenant, "keys": keys}, indent=2) + "\n")
    if args.key_dir:
        os.makedirs(args.key_dir, exist_ok=True)
        for role, key in keys.items():
            write_private(Path(args.key_dir) / f"{role}_key", key)
    print(f"sluice-bootstrap: tenant {args.tenant!r}, keys for {', '.join(sorted(keys))} in {path}")


def write_private(path: str | os.PathLike[str], text: str, mode: int = 0o600) -> None:
    """Write a secret file readable by its owner only (created with that mode, never wider)."""

    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.fchmod(fd, mode)
        os.write(fd, text.encode())
    finally:
        os.close(fd)


__all__ = ["DEFAULT_TENANT", "bootstrap_keys", "bootstrap_main", "key_is_valid", "write_private"]
