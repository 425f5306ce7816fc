"""Run-time environment of a notebook: CI mode, offline mode, seeds, device, banner.

Environment variables (documented in the README):

``LLM_COURSE_CI=1``
    CI mode: notebooks shrink heavy demos (fewer steps, shorter sequences). Outputs that CI
    compares are the same in both modes.
``LLM_COURSE_OFFLINE=1``
    Offline mode: :func:`course_utils.models.load_model` uses the packaged stand-ins instead
    of downloading from the Hugging Face hub. ``HF_HUB_OFFLINE=1`` implies it.

Grading is offline by construction (:func:`grading_kernel`): a kernel that the autograder runs
(``NBGRADER_EXECUTION=autograde``, which nbgrader and the course's reference run set, or a
sandboxed kernel, ``LLM_COURSE_SANDBOXED=1``) has no network, so it uses what the caches hold,
the same way for the reference run and every submission, whatever the instructor's shell sets.
"""
from __future__ import annotations

import os
import random

TRUE_VALUES = {"1", "true", "yes", "on"}


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in TRUE_VALUES


def ci_mode() -> bool:
    """True when ``LLM_COURSE_CI`` is set: heavy demos run in a reduced size."""
    return _flag("LLM_COURSE_CI")


def grading_kernel() -> bool:
    """True in a kernel the autograder runs: ``NBGRADER_EXECUTION=autograde`` (set by ``nbgrader
    autograde`` and by the course's reference run) or a sandboxed kernel (``LLM_COURSE_SANDBOXED=1``,
    set by ``course_tools.grading.sandbox``: no network there)."""
    return (os.environ.get("NBGRADER_EXECUTION", "").strip().lower() == "autograde"
            or os.environ.get("LLM_COURSE_SANDBOXED", "").strip() == "1")


def offline_mode() -> bool:
    """True when ``LLM_COURSE_OFFLINE`` or ``HF_HUB_OFFLINE`` is set, and always in a grading kernel
    (:func:`grading_kernel`): grading never waits for, or fails on, a hub it cannot reach."""
    return _flag("LLM_COURSE_OFFLINE") or _flag("HF_HUB_OFFLINE") or grading_kernel()


CI_MODE: bool = ci_mode()


def seed_everything(seed: int = 0) -> None:
    """Seed Python, NumPy and PyTorch so that reruns give identical numbers."""
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed)
    except ImportError:  # pragma: no cover
        pass
    try:
        import torch

        torch.manual_seed(seed)
    except ImportError:  # pragma: no cover
        pass


def pick_device(prefer_gpu: bool = False) -> str:
    """Return ``"cuda"`` when asked for and available, else ``"cpu"``.

    The course is written for the CPU; chapters that profit from a GPU pass ``prefer_gpu``.
    """
    try:
        import torch

        if prefer_gpu and torch.cuda.is_available():
            return "cuda"
    except ImportError:  # pragma: no cover
        pass
    return "cpu"


def setup(seed: int = 0, prefer_gpu: bool = False, quiet: bool = False) -> str:
    """The first code cell of every chapter: seeds, device, warnings, and a one-line banner.

    Returns the device string. Library warnings that would only clutter the output are
    silenced (a warning printed on stderr inside an nbgrader test cell would zero it).
    """
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=UserWarning, module=r"(transformers|torch|sklearn)")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # Read by transformers / huggingface_hub when they are imported (importing them here would
    # cost seconds in chapters that never use them).
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    import sys

    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    seed_everything(seed)
    device = pick_device(prefer_gpu)
    if not quiet:
        import torch

        mode = "CI (reduced demos)" if ci_mode() else "full"
        hub = "offline (stand-in models)" if offline_mode() else "online (hub models)"
        print(f"[course] torch {torch.__version__} | device={device} | seed={seed} | mode={mode} | {hub}")
    return device


def quiet_hf() -> None:
    """No progress bars or load reports: they go to stderr, which nbgrader counts as failure."""
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    except ImportError:  # pragma: no cover
        pass
