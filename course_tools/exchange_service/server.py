"""``llm-course exchange serve``: the instructor's process that receives submissions.

It listens on ``<exchange>/<course>/submit.sock`` (mode ``0666``: connecting needs write permission
on a socket; the folder it sits in is the instructor's and nobody else can replace it). For each
connection it

1. asks the kernel who is connecting (``SO_PEERCRED``: the uid of the process, which no student can
   choose) and takes that account's name as the student id;
2. reads the header and the bytes (limits: :mod:`.protocol`, ``max_bytes``, a time limit per
   connection) into a staging folder of ``inbound`` (``0700``: the instructor's);
3. stamps the submission with **its own clock** once the last byte has arrived, writes
   ``timestamp.txt``, ``submission_secret.txt`` (what nbgrader's feedback hash uses) and
   ``receipt.json`` (account, uid, time, SHA-256 of each file), and renames the staging folder to
   ``<student>+<assignment>+<time>+<random>`` in one step;
4. answers the time and the secret, which the student's ``nbgrader submit`` keeps in its cache
   (``nbgrader list`` and ``fetch_feedback`` read them there).

So a submission's bytes and time are fixed when ``submit`` returns: the student owns no file of it,
holds no descriptor or mapping of it, and cannot add, rename or remove anything in ``inbound``.
"""
from __future__ import annotations

import datetime
import hashlib
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import socketserver
import stat
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from course_tools.exchange_service import layout
from course_tools.exchange_service.protocol import (
    MAX_HEADER,
    STUDENT_ID,
    TIME_FORMAT,
    ProtocolError,
    check_header,
)

RECEIPT = "receipt.json"


def peer_uid(conn: socket.socket) -> tuple[int, int]:
    """(pid, uid) of the process at the other end of a Unix-domain socket, from the kernel."""
    raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", raw)
    return pid, uid


class SubmissionService:
    """Receives submissions for one course of one exchange (see the module docstring)."""

    def __init__(self, root: str | os.PathLike[str], course_id: str, *, max_bytes: int = 100_000_000,
                 per_student: int = 50, seconds: float = 120.0, clients: int = 32,
                 log: TextIO | None = None) -> None:
        self.paths = layout.paths(root, course_id)
        self.course_id = course_id
        self.max_bytes = max_bytes
        self.per_student = per_student
        self.seconds = seconds
        self._slots = threading.BoundedSemaphore(clients)
        self._log = log or sys.stdout
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ logging

    def log(self, message: str) -> None:
        when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        with self._lock:
            self._log.write(f"[exchange {when}] {message}\n")
            self._log.flush()

    # ------------------------------------------------------------------ one connection

    def handle(self, conn: socket.socket) -> dict[str, Any]:
        """Receive one submission on ``conn``; the answer to send back."""
        if not self._slots.acquire(blocking=False):
            return {"ok": False, "error": "the submission service is busy: try again in a minute"}
        try:
            pid, uid = peer_uid(conn)
            try:
                user = pwd.getpwuid(uid).pw_name
            except KeyError:
                return {"ok": False, "error": f"uid {uid} has no account name"}
            if not STUDENT_ID.fullmatch(user):
                return {"ok": False, "error": f"account {ascii(user)} is not a plain account name"}
            try:
                reply = self._receive(conn, user, uid, pid)
            except ProtocolError as exc:
                self.log(f"refused a submission from {ascii(user)} (pid {pid}): {exc}")
                return {"ok": False, "error": str(exc)}
            except (OSError, ValueError) as exc:
                self.log(f"failed a submission from {ascii(user)} (pid {pid}): {ascii(str(exc))}")
                return {"ok": False, "error": f"the submission did not arrive whole ({type(exc).__name__})"}
            self.log(f"received {ascii(reply['folder'])} from {ascii(user)} (uid {uid}, pid {pid})")
            return reply
        finally:
            self._slots.release()

    def _read_header(self, conn: socket.socket, deadline: float) -> tuple[dict[str, Any], bytes]:
        buf = b""
        while b"\n" not in buf:
            if len(buf) > MAX_HEADER:
                raise ProtocolError(f"header longer than {MAX_HEADER} bytes")
            chunk = self._recv(conn, 65536, deadline)
            if not chunk:
                raise ProtocolError("the connection closed before the header")
            buf += chunk
        line, rest = buf.split(b"\n", 1)
        try:
            header = json.loads(line)
        except ValueError:
            raise ProtocolError("the header is not JSON") from None
        return header, rest

    def _recv(self, conn: socket.socket, n: int, deadline: float) -> bytes:
        left = deadline - time.monotonic()
        if left <= 0:
            raise ProtocolError(f"the submission took longer than {self.seconds:g} s to arrive")
        conn.settimeout(min(left, 30.0))
        try:
            return conn.recv(n)
        except socket.timeout:
            raise ProtocolError("the connection stalled") from None

    def _receive(self, conn: socket.socket, user: str, uid: int, pid: int) -> dict[str, Any]:
        deadline = time.monotonic() + self.seconds
        header, pending = self._read_header(conn, deadline)
        course, assignment, files = check_header(header, self.max_bytes)
        if course != self.course_id:
            raise ProtocolError(f"this service receives course {self.course_id!r}, not {ascii(course)}")
        if not (self.paths.outbound / assignment).is_dir():
            raise ProtocolError(f"assignment {assignment!r} has not been released")
        inbound = self.paths.inbound
        mine = [n for n in os.listdir(inbound) if n.startswith(f"{user}+{assignment}+")]
        if len(mine) >= self.per_student:
            raise ProtocolError(f"{len(mine)} submissions of {assignment} already: ask your instructor")
        staging = inbound / f".incoming-{secrets.token_hex(8)}"
        staging.mkdir(mode=0o700)
        try:
            digests: dict[str, str] = {}
            for path, size in files:
                target = staging / path
                target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                h = hashlib.sha256()
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                try:
                    left = size
                    while left > 0:
                        if not pending:
                            pending = self._recv(conn, min(left, 1 << 20), deadline)
                            if not pending:
                                raise ProtocolError(f"the connection closed inside {ascii(path)}")
                        chunk, pending = pending[:left], pending[left:]
                        os.write(fd, chunk)
                        h.update(chunk)
                        left -= len(chunk)
                finally:
                    os.close(fd)
                digests[path] = h.hexdigest()
            if pending:
                raise ProtocolError("more bytes than the header announced")
            # the time of the submission: this process's clock, once everything has arrived
            now = datetime.datetime.now(datetime.timezone.utc)
            stamp = now.strftime(TIME_FORMAT)
            secret = secrets.token_hex(64)
            folder = f"{user}+{assignment}+{stamp}+{secrets.token_urlsafe(9)}"
            (staging / "timestamp.txt").write_text(stamp)
            (staging / "submission_secret.txt").write_text(secret)
            receipt = {"student": user, "uid": uid, "pid": pid, "assignment": assignment, "course": course,
                       "timestamp": stamp, "folder": folder, "files": digests}
            (staging / RECEIPT).write_text(json.dumps(receipt, indent=1, ensure_ascii=True))
            for f in ("timestamp.txt", "submission_secret.txt", RECEIPT):
                os.chmod(staging / f, 0o600)
            os.rename(staging, inbound / folder)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return {"ok": True, "timestamp": stamp, "folder": folder, "secret": secret}

    # ------------------------------------------------------------------ serving

    def serve(self, ready: threading.Event | None = None) -> None:
        """Serve until SIGTERM/SIGINT (or :meth:`stop`); the socket is removed on the way out."""
        layout.init(self.paths)
        layout.require_safe(self.paths, os.geteuid())
        sock_path = self.paths.socket
        try:
            st = os.lstat(sock_path)
        except FileNotFoundError:
            pass
        else:
            if stat.S_ISSOCK(st.st_mode) and st.st_uid == os.geteuid():
                probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    probe.connect(str(sock_path))
                except OSError:
                    sock_path.unlink()     # a service that ended without removing it
                else:
                    probe.close()
                    raise SystemExit(f"a submission service already listens on {sock_path}")
                finally:
                    probe.close()
            else:
                raise SystemExit(f"{sock_path} exists and is not this account's socket: remove it by hand")
        if len(os.fsencode(sock_path)) > 107:
            raise SystemExit(f"{sock_path} is longer than a Unix socket path may be (107 bytes): "
                             "use a shorter exchange root")
        service = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:   # noqa: D102
                reply = service.handle(self.request)
                try:
                    self.request.settimeout(10)
                    self.request.sendall((json.dumps(reply, ensure_ascii=True) + "\n").encode())
                except OSError:
                    pass

        class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
            daemon_threads = True
            # a class submits at the deadline all at once: socketserver's default backlog of 5
            # refused 2 of 24 simultaneous submissions on the class hub (tests/bench_class_hub.py)
            request_queue_size = 512

        old_umask = os.umask(0o077)
        try:
            self._server = Server(str(sock_path), Handler)
        finally:
            os.umask(old_umask)
        os.chmod(sock_path, 0o666)
        stop = lambda *_: threading.Thread(target=self._server.shutdown, daemon=True).start()  # noqa: E731
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, stop)
            signal.signal(signal.SIGINT, stop)
        self.log(f"receiving submissions of {self.course_id!r} on {sock_path}")
        if ready is not None:
            ready.set()
        try:
            self._server.serve_forever(poll_interval=0.2)
        finally:
            self._server.server_close()
            try:
                sock_path.unlink()
            except FileNotFoundError:
                pass
            self.log("stopped")

    def stop(self) -> None:
        """Stop :meth:`serve` (from another thread)."""
        self._server.shutdown()


def receipt_of(folder: Path) -> dict[str, Any] | None:
    """The service's receipt in an inbound folder, or None when there is none (not the service's)."""
    try:
        return json.loads((folder / RECEIPT).read_text())
    except (OSError, ValueError):
        return None
