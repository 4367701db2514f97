"""Freed memory goes back to the system: the allocator setting every stage runs under.

glibc maps an allocation of its mmap threshold or more on its own, so freeing it returns the memory
at once; smaller ones come from a heap, whose freed pages are kept unless they sit at its top. The
threshold starts at 128 KiB and climbs (up to 32 MiB) each time a mapped block is freed. A stage that
scores a block of questions against every unit at a time allocates and frees a few MiB per block, so
after the first climb those blocks come from the heap, and small objects allocated between them pin
the freed pages: at 100,000 units stage 07 held most of its 9 GiB peak in pages it no longer
used (docs/performance.md). Fixing the threshold keeps every block of MMAP_THRESHOLD or more mapped on its own.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform

MMAP_THRESHOLD = 1 << 20          # bytes: blocks this large or larger are mapped on their own
_M_MMAP_THRESHOLD = -3            # glibc malloc.h's mallopt parameter number
_set: bool | None = None


def return_freed_blocks() -> bool:
    """Fix glibc's mmap threshold at MMAP_THRESHOLD for this process (once; later calls do nothing).
    Returns whether it is in force: False where the C library is not glibc (musl, macOS, Windows),
    which keep their own policies."""
    global _set
    if _set is None:
        _set = False
        if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
            try:
                libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
                _set = bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
            except (OSError, AttributeError):
                _set = False
    return _set
