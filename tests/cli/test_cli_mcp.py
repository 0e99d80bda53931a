"""`sluice mcp` through the MCP client library, against the real services (docs/mcp.md).

The server is the installed `sluice mcp`, spawned by the library's stdio client or started with
`--transport http` and reached by its streamable-HTTP client, talking to the real ingest-api and
search of `stack` (tests/cli/conftest.py), whose ScriptedWorker makes documents READY. Keys are
the default tenant's client and reader keys (auth_keys).
"""

from __future__ import annotations

import os
import subprocess
from contextlib import asynccontextmanager
from pathlib import Path

import auth_keys
import pytest
from helpers import free_port, wait_for, wait_for_async
from mcp import Client as McpClient
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from sluice_cli.mcp import build_server
from sluice_client import Client

from .conftest import VENV_BIN

ALL_TOOLS = {
    "search",
    "create_collection",
    "upload_text",
    "upload_file",
    "get_document",
    "list_documents",
    "list_chunks",
    "list_collections",
}
READ_TOOLS = ALL_TOOLS - {"create_collection", "upload_text", "upload_file"}
TEXT = "Leases expire when a worker stops renewing them; another worker then takes the job over."


def mcp_env(role: str) -> dict[str, str]:
    return {"SLUICE_API_KEY": auth_keys.KEYS[role], "GRPC_VERBOSITY": "ERROR"}


@asynccontextmanager
async def stdio_session(stack, tmp_path: Path, role: str = "client", *extra: str):
    """A session with `sluice mcp` spawned over stdio (its stderr in tmp_path/mcp-stderr.log)."""
    params = StdioServerParameters(
        command=str(VENV_BIN / "sluice"), args=["mcp", *stack.args, *extra], env=mcp_env(role), cwd=str(tmp_path)
    )
    with open(tmp_path / "mcp-stderr.log", "a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


def text_of(result) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


async def call_ok(session, name: str, arguments: dict | None = None) -> dict:
    result = await session.call_tool(name, arguments or {})
    assert not result.is_error, text_of(result)
    return result.structured_content


async def until_ready(session, document_id: str) -> dict:
    async def ready():
        doc = await call_ok(session, "get_document", {"document": document_id})
        return doc if doc["status"] in ("READY", "FAILED") else None

    doc = await wait_for_async(ready, 60, interval=0.1, what=f"document {document_id} READY")
    assert doc["status"] == "READY", doc
    return doc


def create_collection(sluice, stack, name: str = "docs") -> None:
    result = sluice("collections", "create", name, "--embedder", "hashing", *stack.args)
    assert result.code == 0, result.err


async def test_tools_over_stdio(sluice, stack, tmp_path):
    create_collection(sluice, stack)
    (tmp_path / "notes.md").write_text("# Notes\n\nHybrid search fuses keyword and vector ranks.\n")
    async with stdio_session(stack, tmp_path, "client", "--collection", "docs") as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert set(tools) == ALL_TOOLS
        assert all(tools[name].output_schema for name in ALL_TOOLS)
        assert all(tools[name].annotations.read_only_hint for name in READ_TOOLS)
        assert not tools["upload_text"].annotations.read_only_hint
        assert tools["search"].input_schema["required"] == ["query"]  # the collection defaults to docs

        uploaded = await call_ok(session, "upload_text", {"text": TEXT, "filename": "leases.md", "metadata": {"lang": "en"}})
        assert uploaded["collection"] == "docs" and uploaded["filename"] == "leases.md"
        doc = await until_ready(session, uploaded["id"])
        assert doc["chunk_count"] == 1 and doc["metadata"] == {"lang": "en"}

        found = await session.call_tool("search", {"query": "when do leases expire", "top_k": 3})
        assert not found.is_error, text_of(found)
        hits = found.structured_content["hits"]
        assert hits and hits[0]["document_id"] == uploaded["id"] and hits[0]["filename"] == "leases.md"
        assert "leases.md" in text_of(found) and "Leases expire" in text_of(found)
        keyword = await call_ok(session, "search", {"query": "renewing", "mode": "keyword", "filters": {"lang": "en"}})
        assert keyword["mode"] == "KEYWORD" and [h["filename"] for h in keyword["hits"]] == ["leases.md"]
        none = await call_ok(session, "search", {"query": "renewing", "mode": "keyword", "where": ["lang=de"]})
        assert none["hits"] == []

        from_file = await call_ok(session, "upload_file", {"path": "notes.md", "wait_seconds": 60})
        assert from_file["filename"] == "notes.md" and from_file["status"] == "READY"

        collections = await session.call_tool("list_collections")
        assert [c["name"] for c in collections.structured_content["collections"]] == ["docs"]
        assert collections.structured_content["collections"][0]["ready_document_count"] == 2
        assert "docs: 2/2 document(s) READY" in text_of(collections)

        first = await call_ok(session, "list_documents", {"page_size": 1})
        assert [d["filename"] for d in first["documents"]] == ["notes.md"] and first["next_page_token"]
        second = await call_ok(session, "list_documents", {"page_size": 1, "page_token": first["next_page_token"]})
        assert [d["filename"] for d in second["documents"]] == ["leases.md"] and second["next_page_token"] == ""
        by_name = await call_ok(session, "get_document", {"document": "notes.md"})
        assert by_name["id"] == from_file["id"]


async def test_an_agent_starts_from_nothing_by_creating_a_collection(stack):
    """Issue 37, defect 7: with no collection yet, an agent had no tool to make one. create_collection
    makes it (local embedder) and returns it again for a name that exists; a bad name is a tool error."""
    client = Client(stack.ingest, search_address=stack.search, api_key=auth_keys.KEYS["client"])
    try:
        async with McpClient(build_server(client)) as session:
            listed = {tool.name: tool for tool in (await session.list_tools()).tools}
            assert "create_collection" in listed and not listed["create_collection"].annotations.read_only_hint
            made = await call_ok(session, "create_collection", {"name": "notes", "description": "meeting notes"})
            assert made["name"] == "notes" and made["description"] == "meeting notes"
            assert made["embedder"] == "local/all-MiniLM-L6-v2 (384)", made
            again = await call_ok(session, "create_collection", {"name": "notes"})
            assert again["name"] == "notes" and again["description"] == "meeting notes"
            bad = await session.call_tool("create_collection", {"name": "Not A Name"})
            assert bad.is_error and bad.structured_content["error"]["reason"] == "INVALID_COLLECTION_NAME"
            uploaded = await call_ok(session, "upload_text", {"text": TEXT, "filename": "leases.md", "collection": "notes"})
            assert uploaded["collection"] == "notes"
    finally:
        client.close()


async def test_errors_are_tool_errors_with_the_reason(sluice, stack, tmp_path):
    create_collection(sluice, stack)
    outside = tmp_path.parent / f"{tmp_path.name}-outside.txt"
    outside.write_text("not for the MCP client")
    async with stdio_session(stack, tmp_path) as session:
        cases = {
            "COLLECTION_NOT_FOUND": ("search", {"collection": "nope", "query": "anything"}),
            "DOCUMENT_NOT_FOUND": ("get_document", {"document": "00000000-0000-4000-8000-000000000000"}),
            "COLLECTION_REQUIRED": ("upload_text", {"text": TEXT, "filename": "a.md"}),  # no --collection default
            "PATH_NOT_ALLOWED": ("upload_file", {"path": str(outside), "collection": "docs"}),
            "FILE_NOT_FOUND": ("upload_file", {"path": "missing.pdf", "collection": "docs"}),
            "INVALID_PAGE_TOKEN": ("list_documents", {"page_token": "not-a-token"}),
        }
        for reason, (tool, arguments) in cases.items():
            result = await session.call_tool(tool, arguments)
            text = text_of(result)
            assert result.is_error, (tool, text)
            assert result.structured_content["error"]["reason"] == reason, text
            assert text.endswith(f"[{reason}]") and "Traceback" not in text and "sluice_cli" not in text, text
        missing = await session.call_tool("search", {"collection": "nope", "query": "anything"})
        assert text_of(missing) == "collection 'nope' does not exist [COLLECTION_NOT_FOUND]"
        assert missing.structured_content["error"]["code"] == "NOT_FOUND"

        invalid = await session.call_tool("search", {"collection": "docs", "query": "x", "top_k": 0})
        assert invalid.is_error and "top_k" in text_of(invalid) and "Traceback" not in text_of(invalid)


async def test_a_reader_key_searches_but_does_not_upload(sluice, stack, tmp_path):
    create_collection(sluice, stack)
    (tmp_path / "leases.md").write_text(TEXT)
    assert sluice("upload", tmp_path / "leases.md", "--collection", "docs", *stack.args).code == 0
    async with stdio_session(stack, tmp_path, "reader", "--collection", "docs") as session:
        assert {tool.name for tool in (await session.list_tools()).tools} == READ_TOOLS
        found = await call_ok(session, "search", {"query": "leases expire"})
        assert [h["filename"] for h in found["hits"]] == ["leases.md"]
        assert [c["name"] for c in (await call_ok(session, "list_collections"))["collections"]] == ["docs"]
        refused = await session.call_tool("upload_text", {"text": TEXT, "filename": "again.md"})
        assert refused.is_error and "upload_text" in text_of(refused)
    assert "reader key" in (tmp_path / "mcp-stderr.log").read_text()


async def test_upload_tools_listed_with_a_reader_key_say_why_they_are_refused(stack):
    """Without the start-up check (`build_server(read_only=False)`), a reader key's upload is
    refused by ingest-api itself, and the tool error says so and what to do."""
    create = Client(stack.ingest, search_address=stack.search, api_key=auth_keys.KEYS["client"])
    create.collections.create("docs", embedder="hashing")
    create.close()
    reader = Client(stack.ingest, search_address=stack.search, api_key=auth_keys.KEYS["reader"])
    try:
        async with McpClient(build_server(reader, default_collection="docs")) as session:
            result = await session.call_tool("upload_text", {"text": TEXT, "filename": "leases.md"})
        assert result.is_error
        assert result.structured_content["error"] == {
            "reason": "ROLE_NOT_ALLOWED",
            "code": "PERMISSION_DENIED",
            "message": "a reader key may not call UploadDocument: this MCP server runs with a read-only key; "
            "uploads need a client key [ROLE_NOT_ALLOWED]",
        }
    finally:
        reader.close()


async def test_list_chunks_and_search_explain(stack):
    """list_chunks pages a document's chunks (a disabled one says so) and search's `explain` adds
    why each hit ranked: null where the hit was not in a list, never a 0 that was not measured."""
    client = Client(stack.ingest, search_address=stack.search, api_key=auth_keys.KEYS["client"])
    try:
        client.collections.create("docs", embedder="hashing")
        paragraphs = ["Leases expire when renewals stop.", "Quokkas live on Rottnest Island.", "Workers claim jobs."]
        doc = client.documents.wait(
            client.documents.upload("docs", "\n\n".join(paragraphs).encode(), filename="notes.md").id, timeout=60
        )
        async with McpClient(build_server(client, default_collection="docs", read_only=True)) as session:
            tools = {tool.name: tool for tool in (await session.list_tools()).tools}
            assert tools["list_chunks"].annotations.read_only_hint and tools["list_chunks"].output_schema
            assert "explain" in tools["search"].input_schema["properties"]
            first = await call_ok(session, "list_chunks", {"document": "notes.md", "page_size": 2})
            assert first["document_id"] == doc.id and first["total_size"] == 3 and first["next_page_token"]
            assert [c["text"] for c in first["chunks"]] == paragraphs[:2] and all(c["enabled"] for c in first["chunks"])
            client.documents.disable_chunk(first["chunks"][1]["id"])
            again = await session.call_tool("list_chunks", {"document": doc.id, "page_size": 2})
            assert not again.structured_content["chunks"][1]["enabled"] and "disabled (not searched)" in text_of(again)
            rest = await call_ok(session, "list_chunks", {"document": doc.id, "page_token": first["next_page_token"]})
            assert [c["chunk_index"] for c in rest["chunks"]] == [2] and rest["next_page_token"] == ""

            plain = await call_ok(session, "search", {"query": "leases", "mode": "keyword"})
            assert plain["hits"][0]["explanation"] is None and plain["hits"][0]["chunk_id"] == first["chunks"][0]["id"]
            explained = await session.call_tool("search", {"query": "leases", "mode": "keyword", "explain": True})
            why = explained.structured_content["hits"][0]["explanation"]
            assert why["keyword_rank"] == 1 and why["keyword_score"] > 0 and why["first_stage_rank"] == 1
            assert why["vector_similarity"] is None and why["vector_rank"] is None  # not measured: null, not 0
            assert "why: keyword" in text_of(explained) and "not in the vector list" in text_of(explained)

            missing = await session.call_tool("list_chunks", {"document": "00000000-0000-4000-8000-000000000000"})
            assert missing.is_error and text_of(missing).endswith("[DOCUMENT_NOT_FOUND]"), text_of(missing)
    finally:
        client.close()


@pytest.fixture
def http_server(stack, tmp_path):
    """`sluice mcp --transport http` on a free port, with the client key; yields its URL."""
    port = free_port()
    log = open(tmp_path / "mcp-http.log", "w")  # noqa: SIM115 - the subprocess writes to it until the test ends
    process = subprocess.Popen(
        [str(VENV_BIN / "sluice"), "mcp", "--transport", "http", "--port", str(port), *stack.args],
        env={**os.environ, **mcp_env("client")},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        wait_for(
            lambda: (
                process.poll() is not None or "Uvicorn running" in (tmp_path / "mcp-http.log").read_text() or _listening(port)
            ),
            60,
            interval=0.1,
            what="sluice mcp listening",
        )
        assert process.poll() is None, (tmp_path / "mcp-http.log").read_text()
        yield url
    finally:
        process.terminate()
        process.wait(30)
        log.close()


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


async def test_tools_over_streamable_http(sluice, stack, tmp_path, http_server):
    create_collection(sluice, stack)
    async with streamable_http_client(http_server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        assert {tool.name for tool in (await session.list_tools()).tools} == ALL_TOOLS
        uploaded = await call_ok(
            session, "upload_text", {"text": TEXT, "filename": "leases.md", "collection": "docs", "wait_seconds": 60}
        )
        assert uploaded["status"] == "READY"
        found = await call_ok(session, "search", {"collection": "docs", "query": "when do leases expire"})
        assert found["hits"][0]["document_id"] == uploaded["id"]
        listed = await call_ok(session, "list_documents", {"collection": "docs"})
        assert [d["id"] for d in listed["documents"]] == [uploaded["id"]]
        missing = await session.call_tool("search", {"collection": "nope", "query": "x"})
        assert missing.is_error and text_of(missing).endswith("[COLLECTION_NOT_FOUND]")
