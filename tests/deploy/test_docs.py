"""The documentation stays true: the configuration table matches the settings classes, the
README's header and links hold, and its Python example is valid code."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def test_configuration_doc_is_generated_from_the_current_settings():
    result = subprocess.run([sys.executable, str(ROOT / "docs" / "gen_configuration.py"), "--check"], capture_output=True, text=True)
    assert result.returncode == 0, "docs/configuration.md is stale: run `.venv/bin/python docs/gen_configuration.py`"


def test_every_settings_field_is_documented():
    from sluice_common.embedders import EmbedderSettings
    from sluice_common.reranking import RerankSettings
    from sluice_common.settings import CommonSettings
    from sluice_ingest.settings import IngestSettings
    from sluice_search.settings import SearchSettings
    from sluice_worker.settings import WorkerSettings

    text = (ROOT / "docs" / "configuration.md").read_text()
    missing = [
        f"SLUICE_{name.upper()}"
        for cls in (CommonSettings, IngestSettings, SearchSettings, WorkerSettings, EmbedderSettings, RerankSettings)
        for name in cls.model_fields
        if f"`SLUICE_{name.upper()}`" not in text
    ]
    assert not missing, f"undocumented settings: {missing}"


def test_readme_keeps_the_two_commands_at_the_top():
    first_block = README.split("```")[1]
    assert "make run" in first_block and "make test" in first_block


def test_readme_links_point_at_files_that_exist():
    for target in re.findall(r"\]\(([^)#]+)\)", README):
        if "://" not in target:
            assert (ROOT / target).exists(), f"README links to missing {target}"


def test_readme_python_example_is_valid_python():
    blocks = re.findall(r"```python\n(.*?)```", README, flags=re.S)
    assert blocks
    for block in blocks:
        ast.parse(block)


def test_readme_mentions_every_cli_command():
    for command in ("collections create", "upload", "sluice ls", "sluice watch", "sluice show", "sluice retry", "sluice rm", "sluice search", "--json"):
        assert command in README, command
