"""Static matplotlib/seaborn figures shared by the chapters (they export and render offline).

seaborn draws what it is the ecosystem's habit for: heatmaps (``heatmap``), bars (``bar_plot``),
repeated measurements with their spread (``spread_plot``) and distributions (``distribution_plot``);
plain matplotlib the rest (curves, labelled scatters).
"""
from __future__ import annotations

from typing import Any, Sequence

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

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
    """Draw a labelled matrix (attention weights, logits, ...) with ``seaborn.heatmap``; return the axes.

    Values are written in the cells when ``annotate`` is true (default: matrices up to 12×12).
    Masked entries (``-inf``) are drawn blank and annotated ``-inf``.
    """
    m = to_numpy(matrix, "matrix").astype(float)
    if m.ndim != 2:
        raise ValueError(f"heatmap expects a 2-D matrix, got shape {m.shape}")
    if ax is None:
        size = (max(3.0, 0.55 * m.shape[1] + 1.5), max(2.5, 0.5 * m.shape[0] + 1.0))
        _, ax = plt.subplots(figsize=size)
    if annotate is None:
        annotate = m.shape[0] <= 12 and m.shape[1] <= 12
    labels: Any = False
    if annotate:
        labels = np.array([[fmt.format(v) if np.isfinite(v) else ("-inf" if v < 0 else "inf") for v in row]
                           for row in m], dtype=object)
    finite = m[np.isfinite(m)]
    sns.heatmap(np.where(np.isfinite(m), m, np.nan), mask=~np.isfinite(m), ax=ax, cmap=cmap,
                vmin=vmin if vmin is not None else (finite.min() if finite.size else None),
                vmax=vmax if vmax is not None else (finite.max() if finite.size else None),
                annot=labels, fmt="", annot_kws={"fontsize": 8}, cbar=colorbar,
                xticklabels=list(col_labels) if col_labels is not None else False,
                yticklabels=list(row_labels) if row_labels is not None else False,
                linewidths=0.0, square=False)
    if annotate:
        # seaborn skips annotations of masked cells: write "-inf"/"inf" there ourselves
        for i, j in zip(*np.nonzero(~np.isfinite(m))):
            ax.text(j + 0.5, i + 0.5, labels[i, j], ha="center", va="center", color="black", fontsize=8)
    if col_labels is not None:
        ax.set_xticklabels(list(col_labels), rotation=45, ha="right")
    if row_labels is not None:
        ax.set_yticklabels(list(row_labels), rotation=0)
    if title:
        ax.set_title(title)
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
    """Labelled bars (expert load, parameter counts, memory footprints) with ``seaborn.barplot``."""
    if ax is None:
        _, ax = plt.subplots(figsize=(max(3.5, 0.6 * len(labels) + 1), 3))
    vals = to_numpy(values, "values").astype(float)
    if len(vals) != len(labels):
        raise ValueError(f"bar_plot: {len(labels)} labels for {len(vals)} values")
    order = [str(label) for label in labels]
    sns.barplot(x=order, y=vals, order=order, ax=ax, color=sns.color_palette()[0])
    for i, v in enumerate(vals):
        ax.text(i, v, f"{v:g}", ha="center", va="bottom", fontsize=8)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    return ax


def _long_form(groups: dict[str, Any], what: str) -> tuple[list[str], list[str], np.ndarray]:
    """(group names, one group label per value, all values as float64): seaborn's long format."""
    if not groups:
        raise ValueError(f"{what} needs at least one group")
    names = list(groups)
    arrays = [to_numpy(groups[n], n).astype(float).ravel() for n in names]
    labels = [n for n, a in zip(names, arrays) for _ in range(a.size)]
    return names, labels, np.concatenate(arrays)


def spread_plot(
    groups: dict[str, Any],
    xlabel: str = "",
    ylabel: str = "",
    title: str = "",
    ax: Any = None,
) -> Any:
    """Every sample of each named group as a dot, with the group's mean ± one standard deviation.

    For measurements repeated over seeds (distinct-n per sampling setting, accuracy per prompt
    style): the spread shows whether a difference between groups is larger than the noise.
    """
    names, xs, ys = _long_form(groups, "spread_plot")
    if ax is None:
        _, ax = plt.subplots(figsize=(max(5.0, 1.4 * len(names) + 1), 3.5))
    sns.stripplot(x=xs, y=ys, order=names, ax=ax, alpha=0.5, size=4, jitter=0.15, zorder=1)
    sns.pointplot(x=xs, y=ys, order=names, ax=ax, errorbar="sd", color="black", linestyle="none",
                  capsize=0.15, markers="D", label="mean ± std")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.tick_params(axis="x", labelrotation=15)
    if title:
        ax.set_title(title)
    ax.legend()
    return ax


def distribution_plot(
    samples: dict[str, Any],
    xlabel: str = "",
    title: str = "",
    bins: int | str = "auto",
    ax: Any = None,
) -> Any:
    """Overlaid histograms (``seaborn.histplot``, density scale) of named samples.

    For distributions of a quantity (quantization errors, judge probabilities, token lengths).
    """
    names, hue, values = _long_form(samples, "distribution_plot")
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    sns.histplot(x=values, hue=hue if len(names) > 1 else None, hue_order=names if len(names) > 1 else None,
                 bins=bins, stat="density", common_norm=False, element="step", ax=ax)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("density")
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
