"""Helpers for the chapters that train a model (Book §6.3, seed 003; chapters 10-13).

What lives here is bookkeeping shared by training demos: whether nbgrader is grading right now
(training demos then shrink, so that autograding a submission stays fast), deterministic
evaluation of a language model on fixed windows, parameter counts and loss-curve figures.
The graded pieces of a training loop (batch sampler, attention block, training step) are
exercises of chapter 10 and are not here.
"""
from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np


def autograding() -> bool:
    """True while nbgrader executes the notebook (``nbgrader autograde`` sets NBGRADER_EXECUTION).

    Heavy demonstrations (training runs, sweeps) check this and shrink to a handful of steps or
    are skipped with a printed message: an instructor grading 200 submissions must not re-run
    every student's training loop.
    """
    return bool(os.environ.get("NBGRADER_EXECUTION", "").strip())


def count_parameters(model: Any, trainable_only: bool = False) -> int:
    """Number of distinct parameters of a ``torch.nn.Module`` (tied weights counted once)."""
    seen: set[int] = set()
    total = 0
    for p in model.parameters():  # parameters() already yields a tied tensor once
        if id(p) in seen or (trainable_only and not p.requires_grad):
            continue
        seen.add(id(p))
        total += p.numel()
    return total


def evaluate_lm(model: Any, x: Any, y: Any, batch_size: int = 1024) -> float:
    """Mean next-token cross-entropy (nats) of ``model`` on fixed windows, in eval mode.

    ``x`` and ``y`` are int64 tensors of shape (N, T) (inputs and targets); ``model(x)`` must
    return logits of shape (N, T, V). The windows are evaluated in order, in chunks of
    ``batch_size``, without gradients and with dropout off, so the number is reproducible; the
    model's previous train/eval mode is restored afterwards.
    """
    import torch
    import torch.nn.functional as F

    if x.shape != y.shape or x.dim() != 2:
        raise ValueError(f"x and y must both be (N, T); got {tuple(x.shape)} and {tuple(y.shape)}")
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    try:
        with torch.no_grad():
            for i in range(0, x.shape[0], batch_size):
                logits = model(x[i:i + batch_size])
                total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]).double(),
                                         y[i:i + batch_size].reshape(-1), reduction="sum").item()
                count += y[i:i + batch_size].numel()
    finally:
        model.train(was_training)
    return total / count


def plot_loss_curves(
    curves: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    baselines: Mapping[str, float] | None = None,
    title: str = "",
    xlabel: str = "optimizer step",
    ylabel: str = "cross-entropy (nats per token)",
    ax: Any = None,
) -> Any:
    """Loss curves ``{label: (steps, losses)}`` and horizontal reference lines ``{label: value}``.

    Returns the axes. Curves of several seeds may share a label prefix; each is drawn as given.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    for label, (steps, losses) in curves.items():
        ax.plot(np.asarray(steps), np.asarray(losses, dtype=float), label=label)
    styles = ["--", ":", "-.", (0, (5, 1))]
    for i, (label, value) in enumerate((baselines or {}).items()):
        ax.axhline(float(value), color="gray", linestyle=styles[i % len(styles)], linewidth=1,
                   label=f"{label} = {float(value):.3f}")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return ax
