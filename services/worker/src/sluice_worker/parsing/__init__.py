"""Parsing and chunking adapters.

`formats`, `text`, `pdf`, `partition` and `chunking` run inside the parse sandbox (a separate
process with time and memory limits, see `sandbox`); only `sandbox` is used by the worker.
"""
