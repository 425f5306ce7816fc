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
