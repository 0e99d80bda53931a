"""`python -m bench [ingest|worker|search ...]` (`make bench`): run the benchmarks, each printing
its table with the baseline beside every figure. With no name, all of them run in turn; options
after a single name go to that benchmark (`python -m bench search --queries 200`)."""

import importlib
import sys

BENCHES = {
    "ingest": "bench.ingest_bench",
    "worker": "bench.worker_bench",
    "search": "bench.search_bench",
    "ocr": "bench.ocr_compare",
    "webhooks": "bench.webhook_bench",
    "retrieval": "bench.retrieval_bench",
    "chunks": "bench.chunks_bench",
    "bundle": "bench.bundle_bench",
    "queue": "bench.fair_queue_bench",
    "console": "bench.console_bench",
}

names = [a for a in sys.argv[1:] if a in BENCHES] or list(BENCHES)
options = [a for a in sys.argv[1:] if a not in BENCHES] if len(names) == 1 else []
for name in names:
    print(f"\n=== {name} ===", flush=True)
    sys.argv = [BENCHES[name], *options]
    importlib.import_module(BENCHES[name]).main()
