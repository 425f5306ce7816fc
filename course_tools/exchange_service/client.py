"""The nbgrader exchange plugins of the course (nbgrader 0.9.6), for students and the instructor.

Students (``<environment>/etc/jupyter/nbgrader_config.py``, written by ``llm-course exchange
client-config``, which ``make install`` runs; the JupyterLab *Assignments* tab uses the same):

* :class:`ServiceSubmit` sends the assignment's files to the instructor's submission service
  (:mod:`.server`) over its socket and keeps the service's receipt (time, secret) in the student's
  nbgrader cache, where ``nbgrader list`` and ``fetch_feedback`` look for it;
* :class:`CheckedFetchAssignment`, :class:`CheckedFetchFeedback`, :class:`CheckedList` are
  nbgrader's, after :func:`.layout.require_safe`: they refuse an exchange another account could
  have replaced (instead of nbgrader's check that the exchange root is writable by everyone).

The instructor (the course's ``nbgrader_config.py``):

* :class:`CourseReleaseAssignment` creates the course folder, ``outbound`` (``0755``) and
  ``inbound`` (``0700``: the service's) and never makes the exchange root writable by everyone (stock
  ``release_assignment`` chmods it to ``0777``); it releases the class edition's notebooks
  (``notebooks/`` or, after ``llm-course edition pt_BR``, ``pt_BR/notebooks/``) and says which;
* :class:`CourseReleaseFeedback` releases each student's feedback readable by name only (``feedback``
  ``0711``, files ``0644`` whatever the umask);
* ``collect`` is :class:`course_tools.grading.exchange.SafeCollect`.
"""
from __future__ import annotations

import json
import os
import socket
import stat
import sys
import time
from pathlib import Path
from typing import Any

from nbgrader.exchange.default.fetch_assignment import ExchangeFetchAssignment
from nbgrader.exchange.default.fetch_feedback import ExchangeFetchFeedback
from nbgrader.exchange.default.list import ExchangeList
from nbgrader.exchange.default.release_assignment import ExchangeReleaseAssignment
from nbgrader.exchange.default.release_feedback import ExchangeReleaseFeedback
from nbgrader.exchange.default.submit import ExchangeSubmit
from nbgrader.utils import get_username, ignore_patterns

from course_tools.exchange_service import layout
from course_tools.exchange_service.protocol import MAX_DEPTH, MAX_FILES, VERSION, ProtocolError, check_path

# What `llm-course exchange client-config` writes for the students' nbgrader (every ExchangeFactory
# entry that reads or writes the exchange from a student's account).
CLIENT_CONFIG = """\
# Written by `llm-course exchange client-config` (course_tools/exchange_service/client.py): the
# course's exchange plugins for every nbgrader run with this environment (students' `nbgrader
# submit`, `fetch_assignment`, `fetch_feedback`, `list`, and JupyterLab's Assignments tab).
c = get_config()  # noqa: F821
c.ExchangeFactory.submit = "course_tools.exchange_service.client.ServiceSubmit"
c.ExchangeFactory.fetch_assignment = "course_tools.exchange_service.client.CheckedFetchAssignment"
c.ExchangeFactory.fetch_feedback = "course_tools.exchange_service.client.CheckedFetchFeedback"
c.ExchangeFactory.list = "course_tools.exchange_service.client.CheckedList"
# `nbgrader validate` (and the Validate button): the whole failure message, wrapped instead of cut at
# 90 characters, and the report in the notebook's language (course_tools/grading/validate.py).
__import__("course_tools.grading.validate").grading.validate.install()
"""


class _Checked:
    """Mixin: ``ensure_root`` checks that no other account can write the exchange (students' view)."""

    root: str
    coursedir: Any

    def ensure_root(self) -> None:
        try:
            layout.require_safe(layout.paths(self.root, self.coursedir.course_id), None)
        except layout.UnsafeExchange as exc:
            self.fail(str(exc))  # type: ignore[attr-defined]


class CheckedFetchAssignment(_Checked, ExchangeFetchAssignment):
    """nbgrader's fetch, from an exchange only the instructor can write."""


class CheckedFetchFeedback(_Checked, ExchangeFetchFeedback):
    """nbgrader's fetch_feedback, from an exchange only the instructor can write."""


class CheckedList(_Checked, ExchangeList):
    """nbgrader's list, from an exchange only the instructor can write (``--inbound`` lists nothing
    for a student: ``inbound`` is the instructor's; ``--cached`` lists the receipts)."""

    def ensure_root(self) -> None:
        if getattr(self, "cached", False):
            return      # the student's own cache: nothing of the exchange is read
        super().ensure_root()


class ServiceSubmit(_Checked, ExchangeSubmit):
    """``nbgrader submit`` through the instructor's submission service (see :mod:`.server`)."""

    def init_dest(self) -> None:
        if self.coursedir.course_id == "":
            self.fail("No course id specified. Re-run with --course flag.")
        if not self.authenticator.has_access(self.coursedir.student_id, self.coursedir.course_id):
            self.fail("You do not have access to this course.")
        if self.coursedir.student_id not in ("*", "", get_username()):
            self.fail("A submission is made in your own name (the service asks the system who you are): "
                      "leave out --student")
        p = layout.paths(self.root, self.coursedir.course_id)
        try:
            layout.require_safe(p, None, check_socket=True)
        except layout.UnsafeExchange as exc:
            self.fail(str(exc))
        self.socket_path = p.socket
        self.cache_path = os.path.join(self.cache, self.coursedir.course_id)

    def _files(self) -> list[tuple[str, Path]]:
        """(relative path, path) of each regular file to submit, nbgrader's ignore rules applied."""
        ignore = ignore_patterns(exclude=self.coursedir.ignore, include=self.coursedir.include,
                                 max_file_size=self.coursedir.max_file_size, log=self.log)
        src = Path(self.src_path)
        out: list[tuple[str, Path]] = []
        stack: list[tuple[Path, int]] = [(src, 0)]
        while stack:
            folder, depth = stack.pop()
            names = sorted(os.listdir(folder))
            skip = set(ignore(str(folder), names))
            for name in names:
                if name in skip:
                    continue
                path = folder / name
                rel = path.relative_to(src).as_posix()
                st = os.lstat(path)
                if stat.S_ISDIR(st.st_mode):
                    if depth + 1 >= MAX_DEPTH:
                        self.log.warning("Not submitted (more than %d folders deep): %s", MAX_DEPTH, ascii(rel))
                    else:
                        stack.append((path, depth + 1))
                    continue
                if not stat.S_ISREG(st.st_mode):
                    self.log.warning("Not submitted (not a regular file): %s", ascii(rel))
                    continue
                try:
                    check_path(rel)
                except ProtocolError as exc:
                    self.log.warning("Not submitted: %s", exc)
                    continue
                out.append((rel, path))
        if len(out) > MAX_FILES:
            self.fail(f"{len(out)} files in {self.src_path}: at most {MAX_FILES} can be submitted")
        return sorted(out)

    def _send(self, files: list[tuple[str, bytes]]) -> dict[str, Any]:
        header = {"version": VERSION, "course": self.coursedir.course_id,
                  "assignment": self.coursedir.assignment_id,
                  "files": [{"path": rel, "size": len(data)} for rel, data in files]}
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(300)
            # a full queue of connections (a whole class at the deadline) answers EAGAIN at once on a
            # Unix socket with a timeout: wait and try again for up to a minute before giving up
            deadline = time.monotonic() + 60
            while True:
                try:
                    s.connect(str(self.socket_path))
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        self.fail(f"The course's submission service at {self.socket_path} stayed busy for a "
                                  "minute: nothing was submitted. Try again.")
                    time.sleep(0.2)
                except OSError as exc:
                    self.fail(f"The course's submission service does not answer at {self.socket_path} "
                              f"({exc.strerror}): nothing was submitted. Tell your instructor.")
            # the service must be the account that owns the course folder
            raw = s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
            server_uid = int.from_bytes(raw[4:8], sys.byteorder, signed=True)
            course_uid = os.lstat(Path(self.root) / self.coursedir.course_id).st_uid
            if server_uid != course_uid:
                self.fail(f"The process behind {self.socket_path} is not the instructor's: nothing was submitted.")
            s.sendall(json.dumps(header, ensure_ascii=True).encode() + b"\n")
            for _, data in files:
                s.sendall(data)
            s.shutdown(socket.SHUT_WR)
            answer = b""
            while not answer.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                answer += chunk
        try:
            reply = json.loads(answer)
        except ValueError:
            self.fail("The submission service gave no receipt: your submission may not have arrived; submit again.")
        return reply

    def copy_files(self) -> None:
        self.init_release()
        self.check_filename_diff()
        files = [(rel, path.read_bytes()) for rel, path in self._files()]
        self.log.info("Source: %s", self.src_path)
        self.log.info("Destination: the submission service at %s", self.socket_path)
        reply = self._send(files)
        if not reply.get("ok"):
            self.fail(f"Not submitted: {reply.get('error', 'the service refused it')}")
        stamp, secret = reply["timestamp"], reply["secret"]
        # the student's receipt, where nbgrader list --cached and fetch_feedback read it
        cache = Path(self.cache_path) / f"{get_username()}+{self.coursedir.assignment_id}+{stamp}"
        cache.mkdir(parents=True, exist_ok=True)
        for rel, data in files:
            (cache / rel).parent.mkdir(parents=True, exist_ok=True)
            (cache / rel).write_bytes(data)
        (cache / "timestamp.txt").write_text(stamp)
        (cache / "submission_secret.txt").write_text(secret)
        self.log.info("Received by the instructor's service as: %s", reply["folder"])
        self.log.info("Submitted as: %s %s %s", self.coursedir.course_id, self.coursedir.assignment_id, stamp)


class _InstructorRoot:
    """Mixin: the exchange root must exist and be writable by no other account (never chmod 777)."""

    root: str
    coursedir: Any

    def ensure_root(self) -> None:
        p = layout.paths(self.root, self.coursedir.course_id)
        found = layout.problems(p, os.geteuid(), need_course=False)
        if found:
            self.fail("the exchange is not safe to use:\n  - " + "\n  - ".join(found)  # type: ignore[attr-defined]
                      + "\nSee README 'A class, step by step' (`llm-course exchange init`).")


class CourseReleaseAssignment(_InstructorRoot, ExchangeReleaseAssignment):
    """nbgrader's release: course folder and outbound 0755, inbound 0700 (the service's); the
    notebooks of the class edition (``llm-course edition``, :mod:`course_tools.editions`), read at
    each release and said in the log, never English in place of a broken record."""

    def init_src(self) -> None:
        from course_tools import editions

        root = self.coursedir.root
        try:
            lang = editions.class_edition(root)
        except (editions.EditionError, OSError, UnicodeDecodeError) as exc:
            self.fail(f"not released: {exc}")
        want = editions.release_folder(lang)
        configured = os.path.normpath(self.coursedir.release_directory)
        known = {editions.release_folder(x) for x in (editions.ENGLISH, *editions.LANGUAGES)}
        # The course config sets release_directory from the class edition when it loads; a server
        # started before `llm-course edition` changed it (Formgrader) still holds the old one: the
        # record decides. Any other folder was chosen on purpose (--CourseDirectory.release_directory).
        folder = want if configured in known else self.coursedir.release_directory
        if folder != want:
            self.log.warning("The class edition is %s (%s), but --CourseDirectory.release_directory=%s "
                             "is released", lang, want, folder)
        self.src_path = self.coursedir.format_path(folder, ".", self.coursedir.assignment_id)
        if not os.path.isdir(self.src_path):
            self.fail(f"{self.src_path} does not exist: the student notebooks are generated by "
                      "`llm-course release` (an edition's by `llm-course translate build`); "
                      "`llm-course edition` says which edition this class is released")
        self.log.info("Releasing the %s edition: %s", "English" if lang == editions.ENGLISH else lang,
                      os.path.relpath(self.src_path, root))

    def ensure_root(self) -> None:
        p = layout.paths(self.root, self.coursedir.course_id)
        if not p.root.exists() and p.root.parent.is_dir() and os.access(p.root.parent, os.W_OK):
            for change in layout.init(p):
                self.log.info("exchange: %s", change)
        super().ensure_root()

    def init_dest(self) -> None:
        if self.coursedir.course_id == "":
            self.fail("No course id specified. Re-run with --course flag.")
        p = layout.paths(self.root, self.coursedir.course_id)
        for change in layout.init(p):
            self.log.info("exchange: %s", change)
        layout_problems = layout.problems(p, os.geteuid())
        if layout_problems:
            self.fail("the exchange is not safe to use:\n  - " + "\n  - ".join(layout_problems))
        self.course_path, self.outbound_path, self.inbound_path = str(p.course), str(p.outbound), str(p.inbound)
        self.dest_path = os.path.join(self.outbound_path, self.coursedir.assignment_id)


class CourseReleaseFeedback(_InstructorRoot, ExchangeReleaseFeedback):
    """nbgrader's release_feedback; the released files readable by name (0644) whatever the umask."""

    def copy_files(self) -> None:
        super().copy_files()
        for entry in os.scandir(self.dest_path):
            if entry.name.endswith(".html") and entry.is_file(follow_symlinks=False):
                os.chmod(entry.path, 0o644)
        os.chmod(self.dest_path, 0o711)


def write_client_config(prefix: str | os.PathLike[str] = sys.prefix) -> Path:
    """Write :data:`CLIENT_CONFIG` as ``<prefix>/etc/jupyter/nbgrader_config.py`` (nbgrader reads it
    for every account that runs this environment); returns its path."""
    target = Path(prefix) / "etc" / "jupyter" / "nbgrader_config.py"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(CLIENT_CONFIG)
    os.chmod(target, 0o644)
    return target
