"""A one-off sync of a local folder into a collection: the plan (what to upload, what is
unchanged, what to delete) and the report (`Documents.sync_folder`, docs/clients.md).

Each file is named in its source by its path relative to the folder (`uploads.source_uri_of`,
as `sluice upload --source-uri-from-path` names it), and compared with the live versions of that
source_uri in one listing of the collection: the same SHA-256 as its newest live version is
unchanged and not sent at all; other content is uploaded and becomes a new version, swapped in
at its READY commit (docs/architecture.md#document-versions). Sources of the collection with no
file any more are deleted only when asked, and never more than a set share of the collection's
sources unless allowed. Documents without a source_uri are never compared nor deleted.

This is the client-side sync; a server-side Source resource with leased sync jobs is a later
piece of issue 20.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from . import uploads
from .errors import MassDeleteRefused, SluiceError
from .types import Document

DEFAULT_MAX_DELETE_SHARE = 0.2
# So many deletions are never a mass deletion, whatever the share (unless they are every source):
# in a small collection one removed file is already a large share.
MASS_DELETE_FLOOR = 3


@dataclass(frozen=True)
class SyncUpload:
    """A file to send: new (its source_uri has no live version) or changed."""

    source_uri: str
    path: Path
    new: bool


@dataclass
class SyncFailure:
    """A file or source the sync could not bring up to date, and why."""

    source_uri: str
    error: str
    path: Path | None = None
    document: Document | None = None


@dataclass
class SyncPlan:
    """What a sync will do, decided from the folder and one listing of the collection."""

    uploads: list[SyncUpload] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    failed: list[SyncFailure] = field(default_factory=list)
    # Sources of the collection with no file any more: deleted with `delete`, else kept.
    gone: list[str] = field(default_factory=list)
    sources: int = 0  # distinct source_uris in the collection


@dataclass
class SyncReport:
    """What a sync did. `new` and `updated` hold the uploaded documents (READY once waited for;
    one that FAILED or was still processing at the timeout is in `failed` instead); `deleted` and
    `unchanged` the source_uris; `kept` the sources with no file that were not deleted (no `delete`)."""

    collection: str
    folder: Path
    new: list[Document] = field(default_factory=list)
    updated: list[Document] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    failed: list[SyncFailure] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    waited: bool = True

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def counts(self) -> dict[str, int]:
        return {
            "new": len(self.new),
            "updated": len(self.updated),
            "unchanged": len(self.unchanged),
            "deleted": len(self.deleted),
            "failed": len(self.failed),
        }


def folder_files(folder: str | os.PathLike[str], *, include_hidden: bool = False) -> dict[str, Path]:
    """The folder's files by source_uri. NotADirectoryError or FileNotFoundError when it is not a folder."""
    root = Path(folder)
    if not root.exists():
        raise FileNotFoundError(f"no such folder: {root}")
    if not root.is_dir():
        raise NotADirectoryError(f"not a folder: {root}")
    return {uploads.source_uri_of(path, [root]): path for path in uploads.find_files([root], include_hidden=include_hidden)}


def hash_file(source_uri: str, path: Path) -> tuple[str, str, str]:
    """(source_uri, sha256, "") or (source_uri, "", why it cannot be read or sent)."""
    try:
        size, sha256 = uploads.file_digest(path)
    except SluiceError as error:
        return source_uri, "", error.message
    if size == 0:
        return source_uri, "", f"{path} is empty: nothing to index"
    return source_uri, sha256, ""


def plan(files: dict[str, Path], hashes: dict[str, tuple[str, str]], listed: Iterable[Document]) -> SyncPlan:
    """Compare the folder (`hashes`: source_uri to (sha256, error)) with the collection's live
    documents. Per source, the newest live version is the one it will serve (the pending or
    failed next one, else the current one): the same bytes are unchanged (or a failure, when
    that version FAILED: `sluice retry` or new content fixes it); other bytes are uploaded, the
    current version's bytes too when a different next version is live, so that the server
    supersedes it (the source went back)."""
    versions: dict[str, list[Document]] = {}
    for document in listed:
        if document.source_uri:  # plain uploads are not the folder's
            versions.setdefault(document.source_uri, []).append(document)
    result = SyncPlan(sources=len(versions))
    for source_uri, path in files.items():
        sha256, error = hashes[source_uri]
        if error:
            result.failed.append(SyncFailure(source_uri, error, path))
            continue
        live = versions.get(source_uri, [])
        newest = max(live, key=lambda d: d.version, default=None)
        if newest is None:
            result.uploads.append(SyncUpload(source_uri, path, new=True))
        elif newest.content_sha256 != sha256:
            result.uploads.append(SyncUpload(source_uri, path, new=False))
        elif newest.failed:
            message = newest.error_message or "processing failed"
            result.failed.append(
                SyncFailure(source_uri, f"{message} (unchanged since it failed: retry it, or change the file)", path, newest)
            )
        else:
            result.unchanged.append(source_uri)
    result.gone = sorted(set(versions) - set(files))
    return result


def check_mass_delete(collection: str, sync_plan: SyncPlan, max_delete_share: float) -> None:
    """MassDeleteRefused when deleting the gone sources would remove every source of the
    collection, or more than `max_delete_share` of them and more than MASS_DELETE_FLOOR: a folder
    that lost most of its files (an unmounted disk, the wrong path) must not empty the collection
    without being asked to, while removing a file or two from a small folder needs no flag."""
    would_delete, sources = len(sync_plan.gone), sync_plan.sources
    everything = would_delete == sources
    if would_delete and (everything or (would_delete > max_delete_share * sources and would_delete > MASS_DELETE_FLOOR)):
        raise MassDeleteRefused(
            f"refusing to delete {would_delete} of the {sources} sources of collection {collection} "
            f"({would_delete / sources:.0%}, more than the limit of {max_delete_share:.0%}): nothing was uploaded or "
            "deleted; if the folder really lost these files, allow it (allow_mass_delete, `--allow-mass-delete`)",
            would_delete=would_delete,
            sources=sources,
            max_delete_share=max_delete_share,
            source_uris=sync_plan.gone,
        )


__all__ = [
    "DEFAULT_MAX_DELETE_SHARE",
    "MASS_DELETE_FLOOR",
    "SyncFailure",
    "SyncPlan",
    "SyncReport",
    "SyncUpload",
    "check_mass_delete",
    "folder_files",
    "hash_file",
    "plan",
]
