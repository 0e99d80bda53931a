"""Exit codes and the one translation from failures to a readable line and an exit code.

Scripts rely on these codes (docs/cli.md):

    0  OK
    1  the operation failed (a document FAILED, an upload was refused, ...)
    2  usage error or invalid argument
    3  not found (collection, document)
    4  server unavailable (not running, unreachable, a TLS handshake that failed, timed out)
"""

from __future__ import annotations

import grpc
from sluice_client import errors as sdk
from sluice_common.reasons import Reason

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


def from_sdk_error(error: sdk.SluiceError) -> CliError:
    """A CliError with the server's reason and message, or what failed on the way to the server."""
    if isinstance(error, sdk.ConfigError):
        return CliError(error.message, EXIT_USAGE, error.reason)
    if isinstance(error, sdk.TLSError):
        return CliError(error.message, EXIT_UNAVAILABLE, error.reason)
    if isinstance(error, sdk.ConnectionFailed):
        message = error.message
        if error.reason == Reason.UNAVAILABLE:  # nothing answered: the likely cause, and the fix
            message = f"cannot reach {error.service} at {error.address} (is it running? start everything with `make run`)"
        return CliError(message, EXIT_UNAVAILABLE, error.reason)
    if isinstance(error, sdk.WaitTimeout):
        return CliError(error.message, EXIT_FAILED, "TIMEOUT")
    if error.code is None:  # the SDK's own checks (a file that cannot be read, …)
        return CliError(error.message, EXIT_FAILED, error.reason)
    if error.code is grpc.StatusCode.DEADLINE_EXCEEDED and error.reason == Reason.DEADLINE_EXCEEDED:
        return CliError(error.message, EXIT_UNAVAILABLE, error.reason)
    if error.code is grpc.StatusCode.UNAUTHENTICATED:
        hint = "give a key with --api-key or SLUICE_API_KEY, or run from the folder where `make run` wrote .sluice/credentials"
        return CliError(f"{error.message.strip() or 'not authenticated'}: {hint} [{error.reason}]", EXIT_FAILED, error.reason)
    return CliError(
        f"{error.message.strip() or 'no details given'} [{error.reason}]",
        _EXIT_BY_CODE.get(error.code, EXIT_FAILED),
        error.reason,
    )


def from_rpc_error(error: grpc.RpcError, *, service: str, address: str) -> CliError:
    """A raw gRPC failure (a call made outside the SDK) as a CliError."""
    return from_sdk_error(sdk.from_rpc_error(error, service=service, address=address))
