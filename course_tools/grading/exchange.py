"""``nbgrader collect`` that believes nothing a student wrote into the exchange.

nbgrader's inbound directory is writable by every student, and stock ``collect`` takes the student
id and the submission time from the folder's *name* (``<student>+<assignment>+<time>+<random>``)
and copies it with ``shutil.copytree``. A student could therefore hand in a folder in another
student's name (stock ``collect`` logs "cheating attempt?" and collects it anyway, as the victim's
latest submission), rewrite ``timestamp.txt`` and the name after the due date (no late penalty),
choose a "student id" holding markup, a spreadsheet formula, glob characters or a newline (new
students in the gradebook; other students' grading broken), or place a link to the instructor's
files in their folder after ``submit``. :class:`SafeCollect` (``c.ExchangeFactory.collect`` in
``nbgrader_config.py``) collects instead:

* **only folders owned by the account they name.** The student id of a folder must be a plain
  account name (:data:`STUDENT_ID`: letters, digits, ``_ . -``, not starting with ``.``/``-``; no
  ``+``, glob character, markup, formula start or control character), an existing Unix account,
  on the gradebook's roster when the gradebook has one, and the folder and everything in it
  (``lstat``: a link is not followed; at most :data:`MAX_ENTRIES` entries) must belong to that
  account's uid. Anything else is **refused**: never collected,
  never replacing a real submission, copied aside (regular files only) into
  ``refused/<assignment>/<n>-<digest>/`` of the course with one JSON line per folder in
  ``refused/<assignment>/report.jsonl`` (the folder's name, the account that owns it, the student
  it claimed, why), and logged as a warning with every name escaped (``ascii``).
* **at a time the student cannot write.** A submission's time is the latest *change time*
  (``st_ctime``) of its folder and of everything in it: the kernel sets it on every write, rename,
  chmod or new file, and no unprivileged call sets it back. A submission modified after the due
  date is therefore late, whatever its ``timestamp.txt`` or folder name say. The collected
  ``timestamp.txt`` (what ``autograde`` reads for the late penalty, and what ``export`` shows) is
  rewritten with that time; the student's own claim is kept in the log when it differs by more
  than :data:`CLAIM_SLACK_S`. What the course cannot change: the file server's clock (on a network
  file system the change time is the server's) and root, who can set the clock.
* **with a copy that follows nothing** (:func:`course_tools.grading.pristine.copy_regular_files`:
  no links, no special files, sparse files refused), keeping nbgrader's ``ignore`` patterns and
  ``max_file_size``.
"""
from __future__ import annotations

import datetime
import hashlib
import json
import os
import pwd
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.exchange.default.collect import ExchangeCollect, groupby
from nbgrader.utils import parse_utc
from traitlets import Unicode

from course_tools.grading.pristine import copy_regular_files

# A student id the course accepts: a portable account name (POSIX "portable filename" letters,
# starting with a letter or '_', at most 32 characters).
STUDENT_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}")
# The difference between the student's timestamp.txt and the change time that is logged.
CLAIM_SLACK_S = 60.0
TIME_FORMAT = "%Y-%m-%d %H:%M:%S.%f UTC"


def valid_student_id(student: str) -> bool:
    """True for a plain account name (:data:`STUDENT_ID`), which no glob, shell, CSV or HTML reads as code."""
    return STUDENT_ID.fullmatch(student) is not None


# Entries of one exchange folder beyond which it is refused (nbgrader's max_dir_size bounds bytes, not names).
MAX_ENTRIES = 10_000


@dataclass
class Scan:
    """What the file system says about one exchange folder."""

    changed: datetime.datetime    # the latest change time of the folder and everything in it (naive UTC)
    owners: set[int]              # the uids owning the folder and everything in it
    entries: int


def scan(folder: Path, limit: int = MAX_ENTRIES) -> Scan:
    """Change times and owners of ``folder`` and of everything below it (links not followed, at most
    ``limit`` entries: the rest are not looked at and ``entries`` says ``limit + 1``)."""
    top_st = os.lstat(folder)
    latest, owners, n = top_st.st_ctime, {top_st.st_uid}, 0
    for top, dirs, files in os.walk(folder, followlinks=False):
        for name in dirs + files:
            n += 1
            if n > limit:
                break
            try:
                st = os.lstat(os.path.join(top, name))
            except OSError:
                continue
            latest = max(latest, st.st_ctime)
            owners.add(st.st_uid)
        if n > limit:
            break
    return Scan(datetime.datetime.fromtimestamp(latest, datetime.timezone.utc).replace(tzinfo=None), owners, n)


def change_time(folder: Path) -> datetime.datetime:
    """The latest change time of ``folder`` and of everything below it (links not followed), as a
    naive UTC datetime (nbgrader's convention)."""
    return scan(folder).changed


@dataclass
class Refusal:
    """One exchange folder that was not collected, and why."""

    folder: str          # its name in the inbound directory, as found
    claimed: str         # the student id its name claims
    owner: str           # the account that owns it ("uid N" when none)
    reason: str
    changed: str = ""    # its change time (UTC)

    def line(self) -> str:
        return (f"refused {ascii(self.folder)}: claims student {ascii(self.claimed)}, owned by "
                f"{ascii(self.owner)}: {self.reason}")


def _owner_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


class SafeCollect(ExchangeCollect):
    """nbgrader's default collect: owned folders only, change times, a copy that follows nothing."""

    refused_directory = Unicode("refused", config=True,
                                help="Folder of the course root where refused exchange folders are kept, "
                                     "one subfolder per assignment, with report.jsonl.")

    _trusted: dict[str, datetime.datetime]
    refusals: list[Refusal]

    # ---------------------------------------------------------------- which folders

    def _roster(self) -> set[str]:
        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            return {s.id for s in gb.students}

    def _judge(self, name: str, path: Path, roster: set[str]) -> tuple[dict[str, Any] | None, Refusal | None]:
        parts = name.rsplit("+", 3)
        try:
            st = os.lstat(path)
        except OSError as exc:
            return None, Refusal(name, parts[0], "?", f"cannot be read ({exc.strerror})")
        owner = _owner_name(st.st_uid)
        claimed = parts[0]
        found = scan(path) if stat.S_ISDIR(st.st_mode) else None
        changed = found.changed.strftime(TIME_FORMAT) if found is not None else ""

        def refuse(reason: str) -> tuple[None, Refusal]:
            return None, Refusal(name, claimed, owner, reason, changed)

        if len(parts) not in (3, 4):
            return refuse("not a folder nbgrader submit makes (<student>+<assignment>+<time>[+<random>])")
        if found is None:
            return refuse("not a folder (a link or a file)")
        if not valid_student_id(claimed):
            return refuse("not a valid student id (an account name: letters, digits, '_', '.', '-')")
        try:
            account = pwd.getpwnam(claimed)
        except KeyError:
            return refuse("no account of that name on this machine")
        if account.pw_uid != st.st_uid:
            return refuse(f"owned by {owner}, not by {claimed}: a submission belongs to the account that made it")
        if found.owners != {account.pw_uid}:
            others = ", ".join(sorted(_owner_name(u) for u in found.owners - {account.pw_uid}))
            return refuse(f"holds files owned by {others}, not by {claimed}")
        if found.entries > MAX_ENTRIES:
            return refuse(f"more than {MAX_ENTRIES} files and folders")
        if roster and claimed not in roster:
            return refuse("not on the gradebook's roster (nbgrader db student list)")
        try:
            claim = parse_utc(parts[2])
        except Exception:  # noqa: BLE001  (any unparsable time is the student's)
            claim = None
        return {"username": claimed, "filename": name, "timestamp": found.changed, "claimed": claim}, None

    def init_src(self) -> None:  # type: ignore[override]
        if self.coursedir.course_id == "":
            self.fail("No course id specified. Re-run with --course flag.")
        self.course_path = os.path.join(self.root, self.coursedir.course_id)
        self.inbound_path = os.path.join(self.course_path, "inbound")
        if not os.path.isdir(self.inbound_path):
            self.fail("Course not found: {}".format(self.inbound_path))
        if not os.access(self.inbound_path, os.R_OK | os.X_OK):
            self.fail("You don't have read permissions for the directory: {}".format(self.inbound_path))
        aid = self.coursedir.assignment_id
        only = self.coursedir.student_id if self.coursedir.student_id not in ("", "*") else None
        roster = self._roster()
        records: list[dict[str, Any]] = []
        self.refusals = []
        for name in sorted(os.listdir(self.inbound_path)):
            parts = name.rsplit("+", 3)
            if len(parts) < 2 or parts[-3 if len(parts) == 4 else 1] != aid:
                continue   # another assignment's folder (or nothing nbgrader made: judged with its assignment)
            if only is not None and parts[0] != only:
                continue
            rec, refusal = self._judge(name, Path(self.inbound_path) / name, roster)
            if refusal is not None:
                self.refusals.append(refusal)
                self.log.warning(refusal.line())
            elif rec is not None:
                records.append(rec)
        self._keep_refused()
        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            try:
                self.duedate = gb.find_assignment(aid).duedate
            except MissingEntry:
                self.duedate = None
        self._trusted = {}
        self.src_records = []
        for recs in groupby(records, lambda r: r["username"]).values():
            recs = self._sort_by_timestamp(recs)
            chosen = recs[0]
            if self.duedate is not None and self.before_duedate:
                on_time = [r for r in recs if r["timestamp"] <= self.duedate]
                chosen = on_time[0] if on_time else recs[0]
            claim = chosen["claimed"]
            if claim is None or abs((claim - chosen["timestamp"]).total_seconds()) > CLAIM_SLACK_S:
                self.log.warning("%s: the submission's name says %s, the file system says it was last changed at "
                                 "%s; the file system's time is used", ascii(chosen["filename"]),
                                 ascii(str(claim)), chosen["timestamp"].strftime(TIME_FORMAT))
            self._trusted[chosen["filename"]] = chosen["timestamp"]
            self.src_records.append(chosen)

    # ---------------------------------------------------------------- refused folders

    def _refused_root(self) -> Path:
        return Path(self.coursedir.root) / self.refused_directory / self.coursedir.assignment_id

    def _keep_refused(self) -> None:
        """Copy each refused folder aside (regular files only) and append it to the report."""
        if not self.refusals:
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
            for r in self.refusals:
                digest = hashlib.sha256(f"{r.folder}\0{r.changed}".encode("utf-8", "surrogateescape")).hexdigest()[:16]
                kept = f"{digest}"
                if kept in seen:
                    continue
                src = Path(self.inbound_path) / r.folder
                if src.is_dir() and not src.is_symlink():
                    copy_regular_files(src, root / kept, ignore=(),
                                       max_file_bytes=int(self.coursedir.max_file_size) * 1000,
                                       max_total_bytes=int(self.coursedir.max_dir_size) * 1000)
                out.write(json.dumps({"folder": r.folder, "claimed": r.claimed, "owner": r.owner,
                                      "reason": r.reason, "changed": r.changed, "kept_as": kept},
                                     ensure_ascii=True) + "\n")
                seen.add(kept)
        self.log.warning("%d exchange folder(s) of %s refused; kept aside in %s (see report.jsonl there)",
                         len(self.refusals), self.coursedir.assignment_id, root)

    # ---------------------------------------------------------------- copying

    def do_copy(self, src: str, dest: str, log: Any = None) -> None:  # type: ignore[override]
        report = copy_regular_files(Path(src), Path(dest), ignore=tuple(self.coursedir.ignore),
                                    max_file_bytes=int(self.coursedir.max_file_size) * 1000,
                                    max_total_bytes=int(self.coursedir.max_dir_size) * 1000)
        for rel, why in report.skipped:
            self.log.warning("collect: not copied from %s: %s (%s)", ascii(src), ascii(str(rel)), why)
        trusted = getattr(self, "_trusted", {}).get(os.path.basename(src))
        if trusted is not None:
            # what autograde reads for the late penalty: the time the student cannot write
            (Path(dest) / "timestamp.txt").write_text(trusted.strftime(TIME_FORMAT))
