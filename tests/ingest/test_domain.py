"""Unit tests of the pure state-machine code (no IO)."""

import itertools

import pytest
from sluice_ingest.domain import (
    DOCUMENT_TRANSITIONS,
    GENERATION_TRANSITIONS,
    JOB_TRANSITIONS,
    DocumentStatus,
    GenerationState,
    IllegalTransition,
    JobStatus,
    check_document_transition,
    check_generation_transition,
    check_job_transition,
    document_sources,
    generation_sources,
    job_sources,
    retry_delay_seconds,
    retry_message,
    safe_error_message,
    safe_filename,
    should_retry,
)


@pytest.mark.parametrize("current,target", list(itertools.product(DocumentStatus, DocumentStatus)))
def test_document_table_walked_exhaustively(current, target):
    if (current, target) in DOCUMENT_TRANSITIONS:
        assert check_document_transition(current, target) == target
        assert str(current) in document_sources(target)
    else:
        with pytest.raises(IllegalTransition):
            check_document_transition(current, target)
        assert str(current) not in document_sources(target)


@pytest.mark.parametrize("current,target", list(itertools.product(JobStatus, JobStatus)))
def test_job_table_walked_exhaustively(current, target):
    if (current, target) in JOB_TRANSITIONS:
        assert check_job_transition(current, target) == target
        assert str(current) in job_sources(target)
    else:
        with pytest.raises(IllegalTransition):
            check_job_transition(current, target)
        assert str(current) not in job_sources(target)


@pytest.mark.parametrize("current,target", list(itertools.product(GenerationState, GenerationState)))
def test_generation_table_walked_exhaustively(current, target):
    if (current, target) in GENERATION_TRANSITIONS:
        assert check_generation_transition(current, target) == target
        assert str(current) in generation_sources(target)
    else:
        with pytest.raises(IllegalTransition):
            check_generation_transition(current, target)
        assert str(current) not in generation_sources(target)


def test_every_edge_says_why():
    for table in (DOCUMENT_TRANSITIONS, JOB_TRANSITIONS, GENERATION_TRANSITIONS):
        assert all(len(reason) > 10 for reason in table.values())


def test_a_generation_switches_once_and_ends_for_good():
    # Only a BUILDING generation becomes ACTIVE (the switch), and RETIRED and CANCELLED are final:
    # a dropped generation's chunks and index never serve again.
    assert [a for (a, b) in GENERATION_TRANSITIONS if b == GenerationState.ACTIVE] == [GenerationState.BUILDING]
    assert not [b for (a, b) in GENERATION_TRANSITIONS if a in (GenerationState.RETIRED, GenerationState.CANCELLED)]


def test_ready_is_reached_only_from_indexing():
    # Rule 1: READY is the commit flag, set only after every stage.
    assert [a for (a, b) in DOCUMENT_TRANSITIONS if b == DocumentStatus.READY] == [DocumentStatus.INDEXING]


def test_terminal_states_only_restart_by_request():
    assert {b for (a, b) in DOCUMENT_TRANSITIONS if a == DocumentStatus.READY} == {DocumentStatus.PENDING}
    assert {b for (a, b) in DOCUMENT_TRANSITIONS if a == DocumentStatus.FAILED} == {DocumentStatus.PENDING}
    assert {b for (a, b) in JOB_TRANSITIONS if a in (JobStatus.SUCCEEDED, JobStatus.FAILED)} == {JobStatus.PENDING}


def test_backoff_doubles_and_caps_at_300_seconds():
    assert [retry_delay_seconds(n, 5) for n in range(1, 9)] == [5, 10, 20, 40, 80, 160, 300, 300]
    assert retry_delay_seconds(1, 0.5) == 0.5
    assert retry_delay_seconds(1000, 1) == 300
    with pytest.raises(ValueError):
        retry_delay_seconds(0, 5)


def test_should_retry():
    assert should_retry(True, 1, 3) and should_retry(True, 2, 3)
    assert not should_retry(True, 3, 3)
    assert not should_retry(False, 1, 3)


def test_retry_message_names_attempt_and_cause():
    assert retry_message(2, 5, "rate limited") == "attempt 2/5 failed temporarily, will retry automatically: rate limited"


def test_safe_error_message():
    assert safe_error_message("bad\x00file\nhere") == "bad file here"
    assert safe_error_message("") == "processing failed for an unknown reason"
    assert len(safe_error_message("x" * 5000)) == 2000


@pytest.mark.parametrize(
    "raw,clean",
    [
        ("../../etc/passwd", "passwd"),
        ("C:\\Users\\me\\report.pdf", "report.pdf"),
        ("a\x00b\x1f.txt", "ab.txt"),
        ("..", ""),
        ("  ", ""),
        ("文档.md", "文档.md"),
    ],
)
def test_safe_filename(raw, clean):
    assert safe_filename(raw) == clean


def test_safe_filename_bounds_length_and_keeps_extension():
    name = safe_filename("a" * 400 + ".pdf")
    assert len(name) == 255 and name.endswith(".pdf")


def test_every_state_carries_its_meaning_beside_it():
    """docs/architecture.md's state tables are generated from these (docs/gen_state_machines.py):
    a state added without a meaning would leave a blank row, so the generator refuses it."""
    from sluice_ingest.domain import DocumentStatus, GenerationState, JobStatus

    for states in (DocumentStatus, JobStatus, GenerationState):
        for state in states:
            assert state.meaning and state.meaning[0].islower(), state
            assert states(state.value) is state  # a lookup by value still works
    assert [s for s in DocumentStatus if s.searchable] == [DocumentStatus.READY]


def test_the_reindex_decision_walks_every_case():
    """decide_reindex (domain.py), pure: what ReindexCollection does, or why it does nothing."""
    from sluice_common.errors import FailedPrecondition
    from sluice_ingest.domain import BuildingGeneration, IndexSettings, ReindexDecision, decide_reindex

    active = IndexSettings("hashing", "hashing-v1", 8, "halfvec")
    wanted = IndexSettings("sentence_transformers", "all-MiniLM-L6-v2", 384, "halfvec")

    def building(settings=wanted, still=True, gate=None, failed=2):
        return BuildingGeneration(settings, still, gate, failed)

    def refused(reason, **kwargs):
        with pytest.raises(FailedPrecondition) as error:
            decide_reindex("docs", kwargs.get("wanted", wanted), kwargs.get("active", active), kwargs.get("building"))
        assert error.value.reason == reason, error.value
        return str(error.value)

    assert decide_reindex("docs", wanted, active, None) is ReindexDecision.NEW_GENERATION
    # Only the precision changes: a reindex too.
    assert (
        decide_reindex("docs", IndexSettings("hashing", "hashing-v1", 8, "float4"), active, None)
        is ReindexDecision.NEW_GENERATION
    )
    assert "nothing to reindex" in refused("EMBEDDER_UNCHANGED", wanted=active)
    assert decide_reindex("docs", wanted, active, building()) is ReindexDecision.RETRY_FAILED
    assert decide_reindex("docs", wanted, active, building(gate=True)) is ReindexDecision.RETRY_FAILED
    assert "cancel it first" in refused(
        "REINDEX_IN_PROGRESS", building=building(settings=IndexSettings("openai", "m", 3, "halfvec"))
    )
    assert "cancelled meanwhile" in refused("NO_REINDEX_IN_PROGRESS", building=building(still=False))
    assert "another eval set" in refused("REINDEX_IN_PROGRESS", building=building(gate=False))
    assert "no document failed" in refused("REINDEX_IN_PROGRESS", building=building(failed=0))
    # A cancelled generation is reported as such whatever else is true of it.
    assert "cancelled meanwhile" in refused("NO_REINDEX_IN_PROGRESS", building=building(still=False, gate=False, failed=0))
