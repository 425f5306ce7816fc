"""``nbgrader collect`` that believes nothing a student could write.

nbgrader's own exchange lets every student write ``inbound``; stock ``collect`` takes the student id
and the time from a folder's *name* and copies with ``shutil.copytree``. In the course's exchange
(:mod:`course_tools.exchange_service`) students cannot write ``inbound`` at all: the instructor's
submission service receives each submission over a socket, learns the account from the kernel
(``SO_PEERCRED``), writes the files itself and stamps them with its own clock and a
``receipt.json``. :class:`SafeCollect` (``c.ExchangeFactory.collect`` in ``nbgrader_config.py``)
collects on that basis:

* **only from an exchange nobody else can write** (:func:`course_tools.exchange_service.layout.problems`):
  the exchange root, the course folder and ``inbound`` must be the instructor's (or root's), with
  no write bit for others (``inbound`` ``0700``), and no folder above them writable by others
  unless root-owned and sticky (``/tmp``). Otherwise collect stops and says what to fix: a
  ``chmod 777`` root lets a student rename the course folder and put hers in its place.
* **only folders the service made**: owned by the instructor, holding the service's
  ``receipt.json``, whose student, uid and assignment agree with the folder's name, the account
  (same uid) and the assignment; the student id a plain account name (:data:`STUDENT_ID`), on the
  gradebook's roster when it has one. The time is the service's receipt time (the folder's name
  and ``timestamp.txt`` say the same, and nobody but the instructor can change them). Each file
  collected must have the SHA-256 the receipt recorded.
* **one folder at a time**: every folder is judged and copied in isolation — an exception or a
  limit (:data:`MAX_ENTRIES` entries, :data:`MAX_DEPTH` levels; walks are iterative) refuses that
  folder with the reason and the run goes on. Refused folders are never collected: their regular
  files are kept in ``refused/<assignment>/<digest>/`` with one JSON line in
  ``refused/<assignment>/report.jsonl`` (the folder's name, its owner, the student it claimed, why),
  and logged with every name escaped (``ascii``).
* **saying when the course root is not private**: after copying, every place of the course root
  other accounts could read (submissions, grades, feedback, refused folders, reference records,
  the gradebook) is logged as a warning (:func:`course_tools.grading.privacy.exposure_warnings`).
* **with a copy that follows nothing** (:func:`course_tools.grading.pristine.copy_regular_files`:
  no links, no special files, sparse files refused), keeping nbgrader's ``ignore`` patterns and
  ``max_file_size``.
"""
from __future__ import annotations

import hashlib
import json
import os
import pwd
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.exchange.default.collect import ExchangeCollect, groupby
from nbgrader.utils import parse_utc
from traitlets import Unicode

from course_tools.exchange_service import layout
from course_tools.exchange_service.protocol import STUDENT_ID, TIME_FORMAT
from course_tools.exchange_service.server import RECEIPT, receipt_of
from course_tools.grading.pristine import copy_regular_files

__all__ = ["STUDENT_ID", "SafeCollect", "Refusal", "scan", "valid_student_id"]


def valid_student_id(student: str) -> bool:
    """True for a plain account name (:data:`STUDENT_ID`), which no glob, shell, CSV or HTML reads as code."""
    return STUDENT_ID.fullmatch(student) is not None


# Entries and depth of one exchange folder beyond which it is refused (nbgrader's max_dir_size
# bounds bytes, not names; Python 3.11's os.walk recurses and a 1000-deep folder raised
# RecursionError, which stopped collect for everyone after it).
MAX_ENTRIES = 10_000
MAX_DEPTH = 16


@dataclass
class Scan:
    """What the file system says about one exchange folder."""

    owners: set[int]              # the uids owning the folder and everything in it
    entries: int                  # entries below it (``limit + 1``: more than the limit)
    depth: int                    # the deepest level reached (``MAX_DEPTH + 1``: deeper than allowed)
    unreadable: int = 0           # entries that could not be looked at


def scan(folder: Path, limit: int = MAX_ENTRIES, max_depth: int = MAX_DEPTH) -> Scan:
    """Owners, entry count and depth of ``folder`` and everything below it: an iterative walk, no
    link followed, stopping at ``limit`` entries or below ``max_depth`` levels."""
    top = os.lstat(folder)
    found = Scan({top.st_uid}, 0, 0)
    stack: list[tuple[Path, int]] = [(folder, 0)]
    while stack:
        here, depth = stack.pop()
        try:
            with os.scandir(here) as it:
                entries = list(it)
        except OSError:
            found.unreadable += 1
            continue
        for entry in entries:
            found.entries += 1
            if found.entries > limit:
                return found
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                found.unreadable += 1
                continue
            found.owners.add(st.st_uid)
            if stat.S_ISDIR(st.st_mode):
                found.depth = max(found.depth, depth + 1)
                if depth + 1 > max_depth:
                    return found
                stack.append((Path(entry.path), depth + 1))
    return found


@dataclass
class Refusal:
    """One exchange folder that was not collected, and why."""

    folder: str          # its name in the inbound directory, as found
    claimed: str         # the student id its name claims
    owner: str           # the account that owns it ("uid N" when none)
    reason: str
    changed: str = ""    # the time it claims (its receipt's), when known

    def line(self) -> str:
        return (f"refused {ascii(self.folder)}: claims student {ascii(self.claimed)}, owned by "
                f"{ascii(self.owner)}: {self.reason}")


def _owner_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class SafeCollect(ExchangeCollect):
    """nbgrader's default collect, for the course's exchange: the service's folders only, its receipt
    time, each folder judged and copied in isolation, a copy that follows nothing."""

    refused_directory = Unicode("refused", config=True,
                                help="Folder of the course root where refused exchange folders are kept, "
                                     "one subfolder per assignment, with report.jsonl.")

    _receipts: dict[str, dict[str, Any]]
    refusals: list[Refusal]
    _kept_count: int

    # ---------------------------------------------------------------- the exchange itself

    def ensure_root(self) -> None:
        """The exchange must be the instructor's alone (no chmod 777 root: README)."""
        found = layout.problems(layout.paths(self.root, self.coursedir.course_id), os.geteuid())
        if found:
            self.fail("collect refuses this exchange: another account could write or replace it.\n  - "
                      + "\n  - ".join(found) + "\nRun `llm-course exchange init` (README 'A class, step by step').")

    # ---------------------------------------------------------------- which folders

    def _roster(self) -> set[str]:
        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            return {s.id for s in gb.students}

    def _judge(self, name: str, path: Path, roster: set[str]) -> tuple[dict[str, Any] | None, Refusal | None]:
        parts = name.rsplit("+", 3)
        claimed = parts[0]
        try:
            st = os.lstat(path)
        except OSError as exc:
            return None, Refusal(name, claimed, "?", f"cannot be read ({exc.strerror})")
        owner = _owner_name(st.st_uid)

        def refuse(reason: str, changed: str = "") -> tuple[None, Refusal]:
            return None, Refusal(name, claimed, owner, reason, changed)

        if len(parts) not in (3, 4):
            return refuse("not a folder the submission service makes (<student>+<assignment>+<time>+<random>)")
        if not stat.S_ISDIR(st.st_mode):
            return refuse("not a folder (a link or a file)")
        if st.st_uid != os.geteuid():
            return refuse(f"owned by {owner}: only the submission service (this account) writes inbound")
        found = scan(path)
        if found.entries > MAX_ENTRIES:
            return refuse(f"more than {MAX_ENTRIES} files and folders")
        if found.depth > MAX_DEPTH:
            return refuse(f"more than {MAX_DEPTH} folders deep")
        if found.owners != {os.geteuid()}:
            others = ", ".join(sorted(_owner_name(u) for u in found.owners - {os.geteuid()}))
            return refuse(f"holds files owned by {others}: the submission service writes every file itself")
        receipt = receipt_of(path)
        if receipt is None:
            return refuse(f"no {RECEIPT}: not received by the submission service")
        stamp = str(receipt.get("timestamp", ""))
        if receipt.get("folder") != name or receipt.get("student") != claimed \
                or receipt.get("assignment") != self.coursedir.assignment_id:
            return refuse(f"its {RECEIPT} names another folder, student or assignment", stamp)
        if not valid_student_id(claimed):
            return refuse("not a valid student id (an account name: letters, digits, '_', '.', '-')", stamp)
        try:
            account = pwd.getpwnam(claimed)
        except KeyError:
            return refuse("no account of that name on this machine", stamp)
        if account.pw_uid != receipt.get("uid"):
            return refuse(f"received from uid {receipt.get('uid')}, but {claimed} is uid {account.pw_uid} now", stamp)
        if roster and claimed not in roster:
            return refuse("not on the gradebook's roster (nbgrader db student list)", stamp)
        try:
            when = parse_utc(stamp)
        except Exception:  # noqa: BLE001  (the receipt is the service's, but a damaged one is refused)
            return refuse(f"its {RECEIPT} holds no time", stamp)
        return {"username": claimed, "filename": name, "timestamp": when, "receipt": receipt}, None

    def init_src(self) -> None:  # type: ignore[override]
        if self.coursedir.course_id == "":
            self.fail("No course id specified. Re-run with --course flag.")
        self.course_path = os.path.join(self.root, self.coursedir.course_id)
        self.inbound_path = os.path.join(self.course_path, "inbound")
        if not os.path.isdir(self.inbound_path):
            self.fail("Course not found: {}".format(self.inbound_path))
        aid = self.coursedir.assignment_id
        only = self.coursedir.student_id if self.coursedir.student_id not in ("", "*") else None
        roster = self._roster()
        records: list[dict[str, Any]] = []
        self.refusals = []
        self._kept_count = 0   # refusals[:_kept_count] are already copied aside and reported
        for name in sorted(os.listdir(self.inbound_path)):
            if name.startswith(".incoming-"):
                continue    # the service is still receiving it
            parts = name.rsplit("+", 3)
            if len(parts) < 2 or parts[-3 if len(parts) == 4 else 1] != aid:
                continue   # another assignment's folder (or nothing the service made: judged with its assignment)
            if only is not None and parts[0] != only:
                continue
            try:
                rec, refusal = self._judge(name, Path(self.inbound_path) / name, roster)
            except Exception as exc:  # noqa: BLE001  (one folder never stops the others)
                rec, refusal = None, Refusal(name, parts[0], "?", f"could not be judged ({type(exc).__name__}: "
                                             f"{ascii(str(exc))[:200]})")
            if refusal is not None:
                self._refuse(refusal)
            elif rec is not None:
                records.append(rec)
        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            try:
                self.duedate = gb.find_assignment(aid).duedate
            except MissingEntry:
                self.duedate = None
        self._receipts = {}
        self.src_records = []
        for recs in groupby(records, lambda r: r["username"]).values():
            recs = self._sort_by_timestamp(recs)
            chosen = recs[0]
            if self.duedate is not None and self.before_duedate:
                on_time = [r for r in recs if r["timestamp"] <= self.duedate]
                chosen = on_time[0] if on_time else recs[0]
            self._receipts[chosen["filename"]] = chosen["receipt"]
            self.src_records.append(chosen)
        self._keep_refused()

    # ---------------------------------------------------------------- refused folders

    def _refuse(self, refusal: Refusal) -> None:
        self.refusals.append(refusal)
        self.log.warning(refusal.line())

    def _refused_root(self) -> Path:
        return Path(self.coursedir.root) / self.refused_directory / self.coursedir.assignment_id

    def _keep_refused(self) -> None:
        """Copy each refused folder aside (regular files only) and append it to the report."""
        pending = self.refusals[self._kept_count:]
        self._kept_count = len(self.refusals)
        if not pending:
            return
        root = self._refused_root()
        root.mkdir(parents=True, exist_ok=True)
        report = root / "report.jsonl"
        seen = set()
        if report.is_file():
            for line in report.read_text().splitlines():
                try:
                    seen.add(json.loads(line)["kept_as"])
                except (ValueError, KeyError):
                    continue
        with report.open("a") as out:
            for r in pending:
                kept = hashlib.sha256(f"{r.folder}\0{r.changed}\0{r.reason}".encode("utf-8", "surrogateescape")
                                      ).hexdigest()[:16]
                if kept in seen:
                    continue
                src = Path(self.inbound_path) / r.folder
                try:
                    if src.is_dir() and not src.is_symlink():
                        copy_regular_files(src, root / kept, ignore=(),
                                           max_file_bytes=int(self.coursedir.max_file_size) * 1000,
                                           max_total_bytes=int(self.coursedir.max_dir_size) * 1000)
                except Exception as exc:  # noqa: BLE001  (a folder that cannot be kept is still reported)
                    self.log.warning("refused folder %s not kept aside: %s", ascii(r.folder), ascii(str(exc))[:200])
                out.write(json.dumps({"folder": r.folder, "claimed": r.claimed, "owner": r.owner,
                                      "reason": r.reason, "changed": r.changed, "kept_as": kept},
                                     ensure_ascii=True) + "\n")
                seen.add(kept)
        self.log.warning("%d exchange folder(s) of %s refused; kept aside in %s (see report.jsonl there)",
                         len(pending), self.coursedir.assignment_id, root)

    # ---------------------------------------------------------------- copying

    def copy_files(self) -> None:  # type: ignore[override]
        super().copy_files()
        self._keep_refused()      # folders refused while copying
        # what was just collected must not be readable by the students (course_tools/grading/privacy.py)
        from course_tools.grading.privacy import exposure_warnings

        for warning in exposure_warnings(Path(self.coursedir.root), self.coursedir.db_url, check_server=False):
            self.log.warning("course root reachable by other accounts: %s", warning)

    def do_copy(self, src: str, dest: str, log: Any = None) -> None:  # type: ignore[override]
        """Copy one submission, verified against its receipt; any failure refuses it alone."""
        name = os.path.basename(src)
        receipt = getattr(self, "_receipts", {}).get(name, {})
        try:
            report = copy_regular_files(Path(src), Path(dest),
                                        ignore=(*self.coursedir.ignore, RECEIPT),
                                        max_file_bytes=int(self.coursedir.max_file_size) * 1000,
                                        max_total_bytes=int(self.coursedir.max_dir_size) * 1000)
            for rel, why in report.skipped:
                self.log.warning("collect: not copied from %s: %s (%s)", ascii(src), ascii(str(rel)), why)
            for rel, digest in (receipt.get("files") or {}).items():
                got = Path(dest) / rel
                if got.is_file() and _sha256(got) != digest:
                    raise ValueError(f"{rel} differs from what the service received")
            stamp = receipt.get("timestamp")
            if stamp:
                # what autograde reads for the late penalty: the service's receipt time
                (Path(dest) / "timestamp.txt").write_text(str(stamp))
        except Exception as exc:  # noqa: BLE001  (one folder never stops the others)
            shutil.rmtree(dest, ignore_errors=True)
            self._refuse(Refusal(name, name.rsplit("+", 3)[0], _owner_name(os.lstat(src).st_uid) if
                                 os.path.lexists(src) else "?",
                                 f"could not be collected ({type(exc).__name__}: {ascii(str(exc))[:200]})",
                                 str(receipt.get("timestamp", ""))))

