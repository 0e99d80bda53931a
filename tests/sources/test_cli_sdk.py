"""`sluice sources add/ls/sync/rm` and the Python SDK's `client.sources`, against the real
ingest-api and the real runner (docs/sources.md, docs/cli.md#sources)."""

from __future__ import annotations

import json
import threading

import auth_keys
import psycopg
import pytest
from helpers import wait_for
from sluice_client import Client
from sluice_client.errors import SluiceError

from .helpers import live_documents, run_pending


@pytest.fixture
def root(tmp_path):
    folder = tmp_path / "root"
    (folder / "handbook").mkdir(parents=True)
    for name in ("a.md", "b.md", "c.txt"):
        (folder / "handbook" / name).write_text(f"the text of {name}")
    return folder


@pytest.fixture
def api(ingest_api_factory, root):
    return ingest_api_factory(source_local_roots=str(root))


@pytest.fixture
def sluice(api, tmp_path, monkeypatch, capsys):
    credentials = tmp_path / "credentials"
    credentials.write_text(json.dumps({"tenant": "default", "keys": auth_keys.KEYS}))
    monkeypatch.setenv("SLUICE_CREDENTIALS", str(credentials))
    monkeypatch.delenv("SLUICE_API_KEY", raising=False)
    monkeypatch.setenv("SLUICE_INGEST_ADDRESS", api.address)
    monkeypatch.setenv("COLUMNS", "200")

    def run(*args: str) -> tuple[int, str, str]:
        from sluice_cli.main import run as cli_run

        capsys.readouterr()
        code = cli_run(list(args))
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


def test_the_cli_adds_lists_syncs_and_removes_a_source(sluice, root, database_url):
    assert sluice("collections", "create", "docs")[0] == 0
    code, out, err = sluice("sources", "add", "docs", "--folder", str(root / "handbook"), "--glob", "*.md", "--json")
    assert code == 0, err
    source = json.loads(out)["source"]
    assert source["name"] == f"collections/docs/sources/{source['id']}" and source["local_folder"]["glob"] == "*.md"

    code, out, _ = sluice("sources", "ls")
    assert code == 0 and source["id"] in out and "never synced" in out

    # --wait: the runner (another thread here, `sluice-sources` in production) carries the run out
    # once it was asked for; the command prints its progress from the collection's run events.
    runner = threading.Thread(target=run_when_asked, args=(database_url, root))
    runner.start()
    code, out, err = sluice("sources", "sync", source["id"], "--wait", "--timeout", "60")
    runner.join()
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("sync run ") and lines[0].endswith(": pending"), out
    assert "started  running: listed 0, uploaded 0" in out
    assert "progress  running: listed 2, uploaded 2, unchanged 0, deleted 0, failed 0" in out
    assert lines[-1] == "succeeded: listed 2, uploaded 2, unchanged 0, deleted 0, failed 0"
    assert sorted(live_documents(database_url)) == ["a.md", "b.md"]
    code, out, _ = sluice("sources", "ls", "--collection", "docs")
    assert "succeeded: listed 2, uploaded 2" in out

    code, _, err = sluice("sources", "add", "docs", "--folder", "/etc")
    assert code == 2 and "not under a folder this server allows" in err and "Traceback" not in err
    code, _, err = sluice("sources", "add", "docs", "--folder", str(root), "--git", "/x")
    assert code == 2 and "exactly one of" in err

    code, out, _ = sluice("sources", "rm", source["name"])
    assert code == 0 and "the documents it synced stay" in out
    code, _, err = sluice("sources", "sync", source["id"])
    assert code == 3 and "does not exist" in err
    assert sorted(live_documents(database_url)) == ["a.md", "b.md"]


def test_the_sdk_creates_syncs_and_waits(api, root, database_url):
    client = Client(api.address, api_key=auth_keys.KEYS["client"])
    client.collections.create("docs")
    source = client.sources.create("docs", folder=str(root / "handbook"), display_name="handbook")
    assert source.kind == "local_folder" and source.last_run is None
    runner = threading.Timer(0.5, run_pending, args=(database_url,), kwargs={"source_local_roots": str(root)})
    runner.start()
    run = client.sources.sync(source.name, wait=True, timeout=60, poll_seconds=0.2)
    runner.join()
    assert (run.state, run.listed, run.uploaded) == ("succeeded", 3, 3)
    assert [s.id for s in client.sources.list("docs")] == [source.id]
    assert client.sources.get(source.id).last_run == run
    assert [r.id for r in client.sources.runs(source.id)] == [run.id]
    with pytest.raises(ValueError, match="exactly one kind"):
        client.sources.create("docs", folder=str(root), git="/x")
    client.sources.delete(source.id)
    with pytest.raises(SluiceError) as raised:
        client.sources.get(source.id)
    assert raised.value.reason == "SOURCE_NOT_FOUND"


def run_when_asked(database_url: str, root) -> int:
    """The runner, once a run is waiting (the CLI asks for it after its stream is open)."""

    def waiting() -> bool:
        with psycopg.connect(database_url) as conn:
            return conn.execute("SELECT count(*) FROM source_runs WHERE state = 'PENDING'").fetchone()[0] > 0

    wait_for(waiting, 60, interval=0.05, what="the sync run to be asked for")
    return run_pending(database_url, source_local_roots=str(root))


def test_the_sdk_and_the_cli_show_a_run_from_the_collection_stream(api, root, database_url):
    from sluice_cli.watch import event_line

    client = Client(api.address, api_key=auth_keys.KEYS["client"])
    client.collections.create("docs")
    source = client.sources.create("docs", folder=str(root / "handbook"), display_name="handbook")
    run = client.sources.sync(source.id)
    run_pending(database_url, source_local_roots=str(root))
    with client.collections.watch("docs", from_start=True, source_runs="only") as events:
        seen = [next(events) for _ in range(3)]
    assert [e.kind for e in seen] == ["SOURCE_RUN_STARTED", "SOURCE_RUN_PROGRESS", "SOURCE_RUN_FINISHED"]
    assert all(e.is_source_run and e.document is None and e.source_run.source == source.name for e in seen)
    finished = seen[-1].source_run
    assert finished.source_display_name == "handbook" and finished.run.id == run.id
    assert (finished.run.state, finished.run.listed, finished.run.uploaded) == ("succeeded", 3, 3)
    line = event_line(seen[-1])
    assert "source handbook  run finished  succeeded: listed 3, uploaded 3, unchanged 0, deleted 0, failed 0" in line
    assert line.endswith(f"cursor={seen[-1].cursor}")
    # Without asking, a watch has the document events only (as every SDK before run events).
    with client.collections.watch("docs", from_start=True) as events:
        assert {next(events).kind for _ in range(3)} == {"CHANGED"}
    with pytest.raises(ValueError, match="source_runs must be one of"):
        client.collections.watch("docs", source_runs="all")


def run_later(database_url: str, root) -> int:
    """The runner, a moment after the sync was asked for (while the client waits)."""
    import time

    time.sleep(0.5)
    return run_pending(database_url, source_local_roots=str(root))


def test_the_async_sdk_creates_syncs_and_waits(api, root, database_url):
    import asyncio

    from sluice_client.aio import AsyncClient

    async def scenario() -> None:
        async with AsyncClient(api.address, api_key=auth_keys.KEYS["client"]) as client:
            await client.collections.create("docs")
            source = await client.sources.create("docs", folder=str(root / "handbook"), glob="*.txt")
            runner = asyncio.get_running_loop().run_in_executor(None, run_later, database_url, root)
            run = await client.sources.sync(source.id, wait=True, timeout=60, poll_seconds=0.2)
            await runner
            assert (run.state, run.listed, run.uploaded) == ("succeeded", 1, 1)
            assert [s.id async for s in client.sources.list()] == [source.id]
            assert (await client.sources.get(source.name)).last_run == run
            await client.sources.delete(source.id)
            assert [s async for s in client.sources.list("docs")] == []

    asyncio.run(scenario())
    assert sorted(live_documents(database_url)) == ["c.txt"]
