"""Generated from protos/sluice/v1 by clients/python/gen_stubs.py; do not edit."""
