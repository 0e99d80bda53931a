"""Functions the tests run inside a parse sandbox (Sandbox.call, by module path)."""

from __future__ import annotations

import mmap


def reserve_address_space(megabytes: int) -> int:
    """Map `megabytes` of memory without touching it (as ONNX Runtime's arenas and thread stacks
    do): address space, not resident memory. Returns the size mapped."""
    region = mmap.mmap(-1, megabytes * 1024 * 1024, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    size = len(region)
    region.close()
    return size


def touch_memory(megabytes: int) -> int:
    """Allocate and write `megabytes`: resident memory."""
    block = bytearray(megabytes * 1024 * 1024)
    for offset in range(0, len(block), 4096):
        block[offset] = 1
    return len(block)


_HELD: list[bytearray] = []


def hold_memory(megabytes: int) -> int:
    """Allocate, write and keep `megabytes` in the sandbox (what earlier documents may leave
    behind): resident until the sandbox ends. Returns the size now held."""
    _HELD.append(bytearray(megabytes * 1024 * 1024))
    for offset in range(0, len(_HELD[-1]), 4096):
        _HELD[-1][offset] = 1
    return sum(len(block) for block in _HELD)
