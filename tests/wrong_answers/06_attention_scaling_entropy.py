"""Plausible wrong answers for chapter 06 (attention scaling, temperature, entropy).

The four exercises are tested independently (each test cell builds its own inputs), so one
submission can carry one mistake per exercise and must lose the points of every exercise: five
submissions cover twenty distinct mistakes while keeping the autograde round trip short.
"""

# One mistake per exercise; each dict maps a solution cell to its wrong version.
ENTROPY = {
    "naive_plogp": "def entropy(p, dim=-1):\n    return -(p * torch.log(p)).sum(dim=dim)\n",        # nan at p = 0
    "bits": "def entropy(p, dim=-1):\n    return -torch.xlogy(p, p).sum(dim=dim) / math.log(2)\n",
    "ignores_dim": [("return -plogp.sum(dim=dim)", "return -plogp.sum(dim=-1)")],
    "eps_smoothing": "def entropy(p, dim=-1):\n    return -(p * torch.log(p + 1e-3)).sum(dim=dim)\n",
    "no_minus_sign": [("return -plogp.sum(dim=dim)", "return plogp.sum(dim=dim)")],
}
SOFTMAX = {
    "no_max_shift": [("    z = z - z.amax(dim=dim, keepdim=True)\n", "")],  # the whole line, indentation included
    "multiplies_by_tau": [("z = x / tau", "z = x * tau")],
    # right on the visible inputs, nan on rows whose logits are far below the global max
    "global_max": [("z = z - z.amax(dim=dim, keepdim=True)", "z = z - z.max()")],
    "calls_library": "def tempered_softmax(x, tau=1.0, dim=-1):\n"
                     "    if tau <= 0:\n        raise ValueError('tau must be positive')\n"
                     "    return torch.softmax(x / tau, dim=dim)\n",
    "no_tau_check": [("    if not tau > 0:\n        raise ValueError(f\"temperature must be positive, got {tau}\")\n", "")],
}
VARIANCE = {
    "divides_by_d_k": [("(raw / math.sqrt(d_k)).std()", "(raw / d_k).std()")],
    "query_equals_key": [("k = torch.randn(n_pairs, d_k, generator=generator)", "k = q")],
    "global_rng": [("q = torch.randn(n_pairs, d_k, generator=generator)", "q = torch.randn(n_pairs, d_k)"),
                   ("k = torch.randn(n_pairs, d_k, generator=generator)", "k = torch.randn(n_pairs, d_k)")],
    "returns_variance": [("rows.append([raw.std().item(), (raw / math.sqrt(d_k)).std().item()])",
                          "rows.append([raw.var().item(), (raw / math.sqrt(d_k)).var().item()])")],
    # right statistics, but not the stated protocol (hidden tests only)
    "full_score_matrix": [("raw = (q * k).sum(dim=-1)", "raw = (q[:64] @ k[:64].T).flatten()")],
}
JACOBIAN = {
    "diagonal_only": [("return torch.diag(p) - torch.outer(p, p)", "return torch.diag(p * (1 - p))")],
    "scores_not_probs": [("return torch.diag(p) - torch.outer(p, p)", "return torch.diag(z) - torch.outer(z, z)")],
    "via_autograd": "def softmax_jacobian(z):\n"
                    "    return torch.autograd.functional.jacobian(lambda t: torch.softmax(t, -1), z)\n",
    "plus_sign": [("return torch.diag(p) - torch.outer(p, p)", "return torch.diag(p) + torch.outer(p, p)")],
    # autograd one row at a time: softmax(z)[i].backward() gives row i (right values, not the closed form)
    "via_backward": "def softmax_jacobian(z):\n"
                    "    rows = []\n"
                    "    for i in range(len(z)):\n"
                    "        zz = z.detach().clone().requires_grad_(True)\n"
                    "        with torch.enable_grad():\n"
                    "            torch.softmax(zz, -1)[i].backward()\n"
                    "        rows.append(zz.grad)\n"
                    "    return torch.stack(rows)\n",
}

COMBOS = [  # (entropy, softmax, variance, jacobian)
    ("naive_plogp", "no_max_shift", "divides_by_d_k", "diagonal_only"),
    ("bits", "multiplies_by_tau", "query_equals_key", "scores_not_probs"),
    ("ignores_dim", "global_max", "global_rng", "via_autograd"),
    ("eps_smoothing", "calls_library", "returns_variance", "plus_sign"),
    ("no_minus_sign", "no_tau_check", "full_score_matrix", "via_backward"),
]

VARIANTS = [
    {"name": f"{e}-{s}-{v}-{j}",
     "cells": {"ex1_entropy": ENTROPY[e], "ex2_tempered_softmax": SOFTMAX[s],
               "ex3_score_std_table": VARIANCE[v], "ex4_softmax_jacobian": JACOBIAN[j]},
     "loses": ["test_ex1_entropy", "test_ex2_tempered_softmax", "test_ex3_score_std_table",
               "test_ex4_softmax_jacobian"]}
    for e, s, v, j in COMBOS
]

# Mistakes only the half-precision and "input unchanged" clauses catch: each graded on its own cell.
VARIANTS += [
    {   # "compute in at least float32": right for float32/float64, returns float32 for float16/bfloat16 p
        "name": "entropy_upcasts_half_precision",
        "cells": {"ex1_entropy": "def entropy(p, dim=-1):\n"
                                 "    q = p.to(torch.promote_types(p.dtype, torch.float32))\n"
                                 "    return -torch.xlogy(q, q).sum(dim=dim)\n"},
        "loses": ["test_ex1_entropy"],
    },
    {   # same upcast in the softmax: float32 out for a bfloat16 / float16 x
        "name": "softmax_upcasts_half_precision",
        "cells": {"ex2_tempered_softmax": [("z = x / tau", "z = x.to(torch.promote_types(x.dtype, torch.float32)) / tau")]},
        "loses": ["test_ex2_tempered_softmax"],
    },
    {   # in place, to save memory: the caller's logits are overwritten
        "name": "softmax_in_place",
        "cells": {"ex2_tempered_softmax": "def tempered_softmax(x, tau=1.0, dim=-1):\n"
                                          "    if not tau > 0:\n"
                                          "        raise ValueError('tau must be positive')\n"
                                          "    x.div_(tau)\n"
                                          "    x.sub_(x.amax(dim=dim, keepdim=True))\n"
                                          "    x.exp_()\n"
                                          "    return x / x.sum(dim=dim, keepdim=True)\n"},
        "loses": ["test_ex2_tempered_softmax"],
    },
    {   # the library softmax through its ATen kernel: neither torch.softmax nor F.softmax by name
        "name": "softmax_via_aten_kernel", "alone": True,  # flagged for review: zeroes every cell
        "cells": {"ex2_tempered_softmax": "def tempered_softmax(x, tau=1.0, dim=-1):\n"
                                          "    if not tau > 0:\n"
                                          "        raise ValueError('tau must be positive')\n"
                                          "    return torch.ops.aten._softmax(x / tau, dim, False)\n"},
        "loses": ["test_ex2_tempered_softmax"],
    },
]

# Mistakes only the hidden records catch (the visible tests pass).
VARIANTS += [
    {   # replaces the zeros of the caller's p by 1 to avoid log 0: right values, but p is modified in place
        "name": "entropy_overwrites_zeros_in_place",
        "cells": {"ex1_entropy": "def entropy(p, dim=-1):\n"
                                 "    p[p == 0] = 1.0\n"
                                 "    return -(p * torch.log(p)).sum(dim=dim)\n"},
        "loses": ["test_ex1_entropy"],
    },
    {   # a fresh generator from the seed of the one given: ignores the draws already taken from it
        "name": "score_table_reseeds_generator",
        "cells": {"ex3_score_std_table": [("    rows = []\n",
                                           "    rows = []\n"
                                           "    generator = torch.Generator().manual_seed(generator.initial_seed())\n")]},
        "loses": ["test_ex3_score_std_table"],
    },
]

# Issue 17: one plausible mistake per clause the text states, each on an input where it shows.
VARIANTS += [
    {   # p = exp(z) / sum exp(z) written by hand without the max shift: nan for scores like [1000, 999, 0]
        "name": "jacobian_naive_exp_softmax",
        "cells": {"ex4_softmax_jacobian": [("p = torch.softmax(z, dim=-1)", "p = torch.exp(z) / torch.exp(z).sum()")]},
        "loses": ["test_ex4_softmax_jacobian"],
    },
    {   # computes in float64 "for accuracy" and forgets to cast back: float64 J for a float32 z
        "name": "jacobian_upcasts_float32",
        "cells": {"ex4_softmax_jacobian": [("p = torch.softmax(z, dim=-1)", "p = torch.softmax(z.double(), dim=-1)")]},
        "loses": ["test_ex4_softmax_jacobian"],
    },
    {   # numpy's std (ddof=0), not torch.std's unbiased default
        "name": "score_table_numpy_std_ddof0",
        "cells": {"ex3_score_std_table": [("rows.append([raw.std().item(), (raw / math.sqrt(d_k)).std().item()])",
                                           "rows.append([float(np.std(raw.numpy())), float(np.std((raw / math.sqrt(d_k)).numpy()))])")]},
        "loses": ["test_ex3_score_std_table"],
    },
    {   # q and k in one draw of shape (2, n, d_k): other numbers than q then k
        "name": "score_table_q_and_k_in_one_draw",
        "cells": {"ex3_score_std_table": [("        q = torch.randn(n_pairs, d_k, generator=generator)\n"
                                           "        k = torch.randn(n_pairs, d_k, generator=generator)\n",
                                           "        q, k = torch.randn(2, n_pairs, d_k, generator=generator)\n")]},
        "loses": ["test_ex3_score_std_table"],
    },
    {   # the dimensions in increasing order, without repeats (not "each d_k in d_ks, in order")
        "name": "score_table_sorted_unique_d_ks",
        "cells": {"ex3_score_std_table": [("for d_k in d_ks:", "for d_k in sorted(set(d_ks)):")]},
        "loses": ["test_ex3_score_std_table"],
    },
    {   # clamps p to avoid log 0: 1e-12 is 0 in float16, so 0 * log 0 = nan there
        "name": "entropy_clamp_eps",
        "cells": {"ex1_entropy": "def entropy(p, dim=-1):\n"
                                 "    return -(p * torch.log(p.clamp_min(1e-12))).sum(dim=dim)\n"},
        "loses": ["test_ex1_entropy"],
    },
    {   # only tau == 0 rejected: a negative temperature goes through
        "name": "softmax_rejects_only_zero_tau",
        "cells": {"ex2_tempered_softmax": [("if not tau > 0:", "if tau == 0:")]},
        "loses": ["test_ex2_tempered_softmax"],
    },
    {   # only negative tau rejected: tau = 0 divides by zero
        "name": "softmax_rejects_only_negative_tau",
        "cells": {"ex2_tempered_softmax": [("if not tau > 0:", "if tau < 0:")]},
        "loses": ["test_ex2_tempered_softmax"],
    },
    {   # the max of the last dimension whatever `dim` is
        "name": "softmax_max_along_last_dim",
        "cells": {"ex2_tempered_softmax": [("z = z - z.amax(dim=dim, keepdim=True)", "z = z - z.amax(dim=-1, keepdim=True)")]},
        "loses": ["test_ex2_tempered_softmax"],
    },
]
