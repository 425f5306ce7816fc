"""Plausible wrong answers for 08_gpt2_sampling_kv_cache (see CONTRIBUTING.md, "Wrong answers")."""

_SAMPLER_GENERATE = '''def sample_generate(model, input_ids, max_new_tokens, temperature=1.0, top_k=None, top_p=None):
    # the library's loop instead of one's own: equal token for token, but not what the exercise asks
    return model.generate(input_ids, attention_mask=torch.ones_like(input_ids), do_sample=True, temperature=temperature,
                          top_k=top_k, top_p=top_p, max_new_tokens=max_new_tokens, pad_token_id=0)
'''

_CACHE_GENERATE = '''def greedy_generate_cached(model, input_ids, max_new_tokens):
    # generate() uses a cache too: same tokens on a plain GPT-2, but the loop is not written
    return model.generate(input_ids, attention_mask=torch.ones_like(input_ids), do_sample=False,
                          max_new_tokens=max_new_tokens, pad_token_id=0)
'''

_TOPK_LIBRARY = '''from transformers.generation import logits_process as _lp


class _Keep(_lp.TopKLogitsWarper):      # a subclass keeps the library's __call__ out of reach of a switch
    pass


def top_k_filter(logits, k, min_tokens_to_keep=1, filter_value=float("-inf")):
    shape = logits.shape
    out = _Keep(int(k), filter_value=filter_value, min_tokens_to_keep=min_tokens_to_keep)(None, logits.reshape(-1, shape[-1]).clone())
    return out.reshape(shape)
'''

_TOPK_DROPS_TIES = '''def top_k_filter(logits, k, min_tokens_to_keep=1, filter_value=float("-inf")):
    # keeps exactly k positions (the indices torch.topk returns): ties with the k-th value are dropped
    k_eff = min(max(int(k), min_tokens_to_keep), logits.shape[-1])
    idx = torch.topk(logits, k_eff, dim=-1).indices
    keep = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, idx, True)
    return logits.masked_fill(~keep, filter_value)
'''

_TOPP_DESC_LE = '''def top_p_filter(logits, top_p, min_tokens_to_keep=1, filter_value=float("-inf")):
    # descending cumsum, keep while cumsum <= p: drops the token that crosses p (one too few)
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    sorted_logits, order = torch.sort(logits.float(), dim=-1, descending=True)
    cum = torch.softmax(sorted_logits, dim=-1).cumsum(dim=-1)
    remove_sorted = cum > top_p
    remove_sorted[..., :min_tokens_to_keep] = False
    remove = remove_sorted.scatter(-1, order, remove_sorted)
    return logits.masked_fill(remove, filter_value)
'''

_TOPP_ONE_TOO_MANY = '''def top_p_filter(logits, top_p, min_tokens_to_keep=1, filter_value=float("-inf")):
    # descending: keeps every token up to and including the one that crosses p, plus one more
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    sorted_logits, order = torch.sort(logits.float(), dim=-1, descending=True)
    cum = torch.softmax(sorted_logits, dim=-1).cumsum(dim=-1)
    n_keep = (cum < top_p).sum(dim=-1, keepdim=True) + 2
    n_keep = n_keep.clamp(min=min_tokens_to_keep, max=logits.shape[-1])
    remove_sorted = torch.arange(logits.shape[-1]).expand_as(cum) >= n_keep
    remove = remove_sorted.scatter(-1, order, remove_sorted)
    return logits.masked_fill(remove, filter_value)
'''

_PIPELINE_TEMP_LAST = '''def process_logits(logits, temperature=1.0, top_k=None, top_p=None, min_tokens_to_keep=1):
    # filters first, temperature last (rasbt's order): the nucleus is computed at temperature 1
    out = logits
    if top_k is not None:
        out = top_k_filter(out, top_k, min_tokens_to_keep=min_tokens_to_keep)
    if top_p is not None:
        out = top_p_filter(out, top_p, min_tokens_to_keep=min_tokens_to_keep)
    return apply_temperature(out, temperature)
'''

_CACHE_FULL_INPUT = '''def greedy_generate_cached(model, input_ids, max_new_tokens):
    # passes the cache but feeds the whole sequence every step
    ids, past = input_ids, None
    for _ in range(max_new_tokens):
        with torch.no_grad():
            out = model(input_ids=ids, past_key_values=past, use_cache=True)
        past = out.past_key_values
        ids = torch.cat([ids, out.logits[:, -1, :].argmax(dim=-1, keepdim=True)], dim=-1)
    return ids
'''

_NO_CACHE = '''def greedy_generate_cached(model, input_ids, max_new_tokens):
    # right tokens, but no cache at all: recomputes the whole prefix every step
    ids = input_ids
    for _ in range(max_new_tokens):
        with torch.no_grad():
            logits = model(input_ids=ids).logits
        ids = torch.cat([ids, logits[:, -1, :].argmax(dim=-1, keepdim=True)], dim=-1)
    return ids
'''

_CACHE_POSITIONS_STUCK = '''def greedy_generate_cached(model, input_ids, max_new_tokens):
    # one token per step with the cache, but explicit position ids that never advance past the prompt
    ids, step_input, past = input_ids, input_ids, None
    L = input_ids.shape[1]
    for _ in range(max_new_tokens):
        pos = None if past is None else torch.full_like(step_input, L - 1)
        with torch.no_grad():
            out = model(input_ids=step_input, past_key_values=past, position_ids=pos, use_cache=True)
        past = out.past_key_values
        step_input = out.logits[:, -1, :].argmax(dim=-1, keepdim=True)
        ids = torch.cat([ids, step_input], dim=-1)
    return ids
'''

# Variants marked "alone" also break the pipeline exercise (it composes exercises 1-3), so each
# is graded by itself.
VARIANTS = [
    # Exercise 1: temperature
    {"name": "temperature_multiplies",
     "cells": {"ex1_temperature": [("return logits / temperature", "return logits * temperature")]},
     "loses": ["test_ex1_temperature"]},
    {"name": "temperature_no_error_for_zero",            # silently returns the logits for tau <= 0
     "cells": {"ex1_temperature": [("raise ValueError(", "return logits; (")]},
     "loses": ["test_ex1_temperature"]},
    {"name": "temperature_only_rejects_zero", "alone": True,            # passes the visible test (tau = 0) only
     "cells": {"ex1_temperature": [("if not temperature > 0:", "if temperature == 0:")]},
     "loses": ["test_ex1_temperature"]},
    {"name": "temperature_in_place", "alone": True,
     "cells": {"ex1_temperature": [("return logits / temperature", "logits /= temperature\n    return logits")]},
     "loses": ["test_ex1_temperature"]},
    # Exercise 2: top-k
    {"name": "topk_drops_ties", "cells": {"ex2_top_k": _TOPK_DROPS_TIES}, "loses": ["test_ex2_top_k"]},
    {"name": "topk_ignores_min_tokens_to_keep",          # passes the visible test (default min_tokens_to_keep)
     "cells": {"ex2_top_k": [("max(int(k), min_tokens_to_keep)", "int(k)")]},
     "loses": ["test_ex2_top_k"]},
    {"name": "topk_le_instead_of_lt", "alone": True,                    # removes the k-th value itself
     "cells": {"ex2_top_k": [("logits < kth", "logits <= kth")]},
     "loses": ["test_ex2_top_k"]},
    # Exercise 3: top-p
    {"name": "topp_descending_cumsum_le", "cells": {"ex3_top_p": _TOPP_DESC_LE}, "loses": ["test_ex3_top_p"]},
    {"name": "topp_one_token_too_many", "cells": {"ex3_top_p": _TOPP_ONE_TOO_MANY}, "loses": ["test_ex3_top_p"]},
    {"name": "topp_threshold_p_not_one_minus_p", "alone": True,
     "cells": {"ex3_top_p": [("cum <= 1 - top_p", "cum <= top_p")]},
     "loses": ["test_ex3_top_p"]},
    {"name": "topp_ignores_min_tokens_to_keep", "alone": True,          # passes the visible test
     "cells": {"ex3_top_p": [("remove_sorted[..., -min_tokens_to_keep:] = False", "remove_sorted[..., -1:] = False")]},
     "loses": ["test_ex3_top_p"]},
    {"name": "topp_accepts_any_p",
     "cells": {"ex3_top_p": [("if not 0 < top_p <= 1:", "if top_p == 0:")]},
     "loses": ["test_ex3_top_p"]},
    # Exercise 4: pipeline
    {"name": "pipeline_temperature_after_filters", "cells": {"ex4_pipeline": _PIPELINE_TEMP_LAST},
     "loses": ["test_ex4_pipeline"]},
    {"name": "pipeline_top_p_before_top_k",
     "cells": {"ex4_pipeline": [("""    if top_k is not None:
        out = top_k_filter(out, top_k, min_tokens_to_keep=min_tokens_to_keep)
    if top_p is not None:
        out = top_p_filter(out, top_p, min_tokens_to_keep=min_tokens_to_keep)""",
                                 """    if top_p is not None:
        out = top_p_filter(out, top_p, min_tokens_to_keep=min_tokens_to_keep)
    if top_k is not None:
        out = top_k_filter(out, top_k, min_tokens_to_keep=min_tokens_to_keep)""")]},
     "loses": ["test_ex4_pipeline"]},
    # Exercise 5: sampler
    {"name": "sampler_argmax",
     "cells": {"ex5_sampler": [("torch.multinomial(probs, num_samples=1)", "probs.argmax(dim=-1, keepdim=True)")]},
     "loses": ["test_ex5_sampler"]},
    {"name": "sampler_default_top_k_50",                 # copies generate's hidden default
     "cells": {"ex5_sampler": [("temperature=1.0, top_k=None, top_p=None):", "temperature=1.0, top_k=50, top_p=None):")]},
     "loses": ["test_ex5_sampler"]},
    {"name": "sampler_ignores_top_k_top_p",              # passes the visible test (temperature only)
     "cells": {"ex5_sampler": [("process_logits(logits, temperature, top_k, top_p)", "process_logits(logits, temperature)")]},
     "loses": ["test_ex5_sampler"]},
    {"name": "sampler_first_position_logits",
     "cells": {"ex5_sampler": [("logits[:, -1, :]", "logits[:, 0, :]")]},
     "loses": ["test_ex5_sampler"]},
    # Exercise 6: KV cache loop
    {"name": "sampler_ignores_temperature",              # the visible test's model is peaked enough to show it
     "cells": {"ex5_sampler": [("process_logits(logits, temperature, top_k, top_p)", "process_logits(logits, 1.0, top_k, top_p)")]},
     "loses": ["test_ex5_sampler"]},
    {"name": "sampler_calls_generate", "cells": {"ex5_sampler": _SAMPLER_GENERATE}, "loses": ["test_ex5_sampler"]},
    {"name": "cache_calls_generate", "cells": {"ex6_cache": _CACHE_GENERATE}, "loses": ["test_ex6_cache"]},
    {"name": "topk_through_a_library_subclass",         # process_logits calls it: the pipeline loses too
     "cells": {"ex2_top_k": _TOPK_LIBRARY}, "loses": ["test_ex2_top_k", "test_ex4_pipeline"]},
    {"name": "cache_feeds_whole_sequence", "cells": {"ex6_cache": _CACHE_FULL_INPUT}, "loses": ["test_ex6_cache"]},
    {"name": "cache_not_used",                           # right tokens on GPT-2, no cache: the call-signed model
     "cells": {"ex6_cache": _NO_CACHE}, "loses": ["test_ex6_cache"]},
    {"name": "cache_positions_stuck",                    # greedy tokens may survive on a flat model: not on both
     "cells": {"ex6_cache": _CACHE_POSITIONS_STUCK}, "loses": ["test_ex6_cache"]},
    # Exercise 7: distinct-n
    {"name": "distinct_wrong_denominator",
     "cells": {"ex7_distinct": [("len(set(grams)) / len(grams)", "len(set(grams)) / len(tokens)")]},
     "loses": ["test_ex7_distinct"]},
    {"name": "distinct_tensor_not_converted",            # passes the visible test (lists only)
     "cells": {"ex7_distinct": [("    if torch.is_tensor(tokens):\n        tokens = tokens.tolist()\n", "")]},
     "loses": ["test_ex7_distinct"]},
    {"name": "distinct_no_error_for_n_zero",
     "cells": {"ex7_distinct": [("raise ValueError(f\"n must be >= 1, got {n}\")", "return 0.0")]},
     "loses": ["test_ex7_distinct"]},
]
