"""Plausible wrong answers for 05_rope: each must lose the points of the test cells it names."""

VARIANTS = [
    {   # sign error: R(-theta) instead of R(theta)
        "name": "rotate_2d_clockwise",
        "cells": {"ex1_rotate_2d": [("x1 * c - x2 * s, x1 * s + x2 * c", "x1 * c + x2 * s, -x1 * s + x2 * c")]},
        "loses": ["test_ex1_rotate_2d"],
    },
    {   # pairs (j, j + d/2) as in transformers, instead of the book's neighbouring pairs (2j, 2j+1)
        "name": "rope_rotate_half_pairs",
        "cells": {"ex2_rope_apply": [
            ("x[..., 0::2], x[..., 1::2]", "x[..., : d // 2], x[..., d // 2 :]"),
            ("out[..., 0::2]", "out[..., : d // 2]"),
            ("out[..., 1::2]", "out[..., d // 2 :]"),
        ]},
        "loses": ["test_ex2_rope_apply"],
    },
    {   # frequency exponent j/d with j = 0, 1, ... (forgets the factor 2): omega_1 = 0.1 instead of 0.01
        "name": "rope_frequency_exponent_without_2",
        "cells": {"ex2_rope_apply": [("torch.arange(0, d, 2, dtype=torch.float64", "torch.arange(0, d // 2, 1, dtype=torch.float64")]},
        "loses": ["test_ex2_rope_apply"],
    },
    {   # uses 0, 1, ..., seq-1 whatever positions are passed: passes the book example, fails elsewhere
        "name": "rope_ignores_positions",
        "cells": {"ex2_rope_apply": [
            ("pos = torch.as_tensor(positions, dtype=torch.float64, device=x.device)",
             "pos = torch.arange(x.shape[-2], dtype=torch.float64, device=x.device)"),
        ]},
        "loses": ["test_ex2_rope_apply"],
    },
    {   # lets the library do the work: correct numbers, but not the student's own rotation
        "name": "rope_calls_library",
        "cells": {"ex2_rope_apply": (
            "def rope_apply(x, positions, base=10000.0):\n"
            "    d = x.shape[-1]\n"
            "    if d % 2:\n"
            "        raise ValueError('d must be even')\n"
            "    perm = torch.cat([torch.arange(0, d, 2), torch.arange(1, d, 2)])\n"
            "    return library_rope(x[..., perm], positions, base)[..., torch.argsort(perm)]\n"
        )},
        "loses": ["test_ex2_rope_apply"],
    },
    {   # transformers' RoPE of another model family (Mistral), imported under other names, plus the permutation
        "name": "rope_calls_mistral_rope",
        "cells": {"ex2_rope_apply": (
            "from transformers import MistralConfig as _MC\n"
            "from transformers.models.mistral.modeling_mistral import MistralRotaryEmbedding as _MRE\n"
            "from transformers.models.mistral.modeling_mistral import apply_rotary_pos_emb as _arpe\n"
            "\n"
            "def rope_apply(x, positions, base=10000.0):\n"
            "    d, seq = x.shape[-1], x.shape[-2]\n"
            "    if d % 2:\n"
            "        raise ValueError('d must be even')\n"
            "    perm = torch.cat([torch.arange(0, d, 2), torch.arange(1, d, 2)])\n"
            "    cfg = _MC(hidden_size=d, num_attention_heads=1, head_dim=d,\n"
            "              rope_parameters={'rope_type': 'default', 'rope_theta': base})\n"
            "    cos, sin = _MRE(cfg)(x, torch.as_tensor(positions)[None])\n"
            "    xh = x[..., perm].reshape(-1, 1, seq, d)\n"
            "    y, _ = _arpe(xh, xh, cos.to(x.dtype), sin.to(x.dtype))\n"
            "    return y.reshape(x.shape)[..., torch.argsort(perm)]\n"
        )},
        "loses": ["test_ex2_rope_apply"],
    },
    {   # imports, inside rope_apply, the RoPE of a model family not loaded yet (a new one at every call, so
        # that no family is loaded when the hidden test switches off the loaded ones), plus the permutation
        "name": "rope_imports_unloaded_family",
        "cells": {"ex2_rope_apply": (
            "import importlib as _il\n"
            "\n"
            "_FAMILIES = ['granite', 'olmo2', 'qwen2_moe', 'olmoe', 'granitemoe', 'exaone4', 'seed_oss', 'smollm3',\n"
            "             'ministral', 'apertus', 'dots1', 'bitnet']\n"
            "_calls = [0]\n"
            "\n"
            "def rope_apply(x, positions, base=10000.0):\n"
            "    d, seq = x.shape[-1], x.shape[-2]\n"
            "    if d % 2:\n"
            "        raise ValueError('d must be even')\n"
            "    fam = _FAMILIES[_calls[0] % len(_FAMILIES)]\n"
            "    _calls[0] += 1\n"
            "    mod = _il.import_module('transformers.models.' + fam + '.modeling_' + fam)\n"
            "    cfg_cls = next(v for k, v in vars(mod).items() if k.endswith('Config') and isinstance(v, type))\n"
            "    rope_cls = next(v for k, v in vars(mod).items() if k.endswith('RotaryEmbedding') and isinstance(v, type))\n"
            "    cfg = cfg_cls(hidden_size=d, num_attention_heads=1, head_dim=d,\n"
            "                  rope_parameters={'rope_type': 'default', 'rope_theta': base})\n"
            "    perm = torch.cat([torch.arange(0, d, 2), torch.arange(1, d, 2)])\n"
            "    cos, sin = rope_cls(cfg)(x, torch.as_tensor(positions)[None])\n"
            "    xh = x[..., perm].reshape(-1, 1, seq, d)\n"
            "    y, _ = mod.apply_rotary_pos_emb(xh, xh, cos.to(x.dtype), sin.to(x.dtype))\n"
            "    return y.reshape(x.shape)[..., torch.argsort(perm)]\n"
        )},
        "loses": ["test_ex2_rope_apply"],
    },
    {   # the inverse permutation (rotate-half layout -> interleaved); identical to the right one for d = 4
        "name": "perm_inverse_direction",
        "cells": {"ex3_interleaved_to_half": (
            "def interleaved_to_half(d):\n"
            "    return torch.arange(d).reshape(2, d // 2).T.reshape(-1)\n"
        )},
        "loses": ["test_ex3_interleaved_to_half"],
    },
    {   # keeps theta's dtype: a float64 angle tensor turns float16/bfloat16/float32 x into float64
        "name": "rotate_2d_promotes_to_theta_dtype",
        "cells": {"ex1_rotate_2d": [("theta = torch.as_tensor(theta, dtype=x.dtype, device=x.device)",
                                     "theta = torch.as_tensor(theta, device=x.device)")]},
        "loses": ["test_ex1_rotate_2d"],
    },
    {   # angles in float32, result built with torch.stack: right in float32/float64, float32 for bfloat16 x
        "name": "rope_float32_angles_promote_half",
        "cells": {"ex2_rope_apply": (
            "def rope_apply(x, positions, base=10000.0):\n"
            "    d = x.shape[-1]\n"
            "    if d % 2:\n"
            "        raise ValueError('d must be even')\n"
            "    pos = torch.as_tensor(positions, dtype=torch.float32)\n"
            "    inv = base ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)\n"
            "    ang = pos[:, None] * inv\n"
            "    cos, sin = ang.cos(), ang.sin()\n"
            "    x1, x2 = x[..., 0::2], x[..., 1::2]\n"
            "    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)\n"
        )},
        "loses": ["test_ex2_rope_apply"],
    },
    {   # the permutation is right, but an odd d gets a "permutation" instead of the ValueError the contract names
        "name": "interleaved_to_half_accepts_odd_d",
        "cells": {"ex3_interleaved_to_half": [('    if d % 2:\n        raise ValueError(f"d must be even, got {d}")\n', "")]},
        "loses": ["test_ex3_interleaved_to_half"],
    },
]
