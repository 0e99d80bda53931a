"""`sluice tenants …` and `sluice keys …` against the real ingest-api and search."""

from __future__ import annotations

import json
import time

from sluice_common.auth import parse_key


def test_tenants_and_keys_from_the_cli(sluice, stack):
    created = sluice("tenants", "create", "acme", "--max-documents", "10", "--max-collections", "2", *stack.args)
    assert created.code == 0 and "Created tenant acme" in created.out
    again = sluice("tenants", "create", "acme", *stack.args)
    assert again.code == 1 and "TENANT_EXISTS" in again.err

    made = json.loads(
        sluice("--json", "keys", "create", "--tenant", "acme", "--role", "client", "--name", "acme app", *stack.args).out
    )
    key = made["secret"]
    key_id, secret = parse_key(key)
    assert made["api_key"]["prefix"] == f"slk_{key_id}_"

    # The new key works for its tenant, and sees only that tenant.
    as_acme = [*stack.args, "--api-key", key]
    assert sluice("collections", "create", "handbook", "--embedder", "hashing", *as_acme).code == 0
    assert [c["name"] for c in json.loads(sluice("--json", "collections", "list", *as_acme).out)["collections"]] == ["handbook"]
    assert "handbook" not in sluice("collections", "list", *stack.args).out  # the default tenant's view
    # An admin acting for acme sees acme's.
    assert "handbook" in sluice("collections", "list", "--as-tenant", "acme", "--api-key", _admin_key(), *stack.args).out

    listed = sluice("keys", "ls", "--tenant", "acme", *stack.args)
    assert listed.code == 0 and f"slk_{key_id}_" in listed.out and secret not in listed.out and "active" in listed.out
    usage = json.loads(sluice("--json", "tenants", "ls", *stack.args).out)["tenants"]
    acme = next(t for t in usage if t["name"] == "acme")
    assert acme["usage"]["collections"] == 1 and acme["quota"]["max_documents"] == "10"

    revoked = sluice("keys", "revoke", f"slk_{key_id}_", *stack.args)
    assert revoked.code == 0 and "Revoked" in revoked.out
    time.sleep(1.0)
    refused = sluice("collections", "list", *as_acme)
    assert refused.code == 1 and "API_KEY_INVALID" in refused.err and secret not in refused.err
    assert "revoked" in sluice("keys", "ls", "--tenant", "acme", *stack.args).out


def test_a_client_key_cannot_administer(sluice, stack):
    import auth_keys

    refused = sluice("tenants", "create", "mallory", "--api-key", auth_keys.KEYS["client"], *stack.args)
    assert refused.code == 1 and "ROLE_NOT_ALLOWED" in refused.err


def _admin_key() -> str:
    import auth_keys

    return auth_keys.KEYS["admin"]
