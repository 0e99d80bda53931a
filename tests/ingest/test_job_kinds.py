"""The INGEST/EMBED difference lives in one table (store/job_kinds.py): every kind has a policy,
PostgreSQL reads the same rows as Python, and no queue statement or branch names a kind."""

from __future__ import annotations

import re
from pathlib import Path

import psycopg
from sluice_ingest.domain import JobKind
from sluice_ingest.store import claims, commit, leases, stages
from sluice_ingest.store.job_kinds import KIND_POLICIES, KIND_POLICY_CTE


def test_every_kind_has_its_policy():
    assert set(KIND_POLICIES) == set(JobKind)
    for kind, policy in KIND_POLICIES.items():
        assert policy.kind is kind
        assert "{status}" in policy.commit_refusal


def test_the_sql_reads_the_same_table(database_url):
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            psycopg.sql.SQL(
                "WITH {} SELECT kind::text, drives_document, writes_generation::text, follows_active_generation,"
                " commits_from::text, replaces_every_generation FROM kind_policy"
            ).format(KIND_POLICY_CTE)
        ).fetchall()
    assert {row[0]: row[1:] for row in rows} == {
        str(kind): (
            p.drives_document,
            str(p.writes_generation),
            p.follows_active_generation,
            str(p.commits_from),
            p.replaces_every_generation,
        )
        for kind, p in KIND_POLICIES.items()
    }


def test_no_queue_statement_or_branch_names_a_kind():
    cte = KIND_POLICY_CTE.as_string(None)
    statements = [
        claims.CLAIM_SQL,
        claims.FAST_CLAIM_SQL,
        stages.REPORT_STAGE_SQL,
        stages.SAVE_SNAPSHOT_SQL,
        commit.COMPLETE_LOCK_SQL,
        leases.HOLD_JOB_SQL,
    ]
    for statement in statements:
        text = statement.decode().replace(cte, "")
        assert "'INGEST'" not in text and "'EMBED'" not in text, text
    source = "\n".join(Path(module.__file__).read_text() for module in (claims, stages, commit, leases))
    # Only the creation of an EMBED job (job_kinds.add_embed_job) names a kind. (A ClaimedJob's
    # `kind` is its row's, "claimed" or "exhausted"; its job's kind is `job_kind`.)
    assert not re.search(r"[!=]=\s*JobKind|job_kind\s*[!=]=|\[\"kind\"\]\s*[!=]=|JobKind\.INGEST|'INGEST'|'EMBED'", source)
