# %% [markdown]
# # Chapter 7 — Mixture of Experts: routing, load and balance
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/llm-course/llm-course/blob/main/notebooks/07_mixture_of_experts/07_mixture_of_experts.ipynb)
#
# **Goal.** A Mixture-of-Experts (MoE) layer replaces the dense feed-forward block (FFN) of a
# Transformer by $E$ expert FFNs and a *router* that sends every token to only $k \ll E$ of
# them. The model gets the capacity of $E$ FFNs for the compute of $k$. This chapter takes the
# layer apart: the router, the top-$k$ choice, the *load* of every expert, the balance losses
# that keep training from collapsing onto a few experts, and the parameter arithmetic behind
# "46.7 B parameters, 12.9 B active" (Mixtral 8×7B).
#
# **Book sections.** Book §3.8.1–§3.8.6 (motivation, top-$k$ routing, the router as an
# operator, load, total vs active parameters, balancing), with the toy tokens of Book §3.3.
#
# **You will implement (graded).**
# 1. `route_topk` — router probabilities, top-$k$ experts, gates renormalised over the chosen experts (2 pts)
# 2. `expert_load` — how many tokens each expert receives (1 pt)
# 3. `book_balance_loss` and `switch_aux_loss` — the book's balance loss and the Switch-Transformer auxiliary loss (1 + 2 pts)
# 4. `moe_forward` — the sparse MoE forward pass, checked against `transformers`' Mixtral block to $10^{-5}$ (3 pts)
# 5. `moe_param_counts` — total and active parameters of a Mixtral-like model from its config (2 pts)
#
# plus one written question (2 pts) that asks for evidence from this notebook's outputs.
#
# Define each graded function in its answer cell, in this notebook (helpers of your own are fine):
# the hidden tests check where each one is defined. <!-- clause-all: defined-here -->
#
# No pretrained model is needed: every number here is computed from small tensors or from a
# model *configuration*.

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
import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers import MixtralConfig
from transformers.models.mixtral.modeling_mixtral import (
    MixtralForCausalLM, MixtralSparseMoeBlock, MixtralTopKRouter, load_balancing_loss_func)

from course_utils import CI_MODE
from course_utils.plotting import bar_plot, heatmap

torch.set_printoptions(precision=4, sci_mode=False)

# %% [markdown]
# ## 1. Run and observe: three tokens, four experts
#
# Book §3.8.4 reports, from "the toy experiment of the notebook", the load
# $\text{load} = [0, 2, 0, 1]$ for $T = 3$ tokens and $E = 4$ experts. The tokens are those of
# Book §3.3: `teddy`, `bear`, `reads` with hand-made embeddings in $d_{\text{model}} = 4$.
#
# The book does **not** print the router weights $W_g$, so its load cannot be reproduced from
# the text alone. Any router that sends `teddy` and `bear` to expert 1 and `reads` to expert 3
# gives it. The course uses the router below: every expert reads one signed feature of the
# token (expert 1 likes feature 0, expert 3 likes $-$feature 2, ...). Think of the rows of $W_g$
# as the *keys* of the experts and of the token as the *query* — the analogy of Book §3.8.3.

# %% nbgrader={"grade": false, "grade_id": "toy_router", "locked": true, "schema_version": 3, "solution": false, "task": false}
TOKENS = ["teddy", "bear", "reads"]
X_TOY = torch.tensor([
    [1.0, 0.0, 1.0, 0.0],   # teddy   (Book §3.3)
    [1.0, 1.0, 0.0, 1.0],   # bear
    [0.0, 1.0, -1.0, 1.0],  # reads
])
W_G_TOY = torch.tensor([    # router chosen by the course: one row (a "key") per expert
    [0.0, -1.0, 0.0, 0.0],   # expert 0
    [1.0, 0.0, 0.0, 0.0],    # expert 1
    [-1.0, 0.0, 0.0, -1.0],  # expert 2
    [0.0, 0.0, -1.0, 0.0],   # expert 3
])
EXPERTS = [f"expert {e}" for e in range(4)]

logits_toy = X_TOY @ W_G_TOY.T            # (T, E) router logits  W_g x  for every token
probs_toy = torch.softmax(logits_toy, dim=-1)
print("router logits:\n", logits_toy)
print("router probabilities p(x) = softmax(W_g x):\n", probs_toy)
print("chosen expert e*(x) = argmax_e p_e(x):", dict(zip(TOKENS, probs_toy.argmax(-1).tolist())))
print("probability the top-1 choice throws away, 1 - max_e p_e(x):",
      {t: round(1 - p, 2) for t, p in zip(TOKENS, probs_toy.max(-1).values.tolist())})

# %%
fig, ax = plt.subplots(figsize=(5.5, 2.6))
heatmap(probs_toy, TOKENS, EXPERTS, title="Router probabilities p(x) of the toy tokens", ax=ax, fmt="{:.3f}")
plt.tight_layout()
plt.show()


# %% [markdown]
# **Observe.** Two tokens pick expert 1, one picks expert 3, and experts 0 and 2 get nothing.
# Nothing forces a router to spread the tokens: it is a learned linear map followed by an
# `argmax`. Note also how *soft* the distributions are — `teddy` gives expert 1 only 0.61 — yet
# the top-1 decision throws the remaining 0.39 away.
#
# ## 2. Derive: top-$k$ routing, renormalised gates, load
#
# For one token $\mathbf{x}$ (Book §3.8.2–§3.8.3):
#
# $$\mathbf{p}(\mathbf{x}) = \operatorname{softmax}(W_g\mathbf{x}) \in \mathbb{R}^E, \qquad
# \mathcal{E}(\mathbf{x}) = \text{the } k \text{ indices of the largest } p_e(\mathbf{x}), \qquad
# g_e(\mathbf{x}) = \frac{p_e(\mathbf{x})}{\sum_{e' \in \mathcal{E}(\mathbf{x})} p_{e'}(\mathbf{x})}
# \;\; (e \in \mathcal{E}(\mathbf{x})),$$
#
# $$\text{FFN}_{\text{MoE}}(\mathbf{x}) = \sum_{e \in \mathcal{E}(\mathbf{x})} g_e(\mathbf{x})\,\text{Expert}_e(\mathbf{x}).$$
#
# Three facts worth deriving once:
#
# * **Renormalised gates are a softmax over the chosen logits.** With $z = W_g\mathbf{x}$,
#   $g_e = e^{z_e}/\sum_{e'\in\mathcal{E}} e^{z_{e'}}$: the full softmax's denominator cancels.
#   So "softmax → top-$k$ → renormalise" (what `transformers` 5 does for Mixtral) and
#   "top-$k$ on the logits → softmax of those $k$" (the original Mixtral code) are the same
#   function. For $k = 2$ the two gates are $\sigma(z_{e_1} - z_{e_2})$ and $1 - \sigma(\cdot)$.
# * **For $k = 1$ the renormalised gate is always 1.** The output is then
#   $\text{Expert}_{e^*}(\mathbf{x})$ and the task loss sends *no gradient* to the router.
#   That is why the Switch Transformer (the classic $k = 1$ MoE) multiplies by the raw
#   probability $p_{e^*}(\mathbf{x})$ instead; section 8 does the same.
# * **Load conservation.** With $\text{load}(e) = \#\{t : e \in \mathcal{E}(\mathbf{x}_t)\}$,
#   every token is counted exactly $k$ times, so $\sum_e \text{load}(e) = kT$. For $k = 1$ this
#   is the book's $\sum_e \text{load}(e) = T$.

# %% [markdown]
# ### Exercise 1 — top-$k$ routing (2 points)
#
# Implement the router for a batch of $T$ tokens, `x` of shape $(T, d)$ and `W_g` of shape
# $(E, d)$, and return the tuple `(probs, topk_idx, gates)`. `probs`, shape $(T, E)$, holds the
# router probabilities $\operatorname{softmax}(W_g\mathbf{x})$ of every token over the $E$ experts. <!-- clause: probs -->
# `topk_idx`, shape $(T, k)$, holds the indices of the $k$ chosen experts
# **in decreasing order of probability** (what `torch.topk` gives), as an `int64` (`torch.long`)
# tensor. <!-- clause: topk-idx --> `gates`, shape $(T, k)$, holds their probabilities
# renormalised to sum to 1 per token. <!-- clause: gates --> Compute the softmax in `float32` or
# better: with `float16` / `bfloat16` inputs, `probs` and `gates` are still `float32` (or
# `float64`), and `gates` has the dtype of `probs`. <!-- clause: float32-softmax --> The softmax
# must be stable: if you write it yourself, subtract each token's largest logit first (logits
# around $\pm 1000$ must not give `nan`). <!-- clause: stable --> Leave the inputs unchanged. <!-- clause: unchanged-input -->

# %% nbgrader={"grade": false, "grade_id": "ex1_route_topk", "locked": false, "schema_version": 3, "solution": true, "task": false}
def route_topk(x, W_g, k):
    """Top-k routing of Book §3.8.2-3.8.3.

    x:   (T, d) token vectors;  W_g: (E, d) router weights;  k: experts per token (1 <= k <= E).
    x and W_g may be float16, bfloat16, float32 or float64; they are not modified. The logits x @ W_g.T
    may be of any magnitude (e.g. around +-1000): the softmax must be computed stably.
    Returns (probs, topk_idx, gates):
      probs    (T, E) float32 or float64 (never half precision): softmax(x @ W_g.T) over the experts,
      topk_idx (T, k) long (int64): the k most probable experts of every token, most probable first,
      gates    (T, k) same dtype as probs: their probabilities renormalised to sum to 1 over the k chosen experts.
    """
    ### BEGIN SOLUTION
    probs = torch.softmax((x @ W_g.T).float(), dim=-1)
    top_p, topk_idx = torch.topk(probs, k, dim=-1)
    gates = top_p / top_p.sum(dim=-1, keepdim=True)
    return probs, topk_idx, gates
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex1_route_topk", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from course_utils.grading import check_close, check_equal, check_shape, check_true, passed
import math

_x = torch.tensor([[1.0, 0.0, 1.0, 0.0], [1.0, 1.0, 0.0, 1.0], [0.0, 1.0, -1.0, 1.0]])
_W = torch.tensor([[0.0, -1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], [-1.0, 0.0, 0.0, -1.0], [0.0, 0.0, -1.0, 0.0]])
_out = route_topk(_x, _W, 1)
check_true(isinstance(_out, tuple) and len(_out) == 3, "route_topk must return a tuple (probs, topk_idx, gates).")
_p, _i, _g = _out
check_shape("probs", _p, (3, 4))
check_close("probs row sums (softmax over the experts, dim=-1)", _p.sum(-1), torch.ones(3), atol=1e-6)
_e = math.e
check_close("probs of 'teddy' (logits [0, 1, -1, -1])", _p[0],
            torch.tensor([1.0, _e, 1 / _e, 1 / _e]) / (1 + _e + 2 / _e), atol=1e-6)
check_shape("topk_idx (k=1)", _i, (3, 1))
check_equal("topk_idx (k=1) of teddy, bear, reads", _i[:, 0].tolist(), [1, 1, 3])
check_close("gates (k=1): one chosen expert, renormalised gate", _g, torch.ones(3, 1), atol=1e-6)
_p2, _i2, _g2 = route_topk(_x, _W, 2)
check_equal("topk_idx (k=2), most probable expert first", _i2.tolist(), [[1, 0], [1, 3], [3, 1]])
check_close("gates (k=2) sum to 1 per token", _g2.sum(-1), torch.ones(3), atol=1e-6)
_s = 1 / (1 + math.exp(-1.0))  # every token's two best logits differ by exactly 1 here
check_close("gates (k=2) = sigmoid of the logit gap", _g2, torch.tensor([[_s, 1 - _s]] * 3), atol=1e-6)
# the same tokens with 1000 added to every logit (an extra feature 10 read with weight 100): same routing
_pb, _ib, _gb = route_topk(torch.cat([_x, torch.full((3, 1), 10.0)], 1), torch.cat([_W, torch.full((4, 1), 100.0)], 1), 2)
check_true(not torch.isnan(_pb).any().item(), "probs contain nan when every logit is near 1000: exp(1000) overflows. "
                                              "Subtract each token's max logit before exp (or use torch.softmax).")
check_close("probs with 1000 added to every logit (softmax is shift-invariant)", _pb, _p2, atol=1e-6)
check_equal("topk_idx (k=2) with 1000 added to every logit", _ib.tolist(), _i2.tolist())
passed()
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import record
record("module of route_topk (it must be defined in this notebook)", route_topk.__module__)  # clause: defined-here
_gen = torch.Generator().manual_seed(1234)
_route_cases = []
for (_T, _d, _E, _k) in [(7, 5, 6, 1), (9, 8, 8, 2), (5, 3, 5, 3), (4, 6, 3, 3)]:
    _xx = torch.randn(_T, _d, generator=_gen)
    _WW = 2 * torch.randn(_E, _d, generator=_gen)
    _route_cases.append((_T, _d, _E, _k, _xx, _WW))
    _pp, _ii, _gg = route_topk(_xx, _WW, _k)
    # probs and gates: float32 or float64 (dtype=False); a half-precision result cannot meet atol=1e-6
    record(f"probs (T={_T}, E={_E})", _pp, atol=1e-6, rtol=1e-5, dtype=False)  # clause: probs
    record(f"topk_idx (T={_T}, E={_E}, k={_k}): a long (int64) tensor, most probable first", _ii)  # clause: topk-idx
    record(f"gates (T={_T}, E={_E}, k={_k})", _gg, atol=1e-6, rtol=1e-5, dtype=False)  # clause: gates
# half-precision inputs: the router's softmax still in float32 or better, inputs unchanged
def _precision(t):
    """float32 and float64 are both right: one canonical name for them."""
    return "float32 or float64" if t.dtype in (torch.float32, torch.float64) else str(t.dtype)


# huge logits (1000 * sign_t + a few units per expert, exactly representable: multiples of 1/512):
# a softmax without the max shift gives inf / inf or 0 / 0
_xl = torch.cat([10.0 * torch.tensor([1.0, -1.0, 1.0, -1.0, 1.0, -1.0])[:, None],
                 torch.round(torch.randn(6, 2, generator=_gen) * 64) / 64], 1)
_Wl = torch.cat([torch.full((5, 1), 100.0), torch.round(torch.randn(5, 2, generator=_gen) * 8) / 8], 1)
_pl, _il, _gl = route_topk(_xl, _Wl, 2)
# clause: stable
record("probs with logits near +-1000 (T=6, E=5)", _pl, atol=1e-6, rtol=1e-5, dtype=False)
record("topk_idx with logits near +-1000 (T=6, E=5, k=2)", _il)
record("gates with logits near +-1000 (T=6, E=5, k=2)", _gl, atol=1e-6, rtol=1e-5, dtype=False)
for _dt in (torch.bfloat16, torch.float16):
    _xh, _Wh = _xx.to(_dt), _WW.to(_dt)
    _ph, _ih, _gh = route_topk(_xh, _Wh, 2)
    # clause: unchanged-input
    record(f"x in {_dt} after route_topk (not modified in place)", _xh)
    record(f"W_g in {_dt} after route_topk (not modified in place)", _Wh)
    # clause: float32-softmax
    record(f"dtype of probs with {_dt} inputs (float32 or better)", _precision(_ph))
    record(f"dtype of gates with {_dt} inputs (that of probs)", "that of probs" if _gh.dtype == _ph.dtype else str(_gh.dtype))
    record(f"probs with {_dt} inputs", _ph, atol=2e-3, rtol=1e-5, dtype=False)  # clause: probs, float32-softmax
    record(f"topk_idx with {_dt} inputs (the 2 most probable experts, best first)", _ih)  # clause: topk-idx
    record(f"gates with {_dt} inputs: their sum per token", _gh.sum(-1), atol=1e-5, rtol=1e-5, dtype=False)  # clause: gates
### BEGIN REFERENCE
from course_utils.grading import check_true, expect
from transformers import MixtralConfig as _MC
from transformers.models.mixtral.modeling_mixtral import MixtralTopKRouter as _R
for (_T, _d, _E, _k, _xx, _WW) in _route_cases:
    _router = _R(_MC(hidden_size=_d, num_local_experts=_E, num_experts_per_tok=_k))
    with torch.no_grad():
        _router.weight.copy_(_WW)
        _lg, _sc, _ix = _router(_xx)
    expect(f"probs (T={_T}, E={_E})", torch.softmax(_lg, -1), atol=1e-6, rtol=1e-5, dtype=False)
    expect(f"topk_idx (T={_T}, E={_E}, k={_k}): a long (int64) tensor, most probable first", _ix)
    expect(f"gates (T={_T}, E={_E}, k={_k})", _sc, atol=1e-6, rtol=1e-5, dtype=False)
_lgl = _xl.double() @ _Wl.double().T
check_true(torch.equal((_xl @ _Wl.T).double(), _lgl), "the huge logits are exact in float32")
check_true(bool((_lgl.sort(-1, descending=True).values[:, :3].diff(dim=-1) < -0.05).all()),
           "no near-ties among the 3 largest of the huge logits (the top-2 set and order are clear)")
_tpl = torch.softmax(_lgl, -1).topk(2, dim=-1)
expect("probs with logits near +-1000 (T=6, E=5)", torch.softmax(_lgl, -1), atol=1e-6, rtol=1e-5, dtype=False)
expect("topk_idx with logits near +-1000 (T=6, E=5, k=2)", _tpl.indices)
expect("gates with logits near +-1000 (T=6, E=5, k=2)", _tpl.values / _tpl.values.sum(-1, keepdim=True),
       atol=1e-6, rtol=1e-5, dtype=False)
for _dt in (torch.bfloat16, torch.float16):
    _xh, _Wh = _xx.to(_dt), _WW.to(_dt)
    _ref_p = torch.softmax((_xh @ _Wh.T).double(), -1)
    expect(f"dtype of probs with {_dt} inputs (float32 or better)", "float32 or float64")
    expect(f"dtype of gates with {_dt} inputs (that of probs)", "that of probs")
    expect(f"probs with {_dt} inputs", _ref_p, atol=2e-3, rtol=1e-5, dtype=False)
    expect(f"topk_idx with {_dt} inputs (the 2 most probable experts, best first)", torch.topk(_ref_p, 2, dim=-1).indices)
    expect(f"gates with {_dt} inputs: their sum per token", torch.ones(_xh.shape[0]), atol=1e-5, rtol=1e-5, dtype=False)
### END REFERENCE
### END HIDDEN TESTS

# %% [markdown]
# The first fact of section 2, checked with your `route_topk` on the toy tokens ($k = 2$): the
# renormalised gates equal a softmax over the two largest router logits.

# %% nbgrader={"grade": false, "grade_id": "equivalence_demo", "locked": true, "schema_version": 3, "solution": false, "task": false}
# "softmax, top-k, renormalise"  ==  "top-k on logits, softmax of the k logits"   (k = 2, toy tokens)
_, top_i, gates_a = route_topk(X_TOY, W_G_TOY, k=2)
gates_b = torch.softmax(logits_toy.gather(-1, top_i), dim=-1)
print("top-2 experts per token:", top_i.tolist())
print("renormalised gates     :", gates_a)
print("softmax of top-2 logits:", gates_b)
print("same function:", torch.allclose(gates_a, gates_b))


# %% [markdown]
# ### Exercise 2 — expert load (1 point)
#
# $\text{load}(e)$ counts the tokens that expert $e$ receives (Book §3.8.4). With top-$k$
# routing a token counts once for each of its $k$ experts. <!-- clause: value --> Experts that
# receive nothing must appear with load 0: the vector always has length $E$ = `num_experts`, even
# when `num_experts` exceeds every index in `topk_idx`. <!-- clause: length-e --> Return the counts
# as an `int64` (`torch.long`) tensor. <!-- clause: int64 --> Leave `topk_idx` unchanged. <!-- clause: unchanged-input -->

# %% nbgrader={"grade": false, "grade_id": "ex2_expert_load", "locked": false, "schema_version": 3, "solution": true, "task": false}
def expert_load(topk_idx, num_experts):
    """load(e) = number of (token, slot) pairs routed to expert e (Book §3.8.4).

    topk_idx: (T, k) long tensor of chosen experts (not modified);  num_experts: E, which may exceed
    every index in topk_idx (idle experts get 0).
    Returns an int64 (torch.long) tensor of shape (E,), summing to T * k.
    """
    ### BEGIN SOLUTION
    return torch.bincount(topk_idx.reshape(-1), minlength=num_experts).to(torch.int64)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex2_expert_load", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
from course_utils.grading import check_equal, check_true, msg, passed

_load = expert_load(torch.tensor([[1], [1], [3]]), 4)
check_true(isinstance(_load, torch.Tensor), "expert_load must return a torch tensor.")
check_true(not _load.is_floating_point(), msg("load counts tokens: expected an integer dtype, got {dtype}.", dtype=_load.dtype))
check_equal("load of the toy routing [[1], [1], [3]] (book: [0, 2, 0, 1])", _load.tolist(), [0, 2, 0, 1])
check_equal("load, k=2 routing [[1, 0], [1, 3], [3, 1]]", expert_load(torch.tensor([[1, 0], [1, 3], [3, 1]]), 4).tolist(),
            [1, 3, 0, 2])
passed()
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import record
record("module of expert_load (it must be defined in this notebook)", expert_load.__module__)  # clause: defined-here
# clause: value, length-e, int64
record("load of [[0], [0], [1]] with E=5 (the last experts unused): an int64 tensor",
       expert_load(torch.tensor([[0], [0], [1]]), 5))
_gen = torch.Generator().manual_seed(77)
_load_cases = []
for (_T, _E, _k) in [(50, 8, 2), (31, 6, 3), (1, 3, 1)]:
    _ix = torch.stack([torch.randperm(_E, generator=_gen)[:_k] for _ in range(_T)])
    _load_cases.append((_T, _E, _k, _ix))
    record(f"load (T={_T}, E={_E}, k={_k}): an int64 tensor", expert_load(_ix, _E))  # clause: value, int64
_idle = expert_load(_ix, 10)
record("topk_idx after expert_load (not modified in place)", _ix)  # clause: unchanged-input
record("load with idle experts beyond the largest index (T=1, E=10)", _idle)  # clause: value, length-e, int64
### BEGIN REFERENCE
from course_utils.grading import expect
expect("load of [[0], [0], [1]] with E=5 (the last experts unused): an int64 tensor", torch.tensor([2, 1, 0, 0, 0]))
for (_T, _E, _k, _ix) in _load_cases:
    _ref = [int((_ix == e).sum()) for e in range(_E)]
    expect(f"load (T={_T}, E={_E}, k={_k}): an int64 tensor", torch.tensor(_ref, dtype=torch.int64))
expect("load with idle experts beyond the largest index (T=1, E=10)", torch.tensor(_ref + [0] * 7, dtype=torch.int64))
### END REFERENCE
### END HIDDEN TESTS

# %% [markdown]
# ### Book check: the toy load
#
# Your two functions on the toy tokens, against the book's printed values.

# %% nbgrader={"grade": false, "grade_id": "book_check_load", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
_, idx_toy, gates_toy = route_topk(X_TOY, W_G_TOY, k=1)
load_toy = expert_load(idx_toy, num_experts=4)
BOOK_LOAD, BOOK_T, BOOK_E = [0, 2, 0, 1], 3, 4            # book values (Book §3.8.4)
print("load (k=1):", load_toy.tolist(), "| book:", BOOK_LOAD)
print("sum of load:", int(load_toy.sum()), "= T =", BOOK_T)
assert load_toy.tolist() == BOOK_LOAD and int(load_toy.sum()) == BOOK_T and len(load_toy) == BOOK_E
load_toy_k2 = expert_load(route_topk(X_TOY, W_G_TOY, k=2)[1], num_experts=4)
print("load (k=2):", load_toy_k2.tolist(), "| sum =", int(load_toy_k2.sum()), "= k*T")

# %%
fig, axes = plt.subplots(1, 2, figsize=(8, 2.6), sharey=True)
bar_plot(EXPERTS, load_toy, title="Toy load, k = 1 (sum = T = 3)", ylabel="tokens", ax=axes[0])
bar_plot(EXPERTS, load_toy_k2, title="Toy load, k = 2 (sum = kT = 6)", ax=axes[1])
plt.tight_layout()
plt.show()


# %% [markdown]
# Even with $k = 2$, expert 2 never receives a token: a *dead expert* gets no gradient
# from the task and cannot improve — the start of the "rich get richer" loop the book calls
# **routing collapse**.
#
# One caveat on the book's reading of this example: with $T = 3$ tokens and $E = 4$ experts a
# perfectly even load is impossible (some expert must get 0), so three tokens are too few to
# *show* collapse. Section 8 trains a real MoE layer on thousands of tokens to see it happen.
#
# ## 3. Balance losses: the book's and the Switch Transformer's
#
# With $f_e = \text{load}(e)/T$ the fraction of tokens sent to expert $e$ and
# $P_e = \frac1T\sum_t p_e(\mathbf{x}_t)$ the mean router probability of expert $e$:
#
# * **Book §3.8.6:** $\displaystyle \mathcal{L}_{\text{balance}} = \sum_e \Big(\frac{\text{load}(e)}{T} - \frac1E\Big)^2$,
#   a squared distance between the load profile and the uniform one. It is 0 for a perfectly
#   even load and $(E-1)/E$ when all tokens go to one expert ($k = 1$).
# * **Switch Transformer** (Fedus et al., 2021, eq. 4; used by Mixtral in `transformers`):
#   $\displaystyle \mathcal{L}_{\text{aux}} = E\sum_e f_e\,P_e$.
#   For $k = 1$ it is 1 when routing is uniform and $E$ when one expert takes everything.
#   `transformers` counts all $k$ choices in $f_e$ (so $\sum_e f_e = k$); use the same
#   convention: $f_e = \text{load}(e)/T$ with the top-$k$ load.
#
# The difference that matters for training: $\text{load}(e)$ comes from an `argmax`/`topk`,
# which is piecewise constant in $W_g$. **The book's loss, as written, has zero gradient almost
# everywhere — it measures imbalance but cannot correct it.** The Switch loss keeps the
# counts $f_e$ as constant weights and differentiates through the probabilities $P_e$: it
# lowers the probability of experts that are already overloaded.
#
# ### Exercise 3 — the two balance losses (1 + 2 points)
#
# `book_balance_loss(load, T)` returns the book's $\sum_e (\text{load}(e)/T - 1/E)^2$, with $E$ the
# length of `load`. <!-- clause: value --> `switch_aux_loss(probs, topk_idx)` returns
# $E\sum_e f_e P_e$, with $f_e = \text{load}(e)/T$ counting all $k$ choices of every token and $P_e$
# the mean of column $e$ of `probs`. <!-- clause: value --> Both return a 0-dim tensor. <!-- clause: zero-dim -->
#
# `book_balance_loss` must also accept a *float* load (section 8 feeds it the "soft load"
# $\sum_t \mathbf{p}(\mathbf{x}_t)$ and trains on it, so keep it differentiable with respect to a
# float load: no `.item()`, NumPy or `torch.tensor(...)` round trip). `switch_aux_loss` must be differentiable with respect to
# `probs` (do not detach them). <!-- clause: differentiable -->

# %% nbgrader={"grade": false, "grade_id": "ex3_balance_losses", "locked": false, "schema_version": 3, "solution": true, "task": false}
def book_balance_loss(load, T):
    """Book §3.8.6: sum_e (load(e)/T - 1/E)^2, with E = len(load).

    load: (E,) tensor (integer counts, or float "soft" loads);  T: number of tokens.
    Returns a 0-dim float tensor, differentiable with respect to a float load.
    """
    ### BEGIN SOLUTION
    E = load.shape[0]
    return ((load.float() / T - 1.0 / E) ** 2).sum()
    ### END SOLUTION


def switch_aux_loss(probs, topk_idx):
    """Switch-Transformer auxiliary loss E * sum_e f_e * P_e.

    probs: (T, E) router probabilities;  topk_idx: (T, k) chosen experts.
    f_e = (number of (token, slot) pairs routed to e) / T   (sums to k),
    P_e = mean over tokens of probs[:, e].
    Returns a 0-dim tensor, differentiable with respect to probs.
    """
    ### BEGIN SOLUTION
    T, E = probs.shape
    f = F.one_hot(topk_idx, num_classes=E).sum(dim=(0, 1)).to(probs.dtype) / T
    P = probs.mean(dim=0)
    return E * (f * P).sum()
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex3a_book_balance", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
from fractions import Fraction
from course_utils.grading import check_close, check_true, passed

_v = book_balance_loss(torch.tensor([0, 2, 0, 1]), 3)
check_true(isinstance(_v, torch.Tensor) and _v.dim() == 0, "book_balance_loss must return a 0-dim tensor.")
_ref = float(sum((Fraction(l, 3) - Fraction(1, 4)) ** 2 for l in [0, 2, 0, 1]))
check_close("book balance loss of load [0, 2, 0, 1], T = 3", _v, _ref, atol=1e-6)
check_close("book balance loss of a perfectly even load [2, 2, 2, 2], T = 8", book_balance_loss(torch.tensor([2, 2, 2, 2]), 8), 0.0, atol=1e-7)
passed()
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import record
record("module of book_balance_loss (it must be defined in this notebook)", book_balance_loss.__module__)  # clause: defined-here
# a 0-dim tensor (any float dtype: dtype=False)
# clause: value, zero-dim
record("book balance loss of the collapsed load [0, 0, 10, 0, 0], T = 10 (expected (E-1)/E)",
       book_balance_loss(torch.tensor([0, 0, 10, 0, 0]), 10), atol=1e-6, rtol=1e-5, dtype=False)
_gen = torch.Generator().manual_seed(5)
_soft_loads = []
for _E in (3, 8):
    _soft = torch.rand(_E, generator=_gen, dtype=torch.float64) * 5
    _soft_loads.append(_soft)
    record(f"book balance loss of a float load, E = {_E}, T = 7", book_balance_loss(_soft, 7),
           atol=1e-6, rtol=1e-5, dtype=False)
_soft_g = (torch.rand(4, generator=_gen, dtype=torch.float64) * 3).requires_grad_(True)
_lsg = book_balance_loss(_soft_g, 5)
# clause: differentiable
record("book balance loss of a float load that requires grad: the result requires grad", bool(_lsg.requires_grad))
if _lsg.requires_grad:
    _lsg.backward()
record("gradient of the book balance loss w.r.t. a float load (E = 4, T = 5)", _soft_g.grad, atol=1e-6, rtol=1e-5,
       dtype=False)
_ld = torch.tensor([3, 0, 1, 0, 0, 2])
record("book balance loss of load [3, 0, 1, 0, 0, 2], T = 6", book_balance_loss(_ld, 6), atol=1e-6, rtol=1e-5, dtype=False)  # clause: value, zero-dim
### BEGIN REFERENCE
from course_utils.grading import expect
expect("book balance loss of the collapsed load [0, 0, 10, 0, 0], T = 10 (expected (E-1)/E)",
       torch.tensor(0.8, dtype=torch.float64), atol=1e-6, rtol=1e-5, dtype=False)
for _soft in _soft_loads:
    _E = len(_soft)
    _r = float(sum((float(_soft[e]) / 7 - 1 / _E) ** 2 for e in range(_E)))
    expect(f"book balance loss of a float load, E = {_E}, T = 7", torch.tensor(_r, dtype=torch.float64),
           atol=1e-6, rtol=1e-5, dtype=False)
expect("book balance loss of a float load that requires grad: the result requires grad", True)
expect("gradient of the book balance loss w.r.t. a float load (E = 4, T = 5)",   # 2 (load(e)/T - 1/E) / T
       2 * (_soft_g.detach() / 5 - 1 / 4) / 5, atol=1e-6, rtol=1e-5, dtype=False)
expect("book balance loss of load [3, 0, 1, 0, 0, 2], T = 6",
       torch.tensor(float(sum((Fraction(int(l), 6) - Fraction(1, 6)) ** 2 for l in _ld)), dtype=torch.float64),
       atol=1e-6, rtol=1e-5, dtype=False)
### END REFERENCE
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_ex3b_switch_aux", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from course_utils.grading import check_close, check_true, passed

# uniform routing: 4 tokens, one per expert, uniform probabilities -> loss 1
_pu = torch.full((4, 4), 0.25)
_iu = torch.tensor([[0], [1], [2], [3]])
_v = switch_aux_loss(_pu, _iu)
check_true(isinstance(_v, torch.Tensor) and _v.dim() == 0, "switch_aux_loss must return a 0-dim tensor.")
check_close("Switch loss, uniform routing (expected 1)", _v, 1.0, atol=1e-6)
# collapse: every token to expert 0 with probability 1 -> loss E
_pc = torch.tensor([[1.0, 0.0, 0.0, 0.0]] * 4)
check_close("Switch loss, everything to expert 0 (expected E = 4)", switch_aux_loss(_pc, torch.zeros(4, 1, dtype=torch.long)), 4.0, atol=1e-6)
# a hand example: f = [2/3, 0, 1/3], P = column means
_pp = torch.tensor([[0.5, 0.2, 0.3], [0.6, 0.3, 0.1], [0.1, 0.3, 0.6]])
check_close("Switch loss, hand example (E=3, k=1)", switch_aux_loss(_pp, torch.tensor([[0], [0], [2]])),
            3 * (2 / 3 * 0.4 + 0 * (0.8 / 3) + 1 / 3 * (1.0 / 3)), atol=1e-6)
# top-2 routing: f_e counts both choices of every token (sum_e f_e = k = 2), f = [1, 1/2, 1/2, 0], P = 1/4
check_close("Switch loss, k=2, uniform probabilities, routing [[0, 1], [0, 2]] (f sums to k: expected 2)",
            switch_aux_loss(torch.full((2, 4), 0.25), torch.tensor([[0, 1], [0, 2]])), 2.0, atol=1e-6)
_pg = _pp.clone().requires_grad_(True)
_lv = switch_aux_loss(_pg, torch.tensor([[0], [0], [2]]))
check_true(_lv.requires_grad, "switch_aux_loss must stay differentiable with respect to probs (do not detach).")
passed()
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import record
record("module of switch_aux_loss (it must be defined in this notebook)", switch_aux_loss.__module__)  # clause: defined-here
_gen = torch.Generator().manual_seed(99)
_aux_cases = []
for (_T, _E, _k) in [(40, 8, 2), (25, 5, 1), (16, 6, 3)]:
    _lg = 3 * torch.randn(_T, _E, generator=_gen)
    _pr = torch.softmax(_lg, -1).requires_grad_(True)       # the input: router probabilities
    _ix = torch.topk(_pr.detach(), _k, -1).indices           # the input: top-k routing
    _aux_cases.append((_T, _E, _k, _lg, _ix))
    _got = switch_aux_loss(_pr, _ix)
    record(f"Switch loss (T={_T}, E={_E}, k={_k}): a 0-dim tensor", _got, atol=1e-5, rtol=1e-5, dtype=False)  # clause: value, zero-dim
    _got.backward()                                          # fails if the loss is detached from probs
    record(f"gradient of the Switch loss w.r.t. probs (T={_T}, E={_E}, k={_k})", _pr.grad, atol=1e-6, rtol=1e-5)  # clause: differentiable
### BEGIN REFERENCE
from course_utils.grading import expect
from transformers.models.mixtral.modeling_mixtral import load_balancing_loss_func as _lbl
for (_T, _E, _k, _lg, _ix) in _aux_cases:
    expect(f"Switch loss (T={_T}, E={_E}, k={_k}): a 0-dim tensor", _lbl((_lg,), _E, top_k=_k),
           atol=1e-5, rtol=1e-5, dtype=False)
    _f = torch.stack([(_ix == e).sum() for e in range(_E)]).float() / _T
    expect(f"gradient of the Switch loss w.r.t. probs (T={_T}, E={_E}, k={_k})",   # E * f_e / T
           (_E * _f / _T).expand(_T, _E).contiguous(), atol=1e-6, rtol=1e-5)
### END REFERENCE
### END HIDDEN TESTS

# %% [markdown]
# ### Book check: both losses on the toy routing, and what their gradients do
#
# The book gives the formula but no value for its toy load; here it is, next to the Switch
# loss of the same routing and the extreme cases.

# %% nbgrader={"grade": false, "grade_id": "book_check_losses", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
T_toy = X_TOY.shape[0]
probs_t, idx_t, _ = route_topk(X_TOY, W_G_TOY, k=1)
book_toy = book_balance_loss(load_toy, T_toy)
switch_toy = switch_aux_loss(probs_t, idx_t)
print(f"book balance loss, toy load {load_toy.tolist()}: {book_toy.item():.4f}  (= 11/36 = {11 / 36:.4f})")
print(f"best possible with T=3, E=4 (load [1, 1, 1, 0]): {book_balance_loss(torch.tensor([1, 1, 1, 0]), 3).item():.4f}")
print(f"all tokens on one expert (load [3, 0, 0, 0]):     {book_balance_loss(torch.tensor([3, 0, 0, 0]), 3).item():.4f}  (= (E-1)/E)")
print(f"Switch aux loss, toy routing: {switch_toy.item():.4f}   (uniform routing: 1, full collapse: E = 4)")
assert abs(book_toy.item() - 11 / 36) < 1e-6

# %% nbgrader={"grade": false, "grade_id": "gradient_demo", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
# Which loss can actually move the router? Differentiate both with respect to W_g.
W = W_G_TOY.clone().requires_grad_(True)
probs_w, idx_w, _ = route_topk(X_TOY, W, k=1)
hard = book_balance_loss(expert_load(idx_w, 4), T_toy)           # the book's loss, as written
print("book loss (hard load) requires grad:", hard.requires_grad, "-> no gradient reaches W_g")
soft = book_balance_loss(probs_w.sum(0), T_toy)                   # load replaced by the soft load sum_t p(x_t)
g_soft, = torch.autograd.grad(soft, W, retain_graph=True)
g_switch, = torch.autograd.grad(switch_aux_loss(probs_w, idx_w), W)
print("dL/dW_g, book loss with soft load:\n", g_soft.round(decimals=4))
print("dL/dW_g, Switch aux loss:\n", g_switch.round(decimals=4))

# %% [markdown]
# The hard-load loss is a number without a gradient: an optimiser cannot use it. Two ways
# out: replace $\text{load}(e)/T$ by the soft load $P_e$ (a differentiable surrogate of the
# book's loss), or use the Switch loss, whose gradient with respect to $p_e(\mathbf{x}_t)$ is
# $E f_e/T$ — largest for the busiest expert (expert 1 here), so gradient descent lowers its
# probability first.
#
# ## 4. Verify against the library: Mixtral's router and auxiliary loss
#
# `transformers` 5.23 implements Mixtral's router as `MixtralTopKRouter` (softmax in float32,
# `topk`, renormalise) and the auxiliary loss as `load_balancing_loss_func`, which takes a
# tuple of per-layer router logits. Same weights, same numbers:

# %% nbgrader={"grade": false, "grade_id": "check_library_router", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
gen = torch.Generator().manual_seed(0)
T, d, E, k = 64, 16, 8, 2
x_rand = torch.randn(T, d, generator=gen)
W_rand = torch.randn(E, d, generator=gen)

lib_router = MixtralTopKRouter(MixtralConfig(hidden_size=d, num_local_experts=E, num_experts_per_tok=k))
with torch.no_grad():
    lib_router.weight.copy_(W_rand)
    lib_logits, lib_gates, lib_idx = lib_router(x_rand)

probs_r, idx_r, gates_r = route_topk(x_rand, W_rand, k)
print("same experts chosen:", torch.equal(idx_r, lib_idx))
print("gates match (1e-6):", torch.allclose(gates_r, lib_gates, atol=1e-6))
ours, lib = switch_aux_loss(probs_r, idx_r).item(), load_balancing_loss_func((lib_logits,), E, top_k=k).item()
print(f"Switch aux loss: ours {ours:.4f} | transformers {lib:.4f}")
assert torch.equal(idx_r, lib_idx) and torch.allclose(gates_r, lib_gates, atol=1e-6) and abs(ours - lib) < 1e-5


# %% [markdown]
# ## 5. The sparse forward pass
#
# The book's expert is the FFN $W_2\,\sigma(W_1\mathbf{x})$ of §3.8.1. Mixtral's experts are
# SwiGLU FFNs, $W_2\big(\operatorname{SiLU}(W_1\mathbf{x}) \odot W_3\mathbf{x}\big)$ — same idea,
# one more matrix. The forward pass should be *sparse*: each expert runs only on the tokens
# routed to it, as one batch, and its output is added back into the rows of those tokens,
# weighted by their gates. That is where MoE saves compute: an expert with load 0 costs nothing.
#
# ### Exercise 4 — `moe_forward` (3 points)
#
# Routing is given (it comes from your `route_topk` or from the library), and the experts are
# any callables mapping an `(n, d)` tensor to `(n, d)`. Return `y` of shape $(T, d)$ with
# `y[t] = sum_j gates[t, j] * experts[topk_idx[t, j]](x[t])`, for any $k$ and any such experts. <!-- clause: value -->
# Contract: **call each expert only on the
# tokens routed to it, all of them in one call** (the tests count the rows and the calls every
# expert sees: not one call per token or per slot; an expert with no token may be skipped). <!-- clause: sparse -->
# `gates` may be `float32` while `x` is `bfloat16` or `float64`: `y` has the
# dtype of `x` (cast the gates to it). <!-- clause: keeps-dtype --> Useful: `torch.where(topk_idx == e)` returns the token rows *and* the slot
# (which of the $k$ choices) of expert $e$; `Tensor.index_add_` adds rows into given positions.

# %% nbgrader={"grade": false, "grade_id": "ex4_moe_forward", "locked": false, "schema_version": 3, "solution": true, "task": false}
def moe_forward(x, topk_idx, gates, experts):
    """Sparse MoE combination  y_t = sum_j gates[t, j] * experts[topk_idx[t, j]](x_t).

    x: (T, d);  topk_idx: (T, k) long;  gates: (T, k), float32 even when x is bfloat16 or float64 (what
    route_topk returns);  experts: list of E callables (n, d) -> (n, d) that keep the dtype of their input.
    Each expert must be called only on the rows of the tokens routed to it, in one call (one batch).
    Returns y: (T, d), same dtype as x (cast the gates to x's dtype).
    """
    ### BEGIN SOLUTION
    y = torch.zeros_like(x)
    for e, expert in enumerate(experts):
        token_rows, slot = torch.where(topk_idx == e)
        if token_rows.numel() == 0:
            continue
        out = expert(x[token_rows]) * gates[token_rows, slot, None].to(x.dtype)
        y = y.index_add(0, token_rows, out)
    return y
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex4_moe_forward", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from course_utils.grading import check_close, check_equal, check_shape, check_true, msg, passed

class _CountingExpert:
    """Expert e multiplies its input by (e + 1) and records how many rows it saw, in how many calls."""
    def __init__(self, scale):
        self.scale, self.rows, self.calls = scale, 0, 0
    def __call__(self, h):
        self.rows += h.shape[0]
        self.calls += h.shape[0] > 0
        return self.scale * h

_gen = torch.Generator().manual_seed(3)
_x = torch.randn(5, 6, generator=_gen)
_ix = torch.tensor([[0, 1], [2, 0], [1, 2], [0, 2], [2, 1]])
_gt = torch.tensor([[0.75, 0.25], [0.5, 0.5], [0.9, 0.1], [0.2, 0.8], [0.6, 0.4]])
_ex = [_CountingExpert(float(e + 1)) for e in range(4)]           # expert 3 receives no token
_y = moe_forward(_x, _ix, _gt, _ex)
check_shape("moe_forward output", _y, (5, 6))
check_close("moe_forward with experts h -> (e+1) h", _y, (_gt * (_ix + 1)).sum(-1, keepdim=True) * _x, atol=1e-6)
for _e, _c in enumerate(_ex):
    _n = int((_ix == _e).sum())
    check_true(_c.rows == _n, msg("expert {expert} was called on {rows} rows in total, but only {n} token(s) are routed "
                                  "to it: run each expert on its own tokens only.", expert=_e, rows=_c.rows, n=_n))
    check_true(_n == 0 or _c.calls == 1, msg("expert {expert} was called {calls} times on its {n} tokens: call it once, "
                                             "on all its tokens as one batch.", expert=_e, calls=_c.calls, n=_n))
for _dt in (torch.float64, torch.bfloat16):     # float32 gates (route_topk's), x in another dtype
    _yd = moe_forward(_x.to(_dt), _ix, _gt, [_CountingExpert(float(e + 1)) for e in range(4)])
    check_equal(msg("dtype of moe_forward's output for a {dtype} x and float32 gates (that of x)", dtype=_dt), _yd.dtype, _dt)
    check_close(msg("moe_forward with a {dtype} x and float32 gates", dtype=_dt), _yd.double(),
                (_gt * (_ix + 1)).sum(-1, keepdim=True).double() * _x.to(_dt).double(), atol=3e-2, rtol=2e-2)
passed()
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import record
record("module of moe_forward (it must be defined in this notebook)", moe_forward.__module__)  # clause: defined-here
from transformers import MixtralConfig as _MC
from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock as _MBlock

# (a) generic (non-SwiGLU) experts, k = 1 with raw gates
_gen = torch.Generator().manual_seed(11)
_T, _d, _E = 13, 7, 5
_xa = torch.randn(_T, _d, generator=_gen)
_nets = []
for _e in range(_E):
    _net = nn.Sequential(nn.Linear(_d, 9), nn.ReLU(), nn.Linear(9, _d))
    with torch.no_grad():
        for _p in _net.parameters():
            _p.copy_(torch.randn(_p.shape, generator=_gen))
    _nets.append(_net)
_ixa = torch.randint(0, _E - 1, (_T, 1), generator=_gen)          # last expert unused
_gta = torch.rand(_T, 1, generator=_gen)
with torch.no_grad():  # clause: value
    record("moe_forward with ReLU-FFN experts, k=1", moe_forward(_xa, _ixa, _gta, _nets), atol=1e-5, rtol=1e-5)

# (b) SwiGLU experts on stacked weights (those of transformers' MixtralExperts), k = 3
_T, _d, _I, _E, _k = 11, 8, 12, 6, 3
_gate_up = torch.randn(_E, 2 * _I, _d, generator=_gen) / 3
_down = torch.randn(_E, _d, _I, generator=_gen) / 3
def _swiglu(e):
    def f(h):
        g, u = F.linear(h, _gate_up[e]).chunk(2, dim=-1)
        return F.linear(F.silu(g) * u, _down[e])
    return f
_xs = torch.randn(_T, _d, generator=_gen)
_lg = torch.randn(_T, _E, generator=_gen)
_tp, _ixs = torch.softmax(_lg, -1).topk(_k, -1)
_gts = _tp / _tp.sum(-1, keepdim=True)
with torch.no_grad():
    record("moe_forward with SwiGLU experts (transformers MixtralExperts, k=3)",
           moe_forward(_xs, _ixs, _gts, [_swiglu(e) for e in range(_E)]), atol=1e-5, rtol=1e-5)

# (b2) the routing of a transformers MixtralSparseMoeBlock (its router), same expert weights, k = 2
_blk = _MBlock(_MC(hidden_size=_d, intermediate_size=_I, num_local_experts=_E, num_experts_per_tok=2)).eval()
with torch.no_grad():
    _blk.gate.weight.copy_(torch.randn(_E, _d, generator=_gen))
    _blk.experts.gate_up_proj.copy_(_gate_up)
    _blk.experts.down_proj.copy_(_down)
    _xb = torch.randn(2, 9, _d, generator=_gen)
    _, _gtb, _ixb = _blk.gate(_xb.reshape(-1, _d))
    record("moe_forward with the routing and experts of a transformers MixtralSparseMoeBlock (k=2)",
           moe_forward(_xb.reshape(-1, _d), _ixb, _gtb, [_swiglu(e) for e in range(_E)]).reshape(_xb.shape),
           atol=1e-5, rtol=1e-5)

# (c) sparsity on a bigger batch: the rows every expert sees
_T, _E, _k = 40, 8, 2
_xc = torch.randn(_T, 3, generator=_gen)
_ixc = torch.stack([torch.randperm(_E - 2, generator=_gen)[:_k] for _ in range(_T)])
_gtc = torch.rand(_T, _k, generator=_gen)
_ex = [_CountingExpert(float(e) - 2.5) for e in range(_E)]
record("moe_forward, T=40, E=8, k=2, experts h -> (e - 2.5) h", moe_forward(_xc, _ixc, _gtc, _ex), atol=1e-5, rtol=1e-5)
# clause: sparse
record("rows seen by each expert (T=40, E=8, k=2): exactly its routed tokens", [_c.rows for _c in _ex])
record("calls of each expert that has tokens (T=40, E=8, k=2): one batch each",
       [_c.calls for _c in _ex if _c.rows > 0])

# (d) x in bfloat16 / float64 with float32 gates (route_topk's): y keeps the dtype of x
for _dt, _tol in ((torch.bfloat16, 5e-2), (torch.float64, 1e-6)):
    # clause: keeps-dtype, value
    record(f"moe_forward with a {_dt} x and float32 gates (T=40, E=8, k=2): a {_dt} result",
           moe_forward(_xc.to(_dt), _ixc, _gtc, [_CountingExpert(float(e) - 2.5) for e in range(_E)]),
           atol=_tol, rtol=2e-2 if _dt == torch.bfloat16 else 1e-6)
### BEGIN REFERENCE
from course_utils.grading import expect
from transformers.models.mixtral.modeling_mixtral import MixtralExperts as _MEx
with torch.no_grad():
    # (a) token by token
    expect("moe_forward with ReLU-FFN experts, k=1",
           torch.stack([_gta[t, 0] * _nets[int(_ixa[t, 0])](_xa[t:t + 1])[0] for t in range(_xa.shape[0])]),
           atol=1e-5, rtol=1e-5)
    # (b) transformers' MixtralExperts on the same stacked weights
    _lib = _MEx(_MC(hidden_size=_d, intermediate_size=_I, num_local_experts=6, num_experts_per_tok=3))
    _lib.gate_up_proj.copy_(_gate_up)
    _lib.down_proj.copy_(_down)
    expect("moe_forward with SwiGLU experts (transformers MixtralExperts, k=3)", _lib(_xs, _ixs, _gts), atol=1e-5, rtol=1e-5)
    # (b2) the whole block
    expect("moe_forward with the routing and experts of a transformers MixtralSparseMoeBlock (k=2)", _blk(_xb),
           atol=1e-5, rtol=1e-5)
    # (c) closed form
    expect("moe_forward, T=40, E=8, k=2, experts h -> (e - 2.5) h",
           (_gtc * (_ixc.float() - 2.5)).sum(-1, keepdim=True) * _xc, atol=1e-5, rtol=1e-5)
expect("rows seen by each expert (T=40, E=8, k=2): exactly its routed tokens", [int((_ixc == e).sum()) for e in range(8)])
expect("calls of each expert that has tokens (T=40, E=8, k=2): one batch each",
       [1] * sum(bool((_ixc == e).any()) for e in range(8)))
for _dt, _tol in ((torch.bfloat16, 5e-2), (torch.float64, 1e-6)):
    expect(f"moe_forward with a {_dt} x and float32 gates (T=40, E=8, k=2): a {_dt} result",
           ((_gtc.double() * (_ixc.double() - 2.5)).sum(-1, keepdim=True) * _xc.to(_dt).double()).to(_dt),
           atol=_tol, rtol=2e-2 if _dt == torch.bfloat16 else 1e-6)
### END REFERENCE
### END HIDDEN TESTS

# %% [markdown]
# ## 6. Verify against the library: the whole sparse MoE block
#
# Here is the course's MoE layer — your router plus your sparse combination, with SwiGLU
# experts stored the readable way (one `nn.Linear` per matrix and per expert). Mixtral's block
# in `transformers` 5 stores the experts differently: all of them in two **stacked 3-D
# parameters**, `gate_up_proj` of shape $(E, 2\,d_{ff}, d)$ — $W_1$ and $W_3$ concatenated
# along the output axis — and `down_proj` of shape $(E, d, d_{ff})$. Loading our weights
# into it is a matter of stacking.

# %% nbgrader={"grade": false, "grade_id": "course_moe", "locked": true, "schema_version": 3, "solution": false, "task": false}
class SwiGLUExpert(nn.Module):
    """One expert FFN: W2 (SiLU(W1 x) * W3 x)  (Mixtral's expert; the book's W2 sigma(W1 x) plus a gate W3)."""
    def __init__(self, d, d_ff):
        super().__init__()
        self.w1 = nn.Linear(d, d_ff, bias=False)
        self.w3 = nn.Linear(d, d_ff, bias=False)
        self.w2 = nn.Linear(d_ff, d, bias=False)

    def forward(self, h):
        return self.w2(F.silu(self.w1(h)) * self.w3(h))


class CourseMoE(nn.Module):
    """Router + E SwiGLU experts + top-k sparse combination, built from this chapter's functions."""
    def __init__(self, d, d_ff, num_experts, k):
        super().__init__()
        self.k = k
        self.router = nn.Linear(d, num_experts, bias=False)       # W_g, shape (E, d)
        self.experts = nn.ModuleList(SwiGLUExpert(d, d_ff) for _ in range(num_experts))

    def forward(self, x):                                         # x: (batch, seq, d)
        flat = x.reshape(-1, x.shape[-1])
        _, topk_idx, gates = route_topk(flat, self.router.weight, self.k)
        return moe_forward(flat, topk_idx, gates, list(self.experts)).reshape(x.shape)


def load_into_mixtral(moe: CourseMoE) -> MixtralSparseMoeBlock:
    """A transformers MixtralSparseMoeBlock holding exactly the weights of `moe`."""
    E, d = moe.router.weight.shape
    d_ff = moe.experts[0].w1.out_features
    cfg = MixtralConfig(hidden_size=d, intermediate_size=d_ff, num_local_experts=E, num_experts_per_tok=moe.k)
    block = MixtralSparseMoeBlock(cfg).eval()
    with torch.no_grad():
        block.gate.weight.copy_(moe.router.weight)
        block.experts.gate_up_proj.copy_(torch.stack([torch.cat([ex.w1.weight, ex.w3.weight], dim=0) for ex in moe.experts]))
        block.experts.down_proj.copy_(torch.stack([ex.w2.weight for ex in moe.experts]))
    return block


# %% nbgrader={"grade": false, "grade_id": "check_library_block", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
torch.manual_seed(0)
moe = CourseMoE(d=32, d_ff=64, num_experts=8, k=2).eval()
block = load_into_mixtral(moe)
for name, p in block.named_parameters():
    print(f"{name:<24} {tuple(p.shape)}")

x_batch = torch.randn(2, 10, 32, generator=torch.Generator().manual_seed(1))
with torch.no_grad():
    y_course, y_lib = moe(x_batch), block(x_batch)
diff = (y_course - y_lib).abs().max().item()
print("output shape:", tuple(y_lib.shape))
print("course MoE == transformers MixtralSparseMoeBlock within 1e-5:", diff < 1e-5)
assert diff < 1e-5


# %% [markdown]
# ## 7. Total versus active parameters
#
# Book §3.8.5: with $P$ parameters per expert, $P_{\text{total}} = E\cdot P$ while a token only
# uses $P_{\text{active}} = k\cdot P$. That is true **of the expert blocks**. A real model also
# has parameters every token uses — embeddings, attention, norms, routers, output head — so the
# whole-model ratio $P_{\text{total}}/P_{\text{active}}$ is smaller than $E/k$.
#
# ### Exercise 5 — `moe_param_counts` (2 points)
#
# Count the parameters of a `MixtralForCausalLM` from its config alone, with a formula (no model
# instantiation). Per layer: attention $W_q, W_k, W_v, W_o$ without biases ($W_q$ has
# `num_attention_heads * head_dim` outputs and $W_o$ as many inputs, $d$ only when `head_dim` is
# $d / H$; grouped-query attention: $W_k$ and $W_v$ have `num_key_value_heads * head_dim` outputs; `head_dim` is
# `config.head_dim`, or `hidden_size // num_attention_heads` when that is `None`), two RMSNorm
# weight vectors, the router $W_g$, and $E$ SwiGLU experts of $3\,d\,d_{ff}$ parameters each.
# Plus the token embedding, a final RMSNorm and the output head (which reuses the embedding
# matrix, and is then counted once, when `config.tie_word_embeddings` is true). "Active" =
# everything except the $E - k$ experts a token does not use, in every layer. <!-- clause: value -->
# The hidden tests run your function with Mixtral's model and layer classes switched off, so a
# count that builds a model (or a layer) fails. <!-- clause: formula-only --> `config` may be a
# `MixtralConfig` or any object with the attributes `hidden_size`, `intermediate_size`,
# `num_hidden_layers`, `num_attention_heads`, `num_key_value_heads`, `head_dim` (possibly `None`),
# `vocab_size`, `num_local_experts`, `num_experts_per_tok` and `tie_word_embeddings`: read only
# those. <!-- clause: any-config --> Return the tuple `(total, active)` of two Python `int`s. <!-- clause: returns-ints -->

# %% nbgrader={"grade": false, "grade_id": "ex5_param_counts", "locked": false, "schema_version": 3, "solution": true, "task": false}
def moe_param_counts(config):
    """(total, active) parameter counts of MixtralForCausalLM(config), as Python ints.

    config: a MixtralConfig, or any object with the attributes hidden_size, intermediate_size,
    num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim (may be None),
    vocab_size, num_local_experts, num_experts_per_tok and tie_word_embeddings.
    """
    ### BEGIN SOLUTION
    d, d_ff, L, V = config.hidden_size, config.intermediate_size, config.num_hidden_layers, config.vocab_size
    E, k = config.num_local_experts, config.num_experts_per_tok
    hd = config.head_dim or d // config.num_attention_heads
    attention = 2 * d * config.num_attention_heads * hd + 2 * d * config.num_key_value_heads * hd
    shared_per_layer = attention + 2 * d + E * d                  # attention + 2 norms + router
    expert = 3 * d * d_ff
    shared = L * shared_per_layer + V * d * (1 if config.tie_word_embeddings else 2) + d
    return int(shared + L * E * expert), int(shared + L * k * expert)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex5_param_counts", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from course_utils.grading import check_equal, check_true, passed
from transformers import MixtralConfig
from transformers.models.mixtral.modeling_mixtral import MixtralForCausalLM

_cfg = MixtralConfig()                                      # Mixtral 8x7B shape
with torch.device("meta"):                                  # no memory: parameters without storage
    _m = MixtralForCausalLM(_cfg)
_total = sum(p.numel() for p in _m.parameters())
_experts = sum(p.numel() for n, p in _m.named_parameters() if ".experts." in n)
_res = moe_param_counts(_cfg)
check_true(isinstance(_res, tuple) and len(_res) == 2, "moe_param_counts must return a tuple (total, active).")
check_equal("total parameters of Mixtral 8x7B", int(_res[0]), _total)
check_equal("active parameters of Mixtral 8x7B (k=2 of E=8 experts)", int(_res[1]),
            _total - _experts + _experts * _cfg.num_experts_per_tok // _cfg.num_local_experts)
passed()
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import record, switched_off
record("module of moe_param_counts (it must be defined in this notebook)", moe_param_counts.__module__)  # clause: defined-here
from types import SimpleNamespace
import transformers.models.mixtral.modeling_mixtral as _mmx
_configs = [MixtralConfig(**_kw) for _kw in [
    dict(hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
         num_local_experts=6, num_experts_per_tok=3, vocab_size=100, head_dim=24, tie_word_embeddings=True),
    dict(hidden_size=48, intermediate_size=80, num_hidden_layers=2, num_attention_heads=6, num_key_value_heads=6,
         num_local_experts=4, num_experts_per_tok=1, vocab_size=77, tie_word_embeddings=False),
    dict(hidden_size=32, intermediate_size=40, num_hidden_layers=5, num_attention_heads=8, num_key_value_heads=1,
         num_local_experts=16, num_experts_per_tok=2, vocab_size=50)]]
# a plain object with the documented attributes
_ns = SimpleNamespace(hidden_size=40, intermediate_size=56, num_hidden_layers=3, num_attention_heads=5, num_key_value_heads=1,
                      head_dim=None, vocab_size=90, num_local_experts=7, num_experts_per_tok=2, tie_word_embeddings=False)
# the student's function runs with Mixtral's modules switched off: the exercise asks for a formula.
# __init__ catches every way of building one (any alias, Auto classes); the class names give the aliases.
_classes = ("MixtralForCausalLM", "MixtralModel", "MixtralDecoderLayer", "MixtralSparseMoeBlock", "MixtralExperts",
            "MixtralAttention")
_paths = [f"{_mmx.__name__}.{_n}.__init__" for _n in _classes] + [f"{_mmx.__name__}.{_n}" for _n in _classes]
_got = []
with switched_off(*_paths, functions=[moe_param_counts],
                  hint="moe_param_counts must count with a formula from the config attributes, "
                       "not by building a model or one of its layers (see the exercise text)."):
    for _c in _configs + [_ns]:
        try:
            _got.append(moe_param_counts(_c))
        except AssertionError:
            raise
        except Exception as _exc:
            raise AssertionError(f"moe_param_counts failed on {'a plain config object' if _c is _ns else 'a MixtralConfig'} "
                                 f"({type(_exc).__name__}: {_exc}); compute the counts with a formula from the "
                                 "config attributes.") from None
def _describe(c):
    return "a plain config object" if c is _ns else (f"hidden_size={c.hidden_size}, layers={c.num_hidden_layers}, "
                                                     f"E={c.num_local_experts}, k={c.num_experts_per_tok}, "
                                                     f"kv_heads={c.num_key_value_heads}, tied={c.tie_word_embeddings}")


for _c, _r in zip(_configs + [_ns], _got):
    # clause: returns-ints, formula-only, any-config
    record(f"type of the result of moe_param_counts ({_describe(_c)}): a tuple", type(_r).__name__)
    record(f"types of total and active ({_describe(_c)}): Python ints", [type(_v).__name__ for _v in _r])
    record(f"[total, active] parameters ({_describe(_c)})", [int(_v) for _v in _r])  # clause: value, formula-only, any-config
### BEGIN REFERENCE
from course_utils.grading import expect
for _c in _configs + [_ns]:
    _mc = _c if _c is not _ns else MixtralConfig(**vars(_ns))
    with torch.device("meta"):
        _m = _mmx.MixtralForCausalLM(_mc)
    _tt = sum(p.numel() for p in _m.parameters())
    _ee = sum(p.numel() for n, p in _m.named_parameters() if ".experts." in n)
    expect(f"type of the result of moe_param_counts ({_describe(_c)}): a tuple", "tuple")
    expect(f"types of total and active ({_describe(_c)}): Python ints", ["int", "int"])
    expect(f"[total, active] parameters ({_describe(_c)})",
           [_tt, _tt - _ee + _ee * _mc.num_experts_per_tok // _mc.num_local_experts])
### END REFERENCE
### END HIDDEN TESTS

# %% nbgrader={"grade": false, "grade_id": "check_mixtral_params", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
cfg = MixtralConfig()                                        # defaults = Mixtral 8x7B
print(f"Mixtral-like config: d={cfg.hidden_size}, d_ff={cfg.intermediate_size}, layers={cfg.num_hidden_layers}, "
      f"E={cfg.num_local_experts}, k={cfg.num_experts_per_tok}, vocab={cfg.vocab_size}")
total, active = moe_param_counts(cfg)
with torch.device("meta"):
    numel = sum(p.numel() for p in MixtralForCausalLM(cfg).parameters())
P_expert = 3 * cfg.hidden_size * cfg.intermediate_size
expert_total = cfg.num_hidden_layers * cfg.num_local_experts * P_expert
expert_active = cfg.num_hidden_layers * cfg.num_experts_per_tok * P_expert
print(f"total  parameters: {total:>14,}  (meta-device model: {numel:,})")
print(f"active parameters: {active:>14,}")
print(f"experts only  (book's E*P vs k*P): {expert_total:,} vs {expert_active:,}  ratio {expert_total / expert_active:.2f} = E/k")
print(f"whole model   (total vs active):   ratio {total / active:.2f}")
print(f"shared (non-expert) parameters: {total - expert_total:,} = {100 * (total - expert_total) / total:.1f}% of total")
assert total == numel

# %%
fig, ax = plt.subplots(figsize=(6, 2.8))
bar_plot(["total", "active", "experts\n(total)", "experts\n(active)"],
         np.round(np.array([total, active, expert_total, expert_active]) / 1e9, 2),
         title="Mixtral 8x7B shape: parameters (billions)", ylabel="billions", ax=ax)
plt.tight_layout()
plt.show()

# %% [markdown]
# The published "46.7 B total, 12.9 B active" of Mixtral 8×7B comes out of the config to the
# last digit. The book's $E\cdot P$ vs $k\cdot P$ gives the ratio $E/k = 4$ for the expert
# blocks; for the whole model it is 3.63, because 1.6 B parameters (3.4 %) are used by every
# token. The "8×7B" name is misleading in the other direction: the model is not $8 \times 7 = 56$ B,
# because only the FFNs are replicated.
#
# ## 8. Routing collapse, and what a balance loss does about it
#
# A toy task where an MoE *should* use all its experts: tokens come from $E = 4$ clusters and the
# target of a token is a cluster-specific linear map of it, $y = A_c\,x$. Four linear experts
# could learn one map each. As in real networks, all token vectors share a large common
# component, so the freshly initialised router sends almost everything to the same expert.
#
# We train a top-1 MoE layer (Switch-style gate $p_{e^*}(\mathbf{x})$, so that the router
# receives gradient; see section 2) with your functions, three times from the same
# initialisation and the same batches:
#
# 1. task loss (MSE) only;
# 2. MSE $+\ 0.1\,\times$ Switch auxiliary loss;
# 3. MSE $+\ 1.0\,\times$ book balance loss with the soft load $\sum_t \mathbf{p}(\mathbf{x}_t)$
#    (the hard-load version has no gradient, section 3).

# %% nbgrader={"grade": false, "grade_id": "collapse_setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
D_TOY, E_TOY, BATCH = 8, 4, 256
STEPS = 300               # the same in CI and full mode: the whole experiment takes a few seconds


def toy_task(seed=1):
    """Cluster centres, a shared offset and one target map per cluster (fixed by `seed`)."""
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(E_TOY, D_TOY, generator=g)
    offset = torch.randn(D_TOY, generator=g)
    offset = 2.0 * offset / offset.norm()                        # common component of all tokens
    maps = torch.randn(E_TOY, D_TOY, D_TOY, generator=g) / D_TOY ** 0.5
    return centres, offset, maps


def train_toy_moe(balance=None, coef=0.0, steps=STEPS, seed=1, lr=1e-2):
    """Train router + 4 linear experts; return (load per step (steps, E), final MSE)."""
    centres, offset, maps = toy_task(seed)
    torch.manual_seed(seed)
    router = nn.Linear(D_TOY, E_TOY, bias=False)
    experts = nn.ModuleList(nn.Linear(D_TOY, D_TOY, bias=False) for _ in range(E_TOY))
    with torch.no_grad():
        router.weight.normal_(0.0, 0.1)
        for ex in experts:
            ex.weight.normal_(0.0, 0.1 / D_TOY ** 0.5)
    opt = torch.optim.Adam([*router.parameters(), *experts.parameters()], lr=lr)
    data = torch.Generator().manual_seed(seed + 1000)              # same batches for every run
    loads = []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)            # tiny matrices: one thread is much faster than several
    for _ in range(steps):
        c = torch.randint(0, E_TOY, (BATCH,), generator=data)
        x = offset + centres[c] + 0.3 * torch.randn(BATCH, D_TOY, generator=data)
        y = torch.einsum("bij,bj->bi", maps[c], x)
        probs, idx, _ = route_topk(x, router.weight, 1)
        gates = probs.gather(1, idx)                              # Switch: raw probability of the chosen expert
        mse = F.mse_loss(moe_forward(x, idx, gates, list(experts)), y)
        loss = mse
        if balance == "switch":
            loss = loss + coef * switch_aux_loss(probs, idx)
        elif balance == "book_soft":
            loss = loss + coef * book_balance_loss(probs.sum(0), BATCH)
        opt.zero_grad()
        loss.backward()
        opt.step()
        loads.append(expert_load(idx, E_TOY))
    torch.set_num_threads(threads)
    return torch.stack(loads).numpy(), mse.item()


# %% nbgrader={"grade": false, "grade_id": "collapse_run", "locked": true, "schema_version": 3, "solution": false, "task": false}
RUNS = {"no balance loss": (None, 0.0),
        "Switch aux loss (coef 0.1)": ("switch", 0.1),
        "book loss, soft load (coef 1.0)": ("book_soft", 1.0)}
results = {name: train_toy_moe(balance, coef) for name, (balance, coef) in RUNS.items()}

fig, axes = plt.subplots(1, 3, figsize=(13, 3.4), sharey=True)
for ax, (name, (loads, mse)) in zip(axes, results.items()):
    for e in range(E_TOY):
        ax.plot(loads[:, e] / BATCH, label=f"expert {e}")
    ax.axhline(1 / E_TOY, color="grey", ls="--", lw=1)
    ax.set_title(f"{name}\nfinal MSE {mse:.3f}", fontsize=10)
    ax.set_xlabel("training step")
    ax.grid(alpha=0.3)
axes[0].set_ylabel("load(e) / T")
axes[0].legend(fontsize=8)
fig.suptitle("Load per expert during training (dashed: even load 1/E)")
plt.tight_layout()
plt.show()

for name, (loads, mse) in results.items():
    print(f"{name:<33} load at step 0: {loads[0].tolist()} | final load: {loads[-1].tolist()} | "
          f"book loss (final): {book_balance_loss(torch.tensor(loads[-1]), BATCH).item():.4f} | final MSE: {mse:.4f}")

print("\nevery expert's load within 1/E ± 0.1 (between 15% and 35% of the batch):")
for name, (loads, _) in results.items():
    even = (np.abs(loads / BATCH - 1 / E_TOY) <= 0.1).all(axis=1)
    first = f"first at step {int(even.argmax())}" if even.any() else "never"
    for_good = next((t for t in range(len(even)) if even[t:].all()), None)
    print(f"  {name:<33} {first}" + ("" if for_good is None else f", and at every step from step {for_good} on"))

# %% [markdown]
# **What to see.** Without a balance loss, the expert that starts with most tokens (expert 3,
# 213 of 256) takes *all* of them within a few dozen steps: it is the only one that learns, its
# outputs improve, and the router never tries the idle experts. One linear expert then has to
# fit four different maps, and the MSE plateaus high. Both balance losses first spread the
# tokens over two or three experts and then reach an even load where each expert serves one
# cluster: every load is first within $1/E \pm 0.1$ at step 114 with the Switch loss and at step
# 168 with the soft book loss, and stays there from step 227 on in both runs (last printed lines);
# the final MSE is about 7 times lower. The book loss printed at the end is the *hard-load* version — a
# fine diagnostic, even if it cannot be trained on.

# %% [markdown]
# ## What this chapter leaves out
#
# This chapter covers Book §3.8.1–§3.8.6. What it leaves out or simplifies, on purpose:
#
# * **The cost at scale in §3.9's table** ("router + balancing losses + communication overhead"):
#   expert parallelism, where tokens travel between the devices that hold their experts, needs several
#   GPUs; here every expert sits on one device.
# * **Speed.** The chapter shows that an expert with no tokens is never called, but does not time
#   sparse against dense layers: at toy sizes the gather and scatter overheads dominate, and a fair
#   timing needs large experts on a GPU.
# * **A real MoE language model.** Mixtral 8×7B is only counted from its configuration: its weights
#   need far more memory than a course machine has, and the block checked against `transformers` has
#   random weights.
# * **Other balancing schemes** (capacity limits with token dropping, expert-choice routing,
#   DeepSeek-V3's routing bias) are only named in the summary, not implemented: the book gives one
#   loss, and the Switch loss is the one `transformers` uses for Mixtral.

# %% [markdown] nbgrader={"grade": false, "grade_id": "written_q1_question", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## 9. Reflect (written, 2 points)
#
# The book (§3.8.5–§3.8.6) presents $P_{\text{active}} = k\cdot P$ and
# $\mathcal{L}_{\text{balance}} = \sum_e (\text{load}(e)/T - 1/E)^2$ as *the* way to think about
# MoE cost and balance. Using numbers printed in this notebook (quote them):
#
# 1. For the Mixtral-8×7B configuration, how well does $E/k$ predict the real ratio of total to
#    active parameters, and why does it differ?
# 2. In the collapse experiment, what happened to the load and to the final MSE without a balance
#    loss, and with each of the two losses? Why could the book's loss not be used *as written*
#    in that experiment (which printed output shows it)?

# %% [markdown] nbgrader={"grade": true, "grade_id": "written_q1", "locked": false, "points": 2, "schema_version": 3, "solution": true, "task": false}
# **Answer.** (model answer — numbers from the notebook's outputs)
#
# 1. $E/k = 8/2 = 4$ holds for the experts only (45.1 B vs 11.3 B). The whole model has
#    46,702,792,704 total and 12,879,925,248 active parameters, a ratio of 3.63, because
#    1,605,636,096 parameters (3.4 %: embeddings, output head, attention, norms, routers) are used
#    by every token and count in both. So $E/k$ overestimates the saving; the more of the model
#    lies outside the FFNs, the further the real ratio falls below $E/k$.
# 2. Without a balance loss the routing collapsed completely: the load went from
#    [0, 36, 7, 213] at step 0 to [0, 0, 0, 256] (hard-load book loss 0.7500, its maximum
#    (E-1)/E), and the final MSE was 0.1231. With the Switch loss (coef 0.1) and with the
#    soft-load book loss (coef 1.0) the final load was [67, 59, 57, 73] (book loss 0.0025) and
#    the MSE 0.0172 / 0.0174, about 7 times lower: each expert learned one cluster's map. The
#    book's loss as written counts tokens through argmax/top-k, so it is piecewise constant in
#    $W_g$: the gradient cell printed "book loss (hard load) requires grad: False", i.e. it gives
#    the optimiser nothing; only a soft surrogate (probabilities in place of counts) or the Switch
#    form $E\sum_e f_e P_e$ can steer the router.

# %% [markdown]
# ## Summary
#
# * The router is a linear map and a softmax; top-$k$ keeps the $k$ most probable experts and
#   renormalises their gates (= a softmax over the chosen logits). For $k = 1$ the renormalised
#   gate is 1, which is why Switch-style layers gate with the raw probability.
# * $\sum_e \text{load}(e) = kT$; the book's toy load $[0, 2, 0, 1]$ is reproduced by the
#   course's router (the book does not give one), and its balance loss is $11/36 \approx 0.3056$.
# * **Book corrections.** (i) $\mathcal{L}_{\text{balance}}$ of §3.8.6, computed from hard
#   loads, has no gradient and cannot be trained on as written; Mixtral in `transformers` uses the
#   Switch loss $E\sum_e f_e P_e$ (`load_balancing_loss_func`), and other systems balance
#   differently (e.g. DeepSeek-V3 adjusts a per-expert routing bias instead of adding a loss;
#   expert-choice routing and capacity limits constrain the load directly). (ii) $P_{\text{total}} = E\cdot P$,
#   $P_{\text{active}} = k\cdot P$ count the experts only: Mixtral 8×7B's ratio is 3.63, not
#   $E/k = 4$. (iii) With 3 tokens and 4 experts an even load is impossible, so the toy load
#   alone does not demonstrate collapse; the training experiment does.
# * Your sparse forward pass matches `transformers`' `MixtralSparseMoeBlock` (stacked expert
#   weights `gate_up_proj`, `down_proj`) to $10^{-5}$.
