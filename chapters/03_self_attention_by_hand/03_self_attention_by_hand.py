# %% [markdown]
# # 03 · Self-attention by hand
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/llm-course/llm-course/blob/main/notebooks/03_self_attention_by_hand/03_self_attention_by_hand.ipynb)
#
# **Goal.** Chapter 02 looked at the attention matrices of a trained BERT. In this chapter we take the
# machine apart and rebuild it from basic tensor operations, checking every number twice: once against a
# printed value from the book or a companion note, and once against the PyTorch module that does the same job.
#
# **Reading.** Book §2.6 (formal definition of self-attention), §2.7 (residual connections, multi-head
# attention), §2.8 (the "teddy reads" example computed by hand), §2.9 (feed-forward network), §2.10
# (LayerNorm, post-norm and pre-norm). Three short companion notes come with the course:
# **note 001** (output of self-attention and causal masking), **note 002** (attention theory: soft lookup,
# the norm bound, complexity) and **note 003** (a masked two-head example on "Life is awesome").
#
# **You will implement (graded, 11 points + 3 for the written question):**
#
# | # | function | points |
# |---|---|---|
# | 1 | `stable_softmax`: softmax that never overflows | 2 |
# | 2 | `scaled_dot_product_attention` with an optional boolean mask | 3 |
# | 3 | `causal_mask` (also for a key/value cache longer than the queries) | 2 |
# | 4 | `split_heads` / `merge_heads` for multi-head attention | 2 |
# | 5 | `layer_norm` | 2 |
# | Q | written question (manually graded, cite your outputs) | 3 |
#
# Define each graded function in its answer cell in this notebook (helpers of your own are fine): the hidden
# tests check where each one is defined. <!-- clause-all: defined-here -->
#
# **Conventions used throughout.** Tokens are rows: $X \in \mathbb{R}^{n\times d}$ and $Q = XW_Q$ (the book's
# row-vector convention). A boolean attention mask has `True` where a query **may attend** to a key, the same
# convention as `torch.nn.functional.scaled_dot_product_attention` (we will meet a PyTorch API that uses the
# opposite one). Hand examples use `float64` so that comparisons are exact to many decimals.

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
import math
import time

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils import CI_MODE
from course_utils.grading import to_numpy
from course_utils.plotting import heatmap

f64 = torch.float64


def fmt(t, decimals=4):
    """A tensor as text rounded to `decimals` (deterministic: fixed width, no -0.0)."""
    a = np.round(to_numpy(t).astype(float), decimals) + 0.0
    return np.array2string(a, precision=decimals, floatmode="fixed", suppress_small=True)


def show(name, t, decimals=4):
    """Print a named tensor rounded to `decimals`."""
    body = fmt(t, decimals)
    print(f"{name} =\n{body}" if np.ndim(to_numpy(t)) > 1 else f"{name} = {body}")


def compare(name, ours, book, atol):
    """Compare a computed value with a printed ('book value') one; print and return True if they agree."""
    ours = to_numpy(ours).astype(float)
    book = np.asarray(book, dtype=float)
    same_inf = bool(np.array_equal(np.isinf(ours), np.isinf(book)))
    fin = np.isfinite(book)
    diff = float(np.max(np.abs(ours[fin] - book[fin]))) if fin.any() else 0.0
    ok = same_inf and diff <= atol
    print(f"{name:<34} max|ours - printed| = {diff:.4f}  ->  {'matches' if ok else 'DIFFERS'} (tolerance {atol:g})")
    return ok


# %% [markdown]
# ## Part A · Observe: "teddy reads" with $d = 2$ (Book §2.8)
#
# The book builds the smallest possible example: a vocabulary of four tokens, two-dimensional embeddings
# $E$, the input "teddy reads", and a single head with $W_Q = W_K = W_V = I$ so that $Q = K = V = X$.
# Every step below is the book's formula written as one line of PyTorch.

# %% nbgrader={"grade": false, "grade_id": "teddy_steps", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
vocab = ["teddy", "bear", "reads", "sleeps"]
E = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [-1.0, 1.0]], dtype=f64)   # Book §2.8.3
tokens = ["teddy", "reads"]
ids = torch.tensor([vocab.index(t) for t in tokens])      # (0, 2), Book §2.8.4
X = E[ids]                                                 # one row per token: n x d = 2 x 2
W_Q = W_K = W_V = torch.eye(2, dtype=f64)                  # Book §2.8.5
Q, K, V = X @ W_Q, X @ W_K, X @ W_V
d_k = Q.shape[-1]

scores = Q @ K.T                                           # Book §2.8.6
scaled = scores / math.sqrt(d_k)                           # Book §2.8.7
exps = torch.exp(scaled)                                   # Book §2.8.8, numerators of the softmax
A = exps / exps.sum(dim=-1, keepdim=True)
Z = A @ V                                                  # Book §2.8.9

print("ids =", ids.tolist())
show("QK^T", scores)
show("S = QK^T / sqrt(d_k)", scaled)
show("exp(S)", exps)
show("A = softmax(S)", A)
show("Z = A V", Z)

# %% [markdown]
# Now the same numbers against the values printed in the book (rounded there to 3 or 2 decimals, so the
# tolerance is half a unit of the last printed digit).

# %% nbgrader={"grade": false, "grade_id": "teddy_book", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
book_scores = [[1, 1], [1, 2]]                              # book value, §2.8.6
book_scaled = [[0.707, 0.707], [0.707, 1.414]]              # book value, §2.8.7
book_exps = [2.028, 2.028, 4.113]                           # book value, §2.8.8: e^0.707, e^0.707, e^1.414
book_row1_sum = 4.056                                       # book value, §2.8.8: 2.028 + 2.028
book_row2_sum = 6.141                                       # book value, §2.8.8
book_A = [[0.5, 0.5], [0.33, 0.67]]                         # book value, §2.8.8
book_Z = [[1.0, 0.5], [1.0, 0.67]]                          # book value, §2.8.9

checks = [
    compare("QK^T", scores, book_scores, 0),
    compare("S = QK^T / sqrt(2)", scaled, book_scaled, 5e-4),
    compare("exp(S) (row 1 twice, then S_22)", torch.stack([exps[0, 0], exps[0, 1], exps[1, 1]]), book_exps, 5e-4),
    compare("sum of exp over row 1", exps[0].sum(), book_row1_sum, 5e-4),
    compare("sum of exp over row 2", exps[1].sum(), book_row2_sum, 5e-4),
    compare("A", A, book_A, 5e-3),
    compare("Z", Z, book_Z, 5e-3),
]
assert all(checks)
print("row sums of A:", A.sum(dim=-1).tolist())

# %% [markdown]
# Every number in §2.8 is right. Two things are worth noticing before we move on:
#
# * $QK^\top$ is **symmetric** here (because $W_Q = W_K$), yet $A$ is **not**: "teddy" gives 0.5 to "reads",
#   but "reads" gives only 0.33 to "teddy". The softmax normalises each *row* separately, so a row with a
#   larger competitor (reads·reads = 2) spreads its mass differently.
# * Each row of $Z$ is a weighted average of the rows of $V$: $z_2 = 0.33\,v_{\text{teddy}} + 0.67\,v_{\text{reads}}$.

# %% nbgrader={"grade": false, "grade_id": "teddy_plot", "locked": true, "schema_version": 3, "solution": false, "task": false}
fig, axes = plt.subplots(1, 2, figsize=(8, 3))
heatmap(scaled, tokens, tokens, title="scores S = QKᵀ/√2 (symmetric)", ax=axes[0])
heatmap(A, tokens, tokens, title="weights A = softmax(S) (not symmetric)", ax=axes[1], vmin=0, vmax=1)
for ax in axes:
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Part B · Derive and implement: softmax and scaled dot-product attention (Book §2.6)
#
# ### Why the textbook softmax breaks
#
# $\mathrm{softmax}(x)_i = e^{x_i} / \sum_j e^{x_j}$ is fine on paper. In floating point, $e^{x}$ overflows
# to `inf` for $x \gtrsim 89$ in `float32` (710 in `float64`), and `inf / inf` is `nan`. Scores of that size
# do happen (large $d_k$, no scaling, or a temperature close to 0).

# %% nbgrader={"grade": false, "grade_id": "softmax_overflow", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
big = torch.tensor([1000.0, 1001.0, 1002.0])
textbook = torch.exp(big) / torch.exp(big).sum()
print("exp(x)             :", torch.exp(big).tolist())
print("textbook softmax(x):", textbook.tolist())
small = torch.tensor([0.0, 1.0, 2.0], dtype=f64)
print("softmax(x - 1000)  :", np.round((torch.exp(small) / torch.exp(small).sum()).numpy(), 4).tolist())


# %% [markdown]
# The fix is a one-line identity: for any constant $c$,
# $$\frac{e^{x_i - c}}{\sum_j e^{x_j - c}} = \frac{e^{-c}\,e^{x_i}}{e^{-c}\sum_j e^{x_j}} = \mathrm{softmax}(x)_i .$$
# Choosing $c = \max_j x_j$ (per row!) makes the largest exponent $e^0 = 1$: nothing overflows, and the
# denominator is at least 1, so it can never be $0$. Masked entries equal to $-\infty$ give $e^{-\infty} = 0$,
# as long as the row has at least one finite entry.
#
# ### Exercise 1 (2 points): `stable_softmax`
#
# Write the softmax with the max-subtraction trick, along any dimension `dim` (the last one by default): the
# result is the softmax of `x` along `dim`, up to rounding. <!-- clause: value, any-dim --> It must not overflow,
# even for scores of the order of `1e4`. <!-- clause: no-overflow --> Entries equal to `-inf` get weight 0, as
# long as every slice along `dim` has at least one finite entry. <!-- clause: neg-inf -->
#
# Use only basic tensor operations (`torch.exp`, `.amax`/`.max`, `.sum`, arithmetic); `torch.softmax` and its
# relatives are off limits here (`log_softmax`, `torch.logsumexp`, and their `torch.ops.aten` kernels too: a
# hidden test switches them off). <!-- clause: no-library-softmax --> Keep the dtype of `x`, `float16` and
# `bfloat16` included (do not hand back `float32`). <!-- clause: keeps-dtype --> Leave `x` unchanged:
# `x -= m` would shift the caller's tensor. <!-- clause: unchanged-input -->

# %% nbgrader={"grade": false, "grade_id": "ex1_softmax", "locked": false, "schema_version": 3, "solution": true, "task": false}
def stable_softmax(x, dim=-1):
    """Numerically stable softmax of tensor `x` along dimension `dim`.

    - Returns a tensor of the same shape and dtype as `x` (float16, bfloat16, float32 or float64); slices along
      `dim` are non-negative and sum to 1. `x` is not modified.
    - Must not overflow for huge entries (e.g. 1e4) and must handle -inf entries (they get weight exactly 0),
      provided every slice along `dim` has at least one finite entry.
    - Do not call torch.softmax / F.softmax / Tensor.softmax (or log_softmax, torch.logsumexp, torch.ops.aten kernels).
    """
    ### BEGIN SOLUTION
    m = x.amax(dim=dim, keepdim=True)
    e = torch.exp(x - m)
    return e / e.sum(dim=dim, keepdim=True)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex1_softmax", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from course_utils.grading import check_close, check_shape, check_true, passed

x = torch.tensor([[1000.0, 1001.0, 1002.0]])
out = stable_softmax(x)
check_shape("stable_softmax(x) for x of shape (1, 3)", out, (1, 3))
check_true(bool(torch.isfinite(out).all()), "stable_softmax([1000, 1001, 1002]) contains nan/inf: did you subtract the max?")
check_close("stable_softmax([1000, 1001, 1002])", out, torch.softmax(torch.tensor([[0.0, 1.0, 2.0]]), dim=-1), atol=1e-6)

rows = torch.tensor([[0.0, 1.0, 2.0], [-1e4, -1e4 + 1.0, -1e4 + 2.0], [1e4, 1e4, 1e4 - 1.0]])
check_close("rows at very different offsets (subtract the max of each row, not of the whole tensor)",
            stable_softmax(rows), torch.softmax(rows, dim=-1), atol=1e-6)

cols = torch.tensor([[1.0, 5.0], [2.0, 5.0], [3.0, 5.0]])
check_close("stable_softmax(x, dim=0) (softmax down each column)", stable_softmax(cols, dim=0),
            torch.softmax(cols, dim=0), atol=1e-6)

masked = torch.tensor([0.5, float("-inf"), 1.5, float("-inf")])
check_close("stable_softmax with -inf entries (they must get weight 0)", stable_softmax(masked),
            torch.softmax(masked, dim=-1), atol=1e-7)
passed()
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import record, switched_off
record("module of stable_softmax (it must be defined in this notebook)", stable_softmax.__module__)  # clause: defined-here
g = torch.Generator().manual_seed(1234)
xs = [torch.randn(4, 7, 5, generator=g, dtype=torch.float64) * 30.0,
      torch.randn(3, 6, generator=g, dtype=torch.float64) * 1e4,
      torch.randn(2, 3, 9, generator=g) * 3.0]
xm = xs[2].clone()
xm[..., ::2] = float("-inf")
xhalf = [(torch.randn(4, 9, generator=g) * 20.0).to(torch.bfloat16), (torch.randn(3, 6, generator=g) * 5.0).to(torch.float16)]
xhalf[1][:, 1] = float("-inf")
with switched_off("torch.softmax", "torch.log_softmax", "torch._softmax", "torch._log_softmax",
                  "torch.nn.functional.softmax", "torch.nn.functional.log_softmax",
                  "torch.special.softmax", "torch.special.log_softmax",
                  "torch.Tensor.softmax", "torch.Tensor.log_softmax",
                  "torch.logsumexp", "torch.Tensor.logsumexp", "torch.special.logsumexp",
                  "torch.ops.aten.softmax", "torch.ops.aten._softmax", "torch.ops.aten._safe_softmax",
                  "torch.ops.aten.log_softmax", "torch.ops.aten._log_softmax", "torch.ops.aten.logsumexp",
                  functions=[stable_softmax],
                  hint="stable_softmax must not call torch's softmax (directly or through a name that refers "
                       "to it): write it with exp, max and sum."):
    outs = [stable_softmax(xs[0], dim=1), stable_softmax(xs[1]), stable_softmax(xs[2], dim=-1),
            stable_softmax(xs[2], dim=0)]
    out_m = stable_softmax(xm, dim=-1)
    out_half = [stable_softmax(xhalf[0], dim=0), stable_softmax(xhalf[1])]
# the inputs after the calls: stable_softmax must not modify them (x -= m changes the caller's tensor)
for _name, _t in zip(("float64 (4, 7, 5)", "float64 (3, 6) of size 1e4", "float32 (2, 3, 9)",
                      "float32 (2, 3, 9) with -inf entries", "bfloat16 (4, 9)", "float16 (3, 6) with -inf entries"),
                     xs + [xm] + xhalf):
    record(f"x after stable_softmax on the {_name} input (not modified in place)", _t)  # clause: unchanged-input
# (every output below was computed with the library softmax switched off)
record("stable_softmax over dim=1 of a float64 (4, 7, 5) tensor", outs[0], atol=1e-12)  # clause: value, any-dim, no-library-softmax
record("stable_softmax of float64 scores of size 1e4", outs[1], atol=1e-12)  # clause: no-overflow
record("stable_softmax of a float32 (2, 3, 9) tensor", outs[2], atol=1e-6)  # clause: value
record("stable_softmax over dim=0 of a float32 (2, 3, 9) tensor", outs[3], atol=1e-6)  # clause: any-dim
record("stable_softmax with every other entry -inf (float32)", out_m, atol=1e-6)  # clause: neg-inf
record("stable_softmax of a bfloat16 (4, 9) input over dim=0 (a bfloat16 result)", out_half[0], atol=1e-2)  # clause: keeps-dtype, any-dim
record("stable_softmax of a float16 (3, 6) input with -inf entries (a float16 result)", out_half[1], atol=2e-3)  # clause: keeps-dtype, neg-inf
### BEGIN REFERENCE
from course_utils.grading import expect
expect("stable_softmax over dim=1 of a float64 (4, 7, 5) tensor", torch.softmax(xs[0], dim=1), atol=1e-12)
expect("stable_softmax of float64 scores of size 1e4", torch.softmax(xs[1], dim=-1), atol=1e-12)
expect("stable_softmax of a float32 (2, 3, 9) tensor", torch.softmax(xs[2], dim=-1), atol=1e-6)
expect("stable_softmax over dim=0 of a float32 (2, 3, 9) tensor", torch.softmax(xs[2], dim=0), atol=1e-6)
expect("stable_softmax with every other entry -inf (float32)", torch.softmax(xm, dim=-1), atol=1e-6)
expect("stable_softmax of a bfloat16 (4, 9) input over dim=0 (a bfloat16 result)",
       torch.softmax(xhalf[0].double(), dim=0).to(torch.bfloat16), atol=1e-2)
expect("stable_softmax of a float16 (3, 6) input with -inf entries (a float16 result)",
       torch.softmax(xhalf[1].double(), dim=-1).to(torch.float16), atol=2e-3)
### END REFERENCE
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 2 (3 points): scaled dot-product attention with an optional mask
#
# Book §2.6–2.7 in one formula, now with a mask:
# $$\mathrm{Attention}(Q,K,V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}} + M\right)V,\qquad
# M_{ij} = \begin{cases} 0 & \text{query } i \text{ may attend to key } j \ (\texttt{mask[i, j] = True})\\
# -\infty & \text{otherwise.}\end{cases}$$
#
# Shapes: `q` is `(..., n_q, d_k)`, `k` is `(..., n_k, d_k)`, `v` is `(..., n_k, d_v)`; the leading dimensions
# `...` (batch, heads) are carried along, and there may be none (2-D inputs). Note that $d_k$ (the scale) comes
# from queries and keys, and that $d_v$ may differ from it. Return the pair `(output, weights)`: the output
# $\mathrm{Attention}(Q,K,V)$ of shape `(..., n_q, d_v)` and the softmax weights of shape `(..., n_q, n_k)`. <!-- clause: value -->
#
# The mask, when given, is a boolean tensor that broadcasts to `(..., n_q, n_k)` (one mask can serve every head);
# the easy way to apply it is `scores.masked_fill(~mask, float("-inf"))`. <!-- clause: mask --> Where the mask is
# `False` the weight must be exactly 0; every query has at least one allowed key. <!-- clause: masked-zero -->
#
# Use `torch.softmax` for the normalisation here (not your `stable_softmax`), so that this exercise is graded
# independently of Exercise 1. Do not call `F.scaled_dot_product_attention` (nor its `torch.ops.aten` kernels, such as
# `_scaled_dot_product_attention_math`): that is what we compare with, and a hidden test switches them off. <!-- clause: no-library-sdpa -->
# The output and the weights have the dtype of `q`, `k`, `v` (`float16` and
# `bfloat16` too). <!-- clause: keeps-dtype --> The inputs (`q`, `k`, `v` and `mask`) are left unchanged. <!-- clause: unchanged-input -->

# %% nbgrader={"grade": false, "grade_id": "ex2_sdpa", "locked": false, "schema_version": 3, "solution": true, "task": false}
def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q kᵀ / sqrt(d_k) + M) v, where M is 0 where `mask` is True and -inf where it is False.

    q: (..., n_q, d_k), k: (..., n_k, d_k), v: (..., n_k, d_v); mask: None or bool, broadcastable to (..., n_q, n_k).
    Returns (output, weights) with shapes (..., n_q, d_v) and (..., n_q, n_k).
    q, k, v share one dtype (float16, bfloat16, float32 or float64): output and weights have that dtype too.
    Masked positions must get weight exactly 0. Every query is assumed to have at least one allowed key.
    q, k, v and mask are not modified.
    """
    ### BEGIN SOLUTION
    d_k = q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex2_sdpa", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from course_utils.grading import check_close, check_shape, check_true, check_type, passed

# 1) the book's "teddy reads" example (Q = K = V = X)
Xt = torch.tensor([[1.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
res = scaled_dot_product_attention(Xt, Xt, Xt)
check_type("scaled_dot_product_attention(...) (it must return a tuple (output, weights))", res, tuple)
out, w = res
p = 1.0 / (1.0 + math.exp(1.0 / math.sqrt(2.0)))        # softmax([1/√2, 2/√2]) = [p, 1 - p]
check_close("weights for 'teddy reads' (book §2.8.8)", w, [[0.5, 0.5], [p, 1 - p]], atol=1e-9)
check_close("output Z for 'teddy reads' (book §2.8.9)", out, [[1.0, 0.5], [1.0, 1 - p]], atol=1e-9)

# 2) random, non-square, d_v != d_k, with batch and head dimensions: compare with PyTorch
g = torch.Generator().manual_seed(0)
q = torch.randn(2, 3, 4, 8, generator=g, dtype=torch.float64)
k = torch.randn(2, 3, 6, 8, generator=g, dtype=torch.float64)
v = torch.randn(2, 3, 6, 5, generator=g, dtype=torch.float64)
out, w = scaled_dot_product_attention(q, k, v)
check_shape("output for q (2,3,4,8), k (2,3,6,8), v (2,3,6,5)", out, (2, 3, 4, 5))
check_shape("weights for q (2,3,4,8), k (2,3,6,8)", w, (2, 3, 4, 6))
check_close("output vs F.scaled_dot_product_attention (is the scale 1/sqrt(d_k), with d_k = q.shape[-1]?)",
            out, F.scaled_dot_product_attention(q, k, v), atol=1e-10)

# 3) with a boolean mask (True = may attend)
mask = torch.tensor([[True, False, False, True, False, False],
                     [True, True, False, False, False, True],
                     [False, False, True, False, False, False],
                     [True, True, True, True, True, True]])
out, w = scaled_dot_product_attention(q, k, v, mask=mask)
check_true(bool((w[..., ~mask] == 0).all()),
           "weights where mask is False must be exactly 0 (mask=True means 'may attend'; use -inf, not 0, for the others).")
check_close("weights: each row sums to 1", w.sum(-1), torch.ones(2, 3, 4, dtype=torch.float64), atol=1e-10)
check_close("masked output vs F.scaled_dot_product_attention(q, k, v, attn_mask=mask)", out,
            F.scaled_dot_product_attention(q, k, v, attn_mask=mask), atol=1e-10)
passed()
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import record, switched_off
record("module of scaled_dot_product_attention (it must be defined in this notebook)",  # clause: defined-here
       scaled_dot_product_attention.__module__)
g = torch.Generator().manual_seed(77)
qh = torch.randn(3, 2, 5, 16, generator=g, dtype=torch.float64) * 2.0
kh = torch.randn(3, 2, 7, 16, generator=g, dtype=torch.float64) * 2.0
vh = torch.randn(3, 2, 7, 3, generator=g, dtype=torch.float64)
mh = torch.rand(3, 1, 5, 7, generator=g) > 0.5
mh[..., 0] = True                                  # every query may attend to at least key 0
q2 = torch.randn(5, 4, generator=g)
k2 = torch.randn(5, 4, generator=g)
v2 = torch.randn(5, 4, generator=g)
m2 = torch.ones(5, 5, dtype=torch.bool).tril()
halves = [tuple(t.to(dt) for t in (qh, kh, vh)) for dt in (torch.bfloat16, torch.float16)]
with switched_off("torch.nn.functional.scaled_dot_product_attention", "torch._C._nn.scaled_dot_product_attention",
                  "torch.ops.aten.scaled_dot_product_attention", "torch.ops.aten._scaled_dot_product_attention_math",
                  "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu",
                  "torch.ops.aten._scaled_dot_product_efficient_attention",
                  functions=[scaled_dot_product_attention],
                  hint="scaled_dot_product_attention must not call F.scaled_dot_product_attention (directly or "
                       "through a name that refers to it): compute the scores, the mask and the softmax yourself."):
    o1, w1 = scaled_dot_product_attention(qh, kh, vh, mask=mh)
    o2, w2 = scaled_dot_product_attention(q2, k2, v2, mask=m2)
    o3, w3 = scaled_dot_product_attention(qh, kh, vh)
    ohalf = [scaled_dot_product_attention(*t, mask=mh) for t in halves]
# the inputs after the calls: q, k, v and mask must not be modified
for _name, _t in zip(("q (3, 2, 5, 16)", "k (3, 2, 7, 16)", "v (3, 2, 7, 3)", "mask (3, 1, 5, 7)",
                      "q (5, 4)", "k (5, 4)", "v (5, 4)", "mask (5, 5)"), (qh, kh, vh, mh, q2, k2, v2, m2)):
    record(f"{_name} after scaled_dot_product_attention (not modified in place)", _t)  # clause: unchanged-input
# (every output below was computed with F.scaled_dot_product_attention switched off)
# clause: mask, no-library-sdpa
record("masked weights, q (3, 2, 5, 16), k (3, 2, 7, 16), mask (3, 1, 5, 7) broadcast over heads", w1, atol=1e-10)
record("masked weights where the mask is False (exactly 0)", w1.masked_select(~mh.expand_as(w1)))  # clause: masked-zero
record("masked output, q (3, 2, 5, 16), k (3, 2, 7, 16), v (3, 2, 7, 3)", o1, atol=1e-10)  # clause: mask
record("output for 2-D float32 inputs (5, 4) with a causal mask", o2, atol=1e-5)  # clause: value, mask
record("weights for 2-D float32 inputs (5, 4) with a causal mask", w2, atol=1e-5)  # clause: value, mask
record("unmasked weights, q (3, 2, 5, 16), k (3, 2, 7, 16)", w3, atol=1e-10)  # clause: value
record("unmasked output, q (3, 2, 5, 16), k (3, 2, 7, 16), v (3, 2, 7, 3)", o3, atol=1e-10)  # clause: value
for (hq, hk, hv), (ho, hw), tol in zip(halves, ohalf, (5e-2, 1e-2)):
    record(f"masked output with {hq.dtype} inputs (a {hq.dtype} result)", ho, atol=tol, rtol=tol)  # clause: keeps-dtype
    record(f"masked weights with {hq.dtype} inputs (a {hq.dtype} result)", hw, atol=tol, rtol=tol)  # clause: keeps-dtype
    # clause: keeps-dtype, masked-zero
    record(f"masked weights with {hq.dtype} inputs where the mask is False (exactly 0)",
           hw.masked_select(~mh.expand_as(hw)))
### BEGIN REFERENCE
from course_utils.grading import check_close, expect
ref_s = (qh @ kh.transpose(-2, -1)) / 4.0
ref_w = torch.softmax(ref_s.masked_fill(~mh, float("-inf")), dim=-1)
expect("masked weights, q (3, 2, 5, 16), k (3, 2, 7, 16), mask (3, 1, 5, 7) broadcast over heads", ref_w, atol=1e-10)
expect("masked weights where the mask is False (exactly 0)",
       torch.zeros(int((~mh.expand_as(ref_w)).sum()), dtype=torch.float64))
expect("masked output, q (3, 2, 5, 16), k (3, 2, 7, 16), v (3, 2, 7, 3)", ref_w @ vh, atol=1e-10)
check_close("masked output vs torch", o1, F.scaled_dot_product_attention(qh, kh, vh, attn_mask=mh), atol=1e-10)
expect("output for 2-D float32 inputs (5, 4) with a causal mask",
       F.scaled_dot_product_attention(q2, k2, v2, is_causal=True), atol=1e-5)
expect("weights for 2-D float32 inputs (5, 4) with a causal mask",
       torch.softmax((q2.double() @ k2.double().T / 2.0).masked_fill(~m2, float("-inf")), dim=-1).float(), atol=1e-5)
expect("unmasked weights, q (3, 2, 5, 16), k (3, 2, 7, 16)", torch.softmax(ref_s, dim=-1), atol=1e-10)
expect("unmasked output, q (3, 2, 5, 16), k (3, 2, 7, 16), v (3, 2, 7, 3)", torch.softmax(ref_s, dim=-1) @ vh, atol=1e-10)
check_close("unmasked output vs torch", o3, F.scaled_dot_product_attention(qh, kh, vh), atol=1e-10)
for (hq, hk, hv), tol in zip(halves, (5e-2, 1e-2)):
    expect(f"masked output with {hq.dtype} inputs (a {hq.dtype} result)",
           F.scaled_dot_product_attention(hq.double(), hk.double(), hv.double(), attn_mask=mh).to(hq.dtype),
           atol=tol, rtol=tol)
    _hw_ref = torch.softmax((hq.double() @ hk.double().transpose(-2, -1) / 4.0).masked_fill(~mh, float("-inf")), dim=-1)
    expect(f"masked weights with {hq.dtype} inputs (a {hq.dtype} result)", _hw_ref.to(hq.dtype), atol=tol, rtol=tol)
    expect(f"masked weights with {hq.dtype} inputs where the mask is False (exactly 0)",
           torch.zeros(int((~mh.expand_as(_hw_ref)).sum()), dtype=hq.dtype))
### END REFERENCE
### END HIDDEN TESTS

# %% [markdown]
# **Verify against PyTorch.** On random tensors (batch 2, 4 heads, 10 queries, 12 keys) with and without a
# random mask, your function and `F.scaled_dot_product_attention` agree to rounding error, and on the book's
# example your function gives the hand-computed $A$ and $Z$ of Part A.

# %% nbgrader={"grade": false, "grade_id": "sdpa_verify", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
gen = torch.Generator().manual_seed(0)
q = torch.randn(2, 4, 10, 16, generator=gen)
k = torch.randn(2, 4, 12, 16, generator=gen)
v = torch.randn(2, 4, 12, 32, generator=gen)
rand_mask = torch.rand(10, 12, generator=gen) > 0.3
rand_mask[:, 0] = True
for name, m in [("no mask", None), ("random mask", rand_mask)]:
    ours, _ = scaled_dot_product_attention(q, k, v, mask=m)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
    print(f"{name:<12} max |ours - torch| < 1e-5: {bool((ours - ref).abs().max() < 1e-5)}")

Z_fn, A_fn = scaled_dot_product_attention(Q, K, V)
print("teddy reads: same A and Z as the hand computation:", torch.allclose(A_fn, A) and torch.allclose(Z_fn, Z))


# %% [markdown]
# ## Part C · Causal masking (note 001)
#
# A language model that predicts the next token must not look at it. Note 001 builds the **causal mask**
# by adding $M$ (0 on and below the diagonal, $-\infty$ above it) to a $3\times 3$ score matrix
# $$S = \begin{bmatrix}1.0 & 0.5 & 0.2\\ 0.8 & 1.2 & 0.6\\ 0.4 & 0.7 & 1.1\end{bmatrix}.$$
#
# With our boolean convention the causal mask is `True` on and below the diagonal. There is one more case worth
# getting right now, because it is exactly what happens when a model generates text with a key/value cache
# (chapter 08): the queries are only the **last** $n_q$ tokens of a sequence of $n_k$ tokens. Query $i$ then sits
# at absolute position $n_k - n_q + i$ and may attend to every key $j \le n_k - n_q + i$. (PyTorch calls this
# alignment `causal_lower_right`; careful: `is_causal=True` in `F.scaled_dot_product_attention` uses the *upper-left*
# alignment when the mask is not square.)
#
# ### Exercise 3 (2 points): `causal_mask`
#
# Write `causal_mask(n_q, n_k=None)`: a `torch.bool` tensor of shape `(n_q, n_k)`, `True` where query $i$ may
# attend to key $j$. <!-- clause: bool-mask --> With one argument (`n_k` defaults to `n_q`) it is the square causal
# mask, `True` on and below the diagonal: used in attention, it gives the same output as `is_causal=True`. <!-- clause: value -->
# When `n_k` is larger than `n_q`, the queries are the last `n_q` of `n_k` positions: query
# $i$ may attend to every key $j \le n_k - n_q + i$ (the lower-right alignment). <!-- clause: kv-cache -->

# %% nbgrader={"grade": false, "grade_id": "ex3_causal_mask", "locked": false, "schema_version": 3, "solution": true, "task": false}
def causal_mask(n_q, n_k=None):
    """Causal mask: a torch.bool tensor of shape (n_q, n_k), True where the query may attend to the key.

    The n_q queries are the LAST n_q positions of a sequence of n_k >= n_q tokens (n_k defaults to n_q):
    query i (absolute position n_k - n_q + i) may attend to keys 0 .. n_k - n_q + i, itself included.
    """
    ### BEGIN SOLUTION
    n_k = n_q if n_k is None else n_k
    pos_q = torch.arange(n_q)[:, None] + (n_k - n_q)
    pos_k = torch.arange(n_k)[None, :]
    return pos_k <= pos_q
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex3_causal_mask", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from course_utils.grading import check_close, check_equal, check_shape, check_true, passed

m3 = causal_mask(3)
check_true(isinstance(m3, torch.Tensor) and m3.dtype == torch.bool, "causal_mask must return a torch.bool tensor.")
check_shape("causal_mask(3)", m3, (3, 3))
check_equal("causal_mask(3) (True on and below the diagonal: a token sees itself and the past)", m3.tolist(),
            [[True, False, False], [True, True, False], [True, True, True]])
check_equal("causal_mask(1, 4) (the newest token sees the whole cache)", causal_mask(1, 4).tolist(),
            [[True, True, True, True]])
check_equal("causal_mask(2, 4) (queries are the last 2 of 4 positions)", causal_mask(2, 4).tolist(),
            [[True, True, True, False], [True, True, True, True]])
passed()
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import record
record("module of causal_mask (it must be defined in this notebook)", causal_mask.__module__)  # clause: defined-here
_sizes = [(1, 1), (5, 5), (7, None), (3, 8), (1, 9), (6, 6), (4, 11)]
for n_q_, n_k_ in _sizes:
    got = causal_mask(n_q_) if n_k_ is None else causal_mask(n_q_, n_k_)
    # clause: bool-mask, value, kv-cache
    record(f"causal_mask({n_q_}{'' if n_k_ is None else f', {n_k_}'}) (a torch.bool tensor)", got)
g = torch.Generator().manual_seed(3)
qc, kc, vc = (torch.randn(2, 7, 4, generator=g, dtype=torch.float64) for _ in range(3))
sc = (qc @ kc.transpose(-2, -1) / 2.0).masked_fill(~causal_mask(7), float("-inf"))
record("attention of (2, 7, 4) inputs with scores masked by causal_mask(7)", torch.softmax(sc, dim=-1) @ vc, atol=1e-10)  # clause: value
### BEGIN REFERENCE
from course_utils.grading import expect
for n_q_, n_k_ in _sizes:
    nk = n_q_ if n_k_ is None else n_k_
    expect(f"causal_mask({n_q_}{'' if n_k_ is None else f', {n_k_}'}) (a torch.bool tensor)",
           torch.tensor([[j <= nk - n_q_ + i for j in range(nk)] for i in range(n_q_)], dtype=torch.bool).reshape(n_q_, nk))
expect("attention of (2, 7, 4) inputs with scores masked by causal_mask(7)",
       F.scaled_dot_product_attention(qc, kc, vc, is_causal=True), atol=1e-10)
### END REFERENCE
### END HIDDEN TESTS

# %% [markdown]
# ### Note 001's example, recomputed
#
# We apply the mask to note 001's scores exactly as the note does (no $\sqrt{d_k}$ scaling: the scores are given),
# using your `causal_mask` and `stable_softmax`.

# %% nbgrader={"grade": false, "grade_id": "note001_weights", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
S001 = torch.tensor([[1.0, 0.5, 0.2], [0.8, 1.2, 0.6], [0.4, 0.7, 1.1]], dtype=f64)   # note 001
S001_masked = S001.masked_fill(~causal_mask(3), float("-inf"))
alpha = stable_softmax(S001_masked)
show("S' = S + M", S001_masked)
show("alpha = softmax(S') (recomputed)", alpha)

note001_alpha = [[1.0, 0.0, 0.0], [0.35, 0.65, 0.0], [0.15, 0.27, 0.58]]     # book value (note 001)
expected_rows = [[0.401, 0.599, 0.0], [0.229, 0.309, 0.461]]                  # corrected rows, 3 decimals
assert not compare("alpha vs note 001's printed alpha", alpha, note001_alpha, 5e-3)
assert compare("alpha rows 2-3 vs corrected values", alpha[1:], expected_rows, 5e-4)

# %% [markdown]
# > **Erratum (note 001).** The printed weights $\alpha$ are wrong. The softmax of the masked rows is
# > $\mathrm{softmax}(0.8, 1.2) = [0.401, 0.599]$ (printed: $[0.35, 0.65]$) and
# > $\mathrm{softmax}(0.4, 0.7, 1.1) = [0.229, 0.309, 0.461]$ (printed: $[0.15, 0.27, 0.58]$).
# > The mask pattern itself (zeros above the diagonal of $\alpha$) is right.
#
# Where could the printed numbers come from? The cell below tries the obvious suspect, a forgotten scale
# (a softmax of $2S'$, i.e. temperature $0.5$): it comes within 0.01 of the printed third row but misses the
# printed second row by 0.04. It then scans every temperature $T$ from 0.05 to 3 (step 0.0005),
# $\mathrm{softmax}(S'/T)$: the printed row 2 is reproduced to 0.01 only for $T \approx 0.60$–$0.70$, the
# printed row 3 only for $T \approx 0.50$–$0.54$, and the best compromise, $T \approx 0.57$, still misses both
# rows by about 0.02. No single temperature explains both rows.

# %% nbgrader={"grade": false, "grade_id": "note001_suspect", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
alpha_t05 = stable_softmax(2 * S001_masked)
show("softmax(2 S')", alpha_t05, decimals=2)
assert compare("row 3 vs note 001's printed row 3", alpha_t05[2], note001_alpha[2], 1e-2)
assert not compare("row 2 vs note 001's printed row 2", alpha_t05[1], note001_alpha[1], 1e-2)

# every temperature T from 0.05 to 3 in steps of 0.0005: softmax(S' / T), error on the printed rows 2 and 3
T_grid = torch.round(torch.arange(100, 6001, dtype=f64) * 0.0005, decimals=4)          # 0.0500 ... 3.0000
alpha_T = stable_softmax(S001_masked / T_grid[:, None, None])                           # (n_T, 3, 3)
printed = torch.tensor(note001_alpha, dtype=f64)
err_row2 = (alpha_T[:, 1] - printed[1]).abs().amax(-1)
err_row3 = (alpha_T[:, 2] - printed[2]).abs().amax(-1)
for name, err in [("row 2", err_row2), ("row 3", err_row3)]:
    fits = T_grid[err <= 1e-2]
    print(f"{name} within 0.01 of note 001 for T in [{fits.min().item():.4f}, {fits.max().item():.4f}]")
err_both = torch.maximum(err_row2, err_row3)
best = int(err_both.argmin())
print(f"best single T for both rows: T = {T_grid[best].item():.4f}, max error {err_both[best].item():.4f} "
      f"({'within' if err_both[best] <= 1e-2 else 'above'} the tolerance 0.01)")
assert err_both.min() > 1e-2

# %% [markdown]
# ### "Zeroing the scores" is not masking
#
# Note 001 also says that masking "zeros the scores" of future tokens. A score of 0 is not a weight of 0:
# $e^0 = 1$, so a zeroed future score still receives a good share of the attention. Only $-\infty$ (or, in practice,
# the most negative float) gives $e^{-\infty} = 0$.

# %% nbgrader={"grade": false, "grade_id": "note001_zeroing", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
alpha_zeroed = stable_softmax(S001.masked_fill(~causal_mask(3), 0.0))
show("softmax(S with future scores set to 0)", alpha_zeroed)
print("weight token 1 puts on the future (tokens 2 and 3):", round(float(alpha_zeroed[0, 1:].sum()), 4))

# %% nbgrader={"grade": false, "grade_id": "note001_plot", "locked": true, "schema_version": 3, "solution": false, "task": false}
labels3 = ["x1", "x2", "x3"]
fig, axes = plt.subplots(1, 3, figsize=(12, 3))
heatmap(np.array(note001_alpha), labels3, labels3, title="note 001 as printed (wrong)", ax=axes[0], vmin=0, vmax=1)
heatmap(alpha, labels3, labels3, title="recomputed: softmax(S + M)", ax=axes[1], vmin=0, vmax=1)
heatmap(alpha_zeroed, labels3, labels3, title="'zeroing' future scores (leaks)", ax=axes[2], vmin=0, vmax=1)
for ax in axes:
    ax.set_xlabel("key")
    ax.set_ylabel("query")
plt.tight_layout()
plt.show()

# %% [markdown]
# Note 001's other example, the output $a_2 = \alpha_{21} v_1 + \alpha_{22} v_2$ with *assumed* weights 0.3 and 0.7,
# is right, and so are its two intermediate products:

# %% nbgrader={"grade": false, "grade_id": "note001_values", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
v1 = torch.tensor([0.2, 0.4, 0.6], dtype=f64)
v2 = torch.tensor([0.1, 0.3, 0.5], dtype=f64)
a2 = 0.3 * v1 + 0.7 * v2
show("0.3 v_1", 0.3 * v1)
show("0.7 v_2", 0.7 * v2)
show("a_2", a2)
assert compare("0.3 v_1 vs note 001", 0.3 * v1, [0.06, 0.12, 0.18], 5e-4)   # book value (note 001)
assert compare("0.7 v_2 vs note 001", 0.7 * v2, [0.07, 0.21, 0.35], 5e-4)   # book value (note 001)
assert compare("a_2 vs note 001", a2, [0.13, 0.33, 0.53], 5e-4)            # book value (note 001)

# %% [markdown]
# **Verify against PyTorch.** For a square mask, your mask and `is_causal=True` give the same attention. For a block
# of queries at the end of a sequence (what a key/value cache computes), the right answer is, by definition, the last
# rows of full causal attention over the whole sequence: your lower-right mask reproduces them, `is_causal=True`
# (upper-left alignment) does not.

# %% nbgrader={"grade": false, "grade_id": "causal_verify", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
gen = torch.Generator().manual_seed(1)
q, k, v = (torch.randn(1, 2, 5, 8, generator=gen) for _ in range(3))
full = F.scaled_dot_product_attention(q, k, v, is_causal=True)             # all 5 queries, square causal mask
ours, _ = scaled_dot_product_attention(q, k, v, mask=causal_mask(5))
print("square: ours == is_causal=True                   :", torch.allclose(ours, full, atol=1e-6))
last2, _ = scaled_dot_product_attention(q[..., 3:, :], k, v, mask=causal_mask(2, 5))
last2_upper_left = F.scaled_dot_product_attention(q[..., 3:, :], k, v, is_causal=True)
print("last 2 queries, causal_mask(2, 5) == full[-2:]   :", torch.allclose(last2, full[..., 3:, :], atol=1e-6))
print("last 2 queries, is_causal=True     == full[-2:]   :", torch.allclose(last2_upper_left, full[..., 3:, :], atol=1e-6))
print("causal_mask(2, 5) =")
print(causal_mask(2, 5).int().numpy())


# %% [markdown]
# ## Part D · Multi-head attention: "Life is awesome" (note 003, Book §2.7.3)
#
# With $h$ heads, each head has its own $W_Q^{(i)}, W_K^{(i)}, W_V^{(i)} \in \mathbb{R}^{d\times d_k}$ with
# $d_k = d/h$. Implementations do not run $h$ separate matrix products: they stack the heads' matrices side by
# side, $W_Q = [\,W_Q^{(1)} \mid \dots \mid W_Q^{(h)}\,] \in \mathbb{R}^{d\times d}$, compute $XW_Q$ once, and then
# **split** the last dimension into $h$ chunks of $d_k$ columns, one per head. After attention, the heads'
# outputs are **merged** back by concatenating them along the feature dimension, and $W_O$ mixes them.
#
# In tensors: `(B, n, d)` → split → `(B, h, n, d_k)` (heads become a batch dimension, so Exercise 2 works on all
# heads at once) → attention → `(B, h, n, d_k)` → merge → `(B, n, h·d_k)`.
#
# ### Exercise 4 (2 points): `split_heads` and `merge_heads`
#
# `split_heads(x, n_heads)` turns `x` of shape `(B, n, d)` into a tensor of shape `(B, h, n, d_k)`, and head $i$
# must get columns $i\,d_k, \dots, (i+1)\,d_k - 1$ of the last dimension (this is what
# `nn.MultiheadAttention` does). <!-- clause: split --> A plain `reshape(B, h, n, d_k)` has the right shape and
# the wrong content: you need a reshape **and** a transpose. `split_heads` must also accept a non-contiguous `x`
# (a transposed tensor, for instance), where `.view` fails and `.reshape` works. <!-- clause: non-contiguous -->
# Raise `ValueError` when `d` is not divisible by `n_heads`. <!-- clause: divisible -->
#
# `merge_heads(x)` is the inverse: from `(B, h, n, d_k)` it returns `(B, n, h·d_k)`, the heads concatenated along
# the feature dimension (head 0 first). <!-- clause: merge -->

# %% nbgrader={"grade": false, "grade_id": "ex4_heads", "locked": false, "schema_version": 3, "solution": true, "task": false}
def split_heads(x, n_heads):
    """(B, n, d) -> (B, n_heads, n, d // n_heads); head i gets columns i*d_k : (i+1)*d_k.

    Raise ValueError if d is not divisible by n_heads.
    """
    ### BEGIN SOLUTION
    B, n, d = x.shape
    if d % n_heads != 0:
        raise ValueError(f"d={d} is not divisible by n_heads={n_heads}")
    return x.reshape(B, n, n_heads, d // n_heads).transpose(1, 2)
    ### END SOLUTION


def merge_heads(x):
    """(B, n_heads, n, d_k) -> (B, n, n_heads * d_k): concatenate the heads along the feature dimension.

    Inverse of split_heads: merge_heads(split_heads(x, h)) == x.
    """
    ### BEGIN SOLUTION
    B, h, n, d_k = x.shape
    return x.transpose(1, 2).reshape(B, n, h * d_k)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex4_heads", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from course_utils.grading import check_close, check_shape, check_true, msg, passed

X3 = torch.tensor([[1.0, 0, 1, 0], [0, 1, 1, 0], [1, 1, 0, 1]], dtype=torch.float64)       # note 003
Wq_all = torch.tensor([[1.0, 0, 0, 1], [0, 1, 1, 0], [1, 0, 0, 1], [0, 1, 1, 0]], dtype=torch.float64)  # [W_Q1 | W_Q2]
heads = split_heads((X3 @ Wq_all)[None], 2)
check_shape("split_heads(XW_Q of shape (1, 3, 4), 2)", heads, (1, 2, 3, 2))
check_close("head 1 of split_heads(X W_Q) (note 003's Q^(1))", heads[0, 0], [[2, 0], [1, 1], [1, 2]])
check_close("head 2 of split_heads(X W_Q) (note 003's Q^(2))", heads[0, 1], [[0, 2], [1, 1], [2, 1]])

merged = merge_heads(heads)
check_shape("merge_heads(tensor of shape (1, 2, 3, 2))", merged, (1, 3, 4))
check_close("merge_heads(split_heads(XW_Q)) == XW_Q", merged[0], X3 @ Wq_all)

g = torch.Generator().manual_seed(0)
x = torch.randn(2, 5, 12, generator=g)
check_close("merge_heads(split_heads(x, 3)) == x for x of shape (2, 5, 12)", merge_heads(split_heads(x, 3)), x)
check_close("split_heads(x, 3)[:, 1] == x[..., 4:8] (head 2 gets columns 4..7)", split_heads(x, 3)[:, 1], x[..., 4:8])

try:                                                        # d = 12 is not divisible by 5 heads
    split_heads(x, 5)
    _err = msg("it raised nothing")
except ValueError:
    _err = None
except Exception as _e:
    _err = msg("got {error}", error=f"{type(_e).__name__}: {_e}")
check_true(_err is None, msg("split_heads(x, 5) for x of shape (2, 5, 12) must raise ValueError (12 is not divisible "
                             "by 5 heads); expected ValueError, {outcome}.", outcome=_err))
passed()
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import outcome, record
# clause: defined-here
record("module of split_heads (it must be defined in this notebook)", split_heads.__module__)
record("module of merge_heads (it must be defined in this notebook)", merge_heads.__module__)
g = torch.Generator().manual_seed(2024)
xh = torch.randn(3, 7, 24, generator=g, dtype=torch.float64)
_per_heads = {}
for h in (1, 2, 4, 6, 8):
    dk = 24 // h
    # clause: split
    record(f"split_heads(x, {h}) for x of shape (3, 7, 24): shape (3, {h}, 7, {dk}), head i = columns i*{dk}:(i+1)*{dk}",
           split_heads(xh, h))
    _per_heads[h] = torch.randn(3, h, 7, dk, generator=g, dtype=torch.float64)
    # clause: merge
    record(f"merge_heads of {h} heads of shape (3, {h}, 7, {dk}) (heads concatenated along the features)",
           merge_heads(_per_heads[h]))
base = torch.randn(7, 3, 24, generator=g)
nc = base.transpose(0, 1)                                  # non-contiguous input
record("split_heads(x, 4) on a non-contiguous float32 x of shape (3, 7, 24)", split_heads(nc, 4))  # clause: non-contiguous
for _bad_h in (5, 7, 48):
    record(f"split_heads(x, {_bad_h}) for d = 24 (24 is not divisible by {_bad_h})", outcome(split_heads, xh, _bad_h))  # clause: divisible
### BEGIN REFERENCE
from course_utils.grading import check_close, expect
for h in (1, 2, 4, 6, 8):
    dk = 24 // h
    expect(f"split_heads(x, {h}) for x of shape (3, 7, 24): shape (3, {h}, 7, {dk}), head i = columns i*{dk}:(i+1)*{dk}",
           torch.stack([xh[..., i * dk:(i + 1) * dk] for i in range(h)], dim=1))
    expect(f"merge_heads of {h} heads of shape (3, {h}, 7, {dk}) (heads concatenated along the features)",
           torch.cat(list(_per_heads[h].unbind(1)), dim=-1))
expect("split_heads(x, 4) on a non-contiguous float32 x of shape (3, 7, 24)", nc.reshape(3, 7, 4, 6).permute(0, 2, 1, 3))
for _bad_h in (5, 7, 48):
    expect(f"split_heads(x, {_bad_h}) for d = 24 (24 is not divisible by {_bad_h})", "raises ValueError")
### END REFERENCE
### END HIDDEN TESTS

# %% [markdown]
# ### Every matrix of note 003, recomputed
#
# Note 003 uses $d = 4$, $h = 2$ heads, $d_k = 2$, $W_O = I_4$, the input "Life is awesome" with the embeddings
# below, and the causal mask. We build the stacked weight matrices from the note's per-head blocks, run the whole
# computation with your functions, and compare every intermediate matrix the note prints (3 decimals, so the
# tolerance is 0.0005).

# %% nbgrader={"grade": false, "grade_id": "note003_setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
words = ["Life", "is", "awesome"]
X3 = torch.tensor([[1.0, 0, 1, 0], [0, 1, 1, 0], [1, 1, 0, 1]], dtype=f64)
W = {  # note 003's trained blocks (book values): d_model x d_k per head
    "Q1": [[1, 0], [0, 1], [1, 0], [0, 1]], "K1": [[1, 1], [0, 1], [1, 0], [0, 1]], "V1": [[1, 0], [0, 1], [1, 1], [0, 1]],
    "Q2": [[0, 1], [1, 0], [0, 1], [1, 0]], "K2": [[1, 0], [1, 1], [0, 1], [1, 0]], "V2": [[0, 1], [1, 0], [1, 0], [0, 1]],
}
W = {name: torch.tensor(m, dtype=f64) for name, m in W.items()}
W_Q3 = torch.cat([W["Q1"], W["Q2"]], dim=1)                 # [W_Q^(1) | W_Q^(2)]  (4 x 4)
W_K3 = torch.cat([W["K1"], W["K2"]], dim=1)
W_V3 = torch.cat([W["V1"], W["V2"]], dim=1)
W_O3 = torch.eye(4, dtype=f64)
n_heads = 2

# the computation, step by step (batch of 1)
q_h = split_heads((X3 @ W_Q3)[None], n_heads)               # (1, 2, 3, 2)
k_h = split_heads((X3 @ W_K3)[None], n_heads)
v_h = split_heads((X3 @ W_V3)[None], n_heads)
S3 = q_h @ k_h.transpose(-2, -1)                            # unscaled scores, per head
head_out, A3 = scaled_dot_product_attention(q_h, k_h, v_h, mask=causal_mask(3))
concat = merge_heads(head_out)[0]                           # (3, 4)
mha_out = concat @ W_O3

# %% nbgrader={"grade": false, "grade_id": "note003_compare", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
note003 = {  # book values, as printed in note 003
    "Q^(1)": [[2, 0], [1, 1], [1, 2]], "K^(1)": [[2, 1], [1, 1], [1, 3]], "V^(1)": [[2, 1], [1, 2], [1, 2]],
    "Q^(2)": [[0, 2], [1, 1], [2, 1]], "K^(2)": [[1, 1], [1, 2], [3, 1]], "V^(2)": [[1, 1], [2, 0], [1, 2]],
    "sqrt(2) S^(1)": [[4, 2, 2], [3, 2, 4], [4, 3, 7]], "sqrt(2) S^(2)": [[2, 4, 2], [2, 3, 4], [3, 4, 7]],
    "A^(1)": [[1.000, 0.000, 0.000], [0.670, 0.330, 0.000], [0.102, 0.050, 0.848]],
    "A^(2)": [[1.000, 0.000, 0.000], [0.330, 0.670, 0.000], [0.050, 0.102, 0.848]],
    "head_1 = A^(1) V^(1)": [[2.000, 1.000], [1.670, 1.330], [1.102, 1.898]],
    "head_2 = A^(2) V^(2)": [[1.000, 1.000], [1.670, 0.330], [1.102, 1.747]],
    "Concat(head_1 | head_2)": [[2.000, 1.000, 1.000, 1.000], [1.670, 1.330, 1.670, 0.330], [1.102, 1.898, 1.102, 1.747]],
    "MultiHead = Concat W_O": [[2.000, 1.000, 1.000, 1.000], [1.670, 1.330, 1.670, 0.330], [1.102, 1.898, 1.102, 1.747]],
}
ours003 = {
    "Q^(1)": q_h[0, 0], "K^(1)": k_h[0, 0], "V^(1)": v_h[0, 0],
    "Q^(2)": q_h[0, 1], "K^(2)": k_h[0, 1], "V^(2)": v_h[0, 1],
    "sqrt(2) S^(1)": S3[0, 0], "sqrt(2) S^(2)": S3[0, 1],
    "A^(1)": A3[0, 0], "A^(2)": A3[0, 1],
    "head_1 = A^(1) V^(1)": head_out[0, 0], "head_2 = A^(2) V^(2)": head_out[0, 1],
    "Concat(head_1 | head_2)": concat, "MultiHead = Concat W_O": mha_out,
}
results003 = {name: compare(name, ours003[name], note003[name], 0 if name[0] in "QKVs" else 5e-4) for name in note003}
print(f"{sum(results003.values())} of {len(results003)} printed matrices reproduced")
assert all(results003.values())
show("A^(1)", A3[0, 0])
show("A^(2)", A3[0, 1])
show("MultiHead output", mha_out)

# %% [markdown]
# All fourteen matrices of note 003 are right to the printed precision. (The closest call is
# $\mathrm{head}_2[3,2] = 0.0501 + 2 \times 0.8482 = 1.74652$, which does round to the printed 1.747.)
#
# Two patterns are worth a look in the heatmaps: the upper triangle is exactly 0 (causal mask), and "awesome"
# puts 85 % of its attention on itself in both heads, because its query and key are the largest vectors
# ($7/\sqrt 2$ is its biggest score).

# %% nbgrader={"grade": false, "grade_id": "note003_plot", "locked": true, "schema_version": 3, "solution": false, "task": false}
fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
for i, ax in enumerate(axes):
    heatmap(A3[0, i], words, words, title=f"head {i + 1}: A^({i + 1}) (causal)", ax=ax, vmin=0, vmax=1, fmt="{:.3f}")
    ax.set_xlabel("key")
    ax.set_ylabel("query")
plt.tight_layout()
plt.show()

# %% [markdown]
# **Verify against `torch.nn.MultiheadAttention`.** The module stores the three projections stacked in one
# `in_proj_weight` of shape `(3d, d)` and computes $x W^\top$ (PyTorch's `Linear` convention), so we load the
# **transposes** of our stacked $W_Q, W_K, W_V$. Note 003's example has no biases and $W_O = I$.
#
# One trap: `nn.MultiheadAttention`'s boolean `attn_mask` uses the **opposite** convention to SDPA:
# `True` means "**not** allowed". Note 003's code (Listing 2) builds it correctly for that API, with
# `triu(ones, diagonal=1)`, which is `~causal_mask(3)`.

# %% nbgrader={"grade": false, "grade_id": "note003_torch", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
mha = nn.MultiheadAttention(embed_dim=4, num_heads=2, bias=False, batch_first=True).to(f64)
with torch.no_grad():
    mha.in_proj_weight.copy_(torch.cat([W_Q3, W_K3, W_V3], dim=1).T)
    mha.out_proj.weight.copy_(W_O3.T)

blocked = ~causal_mask(3)                                   # nn.MultiheadAttention: True = NOT allowed
out_t, w_t = mha(X3[None], X3[None], X3[None], attn_mask=blocked, average_attn_weights=False)
print("nn.MultiheadAttention output == ours:", torch.allclose(out_t[0], mha_out, atol=1e-12))
print("per-head weights == A^(1), A^(2):  ", torch.allclose(w_t[0], A3[0], atol=1e-12))

wrong_out, _ = mha(X3[None], X3[None], X3[None], attn_mask=causal_mask(3))   # SDPA convention passed by mistake
show("nn.MultiheadAttention with the SDPA-convention mask (wrong!)", wrong_out[0])


# %% [markdown]
# Passing our `True = may attend` mask to `nn.MultiheadAttention` silently flips it: "Life" then attends only to
# the *future*, and "awesome", whose every key is now blocked, gets `nan` (a softmax of a row of $-\infty$ is $0/0$).
# Always check which convention an API uses.
#
# ## Part E · The rest of the block: residual, LayerNorm, FFN (Book §2.7.1, §2.9, §2.10)
#
# Attention is only one sub-layer. Around it, a Transformer block adds:
#
# * a **residual connection**, $y = x + F(x)$: the sub-layer learns a *correction* to $x$ (Book §2.7.1);
# * a **position-wise feed-forward network**, $\mathrm{FFN}(x) = \phi(xW_1 + b_1)W_2 + b_2$, applied to each token
#   separately (Book §2.9; BERT uses $d_{ff} = 4d$ and $\phi = $ GELU);
# * **LayerNorm** over the $d$ features of each token (Book §2.10.2–2.10.4):
# $$\mathrm{LN}(z) = \gamma \odot \frac{z - \mu}{\sqrt{\sigma^2 + \varepsilon}} + \beta,\qquad
# \mu = \frac1d \sum_k z_k,\quad \sigma^2 = \frac1d \sum_k (z_k - \mu)^2 .$$
#
# ### Exercise 5 (2 points): `layer_norm`
#
# Write `layer_norm(x, gamma, beta, eps)`: $\mathrm{LN}$ over the last dimension of `x` (shape `(..., d)`), with
# `gamma` and `beta` of shape `(d,)` and the given `eps` (default `1e-5`). Note the **biased** variance (divide by
# $d$, not $d-1$) and $\varepsilon$ **inside** the square root: both are what `nn.LayerNorm` does, and both matter
# numerically. <!-- clause: value -->
#
# Compute the variance as the mean of the squared deviations $(z_k - \mu)^2$: the one-pass formula
# $\overline{z^2} - \mu^2$ is equal on paper but cancels catastrophically when $|\mu| \gg \sigma$ (a hidden test
# checks). <!-- clause: large-mean --> The result keeps the dtype of `x`, also when `gamma` and `beta` have another one
# (mixed precision: `float32` parameters with a `bfloat16` `x`). <!-- clause: keeps-dtype --> The arguments are not
# modified. <!-- clause: unchanged-input --> Library layer norms are off limits, also through their `torch.ops.aten`
# kernels or an equivalent (`F.group_norm` with one group, `F.instance_norm`, `F.batch_norm`, `F.rms_norm`): a hidden
# test switches them off. <!-- clause: no-library-norm -->

# %% nbgrader={"grade": false, "grade_id": "ex5_layernorm", "locked": false, "schema_version": 3, "solution": true, "task": false}
def layer_norm(x, gamma, beta, eps=1e-5):
    """LayerNorm over the last dimension of `x` (shape (..., d)); gamma and beta have shape (d,).

    Biased variance (mean of squared deviations), eps inside the square root, as nn.LayerNorm.
    Returns a tensor of the same shape and dtype as `x` (float16, bfloat16, float32, float64), also when gamma and
    beta have another dtype (e.g. float32 parameters with a bfloat16 x). Accurate when |mean| >> std (no one-pass
    E[x^2] - E[x]^2). x, gamma and beta are not modified.
    Do not call F.layer_norm / nn.LayerNorm / torch.layer_norm, their aten kernels, or group/instance/batch/rms norm.
    """
    ### BEGIN SOLUTION
    gamma, beta = gamma.to(x.dtype), beta.to(x.dtype)
    mu = x.mean(dim=-1, keepdim=True)
    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)
    return gamma * (x - mu) / torch.sqrt(var + eps) + beta
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex5_layernorm", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from course_utils.grading import check_close, check_shape, passed

x = torch.tensor([[1.0, 2.0, 3.0, 4.0]], dtype=torch.float64)
ones, zeros = torch.ones(4, dtype=torch.float64), torch.zeros(4, dtype=torch.float64)
expected = (x - 2.5) / math.sqrt(1.25 + 1e-5)                # mean 2.5, biased variance 1.25
check_close("layer_norm([1, 2, 3, 4]) with gamma=1, beta=0 (variance = mean of squared deviations = 1.25)",
            layer_norm(x, ones, zeros), expected, atol=1e-9)

g = torch.Generator().manual_seed(0)
x = torch.randn(2, 3, 8, generator=g, dtype=torch.float64) * 3 + 1
gamma = torch.randn(8, generator=g, dtype=torch.float64)
beta = torch.randn(8, generator=g, dtype=torch.float64)
ln = nn.LayerNorm(8).to(torch.float64)
with torch.no_grad():
    ln.weight.copy_(gamma)
    ln.bias.copy_(beta)
    ref = ln(x)
out = layer_norm(x, gamma, beta)
check_shape("layer_norm(x) for x of shape (2, 3, 8)", out, (2, 3, 8))
check_close("layer_norm vs nn.LayerNorm (normalise each token over its last dimension)", out, ref, atol=1e-9)

tiny = torch.tensor([[0.0, 0.001, 0.002, 0.003], [5.0, 5.0, 5.0, 5.0]], dtype=torch.float64)
check_close("layer_norm of a tiny-variance row and a constant row (eps goes inside the square root)",
            layer_norm(tiny, ones, zeros), F.layer_norm(tiny, (4,)), atol=1e-9)
passed()
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import record, switched_off
record("module of layer_norm (it must be defined in this notebook)", layer_norm.__module__)  # clause: defined-here
g = torch.Generator().manual_seed(99)
xh = torch.randn(2, 3, 4, 5, generator=g, dtype=torch.float64) * 0.01 + 7.0
gh = torch.randn(5, generator=g, dtype=torch.float64)
bh = torch.randn(5, generator=g, dtype=torch.float64)
x32 = torch.randn(6, 16, generator=g) * 50
g32, b32 = torch.rand(16, generator=g) + 0.5, torch.randn(16, generator=g)
x_off = torch.randn(5, 16, generator=g) + 1000.0                      # float32, |mean| >> std
x_bf, x_fp = (torch.randn(4, 12, generator=g) * 3 + 1).to(torch.bfloat16), (torch.randn(4, 12, generator=g) * 3 + 1).to(torch.float16)
g12, b12 = torch.rand(12, generator=g) + 0.5, torch.randn(12, generator=g)   # float32 parameters (mixed precision)
with switched_off("torch.nn.functional.layer_norm", "torch.layer_norm", "torch.native_layer_norm",
                  "torch.nn.LayerNorm.forward", "torch.ops.aten.layer_norm", "torch.ops.aten.native_layer_norm",
                  "torch.nn.functional.group_norm", "torch.group_norm", "torch.native_group_norm",
                  "torch.ops.aten.group_norm", "torch.ops.aten.native_group_norm", "torch.nn.GroupNorm.forward",
                  "torch.nn.functional.instance_norm", "torch.instance_norm", "torch.ops.aten.instance_norm",
                  "torch.nn.functional.batch_norm", "torch.batch_norm", "torch.native_batch_norm",
                  "torch.ops.aten.batch_norm", "torch.ops.aten.native_batch_norm",
                  "torch.nn.functional.rms_norm", "torch.rms_norm", "torch.ops.aten.rms_norm",
                  functions=[layer_norm],
                  hint="layer_norm must not call PyTorch's layer norm (directly or through a name that refers "
                       "to it): compute the mean and the variance yourself."):
    o1 = layer_norm(xh, gh, bh, eps=1e-3)
    o2 = layer_norm(xh, gh, bh)
    o3 = layer_norm(x32, g32, b32)
    o_off = layer_norm(x_off, g32, b32)
    o_bf, o_fp = layer_norm(x_bf, g12, b12), layer_norm(x_fp, g12.half(), b12.half())
    o_64 = layer_norm(xh, gh.float(), bh.float())
# the arguments after the calls: layer_norm must not modify x, gamma or beta (x -= mu changes the caller's tensor)
for _name, _t in zip(("x float64 (2, 3, 4, 5)", "gamma float64 (5,)", "beta float64 (5,)", "x float32 (6, 16)",
                      "gamma float32 (16,)", "beta float32 (16,)", "x float32 (5, 16) with mean 1000",
                      "x bfloat16 (4, 12)", "x float16 (4, 12)", "gamma float32 (12,)", "beta float32 (12,)"),
                     (xh, gh, bh, x32, g32, b32, x_off, x_bf, x_fp, g12, b12)):
    record(f"{_name} after layer_norm (not modified in place)", _t)  # clause: unchanged-input
# (every output below was computed with the library norms switched off)
# clause: large-mean
record("layer_norm of float32 rows with |mean| = 1000 >> std = 1 (variance = mean of squared deviations, not "
       "mean(x**2) - mean(x)**2)", o_off, atol=2e-3)
record("layer_norm of a bfloat16 x with float32 gamma and beta (a bfloat16 result)", o_bf, atol=5e-2, rtol=2e-2)  # clause: keeps-dtype
record("layer_norm of a float16 x with float16 gamma and beta (a float16 result)", o_fp, atol=5e-2, rtol=2e-2)  # clause: keeps-dtype
record("layer_norm of a float64 x with float32 gamma and beta (a float64 result)", o_64, atol=1e-6)  # clause: keeps-dtype
record("layer_norm of a float64 (2, 3, 4, 5) x, d = 5, eps = 1e-3", o1, atol=1e-9)  # clause: value, no-library-norm
record("layer_norm of a float64 (2, 3, 4, 5) x, d = 5, default eps", o2, atol=1e-8)  # clause: value
record("layer_norm of a float32 (6, 16) x (a float32 result)", o3, atol=1e-4)  # clause: value
### BEGIN REFERENCE
from course_utils.grading import expect
expect("layer_norm of float32 rows with |mean| = 1000 >> std = 1 (variance = mean of squared deviations, not "
       "mean(x**2) - mean(x)**2)", F.layer_norm(x_off, (16,), g32, b32), atol=2e-3)
expect("layer_norm of a bfloat16 x with float32 gamma and beta (a bfloat16 result)",
       F.layer_norm(x_bf.double(), (12,), g12.double(), b12.double()).to(torch.bfloat16), atol=5e-2, rtol=2e-2)
expect("layer_norm of a float16 x with float16 gamma and beta (a float16 result)",
       F.layer_norm(x_fp.double(), (12,), g12.double(), b12.double()).to(torch.float16), atol=5e-2, rtol=2e-2)
expect("layer_norm of a float64 x with float32 gamma and beta (a float64 result)",
       F.layer_norm(xh, (5,), gh.float().double(), bh.float().double()), atol=1e-6)
mu_h = xh.mean(-1, keepdim=True)
var_h = xh.var(-1, unbiased=False, keepdim=True)
expect("layer_norm of a float64 (2, 3, 4, 5) x, d = 5, eps = 1e-3", gh * (xh - mu_h) / torch.sqrt(var_h + 1e-3) + bh, atol=1e-9)
expect("layer_norm of a float64 (2, 3, 4, 5) x, d = 5, default eps", F.layer_norm(xh, (5,), gh, bh, eps=1e-5), atol=1e-8)
expect("layer_norm of a float32 (6, 16) x (a float32 result)", F.layer_norm(x32, (16,), g32, b32), atol=1e-4)
### END REFERENCE
### END HIDDEN TESTS

# %% [markdown]
# **Verify against `nn.LayerNorm`** and look at what LayerNorm does to note 003's output: after the residual
# $X + \mathrm{MultiHead}(X)$ and LayerNorm ($\gamma = 1, \beta = 0$), every token has mean 0 and variance 1
# (up to $\varepsilon$) over its 4 features. This is exactly BERT's post-norm sub-layer,
# $\mathrm{LN}(x + \mathrm{Attention}(x))$.

# %% nbgrader={"grade": false, "grade_id": "ln_verify", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
ln4 = nn.LayerNorm(4).to(f64)                               # gamma = 1, beta = 0 at initialisation
residual = X3 + mha_out                                     # Book §2.7.1: add, do not overwrite
H = layer_norm(residual, ln4.weight, ln4.bias)
print("layer_norm == nn.LayerNorm:", torch.allclose(H, ln4(residual), atol=1e-12))
show("X + MultiHead(X)", residual)
show("LN(X + MultiHead(X))", H)
show("per-token mean", H.mean(-1))
show("per-token variance (biased)", H.var(-1, unbiased=False))

# %% [markdown]
# ### The FFN does not mix tokens
#
# Book §2.9 stresses that the FFN is applied to each token **independently**: attention decides *which* tokens
# contribute, the FFN decides *how* each resulting vector is transformed. Two quick checks: running the FFN on the
# whole sequence equals running it on each token alone; and permuting the tokens just permutes the outputs.

# %% nbgrader={"grade": false, "grade_id": "ffn_demo", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
torch.manual_seed(0)
d_model, d_ff = 4, 16                                       # d_ff = 4 d, as in BERT (768 -> 3072)
W1, b1 = torch.randn(d_model, d_ff, dtype=f64) / 2, torch.randn(d_ff, dtype=f64) / 10
W2, b2 = torch.randn(d_ff, d_model, dtype=f64) / 4, torch.randn(d_model, dtype=f64) / 10


def ffn(x):
    """Position-wise FFN (Book §2.9.1): GELU(x W1 + b1) W2 + b2, on the last dimension."""
    return F.gelu(x @ W1 + b1) @ W2 + b2


whole = ffn(H)
one_by_one = torch.stack([ffn(H[i]) for i in range(3)])
perm = torch.tensor([2, 0, 1])
print("FFN(sequence) == FFN(token by token):", torch.allclose(whole, one_by_one, atol=1e-12))
print("FFN(permuted tokens) == permuted FFN:", torch.allclose(ffn(H[perm]), whole[perm], atol=1e-12))


# %% [markdown]
# ### Post-norm (BERT) and pre-norm (GPT-2 and most modern models)
#
# Book §2.10.5 contrasts the two ways to place LayerNorm around a sub-layer $F$ (attention or FFN):
#
# | | formula | used by |
# |---|---|---|
# | post-norm | $y = \mathrm{LN}(x + F(x))$ | original Transformer, BERT (note 002's Theorem 1) |
# | pre-norm | $y = x + F(\mathrm{LN}(x))$ | GPT-2, note 003's GPT, most recent LLMs |
#
# Below, both blocks are written from your functions and compared with `nn.TransformerEncoderLayer`
# (`norm_first=False` is post-norm, `norm_first=True` is pre-norm), loaded with the same random weights.

# %% nbgrader={"grade": false, "grade_id": "blocks", "locked": true, "schema_version": 3, "solution": false, "task": false}
def attention_sublayer(x, layer, mask=None):
    """Multi-head self-attention of an nn.TransformerEncoderLayer, from your functions. x: (B, n, d)."""
    att = layer.self_attn
    w_q, w_k, w_v = att.in_proj_weight.chunk(3)             # PyTorch stores (out, in): use x @ w.T
    b_q, b_k, b_v = att.in_proj_bias.chunk(3)
    h = att.num_heads
    q, k, v = (split_heads(x @ w.T + b, h) for w, b in [(w_q, b_q), (w_k, b_k), (w_v, b_v)])
    out, _ = scaled_dot_product_attention(q, k, v, mask=mask)
    return merge_heads(out) @ att.out_proj.weight.T + att.out_proj.bias


def ffn_sublayer(x, layer):
    return F.gelu(x @ layer.linear1.weight.T + layer.linear1.bias) @ layer.linear2.weight.T + layer.linear2.bias


def post_norm_block(x, layer, mask=None):
    h = layer_norm(x + attention_sublayer(x, layer, mask), layer.norm1.weight, layer.norm1.bias, layer.norm1.eps)
    return layer_norm(h + ffn_sublayer(h, layer), layer.norm2.weight, layer.norm2.bias, layer.norm2.eps)


def pre_norm_block(x, layer, mask=None):
    h = x + attention_sublayer(layer_norm(x, layer.norm1.weight, layer.norm1.bias, layer.norm1.eps), layer, mask)
    return h + ffn_sublayer(layer_norm(h, layer.norm2.weight, layer.norm2.bias, layer.norm2.eps), layer)


def make_layer(d_model, n_heads, norm_first, seed):
    torch.manual_seed(seed)
    layer = nn.TransformerEncoderLayer(d_model, n_heads, dim_feedforward=4 * d_model, dropout=0.0,
                                       activation="gelu", batch_first=True, norm_first=norm_first)
    with torch.no_grad():                                   # non-trivial LayerNorm parameters and biases
        for p in layer.parameters():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn_like(p))
    return layer.to(f64).eval()


# %% nbgrader={"grade": false, "grade_id": "blocks_verify", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
gen = torch.Generator().manual_seed(5)
xb = torch.randn(2, 6, 16, generator=gen, dtype=f64)
with torch.no_grad():
    for norm_first, block in [(False, post_norm_block), (True, pre_norm_block)]:
        layer = make_layer(16, 4, norm_first, seed=0)
        ref = layer(xb)
        ref_causal = layer(xb, src_mask=~causal_mask(6))    # nn.TransformerEncoderLayer: True = NOT allowed
        same = torch.allclose(block(xb, layer), ref, atol=1e-10)
        same_causal = torch.allclose(block(xb, layer, mask=causal_mask(6)), ref_causal, atol=1e-10)
        print(f"{block.__name__:<16} == TransformerEncoderLayer(norm_first={norm_first}): {same}, with causal mask: {same_causal}")

# %% [markdown]
# Why did modern models move to pre-norm? Stack 24 blocks (12 in CI mode), each built by `make_layer`
# (PyTorch's default initialisation, plus small random offsets on the biases and LayerNorm parameters), and follow
# the size of the residual stream (root-mean-square of the hidden state) layer after layer. In the post-norm stack every block ends
# with a LayerNorm, so the scale is reset to about 1 each time; in the pre-norm stack the residual stream is never
# normalised: each block *adds* its output, the scale grows with depth, and an identity path runs from the input
# to the output untouched (which is what keeps gradients healthy in deep stacks). This is also why pre-norm models
# such as GPT-2 apply one final LayerNorm (`ln_f`) before the output head.

# %% nbgrader={"grade": false, "grade_id": "depth_demo", "locked": true, "schema_version": 3, "solution": false, "task": false}
depth, d_model = (12 if CI_MODE else 24), 64
gen = torch.Generator().manual_seed(0)
x0 = torch.randn(1, 32, d_model, generator=gen, dtype=f64)
rms = {}
with torch.no_grad():
    for name, norm_first, block in [("post-norm", False, post_norm_block), ("pre-norm", True, pre_norm_block)]:
        x, curve = x0, [x0.pow(2).mean().sqrt().item()]
        for layer_idx in range(depth):
            x = block(x, make_layer(d_model, 8, norm_first, seed=100 + layer_idx))
            curve.append(x.pow(2).mean().sqrt().item())
        rms[name] = curve
step = depth // 4
print(f"RMS of the residual stream after {list(range(0, depth + 1, step))} blocks:")
for name, curve in rms.items():
    print(f"  {name:<9}", [round(c, 2) for c in curve[::step]])

fig, ax = plt.subplots(figsize=(6, 3.5))
for name, curve in rms.items():
    ax.plot(range(depth + 1), curve, marker="o", ms=3, label=name)
ax.set_xlabel("number of blocks applied")
ax.set_ylabel("RMS of hidden state")
ax.set_title("Residual stream scale: post-norm resets it, pre-norm lets it grow")
ax.grid(alpha=0.3)
ax.legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Part F · Theory, checked numerically (note 002)
#
# ### Attention is a soft dictionary lookup
#
# A Python dictionary returns the value of the key that **matches** the query. Attention returns a weighted average of
# **all** values, weighted by how well each key matches: $o = \sum_i \mathrm{softmax}(q\cdot k_i/\sqrt{d_k})\, v_i$.
# Add a temperature $\tau$ to the softmax, $\mathrm{softmax}(q\cdot k_i / (\tau\sqrt{d_k}))$: as $\tau \to 0$ the
# weights concentrate on $\arg\max_i q\cdot k_i$ and attention becomes the hard lookup $v_{\arg\max}$.
#
# Our dictionary: the book's four embeddings (Book §2.8.3) are the keys, and each value is the one-hot vector of its
# token, so the output reads directly as "how much of each entry was retrieved". For the query "reads" $=(1,1)$ the
# scores are $q\cdot k = (1, 1, 2, 0)$: a unique best key. For the query "teddy" $=(1,0)$ they are $(1, 0, 1, -1)$:
# a **tie** between teddy and reads: the limit is then the average of the tied values, not a single one (while
# `argmax` silently breaks the tie by picking the first index, teddy).

# %% nbgrader={"grade": false, "grade_id": "soft_lookup", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
keys = E                                                    # 4 x 2, the book's embedding table
values = torch.eye(4, dtype=f64)                            # one-hot: output = retrieved share of each entry


def soft_lookup(query, tau):
    out, _ = scaled_dot_product_attention(query[None] / tau, keys, values)
    return out[0]


def hard_lookup(query):
    return values[torch.argmax(keys @ query)]


temperatures = [2.0, 1.0, 0.5, 0.1, 0.02]
for word in ["reads", "teddy"]:
    query = E[vocab.index(word)]
    print(f"query = {word!r}: scores q.k = {(keys @ query).tolist()}, hard lookup (argmax) -> {vocab[int(torch.argmax(keys @ query))]}")
    for tau in temperatures:
        print(f"  tau = {tau:<5} soft lookup = {fmt(soft_lookup(query, tau))}")
print("reads: soft lookup at tau = 0.02 equals the hard lookup:",
      torch.allclose(soft_lookup(E[2], 0.02), hard_lookup(E[2]), atol=1e-6))

# %% nbgrader={"grade": false, "grade_id": "soft_lookup_plot", "locked": true, "schema_version": 3, "solution": false, "task": false}
taus = np.logspace(-2, 1, 60)
fig, axes = plt.subplots(1, 2, figsize=(10, 3.4), sharey=True)
for ax, word in zip(axes, ["reads", "teddy"]):
    queries = E[vocab.index(word)] / torch.tensor(taus)[:, None, None]      # (60, 1, 2): one query per temperature
    w = scaled_dot_product_attention(queries, keys, values)[0][:, 0].numpy()  # one-hot values: output = weights
    for j, (key_word, style) in enumerate(zip(vocab, ["-", "--", ":", "-."])):
        ax.plot(taus, w[:, j], style, lw=2, label=f"weight on '{key_word}'")
    ax.set_xscale("log")
    ax.set_xlabel("temperature τ (log scale)")
    ax.set_title(f"query '{word}'")
    ax.grid(alpha=0.3)
axes[0].set_ylabel("attention weight")
axes[1].legend(fontsize=8)
fig.suptitle("Soft lookup → hard lookup (argmax) as τ → 0; a tie splits the weight")
plt.tight_layout()
plt.show()

# %% [markdown]
# ### The output is never longer than the longest value
#
# Note 002 (Corollary 1): since the weights $\alpha_{ij}$ are non-negative and sum to 1, $o_i$ is a *convex combination*
# of the values, so by the triangle inequality
# $$\|o_i\| \le \sum_j \alpha_{ij}\|v_j\| \le \max_j \|v_j\| .$$
# (A small correction to the note's proof: step 3 justifies the last inequality by $\alpha_{ij}\le 1$, but what is
# needed is $\sum_j \alpha_{ij} = 1$; weights that are each $\le 1$ but sum to more than 1 break the bound, as the
# last line below shows.) We check the bound on thousands of random cases, with and without masks, and note that it is
# attained when the weights are one-hot (temperature → 0).

# %% nbgrader={"grade": false, "grade_id": "norm_bound", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
gen = torch.Generator().manual_seed(0)
n_cases, worst, holds = 0, 0.0, True
for n_keys in [1, 2, 5, 17, 64]:
    q = torch.randn(500, 1, 8, generator=gen, dtype=f64) * torch.rand(500, 1, 1, generator=gen, dtype=f64) * 10
    k = torch.randn(500, n_keys, 8, generator=gen, dtype=f64)
    v = torch.randn(500, n_keys, 6, generator=gen, dtype=f64) * torch.exp(torch.randn(500, n_keys, 1, generator=gen, dtype=f64))
    m = torch.rand(500, 1, n_keys, generator=gen) > 0.5
    m[..., 0] = True
    for mask in [None, m]:
        o, a = scaled_dot_product_attention(q, k, v, mask=mask)
        norm_o = o.norm(dim=-1)[:, 0]
        mid = (a[:, 0] * v.norm(dim=-1)).sum(-1)            # sum_j alpha_j ||v_j||
        vmax = v.norm(dim=-1).amax(-1)
        holds &= bool((norm_o <= mid + 1e-12).all() and (mid <= vmax + 1e-12).all())
        worst = max(worst, float((norm_o / vmax).max()))
        n_cases += 500
print(f"||o|| <= sum_j alpha_j ||v_j|| <= max_j ||v_j|| in all {n_cases} random cases: {holds}")
print("largest ratio ||o|| / max ||v|| is at most 1:", worst <= 1 + 1e-12)

o_hard = soft_lookup(E[2], 0.01)                              # weights one-hot on 'reads'
print("one-hot weights attain the bound (||o|| == max ||v||):", abs(o_hard.norm().item() - 1.0) < 1e-9)
w_not_convex = torch.full((4,), 0.9, dtype=f64)               # each weight <= 1, but they sum to 3.6
print("weights all 0.9 (sum 3.6): ||o|| / max||v|| =", round((w_not_convex @ torch.ones(4, 3, dtype=f64)).norm().item() / math.sqrt(3), 4))
assert holds

# %% [markdown]
# ### Cost: $O(N^2)$ time and memory
#
# Note 002 (Lemma 3): for a sequence of length $N$, $QK^\top$ is an $N \times N$ matrix. Computing it costs
# $N^2 d_k$ multiply-adds, the product with $V$ another $N^2 d_v$, and **storing** it takes $N^2$ numbers per head.
# First the exact operation count, using PyTorch's FLOP counter on your function (one head, $d = 64$):

# %% nbgrader={"grade": false, "grade_id": "flops", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
from torch.utils.flop_counter import FlopCounterMode

d_head = 64
for N in [128, 256, 512, 1024]:
    q, k, v = (torch.randn(1, 1, N, d_head) for _ in range(3))
    with FlopCounterMode(display=False) as counter:
        scaled_dot_product_attention(q, k, v)
    flops = counter.get_total_flops()
    print(f"N = {N:>5}: {flops:>12,} FLOPs = {flops / (N * N * d_head):.1f} x N^2 d")

# %% [markdown]
# $4N^2d$: two matrix products of $N^2 d$ multiply-adds each (2 FLOPs per multiply-add). Doubling $N$ quadruples the work.
#
# Now wall-clock time and memory. For memory we count the bytes of every tensor PyTorch allocates during the call
# and keep the peak of the live total (a small `TorchDispatchMode`; deterministic, no operating-system noise). We
# compare your function, which materialises the $N\times N$ weights, with `F.scaled_dot_product_attention`, whose
# fused CPU kernel processes keys in blocks and never stores the full matrix (the idea of FlashAttention).
# Timings depend on your machine and are not checked; we time on one thread and keep the best of a few runs, and CI
# mode uses shorter sequences.

# %% nbgrader={"grade": false, "grade_id": "peak_memory_tool", "locked": true, "schema_version": 3, "solution": false, "task": false}
import weakref

from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


class PeakTensorMemory(TorchDispatchMode):
    """Peak bytes of tensors allocated inside the `with` block (tensors that existed before are not counted)."""

    def __enter__(self):
        self.live, self.current, self.peak = {}, 0, 0
        return super().__enter__()

    def _release(self, key):
        self.live[key][1] -= 1
        if self.live[key][1] == 0:
            self.current -= self.live.pop(key)[0]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {t.untyped_storage().data_ptr() for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)}
        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor):
                continue
            key = t.untyped_storage().data_ptr()
            if key in self.live:
                self.live[key][1] += 1
            elif key in inputs:                             # a view of an existing tensor: no new memory
                continue
            else:
                self.live[key] = [t.untyped_storage().nbytes(), 1]
                self.current += self.live[key][0]
                self.peak = max(self.peak, self.current)
            weakref.finalize(t, self._release, key)
        return out


# %% nbgrader={"grade": false, "grade_id": "complexity", "locked": true, "schema_version": 3, "solution": false, "task": false}
def best_time(fn, repeats):
    """Best of `repeats` runs after a warm-up, on ONE thread (so the curve shows the algorithm, not the thread pool)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        fn()                                                # warm-up
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    finally:
        torch.set_num_threads(threads)
    return min(times)


lengths = [128, 256, 512, 1024, 2048] if CI_MODE else [128, 256, 512, 1024, 2048, 4096, 8192]
repeats = 5 if CI_MODE else 7
impls = {"your SDPA (stores N×N)": lambda q, k, v: scaled_dot_product_attention(q, k, v)[0],
         "torch SDPA (fused)": F.scaled_dot_product_attention}
seconds = {name: [] for name in impls}
peak_mib = {name: [] for name in impls}
with torch.no_grad():
    for N in lengths:
        q, k, v = (torch.randn(1, 1, N, d_head) for _ in range(3))
        for name, fn in impls.items():
            seconds[name].append(best_time(lambda: fn(q, k, v), repeats))
            with PeakTensorMemory() as tracker:
                fn(q, k, v)
            peak_mib[name].append(tracker.peak / 2**20)


def loglog_slope(xs, ys):
    """Exponent p of the best fit y ~ x^p over the longest half of the lengths."""
    half = len(xs) // 2
    return float(np.polyfit(np.log(xs[half:]), np.log(ys[half:]), 1)[0])


for name in impls:
    print(f"{name:<24} time ~ N^{loglog_slope(lengths, seconds[name]):.2f}   peak memory ~ N^{loglog_slope(lengths, peak_mib[name]):.2f}")
print("peak MiB, your SDPA :", [round(m, 2) for m in peak_mib["your SDPA (stores N×N)"]])
print("peak MiB, torch SDPA:", [round(m, 2) for m in peak_mib["torch SDPA (fused)"]])
print("one fp32 N×N matrix:", [round(N * N * 4 / 2**20, 2) for N in lengths])

fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
ref_n = np.array(lengths, dtype=float)
for ax, data, ylabel in [(axes[0], seconds, "time, best of runs (s)"), (axes[1], peak_mib, "peak tensor memory (MiB)")]:
    for name, ys in data.items():
        ax.plot(lengths, ys, marker="o", label=name)
    anchor = data["your SDPA (stores N×N)"][-1]
    ax.plot(ref_n, anchor * (ref_n / ref_n[-1]) ** 2, "k--", lw=1, label="∝ N² (reference)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length N")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
axes[0].set_title("Time")
axes[1].set_title("Memory")
fig.suptitle(f"Self-attention cost, one head, d = {d_head} (timings depend on the machine)")
plt.tight_layout()
plt.show()

# %% [markdown]
# Read the plot: memory of the textbook formula follows the $N^2$ line exactly (about two $N\times N$ matrices are
# alive at the peak, e.g. the scores and the weights computed from them), while the fused kernel's memory grows only like $N$
# (it still does $O(N^2)$ work, but never stores the whole matrix). Time is dominated by fixed overheads for short
# sequences and grows at least like $N^2$ once the $N\times N$ products dominate; when those matrices no longer fit in
# the CPU cache, the textbook version can even grow faster than $N^2$ for a while, because it streams several
# $N\times N$ matrices through main memory.

# %% [markdown]
# ## What this chapter leaves out
#
# This chapter covers Book §2.6–§2.10 in full, with the three companion notes. What it leaves out or
# simplifies, on purpose:
#
# * **§2.10.5's claim that pre-norm eases the flow of gradients** in deep stacks: Part E follows the
#   forward scale of the residual stream, not gradients or training stability, which would need
#   training deep models for many steps.
# * **Learned projections in the hand examples.** As in §2.8.5, $W_Q = W_K = W_V = I$ there; other
#   projections appear only in the checks against PyTorch (random weights, not learned ones) and
#   learned ones in chapter 02's BERT.
# * **Fused attention kernels** (FlashAttention, which the book names only in §4.2.3): Part F measures
#   the memory of PyTorch's fused kernel but does not implement its tiled online softmax, a GPU-kernel
#   engineering topic.
# * **Dropout** inside the block is set to zero: it only matters in training, and the book leaves it
#   out.
# * **RMSNorm**, which most recent decoders use instead of LayerNorm, is not implemented (chapter 07
#   counts its parameters, chapter 08's configuration table shows it): the book treats LayerNorm only.

# %% [markdown] nbgrader={"grade": false, "grade_id": "written_q1_question", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Reflect
#
# **Written question (3 points, manually graded).** Answer in a few sentences each, quoting numbers from **your**
# outputs above.
#
# 1. Note 001 says masking "zeros the scores" of future tokens. What weights does token $x_1$ then give to the future,
#    and why is $-\infty$ (not 0) the right value? What did `nn.MultiheadAttention` output for "awesome" when it
#    received the `True = may attend` mask, and why?
# 2. Report the fitted exponents for time and memory of your implementation and of `F.scaled_dot_product_attention`.
#    Using your memory measurements, estimate how much memory the weights of **one** head would need at
#    $N = 32\,768$ tokens in `float32`, and for a model with 32 heads. Why is the fused kernel's memory curve so
#    different, and does it change the $O(N^2)$ *time*?

# %% [markdown] nbgrader={"grade": true, "grade_id": "written_q1", "locked": false, "points": 3, "schema_version": 3, "solution": true, "task": false}
# **Model answer (for the instructor; students see "YOUR ANSWER HERE").**
#
# 1. With future scores set to 0, token $x_1$'s row is softmax(1.0, 0, 0) = [0.576, 0.212, 0.212]: it puts 0.424 of
#    its attention on tokens 2 and 3, so the model sees the future (the masked row 3 is unchanged: 0.229, 0.309,
#    0.461). A score of 0 gives $e^0 = 1$, a normal weight; only $-\infty$ gives $e^{-\infty} = 0$ and removes the key
#    from the normalisation. Passing `causal_mask(3)` to `nn.MultiheadAttention`, which reads `True` as *blocked*,
#    flipped the mask: "Life" attended only to the future, and "awesome" had all keys blocked, so its row was
#    softmax of all $-\infty$ = 0/0 and the output row was `nan`.
# 2. Memory exponent ≈ 2.0 for the textbook implementation (peak ≈ 2 N² · 4 bytes: e.g. 32 MiB at N = 2048 where one
#    N×N fp32 matrix is 16 MiB) and ≈ 1.0 for the fused kernel; time exponent approaches 2 for both at large N
#    (smaller at short N, where overheads dominate). One N×N fp32 matrix at N = 32 768 is 32 768² · 4 B = 4 GiB per
#    head (≈ 8 GiB at the measured peak of two matrices), 128 GiB for 32 heads — per layer and per sequence. The fused
#    kernel streams over key blocks with an online softmax, so it never stores the matrix: memory O(N), but it still
#    computes all N² scores, so time stays O(N² d).

# %% [markdown]
# ## Summary
#
# * Self-attention is $\mathrm{softmax}(QK^\top/\sqrt{d_k} + M)\,V$: scores, scale, mask, normalise per row, mix values.
#   You rebuilt it and matched `F.scaled_dot_product_attention` and `nn.MultiheadAttention` exactly.
# * Book §2.8's "teddy reads" and note 003's "Life is awesome" numbers are right; **note 001's causal weights are not**
#   (correct rows: [0.401, 0.599] and [0.229, 0.309, 0.461]), and masking means $-\infty$, not zeroing.
# * Boolean masks come in two conventions: SDPA (`True` = attend) and `nn.MultiheadAttention` /
#   `nn.TransformerEncoderLayer` (`True` = blocked).
# * Multi-head attention is one big projection, a reshape + transpose (split), attention per head, and the inverse (merge).
# * LayerNorm normalises each token over its features (biased variance, $\varepsilon$ inside the root); BERT uses post-norm,
#   GPT-style models pre-norm, whose residual stream grows with depth.
# * Attention is a soft lookup that becomes argmax as the temperature goes to 0; its output is a convex combination of
#   the values; and its cost is $O(N^2)$ in time and, unless the kernel is fused, in memory.
#
# **Next:** chapter 04 opens GPT-2's output head and reads the model's intermediate layers with the logit lens.
