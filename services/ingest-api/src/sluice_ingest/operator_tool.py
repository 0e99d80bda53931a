"""What ingest-api's operator tools share (`sluice-check`, `sluice-fence`; docs/operations.md): the
database from `--database-url`, else from SLUICE_DATABASE_URL as ingest-api reads it, and one
line, not a traceback, when it cannot be reached."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg

T = TypeVar("T")
UNREACHABLE = 2  # the exit status when the database cannot be reached


def tool_parser(prog: str, description: str, url_help: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--database-url", help=url_help)
    return parser


def with_database(
    parser: argparse.ArgumentParser, args: argparse.Namespace, work: Callable[[psycopg.Connection[Any]], T]
) -> T | None:
    """`work` on an autocommit connection to the tool's database; None (after one line on stderr)
    when it cannot be reached."""
    url = args.database_url
    if not url:
        from .settings import IngestSettings

        url = IngestSettings().database_url
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            return work(conn)
    except psycopg.OperationalError as error:
        print(f"{parser.prog}: cannot reach the database: {str(error).splitlines()[0]}", file=sys.stderr)
        return None
