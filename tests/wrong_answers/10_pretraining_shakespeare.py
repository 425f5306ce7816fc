"""Plausible wrong answers for 10_pretraining_shakespeare (see CONTRIBUTING.md, "Wrong answers")."""

_SDPA_SHORTCUT = '''    def forward(self, x):
        if x.dim() != 3 or x.shape[-1] != self.n_embd:
            raise ValueError(f"expected x of shape (B, T, {self.n_embd}), got {tuple(x.shape)}")
        B, T, C = x.shape
        H, D = self.n_head, C // self.n_head
        q, k, v = self.in_proj(x).split(C, dim=-1)
        q, k, v = (t.view(B, T, H, D).transpose(1, 2) for t in (q, k, v))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                             dropout_p=self.attn_drop.p if self.training else 0.0)
        return self.out_proj(out.transpose(1, 2).reshape(B, T, C))
'''

VARIANTS = [
    # Exercise 1: the batch sampler
    {"name": "batch_targets_x_plus_one",                 # right on the visible test's text 0, 1, 2, ...
     "cells": {"ex1_get_batch": [("return data[idx].long(), data[idx + 1].long()",
                                  "return data[idx].long(), data[idx].long() + 1")]},
     "loses": ["test_ex1_get_batch"]},
    {"name": "batch_last_offset_never_drawn",             # off by one: randint's high is already exclusive
     "cells": {"ex1_get_batch": [("torch.randint(len(data) - block_size, ",
                                  "torch.randint(len(data) - block_size - 1, ")]},
     "loses": ["test_ex1_get_batch"]},
    {"name": "batch_offset_past_the_end",
     "cells": {"ex1_get_batch": [("torch.randint(len(data) - block_size, ",
                                  "torch.randint(len(data) - block_size + 1, ")]},
     "loses": ["test_ex1_get_batch"]},
    {"name": "batch_ignores_generator",
     "cells": {"ex1_get_batch": [("(batch_size,), generator=generator)", "(batch_size,))")]},
     "loses": ["test_ex1_get_batch"]},
    {"name": "batch_no_input_checks",                     # torch's own RuntimeError instead of a clear ValueError
     "cells": {"ex1_get_batch": [("    if block_size >= len(data):\n", "    if False:\n")]},
     "loses": ["test_ex1_get_batch"]},
    {"name": "batch_keeps_data_dtype",                    # int32 text gives int32 batches
     "cells": {"ex1_get_batch": [("return data[idx].long(), data[idx + 1].long()", "return data[idx], data[idx + 1]")]},
     "loses": ["test_ex1_get_batch"]},
    # Exercise 2: causal self-attention
    {"name": "attention_no_causal_mask",
     "cells": {"ex2_attention": [("scores.masked_fill(future, float(\"-inf\"))", "scores")]},
     "loses": ["test_ex2_attention"]},
    {"name": "attention_additive_float32_mask",          # a float32 -inf mask added: a bfloat16 input is promoted, then fails
     "cells": {"ex2_attention": [("scores.masked_fill(future, float(\"-inf\"))",
                                  "(scores + torch.zeros(T, T, device=x.device).masked_fill(future, float(\"-inf\")))")]},
     "loses": ["test_ex2_attention"]},
    {"name": "attention_scaled_by_model_width",
     "cells": {"ex2_attention": [("/ math.sqrt(D)", "/ math.sqrt(C)")]},
     "loses": ["test_ex2_attention"]},
    {"name": "attention_heads_split_without_transpose",
     "cells": {"ex2_attention": [("(t.view(B, T, H, D).transpose(1, 2) for t in (q, k, v))",
                                  "(t.reshape(B, H, T, D) for t in (q, k, v))")]},
     "loses": ["test_ex2_attention"]},
    {"name": "attention_softmax_over_queries",
     "cells": {"ex2_attention": [(".softmax(dim=-1)", ".softmax(dim=-2)")]},
     "loses": ["test_ex2_attention"]},
    {"name": "attention_two_heads_hard_coded",            # right for the visible test's n_head = 2 only
     "cells": {"ex2_attention": [("H, D = self.n_head, C // self.n_head", "H, D = 2, C // 2")]},
     "loses": ["test_ex2_attention"]},
    {"name": "attention_library_sdpa",                    # right values, but the library does the work
     "cells": {"ex2_attention": [("    def forward(self, x):\n", "    def _unused(self, x):\n"),
                                 ("        return self.out_proj(out)\n", "        return self.out_proj(out)\n\n" + _SDPA_SHORTCUT)]},
     "loses": ["test_ex2_attention"]},
    {"name": "attention_dropout_always_on",
     "cells": {"ex2_attention": [("weights = self.attn_drop(", "weights = F.dropout(training=True, p=self.attn_drop.p, input=")]},
     "loses": ["test_ex2_attention"]},
    {"name": "attention_dropout_never",                   # dropout built but never applied: training mode is not random
     "cells": {"ex2_attention": [("weights = self.attn_drop(", "weights = (")]},
     "loses": ["test_ex2_attention"]},
    {"name": "attention_dropout_on_the_output",           # dropout on the block's output instead of the attention weights
     "cells": {"ex2_attention": [("weights = self.attn_drop(", "weights = ("),
                                 ("        return self.out_proj(out)\n", "        return self.attn_drop(self.out_proj(out))\n")]},
     "loses": ["test_ex2_attention"]},
    # Exercise 3: the training step
    {"name": "step_without_zero_grad",                    # gradients accumulate across steps
     "cells": {"ex3_train_step": [("    optimizer.zero_grad(set_to_none=True)\n", "")]},
     "loses": ["test_ex3_train_step"]},
    {"name": "step_clips_after_the_update",
     "cells": {"ex3_train_step": [("    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)\n    optimizer.step()\n",
                                   "    optimizer.step()\n    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)\n")]},
     "loses": ["test_ex3_train_step"]},
    {"name": "step_clips_values_not_norm",
     "cells": {"ex3_train_step": [("torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)",
                                   "torch.nn.utils.clip_grad_value_(model.parameters(), max_norm)")]},
     "loses": ["test_ex3_train_step"]},
    {"name": "step_max_norm_hard_coded",                  # right for the visible test's default max_norm = 1
     "cells": {"ex3_train_step": [("torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)",
                                   "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)")]},
     "loses": ["test_ex3_train_step"]},
    {"name": "step_returns_tensor",
     "cells": {"ex3_train_step": [("return loss.item()", "return loss")]},
     "loses": ["test_ex3_train_step"]},
    {"name": "step_summed_loss",
     "cells": {"ex3_train_step": [("y.reshape(-1))", "y.reshape(-1), reduction=\"sum\")")]},
     "loses": ["test_ex3_train_step"]},
    {"name": "step_keeps_eval_mode",                      # dropout stays off if the caller left eval mode on
     "cells": {"ex3_train_step": [("    model.train()\n", "")]},
     "loses": ["test_ex3_train_step"]},
]

_STEP_RESTORES_MODE = '''def train_step(model, optimizer, x, y, max_norm=1.0):
    # trains in training mode, then puts back the caller's mode (the docstring says: leave it in training mode)
    if x.shape != y.shape:
        raise ValueError("x and y must have the same shape")
    if not max_norm > 0:
        raise ValueError("max_norm must be > 0")
    was_training = model.training
    model.train()
    logits = model(x)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.step()
    model.train(was_training)
    return loss.item()
'''

VARIANTS_ISSUE17 = [
    # Exercise 1: the batch sampler
    {"name": "batch_fresh_generator_when_none",           # generator=None: a new torch.Generator() (always the same seed)
     "cells": {"ex1_get_batch": [("    starts = torch.randint(",
                                  "    if generator is None:\n        generator = torch.Generator()\n    starts = torch.randint(")]},
     "loses": ["test_ex1_get_batch"]},
    {"name": "batch_checks_only_zero_sizes",              # block_size == 0 / batch_size == 0, negatives slip through
     "cells": {"ex1_get_batch": [("if block_size < 1 or batch_size < 1:", "if block_size == 0 or batch_size == 0:")]},
     "loses": ["test_ex1_get_batch"]},
    {"name": "batch_rounded_uniform_offsets",             # round(u * (N - T - 1)): first and last offsets half as likely
     "cells": {"ex1_get_batch": [("starts = torch.randint(len(data) - block_size, (batch_size,), generator=generator)",
                                  "starts = (torch.rand(batch_size, generator=generator) * (len(data) - block_size - 1)).round().long()")]},
     "loses": ["test_ex1_get_batch"]},
    # Exercise 2: causal self-attention
    {"name": "attention_dropout_on_head_outputs",         # dropout on the concatenated heads, before out_proj
     "cells": {"ex2_attention": [("weights = self.attn_drop(", "weights = ("),
                                 ("        return self.out_proj(out)\n", "        return self.out_proj(self.attn_drop(out))\n")]},
     "loses": ["test_ex2_attention"]},
    {"name": "attention_dropout_on_values",
     "cells": {"ex2_attention": [("weights = self.attn_drop(", "weights = ("),
                                 ("out = (weights @ v)", "out = (weights @ self.attn_drop(v))")]},
     "loses": ["test_ex2_attention"]},
    {"name": "attention_dropout_on_scores",               # dropout before the softmax
     "cells": {"ex2_attention": [("weights = self.attn_drop(scores.masked_fill(future, float(\"-inf\")).softmax(dim=-1))",
                                  "weights = self.attn_drop(scores).masked_fill(future, float(\"-inf\")).softmax(dim=-1)")]},
     "loses": ["test_ex2_attention"]},
    {"name": "attention_dropout_hard_coded",              # the chapter's 0.2, whatever `dropout` says
     "cells": {"ex2_attention": [("self.attn_drop = nn.Dropout(dropout)", "self.attn_drop = nn.Dropout(0.2)")]},
     "loses": ["test_ex2_attention"]},
    {"name": "attention_dropout_mask_not_rescaled",       # a hand-made mask without the 1 / (1 - p)
     "cells": {"ex2_attention": [("weights = self.attn_drop(scores.masked_fill(future, float(\"-inf\")).softmax(dim=-1))",
                                  "weights = scores.masked_fill(future, float(\"-inf\")).softmax(dim=-1)\n"
                                  "        if self.training:\n"
                                  "            weights = weights * (torch.rand_like(weights) >= self.attn_drop.p)")]},
     "loses": ["test_ex2_attention"]},
    # Exercise 3: the training step
    {"name": "step_restores_callers_mode",
     "cells": {"ex3_train_step": _STEP_RESTORES_MODE},
     "loses": ["test_ex3_train_step"]},
    {"name": "step_checks_element_count",                 # x.numel() != y.numel(): a (5, 3) / (3, 5) pair slips through
     "cells": {"ex3_train_step": [("if x.shape != y.shape:", "if x.numel() != y.numel():")]},
     "loses": ["test_ex3_train_step"]},
    {"name": "step_clips_each_parameter",                 # per-tensor norms instead of the global norm
     "cells": {"ex3_train_step": [("torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)",
                                   "[torch.nn.utils.clip_grad_norm_([p], max_norm) for p in model.parameters()]")]},
     "loses": ["test_ex3_train_step"]},
]
VARIANTS += VARIANTS_ISSUE17

_SCHED_NUMPY = '''def lr_schedule(step, peak_lr, warmup_steps, total_steps, min_lr=0.0):
    # written from the statement alone, with numpy and clipping instead of branches (returns numpy floats)
    import numpy as np
    warm = peak_lr * step / max(warmup_steps, 1)
    u = np.clip((step - warmup_steps) / (total_steps - warmup_steps), 0.0, 1.0)
    decay = min_lr + (peak_lr - min_lr) * 0.5 * (1 + np.cos(np.pi * u))
    return np.where(step < warmup_steps, warm, decay).item()
'''

VARIANTS_ISSUE40 = [
    # Exercise 4: the learning-rate schedule
    {"name": "sched_warmup_starts_one_step_late",         # nanoGPT-like (k + 1) / w: never 0, reaches the peak a step early
     "cells": {"ex4_lr_schedule": [("return peak_lr * step / warmup_steps", "return peak_lr * (step + 1) / warmup_steps")]},
     "loses": ["test_ex4_lr_schedule"]},
    {"name": "sched_cosine_progress_over_total",          # progress k / S: below the peak at the end of the warm-up
     "cells": {"ex4_lr_schedule": [("progress = (step - warmup_steps) / (total_steps - warmup_steps)",
                                    "progress = step / total_steps")]},
     "loses": ["test_ex4_lr_schedule"]},
    {"name": "sched_decays_to_zero",                      # min_lr ignored in the cosine: ends at 0, jumps to the floor after
     "cells": {"ex4_lr_schedule": [("return min_lr + (peak_lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))",
                                    "return peak_lr * 0.5 * (1.0 + math.cos(math.pi * progress))")]},
     "loses": ["test_ex4_lr_schedule"]},
    {"name": "sched_clipped_at_floor",                    # decays to 0 but clipped at min_lr: right at the ends, wrong between
     "cells": {"ex4_lr_schedule": [("return min_lr + (peak_lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))",
                                    "return max(min_lr, peak_lr * 0.5 * (1.0 + math.cos(math.pi * progress)))")]},
     "loses": ["test_ex4_lr_schedule"]},
    {"name": "sched_full_cosine_cycle",                   # cos(2 pi u): back up to the peak by the end, not monotone
     "cells": {"ex4_lr_schedule": [("math.cos(math.pi * progress)", "math.cos(2 * math.pi * progress)")]},
     "loses": ["test_ex4_lr_schedule"]},
    {"name": "sched_no_floor_after_the_end",              # the cosine formula past S climbs again
     "cells": {"ex4_lr_schedule": [("    if step >= total_steps:\n        return float(min_lr)\n", "")]},
     "loses": ["test_ex4_lr_schedule"]},
    {"name": "sched_linear_decay",                        # a straight line from the peak to the floor
     "cells": {"ex4_lr_schedule": [("min_lr + (peak_lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))",
                                    "min_lr + (peak_lr - min_lr) * (1.0 - progress)")]},
     "loses": ["test_ex4_lr_schedule"]},
    {"name": "honest_sched_numpy_clip",                   # another right answer, written from the student text alone
     "cells": {"ex4_lr_schedule": _SCHED_NUMPY},
     "loses": []},
]
VARIANTS += VARIANTS_ISSUE40

# An honest answer a reader wrote from the student notebook's text alone (issue 40): full marks.
_SCHED_READER = """import math


def lr_schedule(step, peak_lr, warmup_steps, total_steps, min_lr=0.0):
    \"\"\"Learning rate of optimizer step `step`: linear warm-up from 0, cosine decay to a floor (GPT-2, nanoGPT).\"\"\"
    k, w, S = step, warmup_steps, total_steps
    if k < w:
        return float(peak_lr) * k / w
    if k > S:
        return float(min_lr)
    u = (k - w) / (S - w)
    return float(min_lr + (peak_lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * u)))
"""
VARIANTS.append(
    {"name": "honest_sched_reader",                       # branches on k < w, k > S; float() of every branch
     "cells": {"ex4_lr_schedule": _SCHED_READER},
     "loses": []})
