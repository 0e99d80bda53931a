"""The documentation stays true: the configuration table matches the settings classes, the
README's header and links hold, and its Python example is valid code."""

from __future__ import annotations

import ast
import itertools
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def test_configuration_doc_is_generated_from_the_current_settings():
    result = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "gen_configuration.py"), "--check"], capture_output=True, text=True
    )
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
    for command in (
        "collections create",
        "upload",
        "sluice ls",
        "sluice watch",
        "sluice show",
        "sluice retry",
        "sluice rm",
        "sluice search",
        "--json",
    ):
        assert command in README, command


def test_state_machine_tables_are_generated_from_the_transition_tables():
    result = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "gen_state_machines.py"), "--check"], capture_output=True, text=True
    )
    assert result.returncode == 0, (
        "docs/architecture.md is stale: run `.venv/bin/python docs/gen_state_machines.py`\n" + result.stderr
    )


# A move written in prose: `PENDING → PARSING → CHUNKING`, `PENDING|RUNNING → FAILED`.
MOVE_CHAIN = re.compile(r"\b[A-Z]{3,}(?:\|[A-Z]{3,})*(?:\s*(?:→|->)\s*[A-Z]{3,}(?:\|[A-Z]{3,})*)+\b")


def moves_named_in(text: str) -> list[tuple[str, list[list[str]]]]:
    """Every chain of state names joined by arrows, with its paragraph (for context)."""
    found = []
    for paragraph in re.split(r"\n\s*\n", text):
        for chain in MOVE_CHAIN.findall(paragraph):
            steps = [step.split("|") for step in re.split(r"\s*(?:→|->)\s*", chain)]
            found.append((paragraph, steps))
    return found


def test_every_move_the_docs_name_is_an_edge_of_its_transition_table():
    from sluice_ingest import domain

    tables = {
        "document": {(str(a), str(b)) for a, b in domain.DOCUMENT_TRANSITIONS},
        "job": {(str(a), str(b)) for a, b in domain.JOB_TRANSITIONS},
        "generation": {(str(a), str(b)) for a, b in domain.GENERATION_TRANSITIONS},
    }
    states = {name: {s for edge in edges for s in edge} for name, edges in tables.items()}
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted(ROOT.glob("services/*/README.md"))]
    wrong, checked = [], 0
    for page in pages:
        for paragraph, steps in moves_named_in(page.read_text()):
            named = {s for step in steps for s in step}
            machines = [name for name, known in states.items() if named <= known]
            if not machines:
                continue  # not a chain of one machine's states (another enum, an acronym)
            if len(machines) > 1:  # only states the document and the job share: the paragraph says which
                said = [name for name in machines if re.search(rf"\b{name}s?\b", paragraph, re.I)]
                machines = said if len(said) == 1 else machines
            for source_step, target_step in itertools.pairwise(steps):
                for source in source_step:
                    for target in target_step:
                        checked += 1
                        if not any((source, target) in tables[name] for name in machines):
                            wrong.append(
                                f"{page.relative_to(ROOT)}: {source} → {target} is no edge of the {'/'.join(machines)} table"
                            )
    assert checked > 10, "the scan found no moves: it is broken"
    assert not wrong, "\n".join(wrong)


def test_the_move_scan_catches_a_job_failing_while_pending():
    ((_paragraph, steps),) = moves_named_in("When attempts run out, the job goes `PENDING|RUNNING → FAILED`.")
    assert steps == [["PENDING", "RUNNING"], ["FAILED"]]
    from sluice_ingest.domain import JOB_TRANSITIONS, JobStatus

    assert (JobStatus.PENDING, JobStatus.FAILED) not in JOB_TRANSITIONS  # what the old architecture.md said
