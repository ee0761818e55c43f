"""Pausing Python's cyclic garbage collector around code that builds many small objects without cycles."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection inside (what is built there must hold no cycles); the collector's state is
    restored on the way out.

    Building millions of small objects (reading 100k buffers; hundreds of thousands of candidate tuples) starts a
    collection every few hundred allocations, each walking everything built so far.

    Examples:
        >>> import gc
        >>> with gc_paused():
        ...     gc.isenabled()
        False
        >>> gc.isenabled()
        True
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
