"""Static matplotlib figures shared by the chapters (they export and render offline)."""
from __future__ import annotations

from typing import Any, Sequence

import matplotlib.pyplot as plt
import numpy as np

from .grading import to_numpy


def heatmap(
    matrix: Any,
    row_labels: Sequence[str] | None = None,
    col_labels: Sequence[str] | None = None,
    title: str = "",
    ax: Any = None,
    cmap: str = "viridis",
    annotate: bool | None = None,
    fmt: str = "{:.2f}",
    vmin: float | None = None,
    vmax: float | None = None,
    colorbar: bool = True,
) -> Any:
    """Draw a labelled matrix (attention weights, logits, ...) and return the axes.

    Values are written in the cells when ``annotate`` is true (default: matrices up to 12×12).
    Masked entries (``-inf``) are drawn blank and annotated ``-inf``.
    """
    m = to_numpy(matrix, "matrix").astype(float)
    if m.ndim != 2:
        raise ValueError(f"heatmap expects a 2-D matrix, got shape {m.shape}")
    if ax is None:
        size = (max(3.0, 0.55 * m.shape[1] + 1.5), max(2.5, 0.5 * m.shape[0] + 1.0))
        _, ax = plt.subplots(figsize=size)
    shown = np.ma.masked_invalid(m)
    im = ax.imshow(shown, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    if row_labels is not None:
        ax.set_yticks(range(m.shape[0]), labels=list(row_labels))
    if col_labels is not None:
        ax.set_xticks(range(m.shape[1]), labels=list(col_labels), rotation=45, ha="right")
    if annotate is None:
        annotate = m.shape[0] <= 12 and m.shape[1] <= 12
    if annotate:
        finite = m[np.isfinite(m)]
        mid = (finite.max() + finite.min()) / 2 if finite.size else 0.0
        for i in range(m.shape[0]):
            for j in range(m.shape[1]):
                v = m[i, j]
                text = fmt.format(v) if np.isfinite(v) else ("-inf" if v < 0 else "inf")
                color = "white" if np.isfinite(v) and v < mid else "black"
                ax.text(j, i, text, ha="center", va="center", color=color, fontsize=8)
    if title:
        ax.set_title(title)
    if colorbar:
        ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    return ax


def line_plot(
    x: Any,
    ys: dict[str, Any],
    xlabel: str = "",
    ylabel: str = "",
    title: str = "",
    logx: bool = False,
    logy: bool = False,
    ax: Any = None,
) -> Any:
    """Plot several named curves against ``x`` (loss curves, entropy vs temperature, ...)."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    for label, y in ys.items():
        ax.plot(to_numpy(x, "x"), to_numpy(y, label), marker="o" if len(to_numpy(x, "x")) <= 20 else None, label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    if len(ys) > 1:
        ax.legend()
    ax.grid(alpha=0.3)
    return ax


def bar_plot(labels: Sequence[str], values: Any, title: str = "", ylabel: str = "", ax: Any = None) -> Any:
    """Labelled bars (expert load, parameter counts, memory footprints)."""
    if ax is None:
        _, ax = plt.subplots(figsize=(max(3.5, 0.6 * len(labels) + 1), 3))
    vals = to_numpy(values, "values")
    ax.bar(range(len(labels)), vals)
    ax.set_xticks(range(len(labels)), labels=list(labels))
    for i, v in enumerate(vals):
        ax.text(i, v, f"{v:g}", ha="center", va="bottom", fontsize=8)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    return ax


def scatter_labels(points: Any, labels: Sequence[str], title: str = "", ax: Any = None) -> Any:
    """2-D scatter with a text label at every point (PCA of embeddings)."""
    p = to_numpy(points, "points")
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4.5))
    ax.scatter(p[:, 0], p[:, 1])
    for (x, y), lab in zip(p, labels):
        ax.annotate(lab, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=9)
    if title:
        ax.set_title(title)
    ax.grid(alpha=0.3)
    return ax
