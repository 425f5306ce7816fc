"""Who may write the exchange: the checks every exchange step runs before it trusts a path.

The exchange is safe when no account but the instructor's (and root) can create, remove or rename
anything on the way to the course's folders:

* every folder **above** the exchange root is owned by root or the instructor and writable by no
  one else, except a root-owned folder with the sticky bit (``/tmp``): there others may create
  entries but not rename or remove the ones they do not own;
* the exchange root, the course folder, ``outbound`` and ``feedback`` are owned by the instructor
  (or root) and writable by no one else, sticky or not (a sticky exchange root would still let a
  student create the course folder before the instructor does);
* ``inbound`` is the instructor's and opens to no one (``0700``): only the submission service,
  which runs as the instructor, writes there, and no student reads another's submission;
* ``submit.sock`` (the service's socket) is a socket owned by the instructor.

"The instructor" is the account that runs the check for the instructor's commands (``collect``,
``release_*``), and the owner of the course folder for the students' (who cannot know the
instructor's name otherwise; a course folder owned by another student fails the "above" rule,
because only its parent's owner could have made it there).
"""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

SOCKET_NAME = "submit.sock"
# Folders of the course folder, with whether others may enter (x) them: students fetch from
# outbound (read) and fetch feedback by name (enter only); inbound is the service's alone.
COURSE_FOLDERS = {"outbound": True, "feedback": True, "inbound": False}


class UnsafeExchange(Exception):
    """The exchange could be written, replaced or read by an account it must not trust."""


@dataclass(frozen=True)
class Paths:
    """The exchange's paths for one course."""

    root: Path
    course: Path

    @property
    def inbound(self) -> Path:
        return self.course / "inbound"

    @property
    def outbound(self) -> Path:
        return self.course / "outbound"

    @property
    def feedback(self) -> Path:
        return self.course / "feedback"

    @property
    def socket(self) -> Path:
        return self.course / SOCKET_NAME


def paths(root: str | os.PathLike[str], course_id: str) -> Paths:
    """The exchange paths of ``course_id`` under the exchange ``root`` (made absolute, links not resolved)."""
    r = Path(os.path.abspath(root))
    return Paths(r, r / course_id)


def _who(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _mode(st: os.stat_result) -> str:
    return oct(stat.S_IMODE(st.st_mode))


def _problems_of(path: Path, st: os.stat_result, trusted: set[int], *, sticky_ok: bool) -> list[str]:
    out = []
    if st.st_uid not in trusted:
        out.append(f"{path} is owned by {ascii(_who(st.st_uid))}, not by the instructor or root")
    others_write = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    if others_write and not (sticky_ok and st.st_mode & stat.S_ISVTX and st.st_uid == 0):
        out.append(f"{path} can be written by other accounts (mode {_mode(st)}): they could rename or replace "
                   "what is in it" + (" (a sticky bit does not help here)" if st.st_mode & stat.S_ISVTX else ""))
    return out


def problems(p: Paths, instructor_uid: int | None = None, *, need_course: bool = True,
             check_socket: bool = False) -> list[str]:
    """Everything that lets another account write (or read ``inbound`` of) the exchange of ``p``.

    ``instructor_uid``: the instructor's account (``None``: the owner of the course folder, the
    students' view). An empty list means safe. Missing folders are problems only for the exchange
    root, and for the course folder when ``need_course``.
    """
    out: list[str] = []
    try:
        root_st = os.lstat(p.root)
    except OSError as exc:
        return [f"the exchange root {p.root} cannot be read ({exc.strerror}); ask your instructor"]
    if not stat.S_ISDIR(root_st.st_mode):
        return [f"the exchange root {p.root} is not a folder (a link or a file)"]
    try:
        course_st = os.lstat(p.course)
    except OSError:
        course_st = None
    if instructor_uid is None:
        if course_st is None:
            return [f"the course folder {p.course} does not exist: has the instructor released anything?"]
        instructor_uid = course_st.st_uid
    trusted = {0, instructor_uid}
    # everything above the exchange root, from / down
    above = [Path(*p.root.parts[:i]) for i in range(1, len(p.root.parts))]
    for folder in above:
        try:
            st = os.lstat(folder)
        except OSError as exc:
            out.append(f"{folder} cannot be read ({exc.strerror})")
            continue
        if stat.S_ISLNK(st.st_mode):
            out.append(f"{folder} is a symbolic link: the exchange must be reached without one")
            continue
        out += _problems_of(folder, st, trusted, sticky_ok=True)
    out += _problems_of(p.root, root_st, trusted, sticky_ok=False)
    if course_st is None:
        if need_course:
            out.append(f"the course folder {p.course} does not exist")
        return out
    if not stat.S_ISDIR(course_st.st_mode):
        return out + [f"{p.course} is not a folder (a link or a file)"]
    out += _problems_of(p.course, course_st, {instructor_uid, 0}, sticky_ok=False)
    for name, others_enter in COURSE_FOLDERS.items():
        folder = p.course / name
        try:
            st = os.lstat(folder)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode):
            out.append(f"{folder} is not a folder (a link or a file)")
            continue
        out += _problems_of(folder, st, {instructor_uid, 0}, sticky_ok=False)
        if not others_enter and st.st_mode & 0o077:
            out.append(f"{folder} is open to other accounts (mode {_mode(st)}): submissions are the "
                       "instructor's alone (0700); `llm-course exchange init` sets it")
    if check_socket:
        try:
            st = os.lstat(p.socket)
        except OSError:
            out.append(f"the submission service is not running: {p.socket} does not exist "
                       "(the instructor starts it with `llm-course exchange serve`)")
        else:
            if not stat.S_ISSOCK(st.st_mode):
                out.append(f"{p.socket} is not a socket")
            elif st.st_uid != instructor_uid:
                out.append(f"{p.socket} is owned by {ascii(_who(st.st_uid))}, not by the instructor")
    return out


def require_safe(p: Paths, instructor_uid: int | None = None, **kw: bool) -> None:
    """Raise :class:`UnsafeExchange` with every problem :func:`problems` finds."""
    found = problems(p, instructor_uid, **kw)
    if found:
        raise UnsafeExchange("the exchange is not safe to use:\n  - " + "\n  - ".join(found) +
                             "\nSet it up as README 'A class, step by step' says (`llm-course exchange init`).")


def init(p: Paths) -> list[str]:
    """Create (or tighten) the instructor's exchange for one course: root ``0755`` if this account
    may make it, course folder, ``outbound`` and ``feedback`` ``0755``/``0711``, ``inbound`` ``0700``.

    Returns what it changed. Folders owned by someone else are left alone (and reported by
    :func:`problems`).
    """
    done = []
    me = os.geteuid()
    modes = [(p.root, 0o755), (p.course, 0o755), (p.outbound, 0o755), (p.feedback, 0o711), (p.inbound, 0o700)]
    for folder, mode in modes:
        if not folder.exists():
            folder.mkdir(parents=True, mode=0o700)
            os.chmod(folder, mode)
            done.append(f"created {folder} ({oct(mode)})")
            continue
        st = os.lstat(folder)
        if stat.S_ISDIR(st.st_mode) and st.st_uid == me and stat.S_IMODE(st.st_mode) != mode:
            os.chmod(folder, mode)
            done.append(f"{folder}: mode {_mode(st)} -> {oct(mode)}")
    return done
