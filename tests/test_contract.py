"""The public contract: generated code is current and the names docs/architecture.md#the-public-contract binds exist."""

import subprocess
import sys
from pathlib import Path

from sluice.v1 import document_service_pb2, job_service_pb2, search_service_pb2, source_service_pb2

ROOT = Path(__file__).resolve().parent.parent


def test_generated_code_is_not_stale():
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_protos.py"), "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_binding_names_exist():
    services = {
        document_service_pb2.DESCRIPTOR.services_by_name["DocumentService"]: {
            "CreateCollection",
            "GetCollection",
            "ListCollections",
            "DeleteCollection",
            "UploadDocument",
            "GetDocument",
            "ListDocuments",
            "DeleteDocument",
            "RetryDocument",
            "ReprocessDocument",
            "WatchDocument",
        },
        job_service_pb2.DESCRIPTOR.services_by_name["JobService"]: {
            "ClaimJob",
            "RenewLease",
            "ReportStage",
            "ReadDocumentContent",
            "CompleteJob",
            "FailJob",
        },
        search_service_pb2.DESCRIPTOR.services_by_name["SearchService"]: {"Search"},
        source_service_pb2.DESCRIPTOR.services_by_name["SourceService"]: {
            "CreateSource",
            "GetSource",
            "ListSources",
            "DeleteSource",
            "SyncSource",
            "ListSourceRuns",
        },
    }
    for service, methods in services.items():
        assert service.full_name.startswith("sluice.v1.")
        assert methods <= set(service.methods_by_name)
    upload = document_service_pb2.DESCRIPTOR.services_by_name["DocumentService"].methods_by_name["UploadDocument"]
    assert upload.client_streaming and upload.output_type.name == "Document"
    watch = document_service_pb2.DESCRIPTOR.services_by_name["DocumentService"].methods_by_name["WatchDocument"]
    assert watch.server_streaming


def test_buf_lint_is_clean():

    import pytest

    buf = ROOT / "tools" / "node_modules" / ".bin" / "buf"
    if not buf.exists():
        pytest.skip("buf is not installed (tools/: npm ci) — npm is missing on this machine")
    result = subprocess.run([str(buf), "lint"], cwd=ROOT / "protos", capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
