"""Older commits of Sluice, running: the upgrade test and bench (docs/operations.md, "Upgrading")
and the cross-version contract test build databases through the real pipeline of an older
commit, then upgrade them with the current code.

    commits = migration_commits(5)            # newest first, HEAD excluded
    with OldRelease(commits[0]) as old:        # a git worktree + a venv of its own
        deployment = Deployment(workdir)       # one embedded PostgreSQL, database `sluice`
        deployment.migrate(old)                # the old commit's sluice-migrate
        ingest = deployment.start_ingest(old)  # ... its ingest-api, worker and search

The old release's venv: a fresh venv (of the interpreter the current .venv was made from) whose
third-party packages come from the current .venv through a `.pth` line naming its
site-packages, and whose own packages (protos, common, ingest-api, worker, search, the spaCy
alias) are installed `--no-deps -e` from the old worktree. A `.pth` line only adds a directory:
the current .venv's own editable installs (its `__editable__*.pth` files) are not processed, so
`import sluice_ingest` finds the old worktree's code, which `OldRelease.prepare` checks.
Worktrees and venvs live under $TMPDIR/sluice-older-commits and are removed on exit."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import auth_keys
import grpc
import psycopg
from helpers import free_port, wait_serving
from sluice.v1 import (
    admin_service_pb2,
    admin_service_pb2_grpc,
    collection_pb2,
    document_pb2,
    document_service_pb2_grpc,
    search_service_pb2,
    search_service_pb2_grpc,
    source_service_pb2,
    source_service_pb2_grpc,
    webhook_service_pb2,
    webhook_service_pb2_grpc,
)
from sluice.v1 import document_service_pb2 as ds
from sluice_common.embedded_pg import EmbeddedPostgres, database_uri, ensure_database

ROOT = Path(__file__).resolve().parents[1]
VERSIONS = "services/ingest-api/src/sluice_ingest/migrations/versions"
CACHE = Path(tempfile.gettempdir()) / "sluice-older-commits"
FIXTURES = ROOT / "tests" / "fixtures" / "documents"
# The old commit's own packages, installed into its venv (those that exist at that commit).
OWN_PACKAGES = (
    "libs/protos",
    "libs/common",
    "libs/spacy-model-alias",
    "services/ingest-api",
    "services/worker",
    "services/search",
)
D = document_pb2


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def migration_commits(count: int) -> list[str]:
    """The last `count` commits that changed the migrations, newest first, HEAD itself excluded
    (it is the release being upgraded to). A clone of main has the whole history (.ci/run)."""
    head = git("rev-parse", "HEAD").strip()
    commits = [c for c in git("log", "--format=%H", "HEAD", "--", VERSIONS).split() if c != head]
    return commits[:count]


def schema_head(commit: str) -> str:
    """The Alembic head revision of a commit's migrations (the one no revision builds on)."""
    revisions: dict[str, str | None] = {}
    for name in git("ls-tree", "--name-only", f"{commit}:{VERSIONS}").split():
        if not name.endswith(".py"):
            continue
        text = git("show", f"{commit}:{VERSIONS}/{name}")
        revision = re.search(r'^revision\s*=\s*"([^"]+)"', text, re.M)
        down = re.search(r'^down_revision\s*=\s*"([^"]+)"', text, re.M)
        if revision:
            revisions[revision.group(1)] = down.group(1) if down else None
    heads = set(revisions) - {d for d in revisions.values() if d}
    assert len(heads) == 1, f"{commit[:10]}: not one schema head: {heads}"
    return heads.pop()


def previous_schema_commit() -> str:
    """The most recent migration-changing commit whose schema head is not HEAD's: upgrading from
    it runs at least one migration (a commit at HEAD's own head would run none)."""
    current = schema_head("HEAD")
    for commit in migration_commits(50):
        if schema_head(commit) != current:
            return commit
    raise AssertionError("no older schema in the history")


def describe(commit: str) -> str:
    return git("log", "-1", "--format=%h", commit).strip()


@dataclass
class Release:
    """Where a release's programs are: the current .venv, or an old commit's venv."""

    label: str
    bin: Path

    def program(self, name: str) -> list[str]:
        return [str(self.bin / name)]


CURRENT = Release("HEAD", Path(sys.executable).parent)


class OldRelease(Release):
    """A worktree of `commit` with a venv of its own (see the module docstring)."""

    def __init__(self, commit: str) -> None:
        self.commit = git("rev-parse", commit).strip()
        self.home = CACHE / self.commit[:12]
        self.src = self.home / "src"
        self.venv = self.home / "venv"
        super().__init__(f"{self.commit[:7]} (schema {schema_head(self.commit)})", self.venv / "bin")

    @property
    def python(self) -> str:
        return str(self.venv / "bin" / "python")

    def program(self, name: str) -> list[str]:
        """The old commit's console script `name`, run from its own pyproject's entry point."""
        for package in OWN_PACKAGES:
            pyproject = self.src / package / "pyproject.toml"
            if pyproject.exists():
                target = tomllib.loads(pyproject.read_text()).get("project", {}).get("scripts", {}).get(name)
                if target:
                    module, function = target.split(":")
                    run = f"import sys; sys.argv[0] = {name!r}; from {module} import {function}; sys.exit({function}())"
                    return [self.python, "-c", run]
        raise AssertionError(f"{self.label} has no program {name}")

    def __enter__(self) -> OldRelease:
        self.prepare()
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

    def prepare(self) -> None:
        CACHE.mkdir(parents=True, exist_ok=True)
        with open(CACHE / f"{self.commit[:12]}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another session may be building the same commit
            if (self.home / "ready").exists() and self.src.exists():
                return
            self._remove_unlocked()
            self.home.mkdir(parents=True)
            git("worktree", "add", "--detach", str(self.src), self.commit)
            base_python = getattr(sys, "_base_executable", sys.executable)
            subprocess.run([base_python, "-m", "venv", "--without-pip", str(self.venv)], check=True)
            (site,) = self.venv.glob("lib/python3*/site-packages")
            current_site = next(p for p in sys.path if p.endswith("site-packages") and Path(p).is_relative_to(sys.prefix))
            own = [self.src / p for p in OWN_PACKAGES if (self.src / p / "pyproject.toml").exists()]
            paths = [str(p / "src") if (p / "src").is_dir() else str(p) for p in own]
            (site / "_sluice_release.pth").write_text("\n".join([*paths, current_site]) + "\n")
            found = subprocess.run(
                [self.python, "-c", "import sluice_ingest, sluice_worker; print(sluice_ingest.__file__)"],
                check=True,
                capture_output=True,
                text=True,
            ).stdout.strip()
            assert Path(found).is_relative_to(self.src), f"the old venv imports {found}, not the old worktree's code"
            (self.home / "ready").touch()

    def remove(self) -> None:
        with open(CACHE / f"{self.commit[:12]}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            self._remove_unlocked()

    def _remove_unlocked(self) -> None:
        if self.src.exists():
            subprocess.run(["git", "worktree", "remove", "--force", str(self.src)], cwd=ROOT, capture_output=True)
        shutil.rmtree(self.home, ignore_errors=True)
        git("worktree", "prune")


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    address: str = ""

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        return self.popen.returncode

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""


@dataclass
class Deployment:
    """An embedded PostgreSQL with database `sluice` (the test keys and search's login in it once
    migrated), and the processes of any release started on it."""

    workdir: Path
    processes: list[Process] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.workdir.chmod(0o755)  # the embedded server runs as its own user when we are root
        (self.workdir / "logs").mkdir(exist_ok=True)
        self.pg = EmbeddedPostgres(self.workdir / "pg", cleanup="stop")
        self.admin = self.pg.start()
        ensure_database(self.admin, "sluice")
        self.url = database_uri(self.admin, "sluice")

    def env(self, **extra: str) -> dict[str, str]:
        return {
            **os.environ,
            "SLUICE_DATABASE_URL": self.url,
            "SLUICE_LOG_JSON": "true",
            "SLUICE_LOG_LEVEL": "INFO",
            "PYTHONUNBUFFERED": "1",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "GRPC_ENABLE_FORK_SUPPORT": "false",
            **extra,
        }

    def run(self, release: Release, program: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*release.program(program), *args], env=self.env(), capture_output=True, text=True)

    def migrate(self, release: Release) -> subprocess.CompletedProcess[str]:
        """The release's sluice-migrate; on the first one, the test keys and search's login."""
        result = self.run(release, "sluice-migrate")
        assert result.returncode == 0, f"{release.label}: sluice-migrate failed:\n{result.stdout}{result.stderr}"
        auth_keys.install(self.url)
        return result

    def start(self, release: Release, program: str, name: str, address: str = "", **env: str) -> Process:
        log = self.workdir / "logs" / f"{name}.log"
        with open(log, "ab") as out:
            popen = subprocess.Popen(
                release.program(program), env=self.env(**env), stdout=out, stderr=subprocess.STDOUT, cwd=self.workdir
            )
        process = Process(name, popen, log, address)
        self.processes.append(process)
        if address:
            try:
                wait_serving(address, timeout=120)
            except BaseException:
                process.stop(signal.SIGKILL)
                raise AssertionError(f"{name} did not serve:\n{process.tail()}") from None
        return process

    def start_ingest(self, release: Release, address: str | None = None) -> Process:
        address = address or f"127.0.0.1:{free_port()}"
        # A retired generation is dropped half a second after its switch, not 30 s (the default):
        # the "before" snapshot is taken once it is gone (retired_generations_dropped), so the
        # drop cannot fall between the two snapshots and read as rows lost by the upgrade.
        return self.start(
            release,
            "sluice-ingest-api",
            f"ingest-{release.label.split()[0]}",
            address,
            SLUICE_BIND=address,
            SLUICE_RETIRED_GENERATION_GRACE_SECONDS="0.5",
        )

    def start_worker(self, release: Release, ingest_address: str, worker_id: str) -> Process:
        return self.start(
            release,
            "sluice-worker",
            worker_id,
            SLUICE_INGEST_ADDRESS=ingest_address,
            SLUICE_API_KEY=auth_keys.KEYS["worker"],
            SLUICE_WORKER_ID=worker_id,
            SLUICE_CLAIM_WAIT_SECONDS="1",
            SLUICE_SHUTDOWN_GRACE_SECONDS="10",
        )

    def start_search(self, release: Release) -> Process:
        address = f"127.0.0.1:{free_port()}"
        return self.start(
            release,
            "sluice-search",
            f"search-{release.label.split()[0]}",
            address,
            SLUICE_SEARCH_BIND=address,
            SLUICE_SEARCH_DATABASE_URL=auth_keys.search_url(self.url),
            SLUICE_SEARCH_COLLECTION_CACHE_SECONDS="0.5",
        )

    def close(self) -> None:
        for process in reversed(self.processes):
            process.stop(signal.SIGKILL if process.popen.poll() is None and process.name.startswith("ingest") else signal.SIGTERM)
        self.pg.stop()


# --- The data an older release writes -------------------------------------------------------

# Real files of every parser's kind, and a few longer texts so that search has choices.
FIXTURE_FILES = (
    "operations.md",
    "retrieval.html",
    "chinese.md",
    "report.pdf",
    "handbook.docx",
    "architecture.pptx",
    "status.eml",
    "minutes-latin1.txt",
    "notes-utf16.txt",
)
TOPICS = (
    "rivers, mills and the water that turns their wheels",
    "lighthouses, their keepers and the brass lamps they polish",
    "bread, ovens and the bakers who rise before dawn",
    "glaciers, moraines and the valleys they carve",
    "printing presses, type and the ink of old newspapers",
    "beekeeping, hives and the honey of summer meadows",
)
QUERIES = (
    ("how are services deployed and migrations run", search_service_pb2.SEARCH_MODE_HYBRID),
    ("retrieval augmented generation chunking tables", search_service_pb2.SEARCH_MODE_HYBRID),
    ("lighthouse keeper brass lamp", search_service_pb2.SEARCH_MODE_VECTOR),
    ("bakers ovens dawn", search_service_pb2.SEARCH_MODE_KEYWORD),
    ("glacier valley", search_service_pb2.SEARCH_MODE_HYBRID),
    ("向量数据库 检索", search_service_pb2.SEARCH_MODE_VECTOR),
    ("upload size attempts limits", search_service_pb2.SEARCH_MODE_KEYWORD),
    ("honey from the hives", search_service_pb2.SEARCH_MODE_VECTOR),
)
LOCAL = collection_pb2.EmbedderConfig(provider=collection_pb2.EMBEDDER_PROVIDER_SENTENCE_TRANSFORMERS)
HASHING = collection_pb2.EmbedderConfig(provider=collection_pb2.EMBEDDER_PROVIDER_HASHING, model="hashing-v1", dimensions=64)
PUBLIC_URL = "https://93.184.215.14/hooks/sluice"  # a public address; never called (no dispatcher runs)


def topic_text(n: int, paragraphs: int = 6) -> bytes:
    topic = TOPICS[n % len(TOPICS)]
    return "\n\n".join(
        f"Part {p} of note {n} is about {topic}. It records what was seen on day {p + n}, who was there, "
        f"and what they said about {topic.split(',')[0]} in the {['morning', 'evening', 'night'][p % 3]}."
        for p in range(paragraphs)
    ).encode()


class Api:
    """The gRPC calls the loader makes, with the test keys, to any release's ingest-api."""

    def __init__(self, address: str) -> None:
        self.channel = auth_keys.channel(address)
        self.docs = document_service_pb2_grpc.DocumentServiceStub(self.channel)
        self.admin = admin_service_pb2_grpc.AdminServiceStub(self.channel)
        self.sources = source_service_pb2_grpc.SourceServiceStub(self.channel)
        self.webhooks = webhook_service_pb2_grpc.WebhookServiceStub(self.channel)

    def close(self) -> None:
        self.channel.close()

    def create_collection(self, name: str, embedder: collection_pb2.EmbedderConfig) -> None:
        chunking = collection_pb2.ChunkingConfig(max_characters=400, new_after_n_chars=300)
        collection = collection_pb2.Collection(name=name, embedder=embedder, chunking=chunking, max_attempts=5)
        self.docs.CreateCollection(ds.CreateCollectionRequest(collection=collection), timeout=30)

    def upload(self, collection: str, filename: str, content: bytes, source_uri: str = "") -> D.Document:
        def messages() -> Iterator[ds.UploadDocumentRequest]:
            yield ds.UploadDocumentRequest(
                metadata=ds.UploadDocumentMetadata(collection=collection, filename=filename, source_uri=source_uri)
            )
            yield ds.UploadDocumentRequest(data=content)
            yield ds.UploadDocumentRequest(
                trailer=ds.UploadDocumentTrailer(size_bytes=len(content), sha256=hashlib.sha256(content).hexdigest())
            )

        return self.docs.UploadDocument(messages(), timeout=60)

    def status(self, document_id: str) -> int:
        return self.docs.GetDocument(ds.GetDocumentRequest(id=document_id), timeout=30).status

    def wait_ready(self, ids: list[str], timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        pending = set(ids)
        while pending:
            for document_id in list(pending):
                status = self.status(document_id)
                assert status != D.DOCUMENT_STATUS_FAILED, f"document {document_id} FAILED"
                if status == D.DOCUMENT_STATUS_READY:
                    pending.discard(document_id)
            assert time.monotonic() < deadline, f"{len(pending)} documents not READY after {timeout} s"
            time.sleep(0.3)

    def wait_generation(self, collection: str, number: int, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while True:
            got = self.docs.GetCollection(ds.GetCollectionRequest(name=collection), timeout=30)
            if any(g.number == number and g.state == collection_pb2.GENERATION_STATE_ACTIVE for g in got.generations):
                return
            assert time.monotonic() < deadline, f"generation {number} of {collection} never ACTIVE: {got}"
            time.sleep(0.5)


def load(api: Api, *, small: bool = False) -> list[str]:
    """What an older release writes: a collection of real files and notes with the local
    embedder, a source_uri with two versions, a second collection reindexed to generation 2, a
    source, a webhook and an API key. Returns the ids of the documents, all READY. `small`: four
    of the files and six notes (CI's budget)."""
    api.create_collection("docs", LOCAL)
    files = FIXTURE_FILES[:4] if small else FIXTURE_FILES
    ids = [api.upload("docs", name, (FIXTURES / name).read_bytes()).id for name in files]
    ids += [api.upload("docs", f"note-{n}.txt", topic_text(n)).id for n in range(6 if small else 12)]
    first = api.upload(
        "docs", "policy.md", b"# Policy\n\nThe first version of the policy says doors close at nine.", "file:///policy.md"
    )
    api.wait_ready([*ids, first.id])
    second = api.upload(
        "docs", "policy.md", b"# Policy\n\nThe second version of the policy says doors close at ten.", "file:///policy.md"
    )
    ids.append(second.id)
    api.create_collection("notes", HASHING)
    notes = [api.upload("notes", f"n{n}.txt", topic_text(n + 20, 3)).id for n in range(4)]
    api.wait_ready([*ids, *notes])
    reindexed = collection_pb2.EmbedderConfig(provider=HASHING.provider, model=HASHING.model, dimensions=32)
    api.docs.ReindexCollection(ds.ReindexCollectionRequest(name="notes", embedder=reindexed), timeout=30)
    api.wait_generation("notes", 2)
    api.sources.CreateSource(
        source_service_pb2.CreateSourceRequest(
            source=source_service_pb2.Source(
                collection="docs", display_name="site", http=source_service_pb2.HttpSource(start_url="https://93.184.215.14/")
            )
        ),
        timeout=30,
    )
    api.webhooks.CreateWebhook(
        webhook_service_pb2.CreateWebhookRequest(webhook=webhook_service_pb2.Webhook(collection="docs", url=PUBLIC_URL)),
        timeout=30,
    )
    api.admin.CreateApiKey(
        admin_service_pb2.CreateApiKeyRequest(
            tenant="default", role=admin_service_pb2.API_KEY_ROLE_READER, name="made by an older release"
        ),
        timeout=30,
    )
    return ids + notes


def top10(search_address: str) -> list[list[tuple[str, int]]]:
    with auth_keys.channel(search_address) as channel:
        stub = search_service_pb2_grpc.SearchServiceStub(channel)
        return [
            [
                (h.document_id, h.chunk_index)
                for h in stub.Search(
                    search_service_pb2.SearchRequest(collection="docs", query=q, mode=m, top_k=10), timeout=60
                ).hits
            ]
            for q, m in QUERIES
        ]


# --- What must survive ----------------------------------------------------------------------

# Every row of these is written once by the loader and must come through an upgrade unchanged
# in every column it had before (rows added later, by in-flight uploads, do not matter).
SURVIVING_TABLES = (
    "tenants",
    "api_keys",
    "collections",
    "collection_generations",
    "documents",
    "document_contents",
    "document_versions",
    "chunks",
    "keyword_chunks",
    "keyword_stats",
    "document_vectors",
    "chunk_snapshots",
    "sources",
    "webhook_subscriptions",
)


@dataclass
class TableState:
    columns: list[str]
    rows: set[str]  # md5 of each row over `columns`

    @property
    def checksum(self) -> str:
        return hashlib.md5("".join(sorted(self.rows)).encode()).hexdigest()[:12]


def retired_generations_dropped(url: str, timeout: float = 90) -> None:
    """Wait until every retired or cancelled generation has been dropped (its chunks deleted by
    ingest-api's sweep): a drop between the snapshots would look like rows the upgrade lost (a
    clean-clone CI run saw exactly that: the 8 chunks of the reindexed collection's generation 1)."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(url, autocommit=True) as conn:
        while conn.execute(
            "SELECT count(*) FROM collection_generations WHERE state IN ('RETIRED', 'CANCELLED') AND dropped_at IS NULL"
        ).fetchone()[0]:
            assert time.monotonic() < deadline, "a retired generation was never dropped"
            time.sleep(0.5)


def row_hashes(conn: psycopg.Connection, table: str, columns: list[str]) -> set[str]:
    listed = ", ".join(f'"{c}"' for c in columns)
    return {r[0] for r in conn.execute(f"SELECT md5(ROW({listed})::text) FROM {table}")}


def snapshot(url: str) -> dict[str, TableState]:
    """Each surviving table's columns and row hashes (tables the schema does not have yet are left out)."""
    with psycopg.connect(url) as conn:
        found: dict[str, TableState] = {}
        for table in SURVIVING_TABLES:
            columns = [
                r[0]
                for r in conn.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_schema = 'public' AND table_name = %s"
                    " ORDER BY ordinal_position",
                    (table,),
                )
            ]
            if columns:
                found[table] = TableState(columns, row_hashes(conn, table, columns))
        return found


def lost_rows(url: str, before: dict[str, TableState]) -> dict[str, tuple[int, int, int]]:
    """Per table: (rows before, rows after, rows of before missing or changed after)."""
    with psycopg.connect(url) as conn:
        result = {}
        for table, state in before.items():
            after = row_hashes(conn, table, state.columns)
            total = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
            result[table] = (len(state.rows), total[0] if total else 0, len(state.rows - after))
        return result


class LockWaits:
    """Samples pg_locks every 20 ms while it runs: the longest any backend waited for a lock (its
    `waitstart`), for the migration's session and for everyone else."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.migration = 0.0
        self.others = 0.0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> LockWaits:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.thread.join(10)

    def _sample(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self.stopping.is_set():
                for application, waited in conn.execute(
                    "SELECT a.application_name, extract(epoch FROM now() - l.waitstart)::float8"
                    " FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE NOT l.granted AND l.waitstart IS NOT NULL"
                ):
                    if application == "sluice-migrate":
                        self.migration = max(self.migration, waited)
                    else:
                        self.others = max(self.others, waited)
                time.sleep(0.02)


@contextlib.contextmanager
def uploads_going_on(api: Api, collection: str, uploaded: list[str]) -> Iterator[None]:
    """Upload a note every 0.5 s to `collection` until the block ends (writes during a migration);
    an upload refused while ingest-api is being replaced is tried again."""
    stopping = threading.Event()

    def upload() -> None:
        n = 0
        while not stopping.is_set():
            try:
                uploaded.append(api.upload(collection, f"live-{n}.txt", topic_text(100 + n, 3)).id)
                n += 1
            except grpc.RpcError:
                pass
            stopping.wait(0.5)

    thread = threading.Thread(target=upload, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stopping.set()
        thread.join(60)


def wait_until(condition: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.2)


def count(url: str, sql: str, *params: object) -> int:
    with psycopg.connect(url) as conn:
        return count_on(conn, sql, *params)


def count_on(conn: psycopg.Connection, sql: str, *params: object) -> int:
    row = conn.execute(sql, params).fetchone()
    return int(row[0]) if row else 0


MIGRATION_WAITING = (
    "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)"
    " WHERE NOT l.granted AND a.application_name = 'sluice-migrate'"
)


@contextlib.contextmanager
def holding_version_row(url: str, seconds: float) -> Iterator[None]:
    """A transaction that holds alembic_version's row until a migration has waited `seconds`
    for it: every migration ends by updating that row, so it waits here as it would on a long
    transaction holding a table it alters, and must give up after lock_timeout."""
    if seconds <= 0:
        yield
        return
    locked = threading.Event()

    def hold() -> None:
        with psycopg.connect(url) as conn, psycopg.connect(url, autocommit=True) as watcher:
            conn.execute("SELECT version_num FROM alembic_version FOR UPDATE")
            locked.set()
            deadline = time.monotonic() + 120
            while count_on(watcher, MIGRATION_WAITING) == 0 and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(seconds)

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    locked.wait(30)
    try:
        yield
    finally:
        thread.join(180)


@dataclass
class UpgradeResult:
    state: str
    documents: int = 0
    chunks: int = 0
    tables: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # rows before, after, lost
    top10_before: list[list[tuple[str, int]]] = field(default_factory=list)
    top10_after: list[list[tuple[str, int]]] = field(default_factory=list)
    in_flight: int = 0  # jobs RUNNING when the old ingest-api stopped
    current_worker_on_old_api: int = 0  # documents the current worker made READY through the old ingest-api
    old_worker_on_current_api: int = 0  # documents the old worker made READY through the current ingest-api
    uploaded_during_upgrade: int = 0
    migration_lock_wait: float = 0.0  # seconds, the longest wait of the migration's session
    others_lock_wait: float = 0.0  # seconds, the longest wait of any other session meanwhile
    migrate_log: str = ""
    check_code: int = -1
    check_output: str = ""
    duration: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)  # seconds from the start, per step

    @property
    def lost(self) -> int:
        return sum(lost for _, _, lost in self.tables.values())

    @property
    def top10_equal(self) -> int:
        return sum(a == b for a, b in zip(self.top10_before, self.top10_after, strict=True))


def upgrade_from(old: OldRelease, workdir: Path, *, hold_lock_seconds: float = 0.0, small: bool = False) -> UpgradeResult:
    """Load data through `old`'s pipeline, then upgrade to the current code while the old
    ingest-api and worker keep serving uploads; the old worker then runs against the current
    ingest-api until it has finished a document, and the current worker takes over.

    1. old sluice-migrate, ingest-api and worker; `load()`; the current worker also processes
       two documents through the old ingest-api while the old worker is frozen (a rolling
       upgrade's other order);
    2. the old search's top-10 of QUERIES and each surviving table's rows;
    3. uploads every 0.5 s; the current sluice-migrate runs (optionally while another session
       holds the row every migration updates); the old ingest-api stops with a job RUNNING and the current one
       takes its address; the old worker finishes a document through it, then stops;
    4. the current worker; every document READY; the current search's top-10; rows; sluice-check.
    """
    started = time.monotonic()
    result = UpgradeResult(old.label)
    deployment = Deployment(workdir)
    api: Api | None = None
    try:
        deployment.migrate(old)
        address = f"127.0.0.1:{free_port()}"
        old_ingest = deployment.start_ingest(old, address)
        api = Api(address)
        old_worker = deployment.start_worker(old, address, "old-worker")
        ids = load(api, small=small)
        result.phases["loaded"] = time.monotonic() - started
        # The current worker through the old ingest-api, while the old worker is frozen (it has no
        # job and, after its last long-poll ends, no claim outstanding).
        old_worker.popen.send_signal(signal.SIGSTOP)
        time.sleep(1.5)
        api.create_collection("early", HASHING)
        early_worker = deployment.start_worker(CURRENT, address, "current-worker-early")
        early = [api.upload("early", f"early-{n}.txt", topic_text(50 + n, 3)).id for n in range(2)]
        api.wait_ready(early)
        result.phases["current worker on old api"] = time.monotonic() - started
        result.current_worker_on_old_api = len(early)
        early_worker.stop()
        old_worker.popen.send_signal(signal.SIGCONT)

        api.create_collection("live", HASHING)
        old_search = deployment.start_search(old)
        result.top10_before = top10(old_search.address)
        old_search.stop()
        retired_generations_dropped(deployment.url)
        before = snapshot(deployment.url)
        result.phases["before taken"] = time.monotonic() - started

        live: list[str] = []
        running = "SELECT count(*) FROM ingestion_jobs WHERE status = 'RUNNING'"
        with uploads_going_on(api, "live", live):
            wait_until(lambda: len(live) >= 3, 60, "uploads begin")
            with LockWaits(deployment.url) as waits, holding_version_row(deployment.url, hold_lock_seconds):
                migrated = deployment.migrate(CURRENT)
                result.phases["migrated"] = time.monotonic() - started
            result.migration_lock_wait, result.others_lock_wait = waits.migration, waits.others
            result.migrate_log = migrated.stdout + migrated.stderr
            wait_until(lambda: count(deployment.url, running) > 0, 60, "a job RUNNING on the old worker")
            result.in_flight = count(deployment.url, running)
            old_ingest.stop(signal.SIGTERM)
            switched = len(live)
            deployment.start_ingest(CURRENT, address)
            result.phases["current ingest"] = time.monotonic() - started
            wait_until(lambda: len(live) > switched + 2, 60, "uploads through the current ingest-api")
        after_switch = live[switched:]
        wait_until(
            lambda: any(api.status(i) == D.DOCUMENT_STATUS_READY for i in after_switch if api is not None),
            120,
            "the old worker finishes a document uploaded to the current ingest-api",
        )
        result.old_worker_on_current_api = sum(api.status(i) == D.DOCUMENT_STATUS_READY for i in after_switch)
        old_worker.stop()

        deployment.start_worker(CURRENT, address, "current-worker")
        result.phases["old worker stopped"] = time.monotonic() - started
        api.wait_ready([*ids, *early, *live])
        result.phases["all ready"] = time.monotonic() - started
        result.uploaded_during_upgrade = len(live)
        search = deployment.start_search(CURRENT)
        result.top10_after = top10(search.address)
        result.tables = lost_rows(deployment.url, before)
        result.documents = count(deployment.url, "SELECT count(*) FROM documents")
        result.chunks = count(deployment.url, "SELECT count(*) FROM chunks")
        check = deployment.run(CURRENT, "sluice-check")
        result.check_code, result.check_output = check.returncode, check.stdout + check.stderr
    except BaseException:
        for process in deployment.processes:
            print(f"--- {process.name}\n{process.tail()}", file=sys.stderr)
        raise
    finally:
        if api is not None:
            api.close()
        deployment.close()
    result.duration = time.monotonic() - started
    return result
