"""The submission's files as the kernel gets them: a copy of regular files only.

nbgrader runs a submission's kernel in ``autograded/<student>/<assignment>/`` and writes the
autograded notebook there afterwards, with the instructor's rights, following symbolic links.
The kernel therefore never works in that folder: it gets a private copy (see
``course_tools/grading/sandbox.py``), made here by the grader **without following anything**:

* only regular files are copied; symbolic links, devices, FIFOs and sockets are skipped;
* every file is opened with ``O_NOFOLLOW`` and checked again after opening (a file swapped for a
  link between the listing and the copy is skipped);
* sizes are capped per file and in total, and sparse files (fewer blocks on disk than their size
  says, e.g. a 4 KiB ``truncate``\\ d 8 GiB file) are refused instead of written out in full;
* notebooks and checkpoints are not copied (the kernel executes cells, it never reads them).

The same copy feeds the first kernel and the probe kernel (``probe.py``): nothing one kernel
wrote reaches another.
"""
from __future__ import annotations

import fnmatch
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

IGNORE = (".ipynb_checkpoints", "*.ipynb", "__pycache__")


@dataclass
class CopyReport:
    """What :func:`copy_regular_files` copied and what it left out (with the reason)."""

    copied: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    total_bytes: int = 0


def _ignored(name: str, ignore: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in ignore)


# Folder depth below which nothing is copied (walks are iterative: a 1200-level folder made by a
# student must not raise RecursionError in the grader, and a deep tree is no submission).
MAX_DEPTH = 32


def copy_regular_files(src: Path, dst: Path, *, max_file_bytes: int = 64 << 20, max_total_bytes: int = 256 << 20,
                       max_files: int = 2000, ignore: tuple[str, ...] = IGNORE,
                       max_depth: int = MAX_DEPTH) -> CopyReport:
    """Copy the regular files under ``src`` into ``dst`` (created), following no link.

    ``dst`` must not exist or be empty; the copies are readable by everyone (mode 0644, folders
    0755) so that an unprivileged kernel can read them. The walk is iterative and stops
    ``max_depth`` folders down (what lies deeper is reported as skipped). Returns what was copied
    and skipped.
    """
    report = CopyReport()
    dst.mkdir(parents=True, exist_ok=True)
    try:
        top = os.lstat(src)
    except FileNotFoundError:
        return report
    if not stat.S_ISDIR(top.st_mode):
        report.skipped.append((".", "not a folder"))
        return report
    stack: list[tuple[Path, int]] = [(Path("."), 0)]
    while stack:
        rel, depth = stack.pop()
        subfolders = _copy_folder(src, dst, rel, report, max_file_bytes, max_total_bytes, max_files, ignore)
        for sub in reversed(subfolders):
            if depth + 1 > max_depth:
                report.skipped.append((str(sub), f"more than {max_depth} folders deep"))
                continue
            stack.append((sub, depth + 1))
    return report


def _copy_folder(src: Path, dst: Path, rel: Path, report: CopyReport, max_file: int, max_total: int,
                 max_files: int, ignore: tuple[str, ...]) -> list[Path]:
    """Copy the regular files of one folder; returns its subfolders (created in ``dst``) to visit."""
    subfolders: list[Path] = []
    try:
        with os.scandir(src / rel) as entries:
            names = sorted((e.name, e) for e in entries)
    except OSError as exc:
        report.skipped.append((str(rel), f"cannot be listed ({exc.strerror})"))
        return subfolders
    for name, entry in names:
        path = rel / name
        if _ignored(name, ignore):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError as exc:
            report.skipped.append((str(path), f"cannot be read ({exc.strerror})"))
            continue
        if stat.S_ISDIR(st.st_mode):
            (dst / path).mkdir(mode=0o755, exist_ok=True)
            subfolders.append(path)
            continue
        if not stat.S_ISREG(st.st_mode):
            kind = "symbolic link" if stat.S_ISLNK(st.st_mode) else "special file"
            report.skipped.append((str(path), kind))
            continue
        if len(report.copied) >= max_files:
            report.skipped.append((str(path), f"more than {max_files} files"))
            continue
        if st.st_size > max_file:
            report.skipped.append((str(path), f"{st.st_size} bytes, over the {max_file}-byte limit per file"))
            continue
        if report.total_bytes + st.st_size > max_total:
            report.skipped.append((str(path), f"over the {max_total}-byte limit for all files"))
            continue
        if st.st_size > 64 << 10 and st.st_blocks * 512 < st.st_size // 2:
            report.skipped.append((str(path), "sparse file (holes would be written out in full)"))
            continue
        _copy_file(src / path, dst / path, st, report, str(path))
    return subfolders


def _copy_file(src: Path, dst: Path, st: os.stat_result, report: CopyReport, rel: str) -> None:
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        report.skipped.append((rel, f"cannot open without following a link ({exc.strerror})"))
        return
    try:
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode) or (now.st_ino, now.st_dev) != (st.st_ino, st.st_dev):
            report.skipped.append((rel, "changed while being copied"))
            return
        out = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        left = st.st_size
        try:
            while left > 0:
                chunk = os.read(fd, min(left, 1 << 20))
                if not chunk:
                    break
                os.write(out, chunk)
                left -= len(chunk)
        finally:
            os.close(out)
        report.copied.append(rel)
        report.total_bytes += st.st_size - left
    finally:
        os.close(fd)
