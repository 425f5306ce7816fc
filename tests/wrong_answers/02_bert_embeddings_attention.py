"""Plausible wrong answers for 02_bert_embeddings_attention: each must lose the points of the test cells it names."""

VARIANTS = [
    # Exercise 1: input embeddings
    {"name": "embeddings_without_segment",          # forgets E_seg ("segment 0 carries no information")
     "cells": {"ex1_embeddings": [("\n         + emb.token_type_embeddings.weight[token_type_ids])", ")")]},
     "loses": ["test_ex1_embeddings"]},
    {"name": "layernorm_unbiased_variance",         # torch.var divides by D-1 by default
     "cells": {"ex1_embeddings": [("var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)",
                                   "var = x.var(dim=-1, keepdim=True)")]},
     "loses": ["test_ex1_embeddings"]},
    {"name": "layernorm_hardcoded_eps",             # copies BERT's 1e-12 instead of reading the module's eps
     "cells": {"ex1_embeddings": [("torch.sqrt(var + ln.eps)", "torch.sqrt(var + 1e-12)")]},
     "loses": ["test_ex1_embeddings"]},
    {"name": "layernorm_library_call",              # right numbers, but F.layer_norm instead of the formula
     "cells": {"ex1_embeddings": [("    mu = x.mean(dim=-1, keepdim=True)\n"
                                   "    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)\n"
                                   "    return ln.weight * (x - mu) / torch.sqrt(var + ln.eps) + ln.bias\n",
                                   "    return torch.nn.functional.layer_norm(x, (x.shape[-1],), ln.weight, ln.bias, ln.eps)\n")]},
     "loses": ["test_ex1_embeddings"]},
    # Exercise 2: PCA
    {"name": "pca_without_centering",
     "cells": {"ex2_pca": [("Xc = X - X.mean(axis=0)", "Xc = X")]},
     "loses": ["test_ex2_pca"]},
    {"name": "pca_eigh_smallest_components",        # np.linalg.eigh sorts eigenvalues in ascending order
     "cells": {"ex2_pca": (
         "def pca_2d(X, k=2):\n"
         "    X = np.asarray(X, dtype=np.float64)\n"
         "    Xc = X - X.mean(axis=0)\n"
         "    evals, evecs = np.linalg.eigh(Xc.T @ Xc)\n"
         "    scores = Xc @ evecs[:, :k]\n"
         "    ratio = evals[:k] / evals.sum()\n"
         "    return scores, ratio\n")},
     "loses": ["test_ex2_pca"]},
    {"name": "pca_calls_sklearn",                   # right numbers, but scikit-learn's PCA instead of the SVD
     "cells": {"ex2_pca": (
         "from sklearn.decomposition import PCA as _SkPCA\n\n\n"
         "def pca_2d(X, k=2):\n"
         "    p = _SkPCA(n_components=k, svd_solver='full')\n"
         "    scores = p.fit_transform(np.asarray(X, dtype=np.float64))\n"
         "    return scores, p.explained_variance_ratio_\n")},
     "loses": ["test_ex2_pca"]},
    # Exercise 3: one head's attention
    {"name": "attention_scaled_by_sqrt_D",          # sqrt of the model width instead of the head size
     "cells": {"ex3_head_attention": [("/ d_k ** 0.5", "/ hidden_states.shape[-1] ** 0.5")]},
     "loses": ["test_ex3_head_attention"]},
    {"name": "attention_mask_ignored",              # [PAD] keys get weight: fails the padded batch
     "cells": {"ex3_head_attention": [
         ("    if attention_mask is not None:\n"
          "        scores = scores.masked_fill(attention_mask[:, None, :] == 0, float(\"-inf\"))\n", "")]},
     "loses": ["test_ex3_head_attention"]},
    {"name": "attention_interleaved_head_features",  # head h taken as features h, h+H, h+2H, ...
     "cells": {"ex3_head_attention": [("rows = slice(head * d_k, (head + 1) * d_k)",
                                       "rows = slice(head, None, num_heads)")]},
     "loses": ["test_ex3_head_attention"]},
    {"name": "attention_module_forward_via_class",  # BertSelfAttention.forward called through the class, not the instance
     "cells": {"ex3_head_attention": (
         "def head_attention(layer, hidden_states, head, num_heads, attention_mask=None):\n"
         "    ext = None\n"
         "    if attention_mask is not None:\n"
         "        ext = torch.zeros(attention_mask.shape, dtype=hidden_states.dtype)\n"
         "        ext = ext.masked_fill(attention_mask == 0, torch.finfo(hidden_states.dtype).min)[:, None, None, :]\n"
         "    sa = layer.attention.self\n"
         "    return type(sa).forward(sa, hidden_states, attention_mask=ext)[1][:, head]\n")},
     "loses": ["test_ex3_head_attention"]},
]

# Issue 11 audit: wrong answers that earned full marks before the contracts were stated and checked
VARIANTS += [
    {   # one-pass variance E[x^2] - E[x]^2: same formula on paper, cancellation when |mean| >> std
        "name": "layernorm_one_pass_variance",
        "cells": {"ex1_embeddings": [("var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)",
                                      "var = (x ** 2).mean(dim=-1, keepdim=True) - mu ** 2")]},
        "loses": ["test_ex1_embeddings"],
    },
    {   # the library layer norm through its fused equivalent: GroupNorm with one group over the D features
        "name": "layernorm_via_group_norm",
        "cells": {"ex1_embeddings": [("    mu = x.mean(dim=-1, keepdim=True)\n"
                                      "    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)\n"
                                      "    return ln.weight * (x - mu) / torch.sqrt(var + ln.eps) + ln.bias\n",
                                      "    D = x.shape[-1]\n"
                                      "    return torch.nn.functional.group_norm(x.reshape(-1, D), 1, ln.weight, ln.bias, ln.eps).reshape(x.shape)\n")]},
        "loses": ["test_ex1_embeddings"],
    },
    {   # the library layer norm through its ATen kernel
        "name": "layernorm_via_aten_kernel", "alone": True,  # flagged for review: zeroes every cell
        "cells": {"ex1_embeddings": [("    mu = x.mean(dim=-1, keepdim=True)\n"
                                      "    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)\n"
                                      "    return ln.weight * (x - mu) / torch.sqrt(var + ln.eps) + ln.bias\n",
                                      "    return torch.ops.aten.native_layer_norm(x, [x.shape[-1]], ln.weight, ln.bias, ln.eps)[0]\n")]},
        "loses": ["test_ex1_embeddings"],
    },
    {   # normalises in float32 "for stability": a bfloat16/float16 model gets float32 vectors back
        "name": "embeddings_upcast_to_float32",
        "cells": {"ex1_embeddings": [("    if not layer_norm:\n", "    x = x.float()\n    if not layer_norm:\n")]},
        "loses": ["test_ex1_embeddings"],
    },
    {   # centres X in place: the caller's float64 array is overwritten
        "name": "pca_centres_input_in_place",
        "cells": {"ex2_pca": [("    Xc = X - X.mean(axis=0)\n", "    X -= X.mean(axis=0)\n    Xc = X\n")]},
        "loses": ["test_ex2_pca"],
    },
    {   # keeps X's dtype: a float32 X gets float32 scores and ratios (and float32 rounding)
        "name": "pca_keeps_float32",
        "cells": {"ex2_pca": [("X = np.asarray(X, dtype=np.float64)", "X = np.asarray(X)")]},
        "loses": ["test_ex2_pca"],
    },
    {   # right numbers, but torch tensors instead of the NumPy arrays the docstring names
        "name": "pca_returns_torch_tensors",
        "cells": {"ex2_pca": (
            "def pca_2d(X, k=2):\n"
            "    Xt = torch.as_tensor(np.asarray(X, dtype=np.float64))\n"
            "    Xc = Xt - Xt.mean(dim=0)\n"
            "    U, S, Vh = torch.linalg.svd(Xc, full_matrices=False)\n"
            "    return Xc @ Vh[:k].T, S[:k] ** 2 / (S ** 2).sum()\n")},
        "loses": ["test_ex2_pca"],
    },
    {   # scikit-learn's PCA by another name: TruncatedSVD of the centred rows
        "name": "pca_via_sklearn_truncated_svd",
        "cells": {"ex2_pca": (
            "from sklearn.decomposition import TruncatedSVD as _TSVD\n\n\n"
            "def pca_2d(X, k=2):\n"
            "    X = np.asarray(X, dtype=np.float64)\n"
            "    Xc = X - X.mean(axis=0)\n"
            "    p = _TSVD(n_components=k, algorithm='arpack')\n"
            "    return p.fit_transform(Xc), p.explained_variance_ratio_\n")},
        "loses": ["test_ex2_pca"],
    },
    {   # softmax in float32 "for stability": float16/bfloat16 hidden states get float32 weights back
        "name": "attention_softmax_upcast_float32",
        "cells": {"ex3_head_attention": [("return torch.softmax(scores, dim=-1)", "return torch.softmax(scores.float(), dim=-1)")]},
        "loses": ["test_ex3_head_attention"],
    },
    {   # softmax written without the max shift: exp overflows when the scores are large
        "name": "attention_softmax_no_max_shift",
        "cells": {"ex3_head_attention": [("return torch.softmax(scores, dim=-1)",
                                          "e = scores.exp()\n    return e / e.sum(dim=-1, keepdim=True)")]},
        "loses": ["test_ex3_head_attention"],
    },
    {   # the weights out of a fused attention kernel: SDPA with the identity matrix as values
        "name": "attention_via_sdpa_identity_values",
        "cells": {"ex3_head_attention": [("    scores = q @ k.transpose(-1, -2) / d_k ** 0.5                          # (B, n, n)\n"
                                          "    if attention_mask is not None:\n"
                                          "        scores = scores.masked_fill(attention_mask[:, None, :] == 0, float(\"-inf\"))\n"
                                          "    return torch.softmax(scores, dim=-1)\n",
                                          "    n = q.shape[-2]\n"
                                          "    eye = torch.eye(n, dtype=q.dtype).expand(q.shape[0], n, n)\n"
                                          "    m = None if attention_mask is None else (attention_mask[:, None, :] != 0)\n"
                                          "    return torch.nn.functional.scaled_dot_product_attention(q, k, eye, attn_mask=m)\n")]},
        "loses": ["test_ex3_head_attention"],
    },
]
