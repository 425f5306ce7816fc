"""course_utils.memory: freed temporaries go back to the OS (chapter 11's 4 GiB budget)."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from course_utils.memory import release_freed_memory, resident_bytes

# A fresh process: 200 float32 temporaries of 3.4 MiB, each converted to a kept bfloat16 copy and
# dropped (what building 16-bit layers from float32 weights does). glibc keeps the freed blocks in
# its heap, so the resident size stays ~340 MiB above the live copies until malloc_trim.
_CHILD = textwrap.dedent("""
    import torch
    from course_utils.memory import release_freed_memory, resident_bytes
    keep = []
    for _ in range(200):
        t = torch.ones(1536 * 576)
        keep.append(t.to(torch.bfloat16))
        del t
    before = resident_bytes()
    trimmed = release_freed_memory()
    after = resident_bytes()
    live = sum(k.untyped_storage().nbytes() for k in keep)
    print(before, after, live, trimmed)
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmRSS and glibc's malloc_trim are Linux's")
def test_freed_temporaries_leave_the_resident_set():
    out = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, check=True, timeout=120)
    before, after, live, trimmed = out.stdout.split()
    before, after, live = int(before), int(after), int(live)
    assert trimmed == "True", "glibc's malloc_trim was not found"
    assert before - after > 0.5 * live, (f"release_freed_memory gave back {(before - after) / 2**20:.0f} MiB; the "
                                         f"dropped float32 temporaries were {2 * live / 2**20:.0f} MiB")


def test_live_objects_survive_and_the_size_is_read():
    x = [bytes(1000) for _ in range(10)]
    assert release_freed_memory() in (True, False)
    assert len(x) == 10 and all(len(b) == 1000 for b in x)
    size = resident_bytes()
    assert size is None or size > 10 * 2**20
