"""Label scoring the way evaluation harnesses do it, batched for a CPU (Book §5.5–§5.7, chapter 09).

For a prompt :math:`x` and a candidate answer :math:`y = (y_1, \\dots, y_m)`, the log-likelihood of
the answer as a continuation of the prompt is

.. math:: \\log p(y \\mid x) = \\sum_{t=1}^{m} \\log p(y_t \\mid x, y_{<t}),

and a harness (lm-evaluation-harness, HELM) predicts :math:`\\arg\\max_y` over the labels.
:func:`label_scores` is that definition, one full forward pass per (prompt, label): the
reference. :func:`run_prompts` computes the same numbers for a whole list of prompts in a few
batched passes and, from the same cache, the greedy answer and seeded samples of each prompt
(Book §5.4's decoding, §5.7's self-consistency): the prompts of one template share their
beginning (task, few-shot examples), so a causal model encodes it once and reuses its keys
and values (the KV cache of chapter 08). ``tests/test_scoring.py`` checks the two agree.

A decoder-only chat model can read a prompt in two formats: ``"chat"`` (wrapped in its chat
template; the label starts the assistant's reply) or ``"raw"`` (the text itself, continued as a
document; the label follows a space). An encoder-decoder (FLAN-T5) has only ``"raw"``: the
prompt goes into the encoder and the label is the decoder's output.
"""
from __future__ import annotations

import copy
from typing import Any, Sequence

import torch

from course_utils.generation import encode_prompt, is_seq2seq


def formats(model: Any) -> tuple[str, ...]:
    """The prompt formats ``model`` can read: ``("raw",)`` for an encoder-decoder, ``("chat", "raw")`` otherwise."""
    return ("raw",) if is_seq2seq(model) else ("chat", "raw")


def label_token_ids(tok: Any, label: str, fmt: str, seq2seq: bool = False) -> list[int]:
    """Token ids of ``label`` as a continuation (Book §5.5: the prompts end in ``Sentimento:``).

    After a raw prompt ending in ``:`` or ``->`` the label follows a space; after the chat
    template's assistant header, or in T5's decoder, it starts the answer.
    """
    text = " " + label if fmt == "raw" and not seq2seq else label
    return list(tok(text, add_special_tokens=False)["input_ids"])


def prompt_token_ids(tok: Any, prompt: str, fmt: str) -> list[int]:
    """What a causal model reads: the chat template around ``prompt`` (``fmt="chat"``) or the raw text."""
    return encode_prompt(tok, prompt, chat=(fmt == "chat"))


def _check_fmt(model: Any, fmt: str) -> None:
    if fmt not in formats(model):
        raise ValueError(f"fmt must be one of {formats(model)} for this model, got {fmt!r}")


@torch.no_grad()
def label_scores(model: Any, tok: Any, prompt: str, labels: Sequence[str], fmt: str) -> list[float]:
    """The definition: ``log p(label | prompt)`` for each label, one full forward pass per (prompt, label).

    Slow and obviously right: the reference :func:`run_prompts` is checked against.
    """
    _check_fmt(model, fmt)
    seq2seq = is_seq2seq(model)
    scores = []
    for lab in labels:
        y = label_token_ids(tok, lab, fmt, seq2seq)
        if seq2seq:
            enc = tok(prompt, return_tensors="pt")
            dec = torch.tensor([[model.config.decoder_start_token_id] + y[:-1]])
            logp = model(**enc, decoder_input_ids=dec).logits[0].float().log_softmax(-1)
            scores.append(sum(logp[t, y[t]].item() for t in range(len(y))))
        else:
            x = prompt_token_ids(tok, prompt, fmt)
            logp = model(input_ids=torch.tensor([x + y])).logits[0].float().log_softmax(-1)
            scores.append(sum(logp[len(x) + t - 1, y[t]].item() for t in range(len(y))))
    return scores


def _pad_id(tok: Any) -> int:
    return tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id


def _forward(model: Any, ids: torch.Tensor, mask: torch.Tensor, past: Any, pos: torch.Tensor,
             at: torch.Tensor | None = None) -> tuple[torch.Tensor, Any]:
    """One pass of the decoder stack; the output layer only where log-probs are needed (``at``: per row,
    the position to keep, or ``None`` for all). Returns (log-probs, cache)."""
    out = model.get_decoder()(input_ids=ids, attention_mask=mask, past_key_values=past, position_ids=pos,
                              use_cache=True)
    h = out.last_hidden_state if at is None else out.last_hidden_state[torch.arange(ids.shape[0]), at]
    return model.get_output_embeddings()(h).float().log_softmax(-1), out.past_key_values


def _pick(logp: torch.Tensor, gen: torch.Generator | None, temperature: float, top_k: int) -> torch.Tensor:
    """Greedy (``gen=None``) or one sampled token per row, temperature then top-k (Book §5.4)."""
    if gen is None:
        return logp.argmax(-1)
    z = logp / temperature
    if top_k:
        z = z.masked_fill(z < z.topk(top_k, dim=-1).values[:, -1:], float("-inf"))
    return torch.multinomial(z.softmax(-1), 1, generator=gen)[:, 0]


def _decode_from(model: Any, tok: Any, past: Any, mask: torch.Tensor, logp: torch.Tensor, pos0: torch.Tensor,
                 steps: int, gen: torch.Generator | None = None, temperature: float = 1.0,
                 top_k: int = 50) -> list[str]:
    """Continue every row of a cache for ``steps`` tokens; ``logp``: the next-token log-probs."""
    rows = []
    for t in range(steps):
        nxt = _pick(logp, gen, temperature, top_k)
        rows.append(nxt)
        if t + 1 < steps:
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], 1)
            logp, past = _forward(model, nxt[:, None], mask, past, (pos0 + t)[:, None], at=torch.zeros_like(pos0))
    return [tok.decode(r, skip_special_tokens=True).strip() for r in torch.stack(rows, 1)]


@torch.no_grad()
def _run_causal(model: Any, tok: Any, prompts: list[str], labels: Sequence[str], fmt: str, gen_tokens: int,
                n_samples: int, seed: int, temperature: float, top_k: int, chunk: int) -> dict[str, Any]:
    pad = _pad_id(tok)
    rows = [prompt_token_ids(tok, p, fmt) for p in prompts]
    labs = [label_token_ids(tok, lab, fmt) for lab in labels]
    n_shared = 0                                  # the token prefix every prompt of the batch shares
    while all(len(r) > n_shared + 1 for r in rows) and len({r[n_shared] for r in rows}) == 1:
        n_shared += 1
    shared = None
    if n_shared:
        ids = torch.tensor([rows[0][:n_shared]])
        _, shared = _forward(model, ids, torch.ones_like(ids), None, torch.arange(n_shared)[None], at=torch.tensor([0]))
    out: dict[str, Any] = {"scores": [], "first": [], "greedy": [], "samples": []}
    K = len(labels)
    Lm = max((len(lab) for lab in labs), default=0)
    for c0 in range(0, len(rows), chunk):
        own = [r[n_shared:] for r in rows[c0:c0 + chunk]]
        B, L = len(own), max(len(r) for r in own)
        n = torch.tensor([len(r) for r in own])
        ids = torch.full((B, L), pad)
        mask = torch.zeros((B, n_shared + L), dtype=torch.long)
        mask[:, :n_shared] = 1
        for i, r in enumerate(own):               # right padding: every prompt starts at n_shared
            ids[i, :len(r)] = torch.tensor(r)
            mask[i, n_shared:n_shared + len(r)] = 1
        past = None
        if shared is not None:
            past = copy.deepcopy(shared)
            past.batch_repeat_interleave(B)
        # first: (B, vocab), the next-token log-probs at the label position
        first, past = _forward(model, ids, mask, past, (n_shared + torch.arange(L))[None].expand(B, L), at=n - 1)
        scores = torch.zeros(B, K, dtype=torch.float64)
        if K:
            # the labels: one row per (prompt, label), all label tokens in one pass
            lab_ids = torch.full((B * K, Lm), pad)
            lab_mask = torch.zeros((B * K, Lm), dtype=torch.long)
            for r in range(B * K):
                lab = labs[r % K]
                lab_ids[r, :len(lab)] = torch.tensor(lab)
                lab_mask[r, :len(lab)] = 1
            lab_past = copy.deepcopy(past)
            lab_past.batch_repeat_interleave(K)
            pos = (n_shared + n).repeat_interleave(K)[:, None] + torch.arange(Lm)[None]
            lab_logp, _ = _forward(model, lab_ids, torch.cat([mask.repeat_interleave(K, 0), lab_mask], 1),
                                   lab_past, pos)
            for r in range(B * K):
                b, j = divmod(r, K)
                lab = labs[j]
                scores[b, j] = first[b, lab[0]].item() + sum(lab_logp[r, t - 1, lab[t]].item()
                                                             for t in range(1, len(lab)))
        out["scores"].append(scores)
        out["first"].append(first)
        out["greedy"] += _decode_from(model, tok, copy.deepcopy(past), mask, first, n_shared + n, gen_tokens)
        if n_samples:
            sp = copy.deepcopy(past)
            sp.batch_repeat_interleave(n_samples)
            texts = _decode_from(model, tok, sp, mask.repeat_interleave(n_samples, 0),
                                 first.repeat_interleave(n_samples, 0), (n_shared + n).repeat_interleave(n_samples),
                                 gen_tokens,
                                 gen=torch.Generator().manual_seed(seed + c0), temperature=temperature, top_k=top_k)
            out["samples"] += [texts[b * n_samples:(b + 1) * n_samples] for b in range(B)]
    return out


@torch.no_grad()
def _run_seq2seq(model: Any, tok: Any, prompts: list[str], labels: Sequence[str], gen_tokens: int, n_samples: int,
                 seed: int, temperature: float, top_k: int, chunk: int) -> dict[str, Any]:
    from transformers.modeling_outputs import BaseModelOutput

    pad = _pad_id(tok)
    labs = [label_token_ids(tok, lab, "raw", seq2seq=True) for lab in labels]
    K = len(labels)
    R, Lm = max(K, 1), max([len(lab) for lab in labs] + [1])   # no label: one row, the start token only
    start = model.config.decoder_start_token_id
    out: dict[str, Any] = {"scores": [], "first": [], "greedy": [], "samples": []}
    for c0 in range(0, len(prompts), chunk):
        enc = tok(prompts[c0:c0 + chunk], return_tensors="pt", padding=True)
        B = enc["input_ids"].shape[0]
        hidden = model.get_encoder()(**enc).last_hidden_state
        dec = torch.full((B * R, Lm), pad)
        dec[:, 0] = start
        for r in range(B * K):                    # decoder input: start token, then the label shifted right
            lab = labs[r % K]
            dec[r, 1:len(lab)] = torch.tensor(lab[:-1])
        logp = model(encoder_outputs=BaseModelOutput(last_hidden_state=hidden.repeat_interleave(R, 0)),
                     attention_mask=enc["attention_mask"].repeat_interleave(R, 0),
                     decoder_input_ids=dec).logits.float().log_softmax(-1)
        scores = torch.zeros(B, K, dtype=torch.float64)
        for r in range(B * K):
            b, j = divmod(r, K)
            scores[b, j] = sum(logp[r, t, labs[j][t]].item() for t in range(len(labs[j])))
        out["scores"].append(scores)
        out["first"].append(logp[::R, 0])
        g = model.generate(**enc, max_new_tokens=gen_tokens, do_sample=False, temperature=None, top_k=None, top_p=None)
        out["greedy"] += [tok.decode(x, skip_special_tokens=True).strip() for x in g]
        if n_samples:
            torch.manual_seed(seed + c0)
            s = model.generate(**enc, max_new_tokens=gen_tokens, do_sample=True, temperature=temperature,
                               top_k=top_k, top_p=1.0, num_return_sequences=n_samples)
            texts = [tok.decode(x, skip_special_tokens=True).strip() for x in s]
            out["samples"] += [texts[b * n_samples:(b + 1) * n_samples] for b in range(B)]
    return out


def run_prompts(model: Any, tok: Any, prompts: Sequence[str], labels: Sequence[str], fmt: str, gen_tokens: int = 6,
                n_samples: int = 0, seed: int = 0, temperature: float = 1.0, top_k: int = 50,
                chunk: int = 16) -> dict[str, Any]:
    """Book §5.5–§5.7, measured the harness way, for a list of prompts.

    Returns a dict: ``"scores"`` (n, len(labels)) float64, the log-likelihood of ``labels[j]`` as the
    continuation of prompt i (what :func:`label_scores` computes; ``labels=()``: generation only);
    ``"first"`` (n, vocab), the next-token log-probabilities at the label position; ``"greedy"``, the
    greedy answer (``gen_tokens`` new tokens) of each prompt; ``"samples"``, for each prompt
    ``n_samples`` answers sampled at ``temperature`` with ``top_k`` (seeded: ``seed`` + the index of
    the chunk's first prompt). ``fmt``: ``"chat"`` or ``"raw"`` (a seq2seq model: ``"raw"`` only).
    ``chunk``: prompts per batch.

    Raises:
        ValueError: ``fmt`` is not one of :func:`formats` ``(model)``, or ``prompts`` is empty.
    """
    _check_fmt(model, fmt)
    prompts = list(prompts)
    if not prompts:
        raise ValueError("run_prompts needs at least one prompt")
    if is_seq2seq(model):
        out = _run_seq2seq(model, tok, prompts, labels, gen_tokens, n_samples, seed, temperature, top_k, chunk)
    else:
        out = _run_causal(model, tok, prompts, labels, fmt, gen_tokens, n_samples, seed, temperature, top_k, chunk)
    out["scores"], out["first"] = torch.cat(out["scores"]), torch.cat(out["first"])
    return out
