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

# Issue 17: one plausible mistake per clause the text states, each on an input where it shows.
VARIANTS += [
    # Exercise 1
    {"name": "route_softmax_by_hand_without_max_shift",   # exp(1000) = inf: nan probabilities for huge logits
     "cells": {"ex1_route_topk": [("probs = torch.softmax((x @ W_g.T).float(), dim=-1)",
                                   "logits = (x @ W_g.T).float()\n    probs = logits.exp() / logits.exp().sum(dim=-1, keepdim=True)")]},
     "loses": ["test_ex1_route_topk"]},
    {"name": "route_gates_cast_to_input_dtype",           # float32 probabilities, but gates back in bfloat16 / float16
     "cells": {"ex1_route_topk": [("gates = top_p / top_p.sum(dim=-1, keepdim=True)",
                                   "gates = (top_p / top_p.sum(dim=-1, keepdim=True)).to(x.dtype)")]},
     "loses": ["test_ex1_route_topk"]},
    {"name": "route_logits_without_transpose",            # x @ W_g: only runs when d == E, and then gives other logits
     "cells": {"ex1_route_topk": [("(x @ W_g.T)", "(x @ W_g)")]},
     "loses": ["test_ex1_route_topk"]},
    # Exercise 2
    {"name": "load_float_counts",                         # counts accumulated in a float tensor
     "cells": {"ex2_expert_load": "def expert_load(topk_idx, num_experts):\n"
                                  "    flat = topk_idx.reshape(-1)\n"
                                  "    return torch.zeros(num_experts).index_add_(0, flat, torch.ones(flat.numel()))\n"},
     "loses": ["test_ex2_expert_load"]},
    {"name": "load_unique_counts",                        # torch.unique: idle experts disappear
     "cells": {"ex2_expert_load": "def expert_load(topk_idx, num_experts):\n"
                                  "    return torch.unique(topk_idx, return_counts=True)[1]\n"},
     "loses": ["test_ex2_expert_load"]},
    # Exercise 3
    {"name": "book_loss_T_from_the_load",                 # T taken as load.sum(): the same for hard top-1 loads only
     "cells": {"ex3_balance_losses": [("return ((load.float() / T - 1.0 / E) ** 2).sum()",
                                       "return ((load.float() / load.sum() - 1.0 / E) ** 2).sum()")]},
     "loses": ["test_ex3a_book_balance"]},
    {"name": "book_loss_through_numpy",                   # right value, but no gradient reaches a soft load
     "cells": {"ex3_balance_losses": [("return ((load.float() / T - 1.0 / E) ** 2).sum()",
                                       "l = load.detach().double().numpy()\n"
                                       "    return torch.tensor(((l / T - 1.0 / E) ** 2).sum())")]},
     "loses": ["test_ex3a_book_balance"]},
    {"name": "switch_fractions_over_k_T",                 # f_e normalised to sum to 1, not to k
     "cells": {"ex3_balance_losses": [(".to(probs.dtype) / T", ".to(probs.dtype) / (T * topk_idx.shape[1])")]},
     "loses": ["test_ex3b_switch_aux"]},
    {"name": "switch_probs_detached",
     "cells": {"ex3_balance_losses": [("P = probs.mean(dim=0)", "P = probs.detach().mean(dim=0)")]},
     "loses": ["test_ex3b_switch_aux"]},
    # Exercise 4
    {"name": "moe_gates_not_cast_to_x_dtype",             # float32 gates * bfloat16 rows: index_add refuses the mix
     "cells": {"ex4_moe_forward": [("gates[token_rows, slot, None].to(x.dtype)", "gates[token_rows, slot, None]")]},
     "loses": ["test_ex4_moe_forward"]},
    {"name": "moe_output_always_float32",                 # y = torch.zeros(T, d): float32 whatever x is
     "cells": {"ex4_moe_forward": [("y = torch.zeros_like(x)", "y = torch.zeros(x.shape)"),
                                   ("y = y.index_add(0, token_rows, out)", "y[token_rows] += out")]},
     "loses": ["test_ex4_moe_forward"]},
    # Exercise 5
    {"name": "params_active_as_float",                    # k / E of the experts: a float, not a Python int
     "cells": {"ex5_param_counts": [("int(shared + L * k * expert)", "shared + L * E * expert * (k / E)")]},
     "loses": ["test_ex5_param_counts"]},
    {"name": "params_head_dim_always_d_over_heads",        # ignores config.head_dim when it is set
     "cells": {"ex5_param_counts": [("hd = config.head_dim or d // config.num_attention_heads",
                                     "hd = d // config.num_attention_heads")]},
     "loses": ["test_ex5_param_counts"]},
    {"name": "params_forget_final_norm",
     "cells": {"ex5_param_counts": [("(1 if config.tie_word_embeddings else 2) + d", "(1 if config.tie_word_embeddings else 2)")]},
     "loses": ["test_ex5_param_counts"]},
]
VARIANTS += [
    {"name": "moe_loop_over_tokens",                      # sparse, but one expert call per (token, slot)
     "cells": {"ex4_moe_forward": "def moe_forward(x, topk_idx, gates, experts):\n"
                                  "    y = torch.zeros_like(x)\n"
                                  "    for t in range(x.shape[0]):\n"
                                  "        for j in range(topk_idx.shape[1]):\n"
                                  "            e = int(topk_idx[t, j])\n"
                                  "            y[t] += gates[t, j].to(x.dtype) * experts[e](x[t:t + 1])[0]\n"
                                  "    return y\n"},
     "loses": ["test_ex4_moe_forward"]},
    {"name": "moe_one_call_per_slot",                     # each expert called once per slot j, not once in all
     "cells": {"ex4_moe_forward": "def moe_forward(x, topk_idx, gates, experts):\n"
                                  "    y = torch.zeros_like(x)\n"
                                  "    for j in range(topk_idx.shape[1]):\n"
                                  "        for e, expert in enumerate(experts):\n"
                                  "            rows = torch.where(topk_idx[:, j] == e)[0]\n"
                                  "            if len(rows):\n"
                                  "                y = y.index_add(0, rows, expert(x[rows]) * gates[rows, j, None].to(x.dtype))\n"
                                  "    return y\n"},
     "loses": ["test_ex4_moe_forward"]},
]
