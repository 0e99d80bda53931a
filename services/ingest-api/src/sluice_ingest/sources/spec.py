"""What a source may name, checked at creation and again by the runner before it reads
(docs/sources.md, "The rules").

- A LOCAL_FOLDER (and a GIT repository given as a path) must resolve, symbolic links followed,
  to a directory under one of the operator's roots (SLUICE_SOURCE_LOCAL_ROOTS; none: refused).
- S3 endpoints, HTTP URLs and git URLs are http(s), carry no credentials, and every address
  their host resolves to must be public unless SLUICE_SOURCE_ALLOW_PRIVATE_NETWORKS=true; the
  runner checks each request's host again (a name may resolve elsewhere later).
- Credentials are the names of environment variables of the server, never values.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from sluice_common.errors import InvalidArgument
from sluice_common.reasons import Reason

from ..webhooks.guard import refusal
from .domain import SourceKind

MAX_URL = 2000
MAX_GLOB = 500
MAX_HTTP_PAGES = 10_000
ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]{0,127}$")
BUCKET = re.compile(r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$")
GIT_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/\-]{0,199}$")
ALLOW_PRIVATE = "SLUICE_SOURCE_ALLOW_PRIVATE_NETWORKS"


def invalid(message: str) -> InvalidArgument:
    return InvalidArgument(message, reason=Reason.INVALID_SOURCE)


def not_allowed(message: str) -> InvalidArgument:
    return InvalidArgument(message, reason=Reason.SOURCE_NOT_ALLOWED)


def local_roots(setting: str) -> list[Path]:
    return [Path(p).resolve() for p in setting.split(":") if p.strip()]


def check_local_path(value: str, roots_setting: str, what: str = "local_folder.path") -> Path:
    """The folder, resolved, when it is an existing directory under an operator's root."""
    if not value:
        raise invalid(f"{what} is required")
    if "\x00" in value or len(value) > 4096:
        raise invalid(f"{what} is not a valid path")
    path = Path(value)
    if not path.is_absolute():
        raise invalid(f"{what} must be an absolute path on the server")
    roots = local_roots(roots_setting)
    if not roots:
        raise not_allowed("local folders are disabled on this server (the operator sets SLUICE_SOURCE_LOCAL_ROOTS)")
    resolved = path.resolve()
    if not any(resolved == root or resolved.is_relative_to(root) for root in roots):
        raise not_allowed(f"{what} is not under a folder this server allows sources to read")
    if not resolved.is_dir():
        raise invalid(f"{what} is not an existing folder")
    return resolved


def check_url(value: str, what: str) -> str:
    """An http(s) URL without credentials or fragment (its addresses are checked separately)."""
    if not value:
        raise invalid(f"{what} is required")
    if len(value) > MAX_URL or any(c.isspace() or ord(c) < 32 for c in value):
        raise invalid(f"{what} is longer than {MAX_URL} characters or contains whitespace")
    try:
        parts = urlsplit(value)
        _ = parts.port
    except ValueError as exc:
        raise invalid(f"{what} is not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise invalid(f"{what} must be an http or https URL")
    if parts.username is not None or parts.password is not None:
        raise invalid(f"{what} must not carry credentials (name them with the source's *_env fields)")
    if not parts.hostname:
        raise invalid(f"{what} has no host")
    return value


def public_addresses(host: str, port: int, what: str) -> list[str]:
    """The addresses of `host`, resolved once, every one public (blocking: resolves). A caller
    that connects to these very addresses (http.py) cannot be sent elsewhere by a name that
    resolves again differently (DNS rebinding)."""
    try:
        addresses = [ipaddress.ip_address(host)]
    except ValueError:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError:
            raise invalid(f"{what} host {host!r} does not resolve") from None
        addresses = [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]
    for address in addresses:
        why = refusal(address)
        if why is not None:
            raise not_allowed(
                f"{what} host {host} is a {why}; sources may only reach public addresses"
                f" unless {ALLOW_PRIVATE}=true is set on the server"
            )
    return list(dict.fromkeys(str(address) for address in addresses))


def check_host(host: str, port: int, allow_private: bool, what: str) -> None:
    """Every address of `host` is public, or private networks are allowed (blocking: resolves)."""
    if not allow_private:
        public_addresses(host, port, what)


def check_url_host(url: str, allow_private: bool, what: str) -> None:
    parts = urlsplit(url)
    check_host(parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80), allow_private, what)


def check_env_name(value: str, what: str) -> str:
    if value and not ENV_NAME.match(value):
        raise invalid(f"{what} must be the name of an environment variable (A-Z, 0-9, _), not a value")
    return value


def check_relative(value: str, what: str) -> str:
    """A relative path inside the source (a glob, a git subpath): no '..', not absolute."""
    value = value.strip().strip("/") if what.endswith("subpath") else value.strip()
    if len(value) > MAX_GLOB or "\x00" in value:
        raise invalid(f"{what} is longer than {MAX_GLOB} characters or contains NUL")
    if value.startswith("/") or ".." in Path(value).parts:
        raise invalid(f"{what} must be relative and must not contain '..'")
    return value


def normalise(kind: SourceKind, spec: dict[str, Any], *, roots: str, allow_private: bool) -> dict[str, Any]:
    """The spec as stored (JSON), every field checked; INVALID_ARGUMENT says which and why.
    Resolves hosts (blocking: call it in a thread)."""
    if kind is SourceKind.LOCAL_FOLDER:
        path = check_local_path(str(spec.get("path", "")), roots)
        return {"path": str(path), "glob": check_relative(str(spec.get("glob", "")), "local_folder.glob")}
    if kind is SourceKind.S3:
        endpoint = check_url(str(spec.get("endpoint", "")).rstrip("/"), "s3.endpoint")
        bucket = str(spec.get("bucket", ""))
        if not BUCKET.match(bucket):
            raise invalid("s3.bucket must be a bucket name: 3-63 characters, lower-case letters, digits, '.' and '-'")
        prefix = str(spec.get("prefix", ""))
        if len(prefix) > 1024 or "\x00" in prefix:
            raise invalid("s3.prefix is longer than 1,024 characters or contains NUL")
        region = str(spec.get("region", "")) or "us-east-1"
        if not re.match(r"^[a-z0-9-]{1,40}$", region):
            raise invalid("s3.region must be a region name like 'eu-west-1'")
        key_env = check_env_name(str(spec.get("access_key_id_env", "")), "s3.access_key_id_env")
        secret_env = check_env_name(str(spec.get("secret_access_key_env", "")), "s3.secret_access_key_env")
        if bool(key_env) != bool(secret_env):
            raise invalid("s3.access_key_id_env and s3.secret_access_key_env are given together or not at all")
        check_url_host(endpoint, allow_private, "s3.endpoint")
        return {
            "endpoint": endpoint,
            "bucket": bucket,
            "prefix": prefix,
            "region": region,
            "access_key_id_env": key_env,
            "secret_access_key_env": secret_env,
        }
    if kind is SourceKind.HTTP:
        sitemap, start = str(spec.get("sitemap_url", "")), str(spec.get("start_url", ""))
        if bool(sitemap) == bool(start):
            raise invalid("an HTTP source has exactly one of http.sitemap_url and http.start_url")
        url = check_url(sitemap or start, "http.sitemap_url" if sitemap else "http.start_url")
        max_pages = int(spec.get("max_pages", 0))
        if max_pages < 0 or max_pages > MAX_HTTP_PAGES:
            raise invalid(f"http.max_pages must be between 0 (the server's default) and {MAX_HTTP_PAGES}")
        check_url_host(url, allow_private, "http.sitemap_url" if sitemap else "http.start_url")
        return {"sitemap_url": sitemap, "start_url": start, "max_pages": max_pages}
    if kind is SourceKind.GIT:
        repository = str(spec.get("repository", ""))
        if repository.startswith("/"):
            repository = str(check_local_path(repository, roots, "git.repository"))
        else:
            check_url(repository, "git.repository")
            check_url_host(repository, allow_private, "git.repository")
        ref = str(spec.get("ref", ""))
        if ref and (not GIT_REF.match(ref) or ".." in ref):
            raise invalid("git.ref must be a branch or tag name")
        return {"repository": repository, "ref": ref, "subpath": check_relative(str(spec.get("subpath", "")), "git.subpath")}
    raise invalid("source kind is required: set one of local_folder, s3, http or git")


def credentials_of(spec: dict[str, Any]) -> tuple[str, str] | None:
    """The S3 key pair the spec names, read from the runner's environment (None: anonymous)."""
    key_env, secret_env = spec.get("access_key_id_env", ""), spec.get("secret_access_key_env", "")
    if not key_env:
        return None
    key, secret = os.environ.get(key_env, ""), os.environ.get(secret_env, "")
    if not key or not secret:
        raise invalid(f"the environment variables {key_env} and {secret_env} are not set on the sources runner")
    return key, secret


__all__ = ["check_host", "check_local_path", "check_url_host", "credentials_of", "local_roots", "normalise"]
