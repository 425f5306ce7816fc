"""Plausible wrong answers for 12_lora_qlora (see CONTRIBUTING.md, "Wrong answers")."""

_LOSS_PER_SEQUENCE = '''def masked_lm_loss(logits, input_ids, prompt_lengths, attention_mask=None):
    # mean per sequence, then mean over the batch (not the token-level mean of transformers)
    Bsz, T = input_ids.shape
    plen = torch.as_tensor(prompt_lengths).reshape(-1)
    lengths = attention_mask.sum(dim=1) if attention_mask is not None else torch.full((Bsz,), T)
    if (plen < 0).any() or (plen >= lengths).any():
        raise ValueError("bad prompt lengths")
    losses = []
    for b in range(Bsz):
        p, n = int(plen[b]), int(lengths[b])
        losses.append(F.cross_entropy(logits[b, p - 1:n - 1].float(), input_ids[b, p:n]) if p > 0
                      else F.cross_entropy(logits[b, :n - 1].float(), input_ids[b, 1:n]))
    return torch.stack(losses).mean()
'''

VARIANTS = [
    # Exercise 1: the LoRA layer
    {"name": "lora_scaling_alpha_not_alpha_over_r",
     "cells": {"ex1_lora_linear": [("self.scaling = alpha / r", "self.scaling = float(alpha)")]},
     "loses": ["test_ex1_lora_init", "test_ex1_lora_vs_peft"]},
    {"name": "lora_scaling_hardcoded_visible_case",
     "cells": {"ex1_lora_linear": [("self.scaling = alpha / r", "self.scaling = 2.0")]},
     "loses": ["test_ex1_lora_init", "test_ex1_lora_vs_peft"]},
    {"name": "lora_init_swapped_A_zero_B_random",
     "cells": {"ex1_lora_linear": [
         ("nn.init.kaiming_uniform_(self.A, a=math.sqrt(5))", "nn.init.zeros_(self.A)"),
         ("self.B = nn.Parameter(torch.zeros(base.out_features, r, dtype=w.dtype, device=w.device))",
          "self.B = nn.Parameter(torch.empty(base.out_features, r, dtype=w.dtype, device=w.device)); nn.init.kaiming_uniform_(self.B, a=math.sqrt(5))")]},
     "loses": ["test_ex1_lora_init"]},
    {"name": "lora_A_gaussian_init",
     "cells": {"ex1_lora_linear": [("nn.init.kaiming_uniform_(self.A, a=math.sqrt(5))", "nn.init.normal_(self.A, std=1 / r)")]},
     "loses": ["test_ex1_lora_init"]},
    {"name": "lora_base_not_frozen",
     "cells": {"ex1_lora_linear": [("            p.requires_grad_(False)\n", "            pass\n")]},
     "loses": ["test_ex1_lora_init"]},
    {"name": "lora_no_rank_check",
     "cells": {"ex1_lora_linear": [("isinstance(r, bool) or not isinstance(r, int) or r < 1", "False")]},
     "loses": ["test_ex1_lora_init"]},
    {"name": "lora_merged_weight_transposed",
     "cells": {"ex1_lora_linear": [("return self.base.weight + self.scaling * self.B @ self.A",
                                    "return self.base.weight.T + self.scaling * self.A.T @ self.B.T")]},
     "loses": ["test_ex1_lora_vs_peft"]},
    {"name": "lora_forward_ignores_bias",
     "cells": {"ex1_lora_linear": [("return self.base(x) + self.scaling * (x @ self.A.T) @ self.B.T",
                                    "return x @ self.base.weight.T + self.scaling * (x @ self.A.T) @ self.B.T")]},
     "loses": ["test_ex1_lora_init", "test_ex1_lora_vs_peft"]},
    {"name": "lora_base_deep_copied",          # frozen, but a copy: self.base is not the layer given
     "cells": {"ex1_lora_linear": [("        self.base = base\n",
                                    "        self.base = copy.deepcopy(base)\n        for q in base.parameters():\n"
                                    "            q.requires_grad_(False)\n")]},
     "loses": ["test_ex1_lora_init"]},
    {"name": "lora_AB_default_dtype",           # A and B in float32 whatever the base weight's dtype
     "cells": {"ex1_lora_linear": [("torch.empty(r, base.in_features, dtype=w.dtype, device=w.device)",
                                    "torch.empty(r, base.in_features, device=w.device)"),
                                   ("torch.zeros(base.out_features, r, dtype=w.dtype, device=w.device)",
                                    "torch.zeros(base.out_features, r, device=w.device)")]},
     "loses": ["test_ex1_lora_init"]},
    # Exercise 2: the masked loss
    {"name": "loss_mask_off_by_one_drops_first_response_token",
     "cells": {"ex2_masked_loss": [("(pos >= plen[:, None])", "(pos > plen[:, None])")]},
     "loses": ["test_ex2_masked_loss"]},
    {"name": "loss_trains_on_padding",
     "cells": {"ex2_masked_loss": [("& (pos < lengths[:, None])", "")]},
     "loses": ["test_ex2_masked_loss"]},
    {"name": "loss_not_shifted",
     "cells": {"ex2_masked_loss": [("logits[:, :-1].float().reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1)",
                                    "logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1)")]},
     "loses": ["test_ex2_masked_loss"]},
    {"name": "loss_mean_per_sequence", "cells": {"ex2_masked_loss": _LOSS_PER_SEQUENCE},
     "loses": ["test_ex2_masked_loss"]},
    {"name": "loss_not_upcast_to_float32",      # a bfloat16 loss for bfloat16 logits
     "cells": {"ex2_masked_loss": [("logits[:, :-1].float().reshape", "logits[:, :-1].reshape")]},
     "loses": ["test_ex2_masked_loss"]},
]

_LOSS_LOG_OF_SOFTMAX = '''def masked_lm_loss(logits, input_ids, prompt_lengths, attention_mask=None):
    # -log of the softmax probability, gathered by hand: inf when a logit is far ahead of the target's
    Bsz, T = input_ids.shape
    plen = torch.as_tensor(prompt_lengths).reshape(-1)
    lengths = attention_mask.sum(dim=1) if attention_mask is not None else torch.full((Bsz,), T)
    if (plen < 0).any() or (plen >= lengths).any():
        raise ValueError("bad prompt lengths")
    pos = torch.arange(T)[None, :]
    is_target = ((pos >= plen[:, None]) & (pos < lengths[:, None]))[:, 1:]
    p = torch.softmax(logits[:, :-1].float(), dim=-1)
    nll = -torch.log(p.gather(-1, input_ids[:, 1:, None]).squeeze(-1))
    return nll[is_target].mean()
'''

VARIANTS += [
    {"name": "lora_scaling_floor_division",         # alpha // r: an int, 0 when alpha < r
     "cells": {"ex1_lora_linear": [("self.scaling = alpha / r", "self.scaling = alpha // r")]},
     "loses": ["test_ex1_lora_init", "test_ex1_lora_vs_peft"]},
    {"name": "lora_A_kaiming_default_a",            # kaiming_uniform_ with a=0: bound sqrt(6 / in), 2.45x too wide
     "cells": {"ex1_lora_linear": [("nn.init.kaiming_uniform_(self.A, a=math.sqrt(5))", "nn.init.kaiming_uniform_(self.A)")]},
     "loses": ["test_ex1_lora_init"]},
    {"name": "lora_A_bound_from_rank",              # U(-1/sqrt(r), 1/sqrt(r)): the fan of the wrong side
     "cells": {"ex1_lora_linear": [("nn.init.kaiming_uniform_(self.A, a=math.sqrt(5))",
                                    "nn.init.uniform_(self.A, -1 / math.sqrt(r), 1 / math.sqrt(r))")]},
     "loses": ["test_ex1_lora_init"]},
    {"name": "loss_rejects_single_response_token",  # off by one at the boundary: one response token is enough
     "cells": {"ex2_masked_loss": [("(plen >= lengths).any()", "(plen >= lengths - 1).any()")]},
     "loses": ["test_ex2_masked_loss"]},
    {"name": "loss_length_check_only_with_mask",    # no ValueError for an all-prompt row when attention_mask is None
     "cells": {"ex2_masked_loss": [("(plen >= lengths).any()", "(attention_mask is not None and (plen >= lengths).any())")]},
     "loses": ["test_ex2_masked_loss"]},
    {"name": "loss_log_of_softmax", "cells": {"ex2_masked_loss": _LOSS_LOG_OF_SOFTMAX},
     "loses": ["test_ex2_masked_loss"]},
    {"name": "loss_labels_written_into_input_ids",  # masked_fill_ on input_ids: the caller's ids become -100
     "cells": {"ex2_masked_loss": [("labels = input_ids.masked_fill(~is_target, -100)",
                                    "labels = input_ids.masked_fill_(~is_target, -100)")]},
     "loses": ["test_ex2_masked_loss"]},
]

_SCALE = "return alpha / math.sqrt(r) if rslora else alpha / r"
_SVD = "return U[:, :r] * (S[:r] / scaling), Vh[:r]"
_RANK_CHECK = "isinstance(r, bool) or not isinstance(r, int) or not 1 <= r <= min(delta.shape)"

_FROM_UPDATE_LOWRANK = '''def lora_from_update(delta, r, scaling=1.0):
    # torch's randomized low-rank SVD: close, but not the best rank-r approximation
    if isinstance(r, bool) or not isinstance(r, int) or not 1 <= r <= min(delta.shape):
        raise ValueError("bad r")
    if not scaling > 0:
        raise ValueError("bad scaling")
    U, S, V = torch.svd_lowrank(delta, q=r)
    return U * (S / scaling), V.T
'''

_FROM_UPDATE_EIGH = '''def lora_from_update(delta, r, scaling=1.0):
    # eigenvectors of delta^T delta, taken from the front: eigh sorts ascending, so these are the smallest
    if isinstance(r, bool) or not isinstance(r, int) or not 1 <= r <= min(delta.shape):
        raise ValueError("bad r")
    if not scaling > 0:
        raise ValueError("bad scaling")
    _, V = torch.linalg.eigh(delta.T @ delta)
    A = V[:, :r].T
    return (delta @ A.T) / scaling, A
'''

_FIRST = "g = scaling * grad_W @ A.T"
_STEP = "B1 = -lr * g / (g.abs() + eps)"

VARIANTS += [
    # Exercise 4: the rank-scaling rule
    {"name": "scaling_alpha_times_r",               # alpha * r: the factor grows with the rank
     "cells": {"ex4_rank_scaling": [(_SCALE, "return alpha * math.sqrt(r) if rslora else alpha * r")]},
     "loses": ["test_ex4_scaling"]},
    {"name": "scaling_rslora_ignored",              # alpha / r whatever rslora says
     "cells": {"ex4_rank_scaling": [(_SCALE, "return alpha / r")]},
     "loses": ["test_ex4_scaling"]},
    {"name": "scaling_r_over_alpha",                # the ratio upside down
     "cells": {"ex4_rank_scaling": [(_SCALE, "return math.sqrt(r) / alpha if rslora else r / alpha")]},
     "loses": ["test_ex4_scaling"]},
    {"name": "scaling_rslora_alpha_over_r_squared",  # rsLoRA read as a stronger damping, alpha / r**2
     "cells": {"ex4_rank_scaling": [(_SCALE, "return alpha / r ** 2 if rslora else alpha / r")]},
     "loses": ["test_ex4_scaling"]},
    # Exercise 3: the best rank-r adapter
    {"name": "from_update_scaling_ignored",          # B @ A is the approximation itself: scaling * B @ A is off by scaling
     "cells": {"ex3_lora_from_update": [(_SVD, "return U[:, :r] * S[:r], Vh[:r]")]},
     "loses": ["test_ex3_lora_from_update"]},
    {"name": "from_update_scaling_multiplied",       # B = U S * scaling: the factor applied the wrong way
     "cells": {"ex3_lora_from_update": [(_SVD, "return U[:, :r] * (S[:r] * scaling), Vh[:r]")]},
     "loses": ["test_ex3_lora_from_update"]},
    {"name": "from_update_smallest_singular_values",  # the last r singular triplets instead of the first r
     "cells": {"ex3_lora_from_update": [(_SVD, "return U[:, -r:] * (S[-r:] / scaling), Vh[-r:]")]},
     "loses": ["test_ex3_lora_from_update"]},
    {"name": "from_update_eigh_ascending", "cells": {"ex3_lora_from_update": _FROM_UPDATE_EIGH},
     "loses": ["test_ex3_lora_from_update"]},
    {"name": "from_update_svd_lowrank", "cells": {"ex3_lora_from_update": _FROM_UPDATE_LOWRANK},
     "loses": ["test_ex3_lora_from_update"]},
    {"name": "from_update_no_rank_check",            # r beyond min(d_out, d_in) or a float r accepted
     "cells": {"ex3_lora_from_update": [(_RANK_CHECK, "r < 1")]},
     "loses": ["test_ex3_lora_from_update"]},
    {"name": "honest_from_update_full_svd_split_evenly",   # another split of the same product: sqrt(S) on each side
     "cells": {"ex3_lora_from_update": [(_SVD, "return U[:, :r] * (S[:r].sqrt() / scaling), S[:r].sqrt()[:, None] * Vh[:r]")]},
     "loses": []},
    # Exercise 4 (b): the first AdamW update
    {"name": "first_update_sgd_step",                # a gradient step (SGD) instead of Adam's normalised one
     "cells": {"ex4b_first_update": [(_STEP, "B1 = -lr * g")]},
     "loses": ["test_ex4b_first_update"]},
    {"name": "first_update_no_output_scaling",       # returns B_1 A: the factor s of W' = W + s B A forgotten
     "cells": {"ex4b_first_update": [("return scaling * B1 @ A", "return B1 @ A")]},
     "loses": ["test_ex4b_first_update"]},
    {"name": "first_update_sign_no_eps",             # "Adam moves each entry by lr": sign(g), eps ignored
     "cells": {"ex4b_first_update": [(_STEP, "B1 = -lr * torch.sign(g)")]},
     "loses": ["test_ex4b_first_update"]},
    {"name": "first_update_no_eps_nan",              # g / |g|: 0 / 0 = nan where a gradient is zero
     "cells": {"ex4b_first_update": [(_STEP, "B1 = -lr * g / g.abs()")]},
     "loses": ["test_ex4b_first_update"]},
    {"name": "first_update_gradient_without_scaling",  # dL/dB = G A^T (s dropped): matters only where eps does
     "cells": {"ex4b_first_update": [(_FIRST, "g = grad_W @ A.T")]},
     "loses": ["test_ex4b_first_update"]},
    {"name": "honest_first_update_torch_adam_by_hand",  # the two moments and the bias correction written out
     "cells": {"ex4b_first_update": [(_STEP, "m, v = 0.1 * g, 0.001 * g * g\n    B1 = -lr * (m / 0.1) / ((v / 0.001).sqrt() + eps)")]},
     "loses": []},
]
