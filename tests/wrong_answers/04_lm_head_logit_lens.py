"""Plausible wrong answers for 04_lm_head_logit_lens: each must lose the points of the test cells it names."""

VARIANTS = [
    # Exercise 1: next-token logits from the last hidden state
    {"name": "logits_ln_f_twice",                   # does not know last_hidden_state is already normalised
     "cells": {"ex1_logits": [("h_last = h[:, -1, :]", "h_last = model.transformer.ln_f(h[:, -1, :])")]},
     "loses": ["test_ex1_logits"]},
    {"name": "logits_call_lm_head",                 # right numbers, but uses the head instead of E^T
     "cells": {"ex1_logits": [("return h_last @ model.transformer.wte.weight.T", "return model.lm_head(h_last)")]},
     "loses": ["test_ex1_logits"]},
    {"name": "logits_linear_forward_on_lm_head",     # the head again, through nn.Linear.forward instead of the instance
     "cells": {"ex1_logits": [("return h_last @ model.transformer.wte.weight.T",
                               "return torch.nn.Linear.forward(model.lm_head, h_last)")]},
     "loses": ["test_ex1_logits"]},
    # Exercise 2: softmax by hand
    {"name": "softmax_no_max_shift",                # overflows to inf/nan on large logits
     "cells": {"ex2_softmax": [("e = torch.exp(logits - m)", "e = torch.exp(logits)")]},
     "loses": ["test_ex2_softmax"]},
    {"name": "softmax_sum_over_everything",         # one normaliser for the whole tensor, not per row
     "cells": {"ex2_softmax": [("return e / e.sum(dim=-1, keepdim=True)", "return e / e.sum()")]},
     "loses": ["test_ex2_softmax"]},
    {"name": "softmax_library_call",                # calls the library instead of computing it
     "cells": {"ex2_softmax": [("return e / e.sum(dim=-1, keepdim=True)", "return torch.softmax(logits, dim=-1)")]},
     "loses": ["test_ex2_softmax"]},
    {"name": "softmax_library_via_module_alias",    # hides the library call behind a module-level name
     "cells": {"ex2_softmax": "_lib_softmax = torch.softmax\n\n\n"
                              "def softmax(logits):\n"
                              "    return _lib_softmax(logits, dim=-1)\n"},
     "loses": ["test_ex2_softmax"]},
    {"name": "softmax_private_op_default_arg",      # torch._softmax captured as a default argument
     "cells": {"ex2_softmax": "def softmax(logits, _f=torch._softmax):\n"
                              "    return _f(logits, -1, False)\n"},
     "loses": ["test_ex2_softmax"]},
    # Exercise 3: the logit lens
    {"name": "lens_without_ln_f",                   # the seed's literal recipe h_l @ E^T
     "cells": {"ex3_logit_lens": [("        if layer < n_blocks:                       # hidden_states[-1] already went through ln_f\n"
                                   "            h = model.transformer.ln_f(h)\n", "")]},
     "loses": ["test_ex3_logit_lens"]},
    {"name": "lens_ln_f_on_every_row",              # also normalises hidden_states[-1] a second time
     "cells": {"ex3_logit_lens": [("if layer < n_blocks:", "if True:")]},
     "loses": ["test_ex3_logit_lens"]},
    {"name": "lens_skips_embeddings",               # returns L rows, forgetting hidden_states[0]
     "cells": {"ex3_logit_lens": [("for layer, h in enumerate(hidden):", "for layer, h in enumerate(hidden[1:], start=1):")]},
     "loses": ["test_ex3_logit_lens"]},
]

# Issue 11 audit: wrong answers that earned full marks before the contracts were stated and checked
VARIANTS += [
    {   # float64 "for accuracy": float64 logits from a float32 model, float64 from a bfloat16 one
        "name": "logits_in_float64",
        "cells": {"ex1_logits": [("return h_last @ model.transformer.wte.weight.T",
                                  "return h_last.double() @ model.transformer.wte.weight.double().T")]},
        "loses": ["test_ex1_logits"],
    },
    {   # logits -= m shifts the caller's tensor (the softmax itself is right)
        "name": "softmax_subtracts_max_in_place",
        "cells": {"ex2_softmax": [("    e = torch.exp(logits - m)\n", "    logits -= m\n    e = torch.exp(logits)\n")]},
        "loses": ["test_ex2_softmax"],
    },
    {   # half-precision logits computed in float32 and returned as float32
        "name": "softmax_upcasts_half_precision",
        "cells": {"ex2_softmax": [("    m = logits.max(dim=-1, keepdim=True).values\n",
                                   "    if logits.dtype in (torch.float16, torch.bfloat16):\n"
                                   "        logits = logits.float()\n"
                                   "    m = logits.max(dim=-1, keepdim=True).values\n")]},
        "loses": ["test_ex2_softmax"],
    },
    {   # stable, but the library's log-sum-exp does the max trick
        "name": "softmax_via_logsumexp",
        "cells": {"ex2_softmax": "def softmax(logits):\n"
                                 "    return torch.exp(logits - torch.logsumexp(logits, dim=-1, keepdim=True))\n"},
        "loses": ["test_ex2_softmax"],
    },
    {   # the library softmax through its ATen kernel
        "name": "softmax_via_aten_kernel", "alone": True,  # flagged for review: zeroes every cell
        "cells": {"ex2_softmax": "def softmax(logits):\n"
                                 "    return torch.ops.aten._softmax(logits, -1, False)\n"},
        "loses": ["test_ex2_softmax"],
    },
    {   # a NumPy array "for plotting" instead of the tensor the docstring names
        "name": "lens_returns_numpy",
        "cells": {"ex3_logit_lens": [("    return torch.stack(rows)\n", "    return torch.stack(rows).detach().numpy()\n")]},
        "loses": ["test_ex3_logit_lens"],
    },
    {   # every row cast to float32: right for a float32 model, float32 lens for a bfloat16 one
        "name": "lens_rows_cast_to_float32",
        "cells": {"ex3_logit_lens": [("rows.append(model.lm_head(h)[0])", "rows.append(model.lm_head(h)[0].float())")]},
        "loses": ["test_ex3_logit_lens"],
    },
]

# Record protocol (hidden tests record, the grade is decided outside the kernel): a mistake only the hidden
# records see (the visible tests use the float32 chapter model).
VARIANTS += [
    {   # float32 "for accuracy": right for a float32 model, float32 logits from a bfloat16 one
        "name": "logits_upcast_to_float32",
        "cells": {"ex1_logits": [("return h_last @ model.transformer.wte.weight.T",
                                  "return h_last.float() @ model.transformer.wte.weight.float().T")]},
        "loses": ["test_ex1_logits"],
    },
]
