"""Plausible wrong answers for 13_dpo_alignment (see CONTRIBUTING.md, "Wrong answers")."""

_SLP_NO_SHIFT = '''def sequence_logprobs(logits, input_ids, completion_mask):
    # forgets the shift: position t's logits are read as scoring token t itself
    mask = completion_mask.to(torch.float32)
    if (mask[:, 1:].sum(dim=-1) == 0).any():
        raise ValueError("empty completion")
    logp = torch.log_softmax(logits.to(torch.float32), dim=-1)
    return (logp.gather(-1, input_ids.unsqueeze(-1)).squeeze(-1) * mask).sum(dim=-1)
'''

_SLP_TO_THE_END = '''def sequence_logprobs(logits, input_ids, completion_mask):
    # sums from the first completion token to the end of the row: right without padding only
    started = (completion_mask[:, 1:].cumsum(dim=-1) > 0).to(torch.float32)
    if (started.sum(dim=-1) == 0).any():
        raise ValueError("empty completion")
    logp = torch.log_softmax(logits[:, :-1].to(torch.float32), dim=-1)
    return (logp.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1) * started).sum(dim=-1)
'''

_DPO_SUM = '''def dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=0.1):
    # sums the per-pair losses instead of averaging: right for a batch of one only
    if not beta > 0:
        raise ValueError("beta must be > 0")
    if not (policy_chosen.shape == policy_rejected.shape == ref_chosen.shape == ref_rejected.shape):
        raise ValueError("shape mismatch")
    c = beta * (policy_chosen - ref_chosen)
    r = beta * (policy_rejected - ref_rejected)
    return -F.logsigmoid(c - r).sum(), c, r, c - r
'''

_ADV_GLOBAL = '''def group_advantages(rewards, eps=1e-4):
    # normalises over all groups together: right when there is one group
    if rewards.dim() != 2 or rewards.shape[1] < 2:
        raise ValueError("rewards must be (num_groups, G) with G >= 2")
    return (rewards - rewards.mean()) / (rewards.std() + eps)
'''

_NGRAM_CHARS = '''def ngram_overlap(benchmark, training, n=8):
    # character n-grams instead of word n-grams
    if n < 1:
        raise ValueError("n must be >= 1")
    def grams(text):
        text = " ".join(text.lower().split())
        return {text[i:i + n] for i in range(len(text) - n + 1)}
    bench = grams(benchmark)
    if not bench:
        raise ValueError("benchmark too short")
    return len(bench & grams(training)) / len(bench)
'''

_NGRAM_FIXED_8 = '''def ngram_overlap(benchmark, training, n=8):
    # ignores n: always 8-grams (the visible test only uses the default)
    def grams(text):
        words = text.lower().split()
        return {tuple(words[i:i + 8]) for i in range(len(words) - 7)}
    bench = grams(benchmark)
    if not bench:
        raise ValueError("benchmark too short")
    return len(bench & grams(training)) / len(bench)
'''

VARIANTS = [
    # Exercise 1: sequence log-probs
    {"name": "slp_mean_instead_of_sum",
     "cells": {"ex1_sequence_logprobs": [("return torch.where(mask.bool(), token_logp, torch.zeros_like(token_logp)).sum(dim=-1)",
                                          "return torch.where(mask.bool(), token_logp, torch.zeros_like(token_logp)).sum(dim=-1)"
                                          " / mask.sum(dim=-1)")]},
     "loses": ["test_ex1_sequence_logprobs"]},
    # right on every finite input; nan when a token outside the completion has log-probability -inf
    {"name": "slp_multiplies_by_mask",
     "cells": {"ex1_sequence_logprobs": [("return torch.where(mask.bool(), token_logp, torch.zeros_like(token_logp)).sum(dim=-1)",
                                          "return (token_logp * mask).sum(dim=-1)")]},
     "loses": ["test_ex1_sequence_logprobs"]},
    {"name": "slp_no_shift", "cells": {"ex1_sequence_logprobs": _SLP_NO_SHIFT},
     "loses": ["test_ex1_sequence_logprobs"]},
    {"name": "slp_ignores_padding_after_completion", "cells": {"ex1_sequence_logprobs": _SLP_TO_THE_END},
     "loses": ["test_ex1_sequence_logprobs"]},
    {"name": "slp_no_empty_check",
     "cells": {"ex1_sequence_logprobs": [("    if (mask.sum(dim=-1) == 0).any():\n        raise ValueError", "    if False:\n        raise ValueError")]},
     "loses": ["test_ex1_sequence_logprobs"]},
    {"name": "slp_keeps_logits_dtype",
     "cells": {"ex1_sequence_logprobs": [("logits[:, :-1].to(torch.float32)", "logits[:, :-1]"),
                                         ("mask = completion_mask[:, 1:].to(torch.float32)", "mask = completion_mask[:, 1:].to(logits.dtype)")]},
     "loses": ["test_ex1_sequence_logprobs"]},
    # Exercise 2: DPO loss
    {"name": "dpo_rewards_without_beta",
     "cells": {"ex2_dpo_loss": [("chosen_rewards = beta * (policy_chosen - ref_chosen)", "chosen_rewards = policy_chosen - ref_chosen"),
                                ("rejected_rewards = beta * (policy_rejected - ref_rejected)", "rejected_rewards = policy_rejected - ref_rejected"),
                                ("loss = -F.logsigmoid(margins).mean()", "loss = -F.logsigmoid(beta * margins).mean()")]},
     "loses": ["test_ex2_dpo_loss"]},
    {"name": "dpo_swapped_sign",
     "cells": {"ex2_dpo_loss": [("loss = -F.logsigmoid(margins).mean()", "loss = -F.logsigmoid(-margins).mean()")]},
     "loses": ["test_ex2_dpo_loss"]},
    {"name": "dpo_sum_over_batch", "cells": {"ex2_dpo_loss": _DPO_SUM}, "loses": ["test_ex2_dpo_loss"]},
    {"name": "dpo_no_beta_check",
     "cells": {"ex2_dpo_loss": [("    if not beta > 0:\n        raise ValueError", "    if beta is None:\n        raise ValueError")]},
     "loses": ["test_ex2_dpo_loss"]},
    {"name": "dpo_no_shape_check",
     "cells": {"ex2_dpo_loss": [("if len(shapes) != 1 or len(next(iter(shapes))) != 1:", "if False:")]},
     "loses": ["test_ex2_dpo_loss"]},
    {"name": "dpo_log_of_sigmoid",
     "cells": {"ex2_dpo_loss": [("loss = -F.logsigmoid(margins).mean()", "loss = -torch.log(torch.sigmoid(margins)).mean()")]},
     "loses": ["test_ex2_dpo_loss"]},
    {"name": "dpo_subtracts_in_place",          # the caller's policy log-probs are overwritten
     "cells": {"ex2_dpo_loss": [("chosen_rewards = beta * (policy_chosen - ref_chosen)",
                                 "chosen_rewards = beta * policy_chosen.sub_(ref_chosen)")]},
     "loses": ["test_ex2_dpo_loss"]},
    # Exercise 3: GRPO advantages
    {"name": "adv_population_std",
     "cells": {"ex3_group_advantages": [("unbiased=True", "unbiased=False")]},
     "loses": ["test_ex3_group_advantages"]},
    {"name": "adv_no_eps_nan_for_equal_rewards",
     "cells": {"ex3_group_advantages": [("(std + eps)", "std")]},
     "loses": ["test_ex3_group_advantages"]},
    {"name": "adv_fixed_eps",
     "cells": {"ex3_group_advantages": [("(std + eps)", "(std + 1e-4)")]},
     "loses": ["test_ex3_group_advantages"]},
    {"name": "adv_global_normalisation", "cells": {"ex3_group_advantages": _ADV_GLOBAL},
     "loses": ["test_ex3_group_advantages"]},
    {"name": "adv_normalises_in_place",         # right values, but the rewards are overwritten
     "cells": {"ex3_group_advantages": [("return (rewards - mean) / (std + eps)", "return rewards.sub_(mean).div_(std + eps)")]},
     "loses": ["test_ex3_group_advantages"]},
    # Exercise 4: contamination
    {"name": "ngram_characters", "cells": {"ex4_ngram_overlap": _NGRAM_CHARS}, "loses": ["test_ex4_ngram_overlap"]},
    {"name": "ngram_case_sensitive",
     "cells": {"ex4_ngram_overlap": [("words = text.lower().split()", "words = text.split()")]},
     "loses": ["test_ex4_ngram_overlap"]},
    {"name": "ngram_split_on_single_space",
     "cells": {"ex4_ngram_overlap": [("words = text.lower().split()", "words = text.lower().split(' ')")]},
     "loses": ["test_ex4_ngram_overlap"]},
    {"name": "ngram_ignores_n", "cells": {"ex4_ngram_overlap": _NGRAM_FIXED_8}, "loses": ["test_ex4_ngram_overlap"]},
    {"name": "ngram_counts_duplicates",
     "cells": {"ex4_ngram_overlap": [("return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}",
                                      "return [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]"),
                                     ("return len(bench & grams(training)) / len(bench)",
                                      "t = set(grams(training))\n    return sum(g in t for g in bench) / len(bench)")]},
     "loses": ["test_ex4_ngram_overlap"]},
]
