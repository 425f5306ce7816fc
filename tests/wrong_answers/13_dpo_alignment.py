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

_SLP_LOOP_FROM_FIRST = '''def sequence_logprobs(logits, input_ids, completion_mask):
    # a loop over the completion positions t, scoring token t with logits[t - 1]: at t = 0 (a prompt
    # of length 0) logits[-1] wraps around to the last position
    if logits.dim() != 3 or input_ids.shape != logits.shape[:2] or completion_mask.shape != input_ids.shape:
        raise ValueError("shape mismatch")
    if (completion_mask[:, 1:].sum(dim=-1) == 0).any():
        raise ValueError("empty completion")
    logp = torch.log_softmax(logits.to(torch.float32), dim=-1)
    out = torch.zeros(logits.shape[0], dtype=torch.float32)
    for b in range(logits.shape[0]):
        for t in range(logits.shape[1]):
            if completion_mask[b, t]:
                out[b] += logp[b, t - 1, input_ids[b, t]]
    return out
'''

_SLP_LOGSUMEXP_NO_SHIFT = '''def sequence_logprobs(logits, input_ids, completion_mask):
    # log-softmax by hand, without subtracting the max: exp overflows when a logit is large
    if logits.dim() != 3 or input_ids.shape != logits.shape[:2] or completion_mask.shape != input_ids.shape:
        raise ValueError("shape mismatch")
    mask = completion_mask[:, 1:].bool()
    if (mask.sum(dim=-1) == 0).any():
        raise ValueError("empty completion")
    lg = logits[:, :-1].to(torch.float32)
    logp = lg - lg.exp().sum(dim=-1, keepdim=True).log()
    token_logp = logp.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return torch.where(mask, token_logp, torch.zeros_like(token_logp)).sum(dim=-1)
'''

_SLP_SHIFT_IN_PLACE = '''def sequence_logprobs(logits, input_ids, completion_mask):
    # a stable log-softmax by hand that subtracts the max from the caller's logits in place
    if logits.dim() != 3 or input_ids.shape != logits.shape[:2] or completion_mask.shape != input_ids.shape:
        raise ValueError("shape mismatch")
    mask = completion_mask[:, 1:].bool()
    if (mask.sum(dim=-1) == 0).any():
        raise ValueError("empty completion")
    logits -= logits.max(dim=-1, keepdim=True).values
    lg = logits[:, :-1].to(torch.float32)
    logp = lg - lg.exp().sum(dim=-1, keepdim=True).log()
    token_logp = logp.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return torch.where(mask, token_logp, torch.zeros_like(token_logp)).sum(dim=-1)
'''

_SLP_BATCH_ONLY_SHAPES = '''def sequence_logprobs(logits, input_ids, completion_mask):
    # checks the batch sizes only; a mismatch in T is not refused
    if not (logits.shape[0] == input_ids.shape[0] == completion_mask.shape[0]):
        raise ValueError("batch sizes differ")
    T = input_ids.shape[1]
    mask = completion_mask[:, 1:].bool()
    if (mask.sum(dim=-1) == 0).any():
        raise ValueError("empty completion")
    logp = torch.log_softmax(logits[:, :T - 1].to(torch.float32), dim=-1)
    token_logp = logp.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return torch.where(mask, token_logp, torch.zeros_like(token_logp)).sum(dim=-1)
'''

_DPO_SHAPES_EQUAL_ONLY = '''def dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=0.1):
    # checks that the four shapes are equal, not that they are (B,)
    if not beta > 0:
        raise ValueError("beta must be > 0")
    if not (policy_chosen.shape == policy_rejected.shape == ref_chosen.shape == ref_rejected.shape):
        raise ValueError("shape mismatch")
    c = beta * (policy_chosen - ref_chosen)
    r = beta * (policy_rejected - ref_rejected)
    return -F.logsigmoid(c - r).mean(), c, r, c - r
'''

_DPO_POLICY_PAIR_ONLY = '''def dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=0.1):
    # compares the policy pair's shapes only; a (1,) reference broadcasts silently
    if not beta > 0:
        raise ValueError("beta must be > 0")
    if policy_chosen.dim() != 1 or policy_chosen.shape != policy_rejected.shape:
        raise ValueError("shape mismatch")
    c = beta * (policy_chosen - ref_chosen)
    r = beta * (policy_rejected - ref_rejected)
    return -F.logsigmoid(c - r).mean(), c, r, c - r
'''

_ADV_ONLY_1D_CHECK = '''def group_advantages(rewards, eps=1e-4):
    # refuses fewer than 2 dimensions, but not 3-D input
    if rewards.dim() < 2 or rewards.shape[1] < 2:
        raise ValueError("rewards must be (num_groups, G) with G >= 2")
    mean = rewards.mean(dim=1, keepdim=True)
    std = rewards.std(dim=1, keepdim=True)
    return (rewards - mean) / (std + eps)
'''


_NGRAM_RE_SPLIT = '''def ngram_overlap(benchmark, training, n=8):
    # re.split on whitespace runs: leading/trailing whitespace gives empty words
    import re
    if n < 1:
        raise ValueError("n must be >= 1")
    def grams(text):
        words = re.split(r"\\s+", text.lower())
        return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}
    bench = grams(benchmark)
    if not bench:
        raise ValueError("benchmark too short")
    return len(bench & grams(training)) / len(bench)
'''

_NGRAM_JOINED = '''def ngram_overlap(benchmark, training, n=8):
    # n-grams as the words glued into one string
    if n < 1:
        raise ValueError("n must be >= 1")
    def grams(text):
        words = text.lower().split()
        return {"".join(words[i:i + n]) for i in range(len(words) - n + 1)}
    bench = grams(benchmark)
    if not bench:
        raise ValueError("benchmark too short")
    return len(bench & grams(training)) / len(bench)
'''

_NGRAM_COUNT_WITH_SPLIT_SPACE = '''def ngram_overlap(benchmark, training, n=8):
    # counts the benchmark's words with split(" ") for the check: a blank benchmark is not refused
    if n < 1 or len(benchmark.split(" ")) < n:
        raise ValueError("n must be >= 1 and the benchmark must have n words")
    def grams(text):
        words = text.lower().split()
        return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}
    bench = grams(benchmark)
    return len(bench & grams(training)) / len(bench)
'''

_NGRAM_SHORT_TRAINING_RAISES = '''def ngram_overlap(benchmark, training, n=8):
    # refuses a training text shorter than n words too
    if n < 1:
        raise ValueError("n must be >= 1")
    def grams(text):
        words = text.lower().split()
        if len(words) < n:
            raise ValueError("text has fewer than n words")
        return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}
    bench = grams(benchmark)
    return len(bench & grams(training)) / len(bench)
'''

_JUDGE_BASE = """def debiased_judge(p_a_correct_first, p_a_correct_second):
    p1 = np.asarray(p_a_correct_first, dtype=np.float64)
    p2 = np.asarray(p_a_correct_second, dtype=np.float64)
    if p1.ndim != 1 or p2.shape != p1.shape:
        raise ValueError("two 1-D arrays of the same length")
    if not (np.all((p1 >= 0) & (p1 <= 1)) and np.all((p2 >= 0) & (p2 <= 1))):
        raise ValueError("probabilities in [0, 1]")
{body}"""

_JUDGE_NO_FLIP = _JUDGE_BASE.format(body="""    # averages P(A) over the two orders, forgetting that in the second order the correct answer is B
    soft = (p1 + p2) / 2
    return soft, soft > 0.5, p1 - (1 - p2)
""")

_JUDGE_HARD_VERDICTS = _JUDGE_BASE.format(body="""    # the verdict from the two hard verdicts (right first, right second), averaged
    soft = (p1 + (1 - p2)) / 2
    votes = ((p1 > 0.5).astype(np.float64) + (p2 < 0.5).astype(np.float64)) / 2
    return soft, votes > 0.5, p1 - (1 - p2)
""")

_JUDGE_SOFT_FROM_VOTES = _JUDGE_BASE.format(body="""    # the soft score as the share of the two hard verdicts that are right
    soft = ((p1 > 0.5).astype(np.float64) + (p2 < 0.5).astype(np.float64)) / 2
    return soft, soft > 0.5, p1 - (1 - p2)
""")

_JUDGE_SHIFT_SIGN = _JUDGE_BASE.format(body="""    # the shift as P(correct | second) - P(correct | first)
    return (p1 + (1 - p2)) / 2, p1 > p2, (1 - p2) - p1
""")

_JUDGE_SHIFT_OF_P_A = _JUDGE_BASE.format(body="""    # the shift as the change of P(A) between the orders, not of P(correct)
    return (p1 + (1 - p2)) / 2, p1 > p2, p1 - p2
""")

_JUDGE_TIE_RIGHT = _JUDGE_BASE.format(body="""    # a tie counts as right
    soft = (p1 + (1 - p2)) / 2
    return soft, soft >= 0.5, p1 - (1 - p2)
""")

_JUDGE_CENTRED = _JUDGE_BASE.format(body="""    # returns the preference centred at 0 (soft - 1/2), as the section's tables print it
    soft = (p1 + (1 - p2)) / 2 - 0.5
    return soft, soft > 0, p1 - (1 - p2)
""")

_JUDGE_KEEPS_DTYPE = """def debiased_judge(p_a_correct_first, p_a_correct_second):
    # keeps the inputs' dtype: float32 in, float32 out
    p1, p2 = np.asarray(p_a_correct_first), np.asarray(p_a_correct_second)
    if p1.ndim != 1 or p2.shape != p1.shape:
        raise ValueError("two 1-D arrays of the same length")
    if not (np.all((p1 >= 0) & (p1 <= 1)) and np.all((p2 >= 0) & (p2 <= 1))):
        raise ValueError("probabilities in [0, 1]")
    return (p1 + (1 - p2)) / 2, p1 > p2, p1 - (1 - p2)
"""

_JUDGE_BROADCASTS = """def debiased_judge(p_a_correct_first, p_a_correct_second):
    # no shape check: a (1,) input broadcasts against the other
    p1 = np.asarray(p_a_correct_first, dtype=np.float64)
    p2 = np.asarray(p_a_correct_second, dtype=np.float64)
    if not (np.all((p1 >= 0) & (p1 <= 1)) and np.all((p2 >= 0) & (p2 <= 1))):
        raise ValueError("probabilities in [0, 1]")
    return (p1 + (1 - p2)) / 2, p1 > p2, p1 - (1 - p2)
"""

_JUDGE_SAME_SHAPE_ONLY = """def debiased_judge(p_a_correct_first, p_a_correct_second):
    # checks that the shapes are equal, not that they are 1-D
    p1 = np.asarray(p_a_correct_first, dtype=np.float64)
    p2 = np.asarray(p_a_correct_second, dtype=np.float64)
    if p1.shape != p2.shape:
        raise ValueError("shapes differ")
    if not (np.all((p1 >= 0) & (p1 <= 1)) and np.all((p2 >= 0) & (p2 <= 1))):
        raise ValueError("probabilities in [0, 1]")
    return (p1 + (1 - p2)) / 2, p1 > p2, p1 - (1 - p2)
"""

_JUDGE_NO_RANGE_CHECK = """def debiased_judge(p_a_correct_first, p_a_correct_second):
    # no range check: log-probabilities go through
    p1 = np.asarray(p_a_correct_first, dtype=np.float64)
    p2 = np.asarray(p_a_correct_second, dtype=np.float64)
    if p1.ndim != 1 or p2.shape != p1.shape:
        raise ValueError("two 1-D arrays of the same length")
    return (p1 + (1 - p2)) / 2, p1 > p2, p1 - (1 - p2)
"""

_JUDGE_RANGE_MISSES_NAN = """def debiased_judge(p_a_correct_first, p_a_correct_second):
    # looks for values below 0 or above 1: a NaN is neither
    p1 = np.asarray(p_a_correct_first, dtype=np.float64)
    p2 = np.asarray(p_a_correct_second, dtype=np.float64)
    if p1.ndim != 1 or p2.shape != p1.shape:
        raise ValueError("two 1-D arrays of the same length")
    if (p1 < 0).any() or (p1 > 1).any() or (p2 < 0).any() or (p2 > 1).any():
        raise ValueError("probabilities in [0, 1]")
    return (p1 + (1 - p2)) / 2, p1 > p2, p1 - (1 - p2)
"""

_JUDGE_OPEN_INTERVAL = """def debiased_judge(p_a_correct_first, p_a_correct_second):
    # refuses 0 and 1 too: probabilities in the open interval (0, 1)
    p1 = np.asarray(p_a_correct_first, dtype=np.float64)
    p2 = np.asarray(p_a_correct_second, dtype=np.float64)
    if p1.ndim != 1 or p2.shape != p1.shape:
        raise ValueError("two 1-D arrays of the same length")
    if not (np.all((p1 > 0) & (p1 < 1)) and np.all((p2 > 0) & (p2 < 1))):
        raise ValueError("probabilities in (0, 1)")
    return (p1 + (1 - p2)) / 2, p1 > p2, p1 - (1 - p2)
"""

_JUDGE_IN_PLACE = _JUDGE_BASE.format(body="""    # turns P(A | correct second) into P(correct | correct second) in the caller's array
    np.subtract(1.0, p2, out=p2)
    return (p1 + p2) / 2, p1 > 1 - p2, p1 - p2
""")

_JUDGE_ARRAYS_ONLY = """def debiased_judge(p_a_correct_first, p_a_correct_second):
    # calls array methods on the inputs: lists of floats are not accepted
    p1, p2 = p_a_correct_first.astype(np.float64), p_a_correct_second.astype(np.float64)
    if p1.ndim != 1 or p2.shape != p1.shape:
        raise ValueError("two 1-D arrays of the same length")
    if not (np.all((p1 >= 0) & (p1 <= 1)) and np.all((p2 >= 0) & (p2 <= 1))):
        raise ValueError("probabilities in [0, 1]")
    return (p1 + (1 - p2)) / 2, p1 > p2, p1 - (1 - p2)
"""

_HONEST_JUDGE_THRESHOLD = """def debiased_judge(p_a_correct_first, p_a_correct_second):
    p1 = np.array(p_a_correct_first, dtype=float)      # copies: the caller's arrays are never touched
    p2 = np.array(p_a_correct_second, dtype=float)
    if p1.ndim != 1 or p2.ndim != 1 or len(p1) != len(p2):
        raise ValueError("p_a_correct_first and p_a_correct_second must be 1-D of the same length")
    both = np.concatenate([p1, p2])
    if np.isnan(both).any() or both.min() < 0 or both.max() > 1:
        raise ValueError("probabilities must be in [0, 1]")
    p_correct_first, p_correct_second = p1, 1.0 - p2
    soft = 0.5 * (p_correct_first + p_correct_second)
    shift = p_correct_first - p_correct_second
    return soft, soft > 0.5, shift
"""

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
    # masks the whole log-softmax table by multiplying it with the mask before the gather: right on every
    # finite input, nan as soon as a prompt or padding position holds a -inf log-probability
    {"name": "multiply_by_mask_nan",
     "cells": {"ex1_sequence_logprobs": [("token_logp = logp.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)",
                                          "token_logp = (logp * mask.unsqueeze(-1)).gather(-1, input_ids[:, 1:].unsqueeze(-1))"
                                          ".squeeze(-1)"),
                                         ("return torch.where(mask.bool(), token_logp, torch.zeros_like(token_logp)).sum(dim=-1)",
                                          "return token_logp.sum(dim=-1)")]},
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
    # issue 17: a prompt of length 0, a logit far ahead, 16/64-bit logits, per-row empty check, T mismatches
    {"name": "slp_loop_wraps_at_position_0", "cells": {"ex1_sequence_logprobs": _SLP_LOOP_FROM_FIRST},
     "loses": ["test_ex1_sequence_logprobs"]},
    {"name": "slp_log_of_softmax",
     "cells": {"ex1_sequence_logprobs": [("logp = torch.log_softmax(logits[:, :-1].to(torch.float32), dim=-1)",
                                          "logp = torch.log(torch.softmax(logits[:, :-1].to(torch.float32), dim=-1))")]},
     "loses": ["test_ex1_sequence_logprobs"]},
    {"name": "slp_logsumexp_without_max_shift", "cells": {"ex1_sequence_logprobs": _SLP_LOGSUMEXP_NO_SHIFT},
     "loses": ["test_ex1_sequence_logprobs"]},
    {"name": "slp_shifts_logits_in_place", "cells": {"ex1_sequence_logprobs": _SLP_SHIFT_IN_PLACE},
     "loses": ["test_ex1_sequence_logprobs"]},
    {"name": "slp_log_softmax_in_16_bit_then_float",
     "cells": {"ex1_sequence_logprobs": [("logp = torch.log_softmax(logits[:, :-1].to(torch.float32), dim=-1)",
                                          "logp = torch.log_softmax(logits[:, :-1], dim=-1).to(torch.float32)")]},
     "loses": ["test_ex1_sequence_logprobs"]},
    {"name": "slp_keeps_float64",            # "float32 or better": float64 logits give a float64 result
     "cells": {"ex1_sequence_logprobs": [("logits[:, :-1].to(torch.float32)",
                                          "logits[:, :-1].to(torch.promote_types(logits.dtype, torch.float32))")]},
     "loses": ["test_ex1_sequence_logprobs"]},
    {"name": "slp_empty_check_whole_batch",
     "cells": {"ex1_sequence_logprobs": [("if (mask.sum(dim=-1) == 0).any():", "if mask.sum() == 0:")]},
     "loses": ["test_ex1_sequence_logprobs"]},
    {"name": "slp_checks_batch_sizes_only", "cells": {"ex1_sequence_logprobs": _SLP_BATCH_ONLY_SHAPES},
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
    # issue 17: beta and reference clauses at non-default values, shapes (B,) without broadcasting
    {"name": "dpo_ignores_reference",         # Book §8.2.2's formula: policy log-probs only
     "cells": {"ex2_dpo_loss": [("chosen_rewards = beta * (policy_chosen - ref_chosen)", "chosen_rewards = beta * policy_chosen"),
                                ("rejected_rewards = beta * (policy_rejected - ref_rejected)",
                                 "rejected_rewards = beta * policy_rejected")]},
     "loses": ["test_ex2_dpo_loss"]},
    {"name": "dpo_margin_without_reference",   # rewards right, but the margin from the policy alone
     "cells": {"ex2_dpo_loss": [("margins = chosen_rewards - rejected_rewards", "margins = beta * (policy_chosen - policy_rejected)")]},
     "loses": ["test_ex2_dpo_loss"]},
    {"name": "dpo_swapped_references",
     "cells": {"ex2_dpo_loss": [("chosen_rewards = beta * (policy_chosen - ref_chosen)", "chosen_rewards = beta * (policy_chosen - ref_rejected)"),
                                ("rejected_rewards = beta * (policy_rejected - ref_rejected)",
                                 "rejected_rewards = beta * (policy_rejected - ref_chosen)")]},
     "loses": ["test_ex2_dpo_loss"]},
    {"name": "dpo_beta_fixed_at_0_1",
     "cells": {"ex2_dpo_loss": [("chosen_rewards = beta * (policy_chosen - ref_chosen)", "chosen_rewards = 0.1 * (policy_chosen - ref_chosen)"),
                                ("rejected_rewards = beta * (policy_rejected - ref_rejected)",
                                 "rejected_rewards = 0.1 * (policy_rejected - ref_rejected)")]},
     "loses": ["test_ex2_dpo_loss"]},
    {"name": "dpo_beta_in_loss_only",          # rewards without beta, beta applied inside the sigmoid
     "cells": {"ex2_dpo_loss": [("chosen_rewards = beta * (policy_chosen - ref_chosen)", "chosen_rewards = policy_chosen - ref_chosen"),
                                ("rejected_rewards = beta * (policy_rejected - ref_rejected)",
                                 "rejected_rewards = policy_rejected - ref_rejected"),
                                ("loss = -F.logsigmoid(margins).mean()", "loss = -F.logsigmoid(beta * margins).mean()\n    margins = beta * margins")]},
     "loses": ["test_ex2_dpo_loss"]},
    {"name": "dpo_log1p_exp",                  # softplus by hand: exp(5000) overflows
     "cells": {"ex2_dpo_loss": [("loss = -F.logsigmoid(margins).mean()", "loss = torch.log1p(torch.exp(-margins)).mean()")]},
     "loses": ["test_ex2_dpo_loss"]},
    {"name": "dpo_loss_as_python_float",
     "cells": {"ex2_dpo_loss": [("loss = -F.logsigmoid(margins).mean()", "loss = -F.logsigmoid(margins).mean().item()")]},
     "loses": ["test_ex2_dpo_loss"]},
    {"name": "dpo_outputs_in_float32",
     "cells": {"ex2_dpo_loss": [("chosen_rewards = beta * (policy_chosen - ref_chosen)",
                                 "policy_chosen, policy_rejected, ref_chosen, ref_rejected = (t.float() for t in "
                                 "(policy_chosen, policy_rejected, ref_chosen, ref_rejected))\n    "
                                 "chosen_rewards = beta * (policy_chosen - ref_chosen)")]},
     "loses": ["test_ex2_dpo_loss"]},
    {"name": "dpo_refuses_negative_beta_only",
     "cells": {"ex2_dpo_loss": [("    if not beta > 0:\n        raise ValueError", "    if beta < 0:\n        raise ValueError")]},
     "loses": ["test_ex2_dpo_loss"]},
    {"name": "dpo_refuses_zero_beta_only",
     "cells": {"ex2_dpo_loss": [("    if not beta > 0:\n        raise ValueError", "    if beta == 0:\n        raise ValueError")]},
     "loses": ["test_ex2_dpo_loss"]},
    {"name": "dpo_shapes_equal_not_1d", "cells": {"ex2_dpo_loss": _DPO_SHAPES_EQUAL_ONLY}, "loses": ["test_ex2_dpo_loss"]},
    {"name": "dpo_checks_policy_pair_only", "cells": {"ex2_dpo_loss": _DPO_POLICY_PAIR_ONLY}, "loses": ["test_ex2_dpo_loss"]},
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
    # issue 17: eps on the std, dtype, 3-D and G = 0 refused, square inputs
    {"name": "adv_eps_inside_sqrt",
     "cells": {"ex3_group_advantages": [("std = rewards.std(dim=1, keepdim=True, unbiased=True)",
                                         "std = (rewards.var(dim=1, keepdim=True, unbiased=True) + eps).sqrt() - eps")]},
     "loses": ["test_ex3_group_advantages"]},
    {"name": "adv_std_floored_at_eps",
     "cells": {"ex3_group_advantages": [("return (rewards - mean) / (std + eps)", "return (rewards - mean) / std.clamp_min(eps)")]},
     "loses": ["test_ex3_group_advantages"]},
    {"name": "adv_returns_float32",
     "cells": {"ex3_group_advantages": [("return (rewards - mean) / (std + eps)", "return ((rewards - mean) / (std + eps)).float()")]},
     "loses": ["test_ex3_group_advantages"]},
    {"name": "adv_accepts_3d", "cells": {"ex3_group_advantages": _ADV_ONLY_1D_CHECK}, "loses": ["test_ex3_group_advantages"]},
    {"name": "adv_refuses_g_1_only",
     "cells": {"ex3_group_advantages": [("rewards.shape[1] < 2", "rewards.shape[1] == 1")]},
     "loses": ["test_ex3_group_advantages"]},
    {"name": "adv_std_without_keepdim",        # (1, G) / (1,) broadcasts right; a square batch divides by columns
     "cells": {"ex3_group_advantages": [("std = rewards.std(dim=1, keepdim=True, unbiased=True)", "std = rewards.std(dim=1)")]},
     "loses": ["test_ex3_group_advantages"]},
    {"name": "adv_not_scaled_by_std",           # the group mean as baseline, but no division by the group's std
     "cells": {"ex3_group_advantages": [("return (rewards - mean) / (std + eps)", "return rewards - mean")]},
     "loses": ["test_ex3_group_advantages"]},
    # Exercise 4: the GRPO loss (clipped ratio, KL to the reference, per-completion token means)
    {"name": "grpo_no_clipping",
     "cells": {"ex3b_grpo_loss": [("surrogate = torch.minimum(ratio * adv, ratio.clamp(1 - epsilon, 1 + epsilon) * adv)",
                                   "surrogate = ratio * adv")]},
     "loses": ["test_ex3b_grpo_loss"]},
    {"name": "grpo_clip_without_min",
     "cells": {"ex3b_grpo_loss": [("surrogate = torch.minimum(ratio * adv, ratio.clamp(1 - epsilon, 1 + epsilon) * adv)",
                                   "surrogate = ratio.clamp(1 - epsilon, 1 + epsilon) * adv")]},
     "loses": ["test_ex3b_grpo_loss"]},
    {"name": "grpo_clip_upper_side_only",
     "cells": {"ex3b_grpo_loss": [("ratio.clamp(1 - epsilon, 1 + epsilon)", "ratio.clamp(max=1 + epsilon)")]},
     "loses": ["test_ex3b_grpo_loss"]},
    {"name": "grpo_max_instead_of_min",
     "cells": {"ex3b_grpo_loss": [("surrogate = torch.minimum(", "surrogate = torch.maximum(")]},
     "loses": ["test_ex3b_grpo_loss"]},
    {"name": "grpo_kl_sign_swapped",            # k3 of log(pi / pi_ref) instead of log(pi_ref / pi)
     "cells": {"ex3b_grpo_loss": [("r = ref_logps - logps", "r = logps - ref_logps")]},
     "loses": ["test_ex3b_grpo_loss"]},
    {"name": "grpo_kl_rewarded",                # the KL term added to the objective: loss -surrogate - beta * kl
     "cells": {"ex3b_grpo_loss": [("per_token = -surrogate + beta * (torch.exp(r) - r - 1)",
                                   "per_token = -surrogate - beta * (torch.exp(r) - r - 1)")]},
     "loses": ["test_ex3b_grpo_loss"]},
    {"name": "grpo_kl_k1",                      # the naive estimator log(pi / pi_ref)
     "cells": {"ex3b_grpo_loss": [("per_token = -surrogate + beta * (torch.exp(r) - r - 1)",
                                   "per_token = -surrogate + beta * (-r)")]},
     "loses": ["test_ex3b_grpo_loss"]},
    {"name": "grpo_ratio_against_current",      # exp(logps - logps.detach()): the old policy ignored (ratio 1)
     "cells": {"ex3b_grpo_loss": [("ratio = torch.exp(logps - old_logps)", "ratio = torch.exp(logps - logps.detach())")]},
     "loses": ["test_ex3b_grpo_loss"]},
    {"name": "grpo_token_mean_over_batch",      # TRL's "bnpo": one mean over every token of the batch
     "cells": {"ex3b_grpo_loss": [("return ((per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()",
                                   "return (per_token * mask).sum() / mask.sum().clamp(min=1.0)")]},
     "loses": ["test_ex3b_grpo_loss"]},
    {"name": "grpo_ignores_mask",
     "cells": {"ex3b_grpo_loss": [("return ((per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()",
                                   "return per_token.mean()")]},
     "loses": ["test_ex3b_grpo_loss"]},
    {"name": "grpo_no_clamp_on_empty_completion",   # 0 / 0 = nan for a completion with no token
     "cells": {"ex3b_grpo_loss": [("mask.sum(-1).clamp(min=1.0)", "mask.sum(-1)")]},
     "loses": ["test_ex3b_grpo_loss"]},
    {"name": "grpo_fixed_epsilon",
     "cells": {"ex3b_grpo_loss": [("ratio.clamp(1 - epsilon, 1 + epsilon)", "ratio.clamp(0.8, 1.2)")]},
     "loses": ["test_ex3b_grpo_loss"]},
    {"name": "grpo_fixed_beta",
     "cells": {"ex3b_grpo_loss": [("per_token = -surrogate + beta * (", "per_token = -surrogate + 0.04 * (")]},
     "loses": ["test_ex3b_grpo_loss"]},
    {"name": "honest_grpo_loss_where",          # another right answer: select the tokens, count them per row
     "cells": {"ex3b_grpo_loss": """def grpo_loss(logps, old_logps, ref_logps, advantages, mask, epsilon=0.2, beta=0.04):
    A = advantages.unsqueeze(1)
    rho = (logps - old_logps).exp()
    obj = torch.min(rho * A, torch.clamp(rho, 1 - epsilon, 1 + epsilon) * A)
    kl = (ref_logps - logps).exp() - (ref_logps - logps) - 1
    per_tok = torch.where(mask.bool(), -obj + beta * kl, torch.zeros_like(obj))
    n = mask.sum(dim=1).clamp(min=1)
    return (per_tok.sum(dim=1) / n).mean()
"""},
     "loses": []},
    # Exercise 5: the position-debiased judge score (soft score, verdict, position shift)
    {"name": "judge_averages_p_a_without_flipping", "cells": {"ex3c_debiased_judge": _JUDGE_NO_FLIP},
     "loses": ["test_ex3c_debiased_judge"]},
    {"name": "judge_verdict_from_hard_verdicts", "cells": {"ex3c_debiased_judge": _JUDGE_HARD_VERDICTS},
     "loses": ["test_ex3c_debiased_judge"]},
    {"name": "judge_soft_score_from_hard_verdicts", "cells": {"ex3c_debiased_judge": _JUDGE_SOFT_FROM_VOTES},
     "loses": ["test_ex3c_debiased_judge"]},
    {"name": "judge_shift_wrong_sign", "cells": {"ex3c_debiased_judge": _JUDGE_SHIFT_SIGN},
     "loses": ["test_ex3c_debiased_judge"]},
    {"name": "judge_shift_of_p_a", "cells": {"ex3c_debiased_judge": _JUDGE_SHIFT_OF_P_A},
     "loses": ["test_ex3c_debiased_judge"]},
    {"name": "judge_tie_counts_right", "cells": {"ex3c_debiased_judge": _JUDGE_TIE_RIGHT},
     "loses": ["test_ex3c_debiased_judge"]},
    {"name": "judge_soft_centred_at_0", "cells": {"ex3c_debiased_judge": _JUDGE_CENTRED},
     "loses": ["test_ex3c_debiased_judge"]},
    {"name": "judge_keeps_float32", "cells": {"ex3c_debiased_judge": _JUDGE_KEEPS_DTYPE},
     "loses": ["test_ex3c_debiased_judge"]},
    {"name": "judge_broadcasts_a_length_1_input", "cells": {"ex3c_debiased_judge": _JUDGE_BROADCASTS},
     "loses": ["test_ex3c_debiased_judge"]},
    {"name": "judge_accepts_2d_of_equal_shape", "cells": {"ex3c_debiased_judge": _JUDGE_SAME_SHAPE_ONLY},
     "loses": ["test_ex3c_debiased_judge"]},
    {"name": "judge_no_range_check", "cells": {"ex3c_debiased_judge": _JUDGE_NO_RANGE_CHECK},
     "loses": ["test_ex3c_debiased_judge"]},
    {"name": "judge_range_check_misses_nan", "cells": {"ex3c_debiased_judge": _JUDGE_RANGE_MISSES_NAN},
     "loses": ["test_ex3c_debiased_judge"]},
    {"name": "judge_refuses_0_and_1", "cells": {"ex3c_debiased_judge": _JUDGE_OPEN_INTERVAL},
     "loses": ["test_ex3c_debiased_judge"]},
    {"name": "judge_flips_second_order_in_place", "cells": {"ex3c_debiased_judge": _JUDGE_IN_PLACE},
     "loses": ["test_ex3c_debiased_judge"]},
    {"name": "judge_refuses_lists", "cells": {"ex3c_debiased_judge": _JUDGE_ARRAYS_ONLY},
     "loses": ["test_ex3c_debiased_judge"]},
    {"name": "honest_judge_threshold_on_soft", "cells": {"ex3c_debiased_judge": _HONEST_JUDGE_THRESHOLD},
     "loses": []},
    # Exercise 6: contamination
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
    # issue 17: negative n, exactly n words, blank benchmark, short training text, Unicode and whitespace
    {"name": "ngram_refuses_zero_n_only",
     "cells": {"ex4_ngram_overlap": [("if n < 1:", "if n == 0:")]},
     "loses": ["test_ex4_ngram_overlap"]},
    {"name": "ngram_refuses_exactly_n_words",
     "cells": {"ex4_ngram_overlap": [("    bench = grams(benchmark)\n    if not bench:",
                                      "    bench = grams(benchmark)\n    if len(benchmark.split()) <= n:")]},
     "loses": ["test_ex4_ngram_overlap"]},
    {"name": "ngram_re_split_whitespace", "cells": {"ex4_ngram_overlap": _NGRAM_RE_SPLIT}, "loses": ["test_ex4_ngram_overlap"]},
    {"name": "honest_ngram_casefold",             # casefold instead of lower: the statement no longer grades the difference
     "cells": {"ex4_ngram_overlap": [("words = text.lower().split()", "words = text.casefold().split()")]},
     "loses": []},
    {"name": "ngram_joined_strings", "cells": {"ex4_ngram_overlap": _NGRAM_JOINED}, "loses": ["test_ex4_ngram_overlap"]},
    {"name": "ngram_jaccard",
     "cells": {"ex4_ngram_overlap": [("return len(bench & grams(training)) / len(bench)",
                                      "return len(bench & grams(training)) / len(bench | grams(training))")]},
     "loses": ["test_ex4_ngram_overlap"]},
    {"name": "ngram_blank_benchmark_not_refused", "cells": {"ex4_ngram_overlap": _NGRAM_COUNT_WITH_SPLIT_SPACE},
     "loses": ["test_ex4_ngram_overlap"]},
    {"name": "ngram_short_training_raises", "cells": {"ex4_ngram_overlap": _NGRAM_SHORT_TRAINING_RAISES},
     "loses": ["test_ex4_ngram_overlap"]},
]

# An honest answer a reader wrote from the student notebook's text alone (issue 40): full marks.
_HONEST_GRPO_LOSS_READER = 'import torch\n\n\ndef grpo_loss(logps, old_logps, ref_logps, advantages, mask, epsilon=0.2, beta=0.04):\n    """GRPO loss (Shao et al. 2024, TRL\'s loss_type="grpo") of N completions of T tokens (Book §8.3.3).\n\n    logps, old_logps, ref_logps: (N, T) per-token log-probs under the policy trained, the policy that\n    sampled, and the frozen reference. advantages: (N,). mask: (N, T), 1 on completion tokens.\n    Per token: ratio = exp(logps - old_logps);\n      surrogate = min(ratio * A, clip(ratio, 1 - epsilon, 1 + epsilon) * A);\n      k3 = exp(ref_logps - logps) - (ref_logps - logps) - 1;  per-token loss = -surrogate + beta * k3.\n    Returns the mean over completions of (masked sum of per-token losses) / max(mask sum, 1), 0-dim.\n    Inputs are left unchanged.\n    """\n    if logps.dim() != 2 or old_logps.shape != logps.shape or ref_logps.shape != logps.shape \\\n            or mask.shape != logps.shape:\n        raise ValueError("logps, old_logps, ref_logps and mask must all be (N, T) tensors of the same shape")\n    adv = advantages.reshape(-1).to(logps.dtype)\n    if adv.shape[0] != logps.shape[0]:\n        raise ValueError("advantages must hold one value per completion (N,)")\n    adv = adv[:, None]                                            # (N, 1), broadcast over the tokens\n    m = mask.to(logps.dtype)                                      # bool/long masks become 0/1 floats\n    ratio = torch.exp(logps - old_logps)\n    unclipped = ratio * adv\n    clipped = torch.clamp(ratio, 1 - epsilon, 1 + epsilon) * adv\n    surrogate = torch.minimum(unclipped, clipped)\n    d = ref_logps - logps\n    k3 = torch.exp(d) - d - 1                                     # >= 0\n    per_token = -surrogate + beta * k3\n    # masked sum (tokens after a completion\'s end do not count, even if their values are not finite)\n    per_token = torch.where(m != 0, per_token * m, torch.zeros_like(per_token))\n    per_completion = per_token.sum(-1) / m.sum(-1).clamp(min=1.0)\n    return per_completion.mean()'
VARIANTS.append(
    {"name": "honest_grpo_loss_reader",   # mask as weights and torch.where, max(count, 1), its own shape checks
     "cells": {"ex3b_grpo_loss": _HONEST_GRPO_LOSS_READER},
     "loses": []})

# An honest answer a reader wrote from the student notebook's text alone (issue 40): full marks.
_JUDGE_READER = """import numpy as np


def debiased_judge(p_a_correct_first, p_a_correct_second):
    \"\"\"Position-debiased judge score of N pairs, each judged in both orders.\"\"\"
    try:
        p1 = np.array(p_a_correct_first, dtype=np.float64)   # copy: inputs left unchanged
        p2 = np.array(p_a_correct_second, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise ValueError(f"inputs must be numeric arrays of probabilities: {e}")
    if p1.ndim != 1 or p2.ndim != 1:
        raise ValueError(f"inputs must be 1-D, got shapes {p1.shape} and {p2.shape}")
    if p1.shape != p2.shape:
        raise ValueError(f"inputs must have the same length, got {p1.shape} and {p2.shape}")
    if p1.shape[0] < 1:
        raise ValueError("inputs must hold at least one pair (N >= 1)")
    for name, p in (("p_a_correct_first", p1), ("p_a_correct_second", p2)):
        # NaN fails both comparisons, so it is caught here too
        if not np.all((p >= 0.0) & (p <= 1.0)):
            raise ValueError(f"{name} must hold probabilities in [0, 1] (no NaN)")
    soft = 0.5 * (p1 + (1.0 - p2))
    verdict = p1 > p2          # same as soft > 1/2, without rounding at the tie
    shift = p1 - (1.0 - p2)
    return soft.astype(np.float64), np.asarray(verdict, dtype=bool), shift.astype(np.float64)
"""
VARIANTS.append(
    {"name": "honest_judge_reader",                       # converts with np.array, checks each clause, p1 > p2 for the verdict
     "cells": {"ex3c_debiased_judge": _JUDGE_READER},
     "loses": []})
