"""What travels on the submission socket, and the limits both ends apply.

One connection carries one submission: a JSON header line (at most :data:`MAX_HEADER` bytes)

    {"version": 1, "course": "llm-course", "assignment": "05_rope",
     "files": [{"path": "05_rope.ipynb", "size": 12345}, ...]}

then the files' bytes, concatenated in that order; the service answers one JSON line, either
``{"ok": true, "timestamp": ..., "folder": ..., "secret": ...}`` or ``{"ok": false, "error": ...}``.
The student's identity is not in the header: the service asks the kernel (``SO_PEERCRED``).
"""
from __future__ import annotations

import re

VERSION = 1
MAX_HEADER = 64 << 10
MAX_FILES = 200
MAX_DEPTH = 8
# nbgrader's Exchange.timestamp_format, in UTC
TIME_FORMAT = "%Y-%m-%d %H:%M:%S.%f UTC"
# one path component of a submitted file: a word character first, then word characters, space,
# '.', '(', ')', '+', '-'; no leading dot, no '..', no control or separator character
_COMPONENT = re.compile(r"\w[\w .()+-]{0,127}")
ASSIGNMENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
# A student id the course accepts: a portable account name (POSIX "portable filename" letters,
# starting with a letter or '_', at most 32 characters): no glob, shell, CSV or HTML reads it as code.
STUDENT_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}")


class ProtocolError(ValueError):
    """A header or a path the service refuses (the message is shown to the student)."""


def check_path(path: str) -> str:
    """``path`` if it is a relative path of at most :data:`MAX_DEPTH` plain components, else raise."""
    if not isinstance(path, str) or not path or path.startswith("/"):
        raise ProtocolError(f"not a relative file name: {ascii(path)}")
    parts = path.split("/")
    if len(parts) > MAX_DEPTH:
        raise ProtocolError(f"{ascii(path)} is more than {MAX_DEPTH} folders deep")
    for part in parts:
        if not _COMPONENT.fullmatch(part) or part.endswith((" ", ".")) or ".." in part:
            raise ProtocolError(f"{ascii(path)}: {ascii(part)} is not a plain file or folder name "
                                "(letters, digits, space, '_ . ( ) + -', not starting with a dot)")
    return path


def check_header(header: object, max_bytes: int) -> tuple[str, str, list[tuple[str, int]]]:
    """(course, assignment, [(path, size)]) of a header the service accepts, else raise."""
    if not isinstance(header, dict) or header.get("version") != VERSION:
        raise ProtocolError("not a submission of this course's protocol (version 1)")
    course, assignment, files = header.get("course"), header.get("assignment"), header.get("files")
    if not isinstance(assignment, str) or not ASSIGNMENT.fullmatch(assignment):
        raise ProtocolError(f"not an assignment name: {ascii(assignment)}")
    if not isinstance(course, str) or not isinstance(files, list):
        raise ProtocolError("the header needs a course and a list of files")
    if not files:
        raise ProtocolError("nothing to submit")
    if len(files) > MAX_FILES:
        raise ProtocolError(f"{len(files)} files: at most {MAX_FILES} may be submitted")
    out: list[tuple[str, int]] = []
    seen: set[str] = set()
    total = 0
    for f in files:
        if not isinstance(f, dict) or not isinstance(f.get("size"), int) or f["size"] < 0:
            raise ProtocolError("each file needs a path and a size")
        path = check_path(f.get("path"))  # type: ignore[arg-type]
        if path in seen or any(s.startswith(path + "/") or path.startswith(s + "/") for s in seen):
            raise ProtocolError(f"{ascii(path)} is named twice (or as a file and a folder)")
        seen.add(path)
        total += f["size"]
        out.append((path, f["size"]))
    if total > max_bytes:
        raise ProtocolError(f"{total} bytes: at most {max_bytes} may be submitted")
    return course, assignment, out
