"""Plausible wrong answers for 07_mixture_of_experts (see CONTRIBUTING.md, "Wrong answers")."""

_DENSE_MOE = '''def moe_forward(x, topk_idx, gates, experts):
    # dense: every expert runs on every token, unused experts get gate 0 (right values, no sparsity)
    T, E = x.shape[0], len(experts)
    dense_gates = torch.zeros(T, E, dtype=x.dtype).scatter(1, topk_idx, gates.to(x.dtype))
    outs = torch.stack([expert(x) for expert in experts], dim=1)      # (T, E, d)
    return (dense_gates[..., None] * outs).sum(dim=1)
'''

_PARAMS_VIA_MODEL = '''def moe_param_counts(config):
    # builds the model on the meta device and counts (right numbers, but not the formula the exercise asks for)
    from transformers import MixtralConfig
    from transformers.models.mixtral.modeling_mixtral import MixtralForCausalLM
    cfg = config if isinstance(config, MixtralConfig) else MixtralConfig(**vars(config))
    with torch.device("meta"):
        model = MixtralForCausalLM(cfg)
    total = sum(p.numel() for p in model.parameters())
    experts = sum(p.numel() for n, p in model.named_parameters() if ".experts." in n)
    return total, total - experts + experts * cfg.num_experts_per_tok // cfg.num_local_experts
'''

_PARAMS_VIA_DECODER_LAYER = '''def moe_param_counts(config):
    # one decoder layer on the meta device, times the number of layers, plus embeddings and final norm
    from transformers import MixtralConfig
    from transformers.models.mixtral.modeling_mixtral import MixtralDecoderLayer
    cfg = config if isinstance(config, MixtralConfig) else MixtralConfig(**vars(config))
    with torch.device("meta"):
        layer = MixtralDecoderLayer(cfg, 0)
    per = sum(p.numel() for p in layer.parameters())
    ex = sum(p.numel() for n, p in layer.named_parameters() if "experts" in n)
    V, d, L = cfg.vocab_size, cfg.hidden_size, cfg.num_hidden_layers
    shared = V * d * (1 if cfg.tie_word_embeddings else 2) + d
    return L * per + shared, L * (per - ex + ex * cfg.num_experts_per_tok // cfg.num_local_experts) + shared
'''

VARIANTS = [
    # Exercise 1: routing
    {"name": "route_gates_not_renormalised",
     "cells": {"ex1_route_topk": [("gates = top_p / top_p.sum(dim=-1, keepdim=True)", "gates = top_p")]},
     "loses": ["test_ex1_route_topk"]},
    {"name": "route_softmax_over_tokens",
     "cells": {"ex1_route_topk": [("torch.softmax((x @ W_g.T).float(), dim=-1)", "torch.softmax((x @ W_g.T).float(), dim=0)")]},
     "loses": ["test_ex1_route_topk"]},
    # Exercise 2: load
    {"name": "load_bincount_without_minlength",      # passes the visible test, drops trailing idle experts
     "cells": {"ex2_expert_load": [("torch.bincount(topk_idx.reshape(-1), minlength=num_experts)",
                                    "torch.bincount(topk_idx.reshape(-1))")]},
     "loses": ["test_ex2_expert_load"]},
    {"name": "load_counts_first_choice_only",
     "cells": {"ex2_expert_load": [("topk_idx.reshape(-1)", "topk_idx[:, 0]")]},
     "loses": ["test_ex2_expert_load"]},
    # Exercise 3: balance losses
    {"name": "book_loss_mean_instead_of_sum",
     "cells": {"ex3_balance_losses": [("((load.float() / T - 1.0 / E) ** 2).sum()", "((load.float() / T - 1.0 / E) ** 2).mean()")]},
     "loses": ["test_ex3a_book_balance"]},
    {"name": "switch_loss_without_factor_E",
     "cells": {"ex3_balance_losses": [("return E * (f * P).sum()", "return (f * P).sum()")]},
     "loses": ["test_ex3b_switch_aux"]},
    {"name": "switch_loss_soft_fractions",
     "cells": {"ex3_balance_losses": [("f = F.one_hot(topk_idx, num_classes=E).sum(dim=(0, 1)).to(probs.dtype) / T",
                                       "f = probs.mean(dim=0)")]},
     "loses": ["test_ex3b_switch_aux"]},
    # Exercise 4: sparse forward pass
    {"name": "moe_overwrites_instead_of_adding",
     "cells": {"ex4_moe_forward": [("y = y.index_add(0, token_rows, out)", "y[token_rows] = out")]},
     "loses": ["test_ex4_moe_forward"]},
    {"name": "moe_dense_all_experts_on_all_tokens",
     "cells": {"ex4_moe_forward": _DENSE_MOE},
     "loses": ["test_ex4_moe_forward"]},
    {"name": "moe_forgets_gates",
     "cells": {"ex4_moe_forward": [("out = expert(x[token_rows]) * gates[token_rows, slot, None].to(x.dtype)",
                                    "out = expert(x[token_rows])")]},
     "loses": ["test_ex4_moe_forward"]},
    # Exercise 5: parameter counts
    {"name": "params_active_is_book_k_times_P",      # the book's formula taken for the whole model
     "cells": {"ex5_param_counts": [("int(shared + L * k * expert)", "int(L * k * expert)")]},
     "loses": ["test_ex5_param_counts"]},
    {"name": "params_ignore_grouped_query_attention",
     "cells": {"ex5_param_counts": [("2 * d * config.num_key_value_heads * hd", "2 * d * config.num_attention_heads * hd")]},
     "loses": ["test_ex5_param_counts"]},
    {"name": "params_via_meta_model",
     "cells": {"ex5_param_counts": _PARAMS_VIA_MODEL},
     "loses": ["test_ex5_param_counts"]},
    {"name": "params_via_meta_decoder_layer",
     "cells": {"ex5_param_counts": _PARAMS_VIA_DECODER_LAYER},
     "loses": ["test_ex5_param_counts"]},
    {"name": "params_ignore_tied_embeddings",         # passes the visible test (Mixtral is untied)
     "cells": {"ex5_param_counts": [("(1 if config.tie_word_embeddings else 2)", "2")]},
     "loses": ["test_ex5_param_counts"]},
    {"name": "route_softmax_in_input_dtype",          # float32 tests pass; bfloat16 inputs give bfloat16 probabilities
     "cells": {"ex1_route_topk": [("probs = torch.softmax((x @ W_g.T).float(), dim=-1)",
                                   "probs = torch.softmax(x @ W_g.T, dim=-1)")]},
     "loses": ["test_ex1_route_topk"]},
    {"name": "load_int32_counts",                     # integer, right values, but not the int64 the contract names
     "cells": {"ex2_expert_load": [(".to(torch.int64)", ".to(torch.int32)")]},
     "loses": ["test_ex2_expert_load"]},
]

# Mistakes only the hidden records catch (the visible tests, all with k = 1, pass).
VARIANTS += [
    {"name": "switch_fractions_from_argmax_of_probs",  # counts each token's top-1 expert, whatever topk_idx says
     "cells": {"ex3_balance_losses": [("f = F.one_hot(topk_idx, num_classes=E).sum(dim=(0, 1)).to(probs.dtype) / T",
                                       "f = F.one_hot(probs.argmax(dim=-1), num_classes=E).to(probs.dtype).sum(dim=0) / T")]},
     "loses": ["test_ex3b_switch_aux"]},
]
