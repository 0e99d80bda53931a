"""A local folder as a source (docs/sources.md, "Kinds"): its files, recursively, with the
source's glob; every path is checked to stay under the source's folder (no symbolic link out).
"""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path
from typing import Any

from sluice_common.errors import InvalidArgument

from .domain import ListedItem
from .reader import ItemVanished, SourceUnavailable
from .spec import check_local_path


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
