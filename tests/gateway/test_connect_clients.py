"""A real Connect client talks to sluice-gateway: connect-es (@connectrpc/connect-node's Connect
transport over HTTP/1.1, from clients/typescript's node_modules) calls a unary RPC, follows a
WatchDocument server stream to READY and meets a stream's error, in JSON and in binary protobuf
(docs/http.md, "Server streams"). Only a machine without `node` skips it."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from gateway.conftest import key_headers
from gateway.test_gateway import TEXT, create_collection, upload

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "clients" / "typescript"
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed")

SCRIPT = """
import { Code, ConnectError, createClient } from "%(modules)s/@connectrpc/connect/dist/esm/index.js";
import { createConnectTransport } from "%(modules)s/@connectrpc/connect-node/dist/esm/index.js";
import { DocumentService } from "%(gen)s/document_service_pb.js";

const [url, authorization, id, binary] = process.argv.slice(2);
const transport = createConnectTransport({
  baseUrl: url, httpVersion: "1.1", useBinaryFormat: binary === "binary",
  interceptors: [(next) => async (request) => { request.header.set("Authorization", authorization); return await next(request); }],
});
const client = createClient(DocumentService, transport);
const out = { collection: (await client.getCollection({ name: "docs" })).name, statuses: [] };
for await (const event of client.watchDocument({ id })) out.statuses.push(event.document.status);
try {
  for await (const event of client.watchDocument({ id: "00000000-0000-0000-0000-000000000000" })) out.unexpected = event;
} catch (error) {
  const failure = ConnectError.from(error);
  out.error = { code: Code[failure.code], message: failure.rawMessage };
}
console.log(JSON.stringify(out));
"""


@pytest.fixture(scope="module")
def generated() -> Path:
    """The SDK's compiled generated code (npm ci and a build first when it is missing)."""
    gen = PACKAGE / "dist" / "src" / "gen" / "sluice" / "v1"
    if not (gen / "document_service_pb.js").exists():
        npm = shutil.which("npm")
        assert npm, "node is installed but npm is not"
        if not (PACKAGE / "node_modules" / ".bin" / "tsc").exists():
            subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=PACKAGE, check=True, capture_output=True, timeout=600)
        subprocess.run([npm, "run", "build"], cwd=PACKAGE, check=True, capture_output=True, timeout=600)
    return gen


@pytest.mark.parametrize("encoding", ["json", "binary"])
def test_connect_es_calls_streams_and_errors_through_the_gateway(stack, http, generated, tmp_path, encoding):
    create_collection(http)
    document = upload(http, "docs", "leases.txt", TEXT).json()
    script = tmp_path / "connect_client.mjs"
    script.write_text(SCRIPT % {"modules": (PACKAGE / "node_modules").as_uri(), "gen": generated.as_uri()})
    result = subprocess.run(
        [NODE, str(script), stack.url, key_headers()["Authorization"], document["id"], encoding],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout)
    assert out["collection"] == "docs"
    assert out["statuses"] and out["statuses"][-1] == 6, out  # DOCUMENT_STATUS_READY
    assert "unexpected" not in out
    assert out["error"]["code"] == "NotFound" and "not" in out["error"]["message"].lower(), out
