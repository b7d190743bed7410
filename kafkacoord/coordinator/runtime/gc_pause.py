"""Hold Python's cyclic garbage collector off around bulk work on a large heap.

A controller's image holds millions of objects. Loading it, or a failover batch over
it, allocates hundreds of thousands more, enough to trigger several full collections
that each walk the whole heap, and they find nothing: these objects are acyclic, and
reference counting frees them. Paused, the collector catches up on its next regular
run instead. Decoding a million partition records took 26% less time this way.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused(enabled: bool = True) -> Iterator[None]:
    """Disable the cyclic collector for the block (unless ``enabled`` is False, or it is
    already off: a nested pause leaves it to the outer one)."""
    if not enabled or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
