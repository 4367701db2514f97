"""Freed memory goes back to the system while a loop scores block after block of questions against
every unit.

glibc maps an allocation of its mmap threshold or more on its own, so freeing it returns the memory
at once; smaller ones come from a heap, whose freed pages are kept unless they sit at its top. The
threshold starts at 128 KiB and climbs (up to 32 MiB) each time a mapped block is freed. A loop that
scores a block of questions against every unit allocates and frees a block of indexes.BLOCK_CELLS
scores (16 MiB of float32) each time round, so after the first climb those blocks come from the heap,
and small objects allocated between them pin the freed pages: at 100,000 units stage 07 held most of
its 9 GiB peak in pages it no longer used (docs/performance.md).

Inside ``returning_freed_blocks()`` the threshold is fixed at MMAP_THRESHOLD, so each such block is
mapped on its own and unmapped when freed. Only there: a fixed low threshold maps and faults in afresh
every large temporary of everything else too (a small BERT's forward pass ran about a fifth slower
under it), so on leaving the outermost such loop it is set to HEAP_THRESHOLD, where glibc's own policy
would have climbed to.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import platform
import threading
from collections.abc import Iterator

MMAP_THRESHOLD = 1 << 20          # bytes: inside a scoring loop, blocks this large or larger are mapped on their own
HEAP_THRESHOLD = 32 << 20         # bytes: outside, glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit systems
_M_MMAP_THRESHOLD = -3            # glibc malloc.h's mallopt parameter number
_lock = threading.Lock()
_depth = 0


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    """The C library when it is glibc (None on musl, macOS, Windows, which keep their own policies)."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


def _threshold(size: int) -> bool:
    libc = _glibc()
    return bool(libc is not None and libc.mallopt(_M_MMAP_THRESHOLD, size))


@contextlib.contextmanager
def returning_freed_blocks() -> Iterator[bool]:
    """Within: every block of MMAP_THRESHOLD or more is mapped on its own, so freeing it returns it to the
    system. Yields whether that is in force (False where the C library is not glibc). Nested uses share
    the outermost's setting; leaving the outermost sets the threshold to HEAP_THRESHOLD."""
    global _depth
    with _lock:
        _depth += 1
        fixed = _threshold(MMAP_THRESHOLD) if _depth == 1 else _glibc() is not None
    try:
        yield fixed
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                _threshold(HEAP_THRESHOLD)
