"""langchain-sluice and llama-index-sluice stand alone: installed from their wheels (with
sluice-client's), they import nothing of this repository but the SDK, and the installed
packages carry their type information."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPOSITORY_PACKAGES = {"sluice", "sluice_common", "sluice_cli", "sluice_ingest", "sluice_search", "sluice_worker"}


def test_the_installed_integrations_import_only_the_sdk_of_this_repository(installed):
    probe = (
        "import sys, langchain_sluice, llama_index_sluice; "
        "print(langchain_sluice.__file__); print(llama_index_sluice.__file__); "
        "print(sorted({m.split('.')[0] for m in sys.modules}))"
    )
    result = subprocess.run(
        [sys.executable, "-S", "-c", probe],
        env={"PYTHONPATH": installed["PYTHONPATH"]},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    langchain, llamaindex, loaded = result.stdout.splitlines()
    assert langchain.startswith(installed["SITE"]) and llamaindex.startswith(installed["SITE"])
    modules = set(ast.literal_eval(loaded))
    assert {"sluice_client", "langchain_core", "llama_index"} <= modules
    assert not REPOSITORY_PACKAGES & modules, modules
    for package in ("langchain_sluice", "llama_index_sluice"):
        assert (Path(installed["SITE"]) / package / "py.typed").is_file(), package
