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
# 1. `sequence_logprobs` — summed log-probability of the completion tokens (2 pts)
# 2. `dpo_loss` — DPO loss, implicit rewards and margins, equal to TRL's `DPOTrainer` (2 pts)
# 3. `group_advantages` — GRPO's group-relative advantage (2 pts)
# 4. `grpo_loss` — GRPO's clipped surrogate with the KL penalty to the reference, equal to TRL's
#    `GRPOTrainer` loss; it then trains SmolLM2 on a verifiable reward (3 pts)
# 5. `debiased_judge` — a judge's position-debiased score, verdict and position shift from both orders (2 pts)
# 6. `ngram_overlap` — an n-gram contamination check between two texts (1 pt)
#
# plus one written question (3 pts) that asks for evidence from this notebook's outputs.
#
# Define each graded function in its answer cell in this notebook (helpers of your own are fine):
# the hidden tests check where each one is defined. <!-- clause-all: defined-here -->
#
# Models: a tiny random Llama (for the exact comparisons with TRL's DPO and GRPO losses) and
# `HuggingFaceTB/SmolLM2-135M-Instruct` (the DPO run, a GRPO run with a verifiable arithmetic reward,
# and the judge).

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
# Setup: on Colab this installs the course; locally `make lab` already did.
import importlib.util, os, subprocess, sys
if importlib.util.find_spec("course_utils") is None:  # Colab, or a Python without the course
    COURSE_DIR = os.environ.get("LLM_COURSE_DIR", "/content/llm-course")
    REPO = os.environ.get("LLM_COURSE_REPO", "https://github.com/llm-course/llm-course")
    subprocess.run(["git", "clone", "-q", "--depth", "1", "--branch", "main", REPO, COURSE_DIR], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-e", COURSE_DIR], check=True)  # keeps Colab's torch
    importlib.invalidate_caches()  # see the packages pip just installed
    sys.path.insert(0, COURSE_DIR)
import course_utils
DEVICE = course_utils.setup(seed=0)

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
import contextlib, copy, io, json, math, os, warnings
import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
from scipy import stats
from course_utils.progress import tqdm

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
# The file's rejected answers reuse six generic evasive templates, so its held-out pairs have *new
# prompts and new chosen answers* but rejected text the policy was trained to push down: a held-out
# accuracy on them measures memory of six sentences. We therefore also write, for the same 12
# held-out prompts, 12 new rejected answers (`UNSEEN_REJECTED`, topic-specific evasions) that occur
# nowhere in training, and measure the DPO run on those; the familiar-template version stays as a
# comparison.

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
print(f"{len(PAIRS)} pairs: {len(TRAIN_PAIRS)} train, {len(HELDOUT_PAIRS)} held out; "
      f"{len({p['rejected'] for p in PAIRS})} distinct rejected answers in the file")
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

UNSEEN_REJECTED = [   # one per held-out prompt, in the file's order; none of these sentences is in the training pairs
    "Colours are a matter of perception, and painters and physicists rarely agree, so I would not commit to one.",
    "Questions of authorship are tricky, since many old plays have disputed origins, so I prefer not to name anybody.",
    "Time is measured differently across cultures and eras, so I will leave the exact count up to you.",
    "Languages keep changing and mixing, so naming a single one would oversimplify a rich and complicated picture.",
    "It varies with the scale, the air pressure and how pure the water is, so there is no single number I can give.",
    "Light comes from all kinds of places, and which one counts as the main one is really a philosophical question.",
    "The body is an incredibly complex system where everything works together, so singling out one organ misleads.",
    "I am not a doctor and every injury is unique, so I cannot really tell you anything useful about what to do.",
    "Calendars have varied a lot through history, so counting months like that is not as simple as it sounds.",
    "Height can be measured from sea level, from the base or from the centre of the Earth, so I will not pick one.",
    "Animals have all sorts of names in different regions and languages, so there is no one correct word for that.",
    "Guitars come in so many shapes and styles that any number I gave you would be wrong for somebody.",
]
HELDOUT_UNSEEN = [dict(p, rejected=r) for p, r in zip(HELDOUT_PAIRS, UNSEEN_REJECTED, strict=True)]


def word_ngrams(text, n=4):
    words = text.lower().split()
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


train_rejected_4grams = set().union(*(word_ngrams(p["rejected"]) for p in TRAIN_PAIRS))
for name, pairs in [("familiar (file)", HELDOUT_PAIRS), ("unseen (new)", HELDOUT_UNSEEN)]:
    same = sum(p["rejected"] in {t["rejected"] for t in TRAIN_PAIRS} for p in pairs)
    shared = np.mean([len(word_ngrams(p["rejected"]) & train_rejected_4grams) / len(word_ngrams(p["rejected"]))
                      for p in pairs])
    print(f"held-out rejected, {name:15s}: {same:2d}/12 identical to a training rejected answer, "
          f"share of word 4-grams also in training rejected answers {shared:.2f}")


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
# ### Exercise 1 — summed completion log-probabilities (2 points)
#
# Implement `sequence_logprobs(logits, input_ids, completion_mask)`: for each row $b$, return the
# **sum** of $\log\operatorname{softmax}(\texttt{logits}[b, t-1])[\texttt{input\_ids}[b, t]]$ over the
# positions $t \ge 1$ where `completion_mask[b, t]` is 1; prompt and padding positions, before or
# after the completion, are left out. <!-- clause: value -->
#
# Use `torch.log_softmax` on float32 logits (upcast 16-bit ones) and `gather`, not
# `torch.log(torch.softmax(...))`: when one logit is far ahead, the other tokens' probabilities
# underflow to 0 in float32 and their log becomes `-inf`, where `log_softmax` gives the finite value. <!-- clause: log-softmax -->
# Keep only the completion positions by *selecting* them (`torch.where`,
# or boolean indexing), not by multiplying by the mask: a token the model rules out (log-probability
# `-inf`, e.g. a masked vocabulary entry) in the prompt or the padding gives `0 * (-inf) = nan` in a
# product, while it must contribute nothing. <!-- clause: select-not-multiply --> Do not call a
# library DPO helper.
#
# The contract:
#
# * `logits` is $(B, T, V)$, `input_ids` and `completion_mask` are $(B, T)$; the mask is 1 (or `True`)
#   on completion tokens and 0 (or `False`) elsewhere: accept a bool mask as well as an integer one. <!-- clause: bool-mask -->
# * Return a float32 tensor of shape $(B,)$, float32 also for float64 or 16-bit (float16, bfloat16)
#   logits. <!-- clause: float32-result -->
# * Position 0 is never scored (no logits come before it), even when `completion_mask[:, 0]` is 1 (a
#   prompt of length 0). <!-- clause: position-zero -->
# * Leave the inputs unchanged. <!-- clause: unchanged-input -->
# * Raise `ValueError` if the shapes do not match: `logits` not 3-D, or `logits`, `input_ids` and
#   `completion_mask` with a different $B$ or $T$. <!-- clause: shape-error -->
# * Raise `ValueError` if any row has no completion token at positions $t \ge 1$ (a mask of zeros, or
#   one that is 1 at position 0 only), even when the other rows have one. <!-- clause: empty-completion-error -->

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


# %% nbgrader={"grade": true, "grade_id": "test_ex1_sequence_logprobs", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
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
_lg = torch.randn(1, 4, 5, generator=_g)
_lg[0, 0, 2] = float("-inf")                  # the model rules out token 2 at position 1, a prompt token (mask 0)
_lp = torch.log_softmax(_lg, -1)
_out = sequence_logprobs(_lg, torch.tensor([[0, 2, 3, 1]]), torch.tensor([[0, 0, 1, 1]]))
check_close("sequence_logprobs when a prompt token has log-probability -inf (mask 0 there: it contributes nothing; "
            "0 * (-inf) is nan, so select the completion positions, do not multiply by the mask)",
            _out, [(_lp[0, 1, 3] + _lp[0, 2, 1]).item()], atol=1e-5)
del _lp, _expected0, _lg
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import outcome, record
record("module of sequence_logprobs (it must be defined in this notebook)", sequence_logprobs.__module__)  # clause: defined-here
_g = torch.Generator().manual_seed(7)
_logits = 3 * torch.randn(4, 9, 11, generator=_g)
_ids = torch.randint(0, 11, (4, 9), generator=_g)
_mask = torch.tensor([[0, 0, 0, 1, 1, 1, 0, 0, 0],      # trailing padding
                      [0, 1, 1, 1, 1, 1, 1, 1, 1],
                      [0, 0, 0, 0, 0, 0, 0, 1, 0],      # one completion token
                      [0, 0, 1, 1, 1, 1, 1, 0, 0]])
_out = sequence_logprobs(_logits, _ids, _mask)
# clause: value, float32-result
record("sequence_logprobs on 4 rows with padding after the completion (a float32 (4,) tensor)", _out, atol=1e-4, rtol=1e-5)
# clause: unchanged-input
record("logits after sequence_logprobs (inputs left unchanged)", _logits)
record("input_ids after sequence_logprobs (inputs left unchanged)", _ids)
record("completion_mask after sequence_logprobs (inputs left unchanged)", _mask)
_outb = sequence_logprobs(_logits.to(torch.bfloat16), _ids, _mask.bool())
record("sequence_logprobs with bfloat16 logits and a bool mask (a float32 result)", _outb, atol=1e-3, rtol=1e-5)  # clause: bool-mask, float32-result
_bad_masks = {"completion token at position 0 only": torch.tensor([[1, 0, 0, 0, 0, 0, 0, 0, 0]] * 4),
              "all zeros": torch.zeros(4, 9, dtype=torch.long)}
for _what, _bad_mask in _bad_masks.items():
    # clause: empty-completion-error
    record(f"sequence_logprobs with an empty completion ({_what}): must raise ValueError",
           outcome(sequence_logprobs, _logits, _ids, _bad_mask))
# clause: shape-error
record("sequence_logprobs with completion_mask of batch 3, input_ids of batch 4: must raise ValueError",
       outcome(sequence_logprobs, _logits, _ids, _mask[:3]))
_lg_inf = _logits.clone()
_lg_inf[0, 0, _ids[0, 1]] = float("-inf")      # the prompt token at position 1 of row 0 is ruled out by the model
_lg_inf[3, 7, _ids[3, 8]] = float("-inf")      # and so is the padding token at position 8 of row 3
# clause: select-not-multiply
record("sequence_logprobs when a prompt or padding token has log-probability -inf (it must not contribute: "
       "select, do not multiply by the mask)", sequence_logprobs(_lg_inf, _ids, _mask), atol=1e-4, rtol=1e-5)
_mask0 = torch.tensor([[1, 1, 1, 1, 1, 1, 1, 1, 1],      # prompt of length 0, no padding
                       [1, 1, 1, 1, 0, 0, 0, 0, 0],      # prompt of length 0, then padding
                       [0, 0, 1, 1, 1, 1, 1, 1, 1],
                       [1, 1, 0, 0, 0, 0, 0, 0, 0]])     # prompt of length 0, a completion of 2 tokens
# clause: position-zero
record("sequence_logprobs with completion_mask[:, 0] == 1 in rows 0, 1, 3 (a prompt of length 0: position 0 is "
       "not scored)", sequence_logprobs(_logits, _ids, _mask0), atol=1e-4, rtol=1e-5)
_far = _logits.clone()
_far[:, :, 0] = 150.0                           # token 0 is about 150 nats ahead at every position
# clause: log-softmax
record("sequence_logprobs when logit 0 is 150 ahead (log_softmax: finite; log(softmax) underflows to -inf)",
       sequence_logprobs(_far, _ids, _mask), atol=1e-4, rtol=1e-5)
# clause: float32-result
record("sequence_logprobs with float64 logits (a float32 result)", sequence_logprobs(_logits.double(), _ids, _mask),
       atol=1e-4, rtol=1e-5)
# clause: float32-result, log-softmax
record("sequence_logprobs with float16 logits, logit 0 150 ahead (computed in float32)",
       sequence_logprobs(_far.half(), _ids, _mask), atol=1e-2, rtol=1e-5)
_one_empty = _mask.clone()
_one_empty[2] = torch.tensor([1, 0, 0, 0, 0, 0, 0, 0, 0])
record("sequence_logprobs when only row 2 has an empty completion (the others have one): must raise ValueError",
       outcome(sequence_logprobs, _logits, _ids, _one_empty))  # clause: empty-completion-error
# clause: shape-error
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
# ### Exercise 2 — DPO loss, implicit rewards, margins (2 points)
#
# Implement `dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=0.1)` from the
# four per-pair log-probabilities, each a $(B,)$ tensor of summed completion log-probabilities. Return
# `(loss, chosen_rewards, rejected_rewards, margins)`:
#
# * `chosen_rewards` $= \beta(\texttt{policy\_chosen} - \texttt{ref\_chosen})$ and `rejected_rewards`
#   $= \beta(\texttt{policy\_rejected} - \texttt{ref\_rejected})$, both $(B,)$, with `beta=0.1` when
#   it is not given. <!-- clause: rewards -->
# * `margins` $=$ `chosen_rewards` $-$ `rejected_rewards`, $(B,)$. <!-- clause: margins -->
# * `loss` is the batch **mean** of $-\log\sigma(\text{margin})$. <!-- clause: loss-mean --> Return
#   it as a 0-dim tensor, not a Python float. <!-- clause: zero-dim -->
# * All four outputs are tensors in the inputs' dtype (float64 inputs give float64 outputs). <!-- clause: keeps-dtype -->
# * Use `F.logsigmoid`: the loss must stay finite and accurate for huge margins of either sign (about
#   $-\text{margin}$ for a very negative margin, about 0 for a very positive one). <!-- clause: stable-logsigmoid -->
# * Leave the inputs unchanged. <!-- clause: unchanged-input -->
# * Raise `ValueError` if `beta` $\le 0$. <!-- clause: beta-positive -->
# * Raise `ValueError` if the four inputs do not all have the same shape, with no broadcasting: a
#   $(1,)$ input next to $(B,)$ ones, or inputs with different $B$, are errors. <!-- clause: same-shape -->
# * Raise `ValueError` if the inputs are not 1-D (all four $(B, 1)$, or all four 0-dim). <!-- clause: one-dim -->
#
# Do not call `trl`'s loss functions.

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


# %% nbgrader={"grade": true, "grade_id": "test_ex2_dpo_loss", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
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
record("module of dpo_loss (it must be defined in this notebook)", dpo_loss.__module__)  # clause: defined-here
_g = torch.Generator().manual_seed(3)
_pc, _pr, _rc0, _rr0 = (-30 * torch.rand(6, generator=_g, dtype=torch.float64) for _ in range(4))
_beta = 0.37
_loss, _rc, _rr, _m = dpo_loss(_pc, _pr, _rc0, _rr0, beta=_beta)
record("DPO loss, 6 pairs, beta 0.37 (a 0-dim tensor)", _loss, atol=1e-9, rtol=1e-5)  # clause: loss-mean, zero-dim, keeps-dtype
record("chosen rewards, 6 pairs, beta 0.37", _rc, atol=1e-9, rtol=1e-5)  # clause: rewards, keeps-dtype
record("rejected rewards, 6 pairs, beta 0.37", _rr, atol=1e-9, rtol=1e-5)  # clause: rewards, keeps-dtype
record("margins, 6 pairs, beta 0.37", _m, atol=1e-9, rtol=1e-5)  # clause: margins, keeps-dtype
for _name, _t in zip(("policy_chosen", "policy_rejected", "ref_chosen", "ref_rejected"), (_pc, _pr, _rc0, _rr0)):
    # clause: unchanged-input
    record(f"{_name} after dpo_loss (inputs left unchanged)", _t)
# large margins stay finite; the sign convention (chosen good -> small loss)
# clause: stable-logsigmoid
_loss_big = dpo_loss(torch.tensor([0.0]), torch.tensor([-5000.0]), torch.tensor([0.0]), torch.tensor([0.0]), beta=1.0)[0]
record("DPO loss for a huge positive margin (5000)", _loss_big, atol=1e-6, rtol=1e-5)
_loss_neg = dpo_loss(torch.tensor([-5000.0]), torch.tensor([0.0]), torch.tensor([0.0]), torch.tensor([0.0]), beta=1.0)[0]
record("DPO loss for a huge negative margin (-5000: finite, = -margin)", _loss_neg, atol=1e-2, rtol=1e-5)
for _b in (0.0, -0.1):
    # clause: beta-positive
    record(f"dpo_loss with beta={_b}: must raise ValueError", outcome(dpo_loss, _pc, _pr, _rc0, _rr0, beta=_b))
# clause: same-shape
record("dpo_loss with policy_rejected of 5 pairs, the others of 6: must raise ValueError",
       outcome(dpo_loss, _pc, _pr[:5], _rc0, _rr0))
record("dpo_loss with ref_rejected of shape (1,), the others (6,): must raise ValueError (no broadcasting)",
       outcome(dpo_loss, _pc, _pr, _rc0, _rr0[:1]))
record("dpo_loss with ref_chosen of 5 pairs, the others of 6: must raise ValueError",
       outcome(dpo_loss, _pc, _pr, _rc0[:5], _rr0))
# clause: one-dim
record("dpo_loss with all four inputs of shape (6, 1): must raise ValueError (not 1-D)",
       outcome(dpo_loss, _pc[:, None], _pr[:, None], _rc0[:, None], _rr0[:, None]))
record("dpo_loss with all four inputs 0-dim: must raise ValueError (not 1-D)",
       outcome(dpo_loss, _pc[0], _pr[0], _rc0[0], _rr0[0]))
_loss5 = dpo_loss(_pc, _pr, _rc0, _rr0, beta=5.0)
# clause: rewards, margins, loss-mean
record("DPO loss, chosen and rejected rewards, margins with beta 5 (policy and reference both matter)", list(_loss5),
       atol=1e-9, rtol=1e-5)
_pc32 = torch.tensor([-12.0, -30.0, -7.5])
_loss_d = dpo_loss(_pc32, _pc32 - 4, _pc32 + 1, _pc32 - 2)
# clause: rewards, margins, loss-mean, keeps-dtype
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
# `ref_model=None` (and no PEFT) TRL (version 1.16) reloads the reference *by name* from
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
        # gradient_checkpointing: TRL's default recomputes every layer's forward in the backward pass to save
        # memory that batches of 4 short pairs do not need; off, a DPO step here is faster
        args = DPOConfig(output_dir=str(course_utils.paths.cache_dir() / "dpo_runs"), bf16=False, use_cpu=True,
                         report_to="none", disable_tqdm=True, save_strategy="no", logging_steps=1,
                         max_length=256, seed=0, gradient_checkpointing=False, **config)
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
# We measure on the 12 held-out prompts, before and after, with our own functions: the summed
# log-probs of chosen and rejected under the policy, the implicit-reward margin of every pair, and
# the **held-out preference accuracy** = share of pairs with margin > 0, **a tie (margin exactly 0)
# counting as half**. At step 0 the policy *is* the reference, so every margin is exactly 0 and the
# accuracy is 0.5 — chance, not the 0 % that TRL's strict `rewards/accuracies` (margin > 0) would
# print, from which any 2-step run "rises to 100 %". The main measurement uses the held-out pairs
# with **unseen** rejected answers (Section 1); the familiar-template ones are shown for comparison.
# Uncertainty: 12 pairs is few, so every mean comes with a 95 % interval (a t-interval over pairs for
# margins, Wilson's interval for the accuracy after training) and the margins' quantiles are printed,
# before and after. The accuracy *before* gets no interval: its 0.5 is 12 ties by construction
# (policy = reference), not a sample of right and wrong verdicts, so there is no sampling noise to
# describe; the table prints it as "0.500 (12 ties)".
# To fit 2 CPU cores (≤ 5 min, ≤ 4 GiB) only the last `TRAIN_LAYERS` = 10 of the 30 decoder layers
# are updated; the embeddings (tied to the LM head) and the first 20 layers stay frozen. The backward
# pass then stops at layer 21, and AdamW keeps its two moments only for the parameters trained (their
# count is printed below, about a quarter of the model); on a GPU you would train every layer.
# Under autograding this section is skipped (no graded test uses it). CI mode runs 1 step, which only
# proves the code runs; full mode runs `N_STEPS` = 10.

# %% nbgrader={"grade": false, "grade_id": "dpo_run", "locked": true, "schema_version": 3, "solution": false, "task": false}
N_STEPS = 0 if AUTOGRADING else (1 if CI_MODE else 10)     # CI mode: 1 step (a smoke run); full mode: 10
TRAIN_LAYERS = 10                                            # the last 10 of 30 decoder layers are trained
LR = 1e-5
if not AUTOGRADING:
    ref_model = copy.deepcopy(policy).eval()          # the frozen reference: a copy made before training
    for p in ref_model.parameters():
        p.requires_grad_(False)
    heldout_sets = {"unseen": collate(HELDOUT_UNSEEN), "familiar": collate(HELDOUT_PAIRS)}
    ref_logprobs = {k: pair_logprobs(ref_model, b) for k, b in heldout_sets.items()}   # the reference never changes


def heldout_eval(model, which, logprobs=None):
    """Per-pair summed log-probs of chosen and rejected under `model` (or the given `logprobs` of it), implicit-reward
    margins (beta 0.1), loss, on the held-out set `which` ("unseen" or "familiar")."""
    pc, pr = pair_logprobs(model, heldout_sets[which]) if logprobs is None else logprobs
    rc, rr = ref_logprobs[which]
    loss, _, _, margins = dpo_loss(pc, pr, rc, rr, beta=0.1)
    return {"logp chosen": pc.numpy(), "logp rejected": pr.numpy(), "margin": margins.numpy(), "loss": loss.item()}


def pref_accuracy(margins):
    """Share of pairs with margin > 0, a tie (margin exactly 0) counting as half."""
    margins = np.asarray(margins)
    return float(np.mean((margins > 0) + 0.5 * (margins == 0)))


from course_utils.stats import mcnemar_exact, mean_ci, sign_test, wilson
# mean_ci: mean and its 95 % t-interval over the items; wilson(k, n): Wilson interval of k successes in
# n (k may count a tie as half); sign_test: binomial test of the positive differences;
# mcnemar_exact: McNemar's exact test of two paired sets of right/wrong answers


def fmt_mean(x, prec=3):
    m, lo, hi = mean_ci(x)
    return f"{m:.{prec}f} [{lo:.{prec}f}, {hi:.{prec}f}]"


if N_STEPS:
    # before training the policy *is* the reference: its held-out log-probs are ref_logprobs, not computed again
    before = {k: heldout_eval(policy, k, logprobs=ref_logprobs[k]) for k in heldout_sets}
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
    after = {k: heldout_eval(policy, k) for k in heldout_sets}
    log = [h for h in trainer.state.log_history if "loss" in h]
    print(f"{N_STEPS} DPO steps (batch 4, beta 0.1, lr {LR:g}), model SmolLM2-135M-Instruct; "
          f"train loss at the last step {log[-1]['loss']:.3f}")
    if CI_MODE:
        print("CI mode: a 1-step smoke run, too short to mean anything; full mode trains 10 steps")
    for k in ("unseen", "familiar"):
        b, a = before[k], after[k]
        print(f"\n12 held-out pairs, {k} rejected answers; mean [95 % interval]")
        print(f"{'':24s} {'before':>24s} {'after':>24s}")
        for key in ("logp chosen", "logp rejected", "margin"):
            print(f"{key:24s} {fmt_mean(b[key]):>24s} {fmt_mean(a[key]):>24s}")
        acc = [pref_accuracy(d["margin"]) for d in (b, a)]
        n_ties = [int((d["margin"] == 0).sum()) for d in (b, a)]
        # a Wilson interval describes sampling noise of a count; with ties (margin exactly 0, e.g. the policy
        # *is* the reference) the 0.5 is set by construction, not sampled: no interval then
        shown = [f"{p:.3f} ({t} ties)" if t else "{:.3f} [{:.3f}, {:.3f}]".format(p, *wilson(p * len(d["margin"]), len(d["margin"])))
                 for p, t, d in zip(acc, n_ties, (b, a))]
        print(f"{'accuracy (ties = 1/2)':24s} " + " ".join(f"{x:>24s}" for x in shown))
        print(f"{'DPO loss':24s} {b['loss']:24.3f} {a['loss']:24.3f}")
        for tag, d in (("before", b), ("after", a)):
            q = np.quantile(d["margin"], [0, 0.25, 0.5, 0.75, 1])
            print(f"margin quantiles {tag:6s} (min, 25 %, median, 75 %, max): " + ", ".join(f"{v:.3f}" for v in q))
        print("after - before, paired over the 12 pairs: " + ", ".join(
            f"{key} {fmt_mean(a[key] - b[key])}" for key in ("logp chosen", "logp rejected")))
    m_un, m_fa = after["unseen"]["margin"], after["familiar"]["margin"]
    n_pos, n_nonzero = int((m_un > 0).sum()), int((m_un != 0).sum())
    print(f"\nunseen, after: {n_pos} of {n_nonzero} non-tied margins > 0; one-sided sign test "
          f"p = {sign_test(m_un, alternative='greater'):.2g}")
    print(f"same prompts, familiar minus unseen margin after training: {fmt_mean(m_fa - m_un)} "
          f"(paired; Wilcoxon signed-rank p = {stats.wilcoxon(m_fa, m_un).pvalue:.2g}); "
          f"ratio of mean margins familiar / unseen {m_fa.mean() / m_un.mean():.1f}")
    fig, axes = plt.subplots(1, 2, figsize=(9, 3))
    steps = [h["step"] for h in log]
    axes[0].plot(steps, [h["loss"] for h in log], marker="o"); axes[0].axhline(math.log(2), ls="--", c="gray", label="ln 2")
    axes[0].set(xlabel="step", ylabel="DPO loss (train batch)", title="TRL loss"); axes[0].legend()
    jitter = np.random.default_rng(0).uniform(-0.12, 0.12, size=len(m_un))
    for x, (label, m) in enumerate([("before\n(both sets)", before["unseen"]["margin"]), ("after\nunseen", m_un),
                                    ("after\nfamiliar", m_fa)]):
        axes[1].scatter(x + jitter, m, s=14)
    axes[1].axhline(0, c="gray", lw=0.5)
    axes[1].set_xticks([0, 1, 2], ["before\n(both sets)", "after\nunseen", "after\nfamiliar"])
    axes[1].set(ylabel="implicit-reward margin", title="Held-out margins, one dot per pair")
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
# ### Before and after on the same prompts: length, repetition, correctness (Book §8.5.1)
#
# Book §8.5.1 asks to compare outputs before and after on the *same* prompts, and to watch length,
# evasiveness, repetition and degenerate patterns, not only the preference numbers. We generate
# greedily (at most `MAX_NEW` tokens) for the 12 held-out prompts and the first 12 training prompts,
# with the reference and with the DPO policy, and measure per answer: its length in tokens, and its
# **distinct-1 / distinct-2** (distinct word unigrams / bigrams divided by their count: 1 = no
# repetition, low = loops). The differences after − before are paired by prompt: a mean with a
# 95 % t-interval and a Wilcoxon signed-rank test. On the 12 held-out questions we also apply a
# **closed answer key**, the kind of verifiable check Book §8.4.4 prefers to a judge. A key that
# searches the whole answer for "60" accepts "An hour is 3600 minutes … multiply 3600 by 60", a wrong
# answer; so the key checks only the answer's **first sentence** (up to the first `.`, `!` or `?`
# followed by a space, or the first line break), with whole-word patterns (`\b60\b|\bsixty\b`, …).
# McNemar's exact test compares before and after.

# %% nbgrader={"grade": false, "grade_id": "dpo_length", "locked": true, "schema_version": 3, "solution": false, "task": false}
import re
ANSWER_KEY = [r"\bgreen\b", r"\bshakespeare\b", r"\b60\b|\bsixty\b", r"\bportuguese\b", r"\b0\b|\bzero\b", r"\bsun\b",
              r"\bheart\b", r"\bwater\b", r"\bseven\b|\b7\b", r"\beverest\b", r"\bkittens?\b",
              r"\bsix\b|\b6\b"]   # the 12 held-out questions in order, whole words only
assert len(ANSWER_KEY) == len(HELDOUT_PAIRS)
MAX_NEW = 16 if CI_MODE else 48
LEN_PROMPTS = [p["prompt"] for p in (HELDOUT_PAIRS[:2] if CI_MODE else HELDOUT_PAIRS + TRAIN_PAIRS[:12])]


def distinct_n(text, n):
    """Distinct word n-grams of one text divided by its number of word n-grams (1.0 when it has none)."""
    words = text.lower().split()
    grams = [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]
    return len(set(grams)) / len(grams) if grams else 1.0


def answer_stats(answers):
    return {"length (tokens)": np.array([len(tok(a, add_special_tokens=False).input_ids) for a in answers], dtype=float),
            "distinct-1": np.array([distinct_n(a, 1) for a in answers]),
            "distinct-2": np.array([distinct_n(a, 2) for a in answers])}


def key_correct(answers):
    """Does each answer's first sentence (to the first '. ', '! ', '? ' or line break) match its key?"""
    first = [re.split(r"(?<=[.!?])\s|\n", a.strip(), maxsplit=1)[0] for a in answers]
    return np.array([bool(re.search(k, f.lower())) for k, f in zip(ANSWER_KEY, first)])


if N_STEPS:
    gens = {"reference": generate_text(ref_model, tok, LEN_PROMPTS, max_new_tokens=MAX_NEW, batch=True),
            "after DPO": generate_text(policy, tok, LEN_PROMPTS, max_new_tokens=MAX_NEW, batch=True)}
    st = {k: answer_stats(v) for k, v in gens.items()}
    print(f"{len(LEN_PROMPTS)} prompts, greedy, at most {MAX_NEW} new tokens; mean [95 % t-interval]")
    print(f"{'':16s} {'reference':>22s} {'after DPO':>22s} {'after - before (paired)':>26s} {'Wilcoxon p':>10s}")
    for key in st["reference"]:
        b, a = st["reference"][key], st["after DPO"][key]
        p = stats.wilcoxon(a, b).pvalue if np.any(a != b) else 1.0
        print(f"{key:16s} {fmt_mean(b, 2):>22s} {fmt_mean(a, 2):>22s} {fmt_mean(a - b, 2):>26s} {p:10.2g}")
    hit_max = {k: int((v["length (tokens)"] >= MAX_NEW).sum()) for k, v in st.items()}
    print(f"answers cut at {MAX_NEW} tokens: reference {hit_max['reference']}, after DPO {hit_max['after DPO']} "
          f"of {len(LEN_PROMPTS)}")
    if not CI_MODE:
        ok = {k: key_correct(v[:len(HELDOUT_PAIRS)]) for k, v in gens.items()}
        only_before, only_after, p_mcnemar = mcnemar_exact(ok["reference"], ok["after DPO"])
        print(f"answer key on the 12 held-out questions: reference {ok['reference'].sum()}/12 correct, "
              f"after DPO {ok['after DPO'].sum()}/12; discordant {only_before} (lost) vs {only_after} (gained), "
              f"McNemar exact p = {p_mcnemar:.2g}")
        print("the first sentences the key reads (1 = matches the key), reference | after DPO:")
        for k, a0, a1, o0, o1 in zip(ANSWER_KEY, gens["reference"], gens["after DPO"], ok["reference"], ok["after DPO"]):
            f0, f1 = (re.split(r"(?<=[.!?])\s|\n", a.strip(), maxsplit=1)[0][:60] for a in (a0, a1))
            print(f"  {k:22s} {int(o0)} {f0!r:64s} | {int(o1)} {f1!r}")
        for q, a0, a1 in list(zip(LEN_PROMPTS, gens["reference"], gens["after DPO"]))[:3]:
            print(f"\nQ: {q}\n  reference: {a0}\n  after DPO: {a1}")
    else:
        print("CI mode: 2 prompts, 16 tokens (a smoke run); full mode measures 24 prompts and the answer key")

# %% [markdown]
# **Observe.** (Numbers from the full-mode run of the offline stand-in, SmolLM2-135M-Instruct with
# Q4_1-rounded weights; on the hub model yours differ.) On the held-out pairs with **unseen**
# rejected answers, every margin is exactly 0 at step 0 (the policy is the reference) and 0.267
# [0.229, 0.305] on average after 10 steps; all 12 are positive (quantiles from 0.192 to 0.420), so the
# accuracy goes from 0.500 (all ties) to 1.000, Wilson interval [0.758, 1.000], sign test p = 0.00024.
# The preference does carry over to evasions the model never saw — but it is 4.3 times weaker (ratio
# of mean margins) than on the familiar templates: the same 12 prompts with the training's rejected
# sentences reach a margin of 1.147 [0.956, 1.338], a paired difference of 0.880 [0.676, 1.084]. Much of what a
# familiar-template held-out set (or TRL's train-batch `rewards/margins`) shows is the policy
# learning to push down six particular sentences.
# Look at the log-prob rows, paired pair by pair: the chosen log-prob rose a little, from −17.000 to
# −16.813, by 0.187 [0.011, 0.364], while the unseen rejected answers fell by 2.483 [1.959, 3.007]
# (−90.742 to −93.225) and the familiar ones by 11.282 [9.479, 13.085] (−93.119 to −104.402). Most of
# the margin comes from pushing the rejected answers down. DPO raises the chosen answer *relative to*
# the rejected one (Book §8.2.1's "relativamente"); nothing in the loss requires the chosen log-prob to
# rise, and here it rose by a thirteenth of what the unseen rejected ones fell.
#
# Length, repetition and correctness (Book §8.5.1) show no measurable change: over 24 prompts the
# answer length changed by −0.54 [−2.80, 1.72] tokens (Wilcoxon p = 0.46) and distinct-2 by −0.02
# [−0.04, 0.01] (p = 0.25); 15 of the 24 answers hit the 48-token cap, before and after alike, so
# the length is partly the cap's. The answer key, read on each answer's first sentence, counts 4/12 correct before and 4/12 after
# (0 gained, 0 lost; McNemar exact p = 1): no evidence of a factual change. A search of the whole
# answer would have counted the hour answer after DPO ("An hour is equivalent to 3600 minutes … multiply
# 3600 by 60") as correct, because it contains "60". The key is still crude: the Romeo and Juliet first
# sentence names Shakespeare and then credits "the 17th-century French playwright" — counted correct.
# Wrong answers stay wrong, some in other words and some with another wrong value — blue and yellow give
# "blue" before and "a shade of blue" after; an hour has "36 minutes" before and "3600 minutes" after; the
# guitar "10" before and "12 strings" after. What this run shows is no change of correctness on 12
# questions (4/12 before and after, 0 discordant); the
# book's reading is that DPO redistributes probability among behaviours the model already has and does
# not add knowledge (Book §8.2.3, §8.5.2).
#
# ### Too far: five more steps at twenty times the learning rate
#
# DPO's loss keeps rewarding a lower rejected log-prob long after the preference is learned
# ($-\log\sigma(m) > 0$ for every finite margin). Here we continue training the same policy with
# a learning rate of `LR_FAR` = $2\cdot10^{-4}$ (20 times `LR`) for `N_FAR` = 5 more steps (full mode
# only; the CI and autograding runs skip it) and look at the loss, the held-out log-probs and the generations.
# Two things change at once — the rate and the number of steps — so this run shows where such training
# goes, not which of the two takes it there.

# %% nbgrader={"grade": false, "grade_id": "dpo_too_far", "locked": true, "schema_version": 3, "solution": false, "task": false}
N_FAR = 0 if (AUTOGRADING or CI_MODE) else 5
LR_FAR = 2e-4
if N_FAR:
    del trainer
    far_trainer = make_trainer(policy, ref_model, TRAIN_PAIRS, beta=0.1, learning_rate=LR_FAR, max_steps=N_FAR,
                               per_device_train_batch_size=4, lr_scheduler_type="constant")
    with contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        far_trainer.train()
    policy.eval()
    far_log = [h for h in far_trainer.state.log_history if "loss" in h]
    del far_trainer
    far = heldout_eval(policy, "unseen")
    print(f"{N_FAR} more DPO steps at lr {LR_FAR:g}: train loss per step "
          + ", ".join(f"{h['loss']:.2g}" for h in far_log))
    print(f"held-out (unseen rejected), mean [95 % interval]: logp chosen {fmt_mean(far['logp chosen'])}, "
          f"logp rejected {fmt_mean(far['logp rejected'])}, margin {fmt_mean(far['margin'])}, "
          f"accuracy {pref_accuracy(far['margin']):.3f}")
    far_gen = generate_text(policy, tok, GEN_PROMPTS, max_new_tokens=28, batch=True)
    for q, a in zip(GEN_PROMPTS, far_gen):
        print("Q:", q)
        print("  too far:", a)
else:
    print("the 'too far' run is skipped in CI mode and under autograding; run the notebook in full mode to see it")

# %% [markdown]
# **Too far.** (Same stand-in model.) Five more steps at twenty times the learning rate drive the
# training loss down step by step, `0.24, 0.035, 0.0013, 6.9e-05, 3.4e-06`: the preference on the
# training pairs is "learned" to the fifth decimal. On the unseen held-out pairs the margin grows to 3.113
# [2.599, 3.626], and all of it comes from the rejected side: their log-prob falls to −121.876 while
# the chosen one is at −17.006, where it started (−17.000). The loss keeps rewarding a lower rejected
# log-prob long after the preference is learned, and the generations drift in style, not in content:
# blue and yellow now make "The perfect blend of blue and yellow. A harmonious union of the two
# colors." — still no "green" — and the sky answer starts by repeating itself ("The sky's blue. The
# sky's blue because of a process called Rayleigh scattering."). This is why the learning rate and the
# number of steps are kept small, and why one watches a held-out margin and the generations rather than
# the training loss (Book §8.2.2's anchoring; β, not varied here, sets how strongly the reference anchors
# the policy: a larger β needs less movement for the same loss, Section 2).

# %% [markdown]
# ## 5. RLHF: reward model, KL-regularised objective, PPO's clip (Book §8.3.1–§8.3.2)
#
# **RLHF in one sentence** (Book §8.3.1): learn a reward model from human comparisons, then use RL to
# make high-reward answers more likely. The course supplies the standard formulas (Ouyang et al.
# 2022; Rafailov et al. 2023). The **reward model** $r_\phi(x, y)$ is trained on pairs with the
# Bradley–Terry model, $P(y_w \succ y_l) = \sigma(r_\phi(x,y_w) - r_\phi(x,y_l))$, loss
# $-\log\sigma(r_w - r_l)$ — the same shape as DPO's loss. The policy then maximises the
# **KL-regularised objective**
#
# $$\max_{\pi}\; \mathbb{E}_{y\sim\pi}[r(x,y)] \;-\; \beta\,\mathrm{KL}\big(\pi(\cdot\mid x)\,\|\,\pi_{\text{ref}}(\cdot\mid x)\big),$$
#
# the "penalty on divergence from a reference" of Book §8.3.2. Its maximiser has a closed form,
# $\pi^*(y) \propto \pi_{\text{ref}}(y)\,e^{r(y)/\beta}$, so $r(y) = \beta\log\frac{\pi^*(y)}{\pi_{\text{ref}}(y)} + \text{const}$:
# DPO's implicit reward is this identity read backwards, which is why DPO needs no reward model.
# Below, on three "answers" with rewards $[1, 0.5, 0]$ and a reference that prefers the worst one:
# small $\beta$ puts almost all mass on the best answer (large KL); large $\beta$ stays near $\pi_{\text{ref}}$.

# %% nbgrader={"grade": false, "grade_id": "rlhf_objective", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
r_chosen, r_rejected = torch.tensor([1.3, 0.2, -0.5]), torch.tensor([0.3, 0.4, -2.5])   # reward-model scores of 3 pairs
print("reward model, Bradley-Terry P(chosen beats rejected):", torch.sigmoid(r_chosen - r_rejected).numpy().round(4),
      f"  loss {(-F.logsigmoid(r_chosen - r_rejected)).mean().item():.4f}")
REWARDS = torch.tensor([1.0, 0.5, 0.0], dtype=torch.float64)
PI_REF = torch.tensor([0.2, 0.3, 0.5], dtype=torch.float64)


def kl_objective(pi, beta):
    """E_pi[r] - beta * KL(pi || pi_ref) for policies pi of shape (..., 3)."""
    return (pi * REWARDS).sum(-1) - beta * (pi * (pi / PI_REF).log()).sum(-1)


_e = -torch.rand(20_000, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64).log()
random_policies = _e / _e.sum(-1, keepdim=True)                # 20,000 policies drawn uniformly from the simplex
print(f"{'beta':>5s}  {'pi* = softmax(log pi_ref + r / beta)':>36s}  {'E[r]':>6s}  {'KL':>6s}  {'objective':>9s}  "
      f"best random")
for beta in (0.05, 0.2, 1.0, 5.0):
    pi_star = torch.softmax(PI_REF.log() + REWARDS / beta, -1)
    kl = (pi_star * (pi_star / PI_REF).log()).sum()
    best_random = kl_objective(random_policies, beta).max()
    print(f"{beta:5.2f}  {str(pi_star.numpy().round(4)):>36s}  {(pi_star * REWARDS).sum():6.4f}  {kl:6.4f}  "
          f"{kl_objective(pi_star, beta):9.4f}  {best_random:9.4f}")
implicit = 0.2 * (torch.softmax(PI_REF.log() + REWARDS / 0.2, -1) / PI_REF).log()
print("beta * log(pi*/pi_ref) at beta 0.2:", implicit.numpy().round(4), "= r - const, const",
      (REWARDS - implicit).numpy().round(4))

# %% [markdown]
# No random policy beats $\pi^*$ (last column ≤ objective), and $\beta\log(\pi^*/\pi_{\text{ref}})$
# equals the reward up to one constant, $-\beta\log Z$ — the constant that cancels in DPO's
# difference $\hat r(x, y_w) - \hat r(x, y_l)$.
#
# **PPO's clipped objective** (Schulman et al. 2017), the remedy for "too aggressive policy changes"
# of Book §8.3.2. With the probability ratio $\rho = \pi_\theta(a\mid s)/\pi_{\text{old}}(a\mid s)$ of
# an action and its advantage $A$, PPO maximises
# $\min\big(\rho A,\ \operatorname{clip}(\rho, 1-\epsilon, 1+\epsilon)\,A\big)$. For $A > 0$ the gain stops
# growing once $\rho > 1+\epsilon$; for $A < 0$ it stops once $\rho < 1-\epsilon$: the gradient is 0 there,
# so one batch cannot push the policy far from the one that sampled it. The `min` keeps the
# *unclipped* value when it is worse (a ratio that moved the wrong way is still penalised in full).

# %% nbgrader={"grade": false, "grade_id": "ppo_clip", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
EPS = 0.2
print(f"epsilon = {EPS}")
print(f"{'A':>5s} {'ratio':>6s} {'ratio*A':>8s} {'clip(ratio)*A':>14s} {'min (PPO)':>10s} {'d/d ratio':>10s}")
for adv in (1.0, -1.0):
    for rho0 in (0.5, 0.7, 1.0, 1.1, 1.3, 1.5):
        rho = torch.tensor(rho0, dtype=torch.float64, requires_grad=True)
        unclipped, clipped = rho * adv, rho.clamp(1 - EPS, 1 + EPS) * adv
        objective = torch.minimum(unclipped, clipped)
        objective.backward()
        print(f"{adv:5.1f} {rho0:6.2f} {unclipped.item():8.4f} {clipped.item():14.4f} {objective.item():10.4f} "
              f"{rho.grad.item():10.4f}")

# %% [markdown]
# ### REINFORCE on a bandit: why baselines matter (Book §8.3.2, §8.3.4, §8.5.3)
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

seeds = range(10 if CI_MODE else 200)     # CI mode: 10 seeds (a smoke run); full mode: 200
runs = {name: np.stack([train_bandit(bl, seed=s) for s in tqdm(seeds, desc=name)]) for name, bl in
        [("no baseline", False), ("with baseline", True)]}
fig, ax = plt.subplots(figsize=(6, 3))
for name, r in runs.items():
    ax.plot(r.mean(0), label=f"{name} (mean of {len(r)} seeds)")
    ax.fill_between(range(r.shape[1]), np.percentile(r, 10, 0), np.percentile(r, 90, 0), alpha=0.2)
ax.set(xlabel="REINFORCE step (1 sample each, lr 0.5)", ylabel="π(best arm)", title="Bandit: concentration on the best arm")
ax.legend(); plt.tight_layout(); plt.show()
from course_utils.stats import diff_ci, diff_proportions_ci
print(f"π(best), mean [95 % t-interval] over {len(seeds)} seeds (the same seeds for both)")
for name, r in runs.items():
    worse = int((r[:, -1] < 0.5).sum())
    lo, hi = wilson(worse, len(seeds))
    print(f"{name:14s}: after 50 steps {fmt_mean(r[:, 49], 3)} (sd over seeds {r[:, 49].std(ddof=1):.3f}), "
          f"after 200 steps {fmt_mean(r[:, -1], 3)}; ending on a worse arm (π(best) < 0.5 at step 200): "
          f"{worse}/{len(seeds)} = {worse / len(seeds):.3f} [Wilson {lo:.3f}, {hi:.3f}]")
for step in (50, 200):
    d = diff_ci(runs["with baseline"][:, step - 1], runs["no baseline"][:, step - 1])
    welch = stats.ttest_ind(runs["with baseline"][:, step - 1], runs["no baseline"][:, step - 1], equal_var=False)
    spread = stats.levene(runs["with baseline"][:, step - 1], runs["no baseline"][:, step - 1])
    print(f"with minus without baseline after {step} steps: {d.estimate:+.3f} [{d.low:+.3f}, {d.high:+.3f}] "
          f"(Welch t-test p = {welch.pvalue:.2g}); equal spread over seeds, Brown-Forsythe p = {spread.pvalue:.2g}")
worse = {name: (r[:, -1] < 0.5).astype(float) for name, r in runs.items()}
if any(w.any() for w in worse.values()):
    k_no, k_with = int(worse["no baseline"].sum()), int(worse["with baseline"].sum())
    fisher = stats.fisher_exact([[int(w.sum()), len(w) - int(w.sum())] for w in worse.values()])
    newcombe = diff_proportions_ci(k_no, len(seeds), k_with, len(seeds))
    print(f"ending on a worse arm, without vs with baseline: {k_no}/{len(seeds)} vs {k_with}/{len(seeds)}, "
          f"difference {newcombe.estimate:+.3f} [Newcombe 95 % {newcombe.low:+.3f}, {newcombe.high:+.3f}]; "
          f"Fisher exact test p = {fisher.pvalue:.2g}")
else:
    print(f"no seed of {len(seeds)} ended on a worse arm, with or without baseline")



# %% [markdown]
# With one sample per step (full mode, 200 seeds, the same seeds with and without the baseline),
# the baseline makes learning faster and the runs more alike: π(best) after 50 steps is 0.935
# [0.928, 0.942] with it and 0.871 [0.840, 0.903] without, a difference of +0.063 [+0.031, +0.096]
# (Welch p = 0.00016), and the spread over seeds shrinks from an sd of 0.228 to 0.050 (Brown–Forsythe
# test of equal spread, p = 0.00014). Without a baseline 5 of 200 seeds ended on a worse arm
# (0.025, Wilson [0.011, 0.057]), with it none ([0.000, 0.019]). The difference of the two rates is
# +0.025 [+0.001, +0.057] (Newcombe's interval), while Fisher's exact test gives p = 0.061: at this edge
# the two methods disagree on whether zero is excluded, and what the data allow is a difference from
# about zero to 0.057 — a failure rate lowered by the baseline by at most about six runs in a hundred.
# On average both variants end concentrated on the best arm (mean π(best) 0.965 and 0.988 after 200
# steps): the "collapse" of Book §8.5.3 is what one expects from
# maximising expected reward in a small action space with no entropy or KL term (no arm with such a
# term was run here).
#
# ### GRPO: the group is the baseline (Book §8.3.3)
#
# GRPO samples a **group** of $G$ answers per prompt and uses the group's own statistics as the
# baseline: $A_i = (r_i - \bar r)/(s + \varepsilon)$, with $s$ the **sample** standard deviation
# (Bessel's $G-1$, as TRL's `nanstd`) and $\varepsilon = 10^{-4}$ (TRL). No learned value model is
# needed — that is its main saving (memory), rather than sample efficiency: it needs $G$ samples per prompt.
#
# ### Exercise 3 — group-relative advantage (2 points)
#
# Implement `group_advantages(rewards, eps=1e-4)` for a $(\text{num\_groups}, G)$ tensor, one row
# per prompt: $A_{ij} = (r_{ij} - \bar r_i)/(s_i + \varepsilon)$ with the mean and the **sample** std
# (divide by $G - 1$). <!-- clause: value --> The statistics are those of **row $i$** only, never of
# the whole tensor or of a column. <!-- clause: per-row --> `eps` is added to the std (not to the
# variance, not a floor), with the value passed, not only the default. <!-- clause: eps-on-std --> A
# row of equal rewards gets advantages exactly 0. <!-- clause: equal-rewards-zero --> Return a tensor
# of the same shape and dtype (float32 in, float32 out; float64 in, float64 out). <!-- clause: keeps-dtype -->
# Leave the input unchanged. <!-- clause: unchanged-input --> Raise
# `ValueError` if `rewards` is not 2-D (1-D and 3-D alike) or $G < 2$ ($G = 1$ and $G = 0$ alike). <!-- clause: shape-error -->

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
record("module of group_advantages (it must be defined in this notebook)", group_advantages.__module__)  # clause: defined-here
_g = torch.Generator().manual_seed(11)
_r = torch.randn(3, 6, generator=_g, dtype=torch.float64)
_r[2] = 0.25                                 # a group with equal rewards
_A = group_advantages(_r)
record("group_advantages of 3 groups of 6 float64 rewards (Bessel std, eps 1e-4)", _A, atol=1e-9, rtol=1e-5)  # clause: value, keeps-dtype
record("group_advantages of a group of equal rewards (exactly zero)", _A[2])  # clause: equal-rewards-zero
record("rewards after group_advantages (left unchanged)", _r)  # clause: unchanged-input
record("group_advantages with eps=0.5", group_advantages(_r[:2], eps=0.5), atol=1e-9, rtol=1e-5)  # clause: eps-on-std
# clause: value, keeps-dtype
record("group_advantages of [[2.0, 0.0]] in float32 (G=2, a float32 result)",
       group_advantages(torch.tensor([[2.0, 0.0]], dtype=torch.float32)), atol=1e-5, rtol=1e-5)
for _bad in (torch.ones(4), torch.ones(3, 1), torch.ones(3, 0), torch.ones(2, 3, 4)):
    # clause: shape-error
    record(f"group_advantages of rewards of shape {tuple(_bad.shape)}: must raise ValueError", outcome(group_advantages, _bad))
_r4 = torch.tensor([[0.0, 0.0, 0.0, 1.0], [3.0, 1.0, 2.0, 2.0], [0.5, 0.5, 0.5, 0.5], [1.0, -1.0, 4.0, 0.0]],
                   dtype=torch.float64)
# clause: per-row, eps-on-std
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
# ### Exercise 4 — the GRPO loss: clipped ratio and KL to the reference (3 points)
#
# The advantage alone is not GRPO. DeepSeekMath's GRPO (Shao et al. 2024; TRL's
# `loss_type="grpo"`) samples a group of completions with the policy $\pi_{\text{old}}$, then takes
# **several** gradient steps on the same samples. From the second step on, the policy $\pi_\theta$
# being trained differs from the one that sampled, so each token carries the probability ratio
# $\rho_t = \pi_\theta(y_t\mid\cdot)/\pi_{\text{old}}(y_t\mid\cdot)$, clipped as in PPO, and a
# penalty keeps $\pi_\theta$ near the frozen reference $\pi_{\text{ref}}$. Implement `grpo_loss`:
#
# * inputs: `logps`, `old_logps`, `ref_logps`, each $(N, T)$: the per-token log-probabilities of $N$
#   sampled completions under $\pi_\theta$ (they carry the gradient), under $\pi_{\text{old}}$ and
#   under $\pi_{\text{ref}}$; `advantages` $(N,)$, one $A_i$ per completion (Exercise 3's output,
#   flattened); `mask` $(N, T)$, a float tensor of 0s and 1s: 1 on a completion's tokens, 0 after its
#   end; all values are finite;
# * `epsilon` defaults to 0.2 and `beta` to 0.04; use the values passed when they are given. <!-- clause: defaults -->
# * per token: $\rho = \exp(\texttt{logps} - \texttt{old\_logps})$; surrogate
#   $\min\big(\rho A_i,\ \operatorname{clip}(\rho, 1-\epsilon, 1+\epsilon)\,A_i\big)$;
#   KL estimate $k_3 = e^{\,r} - r - 1$ with $r = \texttt{ref\_logps} - \texttt{logps}$ (always ≥ 0, the
#   estimator of the GRPO paper and TRL); per-token loss $= -\text{surrogate} + \beta\,k_3$. <!-- clause: value -->
# * the mask **multiplies** the per-token losses $\ell_{it}$: completion $i$'s loss is
#   $\sum_t m_{it}\,\ell_{it} \,/\, \max\big(\sum_t m_{it},\ 1\big)$, i.e. the mean of $\ell_{it}$ over its
#   tokens with mask 1 (a token with mask 0 adds $0 \cdot \ell_{it} = 0$ to the sum and 0 to the count;
#   a completion with no token contributes 0). <!-- clause: masked-mean -->
# * the loss is the **mean over the $N$ completions** of these per-completion losses, returned as a
#   0-dim tensor. <!-- clause: mean-over-completions --> It is in the inputs' dtype (float32 inputs
#   give a float32 loss, float64 inputs a float64 one). <!-- clause: keeps-dtype -->
# * the loss must be differentiable with respect to `logps`: compute it with torch operations on
#   `logps` (no `.item()`, `.detach()` or NumPy), since the hidden tests compare its gradient as well
#   as its value. <!-- clause: differentiable -->
# * the inputs are left unchanged. <!-- clause: unchanged-input -->
#
# The clip applies to the ratio in both directions and the `min` keeps the unclipped term when it is
# the smaller one (Section 5's table). <!-- clause: clip-min --> Do not call `trl`. Below, the same
# function is checked against `GRPOTrainer.compute_loss` and then trains SmolLM2.

# %% nbgrader={"grade": false, "grade_id": "ex3b_grpo_loss", "locked": false, "schema_version": 3, "solution": true, "task": false}
def grpo_loss(logps, old_logps, ref_logps, advantages, mask, epsilon=0.2, beta=0.04):
    """GRPO loss (Shao et al. 2024, TRL's loss_type="grpo") of N completions of T tokens (Book §8.3.3).

    logps, old_logps, ref_logps: (N, T) per-token log-probs under the policy trained, the policy that
    sampled, and the frozen reference. advantages: (N,). mask: (N, T) float, 1 on completion tokens, 0 after.
    Per token: ratio = exp(logps - old_logps);
      surrogate = min(ratio * A, clip(ratio, 1 - epsilon, 1 + epsilon) * A);
      k3 = exp(ref_logps - logps) - (ref_logps - logps) - 1;  per-token loss = -surrogate + beta * k3.
    The mask multiplies the per-token losses: completion i's loss is
      sum_t mask[i, t] * loss[i, t] / max(sum_t mask[i, t], 1)   (the mean over its tokens with mask 1).
    Returns the mean over completions of these, a 0-dim tensor.
    Inputs are left unchanged.
    """
    ### BEGIN SOLUTION
    ratio = torch.exp(logps - old_logps)
    adv = advantages[:, None]
    surrogate = torch.minimum(ratio * adv, ratio.clamp(1 - epsilon, 1 + epsilon) * adv)
    r = ref_logps - logps
    per_token = -surrogate + beta * (torch.exp(r) - r - 1)
    return ((per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex3b_grpo_loss", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from course_utils.grading import check_close
_lp = torch.tensor([[-1.0, -2.0]])
check_close("grpo_loss when logps == old_logps == ref_logps, A = 1 (ratio 1, KL 0: loss -A)",
            grpo_loss(_lp, _lp.clone(), _lp.clone(), torch.tensor([1.0]), torch.ones(1, 2)), -1.0, atol=1e-6)
_old = torch.tensor([[-1.5, -2.0]])           # token 0: ratio e^0.5 = 1.65 > 1.2, clipped for A > 0
check_close("grpo_loss with ratios [1.6487, 1], A = 1, epsilon 0.2, beta 0 (token 0 clipped at 1.2)",
            grpo_loss(_lp, _old, _lp.clone(), torch.tensor([1.0]), torch.ones(1, 2), beta=0.0), -1.1, atol=1e-5)
check_close("grpo_loss with ratios [1.6487, 1], A = -1, epsilon 0.2, beta 0 (min keeps the unclipped -1.6487)",
            grpo_loss(_lp, _old, _lp.clone(), torch.tensor([-1.0]), torch.ones(1, 2), beta=0.0),
            (math.exp(0.5) + 1) / 2, atol=1e-5)
check_close("grpo_loss with ratio 1, A = 0, ref_logps - logps = [1, 0], beta 0.5 (0.5 * mean of e - 1 - 1 and 0)",
            grpo_loss(_lp, _lp.clone(), _lp + torch.tensor([[1.0, 0.0]]), torch.tensor([0.0]), torch.ones(1, 2), beta=0.5),
            0.5 * (math.e - 2) / 2, atol=1e-5)
check_close("grpo_loss with mask [[1, 0]] (the second token is after the end: not counted)",
            grpo_loss(_lp, _old, _lp.clone(), torch.tensor([1.0]), torch.tensor([[1.0, 0.0]]), beta=0.0), -1.2, atol=1e-5)
del _lp, _old
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import record
record("module of grpo_loss (it must be defined in this notebook)", grpo_loss.__module__)  # clause: defined-here
_g = torch.Generator().manual_seed(21)
_N, _T = 6, 5
_old = -3 * torch.rand(_N, _T, generator=_g, dtype=torch.float64)
_lp0 = _old + 0.6 * torch.randn(_N, _T, generator=_g, dtype=torch.float64)   # ratios from about 0.3 to 3
_ref = _old + 0.4 * torch.randn(_N, _T, generator=_g, dtype=torch.float64)
_adv = torch.tensor([1.2, -0.7, 0.0, -1.5, 0.9, 2.0], dtype=torch.float64)
_mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0], [1, 1, 1, 1, 0],
                      [0, 0, 0, 0, 0]], dtype=torch.float64)   # the last completion has no token


def _loss_and_grad(**kw):
    lp = _lp0.clone().requires_grad_(True)
    loss = grpo_loss(lp, _old, _ref, _adv, _mask, **kw)
    loss.backward()
    return [loss.detach(), lp.grad]


# clause: defaults, value, clip-min, masked-mean, mean-over-completions, keeps-dtype, differentiable
record("grpo_loss and its gradient wrt logps, 6 completions, epsilon 0.2, beta 0.04 (defaults)", _loss_and_grad(),
       atol=1e-9, rtol=1e-6)
# clause: value, clip-min, masked-mean, mean-over-completions, keeps-dtype, differentiable
record("grpo_loss and its gradient, epsilon 0.1, beta 0 (surrogate only: the clip in both directions, the min)",
       _loss_and_grad(epsilon=0.1, beta=0.0), atol=1e-9, rtol=1e-6)
# clause: value, clip-min, masked-mean, mean-over-completions, keeps-dtype, differentiable
record("grpo_loss and its gradient, epsilon 0.3, beta 0.5 (the k3 KL term and its sign)",
       _loss_and_grad(epsilon=0.3, beta=0.5), atol=1e-9, rtol=1e-6)
# clause: unchanged-input
record("old_logps after grpo_loss (left unchanged)", _old)
record("ref_logps after grpo_loss (left unchanged)", _ref)
record("advantages after grpo_loss (left unchanged)", _adv)
record("mask after grpo_loss (left unchanged)", _mask)
_lp_f = _lp0.float()
# clause: value, masked-mean, mean-over-completions, keeps-dtype
record("grpo_loss on float32 inputs, advantages of both signs (a mean of per-completion token means)",
       grpo_loss(_lp_f, _old.float(), _ref.float(), _adv.float(), _mask.float()), atol=1e-5, rtol=1e-5)
### BEGIN REFERENCE
from course_utils.grading import expect


def _direct(lp, old, ref, adv, mask, eps, beta):   # the formula written token by token, in float64
    total = 0.0
    for i in range(len(lp)):
        s, n = 0.0, 0
        for t in range(len(lp[i])):
            if mask[i][t]:
                rho = math.exp(lp[i][t] - old[i][t])
                surr = min(rho * adv[i], min(max(rho, 1 - eps), 1 + eps) * adv[i])
                r = ref[i][t] - lp[i][t]
                s += -surr + beta * (math.exp(r) - r - 1)
                n += 1
        total += s / max(n, 1)
    return total / len(lp)


for _kw, _key in (({}, "grpo_loss and its gradient wrt logps, 6 completions, epsilon 0.2, beta 0.04 (defaults)"),
                  ({"epsilon": 0.1, "beta": 0.0},
                   "grpo_loss and its gradient, epsilon 0.1, beta 0 (surrogate only: the clip in both directions, the min)"),
                  ({"epsilon": 0.3, "beta": 0.5}, "grpo_loss and its gradient, epsilon 0.3, beta 0.5 (the k3 KL term and its sign)")):
    _eps, _beta = _kw.get("epsilon", 0.2), _kw.get("beta", 0.04)
    _val = _direct(_lp0.tolist(), _old.tolist(), _ref.tolist(), _adv.tolist(), _mask.tolist(), _eps, _beta)
    _h = 1e-6                                      # central differences of the direct formula
    _grad = torch.zeros(_N, _T, dtype=torch.float64)
    for _i in range(_N):
        for _t in range(_T):
            _up, _dn = _lp0.clone(), _lp0.clone()
            _up[_i, _t] += _h
            _dn[_i, _t] -= _h
            _grad[_i, _t] = (_direct(_up.tolist(), _old.tolist(), _ref.tolist(), _adv.tolist(), _mask.tolist(), _eps, _beta)
                             - _direct(_dn.tolist(), _old.tolist(), _ref.tolist(), _adv.tolist(), _mask.tolist(), _eps, _beta)) / (2 * _h)
    expect(_key, [torch.tensor(_val, dtype=torch.float64), _grad], atol=1e-6, rtol=1e-5)
_g = torch.Generator().manual_seed(21)
_old0 = -3 * torch.rand(_N, _T, generator=_g, dtype=torch.float64)
expect("old_logps after grpo_loss (left unchanged)", _old0)
del _direct, _kw, _key, _eps, _beta, _val, _h, _grad, _i, _t, _up, _dn, _old0
### END REFERENCE
del _g, _N, _T, _old, _lp0, _ref, _adv, _mask, _loss_and_grad, _lp_f
### END HIDDEN TESTS

# %% [markdown]
# ### GRPO, trained: a verifiable arithmetic reward on SmolLM2-135M-Instruct (Book §8.3.3)
#
# Now the whole loop, as DeepSeekMath and TRL run it. **Task and reward.** Questions
# "What is $a$ + $b$? Reply with the number only." for the 36 pairs $1 \le a, b$, $a + b \le 9$; 12 of
# them are held out, 24 train, split by *unordered* pair (drawn with a seed): 3 + 4 and 4 + 3 fall on
# the same side, so no held-out question is a training question with its terms swapped. The reward is a program, not a judge: the integers
# in the reply are read in order; a leading restatement "$a$ + $b$" is skipped; the reward is 1 if the
# next integer is $a + b$, else 0 (so "7", "3 + 4 = 7" and "3 + 4 equals 7." score 1, "The answer" or
# "3 + 4 = 8" score 0). The stand-in solves it only sometimes (the held-out rate before training is
# printed below).
#
# **The loop.** Each step samples `GRPO_P` training questions and a **group** of `GRPO_G` = 8
# completions of at most `GRPO_LEN` = 8 tokens for each (temperature 1), scores them, turns the rewards
# into `group_advantages` (Exercise 3), then takes `GRPO_MU` = 2 AdamW steps on the same samples with
# `grpo_loss` (Exercise 4), $\epsilon$ = 0.2 and $\beta$ = 0.04 (TRL's default ε; β as in DeepSeekMath). The
# first update starts at $\rho = 1$; the second sees the ratios the first one moved, so the clip can
# act. We log, per step: the mean sampled reward, the **clipped fraction** of the second update (tokens
# whose ratio left $[1-\epsilon, 1+\epsilon]$ in the direction where the clip zeroes the gradient, as TRL's
# `clip_ratio/region_mean`), the mean per-token $k_3$ KL to the reference, and the completion length.
# Last 10 layers trained as in Section 4, learning rate `GRPO_LR`. **Two arms, one factor**: the same
# run with $\beta$ = 0.04 and with $\beta$ = 0 (no KL term), same seed, so the first batch is the same
# and what differs afterwards is the pull towards the reference. **Two training seeds** per arm (a seed
# fixes which questions are drawn and the sampler's random numbers): how far two runs of one arm land
# apart is the yardstick for what β changes. **Held out**, before and after: 8
# sampled replies per held-out question with a fixed sampling seed, and per question the mean reward,
# the share of replies that contain an integer answer at all, and the share that first restate
# "$a$ + $b$" — so that a change of *form* (an integer where there was prose) can be told from a
# change of *correctness* (the right integer, given that there is one: pooled over replies, with a
# Wilson interval). The same replies at twice the token budget (16), paired question by question with
# those at 8, show whether 8 tokens cut answers short. Paired t-tests over the 12 questions. Full mode: `GRPO_STEPS` = 6 steps of 2 questions; CI
# mode: 1 step of 1 question and 3 held-out questions (a smoke run).
#
# **Checked against TRL first.** For speed the step's questions run as one batch, each prompt once,
# and its key/value cache is shared by its group's completions; on the tiny random Llama of Section 3 we check that these per-token
# log-probs equal a full forward pass, and that `grpo_loss` and its gradient equal those of
# `GRPOTrainer.compute_loss` on the same batch with old log-probs that differ from the current ones
# (so ratios are clipped) and $\beta$ = 0.04 (TRL's `use_bias_correction_kl` off: by default this TRL
# version multiplies the KL by the ratio, which the GRPO paper does not).

# %% nbgrader={"grade": false, "grade_id": "grpo_setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
GRPO_G, GRPO_LEN, GRPO_LR, GRPO_LAYERS, GRPO_MU, GRPO_EPS, GRPO_BETA = 8, 8, 5e-5, 10, 2, 0.2, 0.04
GRPO_STEPS = 0 if AUTOGRADING else (1 if CI_MODE else 6)    # CI mode: 1 step (a smoke run); full mode: 6
GRPO_P = 1 if CI_MODE else 2                                # questions per step
GRPO_HELDOUT = 3 if CI_MODE else 12                         # CI mode: 3 held-out questions; full mode: all 12


def group_token_logprobs(model, prompt_ids, completions):
    """Per-token log-probs (P*G, C) of the completions (P*G, C) of P prompts (P, L) of equal length (no padding),
    rows p*G to p*G + G - 1 answering prompt p (as `sample_group` returns them). Each prompt runs once, only its
    last position goes through the LM head, and its key/value cache is shared by its G completions."""
    G = completions.shape[0] // prompt_ids.shape[0]
    out = model(prompt_ids, use_cache=True, logits_to_keep=1)
    first = torch.log_softmax(out.logits[:, -1].float(), -1).repeat_interleave(G, 0)[:, None]
    cache = out.past_key_values
    cache.batch_repeat_interleave(G)
    rest = torch.log_softmax(model(completions[:, :-1], past_key_values=cache).logits.float(), -1)
    return torch.cat([first, rest], 1).gather(-1, completions[..., None]).squeeze(-1)


def sample_group(model, prompt_ids, G, C, gen):
    """G completions of C tokens for each of the P prompts of `prompt_ids` (P, L), prompts of equal length (no padding),
    sampled at temperature 1: rows p*G to p*G + G - 1 answer prompt p. mask = 1 up to and including the first EOS
    (as TRL). One prompt: a (1, L) tensor."""
    with torch.no_grad():
        out = model(prompt_ids, use_cache=True, logits_to_keep=1)      # the head only at the prompt's last position
        cache = out.past_key_values
        cache.batch_repeat_interleave(G)
        logits, toks = out.logits[:, -1].float().repeat_interleave(G, 0), []
        for t in range(C):
            toks.append(torch.multinomial(torch.softmax(logits, -1), 1, generator=gen))
            if t < C - 1:
                logits = model(toks[-1], past_key_values=cache, use_cache=True).logits[:, -1].float()
    completions = torch.cat(toks, 1)
    is_eos = completions == tok.eos_token_id
    return completions, ((is_eos.cumsum(1) - is_eos.long()) == 0).float()


if not AUTOGRADING:
    with contextlib.redirect_stderr(io.StringIO()):
        from trl import GRPOConfig, GRPOTrainer
    # the check: one group of 4 completions of 3 tokens on the tiny random Llama, one of them ending early
    _ids = tok(chat_prompt(TRAIN_PAIRS[0]["prompt"]), return_tensors="pt", add_special_tokens=False).input_ids
    _comp = torch.randint(0, len(tok), (4, 3), generator=torch.Generator().manual_seed(1))
    _comp[1, 1] = tok.eos_token_id
    _is_eos = _comp == tok.eos_token_id
    _mask = ((_is_eos.cumsum(1) - _is_eos.long()) == 0).float()
    _adv = group_advantages(torch.tensor([[1.0, 0.0, 0.0, 1.0]]))[0]
    with torch.random.fork_rng():                # a fresh tiny random Llama (Section 3's config), not patched by TRL
        torch.manual_seed(0)
        _ours_model = LlamaForCausalLM(tiny_cfg).eval()
    _trl_model = copy.deepcopy(_ours_model)
    with torch.no_grad():
        _shared = group_token_logprobs(_ours_model, _ids, _comp)
        _full = torch.log_softmax(_ours_model(torch.cat([_ids.expand(4, -1), _comp], 1)).logits[:, -3 - 1:-1].float(),
                                  -1).gather(-1, _comp[..., None]).squeeze(-1)
    _noise = torch.Generator().manual_seed(2)
    _old = _shared + 0.3 * torch.randn(_shared.shape, generator=_noise)   # the sampler: a policy 1 or 2 updates back
    _refl = _shared + 0.3 * torch.randn(_shared.shape, generator=_noise)  # the frozen reference
    _ours_loss = grpo_loss(group_token_logprobs(_ours_model, _ids, _comp), _old, _refl, _adv, _mask,
                           epsilon=GRPO_EPS, beta=GRPO_BETA)
    _ours_loss.backward()
    _args = GRPOConfig(output_dir=str(course_utils.paths.cache_dir() / "grpo_runs"), use_cpu=True, bf16=False,
                       report_to="none", loss_type="grpo", beta=0.0, epsilon=GRPO_EPS, use_bias_correction_kl=False,
                       num_generations=4, per_device_train_batch_size=4, max_completion_length=3, disable_tqdm=True,
                       save_strategy="no")
    with contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _trainer = GRPOTrainer(model=_trl_model, reward_funcs=lambda completions, **kw: [0.0] * len(completions),
                               args=_args, train_dataset=datasets.Dataset.from_list([{"prompt": "x"}] * 4),
                               processing_class=tok)
        _trainer.beta = GRPO_BETA     # built with beta 0 (else TRL reloads a reference by name); the loss reads self.beta
        _trainer.model.eval()
        _trl_loss = _trainer.compute_loss(_trainer.model, {
            "prompt_ids": _ids.expand(4, -1), "prompt_mask": torch.ones(4, _ids.shape[1], dtype=torch.long),
            "completion_ids": _comp, "completion_mask": _mask.long(), "advantages": _adv, "old_per_token_logps": _old,
            "ref_per_token_logps": _refl, "num_items_in_batch": _mask.sum()})
        _trl_loss.backward()
    _g_ours = torch.cat([p.grad.flatten() for p in _ours_model.parameters() if p.grad is not None])
    _g_trl = torch.cat([p.grad.flatten() for p in _trainer.model.parameters() if p.grad is not None])
    _ratio = torch.exp(_shared - _old)
    print(f"tiny Llama, 4 completions of 3 tokens: shared-cache vs full-forward log-probs, max |diff| "
          f"{(_shared - _full).abs().max().item():.1e}")
    print(f"ratios of the check batch: {((_ratio > 1 + GRPO_EPS) | (_ratio < 1 - GRPO_EPS)).sum().item()} of "
          f"{_ratio.numel()} outside [{1 - GRPO_EPS:.1f}, {1 + GRPO_EPS:.1f}]; epsilon {GRPO_EPS}, beta {GRPO_BETA}")
    print(f"grpo_loss vs TRL GRPOTrainer.compute_loss: {_ours_loss.item():.6f} vs {_trl_loss.item():.6f}; gradients "
          f"max |diff| {(_g_ours - _g_trl).abs().max().item():.1e} (gradient norm {_g_trl.norm().item():.3f})")
    course_utils.grading.check_close("shared-cache log-probs vs a full forward", _shared, _full, atol=1e-4)
    course_utils.grading.check_close("grpo_loss vs TRL's", _ours_loss.item(), _trl_loss.item(), atol=1e-5)
    course_utils.grading.check_close("grpo_loss gradient vs TRL's", _g_ours, _g_trl, atol=1e-5)
    del _trainer, _ours_model, _trl_model, _args, _ids, _comp, _is_eos, _mask, _adv, _shared, _full, _g_ours, _g_trl
    del _noise, _old, _refl, _ours_loss, _trl_loss, _ratio

# %% nbgrader={"grade": false, "grade_id": "grpo_run", "locked": true, "schema_version": 3, "solution": false, "task": false}
SUMS = [(a, b) for a in range(1, 9) for b in range(1, 9) if a + b <= 9]      # 36 questions
# Held out by unordered pair: a question and its commuted twin (3 + 4 and 4 + 3) fall on the same side,
# so no held-out sum is a training question with its terms swapped.
_pairs = sorted({tuple(sorted(q)) for q in SUMS})                          # 20 unordered pairs
_held = []
for _i in np.random.default_rng(13).permutation(len(_pairs)):
    _twins = sorted({_pairs[_i], _pairs[_i][::-1]})
    if len(_held) + len(_twins) <= 12:
        _held += _twins
SUM_TRAIN = [q for q in SUMS if q not in _held]                             # 24 training questions
SUM_HELDOUT = _held[:GRPO_HELDOUT]                                          # 12 (CI mode: 3)
assert len(_held) == 12 and not {tuple(sorted(q)) for q in SUM_TRAIN} & {tuple(sorted(q)) for q in _held}
if GRPO_STEPS:
    _n_twins = sum(a < b and (b, a) in SUM_HELDOUT for a, b in SUM_HELDOUT)
    _n_doubles = sum(a == b for a, b in SUM_HELDOUT)
    print(f"held-out questions: {', '.join(f'{a} + {b}' for a, b in SUM_HELDOUT)}: {_n_twins} pairs of commuted "
          f"twins, {_n_doubles} doubles (a + a), {len(SUM_HELDOUT) - 2 * _n_twins - _n_doubles} without their twin")


def sum_prompt(a, b):
    return tok(chat_prompt(f"What is {a} + {b}? Reply with the number only."), return_tensors="pt",
               add_special_tokens=False).input_ids


def restates(text, a, b):
    """Do the reply's integers begin with a, b (it restates 'a + b' before answering)?"""
    return [int(x) for x in re.findall(r"\d+", text)][:2] == [a, b]


def answer_of(text, a, b):
    """The integer the reward reads: the first one after an optional restatement 'a + b'; None if there is none."""
    nums = [int(x) for x in re.findall(r"\d+", text)]
    if restates(text, a, b):
        nums = nums[2:]
    return nums[0] if nums else None


def sum_reward(text, a, b):
    """1.0 if the first integer of the reply after an optional restatement 'a + b' is a + b, else 0.0."""
    return float(answer_of(text, a, b) == a + b)


def group_rewards(completions, mask, a, b):
    return torch.tensor([sum_reward(tok.decode(c[m.bool()], skip_special_tokens=True), a, b)
                         for c, m in zip(completions, mask)])


def heldout_replies(model, lengths=(GRPO_LEN,), n=8, seed=100):
    """{budget: n sampled replies (text) per held-out question} for each token budget of `lengths`, with the same
    sampling seed for every model. One run at the longest budget: the replies at a shorter one are its first tokens,
    exactly what a run at that budget draws (the tokens are drawn one at a time from one generator). The prompts all
    have the same length (one-digit numbers), so the questions are sampled together in one batch."""
    gen = torch.Generator().manual_seed(seed)
    comp, mask = sample_group(model, torch.cat([sum_prompt(a, b) for a, b in SUM_HELDOUT]), n, max(lengths), gen)
    out = {}
    for length in lengths:
        texts = [tok.decode(c[:length][m[:length].bool()], skip_special_tokens=True) for c, m in zip(comp, mask)]
        out[length] = [texts[i * n:(i + 1) * n] for i in range(len(SUM_HELDOUT))]
    return out


def reply_stats(replies):
    """Per held-out question: mean reward, share of replies with an integer answer, share that restate 'a + b'.
    Pooled over replies: (correct, with an integer) and (correct, restating) counts."""
    per_q = {"reward": [], "integer": [], "restates": []}
    pooled = {"correct": 0, "with_integer": 0, "restating": 0, "restating_correct": 0}
    for (a, b), texts in zip(SUM_HELDOUT, replies):
        ans = [answer_of(t, a, b) for t in texts]
        rest = [restates(t, a, b) for t in texts]
        per_q["reward"].append(np.mean([x == a + b for x in ans]))
        per_q["integer"].append(np.mean([x is not None for x in ans]))
        per_q["restates"].append(np.mean(rest))
        pooled["correct"] += sum(x == a + b for x in ans)
        pooled["with_integer"] += sum(x is not None for x in ans)
        pooled["restating"] += sum(rest)
        pooled["restating_correct"] += sum(r and x == a + b for r, x in zip(rest, ans))
    return {k: np.array(v) for k, v in per_q.items()}, pooled


def unpatched_copy(model):
    """A deepcopy that runs its own weights. TRL's trainers replace `model.forward` (add_fused_lm_head) by a closure
    that calls the forward of the *original* object: a plain deepcopy of a model passed to DPOTrainer would
    still compute with the original's (frozen) weights. Dropping the instance attribute restores the class's forward."""
    clone = copy.deepcopy(model)
    clone.__dict__.pop("forward", None)
    return clone


def train_grpo(seed=0, beta=GRPO_BETA):
    """GRPO_STEPS steps from the frozen reference with KL coefficient beta; returns the trained model and a per-step log."""
    model = unpatched_copy(ref_model)
    n_layers = model.config.num_hidden_layers
    for name, p in model.named_parameters():
        p.requires_grad_(any(f"layers.{i}." in name for i in range(n_layers - GRPO_LAYERS, n_layers)))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=GRPO_LR, weight_decay=0.0)
    rng, gen, log = np.random.default_rng(seed), torch.Generator().manual_seed(seed), []
    for _ in tqdm(range(GRPO_STEPS), desc=f"GRPO steps (beta {beta:g}, seed {seed})"):
        questions = [SUM_TRAIN[i] for i in rng.choice(len(SUM_TRAIN), GRPO_P, replace=False)]
        ids = torch.cat([sum_prompt(a, b) for a, b in questions])   # equal lengths (one-digit numbers): one batch
        comp, mask = sample_group(model, ids, GRPO_G, GRPO_LEN, gen)  # rows p*G .. p*G + G - 1 answer question p
        r = torch.stack([group_rewards(comp[p * GRPO_G:(p + 1) * GRPO_G], mask[p * GRPO_G:(p + 1) * GRPO_G], a, b)
                         for p, (a, b) in enumerate(questions)])      # (GRPO_P, GRPO_G): one group per question
        adv = group_advantages(r).flatten()
        with torch.no_grad():
            ref_lp = group_token_logprobs(ref_model, ids, comp)
        old_lp, clipped, kl = None, [], []
        for it in range(GRPO_MU):
            opt.zero_grad()
            lp = group_token_logprobs(model, ids, comp)
            if old_lp is None:                   # first update: the policy is still the sampler, ratio = 1
                old_lp = lp.detach()
            grpo_loss(lp, old_lp, ref_lp, adv, mask, GRPO_EPS, beta).backward()   # the mean over all P*G completions
            with torch.no_grad():
                ratio, d = torch.exp(lp - old_lp), ref_lp - lp
                region = ((ratio > 1 + GRPO_EPS) & (adv[:, None] > 0)) | ((ratio < 1 - GRPO_EPS) & (adv[:, None] < 0))
                clipped.append(((region.float() * mask).sum() / mask.sum()).item())
                kl.append((((torch.exp(d) - d - 1) * mask).sum() / mask.sum()).item())
            opt.step()
        log.append({"reward": r.mean().item(), "clipped": clipped[-1], "kl": float(np.mean(kl)),
                    "length": mask.sum(1).mean().item()})
    return model, log


if GRPO_STEPS:
    from course_utils.stats import paired_t, wilson
    GRPO_ARMS = {f"beta {GRPO_BETA:g}": GRPO_BETA, "beta 0": 0.0}       # one factor: the KL term; same seeds
    GRPO_SEEDS = (0, 1)                                                # two training runs of each arm
    if CI_MODE:                                                        # a smoke run: one arm, one seed, one budget
        GRPO_ARMS, GRPO_SEEDS = {f"beta {GRPO_BETA:g}": GRPO_BETA}, (0,)
    grpo_eval, grpo_logs, grpo_samples = {}, {}, {}

    def evaluate(name, m):
        """Held out: the same 8 sampled replies per question for every model, at the trained budget and at twice it;
        and 3 sampled replies to each of the first two held-out questions (the same sampling seed for every model)."""
        for length, replies in heldout_replies(m, (GRPO_LEN,) if CI_MODE else (GRPO_LEN, 2 * GRPO_LEN)).items():
            grpo_eval[name, length] = reply_stats(replies)
        gen = torch.Generator().manual_seed(5)
        grpo_samples[name] = []
        for a, b in SUM_HELDOUT[:2]:
            c, mk = sample_group(m, sum_prompt(a, b), 3, GRPO_LEN, gen)
            grpo_samples[name].append([tok.decode(x[y.bool()], skip_special_tokens=True) for x, y in zip(c, mk)])

    evaluate("reference", ref_model)
    for seed in GRPO_SEEDS:              # each trained model is evaluated, then freed: one policy in memory at a time
        for arm, beta in GRPO_ARMS.items():
            _m, grpo_logs[arm, seed] = train_grpo(seed=seed, beta=beta)
            evaluate(f"{arm} s{seed}", _m)
            del _m
    RUNS = [f"{arm} s{seed}" for arm, seed in grpo_logs]
    print(f"GRPO on SmolLM2-135M-Instruct: {GRPO_STEPS} steps x {GRPO_P} questions x {GRPO_G} completions of <= "
          f"{GRPO_LEN} tokens, {GRPO_MU} updates per batch, epsilon {GRPO_EPS}, lr {GRPO_LR:g}; "
          f"arms: {', '.join(GRPO_ARMS)}; training seeds {', '.join(map(str, GRPO_SEEDS))} (a seed fixes the "
          f"questions drawn and the sampling; both arms of a seed start from the same batch)")
    if CI_MODE:
        print("CI mode: 1 step of 1 question, one arm, one seed, 3 held-out questions at 8 tokens (a smoke run); "
              "full mode trains 6 steps of 2 in two arms (beta 0.04 and 0) with two seeds each, 12 held out at "
              "8 and 16 tokens")
    print(f"{'step':>4s} {'arm':>9s} {'seed':>4s} {'reward (sampled)':>17s} {'clipped (update 2)':>19s} "
          f"{'KL k3 (mean)':>13s} {'length':>7s}")
    for (arm, seed), log in grpo_logs.items():
        for step, h in enumerate(log):
            print(f"{step + 1:4d} {arm:>9s} {seed:4d} {h['reward']:17.3f} {h['clipped']:19.3f} {h['kl']:13.4f} "
                  f"{h['length']:7.2f}")
    print(f"\nheld out: {GRPO_HELDOUT} questions (no commuted twin in training) x 8 sampled replies; per question, mean "
          f"[95 % t-interval over questions]; s0, s1: training seed")
    print(f"{'model':>14s} {'tokens':>6s} {'reward':>22s} {'has an integer':>22s} {'restates a + b':>22s}"
          f" {'correct | integer (pooled)':>30s}")
    for (name, length), (q, pooled) in grpo_eval.items():
        lo, hi = wilson(pooled["correct"], pooled["with_integer"]) if pooled["with_integer"] else (float("nan"),) * 2
        cond = (f"{pooled['correct']}/{pooled['with_integer']} = {pooled['correct'] / max(pooled['with_integer'], 1):.3f}"
                f" [{lo:.3f}, {hi:.3f}]")
        print(f"{name:>14s} {length:6d} {fmt_mean(q['reward']):>22s} {fmt_mean(q['integer']):>22s} "
              f"{fmt_mean(q['restates']):>22s} {cond:>30s}")
    for name in ("reference", *RUNS):
        pooled = grpo_eval[name, GRPO_LEN][1]
        if pooled["restating"]:
            print(f"{name}: replies that restate 'a + b' first: {pooled['restating']}, of which correct "
                  f"{pooled['restating_correct']} ({pooled['restating_correct'] / pooled['restating']:.3f})")

    def held_reward(name):
        return grpo_eval[name, GRPO_LEN][0]["reward"]

    def compare(label, after, before):
        """A paired t over the held-out questions, printed on one line (no test when the two are equal)."""
        if np.all(after == before):
            print(f"{label}: equal on all {len(after)} questions")
            return
        pt = paired_t(after, before)
        print(f"{label}: {pt.diff:+.3f} [{pt.low:+.3f}, {pt.high:+.3f}] (paired t over questions, p = "
              f"{pt.pvalue:.2g}); higher / lower / equal: {int((after > before).sum())} / "
              f"{int((after < before).sum())} / {int((after == before).sum())}")

    if not CI_MODE:                          # CI mode's 3 questions: no test (the table above is a smoke check)
        print(f"\nheld-out reward at {GRPO_LEN} tokens, paired over the {GRPO_HELDOUT} questions:")
        for name in RUNS:
            compare(f"{name} - reference", held_reward(name), held_reward("reference"))
        (arm1, _), (arm0, _) = GRPO_ARMS.items()
        for seed in GRPO_SEEDS:              # the factor: beta, within a seed (same first batch)
            compare(f"{arm0} - {arm1}, seed {seed}", held_reward(f"{arm0} s{seed}"), held_reward(f"{arm1} s{seed}"))
        for arm in GRPO_ARMS:                # two runs of one arm: what a training seed alone moves
            compare(f"{arm}: seed 1 - seed 0", held_reward(f"{arm} s1"), held_reward(f"{arm} s0"))
        for name in ("reference", *RUNS):
            compare(f"{name}: {2 * GRPO_LEN} tokens - {GRPO_LEN} tokens", grpo_eval[name, 2 * GRPO_LEN][0]["reward"],
                    held_reward(name))
        print("KL to the reference at the last step (the penalty beta x KL): " + ", ".join(
            f"{arm} s{seed} {log[-1]['kl']:.4f} ({GRPO_ARMS[arm] * log[-1]['kl']:.4f})"
            for (arm, seed), log in grpo_logs.items()))
    for j, (a, b) in enumerate(SUM_HELDOUT[:2]):
        for name in ("reference", *RUNS):
            print(f"What is {a} + {b}?  {name:14s}: " + " | ".join(map(repr, grpo_samples[name][j])))
    fig, axes = plt.subplots(1, 4, figsize=(13, 2.8))
    steps = range(1, GRPO_STEPS + 1)
    for ax, key, label in zip(axes, ("reward", "clipped", "kl", "length"),
                              ("mean sampled reward", "clipped fraction (update 2)", "KL to reference (k3)",
                               "completion length (tokens)")):
        for j, arm in enumerate(GRPO_ARMS):
            for seed in GRPO_SEEDS:
                ax.plot(steps, [h[key] for h in grpo_logs[arm, seed]], marker="o", color=f"C{j}",
                        linestyle="-" if seed == 0 else "--", label=f"{arm}, seed {seed}")
        ax.set(xlabel="GRPO step", ylabel=label)
    axes[0].set_ylim(0, 1)
    axes[0].legend(fontsize=7)
    plt.tight_layout(); plt.show()
else:
    print("GRPO run skipped under autograding; run the notebook in full mode to see it")


# %% [markdown]
# **Observe.** (Full mode; the policy is the offline stand-in SmolLM2-135M-Instruct; two arms, two training
# seeds each.) The checks first: on the tiny Llama the shared-cache log-probs equal a full forward pass
# (max |diff| `0.0e+00`), and on a batch where 6 of 12 ratios lie outside [0.8, 1.2], `grpo_loss` gives
# 0.033053 where TRL's `GRPOTrainer.compute_loss` gives 0.033053; their largest gradient difference is
# `2.8e-06` (gradient norm 2.277; float32 rounding, whose last digits move between runs). Then the runs.
# Seed 0's first step drew no correct reply in either arm (sampled reward 0.000): all its advantages are
# zero and it changes nothing. The clipped fraction of the second update (β = 0.04) is, step by step,
# 0.000, 0.203, 0.246, 0.297, 0.073, 0.066 in seed 0 and 0.505, 0.258, 0.236, 0.086, 0.047, 0.031 in
# seed 1: once a step has a non-zero advantage, a share of its tokens gets no gradient from the
# surrogate.
#
# **What β did here: nothing these runs can tell from the seed.** Within a seed the two arms start from the same batch.
# The held-out reward of β = 0 minus β = 0.04 is +0.031 [-0.018, +0.081] in seed 0 (p = 0.19) and
# +0.042 [-0.029, +0.112] in seed 1 (p = 0.22): both intervals contain zero, and neither allows an
# advantage of β = 0.04 above 0.029 or of β = 0 above 0.112, for these runs. Changing only
# the training seed gave larger point estimates, seed 1 minus seed 0 +0.083 [-0.002, +0.169] with
# β = 0.04 and +0.094 [+0.003, +0.184] with β = 0, but their intervals overlap the β differences': these
# runs do not tell the two effects apart. The KL to the reference at the last step is not lower with the
# penalty — 0.1458 vs 0.1374 (seed 0), 0.4995 vs 0.4443 (seed 1), one value per run, so no interval —
# and the two seeds of one arm lie further apart (0.1458 vs 0.4995) than the two arms of one seed. The
# penalty is small here: β × KL is 0.0058 and 0.0200 per token at the last step, while the advantages
# are standardised within each group (Exercise 3). These runs do not show β = 0.04 holding the policy
# back in 6 steps; two seeds per arm say nothing about how β's effect varies over many runs.
#
# **What was taught: a form, and right sums in it.** The 12 held-out questions are 5 pairs of commuted
# twins (2 + 7 and 7 + 2) and 2 doubles (1 + 1, 4 + 4); none has its twin among the training questions.
# The twins are not independent: the t-intervals count 12 units and are likely too narrow. The mean
# reward goes from 0.208 [0.048, 0.368] to 0.760 [0.596, 0.924] (β = 0.04, seed 0) up to 0.885 [0.787,
# 0.984] (β = 0, seed 1); the paired gains over the reference run from +0.552 [+0.411, +0.694] to
# +0.677 [+0.532, +0.823] (p ≤ 3.5e-06), and in every run all 12 questions improved. Two things
# changed. The **form**: the share of replies with an integer answer goes from 0.396 [0.261, 0.531] to
# 0.958–0.979, and the share that restate "$a$ + $b$" first from 0.333 [0.166, 0.500] to 0.938–0.969 —
# nearly every reply becomes an equation. The **correctness within it**: among replies with an integer,
# 20 of 38 were right before (0.526 [0.373, 0.675], Wilson) and 73 of 92 (0.793 [0.700, 0.864]) to 85 of
# 94 (0.904 [0.828, 0.949]) after; among replies that restate the question, 17 of 32 (0.531) before and
# 73 of 90 (0.811) to 85 of 93 (0.914) after. Those intervals pool 8 replies per question, which are not
# independent: read them as a description of these replies, not a test. The 8-token budget cost little:
# 16 tokens instead of 8 changes the reference's reward by +0.010 [-0.013, +0.033] (one question of 12
# higher), so the budget held back at most about 0.03 of it, and no run gained more. So on questions it never saw in either order, GRPO taught
# the format the reward reads (an equation instead of prose) and, in these replies, a larger share of
# right sums within that format (described, not tested) — the samples show both, and that wrong sums
# remain ("2 + 7 = 15" in all four runs' samples above). GRPO optimises the reward it is given, not the
# intent behind it (Book §8.5.3).
#
# **A pitfall met on the way.** `DPOTrainer` (and `GRPOTrainer`) replace the `forward` of the models
# they receive (TRL's `add_fused_lm_head`) with a closure that calls the *original object's*
# forward. A `copy.deepcopy` of such a model still computes with the original's weights — the copy
# would never learn. `unpatched_copy` drops the patched attribute; the tiny check above uses a
# fresh model for the same reason.

# %% [markdown]
# ## 6. Evaluation: benchmarks, fluency vs factuality, LLM-as-a-judge (Book §8.4, §8.5.4)
#
# **Why evaluation became hard** (Book §8.4.1). Benchmarks saturate, so harder ones replace them:
# the book names MMLU-Pro (multiple-choice knowledge and reasoning), AIME (competition maths),
# GPQA (graduate-level science questions) and LiveBench (refreshed questions, to limit contamination).
# Open-ended and reasoning answers have no simple automatic score, so LLMs are used as judges —
# and "evaluating became part of the problem".
#
# **Failure 1: fluency vs factuality** (Book §8.4.2). A fluent answer is not a correct one; form and
# content must be judged separately (facts, maths, logic). This notebook already produced an
# example: asked "What colour do you get by mixing blue and yellow?", the reference model answers
# "The answer is: blue." and, after DPO, "…which results in a shade of blue" (Section 4's outputs) — grammatical, confident, and wrong (green). The
# closed answer key of Section 4 catches this; a judge that rewards fluent text may not.
#
# **LLM-as-a-judge** (Book §8.4.4, §8.5.4). We use SmolLM2-135M-Instruct (the frozen reference,
# untouched by DPO) as a judge: the prompt asks "Which answer is better, A or B?" and we read the
# next-token logits restricted to the two labels, $P(A) = e^{z_A}/(e^{z_A} + e^{z_B})$ — a continuous
# score instead of a hard verdict, so a bias is a measured quantity with an interval. For each of
# the first 24 pairs (full mode; 3 in CI mode):
#
# * **quality**: the good (chosen) answer against the evasive (rejected) one, in both orders.
#   $P(\text{good}\mid\text{good first}) = P(A)$ in order (good, bad), $P(\text{good}\mid\text{good second}) = 1 - P(A)$
#   in order (bad, good). A judge that reads content gives both well above 0.5.
# * **position bias**: the shift of $P(\text{good})$ when the good answer moves from first to
#   second place, $P(\text{good}\mid\text{first}) - P(\text{good}\mid\text{second})$, per pair; 0 for an
#   order-blind judge, +1 for one that always picks the first answer. Paired test: Wilcoxon
#   signed-rank over pairs.
# * **verbosity bias**: the *same* correct answer against a copy padded with content-free filler;
#   $P(\text{padded})$ averaged over both orders (which cancels the position effect), minus 0.5.
#
# Intervals are 95 % t-intervals over pairs.

# %% [markdown]
# ### Exercise 5 — the position-debiased judge score (2 points)
#
# A judge shown one pair in both orders gives two numbers, and its position bias is in both. Implement
# `debiased_judge(p_a_correct_first, p_a_correct_second)`, which turns them into the three per-pair
# quantities this section measures. "Correct" is the answer we know to be better (the good answer in
# the quality pairs, the padded copy when we measure verbosity, the right sum in the answer-key pairs):
#
# * inputs: `p_a_correct_first[i]` $= p_1$, the judge's $P(\text{A})$ on pair $i$ when the correct
#   answer is shown first (as A), and `p_a_correct_second[i]` $= p_2$, its $P(\text{A})$ when the
#   correct answer is shown second (as B: there the judge favours the correct answer when $P(\text{A})$
#   is *small*). They have the same length $N \ge 1$, and every value lies in $[0, 1]$, 0 and 1
#   included (a judge may be certain). <!-- clause: bounds-inclusive --> Accept 1-D NumPy arrays of
#   any float dtype and plain lists of floats alike. <!-- clause: list-input -->
# * returns a tuple `(soft, verdict, shift)` of three NumPy arrays of shape $(N,)$:
#   * `soft`, float64: the judge's probability for the correct answer averaged over the two orders,
#     $\tfrac12\big[p_1 + (1 - p_2)\big]$ — a probability in $[0, 1]$ (½ = no preference), not centred
#     at 0. <!-- clause: soft -->
#   * `verdict`, bool: `True` where `soft` $> \tfrac12$, that is where $p_1 > p_2$; a tie, $p_1 = p_2$
#     (`soft` exactly ½), is `False`. <!-- clause: verdict --> The verdict comes from the averaged
#     probabilities, not from the two hard verdicts ($p_1 > \tfrac12$, $p_2 < \tfrac12$): a pair can be
#     right in one order only and still get a clear verdict either way. <!-- clause: verdict-averaged -->
#   * `shift`, float64: the position bias, $P(\text{correct}\mid\text{first}) - P(\text{correct}\mid\text{second})
#     = p_1 - (1 - p_2)$: positive when the judge favours the first slot, +1 for a judge that always
#     answers A, −1 for one that always answers B. <!-- clause: shift -->
# * a constant pull towards one slot cancels: adding the same $\delta$ to $p_1$ and $p_2$ leaves `soft`
#   and `verdict` unchanged and moves `shift` by $2\delta$. <!-- clause: pull-cancels -->
# * the three arrays are float64, bool, float64 whatever the inputs' dtype (float32 inputs too). <!-- clause: output-dtypes -->
#   The inputs are left unchanged. <!-- clause: unchanged-input -->
# * raise `ValueError` if the two inputs are not both 1-D of the same length (no broadcasting: a
#   0-dim input, an $(N, 1)$ input, or a $(1,)$ input next to an $(N,)$ one with $N > 1$ is an error;
#   two $(1,)$ inputs are one pair, and fine). <!-- clause: shape-error --> Raise `ValueError` too if
#   any value is outside $[0, 1]$ or NaN (log-probabilities or logits passed by mistake). <!-- clause: range-error -->
#
# The cells below use it for the quality, position and verbosity measurements and for the answer-key
# pairs.

# %% nbgrader={"grade": false, "grade_id": "ex3c_debiased_judge", "locked": false, "schema_version": 3, "solution": true, "task": false}
def debiased_judge(p_a_correct_first, p_a_correct_second):
    """Position-debiased judge score of N pairs, each judged in both orders.

    p_a_correct_first: (N,) the judge's P(A) when the correct answer is shown first (as A).
    p_a_correct_second: (N,) its P(A) when the correct answer is shown second (as B).
    1-D NumPy arrays (any float dtype) or lists, the same length N >= 1, values in [0, 1].
    Returns (soft, verdict, shift), three NumPy arrays of shape (N,):
      soft = (p1 + (1 - p2)) / 2, float64: P(correct) averaged over the two orders;
      verdict = soft > 1/2, i.e. p1 > p2, bool (a tie p1 == p2 is False);
      shift = p1 - (1 - p2), float64: P(correct | first) - P(correct | second), the position bias.
    Inputs are left unchanged. Raises ValueError if the inputs are not both 1-D of the same length
    (no broadcasting) or if a value is outside [0, 1] or NaN.
    """
    ### BEGIN SOLUTION
    p1 = np.asarray(p_a_correct_first, dtype=np.float64)
    p2 = np.asarray(p_a_correct_second, dtype=np.float64)
    if p1.ndim != 1 or p2.shape != p1.shape:
        raise ValueError(f"expected two 1-D arrays of the same length, got shapes {p1.shape} and {p2.shape}")
    if not (np.all((p1 >= 0) & (p1 <= 1)) and np.all((p2 >= 0) & (p2 <= 1))):   # NaN fails both comparisons
        raise ValueError("probabilities must lie in [0, 1] (not NaN)")
    soft = (p1 + (1 - p2)) / 2
    verdict = p1 > p2                       # = soft > 1/2, without rounding: a tie is not right
    shift = p1 - (1 - p2)
    return soft, verdict, shift
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex3c_debiased_judge", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from course_utils.grading import check_close, check_equal, check_type
_out = debiased_judge(np.array([0.9, 0.75, 0.6]), np.array([0.2, 0.75, 0.9]))
check_type("debiased_judge(p1, p2)", _out, tuple)
check_equal("number of arrays debiased_judge returns (soft, verdict, shift)", len(_out), 3)
_soft, _verdict, _shift = _out
check_type("debiased_judge verdict", _verdict, np.ndarray)
check_close("debiased_judge soft score, p1 = [0.9, 0.75, 0.6], p2 = [0.2, 0.75, 0.9] (the mean of p1 and 1 - p2, "
            "float64)", _soft, np.array([0.85, 0.5, 0.35]), atol=1e-9, dtype=np.float64)
check_equal("debiased_judge verdict, p1 = [0.9, 0.75, 0.6], p2 = [0.2, 0.75, 0.9] (soft > 1/2: the tie is not "
            "right; a bool array)", [str(_verdict.dtype)] + _verdict.tolist(), ["bool", True, False, False])
check_close("debiased_judge position shift, p1 = [0.9, 0.75, 0.6], p2 = [0.2, 0.75, 0.9] (p1 - (1 - p2): "
            "positive when the first slot is favoured)", _shift, np.array([0.1, 0.5, 0.5]), atol=1e-9, dtype=np.float64)
del _out, _soft, _verdict, _shift
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import outcome, record
record("module of debiased_judge (it must be defined in this notebook)", debiased_judge.__module__)  # clause: defined-here
_rng = np.random.default_rng(31)
_p1, _p2 = _rng.uniform(0, 1, 12), _rng.uniform(0, 1, 12)
_res = debiased_judge(_p1, _p2)
record("debiased_judge on 12 random pairs: soft score (float64)", _res[0], atol=1e-12)  # clause: soft
record("debiased_judge on 12 random pairs: verdict (a bool array)", _res[1])  # clause: verdict
# clause: shift
record("debiased_judge on 12 random pairs: position shift (float64, the sign: + favours the first slot)", _res[2],
       atol=1e-12)
# clause: unchanged-input
record("p_a_correct_first after debiased_judge (left unchanged)", _p1)
record("p_a_correct_second after debiased_judge (left unchanged)", _p2)
_q = np.array([0.55, 0.45, 0.7, 0.3, 0.52, 0.48])           # the judge's preference for the correct answer
for _d in (0.3, -0.2):                                      # plus a constant pull towards slot A (+) or B (-)
    _res = debiased_judge(_q + _d, (1 - _q) + _d)
    # clause: pull-cancels, soft, verdict, shift
    record(f"debiased_judge with a constant pull of {_d:+.1f} towards slot A (soft, verdict, shift)", list(_res),
           atol=1e-12)
_c = np.array([0.75, 0.5, 0.25, 1.0, 0.0, 0.875])           # a pure position pull: the same P(A) in both orders
# clause: verdict, soft, shift, bounds-inclusive
record("debiased_judge when P(A) is the same in both orders (ties; 0 and 1 are valid probabilities)",
       list(debiased_judge(_c, _c.copy())), atol=1e-12)
_h1, _h2 = np.array([0.95, 0.6, 0.9, 0.55]), np.array([0.6, 0.95, 0.52, 0.1])   # right in one order only (pairs 0-2)
# clause: verdict-averaged
record("debiased_judge verdict where averaging probabilities and averaging hard verdicts disagree",
       debiased_judge(_h1, _h2)[1])
_res = debiased_judge(_p1[:5].astype(np.float32), _p2[:5].astype(np.float32))
record("debiased_judge on float32 inputs (float64 soft and shift, bool verdict)", list(_res), atol=1e-6)  # clause: output-dtypes
# clause: list-input
record("debiased_judge on lists [0.9, 0.25], [0.4, 0.25]", list(debiased_judge([0.9, 0.25], [0.4, 0.25])), atol=1e-12)
_bad = {"lengths 12 and 11": (_p1, _p2[:11]),
        "shapes (12,) and (1,) (no broadcasting)": (_p1, _p2[:1]),
        "two (12, 1) arrays (not 1-D)": (_p1[:, None], _p2[:, None]),
        "two 0-dim arrays (not 1-D)": (np.float64(0.7), np.float64(0.2)),
        "a value 1.25 in p_a_correct_first": (np.append(_p1[:3], 1.25), _p2[:4]),
        "log-probabilities (negative) in p_a_correct_second": (_p1[:4], np.log(_p2[:4])),
        "a NaN in p_a_correct_second": (_p1[:4], np.append(_p2[:3], np.nan))}
for _what, _args in _bad.items():
    # clause: shape-error, range-error
    record(f"debiased_judge with {_what}: must raise ValueError", outcome(debiased_judge, *_args))
### BEGIN REFERENCE
from course_utils.grading import expect
_rng = np.random.default_rng(31)
_e1, _e2 = _rng.uniform(0, 1, 12), _rng.uniform(0, 1, 12)
expect("debiased_judge on 12 random pairs: soft score (float64)", 0.5 + 0.5 * (_e1 - _e2), atol=1e-12)
expect("debiased_judge on 12 random pairs: verdict (a bool array)", _e1 > _e2)
expect("debiased_judge on 12 random pairs: position shift (float64, the sign: + favours the first slot)",
       _e1 + _e2 - 1, atol=1e-12)
expect("p_a_correct_first after debiased_judge (left unchanged)", _e1)
expect("p_a_correct_second after debiased_judge (left unchanged)", _e2)
for _d in (0.3, -0.2):                                      # the pull cancels: soft = q; the shift is the pull, 2 delta
    expect(f"debiased_judge with a constant pull of {_d:+.1f} towards slot A (soft, verdict, shift)",
           [_q.copy(), _q > 0.5, np.full(6, 2 * _d)], atol=1e-12)
expect("debiased_judge when P(A) is the same in both orders (ties; 0 and 1 are valid probabilities)",
       [np.full(6, 0.5), np.zeros(6, dtype=bool), 2 * _c - 1], atol=1e-12)
expect("debiased_judge verdict where averaging probabilities and averaging hard verdicts disagree",
       np.array([True, False, True, True]))
_f1, _f2 = _e1[:5].astype(np.float32).astype(np.float64), _e2[:5].astype(np.float32).astype(np.float64)
expect("debiased_judge on float32 inputs (float64 soft and shift, bool verdict)",
       [0.5 + 0.5 * (_f1 - _f2), _f1 > _f2, _f1 + _f2 - 1], atol=1e-6)
expect("debiased_judge on lists [0.9, 0.25], [0.4, 0.25]",
       [np.array([0.75, 0.5]), np.array([True, False]), np.array([0.3, -0.5])], atol=1e-12)
for _what in _bad:
    expect(f"debiased_judge with {_what}: must raise ValueError", "raises ValueError")
del _e1, _e2, _f1, _f2
### END REFERENCE
del _rng, _p1, _p2, _res, _q, _d, _c, _h1, _h2, _bad, _what, _args
### END HIDDEN TESTS

# %% nbgrader={"grade": false, "grade_id": "judge", "locked": true, "schema_version": 3, "solution": false, "task": false}
JUDGE_TEMPLATE = ("Question: {q}\n\nAnswer A: {a}\n\nAnswer B: {b}\n\n"
                  "Which answer is better, A or B? Reply with one letter.")
FILLER = (" In addition, it is worth noting that this is a well-known fact that many people find interesting and useful to remember.")

def judge_prob_a(judge, items, batch_size=24, template=JUDGE_TEMPLATE, labels=("A", "B")):
    """For (question, answer A, answer B) items: P(A) / (P(A) + P(B)) of the judge's next token, and P(A) + P(B)
    (A and B: the two `labels`, one token each), as float32 arrays in the items' order.

    Only the next-token distribution after each prompt is needed, so: the prompts' common beginning (the chat
    template's system turn, "Question: ", ...) runs once per batch and its key/value cache is shared by the batch;
    prompts of similar length are batched together, right-padded; the LM head is applied at each prompt's last token
    only. The same numbers as one full forward pass per prompt, for about half the compute."""
    id_a, id_b = (tok.encode(label, add_special_tokens=False)[0] for label in labels)
    rows = [tok(chat_prompt(template.format(q=q, a=a, b=b)), add_special_tokens=False).input_ids for q, a, b in items]
    n = 0                                                  # common prefix; every prompt keeps at least one token
    while n < min(map(len, rows)) - 1 and all(r[n] == rows[0][n] for r in rows):
        n += 1
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
    p_a, mass = np.zeros(len(rows), dtype=np.float32), np.zeros(len(rows), dtype=np.float32)
    for start in range(0, len(rows), batch_size):
        idx = order[start:start + batch_size]
        ends = torch.tensor([len(rows[i]) - n for i in idx])                 # suffix lengths
        ids = torch.full((len(idx), int(ends.max())), tok.pad_token_id)
        att = torch.zeros((len(idx), n + int(ends.max())), dtype=torch.long)
        att[:, :n] = 1
        for j, i in enumerate(idx):
            ids[j, :ends[j]] = torch.tensor(rows[i][n:])
            att[j, n:n + ends[j]] = 1
        with torch.no_grad():
            cache = judge.model(torch.tensor([rows[0][:n]]), use_cache=True).past_key_values
            cache.batch_repeat_interleave(len(idx))
            hidden = judge.model(input_ids=ids, attention_mask=att, past_key_values=cache).last_hidden_state
            logp = torch.log_softmax(judge.lm_head(hidden[torch.arange(len(idx)), ends - 1]).float(), -1)
        p_a[idx] = torch.softmax(logp[:, [id_a, id_b]], -1)[:, 0].numpy()   # logits restricted to the two labels
        mass[idx] = logp[:, [id_a, id_b]].exp().sum(-1).numpy()
    return p_a, mass

N_JUDGE = 0 if AUTOGRADING else (3 if CI_MODE else 24)    # CI mode: 3 pairs (a smoke run); full mode: 24
if N_JUDGE:
    jp = PAIRS[:N_JUDGE]
    pa_good_first, mass1 = judge_prob_a(ref_model, [(p["prompt"], p["chosen"], p["rejected"]) for p in jp])
    pa_good_second, mass2 = judge_prob_a(ref_model, [(p["prompt"], p["rejected"], p["chosen"]) for p in jp])
    pa_pad_first, _ = judge_prob_a(ref_model, [(p["prompt"], p["chosen"] + FILLER, p["chosen"]) for p in jp])
    pa_pad_second, _ = judge_prob_a(ref_model, [(p["prompt"], p["chosen"], p["chosen"] + FILLER) for p in jp])
    soft_good, _, shift = debiased_judge(pa_good_first, pa_good_second)   # Exercise 5, "correct" = the good answer
    soft_pad, _, _ = debiased_judge(pa_pad_first, pa_pad_second)          # "correct" = the padded copy
    good_first, good_second = pa_good_first, 1 - pa_good_second           # P(good) in each order
    quality = soft_good - 0.5                                     # order-averaged preference for the good answer
    verbosity = soft_pad - 0.5                                    # order-averaged preference for the padded copy
    print(f"judge = SmolLM2-135M-Instruct, {N_JUDGE} pairs, both orders; mean [95 % t-interval] over pairs")
    if CI_MODE:
        print("CI mode: 3 pairs only (a smoke run); full mode judges 24")
    print(f"P(A)+P(B) of the whole next-token distribution : {fmt_mean(np.concatenate([mass1, mass2]))}")
    print(f"P('A') over all {4 * N_JUDGE} prompts                      : "
          f"{fmt_mean(np.concatenate([pa_good_first, pa_good_second, pa_pad_first, pa_pad_second]))}")
    print(f"P(good | good shown first)                      : {fmt_mean(good_first)}")
    print(f"P(good | good shown second)                     : {fmt_mean(good_second)}")
    print(f"position bias, shift of P(good) first - second  : {fmt_mean(shift)}   "
          f"Wilcoxon p = {stats.wilcoxon(good_first, good_second).pvalue:.2g}")
    print(f"quality, order-averaged P(good) - 0.5           : {fmt_mean(quality, 4)}   "
          f"Wilcoxon p = {stats.wilcoxon(quality).pvalue:.2g}")
    print(f"verbosity, order-averaged P(padded) - 0.5       : {fmt_mean(verbosity, 4)}   "
          f"Wilcoxon p = {stats.wilcoxon(verbosity).pvalue:.2g}")
    print(f"hard verdicts (P(A) > 0.5): 'A' in {int((np.concatenate([pa_good_first, pa_good_second]) > 0.5).sum())} "
          f"of {2 * N_JUDGE} quality prompts")
    fig, axes = plt.subplots(1, 2, figsize=(9, 4))
    axes[0].scatter(good_first, good_second, s=14)
    axes[0].set(xlabel="P(good), good answer shown first", ylabel="P(good), good answer shown second",
                title="Quality pairs under swapping", xlim=(0, 1), ylim=(0, 1))
    axes[1].scatter(pa_pad_first, 1 - pa_pad_second, s=14, c="C1")
    axes[1].set(xlabel="P(padded), padded shown first", ylabel="P(padded), padded shown second",
                title="Verbosity pairs under swapping", xlim=(0, 1), ylim=(0, 1))
    for ax in axes:
        ax.axhline(0.5, c="gray", lw=0.5); ax.axvline(0.5, c="gray", lw=0.5); ax.plot([0, 1], [0, 1], c="gray", lw=0.5, ls=":")
    plt.tight_layout(); plt.show()
else:
    print("judge sweep skipped under autograding; run the notebook in full mode to see it")


# %% [markdown]
# **Observe.** (Full mode; the judge is the offline stand-in SmolLM2-135M-Instruct.) The judge
# puts a mean P("A") of 0.927 [0.924, 0.931] on the 96 prompts, whatever they contain: the good answer gets 0.934
# when it is shown first and 0.067 when it is shown second, a **position bias** of 0.867 [0.858,
# 0.877] on a scale where 1 means "always the first answer" (Wilcoxon `p = 1.2e-07`); every one of
# the 48 hard verdicts is "A". Averaged over both orders, its preference for the good answer is
# 0.0008 [−0.0020, 0.0037] above one half (p = 0.79): **no measurable quality signal** — whatever
# preference it has for a correct answer over an evasion is below 0.0037, the interval's upper end. The **verbosity bias** is tiny but detectable: the padded
# copy gets 0.0032 [0.0004, 0.0060] above one half (p = 0.015), far below the position effect. And only 0.481 [0.454, 0.508] of the judge's next-token probability is on "A" or "B" at
# all: restricting to the two labels hides that it often wants to say something else. Averaging both
# orders removes the position effect but leaves no measurable quality signal; this judge cannot compare two
# models (Book §8.5.4: "if a metric changes a lot with small prompt changes, it is a weak signal").
# The answer key of Section 4 is the kind of verifiable check Book §8.4.4 recommends instead.

# %% [markdown]
# ### Does the judge know the answer? Agreement with an answer key: four wordings, and a likelihood judge (Book §8.5.4)
#
# The pairs above have a better answer by design, but "better" is ours. Here the better answer is
# **verifiable**: `N_KEY` arithmetic questions ("What is 23 + 48?", two-digit numbers drawn with a
# seed), one correct answer and one wrong by ±1 or ±10 (same form; the same length in 23 of 24 pairs,
# printed below). Each pair is judged
# in **both orders**, under the original template and **two variations** of it (Book §8.5.4: "if a
# metric changes a lot with small prompt changes, it is a weak signal"): a reworded question
# ("One of these answers is correct … Which one is correct?") and the original with labels `1`/`2`
# instead of `A`/`B`. A hard verdict is the label with the larger probability. Per wording we count
# the **hard verdicts right** over the $2N$ prompts, the pairs **right in both orders**, and the
# verdicts that pick the **first** slot. These counts get no interval: for a judge that always picks
# the first slot they are forced by the design (the correct answer is first in exactly half the
# prompts: $N$ of $2N$ right, 0 pairs right in both orders), so they describe the judge, not a sample.
#
# The measurement with signal in it is the **position-debiased score** of Exercise 5
# (`debiased_judge`): per pair, the judge's probability for the correct answer averaged over the two orders,
# $\tfrac12\big[p(\text{A}\mid\text{correct first}) + 1 - p(\text{A}\mid\text{correct second})\big]$, in
# which a constant pull towards one slot cancels. Its verdict is right when that average exceeds
# one half (a tie is not); over the $N$ pairs we print the count, its exact (Clopper–Pearson) 95 % interval and the
# exact binomial test against chance (0.5), and the mean soft score minus 0.5 with its t-interval; a
# null is read by that interval. Printed last, for planning a next run only: the test's power at two
# accuracies and how many pairs a judge of accuracy 0.65 would need.
#
# **Then the remedy of MT-Bench for maths questions: give the judge the key** (reference-guided
# judging). A fourth wording puts the key's result after the question ("The answer key says the
# result is 57.") and asks which answer agrees with it. And the same model judges a second way, with
# no labels at all: it scores each answer on its own by its log-probability as a reply to the question,
# $\log P(\text{answer} \mid \text{question})$, and the verdict is right when the correct answer scores higher
# — once without the key and once with the key in the question. Scoring each answer separately has no
# first slot to prefer. Same 24 pairs, same exact interval and test.

# %% nbgrader={"grade": false, "grade_id": "judge_key", "locked": true, "schema_version": 3, "solution": false, "task": false}
N_KEY = 0 if AUTOGRADING else (2 if CI_MODE else 24)      # CI mode: 2 pairs (a smoke run); full mode: 24
_rng = np.random.default_rng(13)
KEY_PAIRS, KEY_SUMS = [], []                               # (question, correct answer, wrong answer); the key
for _ in range(N_KEY):
    a, b = (int(x) for x in _rng.integers(11, 60, size=2))
    wrong = a + b + int(_rng.choice([-10, -1, 1, 10]))
    KEY_PAIRS.append((f"What is {a} + {b}?", f"{a} + {b} = {a + b}.", f"{a} + {b} = {wrong}."))
    KEY_SUMS.append(a + b)
JUDGE_VARIANTS = {
    "original ('better', A/B)": (JUDGE_TEMPLATE, ("A", "B")),
    "reworded ('correct', A/B)": ("Question: {q}\n\nAnswer A: {a}\n\nAnswer B: {b}\n\nOne of these answers is correct "
                                  "and the other is wrong. Which one is correct? Reply with A or B.", ("A", "B")),
    "labels 1/2 ('better')": ("Question: {q}\n\nAnswer 1: {a}\n\nAnswer 2: {b}\n\n"
                              "Which answer is better, 1 or 2? Reply with one digit.", ("1", "2")),
    # reference-guided (MT-Bench's remedy for maths): the key's answer is in the prompt, next to the question
    "key in the prompt ('agrees', A/B)": ("Question: {q}\n\nAnswer A: {a}\n\nAnswer B: {b}\n\nWhich answer agrees "
                                          "with the answer key? Reply with A or B.", ("A", "B")),
}
GUIDED = "key in the prompt ('agrees', A/B)"


def with_key(question, key):
    """The question as a reference-guided judge sees it: followed by the answer key's result."""
    return f"{question} The answer key says the result is {key}."


def answer_logprobs(model, items, batch_size=16):
    """log P(answer | question) under `model` for each (question, answer) of `items`, summed over the answer's tokens
    (the chat template's user turn, then the answer as the assistant's reply): a judge that scores each answer on its
    own, so no slot and no order. Rows of similar length run together, right-padded (a causal model: what follows a
    row's last token never changes its log-probs), and the head runs only where an answer token is predicted."""
    rows, starts = [], []
    for question, answer in items:
        prompt = chat_prompt(question)
        p_ids = tok(prompt, add_special_tokens=False).input_ids
        full = tok(prompt + answer, add_special_tokens=False).input_ids
        assert full[:len(p_ids)] == p_ids, "the answer's tokens must extend the prompt's"
        rows.append(full)
        starts.append(len(p_ids))
    out = np.zeros(len(rows))
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
    for b in range(0, len(rows), batch_size):
        idx = order[b:b + batch_size]
        ids = torch.full((len(idx), max(len(rows[i]) for i in idx)), tok.pad_token_id)
        for j, i in enumerate(idx):
            ids[j, :len(rows[i])] = torch.tensor(rows[i])
        with torch.no_grad():
            hidden = model.model(input_ids=ids).last_hidden_state
            for j, i in enumerate(idx):
                pos = torch.arange(starts[i] - 1, len(rows[i]) - 1)
                logp = torch.log_softmax(model.lm_head(hidden[j, pos]).float(), -1)
                out[i] = float(logp[torch.arange(len(pos)), torch.tensor(rows[i][starts[i]:])].sum())
    return out


from statsmodels.stats.proportion import binom_test_reject_interval


def power_at(n, p_true, alpha=0.05):
    """Power of the two-sided exact binomial test of p = 0.5 (scipy's binomtest) with n pairs when the true
    accuracy is p_true: the probability of a count in its rejection region (statsmodels)."""
    lo, hi = binom_test_reject_interval(0.5, n, alpha=alpha, alternative="two-sided")
    return float(stats.binom.cdf(lo, n, p_true) + stats.binom.sf(hi - 1, n, p_true))


if N_KEY:
    print(f"judge = SmolLM2-135M-Instruct, {N_KEY} arithmetic pairs with an answer key, both orders")
    if CI_MODE:
        print("CI mode: 2 pairs only (a smoke run); full mode judges 24")
    print(f"example: {KEY_PAIRS[0]}")
    print(f"{'wording':28s} {'hard verdicts right':>20s} {'right in both orders':>21s} {'picks first slot':>17s} "
          f"{'debiased verdict right, exact 95 % CI':>40s} {'P(correct) - 0.5, soft':>24s}")
    key_results = {}
    for name, (template, labels) in JUDGE_VARIANTS.items():
        qs = [with_key(q, k) if name == GUIDED else q for (q, _, _), k in zip(KEY_PAIRS, KEY_SUMS)]
        p1_right_first, _ = judge_prob_a(ref_model, [(qq, r, w) for qq, (q, r, w) in zip(qs, KEY_PAIRS)],
                                         template=template, labels=labels)
        p1_right_second, _ = judge_prob_a(ref_model, [(qq, w, r) for qq, (q, r, w) in zip(qs, KEY_PAIRS)],
                                          template=template, labels=labels)
        right = np.concatenate([p1_right_first > 0.5, p1_right_second < 0.5])
        both = (p1_right_first > 0.5) & (p1_right_second < 0.5)
        first = int((p1_right_first > 0.5).sum() + (p1_right_second > 0.5).sum())
        soft, verdict, _ = debiased_judge(p1_right_first, p1_right_second)   # Exercise 5: position cancels
        debiased = int(verdict.sum())               # verdicts from the order-averaged probability
        bt = stats.binomtest(debiased, N_KEY, 0.5)
        ci = bt.proportion_ci(method="exact")
        key_results[name] = verdict                 # per pair: is the debiased verdict right?
        print(f"{name:28s} {f'{int(right.sum())}/{2 * N_KEY}':>20s} {f'{int(both.sum())}/{N_KEY}':>21s} "
              f"{f'{first}/{2 * N_KEY}':>17s} {f'{debiased}/{N_KEY} = {debiased / N_KEY:.3f} [{ci.low:.3f}, {ci.high:.3f}], p = {bt.pvalue:.2g}':>40s} "
              f"{fmt_mean(soft - 0.5, 4):>24s}")
    # the same judge scoring each answer by its log-probability: without the key, then with it in the question
    print(f"\n{'likelihood judge (no slots)':28s} {'right: log P(correct) > log P(wrong), exact 95 % CI':>52s} "
          f"{'log P(correct) - log P(wrong)':>32s}")
    for name, question in (("no key", lambda q, k: q), ("key in the question", with_key)):
        lp = answer_logprobs(ref_model, [(question(q, k), x) for (q, r, w), k in zip(KEY_PAIRS, KEY_SUMS) for x in (r, w)])
        d = lp[0::2] - lp[1::2]                               # log P(correct) - log P(wrong), pair by pair
        k_right = int((d > 0).sum())
        bt = stats.binomtest(k_right, N_KEY, 0.5)
        ci = bt.proportion_ci(method="exact")
        key_results[f"likelihood, {name}"] = d > 0
        print(f"{'likelihood, ' + name:28s} {f'{k_right}/{N_KEY} = {k_right / N_KEY:.3f} [{ci.low:.3f}, {ci.high:.3f}], p = {bt.pvalue:.2g}':>52s} "
              f"{fmt_mean(d, 2):>32s}")
    if not CI_MODE:                       # the key against no key, on the same pairs: McNemar's exact test
        for with_k, without in ((GUIDED, "original ('better', A/B)"), ("likelihood, key in the question", "likelihood, no key")):
            mc = mcnemar_exact(key_results[with_k], key_results[without])
            print(f"{with_k} vs {without}: right only with the key {mc.b}, only without {mc.c}, "
                  f"McNemar exact p = {mc.pvalue:.2g}")
    print(f"correct and wrong answers of the same length (characters): "
          f"{sum(len(r) == len(w) for _, r, w in KEY_PAIRS)} of {N_KEY} pairs")
    # fixed before the run: what the exact binomial test over these pairs can detect (no "observed power")
    print(f"power of the exact two-sided binomial test (alpha 0.05) with {N_KEY} pairs: true accuracy 0.75 -> "
          f"{power_at(N_KEY, 0.75):.2f}, 0.65 -> {power_at(N_KEY, 0.65):.2f}; pairs needed for power >= 0.8 at "
          f"0.65: {next(n for n in range(10, 400) if power_at(n, 0.65) >= 0.8)}")
else:
    print("answer-key judge skipped under autograding; run the notebook in full mode to see it")


# %% [markdown]
# **Observe.** (Full mode, same judge.) The hard verdicts carry no information about the sums under any
# of the four wordings: the judge picks the first slot in 48 of the 48 verdicts each time, so it is right
# on 24 of 48 — the count an always-first judge is forced to get — and right in both orders on 0 of 24
# pairs. The position-debiased verdict removes that pull: it is right on 14/24 [0.366, 0.779], 13/24
# [0.328, 0.744], 12/24 [0.291, 0.709] of the pairs under the three wordings without the key, and on 9/24
# [0.188, 0.594] with the key in the prompt (exact 95 % intervals; binomial test against one half, p =
# 0.54, 0.84, 1, 0.31); the order-averaged soft preferences for the correct sum stay within 0.0023 of one
# half (0.0005 [-0.0003, 0.0013], 0.0009 [-0.0006, 0.0023], -0.0001 [-0.0004, 0.0001], 0.0001 [-0.0007,
# 0.0009], t-intervals over pairs). None of the four differs from chance. With the key, the debiased
# accuracy lies in [0.188, 0.594] and the soft preference in [-0.0007, 0.0009]: no sign that a judge asked
# for a label uses the key, and an accuracy above 0.594 is excluded.
#
# **Scored by likelihood, the same model judges with the key.** Without the key, the correct answer has the
# higher log-probability on 15/24 pairs [0.406, 0.812] (p = 0.31), with a mean margin of 1.67 [0.40, 2.93]:
# the interval of the margin is above zero while the count's contains one half — the correct sum is
# favoured on average, by margins too uneven to decide pair by pair. With the key in the question it is
# right on 24/24 [0.858, 1.000] (p = 1.2e-07), margin 5.58 [4.67, 6.50]; on the same pairs, the key
# turned 9 wrong verdicts right and no right one wrong (McNemar exact p = 0.0039). A likely reason, not
# tested here: with the key, judging reduces to seeing which answer repeats a number already in the
# prompt; without it, the judge has to know the sum. Asked for a label, the key showed no sign of helping:
# with it the debiased verdict is right on 9/24 [0.188, 0.594], against 14/24 with the original wording,
# a point estimate 5 pairs worse (right only with the key on 2 pairs, only without it on 7; McNemar exact
# p = 0.18; no interval of the paired difference is printed). The unguided label verdicts are
# read by their intervals:
# the best wording's [0.366, 0.779] still contains 0.75, so these 24 pairs cannot tell a judge at chance
# from a fairly competent one; the power printed above (0.61 at 0.75; 90 pairs for 0.8 at 0.65) sizes a
# next run. Without its key, a judge this uncertain is no substitute for the answer key, the verifiable
# check Book §8.4.4 recommends.

# %% [markdown]
# ## 7. Contamination: n-gram overlap (Book §8.4.3)
#
# If benchmark items appear in the training data, scores measure memory, not ability. A common
# first check (GPT-3, PaLM and later reports used variants of it) counts the benchmark's word
# $n$-grams that also occur in the training text.
#
# ### Exercise 6 — n-gram overlap (1 point)
#
# Implement `ngram_overlap(benchmark, training, n=8)`: the fraction of the benchmark's **distinct**
# word $n$-grams that also occur in the training text,
# $|\text{set}(\text{ngrams}(b)) \cap \text{set}(\text{ngrams}(t))| \,/\, |\text{set}(\text{ngrams}(b))|$, a Python
# float (a NumPy float64 is fine too) in $[0, 1]$: the denominator is the benchmark's count of
# distinct $n$-grams, not the training text's. <!-- clause: value --> An $n$-gram repeated in the benchmark
# counts once. <!-- clause: distinct --> Words are `text.lower().split()`: lower-cased, any run of
# whitespace (spaces, tabs, newlines, a no-break space) separates words, leading and trailing
# whitespace makes no empty word, and punctuation stays part of a word; words are compared whole, not
# character by character. <!-- clause: words --> An $n$-gram is a tuple of $n$ consecutive words, not
# the words joined into one string. <!-- clause: tuples --> A training text with fewer than $n$ words
# has no $n$-grams: the result is 0.0, not an error. <!-- clause: short-training --> Raise
# `ValueError` if $n < 1$. <!-- clause: n-positive --> Raise `ValueError` if the benchmark has fewer
# than $n$ words (a blank benchmark too); exactly $n$ words is fine, one $n$-gram. <!-- clause: short-benchmark-error -->

# %% nbgrader={"grade": false, "grade_id": "ex4_ngram_overlap", "locked": false, "schema_version": 3, "solution": true, "task": false}
def ngram_overlap(benchmark, training, n=8):
    """Fraction of the benchmark's distinct word n-grams that also occur in the training text.

    Words: text.lower().split() (str.split() with no argument, so any run of whitespace separates
    words and leading/trailing whitespace makes no empty word), punctuation kept as part of the
    words; so "The  cat" and "the cat" have the same words.
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


# %% nbgrader={"grade": true, "grade_id": "test_ex4_ngram_overlap", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
from course_utils.grading import check_close
check_close("identical texts", ngram_overlap("a b c d e f g h i j", "a b c d e f g h i j"), 1.0)
check_close("disjoint texts", ngram_overlap("a b c d e f g h i j", "k l m n o p q r s t"), 0.0)
check_close("3 of 3 benchmark 8-grams found", ngram_overlap("a b c d e f g h i j", "x a b c d e f g h i j y"), 1.0)
check_close("1 of 3 benchmark 8-grams found", ngram_overlap("a b c d e f g h i j", "a b c d e f g h z"), 1 / 3)
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import outcome, record
record("module of ngram_overlap (it must be defined in this notebook)", ngram_overlap.__module__)  # clause: defined-here


def _as_float(v):
    """A float (or a subclass of float, e.g. numpy.float64) is recorded as a float; anything else as it is."""
    return float(v) if isinstance(v, float) else v


_bench = "The quick brown fox jumps over the lazy dog near the river bank"
_train = "we saw that THE   quick brown\nfox jumps over a lazy dog near the river bank today"
for _n in (1, 2, 3, 5):
    # clause: value, words
    record(f"ngram_overlap with n={_n} (lower-case, whitespace split; a float)", _as_float(ngram_overlap(_bench, _train, n=_n)),
           atol=1e-6, rtol=1e-5)
# clause: distinct
record("ngram_overlap('a b a b a b', 'a b', n=2) (repeated n-grams count once)",
       _as_float(ngram_overlap("a b a b a b", "a b", n=2)), atol=1e-6, rtol=1e-5)
# clause: words
record("ngram_overlap('end. of it', 'end of it', n=2) (punctuation stays part of the word)",
       _as_float(ngram_overlap("end. of it", "end of it", n=2)), atol=1e-6, rtol=1e-5)
record("ngram_overlap('ab cd', 'abc d', n=1) (characters are not words)",
       _as_float(ngram_overlap("ab cd", "abc d", n=1)), atol=1e-6, rtol=1e-5)
for _args in (("a b", "a b", 3), ("a b c", "a b c", 0), ("a b c", "a b c", -1), (" \n\t ", "a b", 1)):
    # clause: n-positive, short-benchmark-error
    record(f"ngram_overlap{_args}: must raise ValueError", outcome(ngram_overlap, *_args))
_cases = {"benchmark of exactly n=3 words": ("a b c", "x a b c", 3),
          "training text shorter than n=3 (0.0, not an error)": ("a b c", "a b", 3),
          "leading/trailing whitespace, a no-break space and a tab (str.split())":
              ("\n The\u00a0quick brown\tfox ", "the quick brown fox jumps", 2),
          "'ab c' vs 'a bc' (n-grams are tuples of words, not joined strings)": ("ab c", "a bc", 2),
          "6 benchmark 2-grams, training shares 2 and has 5 more (divide by the benchmark's count)":
              ("a b c d e f g", "a b c x y z w v", 2)}
for _what, _args in _cases.items():
    # clause: value, words, tuples, short-training, short-benchmark-error
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
for (_what, (_bt, _tt, _n)), _v in zip(_cases.items(), (1.0, 0.0, 1.0, 0.0, 1 / 3), strict=True):
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
TRAIN_REWORDED = TRAIN_CLEAN + (" Practice: a train departs at 3 pm and runs at 60 km an hour. "
                                "What distance does it cover by 5 pm? 120 km.")   # the same item, reworded
for n in (1, 3, 8, 13):
    print(f"n={n:2d}: clean {ngram_overlap(BENCHMARK, TRAIN_CLEAN, n):.3f}   leaked {ngram_overlap(BENCHMARK, TRAIN_LEAKED, n):.3f}"
          f"   reworded {ngram_overlap(BENCHMARK, TRAIN_REWORDED, n):.3f}")

# %% [markdown]
# Small $n$ flags ordinary shared vocabulary (the clean text shares 0.360 of the benchmark's
# unigrams); large $n$ only fires on copied passages. A copy with a new first word ("Question: A train" →
# "Practice: a train") is still caught (0.947 at $n$ = 8), but the same item reworded (`TRAIN_REWORDED`:
# "departs at 3 pm and runs at 60 km an hour …") scores 0.000 at $n$ = 8 and 13, like the clean text.
# A high overlap is evidence of contamination; a low one is not proof that there is none.

# %% [markdown]
# ## 8. Checklist for alignment and evaluation experiments (Book §8.6)
#
# The book's minimal checklist, and where this notebook does each item:
#
# | Book §8.6 | here |
# |---|---|
# | define `prompt`, `chosen`, `rejected` clearly | Section 1: a checked JSONL loader that refuses empty or identical answers |
# | keep a **frozen reference model** when the method needs anchoring | Section 4: `ref_model`, a `deepcopy` made before training, passed explicitly to TRL |
# | compare outputs before/after **on the same prompts** | Section 4: generations, length, distinct-n and an answer key, paired by prompt |
# | with LLM-as-a-judge, **log the judge prompt** and keep the format controlled | Section 6: `JUDGE_TEMPLATE`, one-letter answer, logits restricted to "A"/"B" |
# | observe structural changes (length, evasiveness, patterns) even without semantic gain | Section 4: length and distinct-n before/after; the "too far" run |
# | observe collapse in mini-RL and the role of the baseline | Section 5: the bandit's variance and π(best) with and without a baseline; GRPO trained with a group baseline, clipping and a KL penalty, its reward, clipped fraction, KL and length logged |
# | observe the judge's sensitivity | Section 6: position and verbosity bias with intervals; agreement with an answer key under four prompt wordings, and scored by likelihood with and without the key |
# | **pitfall**: reading alignment as knowledge creation | Section 4: the answer key before/after; DPO moves preferences, not facts |
# | **pitfall**: trusting LLM-as-a-judge as an absolute verifier | Section 6: a judge whose verdict follows the position, not the content |
# | **pitfall**: comparing scores under contamination | Section 7: the n-gram overlap check |

# %% [markdown]
# ### What this chapter leaves out
#
# | Book | not done here | why |
# |---|---|---|
# | §8.3.1 RLHF | training a reward model on human comparisons, then PPO with a learned value model | four models (policy, reference, reward, value) and many rollouts do not fit 2 CPU cores; the reward-model loss and PPO's clip are shown on numbers (Section 5), and GRPO (which drops the value model) is trained instead |
# | §8.3.2, §8.3.3 | the on-/off-policy variants the book cites; long GRPO runs over many seeds | the runs have 6 steps, two seeds per arm and 2 updates per batch, to fit 2 CPU cores |
# | §8.3.3 | GRPO on a task that needs reasoning (multi-step maths, code), as in DeepSeek-R1 | a 135 M model on a CPU: the verifiable task here is one-digit addition with answers of at most 8 tokens |
# | §8.4.1 | running MMLU-Pro, AIME, GPQA or LiveBench | the course runs offline, and a 135 M model scores near chance on them; they are named only |
# | §8.4.4, §8.5.4 | a strong judge (a large model or an API) | offline and on a CPU the only judge is SmolLM2-135M-Instruct, which shows the failures (position bias, no competence) but not what a good judge does |
# | §8.1, §8.2 | collecting human preferences; safety alignment (refusals, harmful requests) | the 48 pairs are written for the course; safety needs data and a model this size cannot show |

# %% [markdown] nbgrader={"grade": false, "grade_id": "written_reflection_question", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## 9. Reflect
#
# **Written question (3 points).** Using the numbers this notebook printed (name them, with their
# intervals): (a) after the DPO run, on the held-out pairs whose rejected answers were unseen in
# training, did the chosen log-prob rise in absolute terms, and what happened to the margin and the
# held-out accuracy (ties counted as half)? What does that say about Book §8.2.1's "increase the
# probability of the chosen answer"? (b) How large were the judge's position bias and verbosity bias,
# and did it prefer the good answer at all? Would you use it to compare two models? (c) In the bandit,
# what was the gradient variance with and without a baseline, and why is the mean gradient unchanged?

# %% [markdown] nbgrader={"grade": true, "grade_id": "written_reflection", "locked": false, "points": 3, "schema_version": 3, "solution": true, "task": false}
# **Model answer** (numbers from the committed full-mode run, offline stand-in SmolLM2-135M-Instruct with
# Q4_1-rounded weights; a student cites their own run's numbers).
# (a) On the 12 held-out pairs with unseen rejected answers, after 10 steps: the chosen log-prob went
# from −17.000 to −16.813, a small rise, 0.187 [0.011, 0.364] paired over pairs; the rejected one fell
# from −90.742 to −93.225, by 2.483 [1.959, 3.007]; the margin went from exactly 0 (policy = reference) to 0.267
# [0.229, 0.305]; accuracy with ties as half from 0.500 to 1.000 [0.758, 1.000], sign test p = 0.00024.
# With the familiar training templates as rejected answers the margin is 1.147, a paired difference
# of 0.880 [0.676, 1.084]: most of the learned preference is tied to the six training sentences.
# DPO optimises the *difference* of log-ratios, so "increase the probability of chosen" holds only
# relative to rejected (Book §8.2.1 says "relativamente"): most of the gain came from pushing the
# rejected answers down, and the "too far" run shows the same, chosen at −17.006 while rejected fell to −121.876.
# (b) Position bias 0.867 [0.858, 0.877] (P(good) 0.934 when first, 0.067 when second); verbosity bias
# 0.0032 [0.0004, 0.0060], small but p = 0.015; preference for the good answer averaged over orders
# 0.0008 [−0.0020, 0.0037], p = 0.79, i.e. none measurable. Against an answer key (24 arithmetic pairs,
# four prompt wordings) it picked the first slot in 48/48 verdicts under every wording: accuracy 0.500
# by position alone, right in both orders on 0 of 24 pairs. Its label verdicts carry no measurable
# signal about quality here (Book §8.5.4), so I would not use them to compare models; scored by
# likelihood the same model favours the correct sum on average (margin 1.67 [0.40, 2.93]) and, with
# the key in the question, picks it on 24/24 pairs — a verifiable key is what made it work. With a larger judge I would average both
# orders, report the position shift with its interval, and prefer verifiable checks such as the
# answer key.
# (c) Total variance ≈ 0.39 without and ≈ 0.22 with the expected-reward baseline, same mean
# gradient ≈ [0.17, 0, −0.17]: E[∇log π(a)] = 0, so subtracting a constant b changes no
# expectation, only the spread.
