"""Chapter sources: the percent script in ``chapters/`` is the text, the solution notebook its build.

Each chapter ``NN_name`` is written as a jupytext percent script,
``chapters/NN_name/NN_name.py`` (cells ``# %%``, nbgrader metadata and tags in the cell header,
no outputs), and built into ``solutions/NN_name/NN_name.ipynb`` (the nbgrader source, with the
outputs of an executed run: what instructors open and nbval compares). Scripts live outside
``solutions/`` so nbgrader never sees them (``nbgrader_config.py`` also ignores ``*.py`` there),
and ``jupytext.toml`` pairs only ``solutions/`` with ``chapters/``: student notebooks in
``notebooks/`` are never paired, so jupytext cannot write a solution script next to them.

``llm-course build NN_name``      script -> notebook, executed (``--full``: full mode; ``--no-run``:
                                  keep the outputs of unchanged cells, clear the others)
``llm-course export NN_name``     notebook -> script (after editing the notebook in JupyterLab
                                  without the jupytext extension; ``jupytext --sync`` does the same)
``llm-course check-sources``      fail where a script and its notebook disagree (cell types,
                                  sources, nbgrader metadata, tags, ids); ``tests/test_sources.py``
"""
from __future__ import annotations

import os
from pathlib import Path

import nbformat

from course_utils.paths import repo_root

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
# Notebook metadata key stating which run produced the committed outputs ("full mode", "CI mode" or
# "incomplete"): the committed solutions must hold full-mode outputs (tests/test_claims.py).
OUTPUTS_KEY = "llm_course"
FULL, CI, INCOMPLETE = "full mode", "CI mode", "incomplete"
KEEP_CELL_KEYS = ("nbgrader", "tags", "deletable", "editable")
# What the script keeps of the notebook: no notebook metadata (build() sets the kernelspec), and of
# each cell only what nbgrader and nbval read. jupytext.toml states the same for JupyterLab.
JUPYTEXT_OPTIONS = {"notebook_metadata_filter": "-all", "cell_metadata_filter": ",".join(KEEP_CELL_KEYS) + ",-all"}
SCRIPTS_DIR = "chapters"


def script_path(chapter: str, root: Path | None = None) -> Path:
    """``chapters/NN_name/NN_name.py``: the reviewable source of a chapter."""
    return (root or repo_root()) / SCRIPTS_DIR / chapter / f"{chapter}.py"


def notebook_path(chapter: str, root: Path | None = None) -> Path:
    """``solutions/NN_name/NN_name.ipynb``: the built, executed nbgrader source."""
    return (root or repo_root()) / "solutions" / chapter / f"{chapter}.ipynb"


def clean(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Drop jupytext/execution metadata; keep only nbgrader metadata and tags on cells.

    Cell ids are the nbgrader ``grade_id`` where there is one, else ``cell-NNN`` by position, so
    a rebuild gives the same ids and nbgrader's ids are stable.
    """
    stamp = nb.metadata.get(OUTPUTS_KEY)
    nb.metadata = nbformat.from_dict({
        "kernelspec": KERNELSPEC,
        "language_info": {"name": "python"},
    })
    if stamp:
        nb.metadata[OUTPUTS_KEY] = stamp
    for i, cell in enumerate(nb.cells):
        cell.metadata = nbformat.from_dict({k: v for k, v in cell.metadata.items() if k in KEEP_CELL_KEYS})
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        cell["id"] = gid if gid else f"cell-{i:03d}"
        if cell.cell_type == "code":
            for out in cell.get("outputs", []):
                out.get("metadata", {}).pop("execution", None)
    nb.nbformat, nb.nbformat_minor = 4, 5
    return nb


def read_script(script: Path) -> nbformat.NotebookNode:
    """The notebook a percent script describes (no outputs), cleaned as :func:`clean` does."""
    import jupytext

    return clean(jupytext.read(script, fmt="py:percent"))


def script_text(nb: nbformat.NotebookNode) -> str:
    """The percent script of a notebook (outputs and execution metadata left out)."""
    import copy

    import jupytext

    nb = copy.deepcopy(nb)
    nb.metadata = nbformat.from_dict({"jupytext": dict(JUPYTEXT_OPTIONS), "kernelspec": KERNELSPEC})
    return jupytext.writes(nb, fmt="py:percent")


def execute(path: Path, timeout: int = 600, ci: bool = True) -> None:
    """Execute a notebook in place (offline; CI mode unless ``ci`` is false) and clean it."""
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ["LLM_COURSE_CI"] = "1" if ci else "0"
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    nb.metadata[OUTPUTS_KEY] = {"outputs": CI if ci else FULL}
    nbformat.write(clean(nb), path)


def code_tokens(source: str) -> list[tuple[int, str]] | None:
    """The tokens Python executes in a cell's source: comments and blank lines left out.

    ``None`` when the source is not plain Python (an IPython magic, a syntax error): such a cell
    is compared character by character.
    """
    import io
    import tokenize

    skip = {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING}
    if any(line.lstrip().startswith(("%", "!")) or line.rstrip().endswith("?") for line in source.splitlines()):
        return None  # IPython syntax: `!echo # x` passes its "comment" to the shell
    try:
        return [(t.type, t.string) for t in tokenize.generate_tokens(io.StringIO(source).readline)
                if t.type not in skip]
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return None


def same_code(a: str, b: str) -> bool:
    """Whether two cell sources run the same code: equal, or equal but for comments and blank lines.

    A comment cannot change what a cell prints, so ``build --no-run`` keeps the outputs of a cell
    whose only change is a comment (the ``# clause:`` names of the hidden checks, say).
    """
    if a == b:
        return True
    ta, tb = code_tokens(a), code_tokens(b)
    return ta is not None and ta == tb


def _hidden_change_only(prev: nbformat.NotebookNode | None, cell: nbformat.NotebookNode) -> bool:
    """Whether a graded test cell changed only inside its hidden region, and its outputs show a pass.

    A hidden region prints nothing when its checks pass (its records become outputs only in the
    autograder's kernels, ``course_utils/records.py``), so the visible part alone made the outputs;
    that the new hidden checks pass is what CI shows (the solution run by nbval, full marks in
    the round trip, ``tests/test_notebooks.py``). A cell with an error output is re-run.
    """
    from course_tools.grading.cells import is_test_cell, visible_part

    if prev is None or not (is_test_cell(cell) and is_test_cell(prev)):
        return False
    if any(o.get("output_type") == "error" for o in prev.get("outputs", [])):
        return False
    return same_code(visible_part(prev.source), visible_part(cell.source))


def outputs_mode(nb: nbformat.NotebookNode) -> str | None:
    """Which run produced a built notebook's outputs: ``"full mode"``, ``"CI mode"``, ``"incomplete"``."""
    return nb.metadata.get(OUTPUTS_KEY, {}).get("outputs")


def build(chapter: str, run: bool = True, ci: bool = True, root: Path | None = None) -> Path:
    """Rebuild ``solutions/<chapter>`` from its script; execute it unless ``run`` is false.

    Without ``run``, a code cell keeps the outputs of the current notebook when its source is
    unchanged (matched by id, else by its unique source: inserting a cell renumbers the ids of
    the unnamed cells after it), or when it is a test cell changed only in its hidden region
    (:func:`_hidden_change_only`), so edits to prose or to a hidden test need no re-execution;
    other code cells get no outputs, and the notebook is then stamped ``incomplete`` (a full-mode
    build, ``--full``, is what gets committed).
    """
    script, out = script_path(chapter, root), notebook_path(chapter, root)
    if not script.is_file():
        raise FileNotFoundError(f"{script} does not exist (chapter sources live in {SCRIPTS_DIR}/NN_name/NN_name.py)")
    nb = read_script(script)
    if not run and out.is_file():
        previous = nbformat.read(out, as_version=4)
        before = [c for c in previous.cells if c.cell_type == "code"]
        by_id = {c["id"]: c for c in before}
        counts: dict[str, int] = {}
        for c in before:
            counts[c.source] = counts.get(c.source, 0) + 1
        by_source = {c.source: c for c in before if counts[c.source] == 1}
        kept = True
        for cell in nb.cells:
            if cell.cell_type != "code":
                continue
            prev = by_id.get(cell["id"])
            if prev is None or not same_code(prev.source, cell.source):  # ids by position shift when a cell is inserted
                prev = by_source.get(cell.source)
            if prev is not None and same_code(prev.source, cell.source):
                cell.outputs, cell.execution_count = prev.outputs, prev.execution_count
            elif _hidden_change_only(by_id.get(cell["id"]), cell):
                prev = by_id[cell["id"]]
                cell.outputs, cell.execution_count = prev.outputs, prev.execution_count
            else:
                kept = False
        stamp = outputs_mode(previous)
        if stamp:
            nb.metadata[OUTPUTS_KEY] = {"outputs": stamp if kept else INCOMPLETE}
    out.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, out)
    if run:
        execute(out, ci=ci)
    return out


def export(chapter: str, root: Path | None = None) -> Path:
    """Write ``chapters/<chapter>`` from the solution notebook (the reverse of :func:`build`)."""
    nb = nbformat.read(notebook_path(chapter, root), as_version=4)
    script = script_path(chapter, root)
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(script_text(nb), encoding="utf-8")
    return script


def _cell_view(cell: nbformat.NotebookNode) -> dict:
    meta = cell.get("metadata", {})
    return {"id": cell.get("id"), "type": cell.cell_type, "source": cell.source,
            "nbgrader": meta.get("nbgrader"), "tags": meta.get("tags", []),
            "editable": meta.get("editable"), "deletable": meta.get("deletable")}


def sync_problems(chapter: str, root: Path | None = None) -> list[str]:
    """Where ``chapters/<chapter>`` and ``solutions/<chapter>`` disagree (empty when in sync)."""
    script, nbp = script_path(chapter, root), notebook_path(chapter, root)
    if not script.is_file():
        return [f"{script.relative_to(script.parents[2])} is missing: `llm-course export {chapter}` writes it"]
    want = [_cell_view(c) for c in read_script(script).cells]
    have = [_cell_view(c) for c in nbformat.read(nbp, as_version=4).cells]
    rebuild = f"(rebuild: llm-course build {chapter})"
    problems = []
    if len(want) != len(have):
        problems.append(f"{chapter}: the script has {len(want)} cells, the notebook {len(have)} {rebuild}")
    for i, (w, h) in enumerate(zip(want, have)):
        diff = [k for k in w if w[k] != h[k]]
        if diff:
            first = w["source"].splitlines()[0][:60] if w["source"] else ""
            problems.append(f"{chapter}: cell {i} ({w['id']}, {first!r}) differs in {', '.join(diff)} {rebuild}")
    return problems
