"""Give freed memory back to the operating system (chapter 11's measurements, Book §6.4-§6.6).

A process that frees a tensor does not always shrink: glibc's ``malloc`` keeps freed blocks of a
few MiB in its heap for the next allocation, so after many short-lived temporaries (a matrix
quantized to 4 bits, then its float32 copy dropped) the resident memory can stay gigabytes above
what the live tensors need. A notebook that then allocates a large working set (chapter 11's 210
weight matrices in four formats) adds it on top and can pass the course's 4 GiB budget although
the data would fit. :func:`release_freed_memory` runs the garbage collector and asks glibc to
return its free pages (``malloc_trim(0)``); on another C library (macOS, Windows, musl) it only
collects garbage.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import gc

__all__ = ["release_freed_memory", "resident_bytes"]


def resident_bytes() -> int | None:
    """The process's resident set size in bytes (``VmRSS`` of ``/proc/self/status``), or None off Linux."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def release_freed_memory() -> bool:
    """Collect garbage, then hand the C heap's free pages back to the OS (glibc ``malloc_trim(0)``).

    Returns True when ``malloc_trim`` was called (glibc), False when only the collector ran. Live
    objects are untouched: only memory already freed is returned.
    """
    gc.collect()
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return False
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    trim(0)
    return True
