"""The course's editions: which exist, where their notebooks are, and which one a class is given.

The bottom layer of the edition machinery, importing nothing else of ``course_tools``: the English
release (:mod:`course_tools.release`) and the translated editions (:mod:`course_tools.translation`)
both build on it, so neither imports the other's internals (``release`` imports ``translation``
to build the editions after English; ``translation`` never imports ``release``).

* **Editions.** English (``notebooks/``, generated from ``solutions/``) and each language of
  :data:`LANGUAGES` with catalogues in ``locale/`` (``pt_BR/solutions``, ``pt_BR/notebooks``).
* **Generation.** :func:`generate` is nbgrader's ``generate_assignment --no-db`` into a folder:
  what ``llm-course release`` runs for ``notebooks/`` and ``llm-course translate build`` for an
  edition's ``<lang>/notebooks``.
* **The class edition.** One class is given one edition: ``llm-course edition pt_BR`` records it
  in ``<course root>/.llm-course/edition`` (private with the rest of ``.llm-course/``), and the
  course's ``nbgrader_config.py`` sets ``CourseDirectory.release_directory`` from it
  (:func:`release_directory`), so the stock ``nbgrader release_assignment NN`` and Formgrader's
  *Release* button (which reloads the config at every request) hand out ``pt_BR/notebooks/NN``.
  Nothing else changes: one gradebook, the English source (``solutions/``) registered and graded,
  a Portuguese submission's locked cells restored from the Portuguese release
  (``course_tools/grading/overwrite.py``), its feedback generated from its autograded notebook,
  hence in Portuguese. Tested by ``tests/test_edition_class.py``.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from course_utils.paths import repo_root

ENGLISH = "en"
LANGUAGES = ("pt_BR",)          # the translated editions
LOCALE = "locale"
EDITION_FILE = Path(".llm-course") / "edition"   # the class edition, relative to the course root


class ReleaseError(RuntimeError):
    """A problem the instructor must fix before releasing; the message says what to do."""


class EditionError(ReleaseError):
    """The class edition is unknown or its notebooks are missing; the message says what to do."""


def editions(root: Path | None = None) -> list[str]:
    """The languages this course ships an edition of (those with catalogues in ``locale/``)."""
    root = root or repo_root()
    return [lang for lang in LANGUAGES if (root / LOCALE / lang / "LC_MESSAGES").is_dir()]


def edition_dir(lang: str, kind: str, root: Path | None = None) -> Path:
    """``<lang>/solutions`` or ``<lang>/notebooks`` in the checkout."""
    return (root or repo_root()) / lang / kind


def chapters(root: Path | None = None) -> list[str]:
    """Chapter ids (``NN_name``) found in ``solutions/``, sorted."""
    root = root or repo_root()
    return sorted(p.name for p in (root / "solutions").iterdir() if (p / f"{p.name}.ipynb").is_file())


def generate(root: Path, chapter: str, release_dir: Path, source_dir: Path | None = None) -> None:
    """nbgrader generate_assignment --no-db for ``chapter`` (a name or the glob ``*``) into ``release_dir``
    (from ``source_dir``: ``solutions/`` unless given, e.g. an edition's ``pt_BR/solutions``)."""
    cmd = [
        sys.executable, "-m", "nbgrader", "generate_assignment", chapter, "--no-db", "--force",
        f"--CourseDirectory.root={root}", f"--CourseDirectory.release_directory={release_dir}",
        "--log-level=WARN",
    ]
    if source_dir is not None:
        cmd.append(f"--CourseDirectory.source_directory={source_dir}")
    res = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    if res.returncode != 0:
        raise ReleaseError(f"nbgrader generate_assignment {chapter} failed:\n{res.stdout}\n{res.stderr}")


# --- the class edition ------------------------------------------------------------------------------
def release_folder(lang: str) -> str:
    """The release folder of an edition, relative to the course root: ``notebooks`` or ``<lang>/notebooks``."""
    if lang == ENGLISH:
        return "notebooks"
    if lang not in LANGUAGES:
        raise EditionError(f"unknown edition {lang!r}: the editions are {', '.join((ENGLISH,) + LANGUAGES)}")
    return f"{lang}/notebooks"


def class_edition(course_root: str | os.PathLike[str]) -> str:
    """The edition the class of ``course_root`` is given (``llm-course edition``): ``en`` unless recorded.

    Raises :class:`EditionError` for a recorded value that is not an edition, or an edition whose
    notebooks the course root does not have."""
    path = Path(course_root) / EDITION_FILE
    try:
        lang = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return ENGLISH
    folder = release_folder(lang) if lang else None
    if folder is None:
        raise EditionError(f"{path} is empty: run `llm-course edition en` or `llm-course edition pt_BR`")
    if not (Path(course_root) / folder).is_dir():
        raise EditionError(f"the class edition is {lang} ({path}) but {Path(course_root) / folder} does not exist: "
                           "run `llm-course translate build`, or `llm-course edition en`")
    return lang


def release_directory(course_root: str | os.PathLike[str], argv: Sequence[str] = ()) -> str:
    """``CourseDirectory.release_directory`` for the class edition (``nbgrader_config.py``).

    ``notebooks`` for nbgrader's ``generate_assignment`` (``argv``: the command line): that command
    writes English notebooks into the release folder and must never overwrite an edition's.

    Never raises (the config must load: an exception there makes traitlets skip the whole file, the
    course's exchange plugins with it): a broken record gives ``notebooks``, and the release plugin
    (``course_tools.exchange_service.client.CourseReleaseAssignment``) refuses to release with
    :func:`class_edition`'s message. An account that cannot read the record (a student whose Jupyter
    loads this config) gets ``notebooks`` too: students never release."""
    if any(a in ("generate_assignment", "assign") for a in list(argv)[1:2]):
        return "notebooks"
    try:
        return release_folder(class_edition(course_root))
    except (EditionError, OSError, UnicodeDecodeError):
        return "notebooks"


def set_class_edition(lang: str, course_root: str | os.PathLike[str]) -> Path:
    """Record ``lang`` as the class edition of ``course_root``; returns the record's path."""
    folder = Path(course_root) / release_folder(lang)   # EditionError for an unknown edition
    if not folder.is_dir():
        raise EditionError(f"{folder} does not exist: the {lang} edition is built by `llm-course translate build`")
    path = Path(course_root) / EDITION_FILE
    path.parent.mkdir(mode=0o700, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(lang + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


# --- the answer stubs of an edition's student notebooks -----------------------------------------
def N_(message: str) -> str:
    """Marks an English message for the ``course_utils`` catalogue (extracted, not translated here)."""
    return message


# nbgrader's stub lines an edition translates (course_tools.grading.i18n.EditionClearSolutions)
STUB_LINES = (N_("# YOUR CODE HERE"), N_("YOUR ANSWER HERE"))


def edition_answer_stub(source: str, lang: str) -> str:
    """A released answer cell's ``source`` with the English stub lines in ``lang`` (what
    ``EditionClearSolutions`` writes: each line of a stub translated, its indentation kept), to
    compare an edition's student notebook with the English one."""
    from course_utils.translation import translator

    t = translator(lang)
    stubs = set(STUB_LINES)
    out = []
    for line in source.split("\n"):
        body = line.lstrip(" \t")
        out.append(line[: len(line) - len(body)] + t(body) if body in stubs else line)
    return "\n".join(out)
