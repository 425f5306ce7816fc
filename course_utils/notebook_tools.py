"""Authoring helpers: build a solution notebook from a percent-format script, execute it in place.

``llm-course build script.py solutions/NN_name/NN_name.ipynb`` converts a jupytext
percent-format script (cells ``# %%``, nbgrader metadata in the cell header as
``nbgrader={...}``) into a clean notebook and executes it; ``llm-course execute NB`` re-executes
an existing solution notebook in place. Stored outputs are what nbval compares in the cells
marked ``nbval-check-output``; execution timing metadata is dropped so reruns diff cleanly.
"""
from __future__ import annotations

import os
from pathlib import Path

import nbformat

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
KEEP_CELL_KEYS = ("nbgrader", "tags", "deletable", "editable")


def clean(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Drop jupytext/execution metadata; keep only nbgrader metadata and tags on cells."""
    nb.metadata = nbformat.from_dict({
        "kernelspec": KERNELSPEC,
        "language_info": {"name": "python"},
    })
    for i, cell in enumerate(nb.cells):
        cell.metadata = nbformat.from_dict({k: v for k, v in cell.metadata.items() if k in KEEP_CELL_KEYS})
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        cell["id"] = gid if gid else f"cell-{i:03d}"
        if cell.cell_type == "code":
            for out in cell.get("outputs", []):
                out.get("metadata", {}).pop("execution", None)
    nb.nbformat, nb.nbformat_minor = 4, 5
    return nb


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
    nbformat.write(clean(nb), path)


def build(script: Path, out: Path, run: bool = True) -> None:
    """Convert a percent-format script to a clean notebook at ``out`` and (optionally) execute it."""
    import jupytext

    nb = jupytext.read(script, fmt="py:percent")
    nb = clean(nb)
    out.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, out)
    if run:
        execute(out)
