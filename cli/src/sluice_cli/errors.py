"""Exit codes and the one translation from failures to a readable line and an exit code.

Scripts rely on these codes (docs/cli.md):

    0  OK
    1  the operation failed (a document FAILED, an upload was refused, ...)
    2  usage error or invalid argument
    3  not found (collection, document)
    4  server unavailable (not running, unreachable, timed out)
"""

from __future__ import annotations

import grpc

from sluice_common.errors import error_info

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_UNAVAILABLE = 4

# gRPC status codes to exit codes; anything not listed is an operation failure (1).
_EXIT_BY_CODE = {
    grpc.StatusCode.INVALID_ARGUMENT: EXIT_USAGE,
    grpc.StatusCode.OUT_OF_RANGE: EXIT_USAGE,
    grpc.StatusCode.NOT_FOUND: EXIT_NOT_FOUND,
    grpc.StatusCode.UNAVAILABLE: EXIT_UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED: EXIT_UNAVAILABLE,
}


class CliError(Exception):
    """A failure to report as one line on stderr, ending the command with `exit_code`."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILED, reason: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
        self.reason = reason


def exit_code_of(error: grpc.RpcError) -> int:
    code = error.code() if hasattr(error, "code") else None
    return _EXIT_BY_CODE.get(code, EXIT_FAILED)


def from_rpc_error(error: grpc.RpcError, *, service: str, address: str) -> CliError:
    """A CliError with the server's ErrorInfo reason and message, or a hint when unreachable."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    exit_code = _EXIT_BY_CODE.get(code, EXIT_FAILED)
    info = None
    try:
        info = error_info(error)
    except Exception:  # noqa: BLE001 - malformed trailers must not hide the real error
        info = None
    reason = info.reason if info else ""
    details = (error.details() if hasattr(error, "details") else "") or ""
    if info is None and code is grpc.StatusCode.UNAVAILABLE:
        # Transport failure: grpc's own text ("failed to connect to all addresses; ...") is noise.
        return CliError(
            f"cannot reach {service} at {address} (is it running? start everything with `make run`)",
            EXIT_UNAVAILABLE,
            "UNAVAILABLE",
        )
    if info is None and code is grpc.StatusCode.DEADLINE_EXCEEDED:
        return CliError(f"{service} at {address} did not answer in time", EXIT_UNAVAILABLE, "DEADLINE_EXCEEDED")
    if code is grpc.StatusCode.UNAUTHENTICATED:
        hint = ("give a key with --api-key or SLUICE_API_KEY, or run from the folder where `make run` wrote "
                ".sluice/credentials")
        return CliError(f"{details.strip() or 'not authenticated'}: {hint} [{reason or 'UNAUTHENTICATED'}]",
                        EXIT_FAILED, reason or "UNAUTHENTICATED")
    if not reason:
        reason = code.name if code is not None else "UNKNOWN"
    message = details.strip() or "no details given"
    return CliError(f"{message} [{reason}]", exit_code, reason)
