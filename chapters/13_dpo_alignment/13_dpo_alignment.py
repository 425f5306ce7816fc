# %% [markdown]
# # Chapter 13 — Alignment: DPO, REINFORCE/GRPO and evaluating with a judge
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/llm-course/llm-course/blob/main/notebooks/13_dpo_alignment/13_dpo_alignment.ipynb)
#
# **Goal.** Next-token training does not make a model answer the way people prefer (Book §8.1).
# Direct Preference Optimization (DPO) adjusts a policy $\pi_\theta$ on pairs
# (`prompt`, `chosen`, `rejected`) so that the chosen answer becomes more likely *relative to* the
# rejected one, while a frozen reference $\pi_{\text{ref}}$ keeps it anchored (Book §8.2). RLHF and
# GRPO instead sample answers and push up the ones with high reward (Book §8.3). And once a model
# is tuned, evaluating it is its own problem: judges are biased and benchmarks leak (Book §8.4–8.5).
#
# **Book sections.** Book §8.1–§8.6. The book gives only concepts and one formula — no numbers,
# code or data. Everything numeric here (definitions from Rafailov et al. 2023 and TRL, the
# preference set, the bandit) is supplied by the course.
#
# **You will implement (graded).**
# 1. `sequence_logprobs` — summed log-probability of the completion tokens (3 pts)
# 2. `dpo_loss` — DPO loss, implicit rewards and margins, equal to TRL's `DPOTrainer` (3 pts)
# 3. `group_advantages` — GRPO's group-relative advantage (2 pts)
# 4. `ngram_overlap` — an n-gram contamination check between two texts (2 pts)
#
# plus one written question (3 pts) that asks for evidence from this notebook's outputs.
#
# Models: a tiny random Llama (for the exact comparison with TRL) and
# `HuggingFaceTB/SmolLM2-135M-Instruct` (the DPO run and the judge).

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
# Setup: on Colab this installs the course; locally `make lab` already did.
import importlib.util, subprocess, sys
if importlib.util.find_spec("course_utils") is None:
    subprocess.run(["git", "clone", "-q", "--depth", "1", "https://github.com/llm-course/llm-course", "/content/llm-course"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-e", "/content/llm-course"], check=True)
    sys.path.insert(0, "/content/llm-course")
import course_utils
DEVICE = course_utils.setup(seed=0)

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
import contextlib, copy, io, json, math, os, warnings
import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from course_utils import CI_MODE
from course_utils.models import load_model, quiet_hf, SMOLLM2
from course_utils.paths import asset_path

AUTOGRADING = bool(os.environ.get("NBGRADER_EXECUTION"))
torch.set_printoptions(precision=4, sci_mode=False)
quiet_hf()
warnings.filterwarnings("ignore", category=FutureWarning)
warnings.filterwarnings("ignore", category=UserWarning)


# %% [markdown]
# ## 1. Preference data
#
# A DPO example is a triple (Book §8.2.1): a `prompt`, a `chosen` (preferred) answer and a
# `rejected` answer. The course ships 48 pairs written for it in
# `assets/13_dpo_alignment/preferences.jsonl`: short factual questions, a concise correct answer
# as `chosen` and an evasive, rambling non-answer as `rejected`. 36 pairs train, 12 are held out.
# Note one honest caveat: the rejected answers reuse six evasive templates, so the held-out
# pairs have *new prompts and new chosen answers* but familiar rejected text.

# %% nbgrader={"grade": false, "grade_id": "data", "locked": true, "schema_version": 3, "solution": false, "task": false}
def load_pairs(path):
    """Read a preference JSONL file; refuse pairs with an empty prompt, chosen or rejected text."""
    pairs = []
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            ex = json.loads(line)
            for key in ("prompt", "chosen", "rejected"):
                if not isinstance(ex.get(key), str) or not ex[key].strip():
                    raise ValueError(f"{path}:{line_no}: preference pair has an empty or missing '{key}'")
            if ex["chosen"].strip() == ex["rejected"].strip():
                raise ValueError(f"{path}:{line_no}: chosen and rejected are identical")
            pairs.append(ex)
    return pairs

PAIRS = load_pairs(asset_path("13_dpo_alignment/preferences.jsonl"))
TRAIN_PAIRS = [p for p in PAIRS if p["split"] == "train"]
HELDOUT_PAIRS = [p for p in PAIRS if p["split"] == "heldout"]
print(f"{len(PAIRS)} pairs: {len(TRAIN_PAIRS)} train, {len(HELDOUT_PAIRS)} held out")
print(json.dumps(PAIRS[0], indent=1))
import tempfile
with tempfile.TemporaryDirectory() as d:
    bad = os.path.join(d, "bad.jsonl")
    with open(bad, "w") as f:
        f.write('{"prompt": "Hi?", "chosen": "Hello.", "rejected": ""}\n')
    try:
        load_pairs(bad)
    except ValueError as e:
        print("bad pair refused:", e.args[0].split(": ", 1)[1])


# %% [markdown]
# ## 2. Derive: the sequence log-probability and the DPO loss
#
# A causal LM gives, at position $t$, logits for the token at $t+1$. The log-probability of a
# completion $y$ given a prompt $x$ is the **sum** over completion tokens (prompt tokens and
# padding excluded):
#
# $$\log \pi(y\mid x) = \sum_{t \in \text{completion}} \log \pi(y_t \mid x, y_{<t}).$$
#
# With `input_ids` of shape $(B, T)$ and a `completion_mask` that is 1 on completion tokens,
# position $t$ of `logits` scores token $t+1$: use `logits[:, :-1]` against `input_ids[:, 1:]`
# and `completion_mask[:, 1:]`. This is exactly what TRL's `DPOTrainer` does; some tutorials
# average instead of summing, which is a different loss.
#
# DPO (Rafailov et al. 2023) with $\hat r(x,y) = \beta\,[\log\pi_\theta(y\mid x) - \log\pi_{\text{ref}}(y\mid x)]$,
# the **implicit reward**:
#
# $$\mathcal{L} = -\log\sigma\big(\hat r(x, y_w) - \hat r(x, y_l)\big), \qquad
# \text{margin} = \hat r(x,y_w) - \hat r(x,y_l),$$
#
# averaged over the batch. At initialisation $\pi_\theta = \pi_{\text{ref}}$, every reward is 0 and
# the loss is $-\log\sigma(0) = \ln 2 \approx 0.6931$. Book §8.2.2 writes only
# $\log\pi_\theta(y_w) - \log\pi_\theta(y_l)$; the reference terms are what anchor the policy. A
# larger $\beta$ makes the same log-ratio count more, so the policy needs to move *less* from the
# reference to reach a given loss (TRL's docs: "higher β means less deviation").

# %% [markdown]
# ### Exercise 1 — summed completion log-probabilities (3 points)
#
# Implement `sequence_logprobs`. Use `torch.log_softmax` on float32 logits (upcast 16-bit ones)
# and `gather`, not `torch.log(torch.softmax(...))`: when one logit is far ahead, the other tokens'
# probabilities underflow to 0 in float32 and their log becomes `-inf`, where `log_softmax` gives the
# finite value. Do not call a library DPO helper.

# %% nbgrader={"grade": false, "grade_id": "ex1_sequence_logprobs", "locked": false, "schema_version": 3, "solution": true, "task": false}
def sequence_logprobs(logits, input_ids, completion_mask):
    """Summed log-probability of the completion tokens of every sequence.

    logits: (B, T, V) float tensor, position t scores the token at position t+1.
    input_ids: (B, T) long tensor.  completion_mask: (B, T), 1 (or True) on completion tokens,
    0 on prompt tokens and padding.
    Returns a float32 tensor of shape (B,): sum over t >= 1 with completion_mask[:, t] == 1 of
    log softmax(logits[:, t-1])[input_ids[:, t]], computed in float32 whatever the logits' dtype
    (float64 logits too give a float32 result). Position 0 is never scored (no logits before it),
    even when completion_mask[:, 0] == 1 (a prompt of length 0).
    Positions outside the completion contribute nothing, even where their log-probability is -inf
    (a token the model rules out, e.g. a masked vocabulary entry, in the prompt or the padding).
    Inputs are left unchanged. Raises ValueError if the shapes do not match (logits (B, T, V),
    input_ids and completion_mask both (B, T), the same B and T), or if any row has no completion
    token at positions t >= 1 (an empty completion), even when the other rows have one.
    """
    ### BEGIN SOLUTION
    if logits.dim() != 3 or input_ids.shape != logits.shape[:2] or completion_mask.shape != input_ids.shape:
        raise ValueError(f"expected logits (B, T, V), input_ids and completion_mask (B, T); got "
                         f"{tuple(logits.shape)}, {tuple(input_ids.shape)}, {tuple(completion_mask.shape)}")
    mask = completion_mask[:, 1:].to(torch.float32)
    if (mask.sum(dim=-1) == 0).any():
        raise ValueError("a sequence has an empty completion (no completion token after position 0)")
    logp = torch.log_softmax(logits[:, :-1].to(torch.float32), dim=-1)
    token_logp = logp.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    # select, do not multiply: 0 * (-inf) is nan
    return torch.where(mask.bool(), token_logp, torch.zeros_like(token_logp)).sum(dim=-1)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex1_sequence_logprobs", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from course_utils.grading import check_close, check_shape, check_true
_g = torch.Generator().manual_seed(1)
_logits = torch.randn(2, 5, 7, generator=_g)
_ids = torch.tensor([[3, 1, 4, 1, 5], [2, 6, 5, 3, 5]])
_mask = torch.tensor([[0, 0, 1, 1, 1], [0, 1, 1, 1, 1]])
_out = sequence_logprobs(_logits, _ids, _mask)
check_shape("sequence_logprobs(...)", _out, (2,))
_lp = torch.log_softmax(_logits, -1)
_expected0 = _lp[0, 1, 4] + _lp[0, 2, 1] + _lp[0, 3, 5]   # tokens 2..4 scored by positions 1..3
check_close("sequence_logprobs row 0 (logits[t-1] scores token t; sum, not mean)", _out[0], _expected0, atol=1e-5)
check_true(bool((_out < 0).all()), "log-probabilities of sequences must be negative")
_lg = torch.zeros(1, 3, 4)
_lg[0, :, 0] = 120.0                          # token 0 is 120 nats ahead at every position
_out = sequence_logprobs(_lg, torch.tensor([[2, 1, 3]]), torch.tensor([[1, 1, 1]]))
check_close("sequence_logprobs with logit 0 120 ahead and completion_mask [[1, 1, 1]] (a prompt of length 0: "
            "position 0 is not scored; log_softmax stays finite where log(softmax) is -inf)", _out, [-240.0], atol=1e-3)
del _lp, _expected0, _lg
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import outcome, record
record("module of sequence_logprobs (it must be defined in this notebook)", sequence_logprobs.__module__)
_g = torch.Generator().manual_seed(7)
_logits = 3 * torch.randn(4, 9, 11, generator=_g)
_ids = torch.randint(0, 11, (4, 9), generator=_g)
_mask = torch.tensor([[0, 0, 0, 1, 1, 1, 0, 0, 0],      # trailing padding
                      [0, 1, 1, 1, 1, 1, 1, 1, 1],
                      [0, 0, 0, 0, 0, 0, 0, 1, 0],      # one completion token
                      [0, 0, 1, 1, 1, 1, 1, 0, 0]])
_out = sequence_logprobs(_logits, _ids, _mask)
record("sequence_logprobs on 4 rows with padding after the completion (a float32 (4,) tensor)", _out, atol=1e-4, rtol=1e-5)
record("logits after sequence_logprobs (inputs left unchanged)", _logits)
record("input_ids after sequence_logprobs (inputs left unchanged)", _ids)
record("completion_mask after sequence_logprobs (inputs left unchanged)", _mask)
_outb = sequence_logprobs(_logits.to(torch.bfloat16), _ids, _mask.bool())
record("sequence_logprobs with bfloat16 logits and a bool mask (a float32 result)", _outb, atol=1e-3, rtol=1e-5)
_bad_masks = {"completion token at position 0 only": torch.tensor([[1, 0, 0, 0, 0, 0, 0, 0, 0]] * 4),
              "all zeros": torch.zeros(4, 9, dtype=torch.long)}
for _what, _bad_mask in _bad_masks.items():
    record(f"sequence_logprobs with an empty completion ({_what}): must raise ValueError",
           outcome(sequence_logprobs, _logits, _ids, _bad_mask))
record("sequence_logprobs with completion_mask of batch 3, input_ids of batch 4: must raise ValueError",
       outcome(sequence_logprobs, _logits, _ids, _mask[:3]))
_lg_inf = _logits.clone()
_lg_inf[0, 0, _ids[0, 1]] = float("-inf")      # the prompt token at position 1 of row 0 is ruled out by the model
_lg_inf[3, 7, _ids[3, 8]] = float("-inf")      # and so is the padding token at position 8 of row 3
record("sequence_logprobs when a prompt or padding token has log-probability -inf (it must not contribute: "
       "select, do not multiply by the mask)", sequence_logprobs(_lg_inf, _ids, _mask), atol=1e-4, rtol=1e-5)
_mask0 = torch.tensor([[1, 1, 1, 1, 1, 1, 1, 1, 1],      # prompt of length 0, no padding
                       [1, 1, 1, 1, 0, 0, 0, 0, 0],      # prompt of length 0, then padding
                       [0, 0, 1, 1, 1, 1, 1, 1, 1],
                       [1, 1, 0, 0, 0, 0, 0, 0, 0]])     # prompt of length 0, a completion of 2 tokens
record("sequence_logprobs with completion_mask[:, 0] == 1 in rows 0, 1, 3 (a prompt of length 0: position 0 is "
       "not scored)", sequence_logprobs(_logits, _ids, _mask0), atol=1e-4, rtol=1e-5)
_far = _logits.clone()
_far[:, :, 0] = 150.0                           # token 0 is about 150 nats ahead at every position
record("sequence_logprobs when logit 0 is 150 ahead (log_softmax: finite; log(softmax) underflows to -inf)",
       sequence_logprobs(_far, _ids, _mask), atol=1e-4, rtol=1e-5)
record("sequence_logprobs with float64 logits (a float32 result)", sequence_logprobs(_logits.double(), _ids, _mask),
       atol=1e-4, rtol=1e-5)
record("sequence_logprobs with float16 logits, logit 0 150 ahead (computed in float32)",
       sequence_logprobs(_far.half(), _ids, _mask), atol=1e-2, rtol=1e-5)
_one_empty = _mask.clone()
_one_empty[2] = torch.tensor([1, 0, 0, 0, 0, 0, 0, 0, 0])
record("sequence_logprobs when only row 2 has an empty completion (the others have one): must raise ValueError",
       outcome(sequence_logprobs, _logits, _ids, _one_empty))
record("sequence_logprobs with logits (4, 10, 11), input_ids and completion_mask (4, 9): must raise ValueError",
       outcome(sequence_logprobs, torch.cat([_logits, _logits[:, :1]], 1), _ids, _mask))
record("sequence_logprobs with logits (4, 9, 11), input_ids (4, 9), completion_mask (4, 8): must raise ValueError",
       outcome(sequence_logprobs, _logits, _ids, _mask[:, 1:]))
record("sequence_logprobs with logits (4, 8, 11), input_ids and completion_mask (4, 9): must raise ValueError",
       outcome(sequence_logprobs, _logits[:, 1:], _ids, _mask))
### BEGIN REFERENCE
from course_utils.grading import expect


def _ref_slp(lg, ids, m):
    lg = lg.double()
    out = []
    for b in range(lg.shape[0]):
        s = 0.0
        for t in range(1, lg.shape[1]):
            if m[b, t]:
                s += torch.log_softmax(lg[b, t - 1], -1)[ids[b, t]].item()
        out.append(s)
    return torch.tensor(out, dtype=torch.float32)


expect("sequence_logprobs on 4 rows with padding after the completion (a float32 (4,) tensor)",
       _ref_slp(_logits, _ids, _mask), atol=1e-4, rtol=1e-5)
expect("sequence_logprobs when a prompt or padding token has log-probability -inf (it must not contribute: "
       "select, do not multiply by the mask)", _ref_slp(_logits, _ids, _mask), atol=1e-4, rtol=1e-5)
expect("sequence_logprobs with bfloat16 logits and a bool mask (a float32 result)",
       _ref_slp(_logits.to(torch.bfloat16).float(), _ids, _mask), atol=1e-3, rtol=1e-5)
expect("sequence_logprobs with completion_mask[:, 0] == 1 in rows 0, 1, 3 (a prompt of length 0: position 0 is "
       "not scored)", _ref_slp(_logits, _ids, _mask0), atol=1e-4, rtol=1e-5)
expect("sequence_logprobs when logit 0 is 150 ahead (log_softmax: finite; log(softmax) underflows to -inf)",
       _ref_slp(_far, _ids, _mask), atol=1e-4, rtol=1e-5)
expect("sequence_logprobs with float64 logits (a float32 result)", _ref_slp(_logits, _ids, _mask), atol=1e-4, rtol=1e-5)
expect("sequence_logprobs with float16 logits, logit 0 150 ahead (computed in float32)",
       _ref_slp(_far.half().float(), _ids, _mask), atol=1e-2, rtol=1e-5)
_g = torch.Generator().manual_seed(7)
expect("logits after sequence_logprobs (inputs left unchanged)", 3 * torch.randn(4, 9, 11, generator=_g))
expect("input_ids after sequence_logprobs (inputs left unchanged)", torch.randint(0, 11, (4, 9), generator=_g))
del _ref_slp
### END REFERENCE
del _g, _logits, _ids, _mask, _out, _outb, _bad_masks, _what, _bad_mask, _lg_inf, _mask0, _far, _one_empty
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 2 — DPO loss, implicit rewards, margins (3 points)
#
# Implement `dpo_loss` from the four per-pair log-probabilities. Do not call
# `trl`'s loss functions.

# %% nbgrader={"grade": false, "grade_id": "ex2_dpo_loss", "locked": false, "schema_version": 3, "solution": true, "task": false}
def dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=0.1):
    """DPO loss of a batch of preference pairs (Rafailov et al. 2023, TRL's "sigmoid" loss).

    All four inputs are (B,) tensors of summed completion log-probabilities.
    Returns (loss, chosen_rewards, rejected_rewards, margins), tensors in the inputs' dtype:
      chosen_rewards = beta * (policy_chosen - ref_chosen),
      rejected_rewards = beta * (policy_rejected - ref_rejected), both (B,);
      margins = chosen_rewards - rejected_rewards, (B,);
      loss = mean over the batch of -log sigmoid(margins), a 0-dim tensor (not a Python float)
             (use F.logsigmoid: it stays finite for large margins of either sign).
    Inputs are left unchanged. Raises ValueError if beta <= 0, or if the four inputs are not all
    1-D of the same shape (B,) (no broadcasting: a (1,) or (B, 1) input is an error too).
    """
    ### BEGIN SOLUTION
    if not beta > 0:
        raise ValueError(f"beta must be > 0, got {beta}")
    shapes = {tuple(t.shape) for t in (policy_chosen, policy_rejected, ref_chosen, ref_rejected)}
    if len(shapes) != 1 or len(next(iter(shapes))) != 1:
        raise ValueError(f"the four log-prob tensors must all have the same shape (B,), got {sorted(shapes)}")
    chosen_rewards = beta * (policy_chosen - ref_chosen)
    rejected_rewards = beta * (policy_rejected - ref_rejected)
    margins = chosen_rewards - rejected_rewards
    loss = -F.logsigmoid(margins).mean()
    return loss, chosen_rewards, rejected_rewards, margins
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex2_dpo_loss", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from course_utils.grading import check_close
_pc, _pr = torch.tensor([-20.0]), torch.tensor([-25.0])
_loss, _rc, _rr, _m = dpo_loss(_pc, _pr, _pc.clone(), _pr.clone())
check_close("DPO loss when policy == reference (should be ln 2)", _loss, math.log(2), atol=1e-6)
_loss, _rc, _rr, _m = dpo_loss(torch.tensor([-19.0]), torch.tensor([-27.0]), _pc, _pr, beta=0.1)
check_close("chosen reward beta*(pi - ref)", _rc, [0.1], atol=1e-5)
check_close("rejected reward beta*(pi - ref)", _rr, [-0.2], atol=1e-5)
check_close("margin = chosen reward - rejected reward", _m, [0.3], atol=1e-5)
check_close("DPO loss for chosen -20 -> -19, rejected -25 -> -27", _loss, -math.log(1 / (1 + math.exp(-0.3))), atol=1e-5)
_loss = dpo_loss(torch.tensor([-200.0]), torch.tensor([0.0]), torch.tensor([0.0]), torch.tensor([0.0]), beta=1.0)[0]
check_close("DPO loss for a margin of -200 (-log sigmoid(-200) = 200: F.logsigmoid stays finite, log(sigmoid) is inf)",
            _loss, 200.0, atol=1e-3)
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import outcome, record
record("module of dpo_loss (it must be defined in this notebook)", dpo_loss.__module__)
_g = torch.Generator().manual_seed(3)
_pc, _pr, _rc0, _rr0 = (-30 * torch.rand(6, generator=_g, dtype=torch.float64) for _ in range(4))
_beta = 0.37
_loss, _rc, _rr, _m = dpo_loss(_pc, _pr, _rc0, _rr0, beta=_beta)
record("DPO loss, 6 pairs, beta 0.37 (a 0-dim tensor)", _loss, atol=1e-9, rtol=1e-5)
record("chosen rewards, 6 pairs, beta 0.37", _rc, atol=1e-9, rtol=1e-5)
record("rejected rewards, 6 pairs, beta 0.37", _rr, atol=1e-9, rtol=1e-5)
record("margins, 6 pairs, beta 0.37", _m, atol=1e-9, rtol=1e-5)
for _name, _t in zip(("policy_chosen", "policy_rejected", "ref_chosen", "ref_rejected"), (_pc, _pr, _rc0, _rr0)):
    record(f"{_name} after dpo_loss (inputs left unchanged)", _t)
# large margins stay finite; the sign convention (chosen good -> small loss)
_loss_big = dpo_loss(torch.tensor([0.0]), torch.tensor([-5000.0]), torch.tensor([0.0]), torch.tensor([0.0]), beta=1.0)[0]
record("DPO loss for a huge positive margin (5000)", _loss_big, atol=1e-6, rtol=1e-5)
_loss_neg = dpo_loss(torch.tensor([-5000.0]), torch.tensor([0.0]), torch.tensor([0.0]), torch.tensor([0.0]), beta=1.0)[0]
record("DPO loss for a huge negative margin (-5000: finite, = -margin)", _loss_neg, atol=1e-2, rtol=1e-5)
for _b in (0.0, -0.1):
    record(f"dpo_loss with beta={_b}: must raise ValueError", outcome(dpo_loss, _pc, _pr, _rc0, _rr0, beta=_b))
record("dpo_loss with policy_rejected of 5 pairs, the others of 6: must raise ValueError",
       outcome(dpo_loss, _pc, _pr[:5], _rc0, _rr0))
record("dpo_loss with ref_rejected of shape (1,), the others (6,): must raise ValueError (no broadcasting)",
       outcome(dpo_loss, _pc, _pr, _rc0, _rr0[:1]))
record("dpo_loss with ref_chosen of 5 pairs, the others of 6: must raise ValueError",
       outcome(dpo_loss, _pc, _pr, _rc0[:5], _rr0))
record("dpo_loss with all four inputs of shape (6, 1): must raise ValueError (not 1-D)",
       outcome(dpo_loss, _pc[:, None], _pr[:, None], _rc0[:, None], _rr0[:, None]))
record("dpo_loss with all four inputs 0-dim: must raise ValueError (not 1-D)",
       outcome(dpo_loss, _pc[0], _pr[0], _rc0[0], _rr0[0]))
_loss5 = dpo_loss(_pc, _pr, _rc0, _rr0, beta=5.0)
record("DPO loss, chosen and rejected rewards, margins with beta 5 (policy and reference both matter)", list(_loss5),
       atol=1e-9, rtol=1e-5)
_pc32 = torch.tensor([-12.0, -30.0, -7.5])
_loss_d = dpo_loss(_pc32, _pc32 - 4, _pc32 + 1, _pc32 - 2)
record("dpo_loss with the default beta on float32 inputs (chosen +1 and rejected -2 vs the reference: rewards "
       "-0.1 and -0.2)", list(_loss_d), atol=1e-6, rtol=1e-5)
### BEGIN REFERENCE
from course_utils.grading import expect
_erc, _err = _beta * (_pc - _rc0), _beta * (_pr - _rr0)
expect("chosen rewards, 6 pairs, beta 0.37", _erc, atol=1e-9, rtol=1e-5)
expect("rejected rewards, 6 pairs, beta 0.37", _err, atol=1e-9, rtol=1e-5)
expect("margins, 6 pairs, beta 0.37", _erc - _err, atol=1e-9, rtol=1e-5)
expect("DPO loss, 6 pairs, beta 0.37 (a 0-dim tensor)", torch.log1p(torch.exp(-(_erc - _err))).mean(), atol=1e-9, rtol=1e-5)
expect("DPO loss for a huge positive margin (5000)", torch.tensor(0.0), atol=1e-6, rtol=1e-5)
expect("DPO loss for a huge negative margin (-5000: finite, = -margin)", torch.tensor(5000.0), atol=1e-2, rtol=1e-5)
_erc5, _err5 = 5.0 * (_pc - _rc0), 5.0 * (_pr - _rr0)
expect("DPO loss, chosen and rejected rewards, margins with beta 5 (policy and reference both matter)",
       [torch.nn.functional.softplus(-(_erc5 - _err5)).mean(), _erc5, _err5, _erc5 - _err5], atol=1e-9, rtol=1e-5)
_erc_d, _err_d = torch.full((3,), -0.1), torch.full((3,), -0.2)
expect("dpo_loss with the default beta on float32 inputs (chosen +1 and rejected -2 vs the reference: rewards "
       "-0.1 and -0.2)", [torch.nn.functional.softplus(-(_erc_d - _err_d)).mean(), _erc_d, _err_d, _erc_d - _err_d],
       atol=1e-6, rtol=1e-5)
del _erc5, _err5, _erc_d, _err_d
_g = torch.Generator().manual_seed(3)
for _name, _t in zip(("policy_chosen", "policy_rejected", "ref_chosen", "ref_rejected"),
                     [-30 * torch.rand(6, generator=_g, dtype=torch.float64) for _ in range(4)]):
    expect(f"{_name} after dpo_loss (inputs left unchanged)", _t)
del _erc, _err
### END REFERENCE
del _g, _pc, _pr, _rc0, _rr0, _beta, _loss, _rc, _rr, _m, _name, _t, _loss_big, _loss_neg, _b, _loss5, _pc32, _loss_d
### END HIDDEN TESTS

# %% [markdown]
# ## 3. Verify against the library: our loss equals `DPOTrainer.compute_loss`
#
# TRL's `DPOTrainer` tokenizes `prompt` and `prompt + completion`, **appends EOS** to each
# completion, and its collator stacks `[chosen; rejected]` into one batch with a
# `completion_mask`. We build a tiny random Llama (seeded) with SmolLM2's tokenizer, a perturbed
# copy as the policy, and pass the reference **explicitly** as a `deepcopy`: with
# `ref_model=None` (and no PEFT) TRL 1.16 reloads the reference *by name* from
# `model.config._name_or_path` — an `OSError` for an in-memory model, and the wrong reference for
# a model fine-tuned earlier in the notebook. On CPU, `bf16=False` and `use_cpu=True`.

# %% nbgrader={"grade": false, "grade_id": "trl_setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
# Skipped under autograding (no graded test uses it): trl's import alone takes seconds.
if not AUTOGRADING:
    with contextlib.redirect_stderr(io.StringIO()):          # trl/bitsandbytes print import notices
        import datasets
        from trl import DPOConfig, DPOTrainer
        from transformers import LlamaConfig, LlamaForCausalLM
        from transformers.trainer_callback import PrinterCallback
    datasets.disable_progress_bars()

    policy, tok = load_model(SMOLLM2, verbose=True)          # real SmolLM2-135M-Instruct (offline: Q4_1-rounded weights)

    def chat_prompt(question):
        return tok.apply_chat_template([{"role": "user", "content": question}], tokenize=False, add_generation_prompt=True)

    def to_dataset(pairs):
        return datasets.Dataset.from_list([{"prompt": chat_prompt(p["prompt"]), "chosen": p["chosen"],
                                            "rejected": p["rejected"]} for p in pairs])

    def make_trainer(model, ref, train_pairs, **config):
        args = DPOConfig(output_dir=str(course_utils.paths.cache_dir() / "dpo_runs"), bf16=False, use_cpu=True,
                         report_to="none", disable_tqdm=True, save_strategy="no", logging_steps=1,
                         max_length=256, seed=0, **config)
        with contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trainer = DPOTrainer(model=model, ref_model=ref, args=args, train_dataset=to_dataset(train_pairs),
                                 processing_class=tok)
        trainer.remove_callback(PrinterCallback)              # no log dict printed at every step
        return trainer

    torch.manual_seed(0)
    tiny_cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                           pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=tok.bos_token_id)
    tiny_ref = LlamaForCausalLM(tiny_cfg).eval()
    tiny_policy = copy.deepcopy(tiny_ref)
    with torch.no_grad():
        for p in tiny_policy.parameters():
            p.add_(0.05 * torch.randn_like(p))
    tiny_trainer = make_trainer(tiny_policy, tiny_ref, TRAIN_PAIRS[:4], beta=0.3, per_device_train_batch_size=4)

    def collate(pairs):
        """TRL's tokenization (EOS appended) and collator -> one batch [chosen; rejected] with completion_mask."""
        t = make_trainer(tiny_policy, tiny_ref, pairs)
        return t.data_collator([t.train_dataset[i] for i in range(len(pairs))])

    tiny_batch = collate(TRAIN_PAIRS[:4])
    print({k: tuple(v.shape) for k, v in tiny_batch.items()})
    print("completion of pair 0 (chosen), EOS appended by TRL:",
          repr(tok.decode(tiny_batch["input_ids"][0][tiny_batch["completion_mask"][0].bool()])))


# %% nbgrader={"grade": false, "grade_id": "trl_compare", "locked": true, "schema_version": 3, "solution": false, "task": false}
def pair_logprobs(model, batch):
    """Summed completion log-probs of a TRL-collated batch [chosen; rejected] -> (chosen, rejected)."""
    with torch.no_grad():
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    return sequence_logprobs(logits, batch["input_ids"], batch["completion_mask"]).chunk(2)

if not AUTOGRADING:
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trl_loss = tiny_trainer.compute_loss(tiny_trainer.model, tiny_batch).item()
    pc, pr = pair_logprobs(tiny_policy, tiny_batch)
    rc, rr = pair_logprobs(tiny_ref, tiny_batch)
    ours = dpo_loss(pc, pr, rc, rr, beta=0.3)
    ours_mean = dpo_loss(pc / tiny_batch["completion_mask"][:4, 1:].sum(-1), pr / tiny_batch["completion_mask"][4:, 1:].sum(-1),
                         rc / tiny_batch["completion_mask"][:4, 1:].sum(-1), rr / tiny_batch["completion_mask"][4:, 1:].sum(-1), beta=0.3)
    at_init = dpo_loss(rc, rr, rc, rr, beta=0.3)[0].item()
    print(f"TRL DPOTrainer.compute_loss     : {trl_loss:.6f}")
    print(f"ours (summed log-probs)         : {ours[0].item():.6f}   |diff| = {abs(ours[0].item() - trl_loss):.1e}")
    print(f"a 'mean log-prob' variant       : {ours_mean[0].item():.6f}   (a different loss)")
    print(f"policy == reference             : {at_init:.6f}   ln 2 = {math.log(2):.6f}")
    course_utils.grading.check_close("our DPO loss vs TRL", ours[0].item(), trl_loss, atol=1e-5)

# %% [markdown]
# ## 4. A short DPO run on SmolLM2-135M-Instruct
#
# Policy: SmolLM2-135M-Instruct. Reference: a frozen `deepcopy` of it made *before* training.
# We measure on the 12 held-out pairs, before and after, with our own functions: the summed
# log-probs of chosen and rejected under the policy, the implicit-reward margin, and the
# **held-out preference accuracy** = share of pairs with margin > 0 (strict, as TRL's
# `rewards/accuracies`: at step 0 every margin is exactly 0, so it is 0 %, not 50 %).
# To fit 2 CPU cores (≤ 5 min, ≤ 4 GiB) only the last `TRAIN_LAYERS` = 10 of the 30 decoder layers
# are updated; the embeddings (tied to the LM head) and the first 20 layers stay frozen. That cuts
# the backward pass and AdamW's two moments to a third; on a GPU you would train every layer.
# Under autograding this section is skipped (no graded test uses it). CI mode runs 2 steps, which only
# proves the code runs; full mode runs `N_STEPS` = 10.

# %% nbgrader={"grade": false, "grade_id": "dpo_run", "locked": true, "schema_version": 3, "solution": false, "task": false}
N_STEPS = 0 if AUTOGRADING else (2 if CI_MODE else 10)     # CI mode: 2 steps (a smoke run); full mode: 10
TRAIN_LAYERS = 10                                            # the last 10 of 30 decoder layers are trained
LR = 1e-5
if not AUTOGRADING:
    ref_model = copy.deepcopy(policy).eval()          # the frozen reference: a copy made before training
    for p in ref_model.parameters():
        p.requires_grad_(False)
    heldout_batch = collate(HELDOUT_PAIRS)

def heldout_stats(model, batch):
    pc, pr = pair_logprobs(model, batch)
    rc, rr = pair_logprobs(ref_model, batch)
    loss, crew, rrew, margins = dpo_loss(pc, pr, rc, rr, beta=0.1)
    return {"logp chosen": pc.mean().item(), "logp rejected": pr.mean().item(), "margin": margins.mean().item(),
            "accuracy": (margins > 0).float().mean().item(), "loss": loss.item()}

if N_STEPS:
    before = heldout_stats(policy, heldout_batch)
    n_layers = policy.config.num_hidden_layers
    for name, p in policy.named_parameters():                 # freeze all but the last TRAIN_LAYERS layers
        p.requires_grad_(any(f"layers.{i}." in name for i in range(n_layers - TRAIN_LAYERS, n_layers)))
    n_train = sum(p.numel() for p in policy.parameters() if p.requires_grad)
    print(f"trainable: {n_train:,} of {sum(p.numel() for p in policy.parameters()):,} parameters "
          f"(last {TRAIN_LAYERS} of {n_layers} layers)")
    trainer = make_trainer(policy, ref_model, TRAIN_PAIRS, beta=0.1, learning_rate=LR, max_steps=N_STEPS,
                           per_device_train_batch_size=4, lr_scheduler_type="constant")
    with contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()
    policy.eval()
    after = heldout_stats(policy, heldout_batch)
    log = [h for h in trainer.state.log_history if "loss" in h]
    print(f"{N_STEPS} DPO steps (batch 4, beta 0.1, lr {LR:g}), model SmolLM2-135M-Instruct")
    if CI_MODE:
        print("CI mode: a 2-step smoke run, too short to mean anything; full mode trains 10 steps")
    print(f"{'held-out':15s} {'before':>9s} {'after':>9s}")
    for k in before:
        print(f"{k:15s} {before[k]:9.3f} {after[k]:9.3f}")
    fig, axes = plt.subplots(1, 2, figsize=(9, 3))
    steps = [h["step"] for h in log]
    axes[0].plot(steps, [h["loss"] for h in log], marker="o"); axes[0].axhline(math.log(2), ls="--", c="gray", label="ln 2")
    axes[0].set(xlabel="step", ylabel="DPO loss (train batch)", title="TRL loss"); axes[0].legend()
    axes[1].plot(steps, [h["rewards/margins"] for h in log], marker="o", label="margin")
    axes[1].plot(steps, [h["logps/chosen"] - log[0]["logps/chosen"] for h in log], label="Δ logp chosen")
    axes[1].plot(steps, [h["logps/rejected"] - log[0]["logps/rejected"] for h in log], label="Δ logp rejected")
    axes[1].set(xlabel="step", ylabel="nats", title="TRL train-batch metrics"); axes[1].legend(fontsize=7)
    plt.tight_layout(); plt.show()
else:
    print("DPO run skipped under autograding; run the notebook in full mode to see it")

# %% nbgrader={"grade": false, "grade_id": "dpo_generations", "locked": true, "schema_version": 3, "solution": false, "task": false}
from course_utils.generation import generate_text
GEN_PROMPTS = [HELDOUT_PAIRS[0]["prompt"], "Why is the sky blue?"]
if N_STEPS:
    before_dpo = generate_text(ref_model, tok, GEN_PROMPTS, max_new_tokens=28, batch=True)
    after_dpo = generate_text(policy, tok, GEN_PROMPTS, max_new_tokens=28, batch=True)
    for q, a0, a1 in zip(GEN_PROMPTS, before_dpo, after_dpo):
        print("Q:", q)
        print("  reference:", a0)
        print("  after DPO:", a1)

# %% [markdown]
# **Observe.** The margin grows and the held-out accuracy rises from 0 (all margins exactly 0
# at step 0). Look at the two log-prob rows: DPO raises the chosen answer *relative to* the
# rejected one (Book §8.2.1's "relativamente"). It does not promise that the chosen log-prob
# rises in absolute terms. In the course's full-mode run (10 steps, lr $10^{-5}$) the held-out
# chosen log-prob moved from −17.00 to −16.81 while the rejected one fell from −93.1 to −104.4:
# almost all of the margin (0 → 1.15) came from pushing the rejected answers down; in other runs
# both fall and only the gap widens. The generations change in style at most: DPO redistributes
# probability among behaviours the model already has; it does not add knowledge (Book §8.2.3,
# §8.5.2).
#
# **Too far.** With a higher learning rate (3·10⁻⁵, all layers, 16 steps) the project's run drove
# the training loss to ≈ 10⁻⁷ and the held-out rejected log-prob to −246, and the model started
# inventing terms ("Rayleigh Scavenger Blood scattering"): the DPO loss keeps rewarding a lower
# rejected log-prob long after the preference is learned, which is why β, the learning rate and
# the number of steps are kept small (Book §8.2.2's role of β).

# %% [markdown]
# ## 5. REINFORCE on a bandit: why baselines matter (Book §8.3.2, §8.3.4, §8.5.3)
#
# A 3-armed bandit, mean rewards $[1, 0.5, 0]$ plus Gaussian noise (sd 0.5), a softmax policy
# $\pi = \operatorname{softmax}(\theta)$. REINFORCE estimates $\nabla_\theta \mathbb{E}[r]$ from one
# sample by $(r - b)\,\nabla_\theta \log\pi(a) = (r - b)(e_a - \pi)$. Any baseline $b$ that does not
# depend on $a$ leaves the mean unchanged, because $\mathbb{E}_a[e_a - \pi] = 0$; a good $b$
# (here the expected reward $\sum_a \pi_a \bar r_a$) shrinks the variance.

# %% nbgrader={"grade": false, "grade_id": "bandit_variance", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
MEAN_R = torch.tensor([1.0, 0.5, 0.0])

def reinforce_grads(theta, n, baseline, gen):
    probs = torch.softmax(theta, -1)
    a = torch.multinomial(probs, n, replacement=True, generator=gen)
    r = MEAN_R[a] + 0.5 * torch.randn(n, generator=gen)
    b = (probs * MEAN_R).sum() if baseline else 0.0
    return (r - b)[:, None] * (F.one_hot(a, 3).float() - probs)

gen = torch.Generator().manual_seed(0)
theta0 = torch.zeros(3)
g_plain = reinforce_grads(theta0, 200_000, False, gen)
g_base = reinforce_grads(theta0, 200_000, True, gen)
exact = torch.softmax(theta0, -1) * (MEAN_R - (torch.softmax(theta0, -1) * MEAN_R).sum())
print("exact gradient      :", exact.numpy().round(4))
print("mean, no baseline   :", g_plain.mean(0).numpy().round(2))
print("mean, with baseline :", g_base.mean(0).numpy().round(2))
print(f"total variance, no baseline  : {g_plain.var(0).sum().item():.2f}")
print(f"total variance, with baseline: {g_base.var(0).sum().item():.2f}")


# %% nbgrader={"grade": false, "grade_id": "bandit_train", "locked": true, "schema_version": 3, "solution": false, "task": false}
def train_bandit(baseline, steps=200, lr=0.5, seed=0):
    gen = torch.Generator().manual_seed(seed)
    theta, p_best = torch.zeros(3), []
    for _ in range(steps):
        theta = theta + lr * reinforce_grads(theta, 1, baseline, gen)[0]
        p_best.append(torch.softmax(theta, -1)[0].item())
    return np.array(p_best)

seeds = range(10 if CI_MODE else 30)
runs = {name: np.stack([train_bandit(bl, seed=s) for s in tqdm(seeds, desc=name)]) for name, bl in
        [("no baseline", False), ("with baseline", True)]}
fig, ax = plt.subplots(figsize=(6, 3))
for name, r in runs.items():
    ax.plot(r.mean(0), label=f"{name} (mean of {len(r)} seeds)")
    ax.fill_between(range(r.shape[1]), np.percentile(r, 10, 0), np.percentile(r, 90, 0), alpha=0.2)
ax.set(xlabel="REINFORCE step (1 sample each, lr 0.5)", ylabel="π(best arm)", title="Bandit: concentration on the best arm")
ax.legend(); plt.tight_layout(); plt.show()
for name, r in runs.items():
    print(f"{name:14s}: π(best) after 50 steps {r[:, 49].mean():.2f} (10th pct {np.percentile(r[:, 49], 10):.2f}), "
          f"after 200 steps {r[:, -1].mean():.2f}")


# %% [markdown]
# With one sample per step, the baseline gives a faster and more reliable rise; both runs end
# concentrated on one arm — the "collapse" of Book §8.5.3 is just what maximising expected reward
# does in a small action space with no entropy or KL term.
#
# ### GRPO: the group is the baseline (Book §8.3.3)
#
# GRPO samples a **group** of $G$ answers per prompt and uses the group's own statistics as the
# baseline: $A_i = (r_i - \bar r)/(s + \varepsilon)$, with $s$ the **sample** standard deviation
# (Bessel's $G-1$, as TRL's `nanstd`) and $\varepsilon = 10^{-4}$ (TRL). No learned value model is
# needed — that is its main saving (memory), rather than sample efficiency: it needs $G$ samples per prompt.
#
# ### Exercise 3 — group-relative advantage (2 points)

# %% nbgrader={"grade": false, "grade_id": "ex3_group_advantages", "locked": false, "schema_version": 3, "solution": true, "task": false}
def group_advantages(rewards, eps=1e-4):
    """GRPO advantages of a (num_groups, G) float tensor of rewards (one row per prompt).

    A[i, j] = (rewards[i, j] - mean_i) / (std_i + eps), mean and std over row i, std with Bessel's
    correction (divide by G - 1), eps added to the std (not to the variance, not a floor on the std).
    A group whose rewards are all equal gets advantages 0.
    Returns a tensor of the same shape and dtype; the input is left unchanged.
    Raises ValueError if rewards is not 2-D (1-D and 3-D alike) or G < 2 (G = 0 too).
    """
    ### BEGIN SOLUTION
    if rewards.dim() != 2 or rewards.shape[1] < 2:
        raise ValueError(f"rewards must have shape (num_groups, G) with G >= 2, got {tuple(rewards.shape)}")
    mean = rewards.mean(dim=1, keepdim=True)
    std = rewards.std(dim=1, keepdim=True, unbiased=True)
    return (rewards - mean) / (std + eps)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex3_group_advantages", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from course_utils.grading import check_close, check_shape
_A = group_advantages(torch.tensor([[1.0, 0.0, 0.0, 1.0]]))
check_shape("group_advantages", _A, (1, 4))
check_close("advantages of rewards [1, 0, 0, 1] (sample std 0.5774)", _A, [[0.866, -0.866, -0.866, 0.866]], atol=1e-3)
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import outcome, record
record("module of group_advantages (it must be defined in this notebook)", group_advantages.__module__)
_g = torch.Generator().manual_seed(11)
_r = torch.randn(3, 6, generator=_g, dtype=torch.float64)
_r[2] = 0.25                                 # a group with equal rewards
_A = group_advantages(_r)
record("group_advantages of 3 groups of 6 float64 rewards (Bessel std, eps 1e-4)", _A, atol=1e-9, rtol=1e-5)
record("group_advantages of a group of equal rewards (exactly zero)", _A[2])
record("rewards after group_advantages (left unchanged)", _r)
record("group_advantages with eps=0.5", group_advantages(_r[:2], eps=0.5), atol=1e-9, rtol=1e-5)
record("group_advantages of [[2.0, 0.0]] in float32 (G=2, a float32 result)",
       group_advantages(torch.tensor([[2.0, 0.0]], dtype=torch.float32)), atol=1e-5, rtol=1e-5)
for _bad in (torch.ones(4), torch.ones(3, 1), torch.ones(3, 0), torch.ones(2, 3, 4)):
    record(f"group_advantages of rewards of shape {tuple(_bad.shape)}: must raise ValueError", outcome(group_advantages, _bad))
_r4 = torch.tensor([[0.0, 0.0, 0.0, 1.0], [3.0, 1.0, 2.0, 2.0], [0.5, 0.5, 0.5, 0.5], [1.0, -1.0, 4.0, 0.0]],
                   dtype=torch.float64)
record("group_advantages of a (4, 4) float64 batch with eps=0.01 (per-row statistics on a square input)",
       group_advantages(_r4, eps=0.01), atol=1e-9, rtol=1e-5)
### BEGIN REFERENCE
from course_utils.grading import expect
_m = _r.mean(1, keepdim=True)
_s = ((_r - _m) ** 2).sum(1, keepdim=True).div(5).sqrt()
expect("group_advantages of 3 groups of 6 float64 rewards (Bessel std, eps 1e-4)", (_r - _m) / (_s + 1e-4),
       atol=1e-9, rtol=1e-5)
expect("group_advantages of a group of equal rewards (exactly zero)", torch.zeros(6, dtype=torch.float64))
expect("group_advantages with eps=0.5", (_r[:2] - _m[:2]) / (_s[:2] + 0.5), atol=1e-9, rtol=1e-5)
_m4 = _r4.mean(1, keepdim=True)
expect("group_advantages of a (4, 4) float64 batch with eps=0.01 (per-row statistics on a square input)",
       (_r4 - _m4) / (((_r4 - _m4) ** 2).sum(1, keepdim=True).div(3).sqrt() + 0.01), atol=1e-9, rtol=1e-5)
del _m4
expect("group_advantages of [[2.0, 0.0]] in float32 (G=2, a float32 result)",
       torch.tensor([[1.0 / (2 ** 0.5 + 1e-4), -1.0 / (2 ** 0.5 + 1e-4)]]), atol=1e-5, rtol=1e-5)
_g = torch.Generator().manual_seed(11)
_r0 = torch.randn(3, 6, generator=_g, dtype=torch.float64)
_r0[2] = 0.25
expect("rewards after group_advantages (left unchanged)", _r0)
del _m, _s, _r0
### END REFERENCE
del _g, _r, _A, _bad, _r4
### END HIDDEN TESTS

# %% [markdown]
# ## 6. Evaluation: LLM-as-a-judge and its biases (Book §8.4.4, §8.5.4)
#
# We use SmolLM2-135M-Instruct (the frozen reference, untouched by DPO) as a judge. The prompt
# asks "Which answer is better, A or B?" and we read the next-token probabilities of "A" and "B".
# Two measurements:
#
# * **position bias**: judge each pair in both orders (good answer as A, then as B). A consistent
#   judge changes its letter when the answers swap; the share of pairs where it keeps the *same
#   letter* is the flip-failure rate. Chance is 50 % for a judge that ignores content.
# * **verbosity bias**: the *same* correct answer against a copy padded with content-free
#   filler, in both orders; how often is the padded one preferred?

# %% nbgrader={"grade": false, "grade_id": "judge", "locked": true, "schema_version": 3, "solution": false, "task": false}
JUDGE_TEMPLATE = ("Question: {q}\n\nAnswer A: {a}\n\nAnswer B: {b}\n\n"
                  "Which answer is better, A or B? Reply with one letter.")
FILLER = (" In addition, it is worth noting that this is a well-known fact that many people find interesting and useful to remember.")

def judge_prob_a(judge, items, batch_size=8):
    """P(A) / (P(A) + P(B)) of the judge's next token, for (question, answer A, answer B) items."""
    id_a, id_b = tok.encode("A", add_special_tokens=False)[0], tok.encode("B", add_special_tokens=False)[0]
    out = []
    old_side, tok.padding_side = tok.padding_side, "left"
    for i in range(0, len(items), batch_size):
        texts = [chat_prompt(JUDGE_TEMPLATE.format(q=q, a=a, b=b)) for q, a, b in items[i:i + batch_size]]
        enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.no_grad():
            last = judge(**enc).logits[:, -1, [id_a, id_b]]
        out.append(torch.softmax(last.float(), -1)[:, 0])
    tok.padding_side = old_side
    return torch.cat(out)

N_JUDGE = 0 if AUTOGRADING else (8 if CI_MODE else len(PAIRS))    # CI mode: 8 pairs (a smoke run)
if N_JUDGE:
    jp = PAIRS[:N_JUDGE]
    p_good_first = judge_prob_a(ref_model, [(p["prompt"], p["chosen"], p["rejected"]) for p in jp])
    p_good_second = 1 - judge_prob_a(ref_model, [(p["prompt"], p["rejected"], p["chosen"]) for p in jp])
    v_long_first = judge_prob_a(ref_model, [(p["prompt"], p["chosen"] + FILLER, p["chosen"]) for p in jp])
    v_long_second = 1 - judge_prob_a(ref_model, [(p["prompt"], p["chosen"], p["chosen"] + FILLER) for p in jp])
    same_letter = ((p_good_first > 0.5) != (p_good_second > 0.5)).float()   # picked A both times or B both times
    said_a = ((p_good_first > 0.5).float().mean() + (1 - (p_good_second > 0.5).float()).mean()).item() / 2
    print(f"judge = SmolLM2-135M-Instruct, {N_JUDGE} pairs, both orders")
    if CI_MODE:
        print("CI mode: 8 pairs only (a smoke run); full mode judges all 48")
    print(f"good answer preferred   : as A {(p_good_first > 0.5).float().mean():.2f}, as B {(p_good_second > 0.5).float().mean():.2f}")
    print(f"share of verdicts 'A'   : {said_a:.2f}")
    print(f"position bias (same letter after swapping): {same_letter.mean():.2f}")
    print(f"padded answer preferred : as A {(v_long_first > 0.5).float().mean():.2f}, as B {(v_long_second > 0.5).float().mean():.2f}, "
          f"overall {torch.cat([v_long_first, v_long_second]).gt(0.5).float().mean():.2f}")
    fig, ax = plt.subplots(figsize=(4.5, 4))
    ax.scatter(p_good_first, p_good_second, s=14)
    ax.axhline(0.5, c="gray", lw=0.5); ax.axvline(0.5, c="gray", lw=0.5)
    ax.set(xlabel="P(judge prefers good answer), good shown as A", ylabel="same, good shown as B",
           title="Judge consistency under swapping", xlim=(0, 1), ylim=(0, 1))
    plt.tight_layout(); plt.show()
else:
    print("judge sweep skipped under autograding; run the notebook in full mode to see it")


# %% [markdown]
# ## 7. Contamination: n-gram overlap (Book §8.4.3)
#
# If benchmark items appear in the training data, scores measure memory, not ability. A common
# first check (GPT-3, PaLM and later reports used variants of it) counts the benchmark's word
# $n$-grams that also occur in the training text.
#
# ### Exercise 4 — n-gram overlap (2 points)

# %% nbgrader={"grade": false, "grade_id": "ex4_ngram_overlap", "locked": false, "schema_version": 3, "solution": true, "task": false}
def ngram_overlap(benchmark, training, n=8):
    """Fraction of the benchmark's distinct word n-grams that also occur in the training text.

    Words: text.lower().split() (str.lower, not casefold; str.split() with no argument, so any
    run of whitespace, Unicode too, separates words and leading/trailing whitespace makes no empty
    word), punctuation kept as part of the words; so "The  cat" and "the cat" have the same words.
    An n-gram is a tuple of n consecutive words (not the words joined into one string).
    Returns a float in [0, 1]:
    |set(ngrams(benchmark)) & set(ngrams(training))| / |set(ngrams(benchmark))|
    (a training text with fewer than n words has no n-grams: the result is 0.0, not an error).
    Raises ValueError if n < 1 (0 and negative n) or the benchmark has fewer than n words
    (exactly n words is fine: one n-gram).
    """
    ### BEGIN SOLUTION
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    def grams(text):
        words = text.lower().split()
        return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}
    bench = grams(benchmark)
    if not bench:
        raise ValueError(f"the benchmark text has fewer than n={n} words")
    return len(bench & grams(training)) / len(bench)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex4_ngram_overlap", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from course_utils.grading import check_close
check_close("identical texts", ngram_overlap("a b c d e f g h i j", "a b c d e f g h i j"), 1.0)
check_close("disjoint texts", ngram_overlap("a b c d e f g h i j", "k l m n o p q r s t"), 0.0)
check_close("3 of 3 benchmark 8-grams found", ngram_overlap("a b c d e f g h i j", "x a b c d e f g h i j y"), 1.0)
check_close("1 of 3 benchmark 8-grams found", ngram_overlap("a b c d e f g h i j", "a b c d e f g h z"), 1 / 3)
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import outcome, record
record("module of ngram_overlap (it must be defined in this notebook)", ngram_overlap.__module__)


def _as_float(v):
    """A float (or a subclass of float, e.g. numpy.float64) is recorded as a float; anything else as it is."""
    return float(v) if isinstance(v, float) else v


_bench = "The quick brown fox jumps over the lazy dog near the river bank"
_train = "we saw that THE   quick brown\nfox jumps over a lazy dog near the river bank today"
for _n in (1, 2, 3, 5):
    record(f"ngram_overlap with n={_n} (lower-case, whitespace split; a float)", _as_float(ngram_overlap(_bench, _train, n=_n)),
           atol=1e-6, rtol=1e-5)
record("ngram_overlap('a b a b a b', 'a b', n=2) (repeated n-grams count once)",
       _as_float(ngram_overlap("a b a b a b", "a b", n=2)), atol=1e-6, rtol=1e-5)
record("ngram_overlap('end. of it', 'end of it', n=2) (punctuation stays part of the word)",
       _as_float(ngram_overlap("end. of it", "end of it", n=2)), atol=1e-6, rtol=1e-5)
record("ngram_overlap('ab cd', 'abc d', n=1) (characters are not words)",
       _as_float(ngram_overlap("ab cd", "abc d", n=1)), atol=1e-6, rtol=1e-5)
for _args in (("a b", "a b", 3), ("a b c", "a b c", 0), ("a b c", "a b c", -1), (" \n\t ", "a b", 1)):
    record(f"ngram_overlap{_args}: must raise ValueError", outcome(ngram_overlap, *_args))
_cases = {"benchmark of exactly n=3 words": ("a b c", "x a b c", 3),
          "training text shorter than n=3 (0.0, not an error)": ("a b c", "a b", 3),
          "leading/trailing whitespace, a no-break space and a tab (str.split())":
              ("\n The\u00a0quick brown\tfox ", "the quick brown fox jumps", 2),
          "'STRASSE ist lang' vs 'straße ist lang' (str.lower, not casefold)": ("STRASSE ist lang", "straße ist lang", 1),
          "'ab c' vs 'a bc' (n-grams are tuples of words, not joined strings)": ("ab c", "a bc", 2),
          "6 benchmark 2-grams, training shares 2 and has 5 more (divide by the benchmark's count)":
              ("a b c d e f g", "a b c x y z w v", 2)}
for _what, _args in _cases.items():
    record(f"ngram_overlap on {_what}: {_args!r}", _as_float(ngram_overlap(*_args)), atol=1e-6, rtol=1e-5)
### BEGIN REFERENCE
from course_utils.grading import expect


def _grams(w, n):
    return {tuple(w[i:i + n]) for i in range(len(w) - n + 1)}


for _n in (1, 2, 3, 5):
    _b = _grams(_bench.lower().split(), _n)
    expect(f"ngram_overlap with n={_n} (lower-case, whitespace split; a float)",
           len(_b & _grams(_train.lower().split(), _n)) / len(_b), atol=1e-6, rtol=1e-5)
expect("ngram_overlap('a b a b a b', 'a b', n=2) (repeated n-grams count once)", 0.5, atol=1e-6, rtol=1e-5)
expect("ngram_overlap('end. of it', 'end of it', n=2) (punctuation stays part of the word)", 0.5, atol=1e-6, rtol=1e-5)
expect("ngram_overlap('ab cd', 'abc d', n=1) (characters are not words)", 0.0, atol=1e-6, rtol=1e-5)
for (_what, (_bt, _tt, _n)), _v in zip(_cases.items(), (1.0, 0.0, 1.0, 2 / 3, 0.0, 1 / 3)):
    _b = _grams(_bt.lower().split(), _n)
    assert abs(len(_b & _grams(_tt.lower().split(), _n)) / len(_b) - _v) < 1e-12, _what   # the closed form is the set formula
    expect(f"ngram_overlap on {_what}: {(_bt, _tt, _n)!r}", _v, atol=1e-6, rtol=1e-5)
del _bt, _tt, _v
del _grams, _b
### END REFERENCE
del _as_float, _bench, _train, _n, _args, _cases, _what
### END HIDDEN TESTS

# %% nbgrader={"grade": false, "grade_id": "contamination_demo", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
BENCHMARK = ("Question: A train leaves the station at 3 pm travelling at 60 km per hour. "
             "How far has it travelled by 5 pm? Answer: 120 km.")
TRAIN_CLEAN = ("Trains are a common way to travel. A fast train can travel at 300 km per hour, "
               "and a regional train often leaves the station every hour.")
TRAIN_LEAKED = TRAIN_CLEAN + (" Practice: a train leaves the station at 3 pm travelling at 60 km per hour. "
                              "How far has it travelled by 5 pm? Answer: 120 km.")
for n in (1, 3, 8, 13):
    print(f"n={n:2d}: clean {ngram_overlap(BENCHMARK, TRAIN_CLEAN, n):.3f}   leaked {ngram_overlap(BENCHMARK, TRAIN_LEAKED, n):.3f}")

# %% [markdown]
# Small $n$ flags ordinary shared vocabulary (the clean text shares many unigrams); large $n$
# only fires on copied passages, but a light paraphrase ("A train" → "Practice: a train") or a
# reformatted answer slips past it. Overlap is evidence of contamination, not proof of its absence.

# %% [markdown] nbgrader={"grade": false, "grade_id": "written_reflection_question", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## 8. Reflect
#
# **Written question (3 points).** Using the numbers this notebook printed (name them): (a) after
# the DPO run, did the held-out chosen log-prob rise in absolute terms, and what happened to the
# margin and held-out accuracy? What does that say about Book §8.2.1's "increase the probability
# of the chosen answer"? (b) What position-bias and verbosity-bias rates did the judge show, and
# would you use it to compare two models? (c) In the bandit, what was the gradient variance with
# and without a baseline, and why is the mean gradient unchanged?

# %% [markdown] nbgrader={"grade": true, "grade_id": "written_reflection", "locked": false, "points": 3, "schema_version": 3, "solution": true, "task": false}
# **Model answer** (numbers from the course's full-mode CPU run; the committed outputs are CI
# mode's 2-step smoke run; a student runs full mode and cites their own numbers).
# (a) On the 12 held-out pairs, after 10 steps: margin 0.000 → 1.147, accuracy 0.000 → 1.000
# (all margins are exactly 0 at step 0 and the accuracy is strict >), loss 0.693 → 0.283. The
# chosen log-prob barely moved (−17.000 → −16.813) while the rejected one fell by 11.3 nats
# (−93.119 → −104.402). DPO optimises the *difference* of log-ratios, so "increase the
# probability of chosen" holds only relative to rejected (Book §8.2.1 says "relativamente"); here
# the chosen rose a little, but nothing in the loss requires it.
# (b) The judge answered "A" for every one of the 192 prompts: good answer preferred 1.00 as A and
# 0.00 as B, position bias (same letter after swapping) 1.00, and the padded answer "won" 0.50
# overall — 1.00 when shown first, 0.00 when second — so its verbosity verdicts are pure position
# effect. A 135 M judge carries no signal about quality here (Book §8.5.4). I would not use it to
# compare models; with a larger judge I would at least average both orders, report the flip rate,
# and prefer verifiable checks.
# (c) Total variance ≈ 0.39 without and ≈ 0.22 with the expected-reward baseline, same mean
# gradient ≈ [0.17, 0, −0.17]: E[∇log π(a)] = 0, so subtracting a constant b changes no
# expectation, only the spread.
