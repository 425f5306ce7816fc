"""The course's own small GPT-2, trained on Shakespeare: the offline stand-in where text matters.

Built once, deterministically (fixed seed, fixed number of steps), then cached under
``course_utils.paths.cache_dir()/gpt2-shakespeare-<version>``:

1. a byte-level BPE tokenizer (GPT-2 style, Book §2.2) with :data:`VOCAB_SIZE` tokens trained on
   the corpus (every play, poem and the sonnets; First Folio duplicates left out);
2. a GPT-2 (``GPT2LMHeadModel``, tied ``lm_head``/``wte`` as in Book §4.5.6 and seed 000) trained
   for :data:`STEPS` AdamW steps on random windows of the token stream, the last 5 % held out.

On 2 idle CPU cores the build takes about 2.5 minutes (150 s measured, 2026-11-27; 803 s on a
machine loaded by other jobs). ``build(verbose=print)`` reports each phase and every tenth of the
training (at least every 30 s) with the elapsed time and an estimate of what is left
(``llm-course prefetch --offline``, run by ``make install``, does). Its text is
Shakespeare-flavoured and far from gpt2's quality; chapters that show generations say which model
produced them.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import math
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Union

from .paths import cache_dir

VERSION = "v1"
VOCAB_SIZE = 2048
SPECIAL_TOKENS = ["<|endoftext|>", "<pad>", "</s>", "<unk>"]
CONFIG = {"vocab_size": VOCAB_SIZE, "n_positions": 256, "n_embd": 128, "n_layer": 4, "n_head": 4}
BLOCK, BATCH, STEPS, LR, SEED = 128, 32, 300, 2e-3, 1234


def model_dir() -> Path:
    """Where the built model and tokenizer live."""
    return cache_dir() / f"gpt2-shakespeare-{VERSION}"


def is_built() -> bool:
    return (model_dir() / "done.json").is_file()


@contextlib.contextmanager
def _lock() -> Iterator[None]:
    path = cache_dir() / f"gpt2-shakespeare-{VERSION}.lock"
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _train_tokenizer(text: str, path: Path) -> None:
    from tokenizers import ByteLevelBPETokenizer

    tok = ByteLevelBPETokenizer()
    tok.train_from_iterator([text], vocab_size=VOCAB_SIZE, min_frequency=2,
                            special_tokens=SPECIAL_TOKENS, show_progress=False)
    tok.save(str(path))


def load_tokenizer(seq2seq: bool = False) -> Any:
    """The course's byte-level BPE tokenizer as a ``transformers`` fast tokenizer.

    ``seq2seq=True`` gives the T5-style special tokens (``<pad>``, ``</s>``, ``<unk>``) used by
    the FLAN-T5 stand-in; otherwise GPT-2 style (``<|endoftext|>`` is bos/eos/unk, no pad).
    """
    from transformers import PreTrainedTokenizerFast

    path = model_dir() / "tokenizer.json"
    if not path.is_file():
        with _lock():
            if not path.is_file():
                from .data import load_corpus

                path.parent.mkdir(parents=True, exist_ok=True)
                _train_tokenizer(load_corpus(), path)
    if seq2seq:
        return PreTrainedTokenizerFast(tokenizer_file=str(path), pad_token="<pad>", eos_token="</s>",
                                       unk_token="<unk>")
    return PreTrainedTokenizerFast(tokenizer_file=str(path), bos_token="<|endoftext|>",
                                   eos_token="<|endoftext|>", unk_token="<|endoftext|>")


Verbose = Union[bool, Callable[[str], Any]]
PROGRESS_EVERY_S = 30.0   # a progress line at least this often (besides every tenth of the steps)


def _eta(done: int, total: int, elapsed: float) -> str:
    if done <= 0:
        return "?"
    return f"{elapsed / done * (total - done):.0f} s"


def build(verbose: Verbose = True, steps: int | None = None) -> Path:
    """Train and cache the model (no-op when already built). Returns :func:`model_dir`.

    ``verbose``: ``True`` a tqdm bar (notebooks), ``False`` silent, or a function that receives
    progress lines (``llm-course prefetch`` passes ``print``: phases, then every tenth of the steps
    and at least every :data:`PROGRESS_EVERY_S` seconds, with the elapsed time and an estimate of
    what is left). ``steps``: fewer training steps, for a test of the progress report into a
    temporary ``LLM_COURSE_CACHE`` only (the course's model is :data:`STEPS` steps).
    """
    report: Callable[[str], Any] | None = verbose if callable(verbose) else None
    total = STEPS if steps is None else int(steps)
    with _lock():
        if is_built():
            return model_dir()
        import torch
        from transformers import GPT2Config, GPT2LMHeadModel

        from .data import load_corpus

        from .env import quiet_hf

        quiet_hf()
        t0 = time.perf_counter()
        out = model_dir()
        out.mkdir(parents=True, exist_ok=True)
        text = load_corpus()
        if report:
            report(f"[shakespeare-gpt2] building the course's Shakespeare GPT-2 into {out} (once): "
                   f"tokenizer, then {total} training steps")
        if not (out / "tokenizer.json").is_file():
            _train_tokenizer(text, out / "tokenizer.json")
        tok = load_tokenizer()
        ids = torch.tensor(tok(text)["input_ids"], dtype=torch.long)
        if report:
            report(f"[shakespeare-gpt2] tokenizer ready, {len(ids):,} tokens ({time.perf_counter() - t0:.0f} s)")
        split = int(0.95 * len(ids))
        train, val = ids[:split], ids[split:]
        eot = tok.convert_tokens_to_ids("<|endoftext|>")
        cfg = GPT2Config(**CONFIG, bos_token_id=eot, eos_token_id=eot, attn_implementation="eager")
        gen = torch.Generator().manual_seed(SEED)
        torch.manual_seed(SEED)
        model = GPT2LMHeadModel(cfg)
        opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01, betas=(0.9, 0.95))
        warmup = 20

        def lr_at(step: int) -> float:
            if step < warmup:
                return LR * (step + 1) / warmup
            return 0.1 * LR + 0.9 * LR * 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, total - warmup)))

        def batch(src: torch.Tensor) -> torch.Tensor:
            starts = torch.randint(0, len(src) - BLOCK - 1, (BATCH,), generator=gen)
            return torch.stack([src[s : s + BLOCK] for s in starts.tolist()])

        log: list[dict[str, float]] = []
        model.train()
        iterator: Any = range(total)
        t_train = time.perf_counter()
        last_report = t_train
        tenth = max(1, total // 10)
        if verbose is True:
            from tqdm.auto import tqdm

            iterator = tqdm(iterator, desc="training the Shakespeare GPT-2 (once, then cached)", leave=False)
        for step in iterator:
            for g in opt.param_groups:
                g["lr"] = lr_at(step)
            x = batch(train)
            loss = model(input_ids=x, labels=x).loss
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            if step % 25 == 0 or step == total - 1:
                log.append({"step": step, "train_loss": loss.item()})
            now = time.perf_counter()
            if report and ((step + 1) % tenth == 0 or step + 1 == total or now - last_report >= PROGRESS_EVERY_S):
                last_report = now
                report(f"[shakespeare-gpt2] step {step + 1}/{total}, loss {loss.item():.2f}, "
                       f"{now - t0:.0f} s elapsed, about {_eta(step + 1, total, now - t_train)} left")
        model.eval()
        with torch.no_grad():
            vgen = torch.Generator().manual_seed(SEED + 1)
            starts = torch.randint(0, len(val) - BLOCK - 1, (16,), generator=vgen)
            vx = torch.stack([val[s : s + BLOCK] for s in starts.tolist()])
            val_loss = float(model(input_ids=vx, labels=vx).loss)
        model.save_pretrained(out)
        tok.save_pretrained(out / "hf_tokenizer")
        meta = {"config": CONFIG, "steps": total, "batch": BATCH, "block": BLOCK, "lr": LR, "seed": SEED,
                "train_tokens": int(len(train)), "val_loss": val_loss, "log": log,
                "build_seconds": round(time.perf_counter() - t0, 1)}
        (out / "done.json").write_text(json.dumps(meta, indent=1))
        if report:
            report(f"[shakespeare-gpt2] done in {meta['build_seconds']:.0f} s (validation loss {val_loss:.2f})")
        return out


def load() -> tuple[Any, Any, dict]:
    """``(model, tokenizer, config_dict)``, building the model first if needed."""
    from transformers import GPT2LMHeadModel

    if not is_built():
        build()
    model = GPT2LMHeadModel.from_pretrained(str(model_dir()), attn_implementation="eager")
    return model, load_tokenizer(), dict(CONFIG)


def training_log() -> dict:
    """Hyper-parameters, loss log and validation loss of the cached build."""
    return json.loads((model_dir() / "done.json").read_text())
