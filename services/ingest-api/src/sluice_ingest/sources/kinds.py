"""How each kind of source is listed and read (docs/sources.md, "Kinds").

A `Reader` lists a source's items sorted by source_uri (the order a run's checkpoint follows)
and reads one item's bytes. Listing reports a fingerprint where the source has one for free
(size and mtime of a file, an S3 ETag, a git blob id), so an unchanged item is not even read.
Every network request goes through `spec.check_url_host` first (no SSRF), and every local path
is checked to stay under the source's folder (no symbolic link out of it).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Protocol

from sluice_common.errors import InvalidArgument

from .domain import ListedItem, SourceKind
from .spec import check_local_path, check_url_host, invalid


class SourceUnavailable(Exception):
    """The source could not be listed (unreachable, refused, missing): the run ends FAILED with
    this message, which is fit for the caller."""


class ItemVanished(Exception):
    """An item listed a moment ago is gone (the source changed during the sync)."""


class Reader(Protocol):
    async def list_items(self) -> list[ListedItem]: ...

    async def read(self, item: ListedItem) -> bytes: ...

    async def close(self) -> None: ...


def glob_pattern(glob: str) -> re.Pattern[str] | None:
    """`**/*.md` style: `**/` any folders (or none), `*` within one name, `?` one character."""
    if not glob:
        return None
    out, i = "", 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif glob.startswith("**", i):
            out, i = out + ".*", i + 2
        elif glob[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif glob[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(glob[i]), i + 1
    return re.compile(out + r"\Z")


class LocalFolderReader:
    """Files of a folder, recursively; hidden files and folders are skipped, symbolic links are
    followed only when they stay inside the folder. source_uri: the path relative to the folder
    (as `sluice sync` names files, so a source takes over what a `sluice sync` of it uploaded)."""

    def __init__(self, spec: dict[str, Any], roots: str, max_bytes: int) -> None:
        self.spec = spec
        self.roots = roots
        self.max_bytes = max_bytes

    def _list(self) -> list[ListedItem]:
        try:
            folder = check_local_path(self.spec["path"], self.roots)
        except InvalidArgument as err:
            raise SourceUnavailable(err.message) from None
        pattern = glob_pattern(self.spec.get("glob", ""))
        items = []
        for base, dirs, files in os.walk(folder):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            for name in files:
                if name.startswith("."):
                    continue
                path = Path(base) / name
                relative = path.relative_to(folder).as_posix()
                if pattern is not None and not pattern.match(relative):
                    continue
                try:
                    real = path.resolve()
                    if not real.is_relative_to(folder):
                        continue
                    stat = real.stat()
                except OSError:
                    continue  # vanished while listing, or a dangling link: not an item
                if not real.is_file():
                    continue
                items.append(ListedItem(relative, name, f"{stat.st_size}:{stat.st_mtime_ns}", str(real)))
        items.sort(key=lambda i: i.source_uri)
        return items

    async def list_items(self) -> list[ListedItem]:
        return await asyncio.to_thread(self._list)

    def _read(self, item: ListedItem) -> bytes:
        try:
            with open(item.locator, "rb") as f:
                data = f.read(self.max_bytes + 1)
        except FileNotFoundError:
            raise ItemVanished(item.source_uri) from None
        return data

    async def read(self, item: ListedItem) -> bytes:
        return await asyncio.to_thread(self._read, item)

    async def close(self) -> None:
        return None


class GitReader:
    """The files of a repository at a ref (a shallow clone into a temporary folder, removed at
    close), optionally under a subpath. source_uri: `git:{repository}#{path in the repository}`;
    fingerprint: the blob id, so an unchanged file is never read twice."""

    def __init__(self, spec: dict[str, Any], roots: str, allow_private: bool, timeout: float) -> None:
        self.spec = spec
        self.roots = roots
        self.allow_private = allow_private
        self.timeout = timeout
        self.workdir: str | None = None

    def _git(self, *args: str, cwd: str | None = None) -> str:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_TERMINAL_PROMPT": "0",
            "HOME": cwd or "/",
            "GIT_CONFIG_NOSYSTEM": "1",
        }
        # Only the transport the source names: a local path may use file://, a URL only http(s),
        # and no redirect may lead the clone to a host that was not checked (spec.py).
        local = self.spec["repository"].startswith("/")
        guards = [
            "-c",
            "protocol.allow=never",
            "-c",
            "http.followRedirects=false",
            *(
                ["-c", "protocol.file.allow=always"]
                if local
                else ["-c", "protocol.http.allow=always", "-c", "protocol.https.allow=always"]
            ),
        ]
        try:
            done = subprocess.run(
                ["git", *guards, *args], cwd=cwd, env=env, capture_output=True, timeout=self.timeout, check=False
            )
        except subprocess.TimeoutExpired:
            raise SourceUnavailable(f"git {args[0]} took longer than {self.timeout:.0f} s") from None
        if done.returncode != 0:
            first = done.stderr.decode(errors="replace").strip().splitlines()[:1]
            raise SourceUnavailable(f"git {args[0]} failed: {(first[0] if first else 'no message')[:200]}")
        return done.stdout.decode(errors="surrogateescape")

    def _clone(self) -> None:
        repository = self.spec["repository"]
        try:
            if repository.startswith("/"):
                check_local_path(repository, self.roots, "git.repository")
            else:
                check_url_host(repository, self.allow_private, "git.repository")
        except InvalidArgument as err:
            raise SourceUnavailable(err.message) from None
        self.workdir = tempfile.mkdtemp(prefix="sluice-git-")
        args = ["clone", "--quiet", "--no-checkout", "--depth", "1", "--single-branch"]
        if self.spec.get("ref"):
            args += ["--branch", self.spec["ref"]]
        # file:// makes a local path honour --depth; --no-checkout: blobs are read with cat-file.
        source = "file://" + repository if repository.startswith("/") else repository
        self._git(*args, "--", source, self.workdir + "/repo")

    def _list(self) -> list[ListedItem]:
        if self.workdir is None:
            self._clone()
        assert self.workdir is not None
        repo = self.workdir + "/repo"
        subpath = self.spec.get("subpath", "")
        out = self._git("ls-tree", "-r", "-z", "--full-tree", "HEAD", *(["--", subpath] if subpath else []), cwd=repo)
        items = []
        for entry in out.split("\0"):
            if not entry:
                continue
            meta, path = entry.split("\t", 1)
            mode, kind, blob = meta.split()
            if kind != "blob" or mode == "120000":  # files only; symbolic links are not content
                continue
            name = path.rsplit("/", 1)[-1]
            if any(part.startswith(".") for part in path.split("/")):
                continue
            items.append(ListedItem(f"git:{self.spec['repository']}#{path}", name, blob, blob))
        items.sort(key=lambda i: i.source_uri)
        return items

    async def list_items(self) -> list[ListedItem]:
        return await asyncio.to_thread(self._list)

    async def read(self, item: ListedItem) -> bytes:
        assert self.workdir is not None
        repo = self.workdir + "/repo"

        def cat() -> bytes:
            done = subprocess.run(
                ["git", "cat-file", "blob", item.locator], cwd=repo, capture_output=True, timeout=self.timeout, check=False
            )
            if done.returncode != 0:
                raise ItemVanished(item.source_uri)
            return done.stdout

        return await asyncio.to_thread(cat)

    async def close(self) -> None:
        if self.workdir is not None:
            await asyncio.to_thread(shutil.rmtree, self.workdir, True)
            self.workdir = None


def reader_for(kind: str, spec: dict[str, Any], settings: Any) -> Reader:
    timeout = settings.source_request_timeout_seconds
    allow_private = settings.source_allow_private_networks
    if kind == SourceKind.LOCAL_FOLDER:
        return LocalFolderReader(spec, settings.source_local_roots, settings.max_upload_bytes)
    if kind == SourceKind.GIT:
        return GitReader(spec, settings.source_local_roots, allow_private, timeout)
    if kind == SourceKind.S3:
        from .s3 import S3Reader

        return S3Reader(spec, allow_private, timeout, settings.max_upload_bytes)
    if kind == SourceKind.HTTP:
        from .http import HttpReader

        return HttpReader(spec, allow_private, timeout, settings.max_upload_bytes, settings.source_http_default_max_pages)
    raise invalid(f"unknown source kind {kind!r}")


__all__ = ["GitReader", "ItemVanished", "LocalFolderReader", "Reader", "SourceUnavailable", "glob_pattern", "reader_for"]
