"""Typed metadata and `where` conditions from the command line (the SDK's sluice_client.filters).

A value is typed by its form: `true` / `false` a boolean, a decimal number a number, a date or
date-time in ISO 8601 (`2024-05-01`, `2024-05-01T12:00:00+02:00`; without a zone, UTC) a
timestamp, `[a,b]` a list of strings (upload only), and anything else a string; quotes
(`"2024"`, `'true'`) force a string. A condition is `KEY OP VALUE` with OP one of
`= != > >= < <=`, or `KEY in A,B,C`, `KEY not-in A,B`, `KEY exists`, `KEY not-exists`.
"""

from __future__ import annotations

from sluice_client.filters import condition, where
from sluice_client.filters import parse_value as value

__all__ = ["condition", "value", "where"]
