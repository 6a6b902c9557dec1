"""Memory the one-pass pipeline reuses: glibc's ``malloc`` told to keep the pages it frees.

See docs/install.md, "One pass".
"""

from __future__ import annotations

import ctypes

# The pipeline hands ~1 MiB chunks from thread to thread (received, inflated, written and hashed),
# each freed by another thread than the one that made it. By default glibc serves a chunk that size
# with mmap (until its threshold adapts) or from a heap it trims once a few MiB lie free at its top,
# so chunk after chunk is memory the kernel faults in and zeroes again: on 198 MB of real libraries,
# ~13,000 page faults of the install's pass, ~0.04 s of kernel time on the cores the inflating
# needs. keep_freed raises the mmap and trim thresholds (mallopt) for the rest of the process, a
# command that ends with its install, so the chunks reuse the same pages: the pass then faults in
# its working set once (~6,000). What the process holds at its peak is unchanged; it is only not
# handed back before the process ends. Where malloc is not glibc's (musl, macOS) there is no
# mallopt that takes these, and nothing changes.

__all__ = ["keep_freed", "MMAP_THRESHOLD", "TRIM_THRESHOLD"]

# glibc's malloc.h
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
#: bytes: a request at least this large is its own ``mmap`` (glibc's largest allowed is 32 MiB)
MMAP_THRESHOLD = 16 << 20
#: bytes free at the top of a heap before glibc hands them back to the kernel
TRIM_THRESHOLD = 256 << 20

_kept: bool | None = None


def keep_freed() -> bool:
    """Tell glibc's ``malloc`` to keep what it frees (see the module doc), once per process;
    answers whether it took both settings (False where there is no such ``mallopt``)."""
    global _kept
    if _kept is None:
        try:
            mallopt = ctypes.CDLL(None).mallopt
        except (OSError, AttributeError):  # no C library to ask, or one without mallopt
            _kept = False
        else:
            mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
            # mallopt answers 1 when it took the setting (musl's stub answers 0)
            _kept = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD,
                                                                                       TRIM_THRESHOLD))
    return _kept
