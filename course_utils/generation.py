"""Prompt → text for any model the loader returns (Book ch. 5, chapters 08–09, 12–13).

The book prompts FLAN-T5, an encoder-decoder: the prompt goes into the encoder and the answer
comes out of the decoder. Offline the course uses SmolLM2-135M-Instruct, a decoder-only model
tuned on chat transcripts: the prompt must be wrapped in its chat template, and the answer is
what follows the prompt. :func:`generate_text` hides that difference so a chapter can prompt
either model with the same code.
"""
from __future__ import annotations

from typing import Any, Sequence


def is_seq2seq(model: Any) -> bool:
    """True for encoder-decoder models (T5), False for decoder-only ones (GPT-2, Llama)."""
    return bool(getattr(model.config, "is_encoder_decoder", False))


def encode_prompt(tok: Any, prompt: str, chat: bool | None = None, system: str | None = None) -> list[int]:
    """Token ids of ``prompt`` as the model expects it.

    ``chat=None`` uses the chat template when the tokenizer has one; ``chat=False`` gives the raw
    text (plain continuation, as the book does with GPT-2).
    """
    if chat is None:
        chat = bool(getattr(tok, "chat_template", None))
    if not chat:
        return list(tok(prompt)["input_ids"])
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
    ids = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True)
    return list(ids["input_ids"])


def generate_text(
    model: Any,
    tok: Any,
    prompt: str | Sequence[str],
    max_new_tokens: int = 20,
    do_sample: bool = False,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    chat: bool | None = None,
    system: str | None = None,
    batch: bool = False,
) -> str | list[str]:
    """Generate an answer to ``prompt`` (a string, or a list of strings → a list of answers).

    Greedy by default. With ``do_sample=True`` the sampler uses exactly ``temperature``,
    ``top_k`` and ``top_p`` (``top_k=None`` disables the ``top_k=50`` that ``generate`` would
    otherwise add silently); ``seed`` seeds torch right before each prompt's generation. Returns
    only the new text, special tokens removed, stripped.

    ``batch=True`` (greedy decoding of a causal model only) generates all prompts in one left-padded
    batch: several times faster on a CPU for a list of prompts; the answers can differ from the
    one-at-a-time ones only where two tokens are within float rounding of each other.
    """
    import torch

    if isinstance(prompt, str):
        return generate_text(model, tok, [prompt], max_new_tokens, do_sample, temperature, top_k, top_p,
                             seed, chat, system)[0]
    if batch and (do_sample or is_seq2seq(model)):
        raise ValueError("batch=True is for greedy decoding with a causal model (sampling seeds each prompt)")
    if do_sample and temperature <= 0:
        raise ValueError(f"temperature must be > 0 when sampling, got {temperature}")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    kw: dict[str, Any] = {"max_new_tokens": max_new_tokens, "do_sample": do_sample, "pad_token_id": pad}
    if do_sample:
        kw.update(temperature=float(temperature), top_k=top_k if top_k is not None else 0,
                  top_p=top_p if top_p is not None else 1.0)
    else:  # greedy: say so explicitly, so a model's sampling defaults cannot leak in
        kw.update(temperature=None, top_k=None, top_p=None)
    device = next(model.parameters()).device
    if batch and len(prompt) > 1:
        rows = [encode_prompt(tok, text, chat=chat, system=system) for text in prompt]
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):                       # left padding: every prompt ends at `width`
            ids[i, width - len(r):] = torch.tensor(r, dtype=torch.long)
            mask[i, width - len(r):] = 1
        with torch.no_grad():
            out = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), **kw)
        return [tok.decode(o[width:], skip_special_tokens=True).strip() for o in out]
    answers = []
    for text in prompt:
        if is_seq2seq(model):
            enc = tok(text, return_tensors="pt").to(device)
            start = 0
        else:
            ids = torch.tensor([encode_prompt(tok, text, chat=chat, system=system)], device=device)
            enc = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
            start = ids.shape[1]
        if seed is not None:
            torch.manual_seed(seed)
        with torch.no_grad():
            out = model.generate(**enc, **kw)
        answers.append(tok.decode(out[0, start:], skip_special_tokens=True).strip())
    return answers
