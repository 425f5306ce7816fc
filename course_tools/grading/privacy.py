"""What of a course root other accounts of the machine can read, and keeping it private.

On one machine the course root (the checkout, ``/opt/llm-course`` in README "A shared environment
for the class") stays readable to every account: students run its ``.venv`` and ``course_utils``.
Under it, though, live the class's private data: the collected submissions (``submitted/``, with
each ``submission_secret.txt``), the autograded notebooks, the feedback, the refused exchange
folders, the reference records (``.llm-course/references``: the expected value of every hidden
check), the cluster's class folder, grade exports (``*.csv``) and the SQLite gradebook.

* :func:`secure_course` — run when the course's ``nbgrader_config.py`` is loaded and by the
  ``llm-course`` commands that write grades: every private item that exists loses its group and
  other permissions (folders 0700, files 0600); a command that writes student data first creates
  the private folders it writes into (0700) and an empty SQLite gradebook (0600: SQLite gives its
  journal files the database's mode); commands that run no kernel and release nothing
  (``collect``, ``export``, ``db``, ``llm-course register``) also work under umask 077. Kernels
  and releases are left alone: the sandbox sets its own modes for the kernel's account, and
  nbgrader's ``release_assignment`` / ``release_feedback`` give students their copies (feedback
  files keep their mode through ``shutil.copy``: they stay 0644 inside the 0700 ``feedback/``).
* :func:`exposure_warnings` — human-readable warnings for everything of the course root and its
  gradebook another account can reach (``llm-course doctor``, ``nbgrader collect``).
* :func:`take_db_url`, :func:`redact_url`, :func:`url_password` — the gradebook URL travels in
  the environment (``LLM_COURSE_DB_URL``; ``/proc/<pid>/environ`` is readable by its owner only),
  never on a command line, and leaves the environment as soon as the config reads it, so no
  kernel inherits it; printed and stored URLs carry no password.
"""
from __future__ import annotations

import fnmatch
import grp
import os
import pwd
import re
import stat
from pathlib import Path
from typing import Iterable, Sequence

DB_URL_ENV = "LLM_COURSE_DB_URL"

# top-level items of a course root that only the instructor may read: name -> what it holds
PRIVATE_DIRS: dict[str, str] = {
    "submitted": "collected submissions and their submission_secret.txt",
    "autograded": "autograded notebooks",
    "feedback": "feedback of every student",
    "refused": "refused exchange folders",
    ".llm-course": "reference records: the expected value of every hidden check",
    "cluster": "the cluster's class folder: graded shards, logs, the gradebook URL",
}
PRIVATE_FILES: dict[str, str] = {
    "*.csv": "a grade export",
    ".nbgrader.log": "nbgrader's log",
    "nbgrader.log": "nbgrader's log",
}
# the private folders each command writes into (created 0700 before it runs)
_WRITES: dict[str, tuple[str, ...]] = {
    "collect": ("submitted", "refused"), "zip_collect": ("submitted",),
    "autograde": ("autograded", ".llm-course"), "generate_feedback": ("feedback",), "feedback": ("feedback",),
    "formgrader": ("autograded", "feedback", ".llm-course"), "register": (), "references": (".llm-course",),
    "cluster": ("autograded", ".llm-course", "cluster"),
}
# commands that run no kernel and release nothing: they run under umask 077
_UMASK_077 = {"collect", "zip_collect", "export", "db", "register"}
# commands that open the gradebook (an SQLite one is created 0600 first)
_OPENS_DB = {"collect", "zip_collect", "autograde", "generate_feedback", "feedback", "export", "db", "formgrader",
             "register", "cluster"}

_taken_url: str | None = None


# --------------------------------------------------------------------------- the gradebook URL

def take_db_url() -> str | None:
    """The gradebook URL passed in ``$LLM_COURSE_DB_URL``, removed from the environment at once (a
    kernel started later must not inherit it; a student's code could print it into its feedback).
    Kept for this process: a second load of the config in the same process finds it again."""
    global _taken_url
    url = os.environ.pop(DB_URL_ENV, None)
    if url:
        _taken_url = url
    return _taken_url


_USERINFO = re.compile(r"(?P<user>[^:/@]*)(?::(?P<password>[^@]*))?@")   # SQLAlchemy's own URL pattern


def _split(url: str) -> tuple[str, str, str | None, str] | None:
    """``(scheme, user, password, after '@')`` of ``scheme://user[:password]@…``, else ``None``."""
    if "://" not in url:
        return None
    scheme, rest = url.split("://", 1)
    m = _USERINFO.match(rest)
    return (scheme, m.group("user"), m.group("password"), rest[m.end():]) if m else None


def url_password(url: str) -> str | None:
    """The password of a database URL as written in it (``None`` without one)."""
    parts = _split(url)
    return (parts[2] or None) if parts else None


def redact_url(url: str) -> str:
    """``url`` without its password (``postgresql://grader@host/db``), for logs, manifests and output;
    everything else exactly as written."""
    parts = _split(url)
    if not parts or parts[2] is None:
        return url
    scheme, user, _, rest = parts
    return f"{scheme}://{user}@{rest}"


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` created 0600 (replaced atomically; never readable by others)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, text.encode())
    finally:
        os.close(fd)
    os.replace(tmp, path)


# --------------------------------------------------------------------------- securing a course root

def command_of(argv: Sequence[str]) -> tuple[str, str]:
    """``(program, subcommand)`` of a command line: ``("nbgrader", "collect")`` for ``nbgrader
    collect NN`` or ``python -m nbgrader collect NN``, ``("llm-course", "autograde")``,
    ``("jupyter", "")`` for a Jupyter server (the grading lab, Formgrader), else ``("", "")``."""
    if not argv:
        return "", ""
    first = str(argv[0]).replace(os.sep, "/")
    name = first.rsplit("/", 1)[-1]
    sub = next((a for a in argv[1:] if not str(a).startswith("-")), "")
    if name == "nbgrader" or first.endswith("nbgrader/__main__.py"):
        return "nbgrader", sub
    if name == "llm-course" or first.endswith("course_tools/cli.py") or first.endswith("course_tools/__main__.py"):
        return "llm-course", sub
    if name.startswith("jupyter"):   # the grading lab, but also a student's `make lab`: nothing created
        return "jupyter", ""
    return "", ""


def _argv_db_url(argv: Sequence[str]) -> str | None:
    """A gradebook URL given on the command line (``--CourseDirectory.db_url=…``, ``--db …``)."""
    args = [str(a) for a in argv]
    for i, a in enumerate(args):
        for opt in ("--CourseDirectory.db_url", "--db"):
            if a.startswith(opt + "="):
                return a.split("=", 1)[1]
            if a == opt and i + 1 < len(args):
                return args[i + 1]
    return None


def _sqlite_path(db_url: str | None) -> Path | None:
    if not db_url or not db_url.startswith("sqlite"):
        return None
    path = db_url.split(":///", 1)[-1].split("?", 1)[0]
    return Path(path) if path and path != ":memory:" else None


def private_items(root: Path, db_url: str | None = None) -> list[tuple[Path, str]]:
    """Every private item of ``root`` that exists: ``(path, what it holds)``."""
    out = [(root / name, what) for name, what in PRIVATE_DIRS.items() if (root / name).exists()]
    try:
        names = sorted(os.listdir(root))
    except OSError:
        names = []
    for n in names:
        for pat, what in PRIVATE_FILES.items():
            if fnmatch.fnmatchcase(n, pat) and (root / n).is_file():
                out.append((root / n, what))
                break
    db = _sqlite_path(db_url)
    if db is not None:
        for f in [db, *[db.with_name(db.name + s) for s in ("-journal", "-wal", "-shm")]]:
            if f.exists():
                out.append((f, "the gradebook: every score"))
    refs = os.environ.get("LLM_COURSE_REFERENCES")
    if refs and Path(refs).exists() and not any(Path(refs).resolve() == p.resolve() for p, _ in out):
        out.append((Path(refs), "reference records: the expected value of every hidden check"))
    return out


def secure_course(root: str | Path, db_url: str | None = None, argv: Sequence[str] | None = None) -> list[str]:
    """Make the private items of the course root private (see the module docstring).

    ``argv`` (default: none) names the command about to run; only a command that writes student
    data creates folders, the SQLite gradebook, or sets umask 077. Acts only for the owner of the
    course root (or root); never raises. Returns what it changed, one line each.
    """
    root = Path(root)
    db_url = _argv_db_url(argv or ()) or db_url
    done: list[str] = []
    try:
        owner = root.stat().st_uid
    except OSError:
        return done
    me = os.geteuid()
    if me not in (0, owner):
        return done   # another account running nbgrader here: nothing of it is theirs to change
    refs = os.environ.get("LLM_COURSE_REFERENCES")   # a cache kept elsewhere (selftest, tests): reported, not changed
    for path, _ in private_items(root, db_url):
        if refs and path == Path(refs):
            continue
        try:
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode) or st.st_mode & 0o077 == 0:
                continue
            path.chmod(stat.S_IMODE(st.st_mode) & 0o700)
            done.append(f"chmod go-rwx {path}")
        except OSError:
            pass
    prog, sub = command_of(argv or ())
    if not prog or me != owner:
        return done
    for name in _WRITES.get(sub, ()):
        d = root / name
        if not d.exists():
            try:
                d.mkdir(mode=0o700)
                d.chmod(0o700)
                done.append(f"created {d} (0700)")
            except OSError:
                pass
    db = _sqlite_path(db_url)
    if sub in _OPENS_DB and db is not None and db.parent.is_dir() and not db.exists():
        try:   # an empty file is an empty SQLite database: nbgrader creates its tables in it
            os.close(os.open(db, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            done.append(f"created {db} (0600)")
        except OSError:
            pass
    if sub in _UMASK_077:
        os.umask(0o077)
        done.append("umask 077")
    return done


# --------------------------------------------------------------------------- who can reach what

def _group_others(gid: int, owner_uid: int) -> list[str]:
    """Accounts other than the owner in group ``gid`` (as a supplementary or primary group)."""
    try:
        g = grp.getgrgid(gid)
    except KeyError:
        return []
    try:
        owner = pwd.getpwuid(owner_uid).pw_name
    except KeyError:
        owner = ""
    names = set(g.gr_mem)
    try:
        names |= {p.pw_name for p in pwd.getpwall() if p.pw_gid == gid}
    except OSError:
        pass
    names.discard(owner)
    return sorted(names)


def _others_can_enter(path: Path) -> bool:
    """Whether an account that is neither owner nor group member can walk down to ``path``'s folder."""
    for d in path.resolve().parents:
        try:
            if not d.stat().st_mode & stat.S_IXOTH:
                return False
        except OSError:
            return False
    return True


def _exposed_files(top: Path, limit: int = 20000) -> tuple[list[Path], bool]:
    """Files under ``top`` another account can read (every folder on the way o+x, the file o+r),
    and whether some folder can be listed by them. ``top`` itself is a folder they can enter."""
    found: list[Path] = []
    listable = False
    stack = [top]
    seen = 0
    while stack and seen < limit:
        d = stack.pop()
        try:
            st = d.lstat()
        except OSError:
            continue
        if not st.st_mode & stat.S_IXOTH:
            continue
        listable |= bool(st.st_mode & stat.S_IROTH)
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        for e in entries:
            seen += 1
            try:
                est = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(est.st_mode):
                stack.append(Path(e.path))
            elif stat.S_ISREG(est.st_mode) and est.st_mode & stat.S_IROTH:
                found.append(Path(e.path))
    return found, listable


def _fix(path: Path) -> str:
    return f"fix: chmod -R go-rwx {path}" if path.is_dir() else f"fix: chmod go-rwx {path}"


def _world_readable(path: Path) -> bool:
    try:
        return bool(path.stat().st_mode & stat.S_IROTH) and _others_can_enter(path)
    except OSError:
        return False


def exposure_warnings(root: Path, db_url: str | None = None, *, check_server: bool = True) -> list[str]:
    """What of the course root ``root`` and its gradebook ``db_url`` other accounts can reach.

    One human-readable warning per problem (empty: nothing found): a private item (submissions,
    autograded notebooks, feedback, refused folders, reference records, the class folder, grade
    exports, the SQLite gradebook) readable or writable by every account or by a group with other
    members; a gradebook URL whose password sits in a file others can read (the course config, a
    manifest, the Jupyter configs) or a ``.pgpass`` others can read; with ``check_server``, a
    PostgreSQL server whose ``pg_hba.conf`` trusts connections (any local account then connects
    as the grader and rewrites grades). Reads only; never raises.
    """
    root = Path(root)
    out: list[str] = []
    for path, what in private_items(root, db_url):
        try:
            st = path.lstat()
        except OSError:
            continue
        if stat.S_ISLNK(st.st_mode):
            continue
        rel = path.name if path.parent == root else str(path)
        enter = _others_can_enter(path)
        if stat.S_ISDIR(st.st_mode):
            if enter and st.st_mode & stat.S_IXOTH:
                files, listable = _exposed_files(path)
                if files:
                    out.append(f"{rel}/ ({what}): {len(files)} file(s) readable by every account of this machine, "
                               f"e.g. {files[0]}; {_fix(path)}")
                elif listable:
                    out.append(f"{rel}/ ({what}): its names can be listed by every account; {_fix(path)}")
        else:
            if enter and st.st_mode & (stat.S_IROTH | stat.S_IWOTH):
                how = " and ".join(w for w, b in (("readable", stat.S_IROTH), ("writable", stat.S_IWOTH))
                                   if st.st_mode & b)
                out.append(f"{rel} ({what}): {how} by every account of this machine; {_fix(path)}")
        group_bits = stat.S_IXGRP if stat.S_ISDIR(st.st_mode) else stat.S_IRGRP | stat.S_IWGRP
        if st.st_mode & group_bits:
            members = _group_others(st.st_gid, st.st_uid)
            if members:
                gname = _group_name(st.st_gid)
                out.append(f"{rel} ({what}): open to group {gname} ({', '.join(members[:5])}"
                           f"{', …' if len(members) > 5 else ''}); {_fix(path)}")
    if db_url:
        out += _url_warnings(root, db_url)
        if check_server and db_url.startswith("postgres"):
            out += _pg_trust_warnings(db_url)
    return out


def _group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def _config_files(root: Path) -> Iterable[Path]:
    yield root / "nbgrader_config.py"
    yield root / "cluster" / "manifest.json"
    yield Path.home() / ".jupyter" / "nbgrader_config.py"
    for d in ("/etc/jupyter", "/usr/local/etc/jupyter"):
        yield Path(d) / "nbgrader_config.py"


def _url_warnings(root: Path, db_url: str) -> list[str]:
    """A password of ``db_url`` in a file others can read; a ``.pgpass`` others can read."""
    out = []
    secret = url_password(db_url)
    if secret:
        for f in _config_files(root):
            try:
                if _world_readable(f) and secret in f.read_text(errors="replace"):
                    out.append(f"{f} holds the gradebook's password and every account can read it: keep the URL "
                               f"without password there (a ~/.pgpass of mode 0600, or ${DB_URL_ENV}); "
                               f"{_fix(f)}")
            except OSError:
                pass
    if db_url.startswith("postgres"):
        pgpass = Path(os.environ.get("PGPASSFILE") or Path.home() / ".pgpass")
        try:
            mode = pgpass.stat().st_mode
        except OSError:
            mode = None
        if mode is not None and mode & 0o077:
            out.append(f"{pgpass} is open to other accounts (mode {stat.S_IMODE(mode):o}; libpq also ignores it "
                       f"then): chmod 600 {pgpass}")
    return out


def _pg_trust_warnings(db_url: str, timeout: int = 5) -> list[str]:
    """``pg_hba.conf`` rules with ``trust`` (readable by a superuser only: else nothing is said)."""
    try:
        from sqlalchemy import create_engine, text

        engine = create_engine(db_url, connect_args={"connect_timeout": timeout})
        try:
            with engine.connect() as conn:
                rows = conn.execute(text("SELECT line_number, type, database, user_name, address, auth_method "
                                         "FROM pg_hba_file_rules WHERE auth_method = 'trust' AND error IS NULL")).all()
        finally:
            engine.dispose()
    except Exception:
        return []
    out = []
    for line, kind, dbs, users, addr, _ in rows:
        where = "local (Unix socket)" if kind == "local" else f"{kind} from {addr or 'any address'}"
        out.append(f"PostgreSQL trusts {where} connections to database(s) {','.join(dbs or [])} for role(s) "
                   f"{','.join(users or [])} (pg_hba.conf line {line}): any account that can connect may act as "
                   "that role and rewrite grades; use peer (the instructor's account) or scram-sha-256")
    return out
