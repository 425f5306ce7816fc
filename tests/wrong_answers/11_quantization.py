"""Plausible wrong answers for 11_quantization (see CONTRIBUTING.md, "Wrong answers")."""

_SYM_VISIBLE_ONLY = '''def quantize_symmetric(w, n_bits, alpha=None):
    # only the book's INT4 / INT8 cases: levels hard-coded, no n_bits check
    L = 7 if n_bits == 4 else 127
    if alpha is None:
        alpha = float(w.abs().max())
    delta = float(alpha) / L if alpha > 0 else 1.0
    q = torch.clamp(torch.round(w.float() / delta), -L, L).to(torch.int8)
    return q, delta


def dequantize_symmetric(q, delta):
    return q.float() * delta
'''

_NF4_VIA_BNB = '''def nf4_quantize(x, blocksize=64):
    # calls the library instead of writing the quantizer
    packed, state = bnb.functional.quantize_4bit(x, blocksize=blocksize, quant_type="nf4")
    return packed.reshape(-1), state.absmax
'''

_Q4_1_FP16_MATH = '''def decode_q4_1_block(block):
    # computes d * q + m in float16, then converts
    b = np.asarray(block, dtype=np.uint8)
    d = b[0:2].view(np.float16)[0]
    m = b[2:4].view(np.float16)[0]
    qs = b[4:20]
    q = np.concatenate([qs & 0x0F, qs >> 4]).astype(np.float16)
    return (d * q + m).astype(np.float32)
'''

_Q4_1_VIA_GGUF = '''def decode_q4_1_block(block):
    import gguf
    return gguf.quants.dequantize(np.asarray(block, dtype=np.uint8), gguf.GGMLQuantizationType.Q4_1).reshape(-1)
'''

_SWB_PER_MODULE_PARAMS = '''def step_weight_bytes(m):
    # written from the statement: each Linear's own parameters (weight, bias), then the 4-bit scales
    total = 0
    for name, mod in m.named_modules():
        if isinstance(mod, nn.Linear):
            total += sum(p.numel() * p.element_size() for p in mod.parameters(recurse=False))
            st = getattr(mod.weight, "quant_state", None)
            if st is not None:
                extra = [st.absmax] + ([st.state2.absmax, st.state2.code] if st.nested else [])
                total += sum(t.numel() * t.element_size() for t in extra)
    return int(total)
'''

_SWB_ALL_PARAMETERS = '''def step_weight_bytes(m):
    # what get_memory_footprint() counts for the parameters: the embedding included, the 4-bit scales left out
    return int(sum(p.numel() * p.element_size() for p in m.parameters()))
'''

VARIANTS = [
    # the nearest value by distance (ties -> lower index, torch.argmin's first minimum): right on random
    # data, but the float32 distances send some exact midpoints up; the docstring states the midpoint rule
    {"name": "nf4_argmin_distance",
     "cells": {"ex3_nf4": [("    mid = (NF4_CODE[1:] + NF4_CODE[:-1]) / 2\n"
                            "    codes = (s[:, None] > mid[None, :]).sum(dim=1).to(torch.uint8)   # number of midpoints strictly below s",
                            "    codes = (s[:, None] - NF4_CODE[None, :]).abs().argmin(dim=1).to(torch.uint8)")]},
     "loses": ["test_ex3_nf4"]},
    # Exercise 1: symmetric quantization
    {"name": "sym_floor_instead_of_round",
     "cells": {"ex1_symmetric": [("torch.round(w.float() / delta)", "torch.floor(w.float() / delta)")]},
     "loses": ["test_ex1_symmetric"]},
    {"name": "sym_levels_2_pow_n_minus_1",           # 2^(n-1) levels instead of 2^(n-1) - 1
     "cells": {"ex1_symmetric": [("L = 2 ** (n_bits - 1) - 1", "L = 2 ** (n_bits - 1)")]},
     "loses": ["test_ex1_symmetric"]},
    {"name": "sym_only_visible_bit_widths",           # passes the visible test (4 and 8 bits only)
     "cells": {"ex1_symmetric": _SYM_VISIBLE_ONLY},
     "loses": ["test_ex1_symmetric"]},
    {"name": "sym_dequantize_float64",                # right values, wrong dtype (the contract says float32)
     "cells": {"ex1_symmetric": [("return q.float() * delta", "return q.double() * delta")]},
     "loses": ["test_ex1_symmetric"]},
    # Exercise 2: block-wise absmax
    {"name": "blockwise_absmax_of_whole_tensor",
     "cells": {"ex2_blockwise": [("absmax = blocks.abs().max(dim=1).values",
                                  "absmax = blocks.abs().max().expand(blocks.shape[0]).clone()")]},
     "loses": ["test_ex2_blockwise"]},
    {"name": "blockwise_no_divisibility_check",       # silently drops/reshapes: no ValueError
     "cells": {"ex2_blockwise": [("blocksize < 1 or x.numel() % blocksize != 0", "blocksize < 1")]},
     "loses": ["test_ex2_blockwise"]},
    {"name": "blockwise_half_precision_math",         # no .float(): absmax (and the scaling) in the input's dtype
     "cells": {"ex2_blockwise": [("blocks = x.reshape(-1, blocksize).float()", "blocks = x.reshape(-1, blocksize)")]},
     "loses": ["test_ex2_blockwise"]},
    {"name": "blockwise_epsilon_in_scale",            # L / (absmax + 1e-8): no zero test, but a tiny absmax is rescaled wrong
     "cells": {"ex2_blockwise": [("scale = torch.where(absmax > 0, L / absmax, torch.zeros_like(absmax))",
                                  "scale = L / (absmax + 1e-8)")]},
     "loses": ["test_ex2_blockwise"]},
    # Exercise 3: NF4
    {"name": "nf4_low_nibble_first",
     "cells": {"ex3_nf4": [("packed = (codes[0::2] << 4) | codes[1::2]", "packed = codes[0::2] | (codes[1::2] << 4)")]},
     "loses": ["test_ex3_nf4"]},
    {"name": "nf4_ties_to_upper_code",
     "cells": {"ex3_nf4": [("(s[:, None] > mid[None, :])", "(s[:, None] >= mid[None, :])")]},
     "loses": ["test_ex3_nf4"]},
    {"name": "nf4_absmax_of_whole_tensor",
     "cells": {"ex3_nf4": [("absmax = blocks.abs().max(dim=1).values",
                            "absmax = blocks.abs().max().expand(blocks.shape[0]).clone()")]},
     "loses": ["test_ex3_nf4"]},
    {"name": "nf4_zero_block_gets_absmax_1e-38",      # returns the clamped absmax
     "cells": {"ex3_nf4": [("absmax = blocks.abs().max(dim=1).values", "absmax = blocks.abs().max(dim=1).values.clamp(min=1e-38)")]},
     "loses": ["test_ex3_nf4"]},
    {"name": "nf4_scales_input_in_place",             # right bytes, but a float32 x is overwritten by mul_
     "cells": {"ex3_nf4": [("torch.clamp(blocks * (1.0 / absmax.clamp(min=1e-38))[:, None], -1, 1)",
                            "torch.clamp(blocks.mul_((1.0 / absmax.clamp(min=1e-38))[:, None]), -1, 1)")]},
     "loses": ["test_ex3_nf4"]},
    {"name": "nf4_calls_bitsandbytes",
     "cells": {"ex3_nf4": _NF4_VIA_BNB},
     "loses": ["test_ex3_nf4"]},
    # Exercise 4: GGUF Q4_1
    {"name": "q4_1_nibbles_swapped",
     "cells": {"ex4_q4_1": [("np.concatenate([qs & 0x0F, qs >> 4])", "np.concatenate([qs >> 4, qs & 0x0F])")]},
     "loses": ["test_ex4_q4_1"]},
    {"name": "q4_1_interleaved_nibbles",              # bitsandbytes-style order: element 2j, 2j+1 in byte j
     "cells": {"ex4_q4_1": [("np.concatenate([qs & 0x0F, qs >> 4])", "np.stack([qs & 0x0F, qs >> 4], axis=1).reshape(-1)")]},
     "loses": ["test_ex4_q4_1"]},
    {"name": "q4_1_d_and_m_swapped",
     "cells": {"ex4_q4_1": [("d = b[0:2].view(np.float16)[0].astype(np.float32)\n    m = b[2:4].view(np.float16)[0].astype(np.float32)",
                             "m = b[0:2].view(np.float16)[0].astype(np.float32)\n    d = b[2:4].view(np.float16)[0].astype(np.float32)")]},
     "loses": ["test_ex4_q4_1"]},
    {"name": "q4_1_float16_arithmetic",
     "cells": {"ex4_q4_1": _Q4_1_FP16_MATH},
     "loses": ["test_ex4_q4_1"]},
    {"name": "q4_1_calls_gguf",
     "cells": {"ex4_q4_1": _Q4_1_VIA_GGUF},
     "loses": ["test_ex4_q4_1"]},
]

VARIANTS += [
    # Exercise 1: how halves round is no longer graded (issue 49): the school rule is an honest answer
    {"name": "honest_sym_round_half_away_from_zero",  # the school rule: 2.5 -> 3
     "cells": {"ex1_symmetric": [("torch.round(w.float() / delta)",
                                  "(torch.sign(w.float() / delta) * torch.floor((w.float() / delta).abs() + 0.5))")]},
     "loses": []},
    # issue 40: the last-bit rounding minutiae are no longer graded; these two are honest alternatives now
    {"name": "honest_sym_multiply_by_L_over_alpha",   # w * (L / alpha) instead of w / delta
     "cells": {"ex1_symmetric": [("torch.round(w.float() / delta)", "torch.round(w.float() * (L / float(alpha) if alpha > 0 else 1.0))")]},
     "loses": []},
    {"name": "honest_sym_16bit_arithmetic",           # divides in the input's dtype, converts at the end
     "cells": {"ex1_symmetric": [("torch.round(w.float() / delta)", "torch.round(w / delta).float()")]},
     "loses": []},
    {"name": "sym_delta_eps_when_absmax_zero",        # guards the division with an epsilon instead of delta = 1
     "cells": {"ex1_symmetric": [("delta = float(alpha) / L if alpha > 0 else 1.0", "delta = max(float(alpha), 1e-8) / L")]},
     "loses": ["test_ex1_symmetric"]},
    {"name": "sym_divides_input_in_place",            # w.float() is w itself for a float32 w
     "cells": {"ex1_symmetric": [("torch.round(w.float() / delta)", "torch.round(w.float().div_(delta))")]},
     "loses": ["test_ex1_symmetric"]},
    # Exercise 2
    {"name": "honest_blockwise_round_half_away_from_zero",   # not graded either (issue 49)
     "cells": {"ex2_blockwise": [("q = torch.round(blocks * scale[:, None]).to(torch.int8)",
                                  "v = blocks * scale[:, None]\n    q = (torch.sign(v) * torch.floor(v.abs() + 0.5)).to(torch.int8)")]},
     "loses": []},
    {"name": "blockwise_returns_clamped_absmax",      # a zero block reports absmax 1e-12, not 0
     "cells": {"ex2_blockwise": [("absmax = blocks.abs().max(dim=1).values", "absmax = blocks.abs().max(dim=1).values.clamp(min=1e-12)")]},
     "loses": ["test_ex2_blockwise"]},
    # Exercise 3
    {"name": "nf4_divide_by_absmax",                  # x / absmax: the text insists on x * (1 / absmax)
     "cells": {"ex3_nf4": [("blocks * (1.0 / absmax.clamp(min=1e-38))[:, None]", "blocks / absmax.clamp(min=1e-38)[:, None]")]},
     "loses": ["test_ex3_nf4"]},
    {"name": "nf4_no_even_check",                     # an odd blocksize that divides n is accepted
     "cells": {"ex3_nf4": [("blocksize < 2 or blocksize % 2 or n % blocksize", "blocksize < 2 or n % blocksize")]},
     "loses": ["test_ex3_nf4"]},
    {"name": "nf4_no_minimum_blocksize",              # blocksize 1 or -2 slips through the checks
     "cells": {"ex3_nf4": [("blocksize < 2 or blocksize % 2 or n % blocksize", "blocksize == 0 or n % blocksize or n % 2")]},
     "loses": ["test_ex3_nf4"]},
    {"name": "nf4_packed_shape_like_bitsandbytes",    # (n // 2, 1), as bitsandbytes returns it
     "cells": {"ex3_nf4": [("return packed, absmax", "return packed.reshape(-1, 1), absmax")]},
     "loses": ["test_ex3_nf4"]},
    {"name": "nf4_16bit_scaling",                     # absmax in float32, but s = x * (1 / absmax) in the input's dtype
     "cells": {"ex3_nf4": [("s = torch.clamp(blocks * (1.0 / absmax.clamp(min=1e-38))[:, None], -1, 1).reshape(-1)",
                            "s = torch.clamp(x.reshape(-1, blocksize) * (1.0 / absmax.clamp(min=1e-38))[:, None].to(x.dtype), -1, 1).reshape(-1).float()")]},
     "loses": ["test_ex3_nf4"]},
    # Exercise 5: the bytes a decoding step reads
    {"name": "swb_all_parameters",                    # get_memory_footprint's sum: embeddings counted, scales missed
     "cells": {"ex5_step_bytes": _SWB_ALL_PARAMETERS},
     "loses": ["test_ex5_step_bytes"]},
    {"name": "swb_forgets_4bit_scales",               # the packed codes only: what the footprint counts for a 4-bit layer
     "cells": {"ex5_step_bytes": [("        if qs is not None:\n", "        if False:\n")]},
     "loses": ["test_ex5_step_bytes"]},
    {"name": "swb_counts_embeddings",                 # an embedding lookup read as a whole-matrix read (a tied one twice)
     "cells": {"ex5_step_bytes": [("        if not isinstance(mod, nn.Linear):\n            continue\n",
                                   "        if isinstance(mod, nn.Embedding):\n            total += mod.weight.numel() * mod.weight.element_size()\n"
                                   "        if not isinstance(mod, nn.Linear):\n            continue\n")]},
     "loses": ["test_ex5_step_bytes"]},
    {"name": "swb_four_bytes_per_value",              # every stored value taken as a float32
     "cells": {"ex5_step_bytes": [("total += mod.weight.numel() * mod.weight.element_size()", "total += mod.weight.numel() * 4")]},
     "loses": ["test_ex5_step_bytes"]},
    {"name": "swb_forgets_bias",
     "cells": {"ex5_step_bytes": [("        if mod.bias is not None:\n", "        if False:\n")]},
     "loses": ["test_ex5_step_bytes"]},
    {"name": "swb_double_quant_first_level_only",     # the uint8 absmax, but not the second level's float32 scales and code
     "cells": {"ex5_step_bytes": [("            if qs.nested:\n", "            if False:\n")]},
     "loses": ["test_ex5_step_bytes"]},
    {"name": "swb_absmax_always_float32",             # absmax counted at 4 bytes even when double quantization stores it in 8 bits
     "cells": {"ex5_step_bytes": [("total += qs.absmax.numel() * qs.absmax.element_size()", "total += qs.absmax.numel() * 4")]},
     "loses": ["test_ex5_step_bytes"]},
    {"name": "swb_returns_mib",                       # MiB as a float instead of bytes as an int
     "cells": {"ex5_step_bytes": [("return int(total)", "return total / 2 ** 20")]},
     "loses": ["test_ex5_step_bytes"]},
    {"name": "honest_swb_per_module_parameters",      # written from the statement: own parameters of each Linear, then the scales
     "cells": {"ex5_step_bytes": _SWB_PER_MODULE_PARAMS},
     "loses": []},
]
