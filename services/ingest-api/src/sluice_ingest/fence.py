"""`sluice-fence`: after a database is restored from a backup, take away every lease it brought
back (docs/operations.md, "Backup and restore").

A job that was RUNNING when the backup was taken comes back RUNNING, with the lease token its
worker held then. That worker may still be alive: with the old token it could renew the lease
and write stages and chunks into a database whose history went another way. So every RUNNING
job gets a new token that no worker holds, and a lease already expired (locked_at at the epoch):
the old token's writes fail with LEASE_NOT_HELD (rule 6's fencing), and the next claim takes the
job over as after any crash (rule 8 if its attempts are spent). Its open attempt is closed as
LEASE_EXPIRED, as a takeover closes it. One transaction; run it before any service starts on the
restored database.
"""

from __future__ import annotations

import sys
from typing import Any

import psycopg
from psycopg import sql

from .domain import AttemptOutcome, JobStatus
from .operator_tool import UNREACHABLE, tool_parser, with_database

FENCE_SQL = sql.SQL(
    """
WITH fenced AS (
    UPDATE ingestion_jobs SET lease_token = gen_random_uuid(), locked_at = 'epoch', updated_at = now()
    WHERE status = {running}
    RETURNING id
), closed AS (
    UPDATE job_attempts a
    SET outcome = {expired}, error_code = 'LEASE_FENCED_BY_RESTORE', retryable = true, ended_at = now(),
        error_message = 'the database was restored from a backup: this lease was taken away and the job is taken over'
    FROM fenced WHERE a.job_id = fenced.id AND a.outcome = {open}
    RETURNING a.id
)
SELECT (SELECT count(*) FROM fenced), (SELECT count(*) FROM closed)
"""
).format(
    running=sql.Literal(str(JobStatus.RUNNING)),
    expired=sql.Literal(str(AttemptOutcome.LEASE_EXPIRED)),
    open=sql.Literal(str(AttemptOutcome.RUNNING)),
)


def fence_leases(conn: psycopg.Connection[Any]) -> int:
    """Take away every RUNNING job's lease (see the module); the number of jobs fenced."""
    with conn.transaction():
        row = conn.execute(FENCE_SQL).fetchone()
    return int(row[0]) if row else 0


def main(argv: list[str] | None = None) -> int:
    parser = tool_parser(
        "sluice-fence",
        "After a restore, take away every lease the restored database brought back "
        "(docs/operations.md, 'Backup and restore'). Run it before starting any service.",
        "the restored database (default: SLUICE_DATABASE_URL)",
    )
    fenced = with_database(parser, parser.parse_args(argv), fence_leases)
    if fenced is None:
        return UNREACHABLE
    print(f"fenced {fenced} lease{'' if fenced == 1 else 's'}: their jobs will be taken over by the next claims")
    return 0


if __name__ == "__main__":
    sys.exit(main())
