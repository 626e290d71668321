"""Keep freed host memory for reuse: the C allocator setting behind the derivative batches'
speed on CPU.

A batch of derivatives returns (B, nv, nv) matrices: 3 x 47 MB for 4096 states of
talos_reduced.  glibc's ``malloc`` serves blocks that large with fresh ``mmap`` pages and
returns them to the operating system when they are freed, so every call writes its results
into pages the kernel must first fault in and zero.  On the 2-core VM of
``benchmarks/results/allocator.json`` (``derivatives_batch``, B = 4096, one core, the two
settings alternately in one process) keeping freed memory took talos_reduced from 34.8 to
28.9 µs per state and g1 from 28.8 to 24.7 (Pinocchio's ``computeABADerivatives``: 32.7 and
28.0 in the same loop); between runs the gain varied from none to 20 %.  Pinocchio writes
into the ``Data`` it was given and pays nothing of the kind; the same without a
process-wide setting: ``jaxdyn.derivatives_batch(..., out=previous)`` writes into the
previous result's buffers (25.9 and 22.7 µs in the same run).

:func:`tune_host_allocator` tells glibc to serve every block from its heaps and to keep freed
memory there (``mallopt(M_MMAP_MAX, 0)``, ``mallopt(M_TRIM_THRESHOLD, 1 GiB)``): the next
call's buffers reuse pages already mapped.  The same as starting Python with
``MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=1073741824`` in the environment.  It is
process-wide and jaxdyn never does it on its own: the process keeps the memory it freed
(its resident size stays near its peak), which a long-running simulation or training loop
wants and a short script need not care about.

Without either, and without keeping anything: start Python with
``GLIBC_TUNABLES=glibc.malloc.hugetlb=1`` (glibc >= 2.35; transparent huge pages set to
``madvise`` or ``always``).  glibc then asks for huge pages on the blocks it maps and the
kernel faults them in 2 MB at a time: talos_reduced 34.1 -> 27.4 µs per state with glibc's
defaults otherwise (Pinocchio 33.0 and 32.9; ``benchmarks/results/allocator_hugetlb.json``).
Tunables are read when the process starts, so jaxdyn cannot set this one itself.
"""
from __future__ import annotations

import ctypes
import ctypes.util

M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
KEEP_FREED_BYTES = 1 << 30
"""Freed memory at the top of a heap that glibc keeps instead of returning it (1 GiB)."""


def _libc():
    """The process's C library if it has ``mallopt`` (glibc), else None."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else ctypes.CDLL(None)
    except OSError:                         # pragma: no cover - no C library to load
        return None
    return libc if hasattr(libc, "mallopt") else None


def tune_host_allocator() -> bool:
    """Have glibc's allocator serve large blocks from its heaps instead of ``mmap`` and keep
    freed memory (up to :data:`KEEP_FREED_BYTES`) for reuse.  Process-wide and for the rest of
    the process (see the module docstring for what it costs and saves).  Returns whether it
    was applied: False where the C library has no ``mallopt`` (macOS, musl), where nothing
    changes."""
    libc = _libc()
    if libc is None:
        return False
    return bool(libc.mallopt(M_MMAP_MAX, 0)) and bool(libc.mallopt(M_TRIM_THRESHOLD, KEEP_FREED_BYTES))
