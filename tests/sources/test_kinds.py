"""Sources of kinds GIT, HTTP and S3 against real servers the tests start: a git repository made
with the git CLI, a local http.server with a sitemap and robots.txt, and moto's S3 server
(docs/sources.md, "Kinds")."""

from __future__ import annotations

import subprocess
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest
from helpers import free_port
from sluice.v1 import source_service_pb2 as src

from .helpers import Sources, live_documents, run_pending


def create(s: Sources, **spec) -> src.Source:
    return s.stub.CreateSource(src.CreateSourceRequest(source=src.Source(collection="docs", **spec)))


def sync_and_run(s: Sources, source: src.Source, database_url: str, root, **kw) -> src.SourceRun:
    s.sync(source, **kw)
    run_pending(database_url, source_local_roots=str(root))
    return s.last_run(source)


def counts(run: src.SourceRun) -> tuple[int, int, int, int, int]:
    return run.listed, run.uploaded, run.unchanged, run.deleted, run.failed


# --- git ---------------------------------------------------------------------------------------


def git(repo, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=repo, check=True, capture_output=True
    )


def test_a_git_repository_at_a_ref_and_subpath(api, root, database_url):
    repo = root / "repo"
    (repo / "handbook" / "deep").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "handbook" / "a.md").write_text("# a\nfirst")
    (repo / "handbook" / "deep" / "b.md").write_text("# b")
    (repo / "handbook" / ".hidden").write_text("no")
    (repo / "outside.txt").write_text("not under the subpath")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "one")
    git(repo, "checkout", "-q", "-b", "other")  # the source follows main, not what is checked out
    (repo / "handbook" / "a.md").write_text("# a\nonly on the other branch")
    git(repo, "commit", "-q", "-am", "other")
    git(repo, "checkout", "-q", "main")

    s = Sources(api.address)
    s.clients.create_collection("docs")
    source = create(s, git=src.GitSource(repository=str(repo), ref="main", subpath="handbook"))
    assert source.kind == src.SOURCE_KIND_GIT
    first = sync_and_run(s, source, database_url, root)
    assert first.state == src.SOURCE_RUN_STATE_SUCCEEDED, first.error_message
    assert counts(first) == (2, 2, 0, 0, 0)
    uri = f"git:{repo}#handbook/a.md"
    assert sorted(live_documents(database_url)) == [uri, f"git:{repo}#handbook/deep/b.md"]

    (repo / "handbook" / "a.md").write_text("# a\nsecond")
    (repo / "handbook" / "deep" / "b.md").unlink()
    git(repo, "commit", "-q", "-am", "two")
    second = sync_and_run(s, source, database_url, root)
    assert counts(second) == (1, 1, 0, 1, 0)
    assert [v for v, _ in live_documents(database_url)[uri]] == [1, 2]
    assert counts(sync_and_run(s, source, database_url, root)) == (1, 0, 1, 0, 0)

    missing = create(s, git=src.GitSource(repository=str(repo), ref="no-such-branch"))
    failed = sync_and_run(s, missing, database_url, root)
    assert failed.state == src.SOURCE_RUN_STATE_FAILED
    assert failed.error_message.startswith("the source could not be listed: git clone failed")
    assert "Traceback" not in failed.error_message
    # git names the path it could not read; a path on the server never reaches the owner.
    (root / "not-a-repo").mkdir()
    broken = sync_and_run(s, create(s, git=src.GitSource(repository=str(root / "not-a-repo"))), database_url, root)
    assert broken.state == src.SOURCE_RUN_STATE_FAILED
    assert "git clone failed" in broken.error_message and str(root) not in broken.error_message, broken.error_message


# --- http --------------------------------------------------------------------------------------


class Site:
    """A local web site: files under `folder`, served by http.server on a free port."""

    def __init__(self, folder) -> None:
        self.requests: list[str] = []
        site = self

        class Handler(SimpleHTTPRequestHandler):
            def log_message(self, *args) -> None:
                site.requests.append(self.path)

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), partial(Handler, directory=str(folder)))
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def site(tmp_path):
    folder = tmp_path / "site"
    (folder / "private").mkdir(parents=True)
    (folder / "robots.txt").write_text("User-agent: *\nDisallow: /private/\n")
    server = Site(folder)
    u = server.url
    (folder / "index.html").write_text(
        f'<html><body><a href="a.html">a</a> <a href="/b.html#part">b</a> <a href="private/secret.html">s</a>'
        f' <a href="http://198.51.100.7/elsewhere.html">other host</a> <a href="{u}/missing.html">gone</a></body></html>'
    )
    (folder / "a.html").write_text('<html><body>alpha page <a href="index.html">home</a></body></html>')
    (folder / "b.html").write_text("<html><body>bravo page</body></html>")
    (folder / "private" / "secret.html").write_text("<html><body>secret</body></html>")
    (folder / "sitemap.xml").write_text(
        '<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"<url><loc>{u}/a.html</loc><lastmod>2026-01-01</lastmod></url>"
        f"<url><loc>{u}/b.html</loc></url>"
        f"<url><loc>{u}/private/secret.html</loc></url>"
        "<url><loc>http://198.51.100.7/elsewhere.html</loc></url></urlset>"
    )
    yield server, folder
    server.close()


def test_an_http_crawl_stays_on_its_host_obeys_robots_txt_and_its_page_limit(api, root, site, database_url):
    server, folder = site
    s = Sources(api.address)
    s.clients.create_collection("docs")
    source = create(s, http=src.HttpSource(start_url=server.url + "/index.html"))
    first = sync_and_run(s, source, database_url, root)
    assert first.state == src.SOURCE_RUN_STATE_SUCCEEDED, first.error_message
    pages = [server.url + p for p in ("/a.html", "/b.html", "/index.html")]
    assert sorted(live_documents(database_url)) == pages
    assert "/private/secret.html" not in server.requests  # robots.txt
    assert counts(first) == (3, 3, 0, 0, 0)

    (folder / "b.html").write_text("<html><body>bravo page, edited</body></html>")
    second = sync_and_run(s, source, database_url, root)
    assert counts(second) == (3, 1, 2, 0, 0)

    limited = create(s, http=src.HttpSource(start_url=server.url + "/index.html", max_pages=1))
    assert counts(sync_and_run(s, limited, database_url, root))[:2] == (1, 0)  # index.html: already served


def test_an_http_sitemap_on_its_host_with_lastmod(api, root, site, database_url):
    server, folder = site
    s = Sources(api.address)
    s.clients.create_collection("docs")
    source = create(s, http=src.HttpSource(sitemap_url=server.url + "/sitemap.xml"))
    first = sync_and_run(s, source, database_url, root)
    assert counts(first) == (2, 2, 0, 0, 0), first.error_message
    assert sorted(live_documents(database_url)) == [server.url + "/a.html", server.url + "/b.html"]
    server.requests.clear()
    second = sync_and_run(s, source, database_url, root)
    assert counts(second) == (2, 0, 2, 0, 0)
    assert "/a.html" not in server.requests and "/b.html" in server.requests  # a.html has a lastmod

    (folder / "b.html").unlink()
    third = sync_and_run(s, source, database_url, root)
    assert (third.state, third.deleted) == (src.SOURCE_RUN_STATE_SUCCEEDED, 1)  # a 404 is a page gone


# --- s3 ----------------------------------------------------------------------------------------


@pytest.fixture
def s3_server():
    # moto's S3 server and boto3 (to fill the bucket) are test dependencies pinned in
    # requirements.lock: a missing one fails here, it does not skip the S3 source.
    import boto3
    from moto import server as moto_server

    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    client = boto3.client(
        "s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    client.create_bucket(Bucket="corpus")
    yield endpoint, client
    server.stop()


def test_an_s3_bucket_and_prefix_with_credentials_by_reference(api, root, s3_server, database_url, monkeypatch):
    endpoint, client = s3_server
    for key, body in {
        "docs/a.txt": b"alpha",
        "docs/sub/b.txt": b"bravo",
        "docs/.hidden": b"no",
        "docs/folder/": b"",
        "other/c.txt": b"not under the prefix",
    }.items():
        client.put_object(Bucket="corpus", Key=key, Body=body)
    monkeypatch.setenv("TEST_S3_KEY_ID", "testing")
    monkeypatch.setenv("TEST_S3_SECRET", "testing")
    s = Sources(api.address)
    s.clients.create_collection("docs")
    source = create(
        s,
        s3=src.S3Source(
            endpoint=endpoint,
            bucket="corpus",
            prefix="docs/",
            access_key_id_env="TEST_S3_KEY_ID",
            secret_access_key_env="TEST_S3_SECRET",
        ),
    )
    answer = s.stub.GetSource(src.GetSourceRequest(name=source.name))
    assert answer.s3.access_key_id_env == "TEST_S3_KEY_ID" and "testing" not in str(answer)
    first = sync_and_run(s, source, database_url, root)
    assert counts(first) == (2, 2, 0, 0, 0), first.error_message
    assert sorted(live_documents(database_url)) == ["s3://corpus/docs/a.txt", "s3://corpus/docs/sub/b.txt"]
    assert counts(sync_and_run(s, source, database_url, root)) == (2, 0, 2, 0, 0)

    client.put_object(Bucket="corpus", Key="docs/a.txt", Body=b"alpha, edited")
    client.delete_object(Bucket="corpus", Key="docs/sub/b.txt")
    assert counts(sync_and_run(s, source, database_url, root)) == (1, 1, 0, 1, 0)

    monkeypatch.delenv("TEST_S3_SECRET")
    failed = sync_and_run(s, source, database_url, root)
    assert failed.state == src.SOURCE_RUN_STATE_FAILED
    assert "TEST_S3_SECRET" in failed.error_message and "testing" not in failed.error_message


class Resolver:
    """socket.getaddrinfo for chosen names: each lookup of a name answers the next address of its
    list (the last one from then on); other names resolve as usual. What a DNS server under an
    attacker's control does for DNS rebinding: a public address when checked, a private one after."""

    def __init__(self, monkeypatch, answers: dict[str, list[str]]) -> None:
        import socket

        self.answers = {name: list(addresses) for name, addresses in answers.items()}
        real = socket.getaddrinfo

        def getaddrinfo(host, port, *args, **kwargs):
            if isinstance(host, bytes):  # anyio (under httpx) passes the name IDNA-encoded
                host = host.decode("ascii")
            if host not in self.answers:
                return real(host, port, *args, **kwargs)
            queue = self.answers[host]
            address = queue.pop(0) if len(queue) > 1 else queue[0]
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, int(port or 80)))]

        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def test_an_http_source_connects_to_the_address_it_checked(site, monkeypatch):
    """DNS rebinding: the name is public when checked and loopback when resolved again. The reader
    connects to the checked address, so the local site never sees the request. What answers at
    that public address depends on the machine's network (nothing, or an egress proxy's 404: both
    were seen), so the test asserts where the request went, not how it ended."""
    import asyncio

    from sluice_ingest.sources.http import HttpReader
    from sluice_ingest.sources.reader import SourceUnavailable

    server, _ = site
    port = server.server.server_address[1]
    Resolver(monkeypatch, {"rebind.test": ["93.184.216.34", "127.0.0.1"]})
    reader = HttpReader({"start_url": f"http://rebind.test:{port}/"}, False, 1.0, 1 << 20, 10)
    sent: list[tuple[str, str]] = []

    async def record(request) -> None:
        sent.append((request.url.host, request.headers["host"]))

    reader.client.event_hooks["request"].append(record)

    async def fetch():
        try:
            return await reader._get(f"http://rebind.test:{port}/index.html", 1 << 20)
        except SourceUnavailable as err:  # nothing listens there, or no route out
            return err
        finally:
            await reader.close()

    outcome = asyncio.run(fetch())
    assert outcome is None or isinstance(outcome, SourceUnavailable)  # a 404 is None: gone
    assert sent == [("93.184.216.34", f"rebind.test:{port}")]  # the checked address, the name in Host
    assert server.requests == []  # never reached the loopback site


def test_a_pinned_request_keeps_the_name_in_its_host_header(site, monkeypatch):
    """The request goes to the checked address with the URL's name in Host (here loopback is
    counted as public, so that a local site stands in for a public one)."""
    import asyncio

    from sluice_ingest.sources import spec
    from sluice_ingest.sources.http import HttpReader

    server, _ = site
    port = server.server.server_address[1]
    hosts: list[str] = []
    handler = server.server.RequestHandlerClass
    original = handler.keywords["directory"]
    monkeypatch.setattr(spec, "refusal", lambda address: None)
    Resolver(monkeypatch, {"pinned.test": ["127.0.0.1"]})

    class Recording(SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            hosts.append(self.headers.get("host", ""))

    server.server.RequestHandlerClass = partial(Recording, directory=original)
    reader = HttpReader({"start_url": f"http://pinned.test:{port}/"}, False, 5.0, 1 << 20, 10)

    async def fetch():
        try:
            return await reader._get(f"http://pinned.test:{port}/a.html", 1 << 20)
        finally:
            await reader.close()

    answer = asyncio.run(fetch())
    assert answer is not None and b"alpha page" in answer.content
    assert hosts == [f"pinned.test:{port}"]
