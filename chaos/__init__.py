"""Chaos testing of a whole Sluice on one machine: `python -m chaos` (see chaos/driver.py)."""

import os

# The driver forks (pg_ctl, upload clients) while gRPC threads run; gRPC's fork handlers
# then abort the child ("Check failed: next_worker->state == KICKED"). The children exec at
# once and need none of gRPC's state. Must be set before grpc is imported.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
