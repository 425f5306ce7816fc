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
