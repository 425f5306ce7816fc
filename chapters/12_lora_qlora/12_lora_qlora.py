# %% [markdown]
# # Chapter 12 — LoRA and QLoRA: where the gradient flows, how far, in what precision
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/llm-course/llm-course/blob/main/notebooks/12_lora_qlora/12_lora_qlora.ipynb)
#
# **Goal.** Book ch. 7 frames fine-tuning as three decisions: *where* the gradient passes, *how
# much* the model may move, and *in what precision* that happens (Book §7.1). Full supervised
# fine-tuning (SFT) moves every weight; LoRA moves a low-rank subspace $W' = W + \tfrac{\alpha}{r}BA$;
# QLoRA does the same on top of a frozen base stored in 4 bits. This chapter first checks the
# book's numeric proof (§7.4) number by number, then builds a LoRA layer from scratch that equals
# `peft`'s, and finally runs the book's style task *properly* (prompt → response pairs, prompt
# masked out of the loss) with SFT, LoRA and QLoRA on SmolLM2-135M-Instruct, measuring what the
# book only describes: trainable share, step time, memory, forgetting and a style score.
#
# **Book sections.** Book §7.1–§7.3 (framing and formulas), §7.4 (numeric proof, incl. §7.4.9
# INT4), §7.7–§7.12 (the GPT-2 pipeline, flags below).
#
# **You will implement (graded).**
# 1. `LoRALinear` — a LoRA adapter around a frozen `nn.Linear`: init and freezing (2 pts),
#    output and merged weight equal to `peft`'s (2 pts)
# 2. `masked_lm_loss` — the causal-LM loss on the response tokens only (3 pts)
# 3. `count_trainable` — trainable and total parameters, as `peft` counts them (1 pt)
#
# plus one written question (2 pts) that asks for evidence from this notebook's outputs.

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
import contextlib, copy, io, json, math, os, time, warnings
from collections import OrderedDict

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from tqdm.auto import tqdm

with contextlib.redirect_stderr(io.StringIO()):   # bitsandbytes prints a line about optional CPU kernels
    import bitsandbytes as bnb
    import peft
    from peft import LoraConfig, get_peft_model
warnings.filterwarnings("ignore", category=FutureWarning)
warnings.filterwarnings("ignore", category=UserWarning)

from course_utils import CI_MODE
from course_utils.generation import encode_prompt, generate_text
from course_utils.models import SMOLLM2, load_model, quiet_hf
from course_utils.paths import asset_path

quiet_hf()
AUTOGRADING = bool(os.environ.get("NBGRADER_EXECUTION"))
# The SFT/LoRA/QLoRA runs of section 4 take minutes on 2 CPU cores: skipped under autograding (no
# graded test uses them), a 2-step smoke run in CI mode, the real runs in full mode (what students run).
SKIP_RUNS = AUTOGRADING
torch.set_printoptions(precision=4, sci_mode=False)
print("peft", peft.__version__, "| bitsandbytes", bnb.__version__, "| device", DEVICE)

# %% [markdown]
# ## 1. Run and observe: the book's numeric proof (Book §7.4)
#
# A vocabulary of three tokens, one input $x = [1, 0]^\top$, target $y$ = the first token
# (the book's $y = 1$ is 1-based: index 0 in Python), an output head
# $W \in \mathbb{R}^{3\times 2}$ and learning rate $\eta = 0.1$ — the book's inputs, verbatim.
# We compute every step in float64 and compare with what the book prints.

# %% nbgrader={"grade": false, "grade_id": "proof_sft", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
W0 = torch.tensor([[0.10, 0.20], [0.00, -0.10], [-0.10, 0.10]], dtype=torch.float64)
x0 = torch.tensor([1.0, 0.0], dtype=torch.float64)
y0, eta = 0, 0.1

def head_loss(W):
    """-log softmax(W x0)[y0], the loss of Book §7.4."""
    return -torch.log_softmax(W @ x0, dim=0)[y0]

z = W0 @ x0
p = torch.softmax(z, dim=0)
L0 = head_loss(W0)
grad_z = p - F.one_hot(torch.tensor(y0), 3).double()        # dL/dz = p - e_y
grad_W = torch.outer(grad_z, x0)                            # dL/dW = (p - e_y) x^T: rank 1
W_sft = W0 - eta * grad_W
L_sft = head_loss(W_sft)
print("z        =", [round(v, 4) for v in z.tolist()], "  (book: 0.10, 0.00, -0.10)")
print("exp(z)   =", [round(v, 4) for v in z.exp().tolist()], " S =", round(z.exp().sum().item(), 4), "  (book: S = 3.010007)")
print("p        =", [round(v, 4) for v in p.tolist()], "  (book: 0.3672, 0.3322, 0.3006)")
print("L        =", round(L0.item(), 4), "  (book prints 1.001: a rounding slip, -ln 0.367165 = 1.0019)")
print("dL/dz    =", [round(v, 4) for v in grad_z.tolist()], "  (book: -0.6328, 0.3322, 0.3006)")
print("W_new[:,0] =", [round(v, 4) for v in W_sft[:, 0].tolist()], "  (book: 0.16328, -0.03322, -0.13006)")
print("p_new    =", [round(v, 4) for v in torch.softmax(W_sft @ x0, 0).tolist()], "  (book: p1 = 0.3894; correct 0.3895)")
print("L_new    =", round(L_sft.item(), 4), "  (book prints 0.944; correct 0.9429)")
print("decrease =", round((L0 - L_sft).item(), 4))
assert abs(L0.item() - 1.0019) < 1e-4 and abs(L_sft.item() - 0.9429) < 1e-4
assert abs(p[0].item() - 0.3672) < 1e-4 and abs(W_sft[0, 0].item() - 0.16328) < 1e-5
assert abs(L0.item() - 1.001) > 5e-4 and abs(L_sft.item() - 0.944) > 5e-4   # the book's two printed losses are off

# %% [markdown]
# **The book's losses are slightly off.** The probabilities and the gradient are right to four
# decimals, but $-\ln 0.367165 = 1.0019$ (the book prints 1.001) and after the step
# $-\ln 0.389505 = 0.9429$ (the book prints 0.944). The conclusion — one SFT step lowers the
# loss — stands: by 0.0591.
#
# ### Rank 1 is enough, and one step on $B$ finds it
# The SFT update $\Delta W = -\eta\,(p - e_y)x^\top$ is an outer product: **rank 1 for any
# single example**, not only because $x = e_1$ makes the second column zero (the book's reason).
# So a rank-1 LoRA $BA$ with $A = [1\;0]$ and $b = -\eta(p - e_y)$ reproduces it exactly. Even
# better: with $B_0 = 0$ and $A$ fixed, the gradient w.r.t. $B$ is $\nabla_W L\,A^\top$, so one
# gradient step on $B$ with the same $\eta$ lands on exactly the same $\Delta W$.

# %% nbgrader={"grade": false, "grade_id": "proof_lora", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
dW_sft = W_sft - W0
print("Delta W_SFT =\n", dW_sft.numpy().round(5), "\nrank:", torch.linalg.matrix_rank(dW_sft).item())
A1 = torch.tensor([[1.0, 0.0]], dtype=torch.float64)        # (r=1, in=2)
b1 = -eta * grad_z[:, None]                                 # (out=3, r=1)
print("rank-1 LoRA  B A == Delta W_SFT:", torch.allclose(b1 @ A1, dW_sft, atol=1e-15))

B = torch.zeros(3, 1, dtype=torch.float64, requires_grad=True)   # LoRA init: B = 0, A fixed
head_loss(W0 + B @ A1).backward()
with torch.no_grad():
    B_step = B - eta * B.grad
print("one step on B (A fixed):   B A == Delta W_SFT:", torch.allclose(B_step @ A1, dW_sft, atol=1e-15),
      "| loss after:", round(head_loss(W0 + B_step @ A1).item(), 4))

# A different (unit) A instead: the step only moves W inside span(A): Delta W = Delta W_SFT A^T A
A_rand = torch.tensor([[0.6, 0.8]], dtype=torch.float64)        # another unit direction, not aligned with x
B = torch.zeros(3, 1, dtype=torch.float64, requires_grad=True)
head_loss(W0 + B @ A_rand).backward()
dW_rand = (-eta * B.grad) @ A_rand
print("unit A =", A_rand.numpy().round(4), "| Delta W = Delta W_SFT A^T A:",
      torch.allclose(dW_rand, dW_sft @ A_rand.T @ A_rand, atol=1e-15), "| loss after:", round(head_loss(W0 + dW_rand).item(), 4))

# %% [markdown]
# With $A = [0.6\;0.8]$ the same step lowers the loss less (printed above, vs 0.9429): LoRA
# constrains *where* the weights can move, and the gradient is projected onto that subspace.
#
# ### §7.4.9: the INT4 error and its correction
# The book quantizes with symmetric INT4, levels $\{-7,\dots,7\}$, range $\alpha = 0.20$, step
# $\Delta = \alpha/7$, $Q(w) = \Delta\cdot\operatorname{round}(w/\Delta)$, and looks at the
# updated weight $w = 0.16328$.

# %% nbgrader={"grade": false, "grade_id": "proof_int4", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
alpha_q = 0.20
delta = alpha_q / 7
def q_int4(w):
    return delta * torch.clamp(torch.round(w / delta), -7, 7)

w = torch.tensor(0.16328, dtype=torch.float64)
print("Delta =", round(delta, 6), "| w/Delta =", round((w / delta).item(), 4), "| Q(w) =", round(q_int4(w).item(), 6),
      "(book: 0.171426)  | eps = Q(w) - w =", round((q_int4(w) - w).item(), 6), "(book: 0.008146)")
print("Q(W0)    =\n", q_int4(W0).numpy().round(6))
print("loss with W0:", round(L0.item(), 4), "-> with Q(W0):", round(head_loss(q_int4(W0)).item(), 4))
print("loss with W_sft:", round(L_sft.item(), 4), "-> with Q(W_sft):", round(head_loss(q_int4(W_sft)).item(), 4))
# QLoRA's actual arrangement: the *pre-trained* W is quantized and frozen, the adapter carries the update
w_eff_target = W_sft[0, 0]
lora_delta = w_eff_target - q_int4(W0[0, 0])
print("QLoRA: Q(0.10) =", round(q_int4(W0[0, 0]).item(), 6), "| adapter delta =", round(lora_delta.item(), 6),
      "| Q(W)+delta =", round((q_int4(W0[0, 0]) + lora_delta).item(), 5), "= the SFT weight")
assert abs(q_int4(w).item() - 1.2 / 7) < 1e-12 and abs((q_int4(w) - w).item() - 0.008149) < 1e-6


# %% [markdown]
# **Two small corrections to §7.4.9.** $Q(0.16328) = 6\cdot 0.2/7 = 0.171429$ (the book's
# 0.171426 multiplies the *rounded* step 0.028571 by 6), so the error is $\varepsilon = 0.008149$,
# not 0.008146. More important is the role: the book quantizes the already-updated weight, which
# mixes SFT and QLoRA. In QLoRA the **frozen pre-trained** $W$ is quantized
# ($Q(0.10) = 0.114286$, error $+0.014$) and the trained adapter adds $0.049$ on top, which
# lands exactly on the SFT weight: the adapter can absorb the quantization error of the weights
# it sits on.
#
# ## 2. Derive: the LoRA layer (Book §7.3.3, with `peft`'s scaling)
#
# For a linear layer $y = Wx + b$ with $W \in \mathbb{R}^{d_\text{out}\times d_\text{in}}$ LoRA adds
#
# $$ y = Wx + b + \frac{\alpha}{r}\, B A x, \qquad A \in \mathbb{R}^{r\times d_\text{in}},\;
# B \in \mathbb{R}^{d_\text{out}\times r}, \; r \ll \min(d_\text{in}, d_\text{out}). $$
#
# The book writes $W' = W + BA$ and omits the factor $\alpha/r$ that `peft` (and the LoRA paper)
# use: with it, changing $r$ does not change the size of the initial updates much, so a
# learning rate tuned at one rank keeps working at another. `peft` initialises $A$ like the
# weight of `nn.Linear(d_in, r)` (Kaiming-uniform with $a=\sqrt5$, i.e. $U(-1/\sqrt{d_\text{in}},
# 1/\sqrt{d_\text{in}})$) and $B = 0$, so **at initialisation the adapted layer equals the base
# layer** and training starts from the pre-trained model. (Swap the two — $A = 0$, $B$ random —
# and the gradient w.r.t. $B$ is $\propto (Ax)^\top = 0$ while $A$ gets a gradient through
# $B$: it trains, but that is not what `peft` does.) After training, $BA$ can be merged:
# $W_\text{merged} = W + \frac{\alpha}{r}BA$, one matrix, zero inference overhead.
#
# ### Exercise 1 — a LoRA linear layer from scratch (2 + 2 points)
#
# Complete `LoRALinear`. Store the parameters as `A` (shape `(r, in_features)`) and `B`
# (shape `(out_features, r)`), in the dtype and on the device of the base weight, and
# `scaling = alpha / r`. Freeze the base layer (weight and bias). Do not use `peft` here.

# %% nbgrader={"grade": false, "grade_id": "ex1_lora_linear", "locked": false, "schema_version": 3, "solution": true, "task": false}
class LoRALinear(nn.Module):
    """A frozen ``nn.Linear`` plus a trainable low-rank update (Book §7.3.3, ``peft``'s convention).

    ``forward(x) = base(x) + scaling * x @ A.T @ B.T`` with ``scaling = alpha / r``.

    Args:
        base: the ``nn.Linear`` to adapt; kept as ``self.base`` (the same object, not a copy); its
            weight and bias get ``requires_grad = False`` and their values are left unchanged.
        r: the rank, an int >= 1.
        alpha: the LoRA alpha, a number > 0.

    Attributes:
        A: ``nn.Parameter`` of shape ``(r, in_features)``, initialised exactly like the weight of
            ``nn.Linear(in_features, r)`` (``nn.init.kaiming_uniform_(A, a=math.sqrt(5))``).
        B: ``nn.Parameter`` of shape ``(out_features, r)``, initialised to zeros.
        scaling: the float ``alpha / r``.
        A and B have the dtype and device of ``base.weight``; they are the only trainable parameters.

    ``forward`` accepts ``x`` of shape ``(..., in_features)`` (any number of leading dims).
    ``merged_weight()`` returns ``W + scaling * B @ A`` of shape ``(out_features, in_features)``.

    Raises:
        ValueError: if ``base`` is not an ``nn.Linear``, ``r`` is not an int >= 1, or ``alpha <= 0``.
    """

    def __init__(self, base, r=8, alpha=16):
        super().__init__()
        ### BEGIN SOLUTION
        if not isinstance(base, nn.Linear):
            raise ValueError(f"base must be an nn.Linear, got {type(base).__name__}")
        if isinstance(r, bool) or not isinstance(r, int) or r < 1:
            raise ValueError(f"r must be an int >= 1, got {r!r}")
        if not alpha > 0:
            raise ValueError(f"alpha must be > 0, got {alpha!r}")
        self.base = base
        for p in self.base.parameters():
            p.requires_grad_(False)
        w = base.weight
        self.r, self.alpha = r, alpha
        self.scaling = alpha / r
        self.A = nn.Parameter(torch.empty(r, base.in_features, dtype=w.dtype, device=w.device))
        nn.init.kaiming_uniform_(self.A, a=math.sqrt(5))
        self.B = nn.Parameter(torch.zeros(base.out_features, r, dtype=w.dtype, device=w.device))
        ### END SOLUTION

    def forward(self, x):
        ### BEGIN SOLUTION
        return self.base(x) + self.scaling * (x @ self.A.T) @ self.B.T
        ### END SOLUTION

    def merged_weight(self):
        ### BEGIN SOLUTION
        return self.base.weight + self.scaling * self.B @ self.A
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex1_lora_init", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from course_utils.grading import check_close, check_equal, check_shape, check_true
torch.manual_seed(0)
_lin = nn.Linear(6, 4)
_layer = LoRALinear(_lin, r=2, alpha=4)
check_shape("A", _layer.A, (2, 6))
check_shape("B", _layer.B, (4, 2))
check_true(isinstance(_layer.A, nn.Parameter) and isinstance(_layer.B, nn.Parameter), "A and B must be nn.Parameter")
check_true(bool((_layer.B == 0).all()), "B must start at zero so that the adapted layer equals the base layer")
check_close("scaling", _layer.scaling, 2.0)
check_true(not _lin.weight.requires_grad, "the base weight must be frozen (requires_grad False)")
_x = torch.randn(3, 6)
check_close("LoRALinear(x) at init", _layer(_x), _lin(_x), atol=1e-7)
try:
    LoRALinear(nn.Linear(6, 4), r=0)
    raise AssertionError("r=0 must raise ValueError")
except ValueError:
    pass
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import outcome, record
record("module of LoRALinear (it must be defined in this notebook)", LoRALinear.__module__)
torch.manual_seed(1)
_lin = nn.Linear(300, 50, bias=True)
_x = torch.randn(4, 300, generator=torch.Generator().manual_seed(2))
_layer = LoRALinear(_lin, r=16, alpha=8)
record("type of A and of B (nn.Parameter)", [type(_layer.A).__name__, type(_layer.B).__name__])
record("shape of A (r=16, in=300)", list(_layer.A.shape))
record("dtype of A (the base weight's)", str(_layer.A.dtype))
record("B at init (zeros of shape (out=50, r=16))", _layer.B.detach().clone())
record("scaling = alpha / r (r=16, alpha=8)", _layer.scaling, atol=1e-12)
record("requires_grad of the base weight and bias (frozen)", [_lin.weight.requires_grad, _lin.bias.requires_grad])
record("base weight after LoRALinear(base) (values unchanged)", _lin.weight.detach().clone())
record("base bias after LoRALinear(base) (values unchanged)", _lin.bias.detach().clone())
record("names of the trainable parameters", sorted(n for n, p_ in _layer.named_parameters() if p_.requires_grad))
record("LoRALinear(x) at init (r=16, alpha=8): equals the base layer", _layer(_x), atol=1e-6)
# A ~ U(-1/sqrt(in), 1/sqrt(in)) (Kaiming-uniform, a=sqrt(5)): counts of A / bound in 10 equal bins
# of [-1, 1], plus two bins for values outside the range (probability 0)
_bound = 1 / math.sqrt(300)
_u = (_layer.A.detach().double() / _bound).flatten()
_edges = torch.linspace(-1, 1, 11, dtype=torch.float64)
_edges[0], _edges[-1] = -1 - 1e-6, 1 + 1e-6
_counts = [int((_u < _edges[0]).sum())] + [int(((_u >= lo) & (_u < hi)).sum()) for lo, hi in zip(_edges[:-1], _edges[1:])] \
    + [int((_u >= _edges[-1]).sum())]
record("counts of A / (1/sqrt(in)) in: below -1, 10 bins of [-1, 1], above 1 (r=16, in=300)",
       np.array(_counts, dtype=np.int64), pvalue=1e-3)
# self.base is the layer given (the same object): a change made to it afterwards shows in the output
with torch.no_grad():
    _lin.weight.mul_(-2.0)
    _lin.bias.add_(0.5)
record("LoRALinear(x) after the base layer given was changed in place (self.base must be that layer, not a copy)",
       _layer(_x), atol=1e-6)
for _dt, _tol in ((torch.float64, 1e-12), (torch.bfloat16, 1e-2)):
    torch.manual_seed(3)
    _base = nn.Linear(8, 3).to(_dt)
    _x2 = torch.randn(2, 8, generator=torch.Generator().manual_seed(4), dtype=torch.float64).to(_dt)
    _l2 = LoRALinear(_base, r=2, alpha=2)
    record(f"dtype of A with a {_dt} base", str(_l2.A.dtype))
    record(f"B at init with a {_dt} base", _l2.B.detach().clone())
    record(f"LoRALinear(x) at init with a {_dt} base (a {_dt} output)", _l2(_x2), atol=_tol, rtol=_tol)
for _bad in (dict(r=-1), dict(r=0), dict(r=2.0), dict(r=2, alpha=0), dict(r=2, alpha=-1.0)):
    record(f"LoRALinear(nn.Linear(6, 4), **{_bad}) (must raise ValueError)", outcome(LoRALinear, nn.Linear(6, 4), **_bad))
record("LoRALinear(nn.Conv1d(2, 2, 1), r=2) (not an nn.Linear: must raise ValueError)",
       outcome(LoRALinear, nn.Conv1d(2, 2, 1), r=2))
### BEGIN REFERENCE
from course_utils.grading import check_close, check_true, expect
expect("counts of A / (1/sqrt(in)) in: below -1, 10 bins of [-1, 1], above 1 (r=16, in=300)",
       np.array([0.0] + [0.1] * 10 + [0.0]), pvalue=1e-3)
# A like the weight of nn.Linear(in, r): the same bound, from torch's own initialisation
_ref_lin = nn.Linear(300, 16)
check_true(float(_ref_lin.weight.abs().max()) <= _bound + 1e-7 and float(_ref_lin.weight.abs().max()) > 0.9 * _bound,
           "nn.Linear(in, r).weight is bounded by 1/sqrt(in)")
check_true(float(_layer.A.abs().max()) <= _bound + 1e-7 and abs(float(_layer.A.std()) - _bound / math.sqrt(3)) < 0.1 * _bound,
           "the solution's A is uniform on [-1/sqrt(in), 1/sqrt(in)]")
torch.manual_seed(1)
_lin_ref = nn.Linear(300, 50, bias=True)
expect("base weight after LoRALinear(base) (values unchanged)", _lin_ref.weight.detach().clone())
expect("base bias after LoRALinear(base) (values unchanged)", _lin_ref.bias.detach().clone())
expect("LoRALinear(x) at init (r=16, alpha=8): equals the base layer", _lin_ref(_x), atol=1e-6)
with torch.no_grad():
    _lin_ref.weight.mul_(-2.0)
    _lin_ref.bias.add_(0.5)
expect("LoRALinear(x) after the base layer given was changed in place (self.base must be that layer, not a copy)",
       _lin_ref(_x), atol=1e-6)
expect("B at init (zeros of shape (out=50, r=16))", torch.zeros(50, 16))
expect("scaling = alpha / r (r=16, alpha=8)", 0.5, atol=1e-12)
for _dt, _tol in ((torch.float64, 1e-12), (torch.bfloat16, 1e-2)):
    torch.manual_seed(3)
    _base = nn.Linear(8, 3).to(_dt)
    _x2 = torch.randn(2, 8, generator=torch.Generator().manual_seed(4), dtype=torch.float64).to(_dt)
    expect(f"LoRALinear(x) at init with a {_dt} base (a {_dt} output)", _base(_x2), atol=_tol, rtol=_tol)
    expect(f"B at init with a {_dt} base", torch.zeros(3, 2, dtype=_dt))
del _ref_lin, _lin_ref
### END REFERENCE
del _lin, _x, _layer, _bound, _u, _edges, _counts, _l2, _base, _x2, _dt, _tol, _bad
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_ex1_lora_vs_peft", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
torch.manual_seed(0)
_lin = nn.Linear(5, 3)
_layer = LoRALinear(_lin, r=2, alpha=4)
with torch.no_grad():
    _layer.A.copy_(torch.randn(2, 5)); _layer.B.copy_(torch.randn(3, 2))
_x = torch.randn(4, 5)
_expected = _lin.weight + 2.0 * _layer.B @ _layer.A
check_close("merged_weight() = W + (alpha/r) B A", _layer.merged_weight(), _expected, atol=1e-6)
check_close("forward(x) with trained A, B", _layer(_x), _x @ _expected.T + _lin.bias, atol=1e-5)
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import record
_cases = ((4, 32, True), (3, 5, False))
_ins = {}
for _r, _alpha, _bias in _cases:
    torch.manual_seed(_r)
    _lin = nn.Linear(12, 7, bias=_bias)
    _g = torch.Generator().manual_seed(100 + _r)
    _A, _B = torch.randn(_r, 12, generator=_g), torch.randn(7, _r, generator=_g)   # "trained" A and B
    _x = torch.randn(2, 5, 12, generator=_g)                                        # 3-D input (batch, seq, features)
    _ins[_r] = (copy.deepcopy(_lin), _A, _B, _x)
    _mine = LoRALinear(_lin, r=_r, alpha=_alpha)
    with torch.no_grad():
        _mine.A.copy_(_A); _mine.B.copy_(_B)
    _out = _mine(_x)
    record(f"forward (r={_r}, alpha={_alpha}, bias={_bias}), 3-D input", _out, atol=1e-5)
    record(f"merged_weight (r={_r}, alpha={_alpha}, bias={_bias})", _mine.merged_weight(), atol=1e-6)
    _out.sum().backward()
    record(f"A.grad after forward(x).sum().backward() (r={_r}, alpha={_alpha})", _mine.A.grad, atol=1e-4, rtol=1e-5)
    record(f"B.grad after forward(x).sum().backward() (r={_r}, alpha={_alpha})", _mine.B.grad, atol=1e-4, rtol=1e-5)
### BEGIN REFERENCE
from course_utils.grading import expect
for _r, _alpha, _bias in _cases:
    _lin, _A, _B, _x = _ins[_r]
    _pm = get_peft_model(nn.Sequential(OrderedDict(lin=copy.deepcopy(_lin))),
                         LoraConfig(r=_r, lora_alpha=_alpha, target_modules=["lin"], init_lora_weights=False))
    _pl = _pm.base_model.model.lin
    with torch.no_grad():
        _pl.lora_A["default"].weight.copy_(_A); _pl.lora_B["default"].weight.copy_(_B)
    _pout = _pm(_x)
    expect(f"forward (r={_r}, alpha={_alpha}, bias={_bias}), 3-D input", _pout, atol=1e-5)
    _pout.sum().backward()
    expect(f"A.grad after forward(x).sum().backward() (r={_r}, alpha={_alpha})", _pl.lora_A["default"].weight.grad,
           atol=1e-4, rtol=1e-5)
    expect(f"B.grad after forward(x).sum().backward() (r={_r}, alpha={_alpha})", _pl.lora_B["default"].weight.grad,
           atol=1e-4, rtol=1e-5)
    expect(f"merged_weight (r={_r}, alpha={_alpha}, bias={_bias})", _pm.merge_and_unload().lin.weight, atol=1e-6)
del _pm, _pl, _pout
### END REFERENCE
del _cases, _ins, _r, _alpha, _bias, _lin, _g, _A, _B, _x, _mine, _out
### END HIDDEN TESTS

# %% [markdown]
# ## 3. The loss of instruction tuning: mask the prompt
#
# The book's SFT dataset (§7.8) is two bare instructions with `labels = input_ids`: the model
# learns to *reproduce the instructions*, and the padding `eos` tokens are trained too. What we
# want is $p(\text{response}\mid\text{prompt})$: the loss counts only the response tokens. With a
# causal LM, position $t$ predicts token $t+1$, so for a row whose first $P$ tokens are the prompt
# and whose real length is $T_b$ (then right padding), the targets are the tokens
# $P, \dots, T_b - 1$, predicted at positions $P-1, \dots, T_b-2$. The loss is the mean over all
# target tokens of the batch — exactly what `transformers` computes from
# `labels` with $-100$ on the prompt and padding (the labels are shifted inside the model).
#
# ### Exercise 2 — the response-only loss (3 points)

# %% nbgrader={"grade": false, "grade_id": "ex2_masked_loss", "locked": false, "schema_version": 3, "solution": true, "task": false}
def masked_lm_loss(logits, input_ids, prompt_lengths, attention_mask=None):
    """Causal-LM cross-entropy over the response tokens only.

    Args:
        logits: ``(B, T, V)`` float tensor; ``logits[b, t]`` predicts ``input_ids[b, t + 1]``.
        input_ids: ``(B, T)`` long tensor: prompt tokens, then response tokens, then right padding.
        prompt_lengths: ``B`` ints (list or 1-D tensor): row ``b``'s first ``prompt_lengths[b]``
            tokens are the prompt and are not targets.
        attention_mask: ``(B, T)`` with 1 on real tokens and 0 on (right) padding, or ``None``
            for no padding. Padding tokens are never targets.

    Returns:
        A float32 scalar: the mean of ``-log p(token)`` over every target token of the batch (the
        convention of ``transformers`` with ``labels = -100`` on ignored positions), computed in
        float32 even for float16/bfloat16 logits. Inputs are left unchanged.

    Raises:
        ValueError: if a prompt length is negative, or leaves a row with no response token.
    """
    ### BEGIN SOLUTION
    Bsz, T = input_ids.shape
    plen = torch.as_tensor(prompt_lengths, device=input_ids.device).reshape(-1)
    lengths = (attention_mask.sum(dim=1) if attention_mask is not None
               else torch.full((Bsz,), T, device=input_ids.device))
    if len(plen) != Bsz:
        raise ValueError(f"need {Bsz} prompt lengths, got {len(plen)}")
    if (plen < 0).any() or (plen >= lengths).any():
        raise ValueError(f"prompt lengths {plen.tolist()} must be >= 0 and leave a response token (lengths {lengths.tolist()})")
    pos = torch.arange(T, device=input_ids.device)[None, :]
    is_target = (pos >= plen[:, None]) & (pos < lengths[:, None])          # tokens that are targets
    labels = input_ids.masked_fill(~is_target, -100)
    return F.cross_entropy(logits[:, :-1].float().reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1),
                           ignore_index=-100)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex2_masked_loss", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
torch.manual_seed(0)
_logits = torch.randn(1, 5, 7)
_ids = torch.tensor([[1, 2, 3, 4, 5]])
_lp = torch.log_softmax(_logits, dim=-1)
_expected = -(_lp[0, 1, 3] + _lp[0, 2, 4] + _lp[0, 3, 5]) / 3      # prompt = 2 tokens: targets are tokens 2, 3, 4
check_close("masked_lm_loss, one row, prompt of 2 tokens", masked_lm_loss(_logits, _ids, [2]), _expected, atol=1e-6)
_far = torch.tensor([[[0.0, 200.0, 0.0], [0.0, 0.0, 0.0]]])     # the target (token 2) is 200 nats behind token 1
check_close("masked_lm_loss with a logit far ahead of the target's (-log p = 200: use log_softmax / cross_entropy, "
            "log(softmax) gives inf)", masked_lm_loss(_far, torch.tensor([[0, 2]]), [1]), 200.0, atol=1e-3)
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import outcome, record
record("module of masked_lm_loss (it must be defined in this notebook)", masked_lm_loss.__module__)
torch.manual_seed(3)
_V = 11
_ids = torch.randint(0, _V, (3, 9))
_mask = torch.tensor([[1] * 9, [1] * 6 + [0] * 3, [1] * 4 + [0] * 5])
_plen = [3, 1, 2]
_ids[_mask == 0] = 0                                               # pad id
_logits = torch.randn(3, 9, _V)
_got = masked_lm_loss(_logits, _ids, _plen, _mask)
record("input_ids after masked_lm_loss (inputs left unchanged)", _ids)
record("logits after masked_lm_loss (inputs left unchanged)", _logits)
record("attention_mask after masked_lm_loss (inputs left unchanged)", _mask)
record("loss: 3 rows, prompt lengths [3, 1, 2], lengths [9, 6, 4] (a float32 scalar)", _got, atol=1e-5)
record("loss with prompt lengths as a tensor", masked_lm_loss(_logits, _ids, torch.tensor(_plen), _mask), atol=1e-5)
record("loss with bfloat16 logits (computed in float32: a float32 scalar)",
       masked_lm_loss(_logits.bfloat16(), _ids, _plen, _mask), atol=1e-4)
record("loss without attention_mask (no padding), prompt lengths [2, 2, 2]", masked_lm_loss(_logits, _ids, [2, 2, 2]),
       atol=1e-5)
record("loss with a prompt length of 0 (row 0: every token after the first is a target)",
       masked_lm_loss(_logits, _ids, [0, 1, 2], _mask), atol=1e-5)
for _bad in ([-1, 1, 1], [3, 6, 2]):
    record(f"masked_lm_loss with prompt_lengths={_bad} (lengths 9, 6, 4: must raise ValueError)",
           outcome(masked_lm_loss, _logits, _ids, _bad, _mask))
record("loss with prompt lengths [8, 5, 3] (lengths 9, 6, 4: one response token per row)",
       masked_lm_loss(_logits, _ids, [8, 5, 3], _mask), atol=1e-5)
record("masked_lm_loss without attention_mask, prompt_lengths=[2, 9, 2] (T = 9: must raise ValueError)",
       outcome(masked_lm_loss, _logits, _ids, [2, 9, 2]))
record("loss with float16 logits (computed in float32: a float32 scalar)",
       masked_lm_loss(_logits.half(), _ids, _plen, _mask), atol=1e-3)
_big = _logits * 300.0                                               # logits far apart: log(softmax) underflows to -inf
record("loss with logits scaled by 300 (finite: log_softmax, not log(softmax))", masked_lm_loss(_big, _ids, _plen, _mask),
       rtol=1e-5)
### BEGIN REFERENCE
from course_utils.grading import expect
from transformers.loss.loss_utils import ForCausalLMLoss


def _labels_for(plen, mask):
    lab = _ids.clone()
    for b, p in enumerate(plen):
        lab[b, :p] = -100
    if mask is not None:
        lab[mask == 0] = -100
    return lab


# the transformers convention (labels -100 on the prompt and padding, shifted inside)
expect("loss: 3 rows, prompt lengths [3, 1, 2], lengths [9, 6, 4] (a float32 scalar)",
       ForCausalLMLoss(_logits, _labels_for(_plen, _mask), vocab_size=_V), atol=1e-5)
expect("loss with prompt lengths as a tensor", ForCausalLMLoss(_logits, _labels_for(_plen, _mask), vocab_size=_V), atol=1e-5)
expect("loss with bfloat16 logits (computed in float32: a float32 scalar)",
       ForCausalLMLoss(_logits.bfloat16(), _labels_for(_plen, _mask), vocab_size=_V), atol=1e-4)
expect("loss without attention_mask (no padding), prompt lengths [2, 2, 2]",
       ForCausalLMLoss(_logits, _labels_for([2, 2, 2], None), vocab_size=_V), atol=1e-5)
expect("loss with a prompt length of 0 (row 0: every token after the first is a target)",
       ForCausalLMLoss(_logits, _labels_for([0, 1, 2], _mask), vocab_size=_V), atol=1e-5)
expect("loss with prompt lengths [8, 5, 3] (lengths 9, 6, 4: one response token per row)",
       ForCausalLMLoss(_logits, _labels_for([8, 5, 3], _mask), vocab_size=_V), atol=1e-5)
expect("masked_lm_loss without attention_mask, prompt_lengths=[2, 9, 2] (T = 9: must raise ValueError)", "raises ValueError")
expect("loss with float16 logits (computed in float32: a float32 scalar)",
       ForCausalLMLoss(_logits.half(), _labels_for(_plen, _mask), vocab_size=_V), atol=1e-3)
expect("loss with logits scaled by 300 (finite: log_softmax, not log(softmax))",
       ForCausalLMLoss(_big, _labels_for(_plen, _mask), vocab_size=_V), rtol=1e-5)
del ForCausalLMLoss, _labels_for
### END REFERENCE
del _V, _ids, _mask, _plen, _logits, _got, _bad, _big
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 3 — what is trainable? (1 point)
#
# Return `(trainable, total)`: the number of parameters with `requires_grad=True` and the number
# of all parameters of `model`, each shared (tied) tensor counted once — what `peft`'s
# `print_trainable_parameters()` reports for an unquantized model.

# %% nbgrader={"grade": false, "grade_id": "ex3_count_trainable", "locked": false, "schema_version": 3, "solution": true, "task": false}
def count_trainable(model):
    """(number of trainable parameters, number of all parameters) of an ``nn.Module``, as ints;
    tied parameters are counted once."""
    ### BEGIN SOLUTION
    params = list(model.parameters())               # .parameters() yields a shared tensor once
    return sum(p.numel() for p in params if p.requires_grad), sum(p.numel() for p in params)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex3_count_trainable", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
_m = nn.Sequential(nn.Linear(4, 3), nn.Linear(3, 2))
_m[0].weight.requires_grad_(False)
check_equal("count_trainable (first weight frozen)", tuple(count_trainable(_m)), (3 + 6 + 2, 12 + 3 + 6 + 2))
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import record
from transformers import LlamaConfig, LlamaForCausalLM
record("module of count_trainable (it must be defined in this notebook)", count_trainable.__module__)
torch.manual_seed(0)
_tiny = LlamaForCausalLM(LlamaConfig(vocab_size=50, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                     num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=True))
_pm = get_peft_model(_tiny, LoraConfig(r=3, lora_alpha=6, target_modules=["q_proj", "down_proj"]))
record("count_trainable of a peft model (LoRA r=3 on q_proj, down_proj; tied embeddings)",
       tuple(int(v) for v in count_trainable(_pm)))
### BEGIN REFERENCE
from course_utils.grading import expect
expect("count_trainable of a peft model (LoRA r=3 on q_proj, down_proj; tied embeddings)",
       tuple(int(v) for v in _pm.get_nb_trainable_parameters()))
### END REFERENCE
del _tiny, _pm, LlamaConfig, LlamaForCausalLM
### END HIDDEN TESTS

# %% [markdown]
# ## 4. The style task done properly: SFT vs LoRA vs QLoRA on SmolLM2-135M-Instruct
#
# **Data.** `assets/12_lora_qlora/style_pairs.jsonl` holds 42 prompts about El Niño and
# neighbouring weather topics, each answered twice, written for this course: by a
# *meteorologist* (precise, technical) and *casually* (friendly, exclamations). We fine-tune the
# model to answer **casually** — SmolLM2-Instruct's default tone is closer to the neutral,
# explanatory one — with the prompt in SmolLM2's chat template masked out of the loss (your
# `masked_lm_loss`). `style_heldout.json` holds six *held-out prompts* (never trained on) and
# 20 + 20 *style examples* on other weather topics, used only to train the style classifier.
#
# **Style score.** A TF-IDF + logistic-regression classifier trained on the held-out style
# examples gives $P(\text{casual})$ of a text; the style score of a model is the mean
# $P(\text{casual})$ of its greedy answers to the held-out prompts. We first check that the
# classifier separates the two styles of the 84 training responses it has never seen.

# %% nbgrader={"grade": false, "grade_id": "style_data", "locked": true, "schema_version": 3, "solution": false, "task": false}
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline

PAIRS = [json.loads(line) for line in asset_path("12_lora_qlora/style_pairs.jsonl").read_text().splitlines()]
HELD = json.loads(asset_path("12_lora_qlora/style_heldout.json").read_text())
ex = HELD["classifier_examples"]
style_clf = make_pipeline(TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, analyzer="word"),
                          LogisticRegression(C=10.0, max_iter=1000))
style_clf.fit(ex["meteorologist"] + ex["casual"], [0] * len(ex["meteorologist"]) + [1] * len(ex["casual"]))

def style_score(texts):
    """Mean P(casual) of the texts under the style classifier."""
    return float(style_clf.predict_proba(list(texts))[:, 1].mean())

acc = np.mean(np.r_[style_clf.predict([p["meteorologist"] for p in PAIRS]) == 0,
                    style_clf.predict([p["casual"] for p in PAIRS]) == 1])
print(f"{len(PAIRS)} training pairs, {len(HELD['held_out_prompts'])} held-out prompts")
print(f"classifier accuracy on the 84 training responses (not seen by the classifier): {acc:.3f}")
print(f"style score of the meteorologist answers: {style_score(p['meteorologist'] for p in PAIRS):.3f}, "
      f"of the casual answers: {style_score(p['casual'] for p in PAIRS):.3f}")

# %% [markdown]
# **The pipeline.** The same code runs the three methods; only *what is trainable* and *how the
# base is stored* change (Book §7.5: "o que muda é a engenharia do gradiente"):
#
# * **SFT** — every parameter of the last `K` decoder layers trainable (full fine-tuning restricted to
#   those layers, to fit the CPU budget; on CUDA all layers, i.e. every parameter but the embeddings), fp32, AdamW lr $5\cdot10^{-5}$.
# * **LoRA** — `peft` adapters $r=8$, $\alpha=16$ on all seven projections (q, k, v, o, gate, up,
#   down) of the last `K` decoder layers, base frozen, lr $10^{-3}$.
# * **QLoRA** — the same adapters on a base whose linear layers in those `K` layers are
#   `bitsandbytes` NF4 (`bnb.nn.Linear4bit`, blocks of 64, compute in fp32 on CPU / bf16 on CUDA).
#
# **Honest scope.** To fit the chapter's 5-minute budget on 2 CPU cores, the trained weights, the
# adapters and the 4-bit base cover the last `K` layers only (`K` = 2 in CI mode, 6 in full mode); on
# CUDA `K` = all 30. Every model is trained for a handful of steps on batches of 8 short
# sequences (CI mode: 2 steps — far too few to change a style, the CI run only proves the code runs; full mode: 20 steps ≈ 4 epochs) — enough to see the style move in
# full mode, not a tuned recipe. Under autograding the runs are skipped (`SKIP_RUNS`): no graded test uses them.
#
# **Memory.** On CPU we report the bytes of the *training state*: weights
# (`get_memory_footprint()`, 4-bit weights at their packed size) + gradients + AdamW's two moments
# of the trainable parameters — exact and deterministic, unlike process RSS. On CUDA we also print
# `torch.cuda.max_memory_allocated()`.
#
# **Fresh models.** `get_peft_model` *modifies the model it wraps* (the LoRA layers are inserted
# into it), so the book's §7.10 "base model" is no longer the base after wrapping. Every method and
# the "before" reference load a fresh copy with `load_model`.

# %% nbgrader={"grade": false, "grade_id": "pipeline", "locked": true, "schema_version": 3, "solution": false, "task": false}
ON_CUDA = DEVICE.type == "cuda" if hasattr(DEVICE, "type") else str(DEVICE).startswith("cuda")
N_LAYERS = 30
K = N_LAYERS if ON_CUDA else (2 if CI_MODE else 6)
STEPS = 2 if CI_MODE else 20
BATCH = 8
MAX_NEW = 16 if CI_MODE else 40
GEN_PROMPTS = HELD["held_out_prompts"][:2] if CI_MODE else HELD["held_out_prompts"]
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
LAST_K = list(range(N_LAYERS - K, N_LAYERS))
UNRELATED = ("The recipe asks for two cups of flour, a pinch of salt and three eggs. Mix the dry ingredients "
             "first, then add the eggs one at a time and stir until the dough is smooth. The city library "
             "opens at nine on weekdays and closes early on Saturdays. Its oldest book, a printed atlas from "
             "the sixteenth century, is kept in a glass case near the entrance. Chess players often open with "
             "the king's pawn, because it frees the queen and the bishop at once.")

def fresh_model():
    model, tok = load_model(SMOLLM2, verbose=False)
    return model.to(DEVICE), tok

if not SKIP_RUNS:                                            # under autograding nothing below runs
    _, TOK = load_model(SMOLLM2, verbose=True)                 # the banner says which weights are in use

def encode_pair(prompt, response):
    """(ids, prompt length): SmolLM2's chat template for the prompt, then the response and <|im_end|>."""
    p_ids = encode_prompt(TOK, prompt)
    r_ids = TOK(response + "<|im_end|>", add_special_tokens=False)["input_ids"]
    return p_ids + r_ids, len(p_ids)

TRAIN = [encode_pair(p["prompt"], p["casual"]) for p in PAIRS] if not SKIP_RUNS else []

def batches(seed=0):
    """Endless stream of right-padded batches (ids, mask, prompt lengths), reshuffled every epoch."""
    g = torch.Generator().manual_seed(seed)
    while True:
        order = torch.randperm(len(TRAIN), generator=g).tolist()
        for i in range(0, len(order) - BATCH + 1, BATCH):
            rows = [TRAIN[j] for j in order[i:i + BATCH]]
            T = max(len(ids) for ids, _ in rows)
            ids = torch.full((len(rows), T), TOK.pad_token_id, dtype=torch.long)
            mask = torch.zeros(len(rows), T, dtype=torch.long)
            for b, (r, _) in enumerate(rows):
                ids[b, :len(r)] = torch.tensor(r); mask[b, :len(r)] = 1
            yield ids.to(DEVICE), mask.to(DEVICE), [pl for _, pl in rows]

@torch.no_grad()
def perplexity(model, text):
    ids = TOK(text, return_tensors="pt")["input_ids"].to(DEVICE)
    return math.exp(model(ids, labels=ids).loss.item())

def train_state_bytes(model):
    trainable = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    return model.get_memory_footprint() + 3 * trainable          # weights + grads + AdamW m and v

def train(model, lr, name):
    """A plain training loop with the student's masked_lm_loss. Returns (losses, seconds per step)."""
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    model.train()
    losses, times = [], []
    data = batches(seed=0)
    if ON_CUDA:
        torch.cuda.reset_peak_memory_stats()
    for _ in tqdm(range(STEPS), desc=name, leave=False):
        ids, mask, plen = next(data)
        t0 = time.perf_counter()
        logits = model(input_ids=ids, attention_mask=mask).logits
        loss = masked_lm_loss(logits, ids, plen, mask)
        loss.backward()
        opt.step(); opt.zero_grad(set_to_none=True)
        if ON_CUDA:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    model.eval()
    return losses, float(np.median(times[1:] if len(times) > 1 else times))

def answers(model):
    """Greedy answers to the held-out prompts, generated as one left-padded batch (same tokens, faster)."""
    return generate_text(model, TOK, list(GEN_PROMPTS), max_new_tokens=MAX_NEW, batch=True)

def quantize_last_layers_4bit(model, layers, compute_dtype):
    """Replace the nn.Linear modules of the given decoder layers by bitsandbytes NF4 Linear4bit."""
    for i in layers:
        for parent in (model.model.layers[i].self_attn, model.model.layers[i].mlp):
            for name, child in list(parent.named_children()):
                if isinstance(child, nn.Linear):
                    q = bnb.nn.Linear4bit(child.in_features, child.out_features, bias=child.bias is not None,
                                          compute_dtype=compute_dtype, quant_type="nf4")
                    q.weight = bnb.nn.Params4bit(child.weight.data.cpu(), requires_grad=False, quant_type="nf4")
                    setattr(parent, name, q.to(DEVICE))        # .to() quantizes the weight
    return model

LORA_CFG = dict(r=8, lora_alpha=16, lora_dropout=0.0, target_modules=TARGETS, layers_to_transform=LAST_K,
                bias="none", task_type="CAUSAL_LM")
print(f"device {DEVICE} | adapters/4-bit on the last K={K} layers | {STEPS} steps of {BATCH} sequences")

# %% [markdown]
# ### Before: the untouched base

# %% nbgrader={"grade": false, "grade_id": "run_base", "locked": true, "schema_version": 3, "solution": false, "task": false}
RESULTS, GENS = {}, {}
if not SKIP_RUNS:
    base, _ = fresh_model()
    n_tr, n_all = count_trainable(base)
    GENS["base"] = answers(base)
    RESULTS["base"] = dict(trainable=0, total=n_all, step_s=float("nan"), state_mib=base.get_memory_footprint() / 2**20,
                           ppl=perplexity(base, UNRELATED), style=style_score(GENS["base"]), losses=[])
    del base
    print("style score of the base model's answers:", round(RESULTS["base"]["style"], 3))


# %% [markdown]
# ### SFT, LoRA, QLoRA — the same loop

# %% nbgrader={"grade": false, "grade_id": "run_methods", "locked": true, "schema_version": 3, "solution": false, "task": false}
def run(method):
    torch.manual_seed(0)
    model, _ = fresh_model()
    if method == "SFT":
        for n, p_ in model.named_parameters():
            p_.requires_grad_(any(f"layers.{i}." in n for i in LAST_K))
    if method == "QLoRA":
        quantize_last_layers_4bit(model, LAST_K, torch.bfloat16 if ON_CUDA else torch.float32)
    if method in ("LoRA", "QLoRA"):
        model = get_peft_model(model, LoraConfig(**LORA_CFG))       # mutates `model`: that is why it is fresh
    n_tr, n_all = count_trainable(model)
    losses, step_s = train(model, lr=5e-5 if method == "SFT" else 1e-3, name=method)
    GENS[method] = answers(model)
    RESULTS[method] = dict(trainable=n_tr, total=n_all, step_s=step_s, state_mib=train_state_bytes(model) / 2**20,
                           ppl=perplexity(model, UNRELATED), style=style_score(GENS[method]), losses=losses,
                           cuda_peak_mib=torch.cuda.max_memory_allocated() / 2**20 if ON_CUDA else None)
    del model

if not SKIP_RUNS:
    for method in ("SFT", "LoRA", "QLoRA"):
        run(method)
    print(f"{'method':7s} {'trainable':>11s} {'share %':>8s} {'s/step':>7s} {'state MiB':>10s} "
          f"{'ppl unrelated':>14s} {'style P(casual)':>16s}  loss first -> last")
    for k, r in RESULTS.items():
        loss_txt = f"{r['losses'][0]:.3f} -> {r['losses'][-1]:.3f}" if r["losses"] else ""
        print(f"{k:7s} {r['trainable']:11,d} {100 * r['trainable'] / r['total']:8.3f} {r['step_s']:7.2f} "
              f"{r['state_mib']:10.0f} {r['ppl']:14.2f} {r['style']:16.3f}  {loss_txt}")

# %% [markdown]
# The numbers above are from SmolLM2-135M-Instruct (the banner says which weights) on this
# machine; step times on a shared 2-core CPU are noisy. Read them as follows.
#
# * **Trainable share.** SFT trains every weight of the last `K` layers (all 30 on CUDA); LoRA/QLoRA train well under 1 % (the book's
#   "menos de 1%", §7.10; the share depends on `K` and on which projections get adapters).
# * **Memory.** The SFT training state adds 3× the trained weights (grads + two AdamW moments;
#   ≈ 4× the fp32 weights when everything is trained); LoRA's is barely more than the weights; QLoRA saves on top only the bytes of the
#   quantized layers (all of them on CUDA). For a 135 M model this is small change — 4-bit starts
#   to pay when the *frozen weights* dominate the budget (billions of parameters on one GPU).
# * **Step time.** Every forward and backward pass of QLoRA dequantizes the 4-bit weights before
#   an ordinary matmul. With a training batch (8 sequences of ≈ 100 tokens) the matmuls dominate
#   and that decoding is cheap: in the course's full-mode CPU run a QLoRA step took 1.68 s against
#   LoRA's 1.84 s (within the noise of a 2-core machine). For one token at a time — generation,
#   chapter 11 — the same decoding dominates and 4-bit is many times slower. Memory, not speed, is
#   what 4 bits buy (Book §6.5–§6.7 says the same).
# * **Forgetting.** Perplexity on an unrelated paragraph (cooking, a library, chess) before vs
#   after: the methods that move fewer weights should move it less.

# %% nbgrader={"grade": false, "grade_id": "generations", "locked": true, "schema_version": 3, "solution": false, "task": false}
if not SKIP_RUNS:
    for i, q in enumerate(GEN_PROMPTS):
        print(f"### {q}")
        for k in GENS:
            print(f"  [{k:5s}] {GENS[k][i]!r}")
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.2))
    for k in ("SFT", "LoRA", "QLoRA"):
        ax[0].plot(range(1, len(RESULTS[k]["losses"]) + 1), RESULTS[k]["losses"], marker="o", label=k)
    ax[0].set_xlabel("training step"); ax[0].set_ylabel("response-only loss (nats/token)")
    ax[0].set_title("Training loss, SmolLM2-135M-Instruct"); ax[0].legend()
    names = list(RESULTS)
    ax[1].bar(names, [RESULTS[k]["style"] for k in names], color="tab:orange")
    ax[1].set_ylabel("mean P(casual) on held-out prompts"); ax[1].set_ylim(0, 1)
    ax[1].set_title("Style score of greedy answers")
    plt.tight_layout(); plt.show()

# %% [markdown]
# ## 5. Reflect
#
# **What the book gets right, and what it leaves out.** The proof of §7.4 is right up to two
# rounded losses (1.0019 → 0.9429). Its pipeline (§7.7–§7.11) cannot show a style change: the
# dataset has no responses, padding is trained, `get_peft_model` mutates the "base" used as
# reference, and nothing is measured. With responses, a masked loss, fresh models and a style
# classifier, "the style changed" becomes a number you can compare across methods.

# %% [markdown] nbgrader={"grade": false, "grade_id": "written_q1_question", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ### Written question (2 points)
# Using the numbers this notebook printed (the results table and the generations): (a) what
# share of the parameters did LoRA train, and how does its training-state memory compare with
# SFT's? (b) Did the style score move, for which method most, and did perplexity on the unrelated
# paragraph move with it (forgetting)? (c) What did the 4-bit base buy on this machine, and what
# did it cost? Cite the values.

# %% [markdown] nbgrader={"grade": true, "grade_id": "written_q1", "locked": false, "points": 2, "schema_version": 3, "solution": true, "task": false}
# **Model answer** (numbers from the course's full-mode CPU run, `K` = 6 layers, 20 steps; your
# run's values may differ).
# (a) LoRA trained 488,448 parameters, 0.362 % of the model (SFT: 21,240,576 = 15.79 %, the whole
# last 6 layers). Training state: LoRA 521 MiB, barely more than the 513 MiB of fp32 weights;
# SFT 756 MiB, because gradients and two AdamW moments add 3 × 81 MiB for the trained layers (trained
# on every layer, SFT's state would be ≈ 4 × 513 MiB ≈ 2 GiB).
# (b) The style score (mean P(casual) of the greedy answers) moved from 0.513 (base) to 0.669 (LoRA)
# and 0.661 (QLoRA); SFT with lr 5·10⁻⁵ barely moved it (0.515) in 20 steps. The answers show it:
# LoRA's "Snow is snow! It forms when water from the air gets cold…" vs the base's "Snow formation is
# a complex process…". Perplexity on the unrelated paragraph did not move with style: 26.66 (base) →
# 25.79 (SFT), 24.97 (LoRA), 27.83 (QLoRA) — no sign of forgetting after 20 steps, and LoRA even
# lowered it; the changes are small next to what a longer run could do, and the answers also show a
# cost the perplexity misses ("The sky is cloudy because it gets cloudy when it gets cloudy").
# (c) The 4-bit base cut the training state from 521 MiB (LoRA) to 450 MiB: the 6 quantized layers'
# linear weights shrink ≈ 7× (4.5 bits per weight with the block absmax). It cost a little
# accuracy in training (first loss 3.460 vs 3.418, last 2.933 vs 2.883) and nothing measurable in
# step time here (1.68 vs 1.84 s). On a 135 M model 4 bits buy little; they matter when the frozen
# weights dominate the memory (billions of parameters on one GPU).
