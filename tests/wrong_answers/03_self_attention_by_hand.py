"""Plausible wrong answers for chapter 03; each variant must lose the points of the test cells it names.

The exercises are graded independently, so one submission can carry one mistake per exercise (each
mistake was also checked alone when it was added).
"""

SDPA_VIA_TORCH = (
    "def scaled_dot_product_attention(q, k, v, mask=None):\n"
    "    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)\n"
    "    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
    "    if mask is not None:\n"
    "        s = s.masked_fill(~mask, float('-inf'))\n"
    "    return out, torch.softmax(s, dim=-1)\n"
)

VARIANTS = [
    {"name": "textbook_slips",
     "cells": {
         "ex1_softmax": [("torch.exp(x - m)", "torch.exp(x)")],                      # no max shift: inf/inf = nan
         "ex2_sdpa": [(" / math.sqrt(d_k)", "")],                                      # forgot the 1/sqrt(d_k)
         "ex3_causal_mask": [("return pos_k <= pos_q", "return pos_k < pos_q")],       # a token may not see itself
         "ex4_heads": [("x.reshape(B, n, n_heads, d // n_heads).transpose(1, 2)",
                        "x.reshape(B, n_heads, n, d // n_heads)")],                    # split without transpose
         "ex5_layernorm": [("((x - mu) ** 2).mean(dim=-1, keepdim=True)",
                            "x.var(dim=-1, keepdim=True)")],                          # unbiased variance (d - 1)
     },
     "loses": ["test_ex1_softmax", "test_ex2_sdpa", "test_ex3_causal_mask", "test_ex4_heads", "test_ex5_layernorm"]},
    {"name": "convention_mixups",
     "cells": {
         "ex1_softmax": [("dim=dim", "dim=-1")],                                       # ignores `dim`
         "ex2_sdpa": [("masked_fill(~mask,", "masked_fill(mask,")],                    # True = blocked (nn.MHA style)
         "ex3_causal_mask": [("return pos_k <= pos_q", "return pos_k > pos_q")],       # blocked-positions convention
         "ex4_heads": [("x.transpose(1, 2).reshape(B, n, h * d_k)", "x.reshape(B, n, h * d_k)")],  # merge w/o transpose
         "ex5_layernorm": [("dim=-1", "dim=-2")],                                      # normalises across tokens
     },
     "loses": ["test_ex1_softmax", "test_ex2_sdpa", "test_ex3_causal_mask", "test_ex4_heads", "test_ex5_layernorm"]},
    {"name": "subtle_numerics",
     "cells": {
         "ex1_softmax": [("x.amax(dim=dim, keepdim=True)", "x.max()")],               # one max for the whole tensor
         "ex2_sdpa": [('float("-inf")', "0.0")],                                       # note 001: "zero the scores"
         "ex3_causal_mask": [(" + (n_k - n_q)", "")],                                  # top-left alignment
         "ex4_heads": [("    if d % n_heads != 0:\n"
                        "        raise ValueError(f\"d={d} is not divisible by n_heads={n_heads}\")\n", "")],  # no check
         "ex5_layernorm": [("torch.sqrt(var + eps)", "(torch.sqrt(var) + eps)")],       # eps outside the root
     },
     "loses": ["test_ex1_softmax", "test_ex2_sdpa", "test_ex3_causal_mask", "test_ex4_heads", "test_ex5_layernorm"]},
    {"name": "library_shortcuts",
     "cells": {
         "ex1_softmax": "def stable_softmax(x, dim=-1):\n    return torch.softmax(x, dim=dim)\n",
         "ex2_sdpa": SDPA_VIA_TORCH,
         "ex5_layernorm": "def layer_norm(x, gamma, beta, eps=1e-5):\n"
                          "    return F.layer_norm(x, x.shape[-1:], gamma, beta, eps)\n",
     },
     "loses": ["test_ex1_softmax", "test_ex2_sdpa", "test_ex5_layernorm"]},
    {"name": "library_via_default_arguments",                                        # library captured as a default
     "cells": {
         "ex1_softmax": "def stable_softmax(x, dim=-1, _f=torch.softmax):\n    return _f(x, dim=dim)\n",
         "ex2_sdpa": SDPA_VIA_TORCH.replace("mask=None):", "mask=None, _f=F.scaled_dot_product_attention):")
                                   .replace("F.scaled_dot_product_attention(q, k, v,", "_f(q, k, v,"),
         "ex5_layernorm": "def layer_norm(x, gamma, beta, eps=1e-5, _f=F.layer_norm):\n"
                          "    return _f(x, x.shape[-1:], gamma, beta, eps)\n",
     },
     "loses": ["test_ex1_softmax", "test_ex2_sdpa", "test_ex5_layernorm"]},
    {"name": "library_via_aliases",                                                  # module-level names, partial
     "cells": {
         "ex1_softmax": "_sm = torch.softmax\n\n\ndef stable_softmax(x, dim=-1):\n    return _sm(x, dim=dim)\n",
         "ex2_sdpa": "from torch.nn.functional import scaled_dot_product_attention as _sdpa\n\n\n"
                     + SDPA_VIA_TORCH.replace("F.scaled_dot_product_attention(q, k, v,", "_sdpa(q, k, v,"),
         "ex5_layernorm": "import functools\n\n_ln = functools.partial(F.layer_norm)\n\n\n"
                          "def layer_norm(x, gamma, beta, eps=1e-5):\n"
                          "    return _ln(x, x.shape[-1:], gamma, beta, eps)\n",
     },
     "loses": ["test_ex1_softmax", "test_ex2_sdpa", "test_ex5_layernorm"]},
    {"name": "sdpa_scale_by_dv",                                                       # d_v instead of d_k
     "cells": {"ex2_sdpa": [("d_k = q.shape[-1]", "d_k = v.shape[-1]")]},
     "loses": ["test_ex2_sdpa"]},
]

# Issue 11 audit: wrong answers that earned full marks before the contracts were stated and checked.
# One mistake per exercise and per submission, as above.
VARIANTS += [
    {"name": "in_place_and_upcast",
     "cells": {
         # x -= m subtracts the max from the caller's tensor
         "ex1_softmax": [("    e = torch.exp(x - m)\n", "    x -= m\n    e = torch.exp(x)\n")],
         # x -= mu centres the caller's tensor in place
         "ex5_layernorm": [("    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)\n"
                            "    return gamma * (x - mu) / torch.sqrt(var + eps) + beta\n",
                            "    x -= mu\n"
                            "    var = (x ** 2).mean(dim=-1, keepdim=True)\n"
                            "    return gamma * x / torch.sqrt(var + eps) + beta\n")],
     },
     "loses": ["test_ex1_softmax", "test_ex5_layernorm"]},
    {"name": "half_precision_slips",
     "cells": {
         # computes half-precision inputs in float32 "for stability" and returns float32
         "ex1_softmax": [("    m = x.amax(dim=dim, keepdim=True)\n",
                          "    if x.dtype in (torch.float16, torch.bfloat16):\n"
                          "        x = x.float()\n"
                          "    m = x.amax(dim=dim, keepdim=True)\n")],
         # additive mask built with torch.where on Python floats: a float32 tensor, wrong dtype for half inputs
         "ex2_sdpa": [('        scores = scores.masked_fill(~mask, float("-inf"))\n',
                       '        scores = scores + torch.where(mask, 0.0, float("-inf"))\n')],
         # float32 gamma/beta with a bfloat16/float16 x promote the result to float32
         "ex5_layernorm": [("    gamma, beta = gamma.to(x.dtype), beta.to(x.dtype)\n", "")],
     },
     "loses": ["test_ex1_softmax", "test_ex2_sdpa", "test_ex5_layernorm"]},
    {"name": "fused_and_kernel_routes", "alone": True,  # flagged for review: zeroes every cell
     "cells": {
         # softmax through log-sum-exp: stable, but the library does the max trick
         "ex1_softmax": "def stable_softmax(x, dim=-1):\n    return torch.exp(x - torch.logsumexp(x, dim=dim, keepdim=True))\n",
         # the math kernel of F.scaled_dot_product_attention returns (output, weights) itself
         "ex2_sdpa": "def scaled_dot_product_attention(q, k, v, mask=None):\n"
                     "    out, w = torch.ops.aten._scaled_dot_product_attention_math(q, k, v, mask)\n"
                     "    return out, w\n",
         # variance with the one-pass formula E[x^2] - E[x]^2: cancellation when |mean| >> std
         "ex5_layernorm": [("var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)",
                            "var = (x ** 2).mean(dim=-1, keepdim=True) - mu ** 2")],
     },
     "loses": ["test_ex1_softmax", "test_ex2_sdpa", "test_ex5_layernorm"]},
    {"name": "aten_kernels", "alone": True,  # flagged for review: zeroes every cell
     "cells": {
         "ex1_softmax": "def stable_softmax(x, dim=-1):\n    return torch.ops.aten._softmax(x, dim, False)\n",
         # GroupNorm with one group over the d features is LayerNorm without the affine part
         "ex5_layernorm": "def layer_norm(x, gamma, beta, eps=1e-5):\n"
                          "    d = x.shape[-1]\n"
                          "    y = F.group_norm(x.reshape(-1, d), 1, None, None, eps).reshape(x.shape)\n"
                          "    return gamma * y + beta\n",
     },
     "loses": ["test_ex1_softmax", "test_ex5_layernorm"]},
    {"name": "layernorm_aten_kernel", "alone": True,  # flagged for review: zeroes every cell
     "cells": {"ex5_layernorm": "def layer_norm(x, gamma, beta, eps=1e-5):\n"
                                "    return torch.ops.aten.native_layer_norm(x, [x.shape[-1]], gamma, beta, eps)[0]\n"},
     "loses": ["test_ex5_layernorm"]},
]

# Record protocol (hidden tests record, the grade is decided outside the kernel): a mistake only the hidden
# records see (the visible tests use float64 inputs).
VARIANTS += [
    {"name": "sdpa_half_precision_weights_in_float32",
     "cells": {
         # "softmax in float32 for stability": the output is cast back, the weights are handed back in float32
         "ex2_sdpa": [("    weights = torch.softmax(scores, dim=-1)\n    return weights @ v, weights\n",
                       "    if q.dtype in (torch.float16, torch.bfloat16):\n"
                       "        weights = torch.softmax(scores.float(), dim=-1)\n"
                       "        return (weights @ v.float()).to(q.dtype), weights\n"
                       "    weights = torch.softmax(scores, dim=-1)\n    return weights @ v, weights\n")],
     },
     "loses": ["test_ex2_sdpa"]},
]
