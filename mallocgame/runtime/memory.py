"""The process's memory allocator: freed memory kept for reuse rather than returned to the system."""

from __future__ import annotations

import ctypes

# glibc's mallopt parameters (malloc.h)
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
KEEP_BYTES = 1 << 30  # allocations below this come from the heap, and this much freed heap top is kept
TOP_PAD_BYTES = 256 << 20  # the heap grows by at least this much at once (address space; pages are touched on use)


def keep_freed_memory() -> bool:
    """Make glibc's malloc serve allocations up to :data:`KEEP_BYTES` (numpy columns, a file's bytes) from its heap
    and keep what is freed there for the next one, instead of mapping fresh pages for each and unmapping them on
    release: every fresh page costs a page fault in which the kernel zeroes it, which is most of the system time
    of reading and describing millions of buffers (experiments/results/bench_load_2m_load2m.md). The peak memory
    stays that of the largest moment. ``True`` when the allocator took the settings; ``False`` (nothing changed)
    where the C library has no ``mallopt`` or refuses one."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return all([mallopt(M_MMAP_THRESHOLD, KEEP_BYTES), mallopt(M_TRIM_THRESHOLD, KEEP_BYTES),
                mallopt(M_TOP_PAD, TOP_PAD_BYTES)])
