"""The class manifest: which students of which chapter each array task grades.

A class folder (default ``<course root>/cluster``, on the file system every node shares) holds::

    manifest.json              the shards (index -> chapter, students, fingerprint) and the options
    templates/<chapter>.db     the assignment as the main gradebook holds it (SQLite, read by workers)
    results/<index>/           one finished shard: result.json, gradebook.db, autograded/<student>/<chapter>/
    logs/<job>_<task>.out      Slurm's output file of each task
    gradebook-url              the gradebook URL when it holds a password (mode 0600; manifest.json
                               keeps the URL without it)
    jobs.json                  every sbatch this class made (array job ids, their indices, merge jobs)

A shard's *fingerprint* hashes everything its grades depend on: the chapter's source notebook,
the submitted files of its students, the assignment in the gradebook (due date, cells, checksums),
the course code and libraries (the reference run's key) and the course config. A worker whose
shard already has a result with the same fingerprint does nothing; a merge takes only results
whose fingerprint is the manifest's.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

# Measured cost of grading one more submission (seconds, one core, offline CI mode) and the peak
# memory of its kernel (GB): README "For maintainers" table (2026-11-24/26, 2-core machine).
# Chapters 01-07: "<= 15 s" and 0.6-1.1 GB; the upper ends are used.
CHAPTER_COST: dict[str, tuple[float, float]] = {
    "01": (15.0, 1.0), "02": (15.0, 1.4), "03": (15.0, 1.1), "04": (15.0, 2.3), "05": (15.0, 1.0),
    "06": (15.0, 1.0), "07": (15.0, 1.1), "08": (24.5, 2.0), "09": (13.5, 2.2), "10": (16.3, 0.9),
    "11": (16.9, 3.4), "12": (13.9, 2.2), "13": (11.0, 3.1),
}
DEFAULT_COST = (30.0, 3.5)   # an unknown chapter: assume a heavy one
STARTUP_S = 10.0              # nbgrader's start-up per worker process (3.4-7.5 s measured) plus the task's own
TARGET_TASK_S = 300.0         # a shard should take about this long per core (sites dislike many tiny jobs)


def chapter_cost(chapter: str) -> tuple[float, float]:
    """(seconds per submission, GB per kernel) of ``chapter`` (``NN_name``)."""
    return CHAPTER_COST.get(chapter[:2], DEFAULT_COST)


def default_shard_size(chapter: str, cpus: int) -> int:
    """Students per shard: about :data:`TARGET_TASK_S` of grading per core, so a chapter with long
    notebooks gets fewer students per shard."""
    sec, _ = chapter_cost(chapter)
    return max(1, cpus * int(TARGET_TASK_S // sec))


def default_mem_mb(chapter: str, cpus: int) -> int:
    """Memory per task: each of ``cpus`` nbgrader workers runs one kernel (and its reference
    verifier) at a time; 1.5 × the kernel's measured peak plus 1 GB for nbgrader itself."""
    _, gb = chapter_cost(chapter)
    return int(math.ceil((cpus * gb * 1.5 + 1.0) * 1024 / 256) * 256)


def default_time_min(chapter: str, students: int, cpus: int) -> int:
    """Time limit per task (minutes): three times the expected time, at least 10 minutes."""
    sec, _ = chapter_cost(chapter)
    expected = STARTUP_S + math.ceil(students / cpus) * sec
    return max(10, int(math.ceil(3 * expected / 60)))


@dataclass
class Shard:
    index: int
    chapter: str
    students: list[str]
    fingerprint: str = ""


@dataclass
class Manifest:
    root: str                       # the nbgrader course root (shared file system)
    folder: str                     # the class folder
    db: str                         # the main gradebook URL (only the merge writes it)
    course: str                     # CourseDirectory.course_id
    python: str                     # the interpreter the tasks run (the course environment)
    shards: list[Shard] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)

    # ------------------------------------------------------------------ paths
    @property
    def path(self) -> Path:
        return Path(self.folder) / "manifest.json"

    def template(self, chapter: str) -> Path:
        return Path(self.folder) / "templates" / f"{chapter}.db"

    def result_dir(self, index: int) -> Path:
        return Path(self.folder) / "results" / f"{index:05d}"

    @property
    def logs(self) -> Path:
        return Path(self.folder) / "logs"

    @property
    def jobs_file(self) -> Path:
        return Path(self.folder) / "jobs.json"

    def chapters(self) -> list[str]:
        return sorted({s.chapter for s in self.shards})

    def by_chapter(self) -> dict[str, list[Shard]]:
        out: dict[str, list[Shard]] = {}
        for s in self.shards:
            out.setdefault(s.chapter, []).append(s)
        return out

    # ------------------------------------------------------------------ io
    @property
    def secret_path(self) -> Path:
        """The 0600 file holding the gradebook URL when it carries a password."""
        return Path(self.folder) / "gradebook-url"

    def save(self) -> Path:
        """Write manifest.json; a gradebook password goes only to :attr:`secret_path` (mode 0600)."""
        from course_tools.grading.privacy import redact_url, url_password, write_private

        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = asdict(self)
        if url_password(self.db):
            write_private(self.secret_path, self.db)
            data["db"] = redact_url(self.db)
        else:
            self.secret_path.unlink(missing_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        tmp.replace(self.path)
        return self.path

    @classmethod
    def load(cls, path: str | Path) -> "Manifest":
        p = Path(path)
        if p.is_dir():
            p = p / "manifest.json"
        data = json.loads(p.read_text())
        data["shards"] = [Shard(**s) for s in data["shards"]]
        m = cls(**data)
        try:   # the full URL (with its password) of a gradebook that needs one
            from course_tools.grading.privacy import redact_url

            full = m.secret_path.read_text().strip()
            if redact_url(full) == m.db:
                m.db = full
        except OSError:
            pass
        return m

    def result(self, index: int) -> dict[str, Any] | None:
        """The result a worker wrote for shard ``index`` when its fingerprint is current, else None."""
        f = self.result_dir(index) / "result.json"
        try:
            data = json.loads(f.read_text())
        except (OSError, ValueError):
            return None
        return data if data.get("fingerprint") == self.shards[index].fingerprint else None

    def jobs(self) -> list[dict[str, Any]]:
        try:
            return json.loads(self.jobs_file.read_text())
        except (OSError, ValueError):
            return []

    def add_jobs(self, entries: Sequence[dict[str, Any]]) -> None:
        data = self.jobs() + list(entries)
        tmp = self.jobs_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        tmp.replace(self.jobs_file)


def shards_for(chapters: dict[str, list[str]], sizes: dict[str, int]) -> list[Shard]:
    """Chapter × consecutive slices of its sorted students, numbered from 0 across chapters."""
    out: list[Shard] = []
    for ch in sorted(chapters):
        students = sorted(chapters[ch])
        n = max(1, sizes[ch])
        for i in range(0, len(students), n):
            out.append(Shard(len(out), ch, students[i:i + n]))
    return out


def _hash_tree(h: "hashlib._Hash", folder: Path) -> None:
    for f in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
        h.update(str(f.relative_to(folder)).encode() + b"\0" + f.read_bytes() + b"\0")


def fingerprint(root: Path, chapter: str, students: Sequence[str], structure_digest: str) -> str:
    """What the grades of ``students`` for ``chapter`` depend on (see the module docstring)."""
    from course_tools.grading.references import _fingerprint

    h = hashlib.sha256(f"{chapter}\0{','.join(students)}\0{structure_digest}\0".encode())
    src = root / "solutions" / chapter / f"{chapter}.ipynb"
    h.update(_fingerprint(src).encode() if src.is_file() else b"no source")
    cfg = root / "nbgrader_config.py"
    h.update(cfg.read_bytes() if cfg.is_file() else b"")
    for s in students:
        h.update(f"\0student {s}\0".encode())
        folder = root / "submitted" / s / chapter
        if folder.is_dir():
            _hash_tree(h, folder)
    return h.hexdigest()[:32]
