"""`sluice eval QUERIES.jsonl --collection NAME`: retrieval quality of a collection, per search mode.

Every query of the file goes through the public Search RPC, one at a time, in each mode asked
for; the hits are scored as they come back (sluice_common.evaluation: hit@1, hit@3, hit@10,
MRR@10, nDCG@10) and each call is timed at the client (p50). The file format and the metrics
are in docs/evaluation.md.
"""

from __future__ import annotations

import argparse
import time

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from sluice_client import Client, SluiceError
from sluice_common.evaluation import METRICS, QuerySetError, evaluate, load_queries

from . import render
from .commands import MODES
from .errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CliError, from_sdk_error

DEFAULT_MODES = "vector,keyword,hybrid"
WARM_UP_SECONDS = 120.0
TITLES = {"hit@1": "hit@1", "hit@3": "hit@3", "hit@10": "hit@10", "mrr@10": "MRR@10", "ndcg@10": "nDCG@10"}


def parse_modes(value: str) -> list[str]:
    modes = [m.strip().lower() for m in value.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        raise CliError(
            f"--modes: unknown mode {', '.join(unknown) or '(none)'}; choose from {', '.join(MODES)}",
            EXIT_USAGE,
            "INVALID_ARGUMENT",
        )
    return list(dict.fromkeys(modes))


def run_eval(client: Client, args: argparse.Namespace) -> int:
    modes = parse_modes(args.modes)
    try:
        queries = load_queries(args.queries)
    except QuerySetError as error:
        raise CliError(f"query set {error}", EXIT_USAGE, "QUERY_SET_INVALID") from None
    results: dict[str, dict[str, float]] = {}
    # Warm-up, not counted: the first search of a collection on a local model loads the model in
    # search (seconds, more on a busy machine), which would otherwise time out or skew the p50.
    for mode in modes:
        try:
            client.search(args.collection, queries[0].query, top_k=args.k, mode=MODES[mode], timeout=WARM_UP_SECONDS)
        except SluiceError as error:
            failure = from_sdk_error(error)
            failure.message = f"query {queries[0].id!r} ({mode}): {failure.message}"
            raise failure from None
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(bar_width=30),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=render.err,
        transient=True,
        disable=args.json or not render.err.is_terminal,
    ) as progress:
        for mode in modes:
            task = progress.add_task(mode, total=len(queries))
            ranked, latencies = {}, {}
            for query in queries:
                started = time.perf_counter()
                try:
                    response = client.search(args.collection, query.query, top_k=args.k, mode=MODES[mode]).raw
                except SluiceError as error:
                    failure = from_sdk_error(error)
                    failure.message = f"query {query.id!r} ({mode}): {failure.message}"
                    raise failure from None
                latencies[query.id] = time.perf_counter() - started
                ranked[query.id] = response.hits
                progress.advance(task)
            results[mode] = evaluate(queries, ranked, latencies).as_dict()
    below = [mode for mode, row in results.items() if args.fail_under is not None and row["mrr@10"] < args.fail_under]
    if args.json:
        render.print_json({"collection": args.collection, "queries": len(queries), "top_k": args.k, "modes": results})
        return EXIT_FAILED if below else EXIT_OK
    table = Table(
        title=f"{escape(args.collection)}: {len(queries)} queries from {escape(str(args.queries))}, top_k {args.k}",
        title_justify="left",
    )
    table.add_column("mode")
    for metric in METRICS:
        table.add_column(TITLES[metric], justify="right")
    table.add_column("p50 ms", justify="right")
    for mode, row in results.items():
        table.add_row(mode.upper(), *(f"{row[m]:.3f}" for m in METRICS), f"{row['p50_ms']:.1f}")
    render.out.print(table)
    if below:
        render.err.print(f"[bold red]error:[/] MRR@10 below {args.fail_under} in {', '.join(below)}", soft_wrap=True)
        return EXIT_FAILED
    return EXIT_OK
