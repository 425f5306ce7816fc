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
# **Book sections.** Book §7.1–§7.3 (framing and formulas: the objective of §7.3.1 in section 3,
# §7.3.4 in section 3b), §7.4 (numeric proof, incl. §7.4.9 INT4), §7.7–§7.12 (the GPT-2 pipeline:
# §7.9's FP16 error, §7.10's GPT-2 LoRA count and §7.11's `prepare_model_for_kbit_training` in
# section 3b; §7.2.2's two instructions, §7.7's "What is El Niño?" and §7.8's dataset in section 4;
# the chapter's summary table in section 5).
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
import contextlib, copy, io, json, math, os, time, warnings
from collections import OrderedDict

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from course_utils.progress import tqdm

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
# **The book's objective (Book §7.3.1).** A causal LM with weights $\theta$ factorises a sequence as
# $p_\theta(x_1, \dots, x_T) = \prod_{t=1}^T p_\theta(x_t \mid x_{<t})$, and training minimises the
# cross-entropy
#
# $$\mathcal{L}(\theta) = -\mathbb{E}_{x \sim \mathcal{D}} \Big[\sum_t \log p_\theta(x_t \mid x_{<t})\Big].$$
#
# SFT, LoRA and QLoRA all minimise this same $\mathcal{L}$; they differ in *which* components of
# $\theta$ may move and in what precision (§7.3.2–§7.3.5). Two details matter in code: the sum runs
# over *every* token of $x$, prompt included, and `transformers` averages over tokens (a mean, not the
# book's per-sequence sum: the same minimiser, a learning rate on a different scale).
#
# The book's SFT dataset (§7.8) is two bare instructions with `labels = input_ids`: the model
# learns to *reproduce the instructions*, and the padding `eos` tokens are trained too. What we
# want is $p(\text{response}\mid\text{prompt})$: the sum of §7.3.1 runs only over the response
# tokens, $\mathcal{L}(\theta) = -\sum_{b}\sum_{t \in R_b} \log p_\theta(x_{b,t} \mid x_{b,<t}) \big/ \sum_b |R_b|$,
# with $R_b$ the response positions of row $b$. With a
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
# ## 3b. The book's pipeline, piece by piece (Book §7.9–§7.11, §7.3.4)
#
# The book's pipeline (§7.7–§7.11) loads GPT-2 and prints nothing we can check. Three of its steps
# can be run here exactly, without downloading GPT-2 and without a GPU.
#
# ### §7.10: the book's LoRA configuration on GPT-2, counted
# The book adapts GPT-2 with `LoraConfig(r=8, lora_alpha=16, lora_dropout=0.1,
# target_modules=["c_attn", "c_proj"], bias="none", task_type="CAUSAL_LM")` and says only "Menos de
# 1% dos parâmetros ficam treináveis". We build GPT-2 small from `GPT2Config()` on PyTorch's `meta`
# device — every shape of the real model, no memory and no weights (a parameter count needs only the
# shapes) — and let `peft` count. Then we count by hand: a LoRA pair on a layer $d_\text{in} \to
# d_\text{out}$ has $r\,(d_\text{in} + d_\text{out})$ parameters.

# %% nbgrader={"grade": false, "grade_id": "gpt2_lora_count", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
from transformers import GPT2Config, GPT2LMHeadModel

BOOK_LORA_CFG = dict(r=8, lora_alpha=16, lora_dropout=0.1, target_modules=["c_attn", "c_proj"], bias="none",
                     task_type="CAUSAL_LM")                       # Book §7.10, verbatim


def gpt2_shaped() -> nn.Module:
    """GPT-2 small (124 M parameters; the book's §7.7 `MODEL_ID = "gpt2"`) with its real shapes on the
    meta device: nothing allocated, nothing downloaded."""
    with torch.device("meta"):
        return GPT2LMHeadModel(GPT2Config())


gpt2_base = gpt2_shaped()
n_base = sum(p_.numel() for p_ in gpt2_base.parameters())
gpt2_lora = get_peft_model(gpt2_base, LoraConfig(**BOOK_LORA_CFG))
gpt2_lora.print_trainable_parameters()
n_tr_gpt2, n_all_gpt2 = gpt2_lora.get_nb_trainable_parameters()
adapted = [n.removeprefix("base_model.model.transformer.") for n, m in gpt2_lora.named_modules() if hasattr(m, "lora_A")]
print(f"GPT-2 small: {n_base:,} parameters; {len(adapted)} adapted layers, block 0's:", [n for n in adapted if n.startswith("h.0.")])
print("'c_proj' matches by name suffix, so it adapts two layers per block: attn.c_proj and mlp.c_proj")
shapes = {"attn.c_attn": (768, 3 * 768), "attn.c_proj": (768, 768), "mlp.c_proj": (4 * 768, 768)}  # (d_in, d_out)
per_block = {k: 8 * (d_in + d_out) for k, (d_in, d_out) in shapes.items()}
by_hand = 12 * sum(per_block.values())
print("by hand, per block:", per_block, "=", sum(per_block.values()), "| x 12 blocks =", f"{by_hand:,}")
print(f"peft: trainable {n_tr_gpt2:,} of {n_all_gpt2:,} = {100 * n_tr_gpt2 / n_all_gpt2:.4f} %  (book: < 1 %)")
print("all = GPT-2 + adapters:", n_all_gpt2 == n_base + by_hand, "| by hand == peft:", by_hand == n_tr_gpt2)
attn_only = get_peft_model(gpt2_shaped(), LoraConfig(**{**BOOK_LORA_CFG, "target_modules": ["c_attn", "attn.c_proj"]}))
n_tr_att, n_all_att = attn_only.get_nb_trainable_parameters()
print(f"with the attention c_proj only: {n_tr_att:,} trainable = {100 * n_tr_att / n_all_att:.4f} %")
print("get_peft_model mutated the model it was given (the 'base' now holds adapters):",
      gpt2_lora.base_model.model is gpt2_base and any("lora_A" in n for n, _ in gpt2_base.named_parameters()))
assert (n_tr_gpt2, n_all_gpt2) == (811_008, 125_250_816) and by_hand == n_tr_gpt2
del gpt2_base, gpt2_lora, attn_only


# %% [markdown]
# The count is **811,008 trainable of 125,250,816, 0.6475 %** — under 1 %, as the book says — and it
# is exact by hand: 67,584 per block × 12. Note the trap in `target_modules=["c_proj"]`: `peft`
# matches module *names by suffix*, and GPT-2 has two layers called `c_proj` in every block — the
# attention output projection `attn.c_proj` (768 → 768) and the MLP down-projection `mlp.c_proj`
# (3072 → 768). The book's configuration therefore adapts three layers per block, not two; with the
# attention one only, the share would be 0.3542 %. (GPT-2's layers are `Conv1D`, weights stored
# transposed: `peft` sets `fan_in_fan_out=True` for them and warns.) And, as printed, `get_peft_model`
# inserts the adapters *into the model it is given*: after §7.10 the book's `base_model` is no longer
# the base, which is why section 4 loads a fresh model for every method.
#
# ### §7.9: the FP16 error is a configuration error
# The book: "Tentamos inicialmente treinar em FP16 e observamos um erro de escalonamento de
# gradiente" — and concludes that SFT in low precision "pode ficar instável". The failing
# configuration is not shown. The usual one is a model *loaded* in float16 (§7.7 loads `base_model`
# with `torch_dtype=torch.float16` on CUDA) trained with `fp16=True`, i.e. automatic mixed precision
# with a `GradScaler`. The scaler multiplies the loss by $2^{16}$ so that small float16 gradients do
# not underflow, and divides the gradients back ("unscale") before the optimizer step — and it
# refuses to do that on float16 gradients, whose division would itself lose precision. Below, the
# same three lines of AMP with float16 weights and with float32 ("master") weights.

# %% nbgrader={"grade": false, "grade_id": "fp16_error", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
def amp_step(weights_dtype: torch.dtype) -> nn.Module:
    """One AMP step (autocast to float16 + GradScaler, what `fp16=True` does) on a layer with the given
    weights: Book §7.9's "erro de escalonamento de gradiente" with float16 weights."""
    torch.manual_seed(0)
    layer = nn.Linear(8, 4).to(weights_dtype)
    opt = torch.optim.AdamW(layer.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu")
    x = torch.randn(16, 8)
    with torch.autocast("cpu", dtype=torch.float16):
        loss = layer(x.to(weights_dtype)).float().pow(2).mean()
    scaler.scale(loss).backward()
    scaler.step(opt)                                   # unscales the gradients, then steps
    scaler.update()
    return layer


for dt in (torch.float16, torch.float32):
    try:
        layer = amp_step(dt)
        print(f"weights {dt}: the step ran; weights still {layer.weight.dtype}, all finite: {bool(layer.weight.isfinite().all())}")
    except ValueError as err:
        print(f"weights {dt}: {type(err).__name__}: {err}")

# %% [markdown]
# The error is `ValueError: Attempting to unscale FP16 gradients.` — raised *before* any step, by a
# check, not by an unstable run. It says nothing about SFT in low precision being unstable; the fix
# is the configuration: keep the trained weights in float32 and let autocast run the matmuls in
# float16 (`fp16=True` on an fp32-loaded model), or use bfloat16 (`bf16=True`), whose exponent range
# is float32's and needs no loss scaling.
#
# ### §7.3.4 and §7.11: where the gradient goes in QLoRA
# The book writes $W' = Q(W) + BA$ with $\nabla_{A,B}\mathcal{L} \neq 0$ — right — and adds "não há
# gradiente passando por $Q(\cdot)$" — imprecise. There is no gradient **to** the quantized weights
# (they are frozen integer codes), but the gradient must pass **through** the dequantized $Q(W)$:
# for $y = Q(W)x$, $\partial\mathcal{L}/\partial x = Q(W)^\top\,\partial\mathcal{L}/\partial y$, and
# without it the adapters of every earlier layer would receive nothing. We check both on one NF4
# layer, then run the book's §7.11 path on a tiny Llama saved to disk (random weights, same code as
# for a real checkpoint): `from_pretrained` with the book's `BitsAndBytesConfig`, then
# `prepare_model_for_kbit_training` — the call the book omits — then `get_peft_model`, one backward
# pass and one optimizer step. (The book's code also has a typo, `AutoModelForCausallLM`, a `NameError`.)

# %% nbgrader={"grade": false, "grade_id": "qlora_gradients", "locked": true, "schema_version": 3, "solution": false, "task": false}
import tempfile
from collections import Counter

import bitsandbytes.functional as bnbF
from peft import prepare_model_for_kbit_training
from transformers import AutoModelForCausalLM, BitsAndBytesConfig, LlamaConfig, LlamaForCausalLM

# (1) one NF4 layer: the input gradient is Q(W)^T g, computed with the dequantized weight
torch.manual_seed(0)
lin = nn.Linear(64, 32)
q4 = bnb.nn.Linear4bit(64, 32, bias=True, compute_dtype=torch.float32, quant_type="nf4")
q4.weight = bnb.nn.Params4bit(lin.weight.data.clone(), requires_grad=False, quant_type="nf4")
q4.bias = nn.Parameter(lin.bias.data.clone(), requires_grad=False)
q4 = q4.to("cpu")                                               # .to() quantizes: uint8 codes + absmax per block of 64
W_deq = bnbF.dequantize_4bit(q4.weight.data, q4.weight.quant_state)   # Q(W), float32
x = torch.randn(5, 64, requires_grad=True)
g = torch.randn(5, 32)
q4(x).backward(g)
print(f"NF4 layer: weight stored as {q4.weight.dtype} {tuple(q4.weight.shape)}, requires_grad={q4.weight.requires_grad}, "
      f"grad={q4.weight.grad}")
print(f"  max |x.grad - g Q(W)| = {(x.grad - g @ W_deq).abs().max().item():.1e}   "
      f"max |x.grad - g W| = {(x.grad - g @ lin.weight).abs().max().item():.3f}  (the gradient goes through Q(W), not W)")

# (2) the book's §7.11 path on a tiny Llama checkpoint
tiny_dir = tempfile.mkdtemp()
torch.manual_seed(0)
bnb_cfg = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.float16)  # Book §7.11
with contextlib.redirect_stderr(io.StringIO()):                 # a progress bar and bitsandbytes' CPU notice
    LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                                 num_key_value_heads=2, tie_word_embeddings=True)).save_pretrained(tiny_dir)
    model_q = AutoModelForCausalLM.from_pretrained(tiny_dir, quantization_config=bnb_cfg, device_map="cpu", dtype=torch.float16)


def describe(m: nn.Module) -> tuple[dict, dict]:
    """(class, dtype, requires_grad) -> number of parameter tensors, and the flags that
    prepare_model_for_kbit_training sets (the call Book §7.11 omits)."""
    kinds = Counter(f"{type(p_).__name__} {str(p_.dtype).removeprefix('torch.')} requires_grad={p_.requires_grad}"
                    for p_ in m.parameters())
    return dict(sorted(kinds.items())), {"gradient_checkpointing": m.is_gradient_checkpointing,
                                         "input-embedding hook": getattr(m, "_require_grads_hook", None) is not None}


print("\nloaded in 4 bit:", model_q.is_loaded_in_4bit, "| q_proj is", type(model_q.model.layers[0].self_attn.q_proj).__name__)
print("before prepare_model_for_kbit_training:", *describe(model_q))
model_q = prepare_model_for_kbit_training(model_q)
print("after  prepare_model_for_kbit_training:", *describe(model_q))
model_qlora = get_peft_model(model_q, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj", "o_proj"],
                                                 bias="none", task_type="CAUSAL_LM"))
packed_before = {n: p_.detach().clone() for n, p_ in model_qlora.named_parameters() if type(p_).__name__ == "Params4bit"}
adapters_before = {n: p_.detach().clone() for n, p_ in model_qlora.named_parameters() if p_.requires_grad}
opt = torch.optim.AdamW([p_ for p_ in model_qlora.parameters() if p_.requires_grad], lr=1e-2, weight_decay=0.0)
ids = torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(0))
model_qlora.train()


def backward_once() -> dict:
    """Zero the grads, one forward and backward pass on `ids`; returns {name: grad} (Book §7.3.4)."""
    opt.zero_grad(set_to_none=True)
    with contextlib.redirect_stderr(io.StringIO()):            # transformers notes that checkpointing turns off the KV cache
        model_qlora(input_ids=ids, labels=ids).loss.backward()
    return {n: p_.grad for n, p_ in model_qlora.named_parameters()}


def grad_norm(grads: dict, layer: int, proj: str, ab: str) -> float:
    """Norm of the gradient of lora_A or lora_B of one attention projection of one layer."""
    return next(g_ for n, g_ in grads.items() if f"layers.{layer}.self_attn.{proj}.lora_{ab}" in n).norm().item()


grads = backward_once()
base4 = [n for n in grads if n in packed_before]
print(f"\n{len(base4)} 4-bit weights, grad None for all: {all(grads[n] is None for n in base4)}")
for layer in (0, 1):
    print(f"layer {layer}: |grad lora_B| q_proj {grad_norm(grads, layer, 'q_proj', 'B'):.2e}, v_proj {grad_norm(grads, layer, 'v_proj', 'B'):.2e}, "
          f"o_proj {grad_norm(grads, layer, 'o_proj', 'B'):.2e} | |grad lora_A| q_proj {grad_norm(grads, layer, 'q_proj', 'A'):.2e}")
opt.step()
print("after one AdamW step: 4-bit codes unchanged:", all(torch.equal(p_, packed_before[n]) for n, p_ in model_qlora.named_parameters()
                                                     if n in packed_before),
      "| adapter tensors changed:", sum(not torch.equal(p_, adapters_before[n]) for n, p_ in model_qlora.named_parameters()
                                       if n in adapters_before), "of", len(adapters_before), "(the B's)")
grads = backward_once()
print(f"second backward: |grad lora_A| of layer 0's q_proj {grad_norm(grads, 0, 'q_proj', 'A'):.2e} (B is no longer 0)")
del lin, q4, W_deq, x, g, model_q, model_qlora, opt, grads, packed_before, adapters_before

# %% [markdown]
# What the outputs show:
#
# * **Through $Q(W)$, not to it.** The NF4 layer's input gradient equals $g\,Q(W)$ to float
#   rounding and differs from $g\,W$: backpropagation uses the dequantized weights. The 4-bit codes
#   have `requires_grad=False` and no `.grad`, and stay bit-identical after the optimizer step.
# * **Adapters behind a quantized layer learn.** The output of `q_proj` and `v_proj` reaches the
#   loss only through attention and the 4-bit `o_proj` after it; at the first step `o_proj`'s own
#   adapter is zero ($B = 0$), so the gradient that `q_proj`'s and `v_proj`'s `lora_B` received
#   (non-zero, printed) went entirely through $Q(W_o)^\top$. If no gradient passed "through
#   $Q(\cdot)$", these adapters could never train. `lora_A` gets *zero* at the first step:
#   $\partial\mathcal{L}/\partial A \propto B^\top$ and $B$ starts at 0 (section 2); after one step
#   $B \ne 0$ and $A$'s gradient is non-zero too (the last line).
# * **What `prepare_model_for_kbit_training` changed.** It froze every parameter (the 16-bit ones
#   too: norms, embeddings), cast the non-quantized 16-bit parameters to float32 (stable layer norms
#   and a float32 output head), enabled gradient checkpointing (activations recomputed in the
#   backward pass: memory for time) and registered a hook that makes the input embeddings' output
#   require grad — without it a checkpointed model whose embeddings are frozen would pass no
#   gradient to the adapters. The book's §7.11 skips this call; with float16 layer norms and no
#   checkpointing, QLoRA on a real model wastes memory and risks float16 overflow.

# %% [markdown]
# ## 4. The style task done properly: SFT vs LoRA vs QLoRA on SmolLM2-135M-Instruct
#
# **The book's dataset (Book §7.8, §7.2.2).** The book's whole SFT dataset is two instructions,
# verbatim (§7.2.2 quotes their beginnings as the example of alignment starting "no dataset"):
#
# > "You are a meteorology expert. Explain El Niño with a scientific tone."
# > "You are a casual assistant. Explain El Niño in a friendly, informal way."
#
# They set a tone, but there is no answer in either: with `labels = input_ids` the model learns to
# *recite the instructions*. We keep the book's two styles and its topic and add what is missing.
#
# **Data.** `assets/12_lora_qlora/style_pairs.jsonl` holds 42 prompts about El Niño and
# neighbouring weather topics, each answered twice, written for this course: by a
# *meteorologist* (precise, technical) and *casually* (friendly, exclamations). We fine-tune the
# model to answer **casually** — SmolLM2-Instruct's default tone is closer to the neutral,
# explanatory one — with the prompt in SmolLM2's chat template masked out of the loss (your
# `masked_lm_loss`). Ten pairs (drawn with a fixed seed) are **held out**: never trained on, they
# measure which of the two styles the model prefers on new prompts. `style_heldout.json` holds six
# more held-out prompts and 20 + 20 *style examples* on other weather topics, used only to train the
# style classifier; eight further prompts are written in the cell below.
#
# **Two style measures, each per prompt, so that each has an interval.**
# 1. *Style score* (what a reader sees): a TF-IDF + logistic-regression classifier trained on the
#    style examples gives $P(\text{casual})$ of a text; we score the greedy answers to the 24
#    held-out prompts. The classifier is weak (its scale is printed below: it gives the
#    meteorologist answers and the casual ones mean scores well inside $(0, 1)$), so a shift must be
#    compared with its noise: a 95 % percentile-bootstrap interval over prompts, and for "did it move?" the
#    *paired* difference after − before on the same prompts, with a sign-flip permutation test.
# 2. *Style margin* (what the model prefers, no generation, no classifier): on each of the ten
#    held-out pairs, the mean $-\log p$ per token of the meteorologist answer minus that of the
#    casual answer, both given the prompt. Positive: the casual answer is the likelier one.

# %% nbgrader={"grade": false, "grade_id": "style_data", "locked": true, "schema_version": 3, "solution": false, "task": false}
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline

PAIRS = [json.loads(line) for line in asset_path("12_lora_qlora/style_pairs.jsonl").read_text().splitlines()]
HELD = json.loads(asset_path("12_lora_qlora/style_heldout.json").read_text())
BOOK_PROMPT = "What is El Niño?"                                  # Book §7.7's reference prompt
BOOK_INSTRUCTIONS = {"meteorologist": "You are a meteorology expert. Explain El Niño with a scientific tone.",
                     "casual": "You are a casual assistant. Explain El Niño in a friendly, informal way."}   # Book §7.8
assert PAIRS[0]["prompt"] == BOOK_PROMPT
_order = np.random.default_rng(0).permutation(np.arange(1, len(PAIRS)))   # pair 0 (the book's prompt) stays in training
HOLD_IDX = sorted(int(i) for i in _order[:10])
HOLD_PAIRS = [PAIRS[i] for i in HOLD_IDX]
TRAIN_PAIRS = [p_ for i, p_ in enumerate(PAIRS) if i not in HOLD_IDX]
EXTRA_PROMPTS = ["What is a tornado?", "How do clouds form?", "What is the greenhouse effect?", "Why do we have seasons?",
                 "How does lightning form?", "What is a blizzard?", "What is air pressure?", "How does a weather forecast work?"]
EVAL_PROMPTS = HELD["held_out_prompts"] + [p_["prompt"] for p_ in HOLD_PAIRS] + EXTRA_PROMPTS   # none is trained on
assert not set(EVAL_PROMPTS) & {p_["prompt"] for p_ in TRAIN_PAIRS}

ex = HELD["classifier_examples"]
style_clf = make_pipeline(TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, analyzer="word"),
                          LogisticRegression(C=10.0, max_iter=1000))
style_clf.fit(ex["meteorologist"] + ex["casual"], [0] * len(ex["meteorologist"]) + [1] * len(ex["casual"]))


def style_probs(texts) -> np.ndarray:
    """P(casual) of each text under the style classifier (a numpy array)."""
    return style_clf.predict_proba(list(texts))[:, 1]


def style_score(texts):
    """Mean P(casual) of the texts under the style classifier."""
    return float(style_probs(texts).mean())


from course_utils.stats import bootstrap_ci, sign_flip_p
# bootstrap_ci(x): mean of x and its 95 % percentile-bootstrap interval (scipy.stats.bootstrap, seeded);
# sign_flip_p(d): two-sided paired permutation test of mean(d) = 0, each difference's sign flipped


def ci_text(x, digits: int = 3) -> str:
    """'mean [lo, hi]' with the 95 % bootstrap interval."""
    m, lo, hi = bootstrap_ci(x)
    return f"{m:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def change_text(after, before, digits: int = 3) -> str:
    """The paired difference after - before (same prompts or rows): 'mean [lo, hi] p=...'."""
    d = np.asarray(after, dtype=float) - np.asarray(before, dtype=float)
    p_value = sign_flip_p(d)
    return f"{ci_text(d, digits)} " + (f"p={p_value:.3f}" if p_value >= 0.001 else "p<0.001")


acc = np.mean(np.r_[style_clf.predict([p_["meteorologist"] for p_ in PAIRS]) == 0,
                    style_clf.predict([p_["casual"] for p_ in PAIRS]) == 1])
p_met, p_cas = style_probs(p_["meteorologist"] for p_ in PAIRS), style_probs(p_["casual"] for p_ in PAIRS)
print(f"{len(PAIRS)} pairs: {len(TRAIN_PAIRS)} trained on, {len(HOLD_PAIRS)} held out; {len(EVAL_PROMPTS)} held-out prompts")
print(f"classifier accuracy on the 84 course responses (not seen by the classifier): {acc:.3f}")
print(f"style score [95% CI over the 42 prompts]: meteorologist answers {ci_text(p_met)}, casual answers {ci_text(p_cas)}")
print(f"paired casual - meteorologist, same prompt: {change_text(p_cas, p_met)}   <- the classifier's full scale")

# %% [markdown]
# The classifier separates the styles (accuracy above) but compresses them: the mean score of a
# *perfectly* casual answer set and of a perfectly technical one differ by the paired value printed
# last, not by 1. A model that moved all the way from one style to the other would move the style
# score by about that much; anything much smaller than the interval widths is noise.
#
# **The pipeline.** The same code runs the three methods; only *what is trainable* and *how the
# base is stored* change (Book §7.5: "o que muda é a engenharia do gradiente"):
#
# * **SFT** — every parameter of the last `K` decoder layers trainable (full fine-tuning restricted to
#   those layers, to fit the CPU budget; on CUDA all layers, i.e. every parameter but the embeddings),
#   fp32, AdamW with the book's learning rate (§7.9: $5\cdot10^{-5}$).
# * **LoRA** — `peft` adapters $r=8$, $\alpha=16$ on all seven projections (q, k, v, o, gate, up,
#   down) of the last `K` decoder layers, base frozen, lr $10^{-3}$.
# * **QLoRA** — the same adapters on a base whose linear layers in those `K` layers are
#   `bitsandbytes` NF4 (`bnb.nn.Linear4bit`, blocks of 64, compute in fp32 on CPU / bf16 on CUDA).
#
# **Honest scope.** To fit the chapter's 5-minute budget on 2 CPU cores, the trained weights, the
# adapters and the 4-bit base cover the last `K` layers only (`K` = 2 in CI mode, 6 in full mode); on
# CUDA `K` = all 30. Every model is trained on batches of 8 short sequences (full mode: 16 steps,
# 4 epochs of the 32 training pairs; CI mode: 2 steps, far too few to change a style — the CI run
# only proves the code runs). Under autograding the runs are skipped (`SKIP_RUNS`): no graded test
# uses them.
#
# **Loss.** Each training step sees a different batch, so the per-step loss mixes progress with
# batch difficulty (a harder batch at step 2 makes the loss "rise"). The loss we compare is the
# *fit loss*: the response-only loss of every training pair, before and after, on the same rows.
#
# **Memory.** On CPU we report the bytes of the *training state*: weights
# (`get_memory_footprint()`, 4-bit weights at their packed size) + gradients + AdamW's two moments
# of the trainable parameters — exact and deterministic, unlike process RSS. On CUDA we also print
# `torch.cuda.max_memory_allocated()`.
#
# **Forgetting.** Perplexity on twelve unrelated sentences (cooking, a library, chess, …), and the
# paired change of each sentence's loss.
#
# **Fresh models.** `get_peft_model` *modifies the model it wraps* (section 3b), so every method and
# the "before" reference load a fresh copy with `load_model`.

# %% nbgrader={"grade": false, "grade_id": "pipeline", "locked": true, "schema_version": 3, "solution": false, "task": false}
ON_CUDA = DEVICE.type == "cuda" if hasattr(DEVICE, "type") else str(DEVICE).startswith("cuda")
N_LAYERS = 30
K = N_LAYERS if ON_CUDA else (2 if CI_MODE else 6)
STEPS = 2 if CI_MODE else 16
BATCH = 8
MAX_NEW = 16 if CI_MODE else 40
GEN_PROMPTS = EVAL_PROMPTS[:4] if CI_MODE else EVAL_PROMPTS
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
LAST_K = list(range(N_LAYERS - K, N_LAYERS))
UNRELATED = [
    "The recipe asks for two cups of flour, a pinch of salt and three eggs.",
    "Mix the dry ingredients first, then add the eggs one at a time and stir until the dough is smooth.",
    "The city library opens at nine on weekdays and closes early on Saturdays.",
    "Its oldest book, a printed atlas from the sixteenth century, is kept in a glass case near the entrance.",
    "Chess players often open with the king's pawn, because it frees the queen and the bishop at once.",
    "The train to the coast leaves every hour and takes a little under two hours.",
    "She tuned the old piano before the concert, one string at a time.",
    "A good bicycle chain should be cleaned and oiled every few hundred kilometres.",
    "The museum's new wing shows paintings by artists from the early twentieth century.",
    "To solve the equation, subtract three from both sides and divide by two.",
    "The children planted tomatoes and beans in the small garden behind the school.",
    "Our team meets every Monday morning to plan the work of the week.",
]


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


if not SKIP_RUNS:
    TRAIN = [encode_pair(p_["prompt"], p_["casual"]) for p_ in TRAIN_PAIRS]
    HOLD_ROWS = {s_: [encode_pair(p_["prompt"], p_[s_]) for p_ in HOLD_PAIRS] for s_ in ("meteorologist", "casual")}


def collate(rows: list) -> tuple:
    """Right-padded batch (ids, mask, prompt lengths) of (ids, prompt length) rows."""
    T = max(len(ids) for ids, _ in rows)
    ids = torch.full((len(rows), T), TOK.pad_token_id, dtype=torch.long)
    mask = torch.zeros(len(rows), T, dtype=torch.long)
    for b, (r, _) in enumerate(rows):
        ids[b, :len(r)] = torch.tensor(r)
        mask[b, :len(r)] = 1
    return ids.to(DEVICE), mask.to(DEVICE), [pl for _, pl in rows]


def batches(seed=0):
    """Endless stream of right-padded training batches, reshuffled every epoch (the same for every method)."""
    g = torch.Generator().manual_seed(seed)
    while True:
        order = torch.randperm(len(TRAIN), generator=g).tolist()
        for i in range(0, len(order) - BATCH + 1, BATCH):
            yield collate([TRAIN[j] for j in order[i:i + BATCH]])


@torch.no_grad()
def response_nll(model, rows: list) -> np.ndarray:
    """Per-row mean -log p of the response tokens (your masked_lm_loss on one row at a time)."""
    out = []
    for i in range(0, len(rows), BATCH):
        ids, mask, plen = collate(rows[i:i + BATCH])
        logits = model(input_ids=ids, attention_mask=mask).logits
        out += [masked_lm_loss(logits[b:b + 1], ids[b:b + 1], plen[b:b + 1], mask[b:b + 1]).item() for b in range(len(plen))]
    return np.array(out)


@torch.no_grad()
def sentence_nll(model, texts: list) -> tuple[np.ndarray, np.ndarray]:
    """(per-text mean -log p per token, per-text token count) for plain texts (no chat template)."""
    nll, n = [], []
    for t in texts:
        ids = TOK(t, return_tensors="pt")["input_ids"].to(DEVICE)
        nll.append(model(ids, labels=ids).loss.item())
        n.append(ids.shape[1] - 1)
    return np.array(nll), np.array(n)


def evaluate(model, system: str | None = None) -> dict:
    """Everything we measure on a model: greedy answers (the book's §7.7 prompt, then the held-out prompts)
    and their style, the held-out style margins, the fit loss on the training pairs, the unrelated text
    (Book §7.12: a reference behaviour measured the same way before and after)."""
    gens = generate_text(model, TOK, [BOOK_PROMPT] + list(GEN_PROMPTS), max_new_tokens=MAX_NEW, batch=True, system=system)
    res = dict(book=gens[0], gens=gens[1:], style=style_probs(gens[1:]))
    if system is None:
        res["margin"] = response_nll(model, HOLD_ROWS["meteorologist"]) - response_nll(model, HOLD_ROWS["casual"])
        res["fit"] = response_nll(model, TRAIN)
        res["unrel"], n_tok = sentence_nll(model, UNRELATED)
        res["ppl"] = math.exp(float((res["unrel"] * n_tok).sum() / n_tok.sum()))
    return res


def train_state_bytes(model):
    trainable = sum(p_.numel() * p_.element_size() for p_ in model.parameters() if p_.requires_grad)
    return model.get_memory_footprint() + 3 * trainable          # weights + grads + AdamW m and v


def train(model, lr, name):
    """A plain training loop with the student's masked_lm_loss. Returns (losses, seconds of each step)."""
    params = [p_ for p_ in model.parameters() if p_.requires_grad]
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
        opt.step()
        opt.zero_grad(set_to_none=True)
        if ON_CUDA:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    model.eval()
    return losses, np.array(times)


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
print(f"device {DEVICE} | adapters/4-bit on the last K={K} layers | {STEPS} steps of {BATCH} sequences "
      f"| {len(GEN_PROMPTS)} held-out prompts, {MAX_NEW} new tokens")

# %% [markdown]
# ### Before: the untouched base, and the book's two instructions as a system prompt
# The book's instructions are a way to get a style *without training*: we give each one to the base
# model as its system prompt. This is also a positive control for the style score — if prompting for
# a casual tone does not move it, a fine-tuned model's score cannot be read either.

# %% nbgrader={"grade": false, "grade_id": "run_base", "locked": true, "schema_version": 3, "solution": false, "task": false}
RESULTS, EVALS = {}, {}
if not SKIP_RUNS:
    base, _ = fresh_model()
    EVALS["base"] = evaluate(base)
    RESULTS["base"] = dict(trainable=0, total=count_trainable(base)[1], step_s=np.array([np.nan]),
                           state_mib=base.get_memory_footprint() / 2**20, losses=[])
    for s_, instr in BOOK_INSTRUCTIONS.items():
        EVALS[f"base+{s_[:5]}."] = evaluate(base, system=instr)
    del base
    b_style = EVALS["base"]["style"]
    print(f"style score [95% CI over {len(b_style)} prompts]: base {ci_text(b_style)}")
    for k in ("base+meteo.", "base+casua."):
        print(f"  {k:12s} {ci_text(EVALS[k]['style'])}   paired change vs base: {change_text(EVALS[k]['style'], b_style)}")
    print(f"style margin of the base [95% CI over {len(HOLD_PAIRS)} held-out pairs]: {ci_text(EVALS['base']['margin'])} nats/token")


# %% [markdown]
# **What the base shows** (SmolLM2-135M-Instruct, the offline stand-in named by the banner; the
# numbers are this notebook's full-mode run). Its answers score 0.544 [0.506, 0.581] — between the
# course's meteorologist answers (0.403) and casual ones (0.702) — and it has no preference between
# the two styles of the held-out pairs (margin 0.040, interval from −0.424 to 0.480). The book's
# instructions as a system prompt barely move it: the casual one by 0.046 [0.001, 0.087], p = 0.054
# (at the edge of noise; one answer drifts off topic), the meteorologist one not at all (−0.004,
# p = 0.899). A 135 M model mostly ignores a style instruction; a shift from training has to be
# compared with these.

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
    EVALS[method] = evaluate(model)
    RESULTS[method] = dict(trainable=n_tr, total=n_all, step_s=step_s, state_mib=train_state_bytes(model) / 2**20,
                           losses=losses, cuda_peak_mib=torch.cuda.max_memory_allocated() / 2**20 if ON_CUDA else None)
    del model


if not SKIP_RUNS:
    for method in ("SFT", "LoRA", "QLoRA"):
        run(method)
    BASE_EV = EVALS["base"]
    print(f"{'method':7s} {'trainable':>11s} {'share %':>8s} {'s/step':>7s} {'state MiB':>10s} {'fit loss':>9s} "
          f"{'ppl unrel.':>10s} {'style P(casual)':>16s} {'style margin':>13s}")
    for k, r in RESULTS.items():
        e = EVALS[k]
        step_txt = f"{np.median(r['step_s'][1:]):7.2f}" if len(r["step_s"]) > 1 else f"{'-':>7s}"
        print(f"{k:7s} {r['trainable']:11,d} {100 * r['trainable'] / r['total']:8.3f} {step_txt} {r['state_mib']:10.0f} "
              f"{e['fit'].mean():9.3f} {e['ppl']:10.2f} {e['style'].mean():16.3f} {e['margin'].mean():13.3f}")
    print("\nPaired changes vs the base: mean [95% bootstrap CI] and sign-flip p-value")
    for k in ("SFT", "LoRA", "QLoRA"):
        e = EVALS[k]
        print(f"{k:6s} style score {change_text(e['style'], BASE_EV['style'])} ({len(BASE_EV['style'])} prompts) | "
              f"style margin {change_text(e['margin'], BASE_EV['margin'])} ({len(BASE_EV['margin'])} pairs)")
        print(f"{'':6s} fit loss {change_text(e['fit'], BASE_EV['fit'])} ({len(BASE_EV['fit'])} pairs) | "
              f"unrelated-text loss {change_text(e['unrel'], BASE_EV['unrel'])} ({len(BASE_EV['unrel'])} sentences)")
    e, b_ = EVALS["QLoRA"], EVALS["LoRA"]
    print(f"QLoRA - LoRA (paired): style score {change_text(e['style'], b_['style'])} | style margin "
          f"{change_text(e['margin'], b_['margin'])}\n{'':21s}fit loss {change_text(e['fit'], b_['fit'])} | "
          f"unrelated-text loss {change_text(e['unrel'], b_['unrel'])}")
    print("\nTraining loss per step (a different batch each step):")
    for k in ("SFT", "LoRA", "QLoRA"):
        print(f"  {k:6s}", " ".join(f"{v:.3f}" for v in RESULTS[k]["losses"]))
    if len(RESULTS["LoRA"]["step_s"]) > 2:
        ratio = RESULTS["QLoRA"]["step_s"][1:] / RESULTS["LoRA"]["step_s"][1:]   # the same batches, step by step
        print(f"QLoRA / LoRA step time, paired by step: {ci_text(ratio, 2)}")
    if ON_CUDA:
        print("CUDA peak MiB:", {k: round(RESULTS[k]["cuda_peak_mib"]) for k in ("SFT", "LoRA", "QLoRA")})

# %% [markdown]
# The numbers above are from SmolLM2-135M-Instruct (the banner says which weights) on this
# machine; step times on a shared 2-core CPU are noisy. Read them as follows.
#
# * **Trainable share.** SFT trains every weight of the last `K` layers (all 30 on CUDA); LoRA/QLoRA
#   train well under 1 % (the book's "menos de 1%", §7.10; the share depends on `K` and on which
#   projections get adapters).
# * **Memory.** The SFT training state adds 3× the trained weights (grads + two AdamW moments;
#   ≈ 4× the fp32 weights when everything is trained); LoRA's is barely more than the weights; QLoRA
#   saves on top only the bytes of the quantized layers (all of them on CUDA). For a 135 M model this
#   is small change — 4-bit starts to pay when the *frozen weights* dominate the budget (billions of
#   parameters on one GPU).
# * **Step time.** Every forward and backward pass of QLoRA dequantizes the 4-bit weights before
#   an ordinary matmul. With a training batch (8 sequences of ≈ 100 tokens) the matmuls dominate
#   and that decoding should cost little. On a shared 2-core CPU the measured ratio is not stable:
#   the methods run one after the other, so a change in the load of other processes between two
#   runs is *not* removed by pairing steps, and the interval printed covers the steps of one run
#   only. The committed run printed the ratio above; two earlier full-mode runs of this notebook,
#   measured on the same machine, gave 1.00 and 1.02. Read it as "no reliable difference measured
#   here". For one token at a time — generation, chapter 11 — the decoding dominates and 4-bit is
#   many times slower. Memory, not speed, is what 4 bits buy (Book §6.5–§6.7 says the same).
# * **Loss and style.** Compare the *paired* changes: an interval that contains 0 (or a large p) means
#   this run cannot tell the method from no training at all. The figure below draws each model's own
#   interval, and those overlap: the prompts differ from one another far more than the models do.
#   Pairing each prompt with itself before and after removes that spread.
#
# **What this run shows** (the committed full-mode run: SmolLM2-135M-Instruct, the offline stand-in,
# `K` = 6, 16 steps; a run on the hub weights gives other values).
# *The loss falls.* The fit loss on the 32 training pairs drops from 3.567 to 2.663 (SFT), 2.539
# (LoRA) and 2.578 (QLoRA): paired changes of −0.904, −1.028 and −0.989 nats/token, intervals far
# from 0. The per-step training loss zig-zags (3.673, 3.243, 3.601, …) because each step sees a
# different batch; that zig-zag is what made a 2-step run look like a rising loss.
# *The style moved for LoRA and QLoRA, not for SFT.* Style score +0.088 [0.036, 0.136] (p = 0.004)
# for LoRA and +0.121 [0.084, 0.154] for QLoRA; style margin +0.341 [0.206, 0.480] and +0.361
# [0.240, 0.492] — both measures agree, and both exceed what the book's casual instruction did as a
# prompt (+0.046). SFT with the book's learning rate fits the training answers (fit loss −0.904) but
# its held-out style did not move: score −0.023 [−0.064, 0.022], p = 0.316; margin +0.026
# [−0.084, 0.122], p = 0.656. Sixteen steps at $5\cdot10^{-5}$ learn the content of the answers, not
# a tone that transfers to new prompts; LoRA's higher learning rate on few parameters does. All shifts
# stay well short of the classifier's full scale (0.299): a partial style change, visible in the
# generations ("El Niño is a pretty cool thing!") together with a cost no score here measures —
# repetitive, sometimes wrong content ("warm air gets warm and rises, and cool air gets cool").
# *No forgetting is detectable*: the loss on the unrelated sentences went *down* for all three
# (−0.074 [−0.097, −0.047], −0.139 [−0.179, −0.098], −0.076 [−0.148, 0.016]); 16 steps on 6 layers
# are far from overwriting what the model knows.
# *QLoRA vs LoRA*, paired on the same prompts and rows: the 4-bit base costs a little fit (fit loss
# +0.039 [0.017, 0.064], p = 0.003; at the first step 3.746 vs 3.673 on the same batch, the
# quantization error) and nothing consistent in style (score +0.033 [0.004, 0.063], p = 0.038, but
# margin +0.021 [−0.036, 0.074], p = 0.494). Step time: 5.24 s vs 4.05 s, ratio 1.27 [1.20, 1.35]
# paired step by step in this run — but see the step-time note above: on this shared CPU the ratio
# moves from run to run more than that interval says.

# %% nbgrader={"grade": false, "grade_id": "generations", "locked": true, "schema_version": 3, "solution": false, "task": false}
if not SKIP_RUNS:
    print(f"### {BOOK_PROMPT}   (Book §7.7's reference prompt; a training prompt here, so this shows fit, not generalisation)")
    for k in EVALS:
        print(f"  [{k:11s}] {EVALS[k]['book']!r}")
    for i, q in enumerate(GEN_PROMPTS[:6]):
        print(f"### {q}")
        for k in EVALS:
            print(f"  [{k:11s}] P(casual)={EVALS[k]['style'][i]:.2f} {EVALS[k]['gens'][i]!r}")
    fig, ax = plt.subplots(1, 3, figsize=(14, 3.4))
    for k in ("SFT", "LoRA", "QLoRA"):
        ax[0].plot(range(1, len(RESULTS[k]["losses"]) + 1), RESULTS[k]["losses"], marker="o", label=k)
    ax[0].set_xlabel("training step (a different batch each step)"); ax[0].set_ylabel("response-only loss (nats/token)")
    ax[0].set_title("Training loss, SmolLM2-135M-Instruct"); ax[0].legend()
    names = list(EVALS)
    cis = np.array([bootstrap_ci(EVALS[k]["style"]) for k in names])
    ax[1].errorbar(range(len(names)), cis[:, 0], yerr=[cis[:, 0] - cis[:, 1], cis[:, 2] - cis[:, 0]], fmt="o", capsize=4)
    ax[1].axhline(p_met.mean(), ls="--", c="tab:blue", lw=1, label="course meteorologist answers")
    ax[1].axhline(p_cas.mean(), ls="--", c="tab:orange", lw=1, label="course casual answers")
    ax[1].set_xticks(range(len(names)), names, rotation=20); ax[1].set_ylim(0, 1); ax[1].legend(fontsize=7)
    ax[1].set_ylabel("style score: mean P(casual), 95% CI"); ax[1].set_title("Style of the greedy answers (held-out prompts)")
    m_names = [k for k in names if "margin" in EVALS[k]]
    cis = np.array([bootstrap_ci(EVALS[k]["margin"]) for k in m_names])
    ax[2].errorbar(range(len(m_names)), cis[:, 0], yerr=[cis[:, 0] - cis[:, 1], cis[:, 2] - cis[:, 0]], fmt="o", capsize=4)
    ax[2].axhline(0, c="k", lw=0.8); ax[2].set_xticks(range(len(m_names)), m_names)
    ax[2].set_ylabel("NLL(meteo.) - NLL(casual), nats/token"); ax[2].set_title("Style margin on held-out pairs, 95% CI")
    plt.tight_layout(); plt.show()

# %% [markdown]
# ## 5. Reflect
#
# **The book's summary (Síntese), with what this notebook measured.** The first three columns are
# the book's table (translated); the last says where this notebook checks it.
#
# | Technique | What changes (book) | Cost (book) | Checked here |
# |---|---|---|---|
# | SFT | all the weights | very high | section 4: trainable share, training-state memory (3 × the trained weights on top), fit loss, forgetting |
# | LoRA | a subspace | low | section 1 (the rank-1 step), section 2 (your layer = `peft`'s), section 3b (811,008 trainable on GPT-2, 0.6475 %), section 4 |
# | QLoRA | subspace + INT4 | very low | section 1 (§7.4.9), section 3b (gradient through $Q(W)$, 4-bit codes frozen), section 4 (memory of the 4-bit layers; step time paired with LoRA) |
#
# "Fine-tuning moderno não é escolher técnica. É decidir onde, quanto e em que precisão mexer nos
# pesos" (Book, Síntese). **What the book gets right, and what it leaves out.** The proof of §7.4 is
# right up to two rounded losses (1.0019 → 0.9429). Its pipeline (§7.7–§7.11) cannot show a style
# change: the dataset has no responses, padding is trained, `get_peft_model` mutates the "base" used as
# reference, the FP16 error is a configuration error, `prepare_model_for_kbit_training` is missing, and
# nothing is measured. With responses, a masked loss, fresh models, held-out prompts and intervals,
# "the style changed" becomes a claim you can check — or refute.

# %% [markdown] nbgrader={"grade": false, "grade_id": "written_q1_question", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ### Written question (2 points)
# Using the numbers this notebook printed (the results table, the paired changes and the
# generations): (a) what share of the parameters did LoRA train, and how does its training-state
# memory compare with SFT's? (b) Did the style move, for which method, and is the change larger
# than its noise (cite an interval or a p-value, for the style score and for the style margin)? Did
# the loss on the unrelated sentences move with it (forgetting)? (c) What did the 4-bit base buy on
# this machine, and what did it cost? Cite the values.

# %% [markdown] nbgrader={"grade": true, "grade_id": "written_q1", "locked": false, "points": 2, "schema_version": 3, "solution": true, "task": false}
# **Model answer** (numbers from the committed full-mode CPU run of SmolLM2-135M-Instruct — the
# offline stand-in: the real weights after Q4_1 rounding —, `K` = 6 layers, 16 steps; your run's
# values may differ).
# (a) LoRA trained 488,448 parameters, 0.362 % of the model (SFT: 21,240,576 = 15.790 %, every
# weight of the last 6 layers). Training state: LoRA 521 MiB, barely more than the 513 MiB of fp32
# weights; SFT 756 MiB, because gradients and two AdamW moments add three copies of the 81 MiB of
# trained weights (trained on every layer, SFT's state would be about 4 × 513 MiB ≈ 2 GiB).
# (b) The style moved for LoRA and QLoRA: paired change of the style score +0.088 [0.036, 0.136],
# p = 0.004 (LoRA) and +0.121 [0.084, 0.154] (QLoRA) over 24 held-out prompts, and of the style
# margin +0.341 [0.206, 0.480], p = 0.004 and +0.361 [0.240, 0.492], p = 0.002 over 10 held-out
# pairs: both intervals exclude 0, so these are real shifts, not noise — though far from the
# classifier's full scale (0.299). SFT (book's lr) did not move it: −0.023 [−0.064, 0.022], p = 0.316;
# margin +0.026, p = 0.656, although its fit loss fell by 0.904. The generations agree ("El Niño is a
# pretty cool thing!" from LoRA vs the base's textbook definition). Perplexity on the unrelated text
# did not rise: 59.00 (base) → 55.01 (SFT), 51.52 (LoRA), 55.39 (QLoRA), paired loss changes
# −0.074, −0.139, −0.076 [−0.148, 0.016]: no forgetting detectable; the cost shows in the answers
# instead (repetitive, partly wrong content).
# (c) The 4-bit base cut the training state from 521 MiB (LoRA) to 450 MiB: the 6 quantized layers'
# linear weights shrink about 7× (NF4 codes plus one float32 absmax per block of 64:
# $4 + 32/64$ bits per weight). It cost a little accuracy at the start — first-step loss 3.746 vs
# 3.673 on the same batch, the quantization error — and a slightly higher fit loss after training
# (2.578 vs 2.539; paired +0.039 [0.017, 0.064], p = 0.003), while the style was not worse (margin
# +0.021, p = 0.494). Step time: 5.24 s vs 4.05 s in the committed run (ratio 1.27 [1.20, 1.35] over
# its steps), but the ratio is not stable on this shared machine (two earlier runs measured on the
# same CPU gave 1.00 and 1.02): no reliable cost or gain in speed here. On a 135 M model 4 bits buy little;
# they matter when the frozen weights dominate the memory (billions of parameters on one GPU).
