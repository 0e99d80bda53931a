"""The API key format: `slk_<id>_<secret>`, made here and read here.

A 12-character public id (shown in listings, used for lookup) and a 256-bit random secret,
shown once at creation. The database keeps only the SHA-256 of the secret.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass

KEY_PREFIX = "slk_"
_KEY = re.compile(r"^slk_([a-z0-9]{12})_([A-Za-z0-9_-]{43})$")
_ID_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"


@dataclass(frozen=True)
class NewKey:
    id: str
    secret: str  # the whole key, slk_<id>_<secret>: shown once, never stored
    secret_sha256: bytes


def generate_key() -> NewKey:
    key_id = "".join(secrets.choice(_ID_ALPHABET) for _ in range(12))
    secret = secrets.token_urlsafe(32)  # 32 random bytes → 43 characters
    return NewKey(key_id, f"{KEY_PREFIX}{key_id}_{secret}", hashlib.sha256(secret.encode()).digest())


def parse_key(value: str) -> tuple[str, str] | None:
    """(id, secret) of a well-formed key, else None."""
    match = _KEY.match(value.strip())
    return (match.group(1), match.group(2)) if match else None


def key_id_of(value: str) -> str:
    """The id from a whole key, its prefix `slk_<id>_` or the bare id."""
    value = value.strip()
    if value.startswith(KEY_PREFIX):
        value = value[len(KEY_PREFIX) :]
    return value.split("_", 1)[0]


def prefix_of(key_id: str) -> str:
    return f"{KEY_PREFIX}{key_id}_"


__all__ = ["KEY_PREFIX", "NewKey", "generate_key", "key_id_of", "parse_key", "prefix_of"]
