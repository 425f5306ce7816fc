# %% [markdown]
# # Chapter 06 — Attention scaling, temperature and entropy
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/llm-course/llm-course/blob/main/notebooks/06_attention_scaling_entropy/06_attention_scaling_entropy.ipynb)
#
# **Goal.** Understand *why* attention divides its scores by $\sqrt{d_k}$, and how one number — the
# scale of the logits, or its inverse, the temperature $\tau$ — moves the softmax between a uniform
# average and a hard argmax. You will measure it three ways: the spread of the scores, the entropy
# of the attention row, and the size of the softmax Jacobian (the factor every gradient passes
# through).
#
# **Book sections.** Book §3.7 (3.7.1 the numerical problem, 3.7.2 the $1/\sqrt{d_k}$ correction,
# 3.7.3 scale and entropy, 3.7.4 temperature), Book §2.6.4, and seed 002 ("Transformações Lineares e
# Dimensionalidade", "Escalonamento da Atenção", "Análise do Gradiente": Theorem 6, Corollary 3,
# Lemma 6, Theorem 8, Corollary 4).
#
# **You will implement (graded, 9 points + 3 for a written answer):**
#
# | # | function | points |
# |---|---|---|
# | 1 | `entropy(p, dim)` — Shannon entropy in nats, with $0\log 0 = 0$ | 2 |
# | 2 | `tempered_softmax(x, tau, dim)` — numerically stable $\mathrm{softmax}(x/\tau)$ | 2 |
# | 3 | `score_std_table(d_ks, n_pairs, generator)` — the seeded variance experiment | 3 |
# | 4 | `softmax_jacobian(z)` — the closed form of seed 002's Theorem 8 | 2 |
# | 5 | written question: is seed 002's Corollary 4 right? | 3 |
#
# Define each graded function in its answer cell, in this notebook (helpers of your own are fine):
# the hidden tests check where each one is defined. <!-- clause-all: defined-here -->
#
# Everything here is computed from fixed seeds and small tensors: no model is downloaded, and
# every number printed is the same on every run.

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
DEVICE = course_utils.setup(seed=6)

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
import math

import matplotlib.pyplot as plt
import numpy as np
import torch

from course_utils.grading import check_close
from course_utils.plotting import line_plot

torch.set_printoptions(precision=4, sci_mode=False)

# %% [markdown]
# ## 1. Run and observe
#
# ### 1.1 Dot products of random vectors spread out as $d_k$ grows
#
# Book §3.7.1 starts from the raw score matrix $S = QK^\top$, $S_{ij} = q_i^\top k_j$. Below we draw
# query and key vectors with independent $\mathcal N(0,1)$ entries — roughly what a freshly
# initialised layer produces — and look at the raw scores $q\cdot k$ and the scaled scores
# $q\cdot k/\sqrt{d_k}$ for a small and a large head dimension.

# %%
g = torch.Generator().manual_seed(0)
fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
for d_k in (16, 1024):
    q = torch.randn(10_000, d_k, generator=g)
    k = torch.randn(10_000, d_k, generator=g)
    raw = (q * k).sum(-1)
    axes[0].hist(raw.numpy(), bins=80, density=True, alpha=0.6, label=f"$d_k$={d_k}")
    axes[1].hist((raw / math.sqrt(d_k)).numpy(), bins=80, density=True, alpha=0.6, label=f"$d_k$={d_k}")
axes[0].set(title=r"raw scores $q\cdot k$", xlabel="score", ylabel="density")
axes[1].set(title=r"scaled scores $q\cdot k/\sqrt{d_k}$", xlabel="score")
for ax in axes:
    ax.legend()
    ax.grid(alpha=0.3)
plt.tight_layout()
plt.show()

# %% [markdown]
# The raw scores for $d_k=1024$ are spread over roughly $\pm 100$; after the division both
# histograms lie on top of each other. What does that do to an attention row? One query against
# eight keys, softmax of the raw scores versus the scaled ones:

# %%
g = torch.Generator().manual_seed(1)
for d_k in (16, 1024):
    q = torch.randn(d_k, generator=g)
    K = torch.randn(8, d_k, generator=g)
    raw = K @ q
    print(f"d_k={d_k:>4}  softmax(raw)    =", torch.softmax(raw, -1).numpy().round(3))
    print(f"{'':>9} softmax(scaled) =", torch.softmax(raw / math.sqrt(d_k), -1).numpy().round(3))

# %% [markdown]
# With $d_k = 1024$ the unscaled row is one-hot: the softmax is **saturated** and the query
# "sees" a single key. After the division both rows are soft, whatever $d_k$: no row is
# one-hot, every key gets some weight, and the largest weight is 0.215 for $d_k = 16$ and 0.45 for
# $d_k = 1024$.
#
# ### 1.2 Scaling the logits of the chapter-05 example
#
# Book §3.7.3 reuses the three-token example of Book §3.3 / chapter 05 (`teddy`, `bear`,
# `reads`, $Q = K = X$, $d = 4$). Its plain (no RoPE) logits are
# $L = QK^\top/\sqrt{4}$, and the first row — how `teddy` looks at the three tokens — is
# $x = [1, 0.5, -0.5]$. We recompute it and multiply it by a scale $s$:

# %% nbgrader={"grade": false, "grade_id": "teddy_logits", "locked": true, "schema_version": 3, "solution": false, "task": false}
tokens = ["teddy", "bear", "reads"]
X = torch.tensor([[1.0, 0.0, 1.0, 0.0],      # teddy
                  [1.0, 1.0, 0.0, 1.0],      # bear
                  [0.0, 1.0, -1.0, 1.0]],    # reads
                 dtype=torch.float64)
L_plain = X @ X.T / math.sqrt(X.shape[-1])
x_teddy = L_plain[0]
SCALES = [0.5, 1.0, 2.0, 4.0]
print("plain logits L = QK^T / sqrt(4):\n", L_plain)
print("x = first row (teddy):", x_teddy.tolist())

# %%
fig, ax = plt.subplots(figsize=(6.5, 3.2))
width = 0.2
for i, s in enumerate(SCALES):
    p = torch.softmax(s * x_teddy, -1)
    ax.bar(np.arange(3) + (i - 1.5) * width, p.numpy(), width, label=f"s = {s}")
ax.set_xticks(range(3), labels=tokens)
ax.set(ylabel="attention weight", title="softmax(s · x) for the query 'teddy'")
ax.legend()
ax.grid(alpha=0.3, axis="y")
plt.tight_layout()
plt.show()


# %% [markdown]
# The larger $s$, the more the weight piles onto `teddy` itself. Note a detail: $s = 2$ undoes the
# $1/\sqrt{4}$, so the $s=2$ row **is** the unscaled attention of this example ($q_0\cdot k_j =
# [2, 1, -1]$). The book measures "how peaked" with the entropy; section 2 says why that is a good
# measure.

# %% [markdown]
# ## 2. Derive
#
# ### 2.1 Why $\mathrm{Var}(q\cdot k) = d_k$ (seed 002, Theorem 6)
#
# Write $q\cdot k = \sum_{l=1}^{d_k} q_l k_l$. Assume all $2d_k$ components are **independent**, with
# means $\mu_q, \mu_k$ and variances $\sigma_q^2, \sigma_k^2$. Independent terms have additive variance,
# and for one term
#
# $$\mathrm{Var}(q_l k_l) = \mathbb E[q_l^2]\,\mathbb E[k_l^2] - (\mathbb E[q_l]\,\mathbb E[k_l])^2
#   = \sigma_q^2\sigma_k^2 + \mu_q^2\sigma_k^2 + \mu_k^2\sigma_q^2 .$$
#
# With zero means and unit variances this is $1$, so $\mathrm{Var}(q\cdot k) = d_k$, the standard
# deviation is $\sqrt{d_k}$, and $q\cdot k/\sqrt{d_k}$ has variance exactly $1$ (seed 002, Lemma 6).
# Gaussianity is never used; **zero means and independence are**. The seed's proof writes
# $\mathrm{Var}(q_lk_l) = \mathrm{Var}(q_l)\,\mathrm{Var}(k_l)$, which is only true when the means are
# zero — section 5 tests what happens when they are not.
#
# ### 2.2 Entropy, scale and temperature
#
# For a distribution $p$ over $n$ keys, $H(p) = -\sum_j p_j \log p_j$ (natural log, so **nats**), with
# the convention $0\log 0 = 0$ (the limit of $t\log t$ as $t\to 0^+$). It satisfies
# $0 \le H(p) \le \log n$: $0$ for a one-hot row, $\log n$ for the uniform row.
#
# Take $p = \mathrm{softmax}(s\,x)$, i.e. temperature $\tau = 1/s$. From $\log p_j = s x_j - \log Z$
# one gets $H = \log Z - s\,\mathbb E_p[x]$ and, differentiating,
#
# $$\frac{dH}{ds} = -\,s\,\mathrm{Var}_{p}(x) \;\le\; 0 .$$
#
# So the entropy falls **monotonically** as the scale grows (as the temperature falls), strictly
# unless all logits are equal; $H \to \log n$ as $s \to 0$ and $H \to \log m$ as $s\to\infty$, where
# $m$ is the number of tied maxima ($m = 1$ gives $0$).
#
# **Numerical stability.** $\mathrm{softmax}(x) = \mathrm{softmax}(x - c)$ for any constant $c$ (it
# cancels between numerator and denominator). Choosing $c = \max_j x_j$ *per row* makes every
# exponent $\le 0$ (no overflow) and one of them exactly $e^0 = 1$ (no $0/0$). Dividing by a small
# $\tau$ multiplies the logits, so this matters even for modest logits.
#
# ### 2.3 The softmax Jacobian (seed 002, Theorem 8) and what saturation does to it
#
# With $p = \mathrm{softmax}(z)$, $\partial p_i/\partial z_j = p_i(\delta_{ij} - p_j)$, i.e.
#
# $$J = \mathrm{diag}(p) - p\,p^\top .$$
#
# Every gradient that flows from the attention weights back to the scores is multiplied by $J$.
# Two facts follow from the formula:
#
# * **$J$ is bounded, whatever the scores.** Row $i$ has diagonal $p_i(1-p_i)$ and off-diagonal
#   absolute sum $p_i\sum_{j\ne i}p_j = p_i(1-p_i)$, so by Gershgorin every eigenvalue lies in
#   $[0,\,2\max_i p_i(1-p_i)] \subseteq [0, \tfrac12]$. Likewise, with $a = \sum p_i^2$,
#   $\|J\|_F^2 = a - 2\sum p_i^3 + a^2 \le a - a^2 \le \tfrac14$ (using $\sum p_i^3 \ge a^2$). So
#   $\|J\|_2 \le \|J\|_F \le \tfrac12$.
# * **$J \to 0$ when the softmax saturates.** If $p \to e_m$ (one-hot), then
#   $J \to \mathrm{diag}(e_m) - e_m e_m^\top = 0$: the gradient **vanishes**.
#
# Large unscaled scores therefore do not make gradients explode — they switch them off. Keep this
# in mind when you reach seed 002's Corollary 4 in section 5.

# %% [markdown]
# ## 3. Implement (graded)
#
# ### Exercise 1 (2 points) — entropy in nats
#
# Return $H(p) = -\sum_j p_j \log p_j$ in nats (natural logarithm) along `dim`, for a batch of
# distributions or a single one. <!-- clause: value -->
# Work along any dimension (`dim` may be negative). <!-- clause: any-dim --> Keep the dtype (float16
# and bfloat16 too: no silent upcast). <!-- clause: keeps-dtype --> Leave `p` unchanged. <!-- clause: unchanged-input -->
# Return exactly $0$ (never `nan`) for the terms with $p_j = 0$. <!-- clause: zero-terms -->
# Hint: `torch.where`, or `torch.xlogy`. Compute it from the formula:
# `torch.distributions.Categorical(...).entropy()` is what the tests compare against, so they do
# not accept it. <!-- clause: no-library -->

# %% nbgrader={"grade": false, "grade_id": "ex1_entropy", "locked": false, "schema_version": 3, "solution": true, "task": false}
def entropy(p: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Shannon entropy H(p) = -sum_j p_j log p_j in nats, along `dim`.

    p: a floating tensor (float16, bfloat16, float32 or float64) of probabilities (non-negative,
       summing to 1 along `dim`), possibly with zeros; dim: any dimension of p (negative allowed).
    Returns a tensor with the shape of p without `dim` and the dtype of p (never upcast); p is not
    modified. Terms with p_j = 0 contribute exactly 0 (0 log 0 = 0), so the result is never nan for
    a valid distribution.
    """
    ### BEGIN SOLUTION
    plogp = torch.where(p > 0, p * torch.log(torch.where(p > 0, p, torch.ones_like(p))), torch.zeros_like(p))
    return -plogp.sum(dim=dim)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex1_entropy", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from course_utils.grading import check_close, check_shape, check_true

p = torch.tensor([[0.5, 0.5, 0.0, 0.0],
                  [0.25, 0.25, 0.25, 0.25],
                  [1.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
H = entropy(p)
check_shape("entropy(p) for p of shape (3, 4)", H, (3,))
check_true(not torch.isnan(H).any().item(),
           "entropy returned nan: a probability of 0 must contribute 0 (0·log 0 = 0), not 0·(-inf).")
check_close("entropy of [1/2, 1/2, 0, 0], uniform over 4, and one-hot (in nats, natural log)",
            H, [math.log(2), math.log(4), 0.0], atol=1e-12)
check_close("entropy(p, dim=0) of the transposed batch", entropy(p.T, dim=0), H, atol=1e-12)
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import record, switched_off
record("module of entropy (it must be defined in this notebook)", entropy.__module__)  # clause: defined-here
_g = torch.Generator().manual_seed(606)
_logits = torch.randn(5, 7, 9, generator=_g, dtype=torch.float64) * 3
_logits[_logits < -2.0] = -math.inf                     # some exact zeros
_logits[..., 0] = 0.0                                   # keep every row valid
_P = torch.softmax(_logits, -1)                         # the input: a (5, 7, 9) batch of distributions with zeros
_Ph = {_dt: _P.to(_dt) for _dt in (torch.float16, torch.bfloat16)}
with switched_off("torch.distributions.Categorical.entropy", functions=[entropy],
                  hint="entropy must be computed from the formula, not with Categorical(...).entropy()."):
    _H = entropy(_P)
    _H1 = entropy(_P.movedim(-1, 1), dim=1)
    _Hf = entropy(_P.float())
    _Hh = {_dt: entropy(_v) for _dt, _v in _Ph.items()}
record("p after entropy(p) (p must not be modified in place)", _P)  # clause: unchanged-input
# clause: value, zero-terms, no-library
record("entropy of a (5, 7, 9) float64 batch with zeros", _H, atol=1e-10, rtol=1e-5)
record("entropy along dim=1 of a (5, 9, 7) tensor", _H1, atol=1e-10, rtol=1e-5)  # clause: any-dim
# clause: keeps-dtype
record("entropy of a float32 batch (a float32 result)", _Hf, atol=1e-5, rtol=1e-5)
for _dt, _Hd in _Hh.items():   # half precision: the dtype of p, never an upcast copy
    record(f"entropy of a {_dt} batch (a {_dt} result)", _Hd, atol=5e-2, rtol=2e-2)
# clause: value
record("entropy of a single distribution [0, 0.2, 0.8] (1-D input)",
       entropy(torch.tensor([0.0, 0.2, 0.8], dtype=torch.float64)), atol=1e-12, rtol=1e-5)
record("entropy of a uniform row of length 13", entropy(torch.full((13,), 1 / 13, dtype=torch.float64)),
       atol=1e-12, rtol=1e-5)
### BEGIN REFERENCE
from course_utils.grading import expect
_ref = torch.distributions.Categorical(probs=_P).entropy()
expect("entropy of a (5, 7, 9) float64 batch with zeros", _ref, atol=1e-10, rtol=1e-5)
expect("entropy along dim=1 of a (5, 9, 7) tensor", _ref, atol=1e-10, rtol=1e-5)
expect("entropy of a float32 batch (a float32 result)", _ref.float(), atol=1e-5, rtol=1e-5)
for _dt in _Hh:
    expect(f"entropy of a {_dt} batch (a {_dt} result)", _ref.to(_dt), atol=5e-2, rtol=2e-2)
expect("entropy of a single distribution [0, 0.2, 0.8] (1-D input)",
       torch.tensor(-(0.2 * math.log(0.2) + 0.8 * math.log(0.8)), dtype=torch.float64), atol=1e-12, rtol=1e-5)
expect("entropy of a uniform row of length 13", torch.tensor(math.log(13), dtype=torch.float64), atol=1e-12, rtol=1e-5)
### END REFERENCE
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 2 (2 points) — a numerically stable tempered softmax
#
# Compute $\mathrm{softmax}(x/\tau)$ along `dim` (any dimension) **with `torch.exp`**, subtracting the
# maximum of each slice (section 2.2), so that logits in the thousands give no `nan`. <!-- clause: value -->
# Do not call a library softmax (`torch.softmax`, `F.softmax`,
# `Tensor.softmax`, `log_softmax`, nor their `torch._softmax` / `torch.ops.aten` kernels): the tests
# check. <!-- clause: no-library --> Entries equal to `-inf` (masked keys) must get probability $0$. <!-- clause: masked-zero -->
# Keep the dtype of `x` (float16 and bfloat16 too). <!-- clause: keeps-dtype -->
# Leave `x` unchanged. <!-- clause: unchanged-input --> Raise `ValueError` when `tau` ≤ 0. <!-- clause: tau-positive -->

# %% nbgrader={"grade": false, "grade_id": "ex2_tempered_softmax", "locked": false, "schema_version": 3, "solution": true, "task": false}
def tempered_softmax(x: torch.Tensor, tau: float = 1.0, dim: int = -1) -> torch.Tensor:
    """softmax(x / tau) along `dim`, computed stably (max subtracted per slice).

    x: floating tensor of logits (float16, bfloat16, float32 or float64), of any magnitude; each
       slice along `dim` has at least one finite entry (-inf allowed, it gets probability 0).
    tau: temperature, a positive number; raise ValueError if tau <= 0. dim: any dimension of x.
    Returns a new tensor of the same shape and dtype as x (never upcast); every slice along `dim`
    sums to 1; x is not modified.
    """
    ### BEGIN SOLUTION
    if not tau > 0:
        raise ValueError(f"temperature must be positive, got {tau}")
    z = x / tau
    z = z - z.amax(dim=dim, keepdim=True)
    e = torch.exp(z)
    return e / e.sum(dim=dim, keepdim=True)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex2_tempered_softmax", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from course_utils.grading import check_close, check_shape, check_true, msg

x = torch.tensor([[1.0, 0.5, -0.5], [2.0, 1.0, -1.0]], dtype=torch.float64)
for tau in (0.5, 1.0, 3.0):
    out = tempered_softmax(x, tau)
    check_shape(msg("tempered_softmax(x, tau={tau})", tau=tau), out, (2, 3))
    check_close(msg("tempered_softmax(x, tau={tau}) vs torch.softmax(x / tau, dim=-1)", tau=tau), out,
                torch.softmax(x / tau, dim=-1), atol=1e-12)
big = tempered_softmax(torch.tensor([1000.0, 999.0, 0.0]), tau=1.0)
check_true(not torch.isnan(big).any().item(),
           "tempered_softmax([1000, 999, 0]) contains nan: exp(1000) overflows. Subtract the max first.")
check_close("tempered_softmax([1000, 999, 0])", big, [1 / (1 + math.exp(-1)), 1 / (1 + math.e), 0.0], atol=1e-6)
check_close("tempered_softmax(x, tau=0.5, dim=0) (columns sum to 1)", tempered_softmax(x, 0.5, dim=0),
            torch.softmax(x / 0.5, dim=0), atol=1e-12)
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import outcome, record, switched_off
record("module of tempered_softmax (it must be defined in this notebook)", tempered_softmax.__module__)  # clause: defined-here
# library softmax names in the code of tempered_softmax (a helper of your own, defined in this notebook, is fine)
# clause: no-library
record("library softmax / log_softmax named in the code of tempered_softmax (use torch.exp instead)",
       sorted(_n for _n in {"softmax", "log_softmax"} & set(tempered_softmax.__code__.co_names)
              if getattr(globals().get(_n), "__module__", None) != "__main__"))
_g = torch.Generator().manual_seed(6060)
_x = torch.randn(4, 6, 11, generator=_g, dtype=torch.float64) * 5
_x[0, 0, 3] = -math.inf
_x[1, :, 0] = 3000.0                                   # huge logits in some rows only
_x[2, 2, :] = torch.linspace(-2, 2, 11, dtype=torch.float64)
_cases = [(_x, 0.05, -1), (_x, 1.0, -1), (_x, 7.5, 1), (_x[:, :, 1:], 0.3, 0), (_x.float(), 2.0, 2),
          (_x.bfloat16(), 1.0, -1), (_x.half(), 2.0, 1)]
_tols = {torch.float32: 1e-6, torch.float16: 2e-3, torch.bfloat16: 2e-2}
with switched_off("torch.softmax", "torch.log_softmax", "torch.nn.functional.softmax", "torch.nn.functional.log_softmax",
                  "torch.Tensor.softmax", "torch.Tensor.log_softmax", "torch.special.softmax", "torch.special.log_softmax",
                  "torch._softmax", "torch._log_softmax", "torch.ops.aten.softmax", "torch.ops.aten._softmax",
                  "torch.ops.aten.log_softmax", "torch.ops.aten._log_softmax", "torch.ops.aten._safe_softmax",
                  functions=[tempered_softmax], hint="tempered_softmax must not call a library softmax: use torch.exp."):
    _outs = [tempered_softmax(a, t, dim=d) for a, t, d in _cases]
for (a, t, d), _o in zip(_cases, _outs):
    _what = f"a {tuple(a.shape)} {a.dtype} tensor x, tau={t}, dim={d}"
    record(f"x after tempered_softmax on {_what} (x must not be modified in place)", a)  # clause: unchanged-input
    # clause: value, keeps-dtype, no-library
    record(f"tempered_softmax on {_what}", _o, atol=_tols.get(a.dtype, 1e-12), rtol=1e-5)
record("tempered_softmax, tau=0.05: the probability of the masked (-inf) entry", _outs[0][0, 0, 3], atol=0.0)  # clause: masked-zero
# clause: tau-positive
for _bad in (0.0, -1.0):
    record(f"tempered_softmax(x, tau={_bad}) (tau must be > 0)", outcome(tempered_softmax, _x, _bad))
### BEGIN REFERENCE
from course_utils.grading import expect
for a, t, d in _cases:
    _what = f"a {tuple(a.shape)} {a.dtype} tensor x, tau={t}, dim={d}"
    expect(f"tempered_softmax on {_what}", torch.softmax(a / t, dim=d), atol=_tols.get(a.dtype, 1e-12), rtol=1e-5)
expect("tempered_softmax, tau=0.05: the probability of the masked (-inf) entry", torch.tensor(0.0, dtype=torch.float64),
       atol=0.0)
expect("library softmax / log_softmax named in the code of tempered_softmax (use torch.exp instead)", [])
for _bad in (0.0, -1.0):
    expect(f"tempered_softmax(x, tau={_bad}) (tau must be > 0)", "raises ValueError")
### END REFERENCE
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 3 (3 points) — the variance experiment, reproducibly
#
# Implement the experiment behind the table of Book §3.7.2. To make it reproducible *and* checkable,
# follow this protocol exactly:
#
# * for each `d_k` in `d_ks`, **in order**, draw the queries and then the keys from the generator:
#   `q = torch.randn(n_pairs, d_k, generator=generator)` then
#   `k = torch.randn(n_pairs, d_k, generator=generator)` (float32, entries $\mathcal N(0,1)$);
# * the raw score of pair $i$ is $q_i\cdot k_i$ (one score per row, *not* the full $n\times n$
#   matrix), and the scaled score is raw$/\sqrt{d_k}$;
# * row of the table: `[std(raw), std(scaled)]`, with `torch.std` (its default, unbiased, estimator). <!-- clause: protocol -->
#
# Return the table as a float64 tensor of shape `(len(d_ks), 2)`. <!-- clause: protocol --> Use only
# the generator you are given (not the global RNG, not a new generator), as it comes: it may already
# have been used. <!-- clause: given-generator --> With many pairs, the table shows the book's
# result: $\mathrm{std}(q\cdot k) \approx \sqrt{d_k}$ and the scaled scores' standard deviation
# close to $1$. <!-- clause: sqrt-dk -->

# %% nbgrader={"grade": false, "grade_id": "ex3_score_std_table", "locked": false, "schema_version": 3, "solution": true, "task": false}
def score_std_table(d_ks, n_pairs: int, generator: torch.Generator) -> torch.Tensor:
    """Standard deviation of raw and 1/sqrt(d_k)-scaled dot products of random N(0,1) vectors.

    d_ks: sequence of head dimensions. n_pairs: number of (query, key) pairs per d_k.
    generator: a torch.Generator, the only source of randomness (draw q, then k, for each d_k in order).
    Returns a float64 tensor of shape (len(d_ks), 2): column 0 = std(q.k), column 1 = std(q.k / sqrt(d_k)).
    """
    ### BEGIN SOLUTION
    rows = []
    for d_k in d_ks:
        q = torch.randn(n_pairs, d_k, generator=generator)
        k = torch.randn(n_pairs, d_k, generator=generator)
        raw = (q * k).sum(dim=-1)
        rows.append([raw.std().item(), (raw / math.sqrt(d_k)).std().item()])
    return torch.tensor(rows, dtype=torch.float64)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex3_score_std_table", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from course_utils.grading import check_close, check_equal, check_shape, check_true

d_ks = [4, 64, 256]
t1 = score_std_table(d_ks, 10_000, torch.Generator().manual_seed(123))
check_shape("score_std_table([4, 64, 256], 10000, g)", t1, (3, 2))
check_equal("dtype of the table", t1.dtype, torch.float64)
check_close("column 0, std(raw) ≈ sqrt(d_k) (5% tolerance)", t1[:, 0], [2.0, 8.0, 16.0], rtol=0.05, atol=0)
check_close("column 1, std(scaled) ≈ 1 (5% tolerance)", t1[:, 1], [1.0, 1.0, 1.0], rtol=0.05, atol=0)
check_close("std(raw) / std(scaled) = sqrt(d_k) exactly", t1[:, 0] / t1[:, 1], [2.0, 8.0, 16.0], rtol=1e-5)
torch.manual_seed(999)   # the global RNG must not matter
t2 = score_std_table(d_ks, 10_000, torch.Generator().manual_seed(123))
check_close("same generator seed -> same table (use the generator, not the global RNG)", t2, t1, rtol=1e-6)
t3 = score_std_table(d_ks, 10_000, torch.Generator().manual_seed(124))
check_true(not torch.equal(t1, t3), "a different generator seed gave the same table: draw from `generator`.")
# the protocol on a tiny case: q (4 x 3) then k (4 x 3) from the generator, one score per row, unbiased std (n - 1)
_gv = torch.Generator().manual_seed(5)
_qv = torch.randn(4, 3, generator=_gv)
_kv = torch.randn(4, 3, generator=_gv)
_raw_v = [float(a @ b) for a, b in zip(_qv, _kv)]
_mean_v = sum(_raw_v) / 4
_sd_v = math.sqrt(sum((r - _mean_v) ** 2 for r in _raw_v) / 3)
check_close("score_std_table([3], 4, seed 5): q drawn (4, 3) then k (4, 3), std with n - 1 (torch.std's default)",
            score_std_table([3], 4, torch.Generator().manual_seed(5)), [[_sd_v, _sd_v / math.sqrt(3)]], rtol=1e-5)
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import record
record("module of score_std_table (it must be defined in this notebook)", score_std_table.__module__)  # clause: defined-here
_protocol_cases = [((3, 17, 100), 257, 2024, 0), ([1, 512], 64, 7, 5), ((32,), 1000, 0, 0), ([64, 8, 8, 2], 33, 11, 3)]
for _dks, _n, _seed, _skip in _protocol_cases:
    _ga = torch.Generator().manual_seed(_seed)
    if _skip:   # a generator that has already been used
        torch.randn(_skip, generator=_ga)
    # clause: protocol, given-generator
    record(f"score_std_table({list(_dks)}, {_n}, generator seeded {_seed}, {_skip} draws already used): the protocol",
           score_std_table(_dks, _n, _ga), atol=1e-6, rtol=1e-4)
record("score_std_table([1024], 10000, seed 31337): [std(raw) ≈ 32, std(scaled) ≈ 1] (5% tolerance)",  # clause: sqrt-dk
       score_std_table([1024], 10_000, torch.Generator().manual_seed(31337)), atol=0.0, rtol=0.05)
### BEGIN REFERENCE
from course_utils.grading import expect
def _ref_table(d_ks, n, g):
    out = []
    for d in d_ks:
        q = torch.randn(n, d, generator=g)
        k = torch.randn(n, d, generator=g)
        r = torch.einsum("nd,nd->n", q.double(), k.double())
        out.append([r.std().item(), (r / math.sqrt(d)).std().item()])
    return torch.tensor(out, dtype=torch.float64)


for _dks, _n, _seed, _skip in _protocol_cases:
    _gb = torch.Generator().manual_seed(_seed)
    if _skip:
        torch.randn(_skip, generator=_gb)
    expect(f"score_std_table({list(_dks)}, {_n}, generator seeded {_seed}, {_skip} draws already used): the protocol",
           _ref_table(_dks, _n, _gb), atol=1e-6, rtol=1e-4)
expect("score_std_table([1024], 10000, seed 31337): [std(raw) ≈ 32, std(scaled) ≈ 1] (5% tolerance)",
       torch.tensor([[32.0, 1.0]], dtype=torch.float64), atol=0.0, rtol=0.05)
### END REFERENCE
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 4 (2 points) — the softmax Jacobian in closed form
#
# Return the $n\times n$ matrix $J_{ij} = \partial\,\mathrm{softmax}(z)_i / \partial z_j$ from the
# formula of section 2.3, for a 1-D score vector $z$ of any length. <!-- clause: value --> You may
# compute $p$ with `torch.softmax`; if you write the softmax yourself, make it stable (section 2.2):
# scores like $[1000, 999, 0]$ must not give `nan`, nor large float32 scores. <!-- clause: stable -->
# Return a tensor with the dtype of $z$ (float32 or float64). <!-- clause: keeps-dtype --> Do
# **not** use automatic differentiation (`torch.autograd`, `torch.func`) — that is what we verify
# against; your function must also work under `torch.no_grad()`. <!-- clause: no-autograd -->

# %% nbgrader={"grade": false, "grade_id": "ex4_softmax_jacobian", "locked": false, "schema_version": 3, "solution": true, "task": false}
def softmax_jacobian(z: torch.Tensor) -> torch.Tensor:
    """Jacobian of softmax at the 1-D score vector z (length n): J[i, j] = d softmax(z)_i / d z_j.

    z: float32 or float64 scores of any magnitude (e.g. [1000, 999, 0]: softmax computed stably).
    Returns an (n, n) tensor with the dtype of z, computed in closed form (no autograd).
    """
    ### BEGIN SOLUTION
    p = torch.softmax(z, dim=-1)
    return torch.diag(p) - torch.outer(p, p)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex4_softmax_jacobian", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from course_utils.grading import check_close, check_shape, check_true

z = torch.tensor([1.0, 0.5, -0.5], dtype=torch.float64)
J = softmax_jacobian(z)
check_shape("softmax_jacobian(z) for z of length 3", J, (3, 3))
check_close("J @ ones (each row of J sums to 0, since the outputs always sum to 1)", J @ torch.ones(3, dtype=torch.float64),
            torch.zeros(3, dtype=torch.float64), atol=1e-12)
J_auto = torch.autograd.functional.jacobian(lambda t: torch.softmax(t, -1), z)
check_close("softmax_jacobian(z) vs torch.autograd.functional.jacobian", J, J_auto, atol=1e-12)
z_big = torch.tensor([1000.0, 999.0, 0.0], dtype=torch.float64)
J_big = softmax_jacobian(z_big)
check_true(not torch.isnan(J_big).any().item(),
           "softmax_jacobian([1000, 999, 0]) contains nan: exp(1000) overflows. Compute p stably (subtract the max).")
check_close("softmax_jacobian([1000, 999, 0]) vs autograd", J_big,
            torch.autograd.functional.jacobian(lambda t: torch.softmax(t, -1), z_big), atol=1e-12)
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import record, switched_off
record("module of softmax_jacobian (it must be defined in this notebook)", softmax_jacobian.__module__)  # clause: defined-here
_g = torch.Generator().manual_seed(66)
_zs = [torch.randn(1, generator=_g, dtype=torch.float64), torch.randn(7, generator=_g, dtype=torch.float64) * 4,
       torch.randn(17, generator=_g, dtype=torch.float64) * 30, torch.tensor([0.0, 0.0, 0.0, 0.0], dtype=torch.float64),
       torch.randn(6, generator=_g, dtype=torch.float64) * 2 + 800.0,           # huge scores: exp overflows
       torch.randn(5, generator=_g, dtype=torch.float64) * 2 - 900.0]           # very negative: exp underflows to 0
_z32 = torch.randn(7, generator=_g) * 2 + 120.0                                   # float32: exp(120) = inf
# the student's function runs with autograd switched off (backward, grad, jacobians, vjp/jvp, forward AD)
_autograd = ["torch.Tensor.backward", "torch.autograd.backward", "torch.autograd.grad",
             "torch.autograd._engine_run_backward", "torch.autograd.graph._engine_run_backward",
             "torch.autograd.forward_ad.make_dual"]
_autograd += [f"torch.autograd.functional.{_n}" for _n in ("jacobian", "hessian", "vjp", "jvp", "vhp", "hvp")]
_autograd += [f"torch.func.{_n}" for _n in ("jacrev", "jacfwd", "vjp", "jvp", "grad", "grad_and_value", "hessian")]
with switched_off(*_autograd, functions=[softmax_jacobian],
                  hint="softmax_jacobian must use the closed form diag(p) - p p^T, not autograd."):
    _outs = [softmax_jacobian(_z) for _z in _zs]
    with torch.no_grad():
        _nograd = softmax_jacobian(_zs[1])
    _J32 = softmax_jacobian(_z32)
# clause: value, stable, no-autograd
for _i, (_z, _o) in enumerate(zip(_zs, _outs)):
    record(f"softmax_jacobian for z number {_i} (length {len(_z)}, float64)", _o, atol=1e-12, rtol=1e-5)
record("softmax_jacobian under torch.no_grad() (z of length 7)", _nograd, atol=1e-12, rtol=1e-5)  # clause: no-autograd
# clause: keeps-dtype
record("softmax_jacobian of a float32 vector of length 7 (a float32 result)", softmax_jacobian(_zs[1].float()),
       atol=1e-6, rtol=1e-5)
# clause: stable, keeps-dtype
record("softmax_jacobian of a float32 vector with scores near 120 (exp overflows float32; a float32 result)", _J32,
       atol=1e-6, rtol=1e-5)
### BEGIN REFERENCE
from course_utils.grading import expect
_refs = [torch.autograd.functional.jacobian(lambda t: torch.softmax(t, -1), _z) for _z in _zs]
for _i, (_z, _r) in enumerate(zip(_zs, _refs)):
    expect(f"softmax_jacobian for z number {_i} (length {len(_z)}, float64)", _r, atol=1e-12, rtol=1e-5)
expect("softmax_jacobian under torch.no_grad() (z of length 7)", _refs[1], atol=1e-12, rtol=1e-5)
expect("softmax_jacobian of a float32 vector of length 7 (a float32 result)", _refs[1].float(), atol=1e-6, rtol=1e-5)
expect("softmax_jacobian of a float32 vector with scores near 120 (exp overflows float32; a float32 result)",
       torch.autograd.functional.jacobian(lambda t: torch.softmax(t, -1), _z32.double()).float(), atol=1e-6, rtol=1e-5)
### END REFERENCE
### END HIDDEN TESTS

# %% [markdown]
# ## 4. Verify against the library, then use
#
# ### 4.1 Your functions vs PyTorch
#
# Before trusting the experiments below, compare each function with the library on inputs it has
# not seen: `torch.distributions.Categorical(...).entropy()`, `torch.softmax`, and
# `torch.autograd.functional.jacobian`.

# %%
g = torch.Generator().manual_seed(42)
logits = torch.randn(1000, 10, generator=g, dtype=torch.float64) * 4
logits[logits < -5] = -math.inf                      # masked keys -> exact zeros
P = torch.softmax(logits, -1)
print("entropy          max |ours - Categorical.entropy| :",
      f"{(entropy(P) - torch.distributions.Categorical(probs=P).entropy()).abs().max().item():.1e}")
print("tempered_softmax max |ours - torch.softmax(x/tau)|:",
      f"{max((tempered_softmax(logits, t) - torch.softmax(logits / t, -1)).abs().max().item() for t in (0.1, 1, 10)):.1e}")
z = torch.randn(12, generator=g, dtype=torch.float64) * 3
J_auto = torch.autograd.functional.jacobian(lambda t: torch.softmax(t, -1), z)
print("softmax_jacobian max |ours - autograd jacobian|   :", f"{(softmax_jacobian(z) - J_auto).abs().max().item():.1e}")

# %% [markdown]
# ### 4.2 The std table of Book §3.7.2
#
# Your experiment with 30 000 pairs per dimension, next to the theory ($\sqrt{d_k}$ and $1$):

# %% nbgrader={"grade": false, "grade_id": "std_table", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
D_KS = [16, 64, 256, 1024]
table = score_std_table(D_KS, 30_000, torch.Generator().manual_seed(0))
theory = torch.tensor([[math.sqrt(d), 1.0] for d in D_KS], dtype=torch.float64)
print(f"{'d_k':>5} {'std(raw)':>9} {'sqrt(d_k)':>9} {'std(scaled)':>11}")
for d, (raw_sd, scaled_sd) in zip(D_KS, table.tolist()):
    print(f"{d:>5} {raw_sd:>9.2f} {math.sqrt(d):>9.2f} {scaled_sd:>11.2f}")
check_close("std table vs theory (3% tolerance)", table, theory, rtol=0.03, atol=0)
print("agrees with sqrt(d_k) and 1 within 3%: True")

# %% [markdown]
# The book prints one random draw:
#
# ```
# dk= 16 std(raw)=3.661 std(scaled)=0.915
# dk= 64 std(raw)=9.061 std(scaled)=1.133
# dk= 256 std(raw)=15.276 std(scaled)=0.955
# dk=1024 std(raw)=29.405 std(scaled)=0.919
# ```
#
# Those numbers cannot be reproduced (the book gives neither the seed nor the sample size), but
# they can be checked: each row must satisfy std(raw) $/\sqrt{d_k}$ = std(scaled), and the scaled
# values should be within sampling noise of 1. The deviations (up to 13%) are far larger than in our
# table, which points to a small sample. For instance, if the logits were an $8\times 8$ matrix
# $QK^\top/\sqrt{d_k}$ of 8 random tokens, the middle 95% of std(scaled) over 4000 draws would be:

# %% nbgrader={"grade": false, "grade_id": "book_std_table", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
book_raw = torch.tensor([3.661, 9.061, 15.276, 29.405], dtype=torch.float64)      # book value
book_scaled = torch.tensor([0.915, 1.133, 0.955, 0.919], dtype=torch.float64)    # book value
sqrt_dk = torch.tensor([math.sqrt(d) for d in D_KS], dtype=torch.float64)
print("book std(raw)/sqrt(d_k):", (book_raw / sqrt_dk).numpy().round(3), " book std(scaled):", book_scaled.numpy())
check_close("book raw/sqrt(d_k) vs book scaled (rounding of the 3rd decimal)", book_raw / sqrt_dk, book_scaled, atol=6e-4)

g = torch.Generator().manual_seed(8)
Qs = torch.randn(4000, 8, 64, generator=g)
Ks = torch.randn(4000, 8, 64, generator=g)
small_draw_sd = (Qs @ Ks.transpose(1, 2) / 8).flatten(1).std(dim=1)
lo, hi = torch.quantile(small_draw_sd, torch.tensor([0.025, 0.975])).tolist()
print(f"8x8 logits: 95% of std(scaled) in [{lo:.2f}, {hi:.2f}]")
inside = bool(((book_scaled >= lo) & (book_scaled <= hi)).all())
print("all four book values inside that range:", inside)

# %% [markdown]
# So the book's table is internally consistent and compatible with $\mathrm{std}(q\cdot k)=\sqrt{d_k}$;
# it is just noisy. (Book §3.7.2 writes the scaled variance as "$\approx\mathcal O(1)$"; under the
# assumptions of section 2.1 it is exactly 1.)
# The figure shows both the trend and the book's points:

# %%
dense = [2 ** i for i in range(2, 11)]
dense_table = score_std_table(dense, 10_000, torch.Generator().manual_seed(1))
ax = line_plot(dense, {"std(raw), measured": dense_table[:, 0], "std(scaled), measured": dense_table[:, 1]},
               xlabel="$d_k$", ylabel="standard deviation of the score",
               title="Raw scores spread like $\\sqrt{d_k}$; scaled ones stay at 1", logx=True, logy=True)
ax.plot(dense, [math.sqrt(d) for d in dense], "k:", lw=1, label="theory: $\\sqrt{d_k}$ and 1")
ax.plot(dense, [1.0] * len(dense), "k:", lw=1)
ax.scatter(D_KS, book_raw, marker="x", color="k", zorder=3, label="book, raw")
ax.scatter(D_KS, book_scaled, marker="+", s=80, color="k", zorder=3, label="book, scaled")
ax.legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# ### 4.3 Entropy of softmax$(s\cdot x)$: the book's values
#
# Book §3.7.3 prints the entropy of the `teddy` row for $s \in \{0.5, 1, 2, 4\}$. Computed with your
# two functions (a scale $s$ is a temperature $\tau = 1/s$), and checked against the library:

# %% nbgrader={"grade": false, "grade_id": "book_entropies", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
book_H = [1.0553, 0.9528, 0.7139, 0.3801]      # book value (nats)
ours = torch.stack([entropy(tempered_softmax(x_teddy, tau=1 / s)) for s in SCALES])
lib = torch.stack([torch.distributions.Categorical(logits=s * x_teddy).entropy() for s in SCALES])
for s, h, b in zip(SCALES, ours.tolist(), book_H):
    print(f"[scale={s}] entropy={h:.4f}   book {b:.4f}")
check_close("entropies vs the book (printed to 4 decimals)", ours, book_H, atol=5e-5)
check_close("entropies vs Categorical(logits=s*x).entropy()", ours, lib, atol=1e-12)
print(f"upper bound log 3 = {math.log(3):.4f}; every value below it and decreasing in s:",
      bool((ours < math.log(3)).all() and (ours.diff() < 0).all()))

# %% [markdown]
# The book's four values are right. They are also the whole story of section 2.2 in one row: the
# entropy starts near the uniform bound $\log 3 \approx 1.0986$ and falls as $s$ grows. The value
# at $s=2$, $0.7139$, is the entropy `teddy` would have **without** the $1/\sqrt{d}$ (raw scores
# $[2, 1, -1]$); the scaled attention ($s=1$) is more spread out, $0.9528$.
#
# ### 4.4 The temperature family (Book §3.7.4)
#
# Sweeping $\tau$ from $0.1$ to $10$ traces the whole family $\mathrm{softmax}(x/\tau)$; the book's
# four points sit on it at $\tau = 1/s$.

# %%
taus = torch.logspace(-1, 1, 201, dtype=torch.float64)
probs = torch.stack([tempered_softmax(x_teddy, tau=t.item()) for t in taus])
H_tau = entropy(probs)
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.6))
line_plot(taus, {"H(softmax(x/τ))": H_tau}, xlabel="temperature τ", ylabel="entropy (nats)",
          title="Entropy of the 'teddy' row vs temperature", logx=True, ax=ax1)
ax1.axhline(math.log(3), ls="--", color="gray")
ax1.axhline(0.0, ls="--", color="gray")
ax1.text(0.11, math.log(3) - 0.08, "upper bound log 3 (uniform)", fontsize=8)
ax1.text(0.11, 0.03, "lower bound 0 (one-hot)", fontsize=8)
ax1.scatter([1 / s for s in SCALES], book_H, color="k", marker="x", zorder=3, label="book (τ = 1/s)")
ax1.set_ylim(-0.05, 1.2)
ax1.legend(loc="center right", fontsize=8)
line_plot(taus, {f"p({t})": probs[:, j] for j, t in enumerate(tokens)}, xlabel="temperature τ",
          ylabel="attention weight", title="The weights behind it", logx=True, ax=ax2)
ax2.axhline(1 / 3, ls=":", color="gray")
plt.tight_layout()
plt.show()


# %% [markdown]
# At $\tau = 0.1$ `teddy` takes almost all the weight (entropy near 0: the argmax, i.e. the hard
# lookup of seed 002, Lemma 2); at $\tau = 10$ the three weights approach $1/3$ and the entropy
# approaches $\log 3$. Nothing about $Q$, $K$, $V$ changed — only the scale of the logits.
#
# ### 4.5 Saturation and the size of the softmax Jacobian as $d_k$ grows
#
# Now the gradient side. For each $d_k$ we draw 1000 queries, each against 16 random keys, form
# the scores with and without $1/\sqrt{d_k}$, and measure the Frobenius norm of
# $J = \mathrm{diag}(p) - pp^\top$ (the factor every gradient through the softmax is multiplied by)
# and the fraction of saturated rows ($\max_j p_j > 0.99$). For speed, $J$ is formed in batch with
# the same formula as your `softmax_jacobian`; the first row is checked against it.

# %%
def saturation_stats(d_k, n_queries=1000, n_keys=16, seed=0):
    """Mean and median ||J||_F, the fraction of rows with max p > 0.99, and the mean ||J||_F over the
    other (unsaturated) rows, for raw and scaled scores."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(n_queries, 1, d_k, generator=g)
    K = torch.randn(n_queries, n_keys, d_k, generator=g)
    raw = (q * K).sum(-1).double()                          # (n_queries, n_keys)
    stats = {}
    for name, scores in (("raw", raw), ("scaled", raw / math.sqrt(d_k))):
        p = torch.softmax(scores, -1)
        J = torch.diag_embed(p) - p[:, :, None] * p[:, None, :]
        if name == "raw":
            check_close("batched J vs softmax_jacobian (first row)", J[0], softmax_jacobian(scores[0]), atol=1e-12)
        fro = torch.linalg.matrix_norm(J)                   # Frobenius
        saturated = p.max(-1).values > 0.99
        stats[name] = {"mean": fro.mean().item(), "median": fro.median().item(),
                       "saturated": saturated.double().mean().item(),
                       "mean_unsaturated": fro[~saturated].mean().item(),
                       "max_spectral": torch.linalg.matrix_norm(J, ord=2).max().item()}
    return stats


SWEEP = [2 ** i for i in range(2, 11)]      # 4 ... 1024
sat = {d: saturation_stats(d) for d in SWEEP}

# %% nbgrader={"grade": false, "grade_id": "saturation_table", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
print(f"{'d_k':>5} | {'mean ||J||_F':>12} {'median':>8} {'saturated':>9} | {'mean ||J||_F':>12} {'median':>8} {'saturated':>9}")
print(f"{'':>5} | {'------ raw scores ------':^31} | {'---- scaled by 1/sqrt(d_k) ----':^31}")
for d in D_KS:
    r, s = sat[d]["raw"], sat[d]["scaled"]
    print(f"{d:>5} | {r['mean']:>12.3f} {r['median']:>8.1e} {r['saturated']:>9.3f} |"
          f" {s['mean']:>12.3f} {s['median']:>8.1e} {s['saturated']:>9.3f}")
r = sat[1024]["raw"]
print(f"raw scores, d_k = 1024: mean ||J||_F over the {1 - r['saturated']:.3f} of rows that are not saturated: "
      f"{r['mean_unsaturated']:.3f}")
largest = max(v[k]["max_spectral"] for v in sat.values() for k in ("raw", "scaled"))
print("largest spectral norm of J over all 18 000 rows <= 1/2:", largest <= 0.5 + 1e-12)

# %%
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.6))
for name, color in (("raw", "C3"), ("scaled", "C0")):
    label = "raw $q\\cdot k$" if name == "raw" else "scaled $q\\cdot k/\\sqrt{d_k}$"
    ax1.plot(SWEEP, [sat[d][name]["mean"] for d in SWEEP], "-", color=color, marker="o", label=f"mean, {label}")
    ax1.plot(SWEEP, [sat[d][name]["median"] for d in SWEEP], ":", color=color, marker="s", label=f"median, {label}")
    ax2.plot(SWEEP, [sat[d][name]["saturated"] for d in SWEEP], "-", color=color, marker="o", label=label)
ax1.axhline(0.5, color="gray", ls="--")
ax1.text(4, 0.62, "bound $\\|J\\|_F \\leq 1/2$", fontsize=8)
ax1.set_ylim(5e-6, 1.5)
ax1.set(xscale="log", yscale="log", xlabel="$d_k$", ylabel="$\\|J\\|_F$ (16 keys)",
        title="Size of the softmax Jacobian")
ax2.set(xscale="log", xlabel="$d_k$", ylabel="fraction of rows with max p > 0.99", title="Saturated rows")
for ax in (ax1, ax2):
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# With the $1/\sqrt{d_k}$ the picture does not depend on $d_k$ at all (flat blue lines, no saturated
# rows). Without it, the typical (median) Jacobian collapses by orders of magnitude and most rows
# saturate. The mean decays much more slowly because it is carried by the rows that stay
# unsaturated: at $d_k = 1024$ the saturated fraction is 0.773, so about 23% of the rows still have
# a runner-up score close to the top one, and their $\|J\|_F$ (0.212 on average, printed above) is
# of the same order as with scaling; the saturated rows contribute almost nothing. Nowhere does
# any norm exceed $1/2$.

# %% [markdown]
# ## 5. Checking seed 002's statements
#
# Seed 002 states the scaling argument as theorems. Each is checked numerically below; the verdicts
# are collected in the table at the end.
#
# **Theorem 6** says $\mathrm{Var}(q^\top k) = d_k$ "for query and key vectors randomly initialised
# with zero mean and unit variance", assuming Gaussian components in the proof. Section 2.1 says the
# result needs independence and zero means, but not Gaussianity. Four cases, $d_k = 64$, 50 000 pairs:

# %% nbgrader={"grade": false, "grade_id": "theorem6_cases", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
d_k, n = 64, 50_000
g = torch.Generator().manual_seed(2)
gauss = lambda: torch.randn(n, d_k, generator=g, dtype=torch.float64)
sign = lambda: torch.randint(0, 2, (n, d_k), generator=g).double() * 2 - 1
cases = {                                    # name: (q, k, theoretical mean, theoretical variance)
    "N(0,1), independent (the theorem)": (gauss(), gauss(), 0, d_k),
    "random signs ±1 (not Gaussian)": (sign(), sign(), 0, d_k),
    "N(1,1): unit variance, mean 1": (gauss() + 1, gauss() + 1, d_k, 3 * d_k),
}
q_same = gauss()
cases["q = k (a token's score with itself)"] = (q_same, q_same, d_k, 2 * d_k)
lines = [f"{'case':<38} {'mean':>7} {'theory':>7} {'var':>7} {'theory':>7}"]
for name, (qq, kk, m_th, v_th) in cases.items():
    s = (qq * kk).sum(-1)
    check_close(f"variance, {name}", s.var(), float(v_th), rtol=0.05, atol=0)
    check_close(f"mean, {name}", s.mean(), float(m_th), atol=0.3)
    mean_1 = round(s.mean().item(), 1) + 0.0             # + 0.0 turns -0.0 into 0.0
    lines.append(f"{name:<38} {mean_1:>7.1f} {m_th:>7} {s.var().item():>7.1f} {v_th:>7}")
print("\n".join(lines))

# %% [markdown]
# The theorem holds as stated, and for non-Gaussian components too. But with non-zero means the
# variance is $3d_k$, not $d_k$ (the proof's step $\mathrm{Var}(q_lk_l)=\mathrm{Var}(q_l)\mathrm{Var}(k_l)$
# is false there), and a vector scored against *itself* ($q = k$, as in the chapter-05 example)
# is not an independent pair: $\|q\|^2$ has mean $d_k$ and variance $2d_k$. Dividing by $\sqrt{d_k}$
# then gives variance 3 or 2, and a diagonal that grows like $\sqrt{d_k}$ — "variance 1 independent
# of the dimension" (Lemma 6) is a statement about independent, centred vectors at initialisation,
# not about trained attention.
#
# **Theorem 8** ($\partial\,\mathrm{softmax}_i/\partial z_j = p_i(\delta_{ij}-p_j)$) is exactly what
# your `softmax_jacobian` implements, and it matched `torch.autograd` to $10^{-12}$ in section 4.1.
#
# **Corollary 4** claims that for unscaled scores "the magnitude of the gradient is proportional to
# $\exp(\|s\|)$", so that scaling avoids an *explosion* of gradients. Section 4.5 measured the
# opposite: every Jacobian has norm at most $1/2$, and without scaling the median $\|J\|_F$ at
# $d_k = 1024$ is about $10^{-5}$ — the gradient through the softmax **vanishes**. (The factor
# $\exp(s_i)$ in the numerator is cancelled by the same factor in the denominator $\sum_j \exp(s_j)$;
# what matters is the *gaps* between scores, and large gaps push $p$ to a one-hot vector where
# $J = 0$.) Book §3.7.1 and §2.6.4 describe it correctly ("gradientes muito pequenos"), as does the
# textbook the seed quotes ("perda efetiva de gradientes").
#
# | seed 002 | statement | verdict |
# |---|---|---|
# | Theorem 6 | $\mathrm{Var}(q^\top k) = d_k$ for zero-mean, unit-variance components | true if the $2d_k$ components are independent and centred; Gaussianity not needed; proof step $\mathrm{Var}(XY)=\mathrm{Var}X\,\mathrm{Var}Y$ needs zero means |
# | Corollary 3 | $1/\sqrt{d_k}$ is *necessary* to keep the scores in a good range | it is sufficient at initialisation under Theorem 6's assumptions; "necessary" is too strong (any scale $c/\sqrt{d_k}$ or a learned temperature would also do; Book §3.7.2 says "necessária" too) |
# | Lemma 6 | scaled variance is 1 for every $d_k$ | same assumptions as Theorem 6; fails for $q = k$ (2) or non-centred vectors (3) |
# | Theorem 8 | $\partial p_i/\partial z_j = p_i(\delta_{ij}-p_j)$ | true (checked against autograd) |
# | Corollary 4 | without scaling, gradients grow like $\exp(\|s\|)$ and explode | **false**: $\|J\| \le 1/2$ always; without scaling the softmax saturates and gradients **vanish** |

# %% [markdown]
# ## What this chapter leaves out
#
# This chapter covers Book §3.7.1–§3.7.4 and §2.6.4. What it leaves out or simplifies, on purpose:
#
# * **§3.7.1's "usual initialisation assumptions".** The variance experiment uses independent
#   standard-normal queries and keys; in a trained model they are neither independent nor of unit
#   variance, so the score spread of real heads is not measured here (chapter 02 shows the entropy of a
#   real BERT's heads instead).
# * **Training with and without the scale.** The chapter measures the size of the softmax Jacobian,
#   the factor every gradient passes through, not a training run without $1/\sqrt{d_k}$: that would
#   need training the same model twice for many steps (chapter 10 trains with the standard scale only).
# * **Sampling temperature** (§4.9), the same $\mathrm{softmax}(z/\tau)$ applied to next-token logits
#   instead of attention scores: chapter 08.
# * **Scaling schemes of recent models** that the book does not mention (normalising queries and keys,
#   capping the logits, changing the scale for long contexts) are left out.

# %% [markdown] nbgrader={"grade": false, "grade_id": "written_scaling_question", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## 6. Reflect (written answer, 3 points)
#
# A classmate summarises seed 002 as: *"Without the $1/\sqrt{d_k}$, attention gradients explode
# exponentially in $d_k$; the scaling is there to stop the explosion."*
#
# Answer in 5–8 sentences, **citing numbers printed in this notebook**:
#
# 1. What happens to the gradient that flows through the softmax when scores are not scaled and
#    $d_k$ grows? Quote the median $\|J\|_F$ and the saturated fraction at $d_k = 1024$, with and
#    without scaling.
# 2. Why can no choice of scores make $\|J\|$ larger than $1/2$?
# 3. In the `teddy` example, which row of the book's entropy table corresponds to attention without
#    the $1/\sqrt{d}$, and what does the comparison with the $s = 1$ row say about what the scaling
#    does to the entropy of attention?

# %% [markdown] nbgrader={"grade": true, "grade_id": "written_scaling", "locked": false, "points": 3, "schema_version": 3, "solution": true, "task": false}
# **Model answer (for the instructor).** The classmate has the direction wrong. In section 4.5,
# with raw scores at $d_k = 1024$ the median $\|J\|_F$ is about $1.4\times10^{-5}$ and about 77% of
# the rows are saturated (max weight > 0.99), while with scaling the median stays at about $0.30$
# with no saturated rows, the same as at $d_k = 16$. So without scaling the softmax saturates and
# the gradient through it *vanishes* (seed 002's Corollary 4 is false; Book §3.7.1 is right). No
# choice of scores can do better than $1/2$ because $J = \mathrm{diag}(p) - pp^\top$ depends on the
# scores only through the probabilities $p$, whose entries are in $[0,1]$: each row has diagonal
# $p_i(1-p_i) \le 1/4$ and off-diagonal mass $p_i(1-p_i)$, so Gershgorin bounds the eigenvalues by
# $1/2$ (and $\|J\|_F^2 \le a - a^2 \le 1/4$); the largest spectral norm observed over 18 000 rows is
# indeed $\le 1/2$. In the `teddy` example $d = 4$, so $s = 2$ cancels the $1/\sqrt{4}$: its entropy
# $0.7139$ nats is that of unscaled attention, against $0.9528$ for the scaled row ($s=1$) and the
# maximum $\log 3 = 1.0986$. Scaling lowers the effective inverse temperature and so keeps attention
# more spread out (higher entropy), away from the one-hot regime where $J \to 0$.
