# %% [markdown]
# # Chapter 5 — Rotary position embeddings (RoPE)
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/llm-course/llm-course/blob/main/notebooks/05_rope/05_rope.ipynb)
#
# **Goal.** Modern decoders (LLaMA, Qwen, Gemma, ...) do not *add* a position vector to the token
# embedding. They *rotate* the queries and keys by an angle that grows with the position, so that
# the dot product $\mathbf q_i^\top \mathbf k_j$ ends up depending on the **distance** $j-i$ and
# not on where the two tokens sit. In this chapter you rebuild RoPE from the 2-D rotation up,
# reproduce the book's numbers exactly, and reconcile the book's formulation with the one
# `transformers` uses.
#
# **Book sections.** Book §3.3 (the mini-corpus experiment), §3.4 (RoPE), §3.5 (effect on the
# logits), §3.6 (reading the heatmap), and the chapter's *consolidation exercise*.
#
# **What you will do.**
#
# | | exercise | points |
# |---|---|---|
# | 1 | `rotate_2d`: the 2-D rotation of Book §3.4.3 | 2 |
# | 2 | `rope_apply`: RoPE on pairs of dimensions, Book §3.4.5 | 3 |
# | 3 | `interleaved_to_half`: the permutation between the book's and `transformers`' conventions | 2 |
# | 4 | written question: the consolidation exercise, with evidence (graded by hand) | 3 |
#
# Define each graded function in its answer cell in this notebook (helpers of your own are fine): the hidden
# tests check where each one is defined. <!-- clause-all: defined-here -->
#
# Everything here is exact arithmetic on tiny tensors: no model is downloaded, and every number
# is the same on every machine.

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

import matplotlib.pyplot as plt
import numpy as np
import torch
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb, rotate_half

from course_utils.plotting import heatmap, line_plot


def show(name, m, digits=4):
    """Print a matrix rounded to `digits` decimals (no '-0.0000')."""
    a = np.round(np.asarray(m, dtype=np.float64), digits) + 0.0
    rows = ["  [" + ", ".join(f"{v:{digits + 4}.{digits}f}" for v in row) + "]" for row in np.atleast_2d(a)]
    print(f"{name}:\n" + "\n".join(rows))


# %% [markdown]
# ## 1. Run and observe: the book's mini-corpus (Book §3.3)
#
# The book fixes a tiny, fully controlled experiment: three "tokens" whose embeddings are written
# by hand in $d = 4$ dimensions, and no learned projections at all: $\mathbf Q = \mathbf K = \mathbf X$.
# Whatever changes in the logits below is caused by RoPE alone. The positions are
# `torch.arange(3)` $= [0, 1, 2]$.
#
# We work in `float64` so that "equal" means equal to ~15 digits.

# %% nbgrader={"grade": false, "grade_id": "mini_corpus", "locked": true, "schema_version": 3, "solution": false, "task": false}
tokens = ["teddy", "bear", "reads"]
X = torch.tensor([
    [1.0, 0.0, 1.0, 0.0],   # teddy
    [1.0, 1.0, 0.0, 1.0],   # bear
    [0.0, 1.0, -1.0, 1.0],  # reads
], dtype=torch.float64)
Q, K = X.clone(), X.clone()
positions = torch.arange(len(tokens))


def attn_logits(Q, K):
    """L = Q K^T / sqrt(d) (Book §3.5); no softmax yet."""
    return Q @ K.transpose(-1, -2) / math.sqrt(Q.shape[-1])


# %% [markdown]
# The logits **without** RoPE are plain scaled dot products. The book prints them in §3.5.1; the
# next cell recomputes them and compares with the printed matrix (the "book value").

# %% nbgrader={"grade": false, "grade_id": "check_plain_logits", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
BOOK_PLAIN = [[1.0, 0.5, -0.5], [0.5, 1.5, 1.0], [-0.5, 1.0, 1.5]]                            # book value, §3.5.1
BOOK_ROPE = [[1.0, -0.1556, -0.9645], [-0.1556, 1.5, 0.3444], [-0.9645, 0.3444, 1.5]]     # book value, §3.5.2

logits_plain = attn_logits(Q, K)
show("logits without RoPE", logits_plain)
print("equal to the book's matrix (to 4 decimals):", np.allclose(logits_plain, BOOK_PLAIN, atol=5e-5))


# %% [markdown]
# Now let us "just use the library". Hugging Face `transformers` implements RoPE for LLaMA in two
# pieces: `LlamaRotaryEmbedding` turns positions into `cos` and `sin` tables, and
# `apply_rotary_pos_emb(q, k, cos, sin)` rotates queries and keys. The small wrapper below calls
# them on tensors shaped `(..., seq, d)`.

# %% nbgrader={"grade": false, "grade_id": "library_rope", "locked": true, "schema_version": 3, "solution": false, "task": false}
def library_rope(x, positions, base=10000.0):
    """RoPE exactly as transformers' LLaMA applies it, for x of shape (..., seq, d)."""
    d, seq = x.shape[-1], x.shape[-2]
    config = LlamaConfig(hidden_size=d, num_attention_heads=1, head_dim=d,
                         rope_parameters={"rope_type": "default", "rope_theta": base})
    cos, sin = LlamaRotaryEmbedding(config)(x, positions[None])      # each (1, seq, d)
    x4 = x.reshape(-1, 1, seq, d)                                     # (batch, heads, seq, d)
    q_rot, _ = apply_rotary_pos_emb(x4, x4, cos, sin)                 # k = q here; we keep q
    return q_rot.reshape(x.shape)


lib = library_rope(X, positions)
show("logits with the library's RoPE", attn_logits(lib, lib))
show("book value (§3.5.2)", BOOK_ROPE)
print("library == book:", np.allclose(attn_logits(lib, lib), BOOK_ROPE, atol=5e-5))


# %% [markdown]
# **A puzzle.** Same inputs, same base $10\,000$, same positions, and the library disagrees with the
# book in every off-diagonal entry, in two of them ($L_{0,1}$, $L_{0,2}$) even in sign. Is the book wrong? Is the library? Keep this in
# mind: Section 8 resolves it exactly. First we rebuild RoPE from its single ingredient.
#
# ## 2. Derive: the 2-D rotation (Book §3.4.3)
#
# A pair $(x_1, x_2)$ is rotated counter-clockwise by the angle $\theta$ (in radians):
#
# $$R(\theta)\begin{bmatrix}x_1\\x_2\end{bmatrix}
#   = \begin{bmatrix}\cos\theta & -\sin\theta\\ \sin\theta & \cos\theta\end{bmatrix}
#     \begin{bmatrix}x_1\\x_2\end{bmatrix}
#   = \begin{bmatrix}x_1\cos\theta - x_2\sin\theta\\ x_1\sin\theta + x_2\cos\theta\end{bmatrix}.$$
#
# **Norm preservation** (the book states it, here is the two-line proof):
#
# $$\|R(\theta)\mathbf x\|^2 = (x_1\cos\theta - x_2\sin\theta)^2 + (x_1\sin\theta + x_2\cos\theta)^2
#   = x_1^2\underbrace{(\cos^2\theta+\sin^2\theta)}_{1} + x_2^2\underbrace{(\sin^2\theta+\cos^2\theta)}_{1}
#   + 2x_1x_2\underbrace{(-\cos\theta\sin\theta + \sin\theta\cos\theta)}_{0} = \|\mathbf x\|^2 .$$
#
# In matrix form this is $R(\theta)^\top R(\theta) = I$. Two more facts follow from the angle-addition
# formulas: $R(\alpha)R(\beta) = R(\alpha+\beta)$ and $R(\alpha)^\top = R(-\alpha)$. Together they give
# the identity RoPE is built on (Book §3.5.3):
#
# $$\big(R(\alpha)\mathbf u\big)^\top\big(R(\beta)\mathbf v\big) = \mathbf u^\top R(\alpha)^\top R(\beta)\,\mathbf v
#   = \mathbf u^\top R(\beta-\alpha)\,\mathbf v .$$
#
# The dot product of two rotated vectors sees only the **difference** of the angles.
#
# ### Exercise 1 (2 points): `rotate_2d`
#
# Implement the counter-clockwise rotation $R(\theta)$ above for a whole batch of pairs at once: `x` has shape
# `(..., 2)` (the last axis holds $(x_1, x_2)$), and each pair is turned by its angle. <!-- clause: value -->
# `theta` is a Python number or a tensor (a 0-d one included) whose shape broadcasts against `x.shape[:-1]` (one
# angle per pair, or one angle shared along an axis). <!-- clause: angles --> Return a new tensor with the shape and
# dtype of `x`, whatever the dtype of `theta` (a float64 angle tensor must not turn a float16 or bfloat16 `x` into
# float64). <!-- clause: keeps-dtype --> Leave `x` unchanged. <!-- clause: unchanged-input --> Do not use a loop
# over the pairs.

# %% nbgrader={"grade": false, "grade_id": "ex1_rotate_2d", "locked": false, "schema_version": 3, "solution": true, "task": false}
def rotate_2d(x, theta):
    """Rotate every pair x[..., :] = (x1, x2) counter-clockwise by theta radians.

    x: tensor of shape (..., 2), any floating dtype (float16, bfloat16, float32, float64);
    theta: number or tensor (of any floating dtype) broadcastable to x.shape[:-1].
    Returns a new tensor with the shape and the dtype of x, whatever theta's dtype; x is not modified.
    """
    ### BEGIN SOLUTION
    theta = torch.as_tensor(theta, dtype=x.dtype, device=x.device)
    c, s = torch.cos(theta), torch.sin(theta)
    x1, x2 = x[..., 0], x[..., 1]
    return torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex1_rotate_2d", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
import math
import torch
from course_utils.grading import check_close, check_shape, check_true, check_type, msg

_th = 0.3
_e1 = torch.tensor([1.0, 0.0], dtype=torch.float64)
_e2 = torch.tensor([0.0, 1.0], dtype=torch.float64)
_r1 = rotate_2d(_e1, _th)
check_type("rotate_2d(e1, 0.3)", _r1, torch.Tensor)
check_shape("rotate_2d(e1, 0.3)", _r1, (2,))
check_close("rotate_2d([1, 0], 0.3) (first column of R(0.3); a sign error means you rotated clockwise)",
            _r1, [math.cos(_th), math.sin(_th)], atol=1e-6)
check_close("rotate_2d([0, 1], 0.3) (second column of R(0.3))",
            rotate_2d(_e2, _th), [-math.sin(_th), math.cos(_th)], atol=1e-6)
_xb = torch.tensor([[3.0, 4.0], [1.0, -2.0], [0.5, 0.5]], dtype=torch.float64)
_tb = torch.tensor([0.1, 2.0, -1.0], dtype=torch.float64)
_rb = rotate_2d(_xb, _tb)
check_shape("rotate_2d on a batch of 3 pairs with 3 angles", _rb, (3, 2))
check_true(_rb.dtype == torch.float64, msg("rotate_2d must keep the dtype of x (float64), got {dtype}.", dtype=_rb.dtype))
check_close("norms after rotate_2d (a rotation preserves the norm)", _rb.norm(dim=-1), _xb.norm(dim=-1), atol=1e-6)
check_close("row 0 of the batched call vs rotate_2d([3, 4], 0.1) alone (pair i must be turned by angle i)",
            _rb[0], rotate_2d(_xb[0], 0.1), atol=1e-6)
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import outcome, record
record("module of rotate_2d (it must be defined in this notebook)", rotate_2d.__module__)  # clause: defined-here
_g = torch.Generator().manual_seed(11)
_x = torch.randn(5, 7, 2, generator=_g, dtype=torch.float64)
_t = 20 * torch.rand(5, 7, generator=_g, dtype=torch.float64) - 10
_out = rotate_2d(_x, _t)
record("x after rotate_2d(x, theta) (x must not be modified in place)", _x)  # clause: unchanged-input
record("rotate_2d on a (5, 7, 2) batch with one angle per pair", _out, atol=1e-6)  # clause: value
_t0 = torch.tensor(1.25, dtype=torch.float64)
record("rotate_2d with a 0-d tensor angle", rotate_2d(_x, _t0), atol=1e-6)  # clause: angles
_tcol = torch.tensor([[0.5], [1.0], [-2.0], [3.0], [0.0]], dtype=torch.float64)   # broadcast over axis 1
record("rotate_2d with angles of shape (5, 1) broadcast over (5, 7)", rotate_2d(_x, _tcol), atol=1e-6)  # clause: angles
record("rotate_2d(rotate_2d(x, 0.7), -2.1)", rotate_2d(rotate_2d(_x, 0.7), -2.1), atol=1e-6)  # clause: value, angles
record("rotate_2d in float32", rotate_2d(_x.float(), 0.4), atol=1e-5)  # clause: keeps-dtype
# the dtype of x wins over the dtype of theta (mixed-dtype arguments), also in half precision
_half = {}
for _dt, _tol in ((torch.float32, 1e-5), (torch.float16, 5e-3), (torch.bfloat16, 3e-2)):
    _xl = _x.to(_dt)
    _half[_dt] = rotate_2d(_xl, _t)                            # theta: float64 tensor of shape (5, 7)
    record(f"x in {_dt} after rotate_2d (not modified in place)", _xl)  # clause: unchanged-input
    record(f"rotate_2d(x in {_dt}, theta in float64): a {_dt} result", _half[_dt], atol=_tol * 8, rtol=_tol)  # clause: keeps-dtype
### BEGIN REFERENCE
from course_utils.grading import check_close, expect
def _complex_rotation(x, t):
    return torch.view_as_real(torch.view_as_complex(x.contiguous()) * torch.polar(torch.ones_like(t), t))


expect("rotate_2d on a (5, 7, 2) batch with one angle per pair", _complex_rotation(_x, _t), atol=1e-6)
expect("rotate_2d with a 0-d tensor angle", _complex_rotation(_x, _t0), atol=1e-6)
expect("rotate_2d with angles of shape (5, 1) broadcast over (5, 7)", _complex_rotation(_x, _tcol), atol=1e-6)
expect("rotate_2d(rotate_2d(x, 0.7), -2.1)", _complex_rotation(_x, torch.tensor(-1.4, dtype=torch.float64)), atol=1e-6)
expect("rotate_2d in float32", _complex_rotation(_x, torch.tensor(0.4, dtype=torch.float64)).float(), atol=1e-5)
for _dt, _tol in ((torch.float32, 1e-5), (torch.float16, 5e-3), (torch.bfloat16, 3e-2)):
    expect(f"rotate_2d(x in {_dt}, theta in float64): a {_dt} result",
           _complex_rotation(_x.to(_dt).double(), _t).to(_dt), atol=_tol * 8, rtol=_tol)
### END REFERENCE
### END HIDDEN TESTS

# %% [markdown]
# Your rotation, checked numerically on many random pairs and angles: norms are preserved and the
# dot product of two rotated vectors depends only on the difference of the angles.

# %% nbgrader={"grade": false, "grade_id": "check_rotation_properties", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
g = torch.Generator().manual_seed(0)
u, v = torch.randn(10_000, 2, generator=g, dtype=torch.float64), torch.randn(10_000, 2, generator=g, dtype=torch.float64)
alpha, beta = 20 * torch.rand(10_000, generator=g, dtype=torch.float64) - 10, 20 * torch.rand(10_000, generator=g, dtype=torch.float64) - 10
norm_err = (rotate_2d(u, alpha).norm(dim=-1) - u.norm(dim=-1)).abs().max().item()
lhs = (rotate_2d(u, alpha) * rotate_2d(v, beta)).sum(-1)          # (R(a)u)·(R(b)v)
rhs = (u * rotate_2d(v, beta - alpha)).sum(-1)                    # u·R(b-a)v
print("max | ||R(theta)x|| - ||x|| |              < 1e-6:", norm_err < 1e-6)
print("max | (R(a)u)·(R(b)v) - u·R(b-a)v |     < 1e-6:", (lhs - rhs).abs().max().item() < 1e-6)

# %% [markdown]
# ## 3. RoPE in $d$ dimensions (Book §3.4.4–3.4.5)
#
# A $d$-dimensional vector ($d$ even) is cut into $d/2$ pairs, and pair $j$ is rotated by an angle
# proportional to the position $p$, with its own frequency:
#
# $$\theta_j(p) = p\,\omega_j, \qquad \omega_j = \text{base}^{-2j/d}, \qquad j = 0,\dots,\tfrac d2-1 .$$
#
# The book pairs **neighbouring** coordinates: $(x_0, x_1), (x_2, x_3), \dots$ (it writes
# $(x_1,x_2), (x_3,x_4)$, counting from 1), i.e. `x[..., 0::2]` with `x[..., 1::2]`. We call
# this the **interleaved** convention. As one matrix, RoPE at position $p$ is block-diagonal:
#
# $$\mathbf R_p = \operatorname{diag}\big(R(p\,\omega_0),\, R(p\,\omega_1),\, \dots,\, R(p\,\omega_{d/2-1})\big).$$
#
# With `base = 10000` and $d = 4$ the two frequencies are $10000^{0} = 1$ and $10000^{-1/2} = 0.01$
# (the book calls them "approximately" 1 and 0.01; they are exact). The first pair turns one radian
# per position, the second a hundred times slower.

# %% nbgrader={"grade": false, "grade_id": "check_frequencies", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
d = X.shape[-1]
omega = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
print("omega_j for d = 4, base = 10000:", omega.tolist())

# %% [markdown]
# What RoPE does to the unit vector $(1, 0)$ of each pair, for positions 0 to 6 ($d = 4$,
# base $10\,000$): the fast pair sweeps around the circle, the slow pair barely moves.

# %% nbgrader={"grade": false, "grade_id": "fig_unit_circle", "locked": true, "schema_version": 3, "solution": false, "task": false}
fig, axes = plt.subplots(1, 2, figsize=(8, 4))
circle = np.linspace(0, 2 * np.pi, 200)
for j, ax in enumerate(axes):
    ax.plot(np.cos(circle), np.sin(circle), color="0.8", lw=1)
    for p in range(7):
        a = p * omega[j].item()
        ax.annotate("", xy=(math.cos(a), math.sin(a)), xytext=(0, 0),
                    arrowprops=dict(arrowstyle="->", color=plt.cm.viridis(p / 6)))
        if j == 0:
            ax.text(1.12 * math.cos(a), 1.12 * math.sin(a), f"p={p}", ha="center", va="center", fontsize=8)
    if j == 1:
        ax.text(1.05, 0.18, "p = 0 ... 6\n(0 to 0.06 rad)", fontsize=8)
    ax.set_title(f"pair j={j}: angle = p x {omega[j].item():g} rad")
    ax.set_aspect("equal")
    ax.set_xlim(-1.35, 1.35)
    ax.set_ylim(-1.35, 1.35)
    ax.set_xlabel("first coordinate of the pair")
    ax.set_ylabel("second coordinate of the pair")
fig.suptitle("RoPE rotates the unit vector (1, 0) of each pair by p * omega_j")
fig.tight_layout()
plt.show()


# %% [markdown]
# ### Exercise 2 (3 points): `rope_apply`
#
# Implement RoPE in the book's interleaved convention for inputs of any batch shape
# `(..., seq, d)`. <!-- clause: any-batch -->
#
# * `positions` is a 1-D tensor of length `seq` (integers or floats); row `s` of the sequence is
#   rotated with position `positions[s]`, which need not be `0, 1, 2, ...`; <!-- clause: positions -->
# * pair $j$ = coordinates `(2j, 2j+1)` is rotated by `positions[s] * base ** (-2j / d)`, for the given
#   `base`; <!-- clause: value -->
# * return a new tensor with the shape and dtype of `x` (also float16 and bfloat16: compute the
#   angles in a wider dtype if you like, but cast back); <!-- clause: keeps-dtype --> leave `x` unchanged; <!-- clause: unchanged-input -->
#   raise `ValueError` when `d` is odd. <!-- clause: odd-d -->
#
# The book's code (Book §3.4.5) only works for 2-D inputs; `x[..., 0::2]` is the batch-friendly
# way to pick every other coordinate. You may reuse `rotate_2d`, but you do not have to. Write the
# rotation yourself: do not call `library_rope` or `transformers`' RoPE (`apply_rotary_pos_emb`,
# `rotate_half` or a `...RotaryEmbedding` class, of any model). They are what the tests compare
# against, so the autograder also runs your function where `transformers` is not installed, with
# this notebook's imports only (`torch`, `math`, `np`). <!-- clause: no-library-rope -->

# %% nbgrader={"grade": false, "grade_id": "ex2_rope_apply", "locked": false, "schema_version": 3, "solution": true, "task": false}
def rope_apply(x, positions, base=10000.0):
    """Rotary position embedding, interleaved pairs (2j, 2j+1), as in Book §3.4.5.

    x: tensor (..., seq, d) with d even, any floating dtype (float16, bfloat16, float32, float64);
    positions: 1-D tensor (seq,) of integers or floats; base: the RoPE base (a positive number).
    Returns a new tensor with the shape and dtype of x; x is not modified. Raises ValueError if d is odd.
    """
    ### BEGIN SOLUTION
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"RoPE rotates pairs of dimensions: d must be even, got d={d}.")
    pos = torch.as_tensor(positions, dtype=torch.float64, device=x.device)
    j = torch.arange(0, d, 2, dtype=torch.float64, device=x.device)
    inv_freq = base ** (-j / d)                                   # omega_j, shape (d/2,)
    angles = pos[:, None] * inv_freq[None, :]                     # (seq, d/2)
    cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
    x1, x2 = x[..., 0::2], x[..., 1::2]                           # the two coordinates of every pair
    out = torch.empty_like(x)
    out[..., 0::2] = x1 * cos - x2 * sin
    out[..., 1::2] = x1 * sin + x2 * cos
    return out
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex2_rope_apply", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
import torch
from course_utils.grading import check_close, check_shape, check_true, check_type, msg

_X = torch.tensor([[1.0, 0.0, 1.0, 0.0], [1.0, 1.0, 0.0, 1.0], [0.0, 1.0, -1.0, 1.0]], dtype=torch.float64)
_Xr = rope_apply(_X, torch.arange(3))
check_type("rope_apply(X, positions)", _Xr, torch.Tensor)
check_shape("rope_apply(X, positions)", _Xr, (3, 4))
check_true(_Xr.dtype == torch.float64, msg("rope_apply must keep the dtype of x (float64), got {dtype}.", dtype=_Xr.dtype))
check_close("rope_apply(X, [0, 1, 2]) at position 0 (angle 0: nothing rotates)", _Xr[0], _X[0], atol=1e-6)
check_close("norm of every row after rope_apply (rotations preserve norms)", _Xr.norm(dim=-1), _X.norm(dim=-1), atol=1e-6)
check_close("logits with RoPE on the book's mini-corpus vs the book (§3.5.2)", _Xr @ _Xr.T / 2,
            [[1.0, -0.1556, -0.9645], [-0.1556, 1.5, 0.3444], [-0.9645, 0.3444, 1.5]], atol=1e-4, rtol=0)
_Xb = torch.stack([_X, 2 * _X])                                           # a batch: shape (2, 3, 4)
check_close("rope_apply on a batch of shape (2, 3, 4)", rope_apply(_Xb, torch.arange(3)), torch.stack([_Xr, 2 * _Xr]), atol=1e-6)
try:
    rope_apply(torch.zeros(2, 5), torch.arange(2))
    _raised = False
except ValueError:
    _raised = True
check_true(_raised, "rope_apply must raise ValueError when the last dimension is odd (d = 5).")
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import outcome, record
record("module of rope_apply (it must be defined in this notebook)", rope_apply.__module__)  # clause: defined-here
### BEGIN PROBE WITHOUT transformers
# recorded twice: here, and by the autograder in a kernel where this package is not installed
import torch
from course_utils.grading import outcome, record
_g = torch.Generator().manual_seed(5)
_cases = [
    ((2, 3, 5, 8), torch.tensor([3, 10, 11, 50, 7]), 10000.0, torch.float32),      # (batch, heads, seq, d), scattered positions
    ((4, 64), torch.arange(4) + 17, 500000.0, torch.float64),                      # LLaMA-3 base, shifted positions
    ((3, 6, 2), torch.tensor([0.0, 0.5, 1.0, 2.5, 4.0, 9.0]), 10000.0, torch.float64),  # d = 2, fractional positions
    ((6, 10), torch.tensor([5, 4, 3, 2, 1, 0]), 100.0, torch.float64),             # small base, decreasing positions
    ((2, 5, 8), torch.tensor([0, 3, 7, 20, 41]), 10000.0, torch.bfloat16),          # half precision keeps its dtype
    ((4, 6), torch.tensor([1.0, 2.0, 3.0, 4.0]), 1000.0, torch.float16),
]
_xs = [torch.randn(*_shape, generator=_g, dtype=torch.float64).to(_dt) for _shape, _, _, _dt in _cases]
_outs = []
for _x, (_shape, _pos, _base, _dt) in zip(_xs, _cases):
    _outs.append(rope_apply(_x, _pos, base=_base))
    record(f"x after rope_apply on shape {_shape} (not modified in place)", _x)  # clause: unchanged-input
# 1e-4: angles computed in float32 (as in the book's code and in transformers) are accepted;
# in half precision, the rounding of the result to x's dtype
_tols = {torch.bfloat16: 3e-2, torch.float16: 4e-3}
for _x, _out, (_shape, _pos, _base, _dt) in zip(_xs, _outs, _cases):
    _tol = _tols.get(_dt, 1e-4)
    # clause: value, any-batch, positions, keeps-dtype, no-library-rope
    record(f"rope_apply on shape {_shape}, positions {_pos.tolist()}, base {_base:g}", _out, atol=_tol, rtol=_tol)
record("rope_apply with d = 7", outcome(rope_apply, torch.zeros(1, 3, 7, dtype=torch.float64), torch.arange(3)))  # clause: odd-d
### END PROBE
### BEGIN REFERENCE
from course_utils.grading import check_close, expect
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb


def _lib_interleaved(x, pos, base):
    """transformers' RoPE, applied in the book's layout through the even/odd permutation."""
    d, seq = x.shape[-1], x.shape[-2]
    perm = torch.cat([torch.arange(0, d, 2), torch.arange(1, d, 2)])
    cfg = LlamaConfig(hidden_size=d, num_attention_heads=1, head_dim=d,
                      rope_parameters={"rope_type": "default", "rope_theta": base})
    cos, sin = LlamaRotaryEmbedding(cfg)(x, pos[None])
    xh = x[..., perm].reshape(-1, 1, seq, d)
    y, _ = apply_rotary_pos_emb(xh, xh, cos, sin)
    return y.reshape(x.shape)[..., torch.argsort(perm)]


def _complex_ref(x, pos, base):
    d = x.shape[-1]
    w = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    z = torch.view_as_complex(x.to(torch.float64).reshape(*x.shape[:-1], d // 2, 2).contiguous())
    ang = pos.to(torch.float64)[:, None] * w
    return torch.view_as_real(z * torch.polar(torch.ones_like(ang), ang)).reshape(x.shape)


for _x, _out, (_shape, _pos, _base, _dt) in zip(_xs, _outs, _cases):
    _what = f"rope_apply on shape {_shape}, positions {_pos.tolist()}, base {_base:g}"
    _tol = _tols.get(_dt, 1e-4)
    expect(_what, _complex_ref(_x, _pos, _base).to(_dt), atol=_tol, rtol=_tol)
    if _dt in (torch.float32, torch.float64):    # the solution also agrees with transformers' RoPE
        check_close(_what + " (vs transformers' RoPE with the pairs re-ordered)", _out, _lib_interleaved(_x, _pos, _base),
                    atol=1e-4)
expect("rope_apply with d = 7", "raises ValueError")
### END REFERENCE
### END HIDDEN TESTS

# %% [markdown]
# ## 4. The effect on the logits (Book §3.5)
#
# Apply RoPE to $\mathbf Q$ and $\mathbf K$ at positions $[0, 1, 2]$ and recompute the logits. The
# first row is untouched (position 0 means angle 0); the others are rotated.

# %% nbgrader={"grade": false, "grade_id": "check_rope_logits", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
Q_r, K_r = rope_apply(Q, positions), rope_apply(K, positions)
logits_rope = attn_logits(Q_r, K_r)
show("Q after RoPE (rows: teddy@0, bear@1, reads@2)", Q_r)
show("logits with RoPE", logits_rope)
print("equal to the book's matrix (to 4 decimals):", np.allclose(logits_rope, BOOK_ROPE, atol=5e-5))

# %% [markdown]
# The three off-diagonal entries can be checked by hand. By the relative property (Section 5) only
# the second vector of each pair of tokens needs rotating, by (position difference) $\times\,\omega_j$,
# and for one pair of coordinates
# $(a,b)^\top R(\theta)\,(c,e) = (ac+be)\cos\theta + (bc-ae)\sin\theta$. With
# `teddy` $=(1,0\,|\,1,0)$, `bear` $=(1,1\,|\,0,1)$, `reads` $=(0,1\,|\,-1,1)$ and $\sqrt d = 2$:
#
# $$L_{0,1} = \tfrac12\big[(\cos 1 - \sin 1) - \sin 0.01\big],\quad
#   L_{0,2} = \tfrac12\big[-\sin 2 - \cos 0.02 - \sin 0.02\big],\quad
#   L_{1,2} = \tfrac12\big[(\cos 1 - \sin 1) + (\cos 0.01 - \sin 0.01)\big].$$
#
# Note that $L_{1,2}$ involves only the difference $2 - 1 = 1$: `bear` and `reads` are one position
# apart, exactly like `teddy` and `bear`.

# %% nbgrader={"grade": false, "grade_id": "check_closed_forms", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
closed = {
    (0, 1): (math.cos(1) - math.sin(1) - math.sin(0.01)) / 2,
    (0, 2): (-math.sin(2) - math.cos(0.02) - math.sin(0.02)) / 2,
    (1, 2): (math.cos(1) - math.sin(1) + math.cos(0.01) - math.sin(0.01)) / 2,
}
for (i, j), val in closed.items():
    print(f"L[{i},{j}] closed form = {val:.4f} | rope_apply gives {logits_rope[i, j].item():.4f} | "
          f"book {BOOK_ROPE[i][j]:.4f} | agree: {abs(val - logits_rope[i, j].item()) < 1e-6 and abs(val - BOOK_ROPE[i][j]) < 5e-5}")

# %% [markdown]
# Side by side, on one colour scale (Book §3.6): rows are the querying token, columns the token
# looked at.

# %% nbgrader={"grade": false, "grade_id": "fig_book_heatmaps", "locked": true, "schema_version": 3, "solution": false, "task": false}
labels = [f"{t}@{p}" for t, p in zip(tokens, positions.tolist())]
fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
heatmap(logits_plain, labels, labels, title="logits without RoPE", ax=axes[0], vmin=-1, vmax=1.5, fmt="{:.4f}")
heatmap(logits_rope, labels, labels, title="logits with RoPE (base 10000)", ax=axes[1], vmin=-1, vmax=1.5, fmt="{:.4f}")
for ax in axes:
    ax.set_xlabel("key (token looked at)")
    ax.set_ylabel("query (token looking)")
fig.tight_layout()
plt.show()


# %% [markdown]
# **Which conventions does the book use?** The printed numbers pin them down. The next cell varies
# one choice at a time and reports whether the three off-diagonal logits still match the book:
# only the interleaved pairing with `base = 10000` does. Shifting all positions (e.g. $[1,2,3]$)
# also matches, which is no accident (Section 5): from the logits alone one can only tell that the
# positions are *equally spaced by 1*; the book's code says they are `arange(3)` $= [0,1,2]$.

# %% nbgrader={"grade": false, "grade_id": "check_book_conventions", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
def self_logits(Xr):
    """Logits of the experiment, where Q = K: Xr Xr^T / sqrt(d)."""
    return attn_logits(Xr, Xr)


variants = {
    "interleaved pairs, base 1e4, positions [0,1,2] (book)": self_logits(rope_apply(X, positions)),
    "rotate-half pairs (library, no permutation)":          self_logits(library_rope(X, positions)),
    "interleaved pairs, base 1e2":                           self_logits(rope_apply(X, positions, base=100.0)),
    "interleaved pairs, base 1e6":                           self_logits(rope_apply(X, positions, base=1e6)),
    "interleaved pairs, positions [0,2,4]":                  self_logits(rope_apply(X, 2 * positions)),
    "interleaved pairs, positions [1,2,3]":                  self_logits(rope_apply(X, positions + 1)),
}
print(f"{'variant':<55} {'L01':>8} {'L02':>8} {'L12':>8}  matches book")
for name, L in variants.items():
    print(f"{name:<55} {L[0, 1].item():8.4f} {L[0, 2].item():8.4f} {L[1, 2].item():8.4f}  {np.allclose(L, BOOK_ROPE, atol=5e-5)}")

# %% [markdown]
# ## 5. Why the effect is relative (Book §3.5.3)
#
# The book proves the relative property for one pair. For $d$ dimensions it carries over block by
# block: $\mathbf R_p$ is block-diagonal, each block obeys $R(m\omega_j)^\top R(n\omega_j) = R((n-m)\omega_j)$, so
#
# $$(\mathbf R_m\mathbf q)^\top(\mathbf R_n\mathbf k) = \mathbf q^\top\mathbf R_m^\top\mathbf R_n\,\mathbf k
#   = \mathbf q^\top\mathbf R_{n-m}\,\mathbf k .$$
#
# Consequence: adding the same offset $k$ to **every** position changes each rotated vector but
# leaves every logit unchanged. The rotated queries move a lot; the logits do not move at all
# (up to float64 rounding). Stretching the positions ($p \mapsto 2p$) is different: it doubles
# every distance, and the logits change.

# %% nbgrader={"grade": false, "grade_id": "check_shift_invariance", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
for shift in [1, 7, 100, 1000]:
    Qs = rope_apply(X, positions + shift)
    dq = (Qs - Q_r).abs().max().item()
    dl = (attn_logits(Qs, Qs) - logits_rope).abs().max().item()
    print(f"positions + {shift:>4}: max |change in rotated Q| = {dq:.4f}   max |change in logits| < 1e-3: {dl < 1e-3}  (< 1e-12: {dl < 1e-12})")
Q2 = rope_apply(X, 2 * positions)
print(f"positions x 2:      max |change in logits| = {(attn_logits(Q2, Q2) - logits_rope).abs().max().item():.4f}")

# %% [markdown]
# The property is exact; the arithmetic is not. With `float64` angles the logits move by less than
# $10^{-12}$. The book's code and `transformers` compute the angles in `float32`, which stores an
# angle near $1000$ rad only to within about $3\cdot10^{-5}$ rad (half the spacing of `float32`
# numbers there), and the error grows with the position. (In the $d = 4$ example it hardly shows: the
# fast pair's angles $p\,\omega_0 = p$ are integers, which `float32` stores exactly.) The next cell
# measures it for $d = 128$: random $\mathbf q, \mathbf k$ at 16 consecutive positions, all shifted by
# $s$, with your `rope_apply` and with the library's `float32` tables. This is one reason
# long-context models care about the precision of their RoPE tables.

# %% nbgrader={"grade": false, "grade_id": "float32_angles", "locked": true, "schema_version": 3, "solution": false, "task": false}
g = torch.Generator().manual_seed(0)
q128 = torch.randn(16, 128, generator=g, dtype=torch.float64)
k128 = torch.randn(16, 128, generator=g, dtype=torch.float64)
pos16 = torch.arange(16)
ours_0 = attn_logits(rope_apply(q128, pos16), rope_apply(k128, pos16))
lib_0 = attn_logits(library_rope(q128, pos16), library_rope(k128, pos16))
print("d = 128, 16 positions, all shifted by s: max |change in logits| (typical logit size: 1)")
for shift in [10, 1000, 100_000]:
    p = pos16 + shift
    d_ours = (attn_logits(rope_apply(q128, p), rope_apply(k128, p)) - ours_0).abs().max().item()
    d_lib = (attn_logits(library_rope(q128, p), library_rope(k128, p)) - lib_0).abs().max().item()
    print(f"s = {shift:>7}:  your rope_apply {d_ours:.0e}   |   transformers (float32 tables) {d_lib:.0e}")

# %% [markdown]
# ## 6. Reading the heatmap: the diagonal (Book §3.6)
#
# Entry $(i,i)$ compares a token with itself: both vectors get the *same* rotation, so
# $L_{ii} = \|\mathbf R_{p}\mathbf x_i\|^2/\sqrt d = \|\mathbf x_i\|^2/\sqrt d$ with or without RoPE. A
# small precision on Book §3.6.1: it writes the diagonal as $\mathbf q_i^\top\mathbf k_i = \|\mathbf q_i\|^2$,
# which holds here only because $\mathbf Q=\mathbf K$, and the logit is that number divided by
# $\sqrt d = 2$. "Normally dominant" is also not a theorem: Cauchy–Schwarz only gives
# $|L_{ij}| \le \sqrt{L_{ii}L_{jj}}$, so a row's largest entry can sit off the diagonal when the
# other token has a larger norm.

# %% nbgrader={"grade": false, "grade_id": "check_diagonal", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
print("||x_i||^2 / sqrt(d):      ", [round(v, 4) for v in (X.norm(dim=-1) ** 2 / 2).tolist()])
print("diagonal without RoPE:    ", [round(v, 4) for v in logits_plain.diagonal().tolist()])
print("diagonal with RoPE:       ", [round(v, 4) for v in logits_rope.diagonal().tolist()])

# %% [markdown]
# ## 7. The book's consolidation exercise
#
# *Change only the vector of `reads` to $[1, -1, 0, 0]$; recompute the logits without and with RoPE
# and both heatmaps. How does the positional penalty change for more distant tokens? Is the
# diagonal preserved?* The numbers first; your interpretation goes into the written question
# (Section 10).

# %% nbgrader={"grade": false, "grade_id": "check_consolidation", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
X_new = X.clone()
X_new[2] = torch.tensor([1.0, -1.0, 0.0, 0.0], dtype=torch.float64)
plain_new = attn_logits(X_new, X_new)
Xr_new = rope_apply(X_new, positions)
rope_new = attn_logits(Xr_new, Xr_new)
show("logits without RoPE (reads = [1, -1, 0, 0])", plain_new)
show("logits with RoPE    (reads = [1, -1, 0, 0])", rope_new)
print(f"\n{'pair':<14} {'distance':>8} {'no RoPE':>8} {'RoPE':>8} {'change':>8}")
for i, j in [(0, 1), (1, 2), (0, 2)]:
    a, b = plain_new[i, j].item(), rope_new[i, j].item()
    print(f"{tokens[i] + '-' + tokens[j]:<14} {j - i:>8} {a:8.4f} {b:8.4f} {b - a + 0.0:8.4f}")
print("diagonal preserved:", torch.allclose(plain_new.diagonal(), rope_new.diagonal(), atol=1e-6, rtol=0))

# %% nbgrader={"grade": false, "grade_id": "fig_consolidation", "locked": true, "schema_version": 3, "solution": false, "task": false}
fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
heatmap(plain_new, labels, labels, title="reads = [1,-1,0,0]: without RoPE", ax=axes[0], vmin=-1, vmax=1.5, fmt="{:.4f}")
heatmap(rope_new, labels, labels, title="reads = [1,-1,0,0]: with RoPE", ax=axes[1], vmin=-1, vmax=1.5, fmt="{:.4f}")
for ax in axes:
    ax.set_xlabel("key (token looked at)")
    ax.set_ylabel("query (token looking)")
fig.tight_layout()
plt.show()


# %% [markdown]
# ## 8. Verify against the library: two conventions, one permutation
#
# Back to the puzzle of Section 1. `transformers` (LLaMA and most of its descendants) pairs
# coordinate $i$ with coordinate $i + d/2$ instead of $2j$ with $2j+1$:
#
# ```python
# def rotate_half(x):                       # transformers.models.llama.modeling_llama
#     x1 = x[..., : x.shape[-1] // 2]
#     x2 = x[..., x.shape[-1] // 2 :]
#     return torch.cat((-x2, x1), dim=-1)
#
# q_embed = (q * cos) + (rotate_half(q) * sin)          # inside apply_rotary_pos_emb
# ```
#
# and `LlamaRotaryEmbedding` builds `cos`, `sin` from `emb = torch.cat((freqs, freqs), dim=-1)`, so
# coordinates $i$ and $i+d/2$ share the frequency $\omega_i$. For $i < d/2$ this gives
# $y_i = x_i\cos - x_{i+d/2}\sin$ and $y_{i+d/2} = x_{i+d/2}\cos + x_i\sin$: the same 2-D rotation,
# applied to the pair $(x_i, x_{i+d/2})$. This is the **rotate-half** convention.
#
# Both are RoPE; they differ only in *which coordinates form a pair*. So if we re-order the
# coordinates so that the book's pair $j$ = $(2j, 2j+1)$ lands on the library's pair $(j, j+d/2)$,
# the two must agree exactly. A permutation of coordinates applied to both $\mathbf q$ and $\mathbf k$ does not
# change any dot product, so the logits agree too. (That is why a model trained in one convention
# can run in the other: the rows of $W_q$ and $W_k$ are permuted once, at conversion time.)
#
# ### Exercise 3 (2 points): `interleaved_to_half`
#
# Return the index tensor `perm` (dtype `torch.long`, shape `(d,)`) such that `x[..., perm]`
# re-orders a vector from the book's interleaved layout into the rotate-half layout: the book's pair
# $(2j, 2j+1)$ lands on the library's pair $(j, j + d/2)$. <!-- clause: value --> In other words, for every `x`:
#
# ```python
# library_rope(x[..., perm], positions)  ==  rope_apply(x, positions)[..., perm]
# ```
#
# `d` must be even (RoPE rotates pairs): raise `ValueError` for an odd `d`. <!-- clause: odd-d -->
#
# Hint: write down where the book's pair $(0, 1)$ must go, then $(2, 3)$, for $d = 8$.

# %% nbgrader={"grade": false, "grade_id": "ex3_interleaved_to_half", "locked": false, "schema_version": 3, "solution": true, "task": false}
def interleaved_to_half(d):
    """Permutation (LongTensor, dtype torch.long = int64, shape (d,)) from the interleaved to the rotate-half layout.

    x[..., perm] puts the book's pair (2j, 2j+1) at the library's positions (j, j + d/2).
    Raises ValueError if d is odd.
    """
    ### BEGIN SOLUTION
    if d % 2:
        raise ValueError(f"d must be even, got {d}")
    return torch.cat([torch.arange(0, d, 2), torch.arange(1, d, 2)])
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex3_interleaved_to_half", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
import math
import torch
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb
from course_utils.grading import check_close, check_equal, check_shape, check_true, check_type, msg

_perm = interleaved_to_half(8)
check_type("interleaved_to_half(8)", _perm, torch.Tensor)
check_true(_perm.dtype == torch.long, msg("interleaved_to_half must return a torch.long tensor (usable as an index), got {dtype}.", dtype=_perm.dtype))
check_shape("interleaved_to_half(8)", _perm, (8,))
check_equal("sorted(interleaved_to_half(8)) (a permutation uses every index once)", sorted(_perm.tolist()), list(range(8)))
# Run the library on x[..., perm], move the result back to the book's layout, and look at every
# book pair (2j, 2j+1): it must keep its norm and turn by the angle position * omega_j.
_d, _base = 8, 10000.0
_x = torch.randn(5, _d, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
_pos = torch.tensor([0, 1, 2, 5, 9])
_cfg = LlamaConfig(hidden_size=_d, num_attention_heads=1, head_dim=_d,
                   rope_parameters={"rope_type": "default", "rope_theta": _base})
_cos, _sin = LlamaRotaryEmbedding(_cfg)(_x, _pos[None])
_xh = _x[..., _perm][None, None]
_yh, _ = apply_rotary_pos_emb(_xh, _xh, _cos, _sin)
_y = _yh[0, 0][..., torch.argsort(_perm)]
_a, _b, _ya, _yb = _x[..., 0::2], _x[..., 1::2], _y[..., 0::2], _y[..., 1::2]
check_close("norm of each book pair (2j, 2j+1) after the library's RoPE (columns: j); a mismatch means "
            "your permutation does not send a book pair to a library pair", torch.hypot(_ya, _yb), torch.hypot(_a, _b), atol=1e-5)
_angle = torch.atan2(_a * _yb - _b * _ya, _a * _ya + _b * _yb)
_omega = _base ** (-torch.arange(0, _d, 2, dtype=torch.float64) / _d)
_expected = torch.remainder(_pos[:, None] * _omega + math.pi, 2 * math.pi) - math.pi
check_close("angle (radians, in (-pi, pi]) by which the library turned book pair j (rows: positions 0,1,2,5,9; "
            "columns: j); a mismatch means pair j went to the wrong frequency", _angle, _expected, atol=1e-4)
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import outcome, record
record("module of interleaved_to_half (it must be defined in this notebook)", interleaved_to_half.__module__)  # clause: defined-here
for _d in (2, 4, 64, 128):
    record(f"interleaved_to_half({_d}) (a torch.long tensor)", interleaved_to_half(_d))  # clause: value
for _odd in (7, 1):
    record(f"interleaved_to_half({_odd}) (d must be even)", outcome(interleaved_to_half, _odd))  # clause: odd-d
### BEGIN REFERENCE
from course_utils.grading import check_close, expect
def _ref_interleaved(x, pos, base):
    d = x.shape[-1]
    w = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    z = torch.view_as_complex(x.to(torch.float64).reshape(*x.shape[:-1], d // 2, 2).contiguous())
    ang = pos.to(torch.float64)[:, None] * w
    return torch.view_as_real(z * torch.polar(torch.ones_like(ang), ang)).reshape(x.shape)


for _d, _base, _seed in [(2, 10000.0, 3), (4, 10000.0, 4), (64, 10000.0, 5), (128, 500000.0, 6)]:
    # the solution's permutation makes transformers' RoPE equal to the book's (then permuted)
    _g = torch.Generator().manual_seed(_seed)
    _perm = interleaved_to_half(_d)
    _x = torch.randn(2, 3, 7, _d, generator=_g, dtype=torch.float64)      # (batch, heads, seq, d)
    _pos = torch.randint(0, 60, (7,), generator=_g)
    _cfg = LlamaConfig(hidden_size=_d, num_attention_heads=1, head_dim=_d,
                       rope_parameters={"rope_type": "default", "rope_theta": _base})
    _cos, _sin = LlamaRotaryEmbedding(_cfg)(_x, _pos[None])
    _q_lib, _ = apply_rotary_pos_emb(_x[..., _perm], _x[..., _perm], _cos, _sin)
    check_close(f"library RoPE of x[..., perm] vs book RoPE of x, then permuted (d={_d})",
                _q_lib, _ref_interleaved(_x, _pos, _base)[..., _perm], atol=1e-4)
    expect(f"interleaved_to_half({_d}) (a torch.long tensor)", torch.cat([torch.arange(0, _d, 2), torch.arange(1, _d, 2)]))
for _odd in (7, 1):
    expect(f"interleaved_to_half({_odd}) (d must be even)", "raises ValueError")
### END REFERENCE
### END HIDDEN TESTS

# %% [markdown]
# **Puzzle solved.** Feed the library the permuted mini-corpus and it prints the book's matrix.
# Then a stronger check: random queries and keys with batch and head axes, scattered positions,
# $d = 64$: your `rope_apply` and the library agree after the permutation, and so do the logits.

# %% nbgrader={"grade": false, "grade_id": "check_library_agrees", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
perm4 = interleaved_to_half(4)
print("interleaved_to_half(4) =", perm4.tolist(), "| interleaved_to_half(8) =", interleaved_to_half(8).tolist())
lib_perm = library_rope(X[..., perm4], positions)
show("library logits on X[..., perm]", attn_logits(lib_perm, lib_perm))
print("equal to the book's matrix (to 4 decimals):", np.allclose(attn_logits(lib_perm, lib_perm), BOOK_ROPE, atol=5e-5))

g = torch.Generator().manual_seed(0)
q = torch.randn(2, 4, 9, 64, generator=g, dtype=torch.float64)      # (batch, heads, seq, head_dim)
k = torch.randn(2, 4, 9, 64, generator=g, dtype=torch.float64)
pos = torch.tensor([0, 3, 4, 10, 11, 12, 40, 41, 99])
p64 = interleaved_to_half(64)
ours_q, ours_k = rope_apply(q, pos), rope_apply(k, pos)
lib_q, lib_k = library_rope(q[..., p64], pos), library_rope(k[..., p64], pos)
print("rotated q agree after permutation (atol 1e-5):", torch.allclose(ours_q[..., p64], lib_q, atol=1e-5))
print("logits agree (atol 1e-5):                     ", torch.allclose(attn_logits(ours_q, ours_k), attn_logits(lib_q, lib_k), atol=1e-5))
print("logits of the two conventions WITHOUT the permutation agree:",
      torch.allclose(attn_logits(ours_q, ours_k), attn_logits(library_rope(q, pos), library_rope(k, pos)), atol=1e-5))

# %% [markdown]
# (The library builds its `cos`/`sin` tables in `float32` even for `float64` inputs, hence a
# tolerance of $10^{-5}$ rather than $10^{-12}$.)
#
# The same permutation, seen from the weights. Meta's original LLaMA code used the interleaved
# convention (complex numbers). The script that converted those checkpoints to `transformers`
# (`convert_llama_weights_to_hf.py`, not part of the installed wheel) re-ordered the rows of $W_q$
# and $W_k$ inside each head, once, with a one-line reshape and transpose that is exactly
# `interleaved_to_half(head_dim)` applied to each head's rows (once you have solved Exercise 3, you
# can look it up and compare). After that conversion, the library's rotate-half RoPE computes the
# attention logits of the original interleaved model; without it, it computes something else:

# %% nbgrader={"grade": false, "grade_id": "check_weight_permutation", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
n_heads, head_dim = 4, 8
d_model = n_heads * head_dim
g = torch.Generator().manual_seed(1)
W_q = torch.randn(d_model, d_model, generator=g, dtype=torch.float64)
W_k = torch.randn(d_model, d_model, generator=g, dtype=torch.float64)
h = torch.randn(6, d_model, generator=g, dtype=torch.float64)          # hidden states of 6 tokens
pos6 = torch.arange(6)
rows = torch.cat([i * head_dim + interleaved_to_half(head_dim) for i in range(n_heads)])


def per_head(m):
    """(seq, d_model) -> (heads, seq, head_dim)."""
    return m.reshape(-1, n_heads, head_dim).transpose(0, 1)


original = attn_logits(rope_apply(per_head(h @ W_q.T), pos6), rope_apply(per_head(h @ W_k.T), pos6))
converted = attn_logits(library_rope(per_head(h @ W_q[rows].T), pos6), library_rope(per_head(h @ W_k[rows].T), pos6))
unconverted = attn_logits(library_rope(per_head(h @ W_q.T), pos6), library_rope(per_head(h @ W_k.T), pos6))
print("4 heads: interleaved model vs library on the converted W_q, W_k, logits agree (atol 1e-5):",
      torch.allclose(original, converted, atol=1e-5))
print("4 heads: interleaved model vs library on the original  W_q, W_k, logits agree (atol 1e-5):",
      torch.allclose(original, unconverted, atol=1e-5))

# %% [markdown]
# ## 9. Long-range decay: what "RoPE penalises distance" really means
#
# Take a query $\mathbf q$ and a key with the **same content**, $\mathbf k = \mathbf q$, placed $m$
# positions apart. Since $\mathbf u^\top R(\theta)\mathbf u = \|\mathbf u\|^2\cos\theta$ for each pair,
#
# $$L(m) = \frac{(\mathbf R_n\mathbf q)^\top(\mathbf R_{n+m}\mathbf q)}{\sqrt d}
#        = \frac1{\sqrt d}\sum_{j} \|\mathbf q^{(j)}\|^2\cos(m\,\omega_j),
#   \qquad \mathbb E[L(m)] = \frac{2}{\sqrt d}\sum_{j=0}^{d/2-1}\cos(m\,\omega_j)
#   \ \text{ for } \mathbf q\sim\mathcal N(0, I_d).$$
#
# At $m = 0$ all cosines are 1. As $m$ grows, every pair with $m\,\omega_j \gtrsim 1$ spins out of
# phase and averages away; only the slow pairs still add up. The fraction of such slow pairs is
# about $1 - \log m/\log(\text{base})$, so the expected logit falls roughly linearly in $\log m$,
# and a larger base (LLaMA 3 uses $500\,000$) decays more slowly. For **independent** zero-mean
# $\mathbf q$ and $\mathbf k$, however, the expected logit is $0$ at every distance: RoPE does not push
# unrelated tokens apart, it makes *similar* content count less when it is far away.
#
# Below: $d = 128$ (LLaMA's head size), Monte-Carlo averages over random vectors computed with your
# `rope_apply` (dots), the exact expectation (lines), and the rough $\log$ approximation (dashed).

# %% nbgrader={"grade": false, "grade_id": "check_decay_table", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
D = 128


def expected_logit(m, base, d=D):
    """E[L(m)] for k = q ~ N(0, I_d): (2 / sqrt(d)) * sum_j cos(m * omega_j), in float64."""
    w = base ** (-np.arange(0, d, 2) / d)
    return 2 / math.sqrt(d) * np.cos(np.outer(np.atleast_1d(m), w)).sum(-1)


print("E[L(m)] / E[L(0)] for identical content, d = 128")
print(f"{'m':>6} {'base 1e4':>9} {'base 5e5':>9}")
for m in [0, 1, 4, 16, 64, 256, 1024, 4096]:
    r1 = expected_logit(m, 1e4)[0] / expected_logit(0, 1e4)[0]
    r2 = expected_logit(m, 5e5)[0] / expected_logit(0, 5e5)[0]
    print(f"{m:>6} {r1:9.4f} {r2:9.4f}")

# %% nbgrader={"grade": false, "grade_id": "fig_decay", "locked": true, "schema_version": 3, "solution": false, "task": false}
n_samples = 128 if course_utils.CI_MODE else 1024
dist = torch.from_numpy(np.unique(np.round(np.geomspace(1, 4096, 60)))).to(torch.float64)   # distances m
g = torch.Generator().manual_seed(0)
qs = torch.randn(n_samples, 1, D, generator=g, dtype=torch.float64)
ks = torch.randn(n_samples, 1, D, generator=g, dtype=torch.float64)
# relative property: place the query at position 0 (no rotation) and the key at position m
same = (qs * rope_apply(qs.expand(-1, len(dist), -1).contiguous(), dist)).sum(-1).mean(0) / math.sqrt(D)
indep = (qs * rope_apply(ks.expand(-1, len(dist), -1).contiguous(), dist)).sum(-1).mean(0) / math.sqrt(D)
m = dist.numpy()
fig, ax = plt.subplots(figsize=(7.5, 4))
line_plot(m, {"exact E[L(m)], k = q, base 1e4": expected_logit(m, 1e4),
              "exact E[L(m)], k = q, base 5e5": expected_logit(m, 5e5)}, ax=ax, logx=True)
ax.plot(m, same.numpy(), "o", ms=3, color="C0", label=f"Monte Carlo, k = q, base 1e4 ({n_samples} vectors)")
ax.plot(m, indep.numpy(), "s", ms=3, color="C3", label=f"Monte Carlo, independent q, k, base 1e4")
ax.plot(m, expected_logit(0, 1e4)[0] * np.clip(1 - np.log(m) / np.log(1e4), 0, None), "--", color="0.4",
        label="rough: E[L(0)] * (1 - log m / log base), base 1e4")
ax.axhline(0, color="k", lw=0.8)
ax.set_xlabel("relative distance m (log scale)")
ax.set_ylabel("mean logit q.R(m)k / sqrt(d)")
ax.set_title(f"RoPE long-range decay, d = {D} (E[L(0)] = sqrt(d) = {math.sqrt(D):.2f})")
ax.legend(fontsize=7)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## What this chapter leaves out
#
# This chapter covers Book §3.3–§3.6 and the consolidation exercise of §3.9. What it leaves out, on
# purpose:
#
# * **§3.1–§3.2** (what changed in modern Transformers: three refinements): a roadmap with nothing to
#   run; chapters 05, 06 and 07 take one refinement each.
# * **§3.4.1** (why additive position embeddings are limiting: absolute positions, a maximum length
#   fixed in training, poor extrapolation) is stated, not tested. Testing extrapolation needs models
#   trained at one context length and evaluated at longer ones, far beyond a CPU chapter; chapters 08
#   and 09 show GPT-2's fixed table of positions.
# * **The long-context limits at the end of §3.9** ("variants and scaling of θ"): position
#   interpolation, NTK-aware scaling and YaRN are left out; Section 9 shows only what a larger base does
#   to the decay. Judging them needs a pretrained long-context model and long evaluation texts.
# * **RoPE inside a trained model.** As in the book, RoPE is applied to hand-made vectors with
#   $\mathbf Q = \mathbf K = \mathbf X$, and `transformers`' implementation is checked on random
#   tensors; no pretrained LLaMA-family attention is opened, because its learned projections would hide
#   the rotation the chapter is about.

# %% [markdown] nbgrader={"grade": false, "grade_id": "written_consolidation_question", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## 10. Reflect
#
# **Written question (3 points).** The book's consolidation exercise asks: *how does the positional
# penalty change for more distant tokens, and is the diagonal preserved?* Answer both for
# `reads = [1, −1, 0, 0]`, quoting the numbers printed in Section 7: the diagonal with and without
# RoPE, and the change of the two distance-1 pairs and of the distance-2 pair. Is there a
# "penalty" that grows with distance in this example? Then use Section 9 (quote at least one value
# from its table or plot) to say under which conditions RoPE *does* make logits shrink with
# distance, and why a 3-token, $d = 4$ example cannot show it.

# %% [markdown] nbgrader={"grade": true, "grade_id": "written_consolidation", "locked": false, "points": 3, "schema_version": 3, "solution": true, "task": false}
# **Model answer.**
#
# *Diagonal:* preserved exactly: $1.0, 1.5, 1.0$ without RoPE and $1.0, 1.5, 1.0$ with RoPE
# ("diagonal preserved: True"). Both vectors of a diagonal entry are rotated by the same angle, so
# $L_{ii} = \|\mathbf x_i\|^2/\sqrt d$ whatever the position.
#
# *Off-diagonal:* teddy–bear (distance 1) goes $0.5 \to -0.1556$ (change $-0.6556$); bear–reads
# (distance 1) goes $0.0 \to 0.8415$ (change $+0.8415$, it was orthogonal and becomes $\sin 1$);
# teddy–reads (distance 2) goes $0.5 \to 0.2466$ (change $-0.2534$). There is no penalty that grows
# with distance: the two distance-1 pairs move in opposite directions, and the distance-2 pair moves
# less than either of them. RoPE rotates; whether a logit rises or falls depends on how the two
# contents are oriented relative to the rotation (in the original corpus all three went down, which
# is just as accidental).
#
# *When it does decay:* Section 9 shows that for a key with the same content as the query the
# expected logit falls with distance, e.g. to $0.4769$ of its $m=0$ value at $m = 64$ and
# $0.2044$ at $m = 1024$ (base $10^4$, $d = 128$), more slowly with base $5\cdot10^5$ ($0.6022$ at
# 64); for independent vectors the mean stays at $\approx 0$. The decay is an average over many
# frequency pairs spinning out of phase, so it needs many pairs (large $d$) and distances large
# compared with $1/\omega_j$. With $d = 4$ there are only two frequencies ($1$ and $0.01$): over
# 1–2 positions the fast pair simply turns by 1–2 radians (no averaging) and the slow pair barely
# moves, so the example shows orientation changes, not a decay.

# %% [markdown]
# ## Summary
#
# * A rotation preserves norms; the dot product of two rotated vectors depends only on the angle
#   difference. RoPE rotates pair $j$ of $\mathbf q$ and $\mathbf k$ by $p\,\omega_j$, so logits depend on
#   relative positions only (shift test: unchanged to $10^{-12}$).
# * The book's numbers are correct and pin down its conventions: interleaved pairs, base $10^4$,
#   positions $[0,1,2]$ (up to a common shift, which the logits cannot see).
# * `transformers` pairs $i$ with $i+d/2$ (rotate-half); the permutation `interleaved_to_half`
#   maps one convention onto the other exactly, and the library then reproduces the book.
# * The famous long-range decay is a statement about averages over many frequencies for similar
#   content, not a per-pair penalty.
#
# Next chapter: what happens to these logits after the softmax, and why they are divided by
# $\sqrt d$ (Book §3.7).
