"""A git repository as a source (docs/sources.md, "Kinds"): the files at a ref, read from a
shallow clone; the repository's host goes through `spec.check_url_host` first (no SSRF).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
from typing import Any

from sluice_common.errors import InvalidArgument

from .domain import ListedItem
from .reader import ItemVanished, SourceUnavailable
from .spec import check_local_path, check_url_host


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
