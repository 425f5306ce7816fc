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
# book only describes: trainable share, memory, forgetting, a format rule that a program can check,
# the effect of the learning rate and of the rank, and what ROUGE and BLEU see.
#
# **Book sections.** Book §7.1–§7.3 (framing and formulas: the objective of §7.3.1 in section 3,
# §7.3.4 in section 3b), §7.4 (numeric proof, incl. §7.4.9 INT4), §7.7–§7.12 (the GPT-2 pipeline:
# §7.9's FP16 error, §7.10's GPT-2 LoRA count and §7.11's `prepare_model_for_kbit_training` in
# section 3b; §7.2.2's two instructions, §7.7's "What is El Niño?" and §7.8's dataset in section 4;
# §7.2.3–§7.2.4, evaluation as part of the decision, in section 4c; the learning rate of each method
# in section 4d; the chapter's summary table and what this notebook leaves out in section 5).
#
# **Time.** Full mode takes 10 to 14 minutes on a 2-core CPU, of which section 4d's learning-rate grid
# (54 short training runs, counted by a progress bar) takes 7 to 10; CI mode about a minute.
#
# **You will implement (graded).**
# 1. `LoRALinear` — a LoRA adapter around a frozen `nn.Linear`: init and freezing (1 pt),
#    output and merged weight equal to `peft`'s (2 pts)
# 2. `masked_lm_loss` — the causal-LM loss on the response tokens only (2 pts)
# 3. `lora_from_update` — the best rank-$r$ adapter for a full update (1 pt); section 4 uses it to ask
#    how much of SFT's update a rank-8 adapter could hold
# 4. `lora_scaling` and `first_adam_update` — the rank-scaling rule $\alpha/r$ vs $\alpha/\sqrt r$, and
#    the first AdamW update of an adapter, which section 4b compares with the measured one (1 + 1 pts)
#
# plus one written question (2 pts) that asks for evidence from this notebook's outputs.
#
# Define each graded function or class in its answer cell in this notebook (helpers of your own are fine):
# the hidden tests check where each one is defined. <!-- clause-all: defined-here -->

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
# use. The paper's reason: with it, a learning rate tuned at one rank should keep working at
# another. Section 4b measures whether it does, and it does not quite: at a fixed $\alpha$ the
# first update *shrinks* as $r$ grows — by a factor 0.130 from $r = 1$ to $r = 64$ with AdamW (about
# $1/\sqrt r$) and 0.0028 with plain SGD — while `peft`'s other option, $\alpha/\sqrt r$ (rsLoRA), keeps
# AdamW's first update about the same size (a factor 1.041). `peft` initialises $A$ like the
# weight of `nn.Linear(d_in, r)` (Kaiming-uniform with $a=\sqrt5$, i.e. $U(-1/\sqrt{d_\text{in}},
# 1/\sqrt{d_\text{in}})$) and $B = 0$, so **at initialisation the adapted layer equals the base
# layer** and training starts from the pre-trained model. (Swap the two — $A = 0$, $B$ random —
# and the gradient w.r.t. $B$ is $\propto (Ax)^\top = 0$ while $A$ gets a gradient through
# $B$: it trains, but that is not what `peft` does.) After training, $BA$ can be merged:
# $W_\text{merged} = W + \frac{\alpha}{r}BA$, one matrix, zero inference overhead.
#
# ### Exercise 1 — a LoRA linear layer from scratch (1 + 2 points)
#
# Complete `LoRALinear(base, r=8, alpha=16)`. Store the parameters as `nn.Parameter`s `A` (shape
# `(r, in_features)`) and `B` (shape `(out_features, r)`). <!-- clause: parameters -->
# Give them the dtype and the device of the base weight. <!-- clause: base-dtype -->
# Store the float `scaling = alpha / r`. <!-- clause: scaling -->
# Initialise `A` exactly like the weight of `nn.Linear(in_features, r)`
# (`nn.init.kaiming_uniform_(A, a=math.sqrt(5))`). <!-- clause: init-a -->
# Initialise `B` to zeros, so that at initialisation the layer's output equals the base layer's. <!-- clause: init-b -->
# Keep the layer given as `self.base` (the same object, not a copy). <!-- clause: same-base -->
# Freeze it: its weight and bias get `requires_grad = False`, and `A` and `B` are the only trainable
# parameters. <!-- clause: frozen -->
# Leave the values of the base weight and bias unchanged. <!-- clause: unchanged-base -->
# `forward(x) = base(x) + scaling * x @ A.T @ B.T` for `x` of shape `(..., in_features)`
# (any number of leading dimensions); `merged_weight()` returns $W + \text{scaling}\cdot BA$, shape
# `(out_features, in_features)`. Raise `ValueError` if `base` is not an `nn.Linear`, if `r` is not an
# `int` $\ge 1$ (a `float` is refused), or if `alpha` $\le 0$. <!-- clause: bad-args -->
# Do not use `peft` here.

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


# %% nbgrader={"grade": true, "grade_id": "test_ex1_lora_init", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
from course_utils.grading import check_close, check_equal, check_shape, check_true, msg
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
    raise AssertionError(msg("r=0 must raise ValueError"))
except ValueError:
    pass
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import outcome, record
record("module of LoRALinear (it must be defined in this notebook)", LoRALinear.__module__)  # clause: defined-here
torch.manual_seed(1)
_lin = nn.Linear(300, 50, bias=True)
_x = torch.randn(4, 300, generator=torch.Generator().manual_seed(2))
_layer = LoRALinear(_lin, r=16, alpha=8)
record("type of A and of B (nn.Parameter)", [type(_layer.A).__name__, type(_layer.B).__name__])  # clause: parameters
record("shape of A (r=16, in=300)", list(_layer.A.shape))  # clause: parameters
record("dtype of A (the base weight's)", str(_layer.A.dtype))  # clause: base-dtype
record("B at init (zeros of shape (out=50, r=16))", _layer.B.detach().clone())  # clause: init-b, parameters
record("scaling = alpha / r (r=16, alpha=8)", _layer.scaling, atol=1e-12)  # clause: scaling
record("requires_grad of the base weight and bias (frozen)", [_lin.weight.requires_grad, _lin.bias.requires_grad])  # clause: frozen
# clause: unchanged-base
record("base weight after LoRALinear(base) (values unchanged)", _lin.weight.detach().clone())
record("base bias after LoRALinear(base) (values unchanged)", _lin.bias.detach().clone())
record("names of the trainable parameters", sorted(n for n, p_ in _layer.named_parameters() if p_.requires_grad))  # clause: frozen
record("LoRALinear(x) at init (r=16, alpha=8): equals the base layer", _layer(_x), atol=1e-6)  # clause: init-b
# A ~ U(-1/sqrt(in), 1/sqrt(in)) (Kaiming-uniform, a=sqrt(5)): counts of A / bound in 10 equal bins
# of [-1, 1], plus two bins for values outside the range (probability 0)
_bound = 1 / math.sqrt(300)
_u = (_layer.A.detach().double() / _bound).flatten()
_edges = torch.linspace(-1, 1, 11, dtype=torch.float64)
_edges[0], _edges[-1] = -1 - 1e-6, 1 + 1e-6
_counts = [int((_u < _edges[0]).sum())] + [int(((_u >= lo) & (_u < hi)).sum()) for lo, hi in zip(_edges[:-1], _edges[1:])] \
    + [int((_u >= _edges[-1]).sum())]
record("counts of A / (1/sqrt(in)) in: below -1, 10 bins of [-1, 1], above 1 (r=16, in=300)",  # clause: init-a
       np.array(_counts, dtype=np.int64), pvalue=1e-3)
# self.base is the layer given (the same object): a change made to it afterwards shows in the output
with torch.no_grad():
    _lin.weight.mul_(-2.0)
    _lin.bias.add_(0.5)
record("LoRALinear(x) after the base layer given was changed in place (self.base must be that layer, not a copy)",  # clause: same-base
       _layer(_x), atol=1e-6)
for _dt, _tol in ((torch.float64, 1e-12), (torch.bfloat16, 1e-2)):
    torch.manual_seed(3)
    _base = nn.Linear(8, 3).to(_dt)
    _x2 = torch.randn(2, 8, generator=torch.Generator().manual_seed(4), dtype=torch.float64).to(_dt)
    _l2 = LoRALinear(_base, r=2, alpha=2)
    record(f"dtype of A with a {_dt} base", str(_l2.A.dtype))  # clause: base-dtype
    record(f"B at init with a {_dt} base", _l2.B.detach().clone())  # clause: base-dtype, init-b
    record(f"LoRALinear(x) at init with a {_dt} base (a {_dt} output)", _l2(_x2), atol=_tol, rtol=_tol)  # clause: base-dtype, init-b
for _bad in (dict(r=-1), dict(r=0), dict(r=2.0), dict(r=2, alpha=0), dict(r=2, alpha=-1.0)):
    # clause: bad-args
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

# %% [markdown]
# #### Exercise 1 (b) — output and merged weight equal to `peft`'s (2 points)
#
# The next test puts trained values in `A` and `B` and compares your layer with `peft`'s.
# `forward(x)` returns `base(x) + scaling * x @ A.T @ B.T`, also for an `x` with several leading
# dimensions (batch and sequence). <!-- clause: forward -->
# `merged_weight()` returns $W + \text{scaling}\cdot BA$. <!-- clause: merged-weight -->
# The gradients that `forward(x).sum().backward()` leaves in `A.grad` and `B.grad` must be `peft`'s as well:
# compute the output from the parameters `A` and `B` themselves, with operations autograd can follow. <!-- clause: gradients -->

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
    record(f"forward (r={_r}, alpha={_alpha}, bias={_bias}), 3-D input", _out, atol=1e-5)  # clause: forward
    record(f"merged_weight (r={_r}, alpha={_alpha}, bias={_bias})", _mine.merged_weight(), atol=1e-6)  # clause: merged-weight
    _out.sum().backward()
    # clause: gradients
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
# ### Exercise 2 — the response-only loss (2 points)
#
# Complete `masked_lm_loss(logits, input_ids, prompt_lengths, attention_mask=None)`: `logits` of shape
# `(B, T, V)`, `input_ids` `(B, T)` (prompt, response, right padding), `prompt_lengths` $B$ ints (a list
# or a 1-D tensor), `attention_mask` `(B, T)` with 1 on real tokens and 0 on padding, or `None` for no
# padding. <!-- clause: inputs -->
# Return the float32 scalar mean of $-\log p(\text{token})$ over every target token of the
# batch (the formula above; padding is never a target). <!-- clause: value -->
# A prompt length may be 0 (every token after the first is then a target) or leave a single response
# token in its row. <!-- clause: edge-lengths -->
# Compute in float32 even for float16 or bfloat16 logits. <!-- clause: half-precision -->
# Be numerically stable: a logit far ahead of the target's must give a finite loss. <!-- clause: stable -->
# Leave the inputs unchanged. <!-- clause: unchanged-input -->
# Raise `ValueError` if a prompt length is negative or leaves a row with
# no response token. <!-- clause: bad-lengths -->

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


# %% nbgrader={"grade": true, "grade_id": "test_ex2_masked_loss", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
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
record("module of masked_lm_loss (it must be defined in this notebook)", masked_lm_loss.__module__)  # clause: defined-here
torch.manual_seed(3)
_V = 11
_ids = torch.randint(0, _V, (3, 9))
_mask = torch.tensor([[1] * 9, [1] * 6 + [0] * 3, [1] * 4 + [0] * 5])
_plen = [3, 1, 2]
_ids[_mask == 0] = 0                                               # pad id
_logits = torch.randn(3, 9, _V)
_got = masked_lm_loss(_logits, _ids, _plen, _mask)
# clause: unchanged-input
record("input_ids after masked_lm_loss (inputs left unchanged)", _ids)
record("logits after masked_lm_loss (inputs left unchanged)", _logits)
record("attention_mask after masked_lm_loss (inputs left unchanged)", _mask)
record("loss: 3 rows, prompt lengths [3, 1, 2], lengths [9, 6, 4] (a float32 scalar)", _got, atol=1e-5)  # clause: value
record("loss with prompt lengths as a tensor", masked_lm_loss(_logits, _ids, torch.tensor(_plen), _mask), atol=1e-5)  # clause: inputs
record("loss with bfloat16 logits (computed in float32: a float32 scalar)",  # clause: half-precision
       masked_lm_loss(_logits.bfloat16(), _ids, _plen, _mask), atol=1e-4)
record("loss without attention_mask (no padding), prompt lengths [2, 2, 2]", masked_lm_loss(_logits, _ids, [2, 2, 2]),  # clause: inputs
       atol=1e-5)
record("loss with a prompt length of 0 (row 0: every token after the first is a target)",  # clause: edge-lengths
       masked_lm_loss(_logits, _ids, [0, 1, 2], _mask), atol=1e-5)
for _bad in ([-1, 1, 1], [3, 6, 2]):
    # clause: bad-lengths
    record(f"masked_lm_loss with prompt_lengths={_bad} (lengths 9, 6, 4: must raise ValueError)",
           outcome(masked_lm_loss, _logits, _ids, _bad, _mask))
record("loss with prompt lengths [8, 5, 3] (lengths 9, 6, 4: one response token per row)",  # clause: edge-lengths
       masked_lm_loss(_logits, _ids, [8, 5, 3], _mask), atol=1e-5)
record("masked_lm_loss without attention_mask, prompt_lengths=[2, 9, 2] (T = 9: must raise ValueError)",  # clause: bad-lengths
       outcome(masked_lm_loss, _logits, _ids, [2, 9, 2]))
record("loss with float16 logits (computed in float32: a float32 scalar)",  # clause: half-precision
       masked_lm_loss(_logits.half(), _ids, _plen, _mask), atol=1e-3)
_big = _logits * 300.0                                               # logits far apart: log(softmax) underflows to -inf
# clause: stable
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
# ### Exercise 3 — the best rank-$r$ adapter for a full update (1 point)
#
# Section 1 showed that one example's SFT update is rank 1, so a rank-1 adapter holds it exactly. A
# real fine-tuning run sums many steps over many examples, and its update $\Delta W$ of a weight
# matrix has no reason to be low-rank. How much of it could an adapter of rank $r$ hold at best? The
# answer is the truncated singular value decomposition (Eckart–Young): with
# $\Delta W = U\,\mathrm{diag}(\sigma_1 \ge \sigma_2 \ge \dots)\,V^\top$, the matrix of rank at most
# $r$ closest to $\Delta W$ in the Frobenius norm keeps the $r$ largest singular values,
# $\sum_{i \le r} \sigma_i u_i v_i^\top$, and no other matrix of rank $r$ is closer. Section 4 applies
# your function to the update that SFT learned.
#
# Complete `lora_from_update(delta, r, scaling=1.0)` for a 2-D `delta` of shape `(d_out, d_in)`. Return
# a pair `(B, A)` of shapes `(d_out, r)` and `(r, d_in)` such that `scaling * B @ A` is the best rank-`r`
# approximation of `delta` in the Frobenius norm (the truncated SVD above; how you split it between `B`
# and `A` is up to you). <!-- clause: value -->
# The factor `scaling` is the adapter's $\alpha/r$: the product `B @ A` alone is the approximation divided
# by `scaling`. <!-- clause: scaling -->
# Raise `ValueError` if `r` is not an `int` with $1 \le r \le \min(d_\text{out}, d_\text{in})$ (a `float` is
# refused), or if `scaling` $\le 0$. <!-- clause: bad-args -->

# %% nbgrader={"grade": false, "grade_id": "ex3_lora_from_update", "locked": false, "schema_version": 3, "solution": true, "task": false}
def lora_from_update(delta, r, scaling=1.0):
    """The rank-``r`` adapter closest to a full update (truncated SVD, Eckart–Young).

    Args:
        delta: a 2-D float tensor ``(d_out, d_in)``, the change of a weight matrix.
        r: the adapter's rank, an int with ``1 <= r <= min(d_out, d_in)``.
        scaling: the adapter's factor (``alpha / r`` in ``peft``), a number > 0.

    Returns:
        ``(B, A)`` of shapes ``(d_out, r)`` and ``(r, d_in)``: ``scaling * B @ A`` is the best rank-``r``
        approximation of ``delta`` in the Frobenius norm.

    Raises:
        ValueError: if ``r`` is not an int in ``[1, min(d_out, d_in)]`` or ``scaling <= 0``.
    """
    ### BEGIN SOLUTION
    if isinstance(r, bool) or not isinstance(r, int) or not 1 <= r <= min(delta.shape):
        raise ValueError(f"r must be an int in [1, {min(delta.shape)}], got {r!r}")
    if not scaling > 0:
        raise ValueError(f"scaling must be > 0, got {scaling!r}")
    U, S, Vh = torch.linalg.svd(delta, full_matrices=False)      # singular values in descending order
    return U[:, :r] * (S[:r] / scaling), Vh[:r]
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex3_lora_from_update", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
_B, _A = lora_from_update(dW_sft, 1)              # section 1's SFT step: rank 1, held exactly by a rank-1 adapter
check_shape("B of lora_from_update(Delta W_SFT, r=1)", _B, (3, 1))
check_shape("A of lora_from_update(Delta W_SFT, r=1)", _A, (1, 2))
check_close("B @ A of lora_from_update(Delta W_SFT, r=1) (section 1: the SFT step is rank 1)", _B @ _A, dW_sft, atol=1e-10)
_d = torch.diag(torch.tensor([3.0, 2.0, 1.0], dtype=torch.float64))
_B, _A = lora_from_update(_d, 2, scaling=2.0)
check_close("2 * B @ A of lora_from_update(diag(3, 2, 1), r=2, scaling=2) (keeps the two largest singular values)",
            2.0 * _B @ _A, torch.diag(torch.tensor([3.0, 2.0, 0.0], dtype=torch.float64)), atol=1e-10)
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import outcome, record
record("module of lora_from_update (it must be defined in this notebook)", lora_from_update.__module__)  # clause: defined-here
_g = torch.Generator().manual_seed(5)
_delta = torch.randn(40, 25, generator=_g, dtype=torch.float64) @ torch.diag(torch.linspace(2.0, 0.1, 25, dtype=torch.float64))
for _r, _s in ((1, 1.0), (3, 1.0), (10, 1.0), (25, 1.0)):
    _B, _A = lora_from_update(_delta, _r, scaling=_s)
    record(f"shapes of B and A, lora_from_update of a (40, 25) delta, r={_r}", [list(_B.shape), list(_A.shape)])  # clause: value
    record(f"B @ A, lora_from_update of a (40, 25) delta, r={_r}, scaling 1", _B @ _A, atol=1e-9)  # clause: value
for _r, _s in ((3, 2.0), (8, 0.25)):
    _B, _A = lora_from_update(_delta.T.contiguous(), _r, scaling=_s)
    # clause: scaling
    record(f"scaling * B @ A, lora_from_update of a (25, 40) delta, r={_r}, scaling {_s}", _s * _B @ _A, atol=1e-9)
    record(f"B @ A alone, lora_from_update of a (25, 40) delta, r={_r}, scaling {_s}", _B @ _A, atol=1e-9)
for _bad in (dict(r=0), dict(r=26), dict(r=3.0), dict(r=3, scaling=0.0), dict(r=3, scaling=-1.0)):
    # clause: bad-args
    record(f"lora_from_update(delta of shape (40, 25), **{_bad}) (must raise ValueError)",
           outcome(lora_from_update, _delta, **_bad))
### BEGIN REFERENCE
from course_utils.grading import check_true, expect
_U, _S, _Vh = torch.linalg.svd(_delta, full_matrices=False)
for _r in (1, 3, 10, 25):
    expect(f"B @ A, lora_from_update of a (40, 25) delta, r={_r}, scaling 1", (_U[:, :_r] * _S[:_r]) @ _Vh[:_r], atol=1e-9)
    expect(f"shapes of B and A, lora_from_update of a (40, 25) delta, r={_r}", [[40, _r], [_r, 25]])
expect("B @ A, lora_from_update of a (40, 25) delta, r=25, scaling 1", _delta, atol=1e-9)
for _r, _s in ((3, 2.0), (8, 0.25)):
    _best = ((_U[:, :_r] * _S[:_r]) @ _Vh[:_r]).T
    expect(f"scaling * B @ A, lora_from_update of a (25, 40) delta, r={_r}, scaling {_s}", _best, atol=1e-9)
    expect(f"B @ A alone, lora_from_update of a (25, 40) delta, r={_r}, scaling {_s}", _best / _s, atol=1e-9)
# Eckart-Young: no rank-3 matrix is closer; the error is the norm of the dropped singular values
_err = float((_delta - (_U[:, :3] * _S[:3]) @ _Vh[:3]).norm())
check_true(abs(_err - float(_S[3:].norm())) < 1e-9, "the rank-3 error equals the norm of the dropped singular values")
del _U, _S, _Vh, _best, _err
### END REFERENCE
del _g, _delta, _r, _s, _B, _A, _bad, _d
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
del lin, q4, W_deq, x, g, grads, packed_before, adapters_before   # model_qlora and opt stay: backward_once uses them

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
# model to answer **casually, in a fixed format**: every training answer starts with the sign-on
# `Weather Buddy here!` followed by the casual answer, with the prompt in SmolLM2's chat template
# masked out of the loss (your `masked_lm_loss`). Ten pairs (drawn with a fixed seed) are **held
# out**: never trained on. `style_heldout.json` holds six more held-out prompts; eight further
# prompts are written in the cell below (24 held-out prompts in all).
#
# **What we measure, each per prompt or per pair, so that each has an interval.**
# 1. *Format compliance* (crisp, binary): does the greedy answer to a held-out prompt start with the
#    sign-on? A proportion over the 24 prompts with a **Wilson** 95 % interval; "did it change?" is
#    **McNemar's exact test** on the same prompts before and after (`course_utils.stats`). Unlike a
#    tone score, this can move all the way from 0 to 1, and nothing but training puts it there.
# 2. *Style margin* (what the model prefers, no generation): on each of the ten held-out pairs, the
#    mean $-\log p$ per token of the meteorologist answer minus that of the casual answer, both given
#    the prompt (without the sign-on). Positive: the casual answer is the likelier one. Paired changes
#    are judged by a sign-flip permutation test (exact for the ten pairs: all $2^{10}$ sign patterns).
#    The 95 % percentile-bootstrap interval printed beside it only describes the spread: with ten
#    pairs it is too narrow (it undercovers), so a conclusion here rests on the sign-flip p-value.
# 3. *Fit loss* (the training pairs, same rows before and after) and *unrelated-text loss* (twelve
#    sentences about cooking, chess, …: forgetting), paired the same way.
#
# (Why not a tone classifier? A TF-IDF classifier trained on the course's two answer sets separates
# them by less than a third of its 0-to-1 scale, so a real change of tone would move it by less than a
# tenth: too weak a ruler to compare methods with.)

# %% nbgrader={"grade": false, "grade_id": "style_data", "locked": true, "schema_version": 3, "solution": false, "task": false}
from course_utils.stats import bootstrap_ci, mcnemar_exact, sign_flip_p, wilson
# bootstrap_ci(x): mean of x and its 95 % percentile-bootstrap interval (scipy.stats.bootstrap, seeded);
# sign_flip_p(d): two-sided paired permutation test of mean(d) = 0, each difference's sign flipped;
# wilson(k, n): Wilson score interval of a proportion; mcnemar_exact(a, b): McNemar's exact test, paired booleans

PAIRS = [json.loads(line) for line in asset_path("12_lora_qlora/style_pairs.jsonl").read_text().splitlines()]
HELD = json.loads(asset_path("12_lora_qlora/style_heldout.json").read_text())
BOOK_PROMPT = "What is El Niño?"                                  # Book §7.7's reference prompt
SIGN_ON = "Weather Buddy here!"                                   # the format the training answers follow
assert PAIRS[0]["prompt"] == BOOK_PROMPT
_order = np.random.default_rng(0).permutation(np.arange(1, len(PAIRS)))   # pair 0 (the book's prompt) stays in training
HOLD_IDX = sorted(int(i) for i in _order[:10])
HOLD_PAIRS = [PAIRS[i] for i in HOLD_IDX]
TRAIN_PAIRS = [p_ for i, p_ in enumerate(PAIRS) if i not in HOLD_IDX]
EXTRA_PROMPTS = ["What is a tornado?", "How do clouds form?", "What is the greenhouse effect?", "Why do we have seasons?",
                 "How does lightning form?", "What is a blizzard?", "What is air pressure?", "How does a weather forecast work?"]
EVAL_PROMPTS = HELD["held_out_prompts"] + [p_["prompt"] for p_ in HOLD_PAIRS] + EXTRA_PROMPTS   # none is trained on
assert not set(EVAL_PROMPTS) & {p_["prompt"] for p_ in TRAIN_PAIRS}


def complies(text: str) -> bool:
    """The format rule: the answer starts with the sign-on (exact, case and punctuation included)."""
    return text.strip().startswith(SIGN_ON)


def ci_text(x, digits: int = 3) -> str:
    """'mean [lo, hi]' with the 95 % bootstrap interval."""
    m, lo, hi = bootstrap_ci(x)
    return f"{m:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def change_text(after, before, digits: int = 3) -> str:
    """The paired difference after - before (same prompts or rows): 'mean [lo, hi] p=...' (bootstrap, sign flip)."""
    d = np.asarray(after, dtype=float) - np.asarray(before, dtype=float)
    p_value = sign_flip_p(d)
    return f"{ci_text(d, digits)} " + (f"p={p_value:.3f}" if p_value >= 0.001 else "p<0.001")


def share_text(ok) -> str:
    """'k/n = p [Wilson 95% lo, hi]' of a list of booleans."""
    ok = np.asarray(ok, dtype=bool)
    lo, hi = wilson(int(ok.sum()), len(ok))
    return f"{int(ok.sum())}/{len(ok)} = {ok.mean():.2f} [{lo:.2f}, {hi:.2f}]"


def flips_text(after, before) -> str:
    """McNemar's exact test on paired booleans: discordant counts and p-value."""
    t = mcnemar_exact(after, before)
    return f"McNemar: {t.b} only after, {t.c} only before, exact p={t.pvalue:.2g}"


print(f"{len(PAIRS)} pairs: {len(TRAIN_PAIRS)} trained on, {len(HOLD_PAIRS)} held out; {len(EVAL_PROMPTS)} held-out prompts")
print("the course's answers follow the format:", share_text([complies(p_["casual"]) for p_ in PAIRS]),
      "(casual, as written) |", share_text([complies(SIGN_ON + " " + p_["casual"]) for p_ in TRAIN_PAIRS]),
      "(the training targets)")

# %% [markdown]
# **The pipeline.** The same code runs the three methods; only *what is trainable* and *how the
# base is stored* change (Book §7.5: "o que muda é a engenharia do gradiente"):
#
# * **SFT** — every parameter of the last `K` decoder layers trainable (full fine-tuning restricted to
#   those layers, to fit the CPU budget; on CUDA all layers, i.e. every parameter but the embeddings),
#   fp32, AdamW.
# * **LoRA** — `peft` adapters $r=8$, $\alpha=16$ on all seven projections (q, k, v, o, gate, up,
#   down) of the last `K` decoder layers, base frozen.
# * **QLoRA** — the same adapters on a base whose linear layers in those `K` layers are
#   `bitsandbytes` NF4 (`bnb.nn.Linear4bit`, blocks of 64, compute in fp32 on CPU / bf16 on CUDA).
#
# **A shortcut that changes nothing: the frozen layers run once.** Whatever the method, the
# first $30 - K$ decoder layers are frozen and unquantized, so the hidden state that enters layer
# $30 - K$ is the same for a training row before, during and after training. We compute it once per
# row (a forward *pre-hook* on that layer catches it) and train and score every model on the last `K`
# layers only: position embeddings, a causal mask, the `K` layers (with their adapters or 4-bit
# weights), the final norm and the head. With right padding and a causal mask a row's real tokens
# never see its padding, so a row's states do not depend on the batch it is in. The cell checks the
# shortcut against the full model's logits; it makes a training step several times cheaper on a CPU.
# Generation still runs the whole model.
#
# **Honest scope.** `K` = 2 in CI mode, 4 in full mode; on CUDA all 30. Every model is trained on
# batches of 8 short sequences (full mode: 12 steps, 3 epochs of the 32 training pairs; CI mode: 2
# steps, too few to teach anything: the CI run only proves the code runs). Every configuration is
# trained once, with one seed. Under autograding the runs are skipped (`SKIP_RUNS`): no graded test
# uses them.
#
# **Memory.** On CPU we report the bytes of the *training state*: weights
# (`get_memory_footprint()`, 4-bit weights at their packed size) + gradients + AdamW's two moments
# of the trainable parameters — exact and deterministic, unlike process RSS. On CUDA we also print
# `torch.cuda.max_memory_allocated()`.
#
# **Fresh models.** `get_peft_model` *modifies the model it wraps* (section 3b), so every run and
# the "before" reference start from a fresh deep copy of the base loaded once with `load_model`.

# %% nbgrader={"grade": false, "grade_id": "pipeline", "locked": true, "schema_version": 3, "solution": false, "task": false}
ON_CUDA = DEVICE.type == "cuda" if hasattr(DEVICE, "type") else str(DEVICE).startswith("cuda")
N_LAYERS = 30
K = N_LAYERS if ON_CUDA else (2 if CI_MODE else 4)
STEPS = 2 if CI_MODE else 12
BATCH = 8
MAX_NEW = 16 if CI_MODE else 40                 # the answers scored with ROUGE / BLEU (section 4c)
FORMAT_NEW = 5                                  # enough tokens to see whether an answer starts with the sign-on (4 tokens)
GEN_PROMPTS = EVAL_PROMPTS[:6] if CI_MODE else EVAL_PROMPTS
ROUGE_PROMPTS = [p_["prompt"] for p_ in HOLD_PAIRS][:4 if CI_MODE else None]   # they have reference answers
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


if not SKIP_RUNS:                                            # under autograding nothing below runs
    PRISTINE, TOK = load_model(SMOLLM2, verbose=True)          # the banner says which weights are in use
    PRISTINE.eval()


def fresh_model():
    """A fresh copy of the loaded base (loading the GGUF again would take longer than copying)."""
    return copy.deepcopy(PRISTINE).to(DEVICE), TOK


def encode_pair(prompt, response):
    """(ids, prompt length): SmolLM2's chat template for the prompt, then the response and <|im_end|>."""
    p_ids = encode_prompt(TOK, prompt)
    r_ids = TOK(response + "<|im_end|>", add_special_tokens=False)["input_ids"]
    return p_ids + r_ids, len(p_ids)


def pad_rows(seqs: list, value=0) -> tuple:
    """Right-pad a list of (T_i, ...) tensors to (B, T, ...); returns (batch, mask)."""
    T = max(len(s) for s in seqs)
    out = torch.full((len(seqs), T) + tuple(seqs[0].shape[1:]), value, dtype=seqs[0].dtype, device=seqs[0].device)
    mask = torch.zeros(len(seqs), T, dtype=torch.long)
    for b, s in enumerate(seqs):
        out[b, :len(s)], mask[b, :len(s)] = s, 1
    return out.to(DEVICE), mask.to(DEVICE)


def core_of(model):
    """The LlamaForCausalLM inside a model (a peft wrapper or not)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


@torch.no_grad()
def frozen_prefix_states(model, rows: list) -> list:
    """For each (ids, prompt length) row: the hidden state entering decoder layer 30 - K, a (T_i, d) tensor,
    caught by a forward pre-hook (the layers before it are frozen and unquantized in every method)."""
    layer = core_of(model).model.layers[LAST_K[0]]
    caught = {}

    class _Stop(Exception):
        pass

    def hook(_mod, args, kwargs):
        caught["h"] = (args[0] if args else kwargs["hidden_states"]).detach()
        raise _Stop                                         # the layers after it are not needed here

    handle = layer.register_forward_pre_hook(hook, with_kwargs=True)
    out = []
    try:
        for i in range(0, len(rows), BATCH):
            chunk = rows[i:i + BATCH]
            ids, mask = pad_rows([torch.tensor(r) for r, _ in chunk], TOK.pad_token_id)
            try:
                model(input_ids=ids, attention_mask=mask)
            except _Stop:
                pass
            out += [caught["h"][b, :len(r)].clone() for b, (r, _) in enumerate(chunk)]
    finally:
        handle.remove()
    return out


def tail_hidden(model, h):
    """The last K decoder layers and the final norm, from the states `h` (B, T, d) entering layer 30 - K
    (right padding; a causal mask, so padding is never seen by a real token)."""
    core = core_of(model)
    T = h.shape[1]
    pos = torch.arange(T, device=h.device)[None, :]
    pos_emb = core.model.rotary_emb(h, pos)
    causal = torch.full((T, T), float("-inf"), device=h.device, dtype=h.dtype).triu(1)[None, None]
    for i in LAST_K:
        h = core.model.layers[i](h, attention_mask=causal, position_ids=pos, position_embeddings=pos_emb)
        h = h[0] if isinstance(h, tuple) else h
    return core.model.norm(h)


def tail_logits(model, h):
    """Logits of every position (the head on tail_hidden)."""
    return core_of(model).lm_head(tail_hidden(model, h))


def response_batch(model, h, ids, mask, plen) -> tuple:
    """(logits, ids, prompt lengths, mask) of a compact batch that keeps, per row, only the last prompt token
    and the response: your masked_lm_loss gives the same value on it as on the full batch, but the head
    (576 x 49,152, the largest matmul here) runs on the response positions only."""
    hid = tail_hidden(model, h)
    lengths = mask.sum(dim=1).tolist()
    starts = [max(int(p_), 1) - 1 for p_ in plen]                       # a prompt length of 0 targets tokens 1.. too
    hc, mask_c = pad_rows([hid[b, s_:n] for b, (s_, n) in enumerate(zip(starts, lengths))])
    ids_c, _ = pad_rows([ids[b, s_:n] for b, (s_, n) in enumerate(zip(starts, lengths))], TOK.pad_token_id)
    return core_of(model).lm_head(hc), ids_c, [1] * len(plen), mask_c       # masked_lm_loss's argument order


def collate(idx: list, rows: list, states: list) -> tuple:
    """A training batch from rows idx: (prefix states, ids, mask, prompt lengths), right-padded."""
    h, _ = pad_rows([states[j] for j in idx])
    ids, mask = pad_rows([torch.tensor(rows[j][0]) for j in idx], TOK.pad_token_id)
    return h, ids, mask, [rows[j][1] for j in idx]


@torch.no_grad()
def response_nll(model, rows: list, states: list) -> np.ndarray:
    """Per-row mean -log p of the response tokens (your masked_lm_loss, one row at a time), on the last K layers."""
    out = []
    for i in range(0, len(rows), BATCH):
        logits, ids, plen, mask = response_batch(model, *collate(list(range(i, min(i + BATCH, len(rows)))), rows, states))
        out += [masked_lm_loss(logits[b:b + 1], ids[b:b + 1], plen[b:b + 1], mask[b:b + 1]).item() for b in range(len(plen))]
    return np.array(out)


if not SKIP_RUNS:
    TRAIN = [encode_pair(p_["prompt"], SIGN_ON + " " + p_["casual"]) for p_ in TRAIN_PAIRS]
    HOLD_ROWS = {s_: [encode_pair(p_["prompt"], p_[s_]) for p_ in HOLD_PAIRS] for s_ in ("meteorologist", "casual")}
    UNREL_ROWS = [(TOK(t)["input_ids"], 0) for t in UNRELATED]            # plain text: every token after the first is a target
    _m, _ = fresh_model()
    STATES = {name: frozen_prefix_states(_m, rows) for name, rows in
              (("train", TRAIN), ("meteorologist", HOLD_ROWS["meteorologist"]), ("casual", HOLD_ROWS["casual"]),
               ("unrel", UNREL_ROWS))}
    with torch.no_grad():                                                  # the shortcut equals the full model
        _h, _ids, _mask, _plen = collate(list(range(BATCH)), TRAIN, STATES["train"])
        _full = _m(input_ids=_ids, attention_mask=_mask).logits
        _err = ((_full - tail_logits(_m, _h)).abs() * _mask[..., None]).max().item()     # real tokens only
        _loss_full = masked_lm_loss(_full, _ids, _plen, _mask).item()
        _loss_c = masked_lm_loss(*response_batch(_m, _h, _ids, _mask, _plen)).item()
        _n_resp = sum(int(n) - p_ for n, p_ in zip(_mask.sum(1), _plen))
    print(f"last-K shortcut vs the full model, one batch of {BATCH} rows: max |logit difference| on real tokens = {_err:.1e}")
    print(f"response-only loss: full model {_loss_full:.4f}, shortcut on the response positions {_loss_c:.4f} "
          f"(the head ran on {_n_resp + BATCH} of {int(_mask.sum())} positions)")
    assert _err < 1e-3 and abs(_loss_full - _loss_c) < 1e-4
    del _m, _h, _ids, _mask, _full


def batch_order(seed=0):
    """Endless stream of training row indices, 8 at a time, reshuffled every epoch (the same for every run)."""
    g = torch.Generator().manual_seed(seed)
    while True:
        order = torch.randperm(len(TRAIN), generator=g).tolist()
        for i in range(0, len(order) - BATCH + 1, BATCH):
            yield order[i:i + BATCH]


def evaluate(model, long_answers: bool = False) -> dict:
    """Everything we measure on a model: the first FORMAT_NEW tokens of the greedy answers to the held-out
    prompts (format compliance), the held-out style margins, the fit loss on the training pairs and the loss
    on the unrelated text (Book §7.12: a reference behaviour measured the same way before and after); with
    long_answers, MAX_NEW-token answers to the book's §7.7 prompt and the held-out pair prompts (section 4c)."""
    starts = generate_text(model, TOK, list(GEN_PROMPTS), max_new_tokens=FORMAT_NEW, batch=True)
    res = dict(starts=starts, format=np.array([complies(t) for t in starts]))
    if long_answers:
        gens = generate_text(model, TOK, [BOOK_PROMPT] + ROUGE_PROMPTS, max_new_tokens=MAX_NEW, batch=True)
        res.update(book=gens[0], gens=gens[1:])
    res["margin"] = (response_nll(model, HOLD_ROWS["meteorologist"], STATES["meteorologist"])
                     - response_nll(model, HOLD_ROWS["casual"], STATES["casual"]))
    res["fit"] = response_nll(model, TRAIN, STATES["train"])
    res["unrel"] = response_nll(model, UNREL_ROWS, STATES["unrel"])
    return res


def count_params(model):
    """(trainable, total) parameters of a model, by numel(), each tensor once (a tied one too): what peft's
    print_trainable_parameters() reports for an unquantized model (a 4-bit weight: see section 4's QLoRA share)."""
    params = list(model.parameters())                      # .parameters() yields a shared tensor once
    return sum(p_.numel() for p_ in params if p_.requires_grad), sum(p_.numel() for p_ in params)


def train_state_bytes(model):
    trainable = sum(p_.numel() * p_.element_size() for p_ in model.parameters() if p_.requires_grad)
    return model.get_memory_footprint() + 3 * trainable          # weights + grads + AdamW m and v


def train(model, lr, name, steps=None, opt_cls=torch.optim.AdamW, on_first_step=None, seed=0, progress=True):
    """A plain training loop with the student's masked_lm_loss, on the last K layers; `seed` sets the order of
    the batches. Returns (losses, seconds of each step); calls on_first_step(model) after the first update."""
    params = [p_ for p_ in model.parameters() if p_.requires_grad]
    opt = opt_cls(params, lr=lr, weight_decay=0.0) if opt_cls is torch.optim.AdamW else opt_cls(params, lr=lr)
    model.train()
    losses, times = [], []
    data = batch_order(seed=seed)
    if ON_CUDA:
        torch.cuda.reset_peak_memory_stats()
    for step in tqdm(range(steps or STEPS), desc=name, leave=False, disable=not progress):
        h, ids, mask, plen = collate(next(data), TRAIN, STATES["train"])
        t0 = time.perf_counter()
        loss = masked_lm_loss(*response_batch(model, h, ids, mask, plen))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if ON_CUDA:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
        if step == 0 and on_first_step is not None:
            on_first_step(model)
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
# ### Before: the untouched base
# Every measure is taken on a fresh copy of the base first: the paired changes below are after minus
# this.

# %% nbgrader={"grade": false, "grade_id": "run_base", "locked": true, "schema_version": 3, "solution": false, "task": false}
RESULTS, EVALS = {}, {}
if not SKIP_RUNS:
    base, _ = fresh_model()
    EVALS["base"] = evaluate(base, long_answers=True)
    RESULTS["base"] = dict(trainable=0, total=count_params(base)[1], step_s=np.array([np.nan]),
                           state_mib=base.get_memory_footprint() / 2**20, losses=[])
    del base
    e = EVALS["base"]
    print(f"base: format compliance {share_text(e['format'])} (Wilson 95% CI) over {len(e['format'])} held-out prompts")
    print(f"      style margin {ci_text(e['margin'])} nats/token (95% bootstrap CI over {len(HOLD_PAIRS)} held-out pairs)")
    print(f"      fit loss {ci_text(e['fit'])} ({len(TRAIN)} training pairs, sign-on included) | unrelated-text loss "
          f"{ci_text(e['unrel'])}")
    print("      first tokens of its answers:", [t for t in e["starts"][:4]])


# %% [markdown]
# **What the base shows** (SmolLM2-135M-Instruct, the offline stand-in named by the banner; the
# numbers are this notebook's full-mode run). None of its 24 answers starts with the sign-on (0/24,
# Wilson interval up to 0.14: the rule is not something the model does by chance), it has no
# preference between the two styles of the held-out pairs (margin 0.040, interval from −0.424 to
# 0.480), and the training answers cost it 3.932 nats per token.

# %% [markdown]
# ### SFT, LoRA, QLoRA — the same loop, and the same learning rate
# Training SFT at the book's $5\cdot10^{-5}$ (§7.9) and LoRA at $10^{-3}$ and reading the difference in
# style as a difference of method would change two factors at once. Here both run at **both** learning
# rates, everything else equal: the same batches in the same order, the same seed, the same steps.
# QLoRA runs at LoRA's $10^{-3}$. Each row of the table is one run; the paired comparisons below pair
# the same prompts (compliance, McNemar) and the same held-out pairs or training rows (losses).

# %% nbgrader={"grade": false, "grade_id": "run_methods", "locked": true, "schema_version": 3, "solution": false, "task": false}
LRS = [1e-3] if CI_MODE else [5e-5, 1e-3]
MAIN = {("SFT", 5e-5), ("SFT", 1e-3), ("LoRA", 1e-3), ("QLoRA", 1e-3)}   # the runs scored with ROUGE / BLEU too


def adapter_As(model) -> dict:
    """{layer name: a copy of its lora_A weight}, the name as in the base model ('model.layers.29.mlp.up_proj')."""
    return {n.removeprefix("base_model.model."): m.lora_A["default"].weight.detach().clone()
            for n, m in model.named_modules() if hasattr(m, "lora_A") and "default" in m.lora_A}


def delta_norm(model) -> float:
    """Frobenius norm of every adapted layer's scaling * B A, all layers together (the change of the weights)."""
    sq = 0.0
    for m in model.modules():
        if hasattr(m, "lora_A") and "default" in m.lora_A:
            d = m.scaling["default"] * m.lora_B["default"].weight @ m.lora_A["default"].weight
            sq += float(d.detach().pow(2).sum())
    return math.sqrt(sq)


def run(method, lr, lora_cfg=None, tag=None, do_eval=True, seed=0, **train_kw):
    """Train a fresh model with one method at one learning rate; store its results and evaluation under tag.
    `seed` sets the adapters' random initialisation and the order of the batches (every run above: seed 0)."""
    tag = tag or f"{method} {lr:.0e}"
    torch.manual_seed(seed)
    model, _ = fresh_model()
    if method == "SFT":
        for n, p_ in model.named_parameters():
            p_.requires_grad_(any(f"layers.{i}." in n for i in LAST_K))
    if method == "QLoRA":
        quantize_last_layers_4bit(model, LAST_K, torch.bfloat16 if ON_CUDA else torch.float32)
    if method in ("LoRA", "QLoRA"):
        model = get_peft_model(model, LoraConfig(**(lora_cfg or LORA_CFG)))   # mutates `model`: that is why it is fresh
    n_tr, n_all = count_params(model)
    first = []
    if method in ("LoRA", "QLoRA"):
        train_kw["on_first_step"] = lambda m: first.append((delta_norm(m), adapter_As(m)))   # A has not moved yet
    losses, step_s = train(model, lr=lr, name=tag, seed=seed, **train_kw)
    RESULTS[tag] = dict(trainable=n_tr, total=n_all, first_norm=first[0][0] if first else None,
                        first_A=first[0][1] if first else None)
    if not do_eval:
        return model
    EVALS[tag] = evaluate(model, long_answers=(method, lr) in MAIN and lora_cfg is None)
    RESULTS[tag].update(step_s=step_s, state_mib=train_state_bytes(model) / 2**20, losses=losses,
                        cuda_peak_mib=torch.cuda.max_memory_allocated() / 2**20 if ON_CUDA else None)
    if hasattr(model, "get_nb_trainable_parameters"):
        RESULTS[tag]["peft_counts"] = model.get_nb_trainable_parameters()
    return model


if not SKIP_RUNS:
    for lr in LRS:
        for method in ("SFT", "LoRA"):
            model = run(method, lr)
            if (method, lr) == ("SFT", 1e-3):
                SFT_MODEL = model                        # section 4's low-rank reading of its update uses it
            del model
    QLORA_MODEL = run("QLoRA", 1e-3)
    BASE_EV = EVALS["base"]
    print(f"{'run':10s} {'trainable':>11s} {'share %':>8s} {'s/step':>7s} {'state MiB':>10s} {'fit loss':>9s} "
          f"{'unrel. loss':>11s} {'margin':>7s}  format compliance [Wilson 95% CI]")
    for k, r in RESULTS.items():
        e = EVALS[k]
        step_txt = f"{np.median(r['step_s'][1:]):7.2f}" if len(r["step_s"]) > 1 else f"{'-':>7s}"
        print(f"{k:10s} {r['trainable']:11,d} {100 * r['trainable'] / r['total']:8.3f} {step_txt} {r['state_mib']:10.0f} "
              f"{e['fit'].mean():9.3f} {e['unrel'].mean():11.3f} {e['margin'].mean():7.3f}  {share_text(e['format'])}")
    print("\nPaired changes vs the base: format (McNemar exact), margin / losses (mean [95% bootstrap CI], sign-flip p)")
    for k in [k for k in RESULTS if k != "base"]:
        e = EVALS[k]
        print(f"{k:10s} format {flips_text(e['format'], BASE_EV['format'])} | margin {change_text(e['margin'], BASE_EV['margin'])}")
        print(f"{'':10s} fit loss {change_text(e['fit'], BASE_EV['fit'])} | unrelated-text loss "
              f"{change_text(e['unrel'], BASE_EV['unrel'])}")
    print("\nSFT vs LoRA at the same learning rate (paired: same prompts / pairs / rows):")
    for lr in LRS:
        s_, l_ = EVALS[f"SFT {lr:.0e}"], EVALS[f"LoRA {lr:.0e}"]
        print(f"  lr {lr:.0e}: LoRA - SFT margin {change_text(l_['margin'], s_['margin'])} | fit loss "
              f"{change_text(l_['fit'], s_['fit'])}\n{'':12s}format {flips_text(l_['format'], s_['format'])} "
              f"(b = LoRA only, c = SFT only) | unrelated-text loss {change_text(l_['unrel'], s_['unrel'])}")
    e, b_ = EVALS["QLoRA 1e-03"], EVALS["LoRA 1e-03"]
    print(f"QLoRA - LoRA (lr 1e-03, paired): margin {change_text(e['margin'], b_['margin'])} | fit loss "
          f"{change_text(e['fit'], b_['fit'])}\n{'':32s}format {flips_text(e['format'], b_['format'])} | "
          f"unrelated-text loss {change_text(e['unrel'], b_['unrel'])}")
    print("\nTraining loss per step (a different batch each step; the same batches for every run):")
    for k in [k for k in RESULTS if k != "base"]:
        print(f"  {k:10s}", " ".join(f"{v:.3f}" for v in RESULTS[k]["losses"]))
    if ON_CUDA:
        print("CUDA peak MiB:", {k: round(r_["cuda_peak_mib"]) for k, r_ in RESULTS.items() if r_.get("cuda_peak_mib")})

# %% [markdown]
# The numbers above are from SmolLM2-135M-Instruct (the banner says which weights) on this
# machine (`K` = 4 layers, 12 steps). Read them as follows.
#
# * **Trainable share.** SFT trains every weight of the last 4 layers: 14,160,384 parameters,
#   10.527 % of the model; LoRA 325,632, 0.241 % (the book's "menos de 1%", §7.10).
# * **Memory.** The SFT training state (675 MiB) adds 3× the trained weights to the 513 MiB of fp32
#   weights (gradients and two AdamW moments); LoRA's (518 MiB) is barely more than the weights;
#   QLoRA saves on top the bytes of the 4 quantized layers (471 MiB). For a 135 M model this is small
#   change — 4 bits pay when the *frozen weights* dominate the budget (billions of parameters on one GPU).
# * **Step time.** At $10^{-3}$ the median step took 0.74 s (SFT), 0.69 s (LoRA) and 0.71 s (QLoRA)
#   on the last-`K` shortcut, and 0.80 s (SFT) and 0.70 s (LoRA) at $5\cdot10^{-5}$: one run each, one
#   after another on a 2-core CPU, where a change of load between runs is not removed by any pairing,
#   so we claim no speed difference. (A common claim is that for generation 4 bits
#   are "many times slower". Chapter 11 measures one-token steps:
#   there, on this CPU, `bitsandbytes`' fused kernel made a 4-bit layer *faster* than fp32. Speed
#   depends on the kernel and the hardware; memory is what 4 bits buy.)
#
# **Same learning rate, one factor at a time.**
# *At the book's learning rate* ($5\cdot10^{-5}$) neither method learned the format in 12 steps
# (0/24 for both). SFT fitted the training answers (fit loss −0.979 [−1.027, −0.931]) while LoRA
# barely moved (−0.033 [−0.035, −0.031]); neither changed the held-out style margin detectably (SFT −0.034
# [−0.124, 0.043], sign-flip p = 0.504; LoRA −0.000 [−0.003, 0.003], p = 0.900: LoRA at this rate has
# essentially not changed the model).
# *At $10^{-3}$* SFT learned everything we measure: 24/24 answers follow the format (Wilson
# [0.86, 1.00]; McNemar 24 prompts changed, 0 back, p < 0.001), the margin rose by 0.598 (sign-flip
# p = 0.004) — the held-out *casual* answers became the likelier ones — and the fit loss fell by
# 3.376 nats/token. LoRA at the same rate: 9/24 = 0.38 [0.21, 0.57] (McNemar p = 0.0039) and a margin
# change of −0.004 (p = 0.943). Paired, LoRA − SFT at $10^{-3}$: 15 prompts follow the format only
# with SFT and none only with LoRA (p < 0.001), margin −0.602 (p = 0.002).
# *What these numbers support.* At the same learning rate and step budget, full fine-tuning of 4
# layers (14.2 M parameters) moved the model further than LoRA on those layers (0.33 M parameters),
# on the format, the style and the fit. Comparing SFT at $5\cdot10^{-5}$ with LoRA at $10^{-3}$ instead
# would suggest that "SFT learns content, not tone, and LoRA learns tone": that would be the learning
# rate, not the method. *What they do not support*: that LoRA cannot learn the style, or that SFT is
# the better method. How far a LoRA step goes depends on the size of its update, which with Adam goes
# like factor $\times\sqrt r$ (section 4b): at this same rate, LoRA $r = 8$ with $\alpha/\sqrt r$ (an
# update about three times larger) started 24/24 held-out answers with the sign-on — counted on
# 5-token starts, which cannot tell whether an answer follows the sign-on (section 4c). Only two rates
# were tried here, and LoRA was still improving at the higher one (format 0/24 → 9/24, fit loss −0.033 →
# −1.283): its best rate is not bracketed by these two, so these runs do not compare the methods each
# at its best rate (LoRA is often run at higher rates than full fine-tuning); section 4d's grid does.
# Each configuration here was trained once, with one seed: the intervals are over prompts and rows, not
# over the luck of training, so even the $10^{-3}$ comparison says nothing about how much it would move
# with another seed (section 4d trains three).
# *No forgetting is detectable*: at $10^{-3}$ the loss on the unrelated sentences fell for SFT
# (−0.149 [−0.214, −0.081]) and LoRA (−0.094 [−0.137, −0.051]); QLoRA's change, −0.054 [−0.135,
# 0.034], has an interval that includes a small rise: these data support neither a fall nor a rise
# beyond it.
# *QLoRA vs LoRA* (same rate, same batches, paired): 13/24 against 9/24 follow the format (McNemar:
# 4 prompts only with QLoRA, none only with LoRA, p = 0.12), fit loss +0.007 [−0.012, 0.026], margin
# −0.014 [−0.066, 0.039] (sign-flip p = 0.641). The 4-bit base cost a little at the start (first-step
# loss 4.104 against 4.044 on the same batch: the quantization error) and nothing measurable after 12
# steps. Read by the intervals: a margin difference outside [−0.066, 0.039] nats/token, or a fit-loss
# difference outside [−0.012, 0.026], is not supported by these data; differences inside them are not
# distinguished from none. The format difference (4 prompts against 0, p = 0.12) is not distinguished
# from none either.

# %% [markdown]
# ### How much of SFT's update would fit in a rank-8 adapter?
# LoRA $r = 8$ trained 0.241 % of the parameters and, at $10^{-3}$, moved less than SFT. Is that the
# rank? SFT's update of each adapted matrix, $\Delta W = W_\text{SFT} - W$, is a full matrix; your
# `lora_from_update` gives the best rank-$r$ adapter for it. Below, for the SFT run at $10^{-3}$: the
# share of $\lVert\Delta W\rVert_F^2$ (the seven projections of the last `K` layers together) that the
# best adapter of rank 1, 8 and 64 keeps, and the SFT model evaluated again with each $\Delta W$
# replaced by its best rank-8 approximation (the layer norms keep SFT's values; $\alpha = 16$, the
# factor $\alpha/r$ of `LORA_CFG`).

# %% nbgrader={"grade": false, "grade_id": "sft_low_rank", "locked": true, "schema_version": 3, "solution": false, "task": false}
if not SKIP_RUNS:
    def sub_of(t: str) -> str:
        return "self_attn" if t in ("q_proj", "k_proj", "v_proj", "o_proj") else "mlp"

    DELTAS = {f"model.layers.{i}.{sub_of(t)}.{t}.weight": None for i in LAST_K for t in TARGETS}
    with torch.no_grad():
        for name in DELTAS:                                    # the base weight moved to the run's device
            DELTAS[name] = SFT_MODEL.get_parameter(name).detach() - PRISTINE.get_parameter(name).detach().to(DEVICE)
    total_sq = sum(float(d.pow(2).sum()) for d in DELTAS.values())
    n_full = sum(d.numel() for d in DELTAS.values())
    print(f"SFT 1e-03: the update of {len(DELTAS)} matrices ({n_full:,} weights), best rank-r adapter of each "
          f"(lora_from_update):")
    APPROX = {}
    for r in (1, 8, 64):
        s_ = 16 / r
        approx = {}
        for name, d in DELTAS.items():
            B_, A_ = lora_from_update(d, r, scaling=s_)
            approx[name] = s_ * B_ @ A_
        APPROX[r] = approx
        kept = sum(float(a_.pow(2).sum()) for a_ in approx.values())
        n_ad = sum(r * sum(d.shape) for d in DELTAS.values())
        print(f"  r={r:2d}: {n_ad:10,d} adapter parameters ({100 * n_ad / n_full:5.2f} % of the matrices) keep "
              f"{100 * kept / total_sq:5.1f} % of |Delta W|_F^2")
    with torch.no_grad():                                      # SFT with each Delta W cut to rank 8, in place
        for name, a_ in APPROX[8].items():
            SFT_MODEL.get_parameter(name).copy_(PRISTINE.get_parameter(name).detach().to(DEVICE) + a_)
    ev8 = evaluate(SFT_MODEL)
    e_sft, e_lora = EVALS["SFT 1e-03"], EVALS["LoRA 1e-03"]
    print(f"\n{'model':23s} {'fit loss':>9s} {'margin':>7s} {'unrel. loss':>11s}  format compliance [Wilson 95% CI]")
    for k, e in (("SFT 1e-03", e_sft), ("SFT 1e-03 cut to rank 8", ev8), ("LoRA 1e-03 (r = 8)", e_lora)):
        print(f"{k:23s} {e['fit'].mean():9.3f} {e['margin'].mean():7.3f} {e['unrel'].mean():11.3f}  {share_text(e['format'])}")
    print(f"SFT cut to rank 8 - SFT (paired): fit loss {change_text(ev8['fit'], e_sft['fit'])} | margin "
          f"{change_text(ev8['margin'], e_sft['margin'])} | format {flips_text(ev8['format'], e_sft['format'])}")
    print(f"SFT cut to rank 8 - LoRA r=8 (paired): fit loss {change_text(ev8['fit'], e_lora['fit'])} | margin "
          f"{change_text(ev8['margin'], e_lora['margin'])}")
    del SFT_MODEL, DELTAS, APPROX, approx, ev8

# %% [markdown]
# **What the cut shows** (full mode, the SFT run at $10^{-3}$). SFT's update is far from rank 8: the best
# rank-8 adapters of its 28 matrices, 325,632 parameters (2.30 % of those matrices' weights, as many as
# LoRA $r = 8$ trains), keep 40.2 % of $\lVert\Delta W\rVert_F^2$; rank 1 keeps 15.6 % and rank 64
# 75.7 %. Yet what was cut mattered mostly for the fit: with every $\Delta W$ cut to rank 8 the fit loss
# rose from 0.557 to 1.758 (+1.201 [1.123, 1.284], p < 0.001), while all 24 held-out answers still
# start with the sign-on and the style margin changed by −0.064 [−0.151, 0.018] (sign-flip p = 0.211):
# anything from a loss of 0.151 to a gain of 0.018, from SFT's 0.639 to 0.575. Against the LoRA
# $r = 8$ run at the same rate the cut SFT model is ahead on the fit loss (−0.891 [−0.979, −0.807]) and
# the margin (+0.538 [0.301, 0.766], p = 0.008), and 24/24 of its answers follow the format against 9/24.
# So at $10^{-3}$ there is a rank-8 change of these matrices (with SFT's layer norms, which LoRA does not
# train) that keeps the format and most of the style: the rank alone does not explain why the LoRA run
# stopped at 9/24 and a margin of 0.037; the size of its steps at this rate (section 4b) and the rate
# itself (section 4d) are the other candidates. The cut is one run, one seed and one rate; it says what
# a rank-8 adapter *can* hold here, not what training one finds.

# %% [markdown]
# ### Why QLoRA's share is larger for the same adapters
# The table gives LoRA and QLoRA the same 325,632 trainable parameters (in full mode) but different
# shares, 0.241 % and 0.255 %. The difference is in the *total*: `count_params` (section 4's pipeline) adds up `numel()`, and a 4-bit weight is
# stored as a `Params4bit` tensor of `uint8`, **two 4-bit codes per byte**, so its `numel()` is half
# the number of weights it holds. `peft`'s own `get_nb_trainable_parameters()` knows this and
# doubles those tensors.

# %% nbgrader={"grade": false, "grade_id": "qlora_share", "locked": true, "schema_version": 3, "solution": false, "task": false}
if not SKIP_RUNS:
    packed = [p_ for p_ in QLORA_MODEL.parameters() if type(p_).__name__ == "Params4bit"]
    n_packed = sum(p_.numel() for p_ in packed)
    n_weights = sum(math.prod(p_.quant_state.shape) for p_ in packed)          # the weights they encode
    r_q, r_l = RESULTS["QLoRA 1e-03"], RESULTS["LoRA 1e-03"]
    print(f"{len(packed)} Params4bit tensors: numel {n_packed:,} (uint8, two codes per byte) for {n_weights:,} weights "
          f"(ratio {n_weights / n_packed:.0f})")
    print(f"QLoRA total by numel (count_params): {r_q['total']:,} -> share {100 * r_q['trainable'] / r_q['total']:.3f} %")
    print(f"QLoRA total counting every 4-bit weight: {r_q['total'] - n_packed + n_weights:,} -> share "
          f"{100 * r_q['trainable'] / (r_q['total'] - n_packed + n_weights):.3f} %")
    print(f"peft get_nb_trainable_parameters(): QLoRA {r_q['peft_counts']} | LoRA {r_l['peft_counts']} "
          f"-> share {100 * r_l['trainable'] / r_l['total']:.3f} %")
    del QLORA_MODEL, packed

# %% [markdown]
# So the QLoRA share of 0.255 % is an artefact of counting storage elements: 7,077,888 `uint8`
# elements hold 14,155,776 weights, and with every 4-bit weight counted once the total is the same
# 134,840,640 as LoRA's and the share the same 0.241 % — what `peft` prints for both. (`count_params`
# follows `numel()` on purpose: it reports what `peft` reports for an *unquantized* model.)
#
# ### 4b. The rank sweep: $\alpha/r$ (LoRA) vs $\alpha/\sqrt r$ (rsLoRA)
# The LoRA paper motivates the factor $\alpha/r$ (section 2): it should keep the size of the updates
# roughly independent of $r$. Does it? `peft` offers both scalings: $\alpha/r$ (default) and
# $\alpha/\sqrt r$ (`use_rslora=True`, Kalajdzievski 2023, "rsLoRA"). We sweep $r$ at a fixed
# $\alpha = 16$ and learning rate $10^{-3}$ ($r$ = 1, 8, 64; $r = 8$ with $\alpha/r$ is the LoRA run
# above), on the same batches, and record: the norm of the **first update** of the adapted weights,
# $\lVert \tfrac{\alpha}{r}B_1A_1\rVert_F$ (all adapted matrices together; $B_0 = 0$, so this is the
# whole change after one step), with AdamW (what we train with) and with plain SGD (one step at a
# learning rate of 1), and beside the AdamW one what your `first_adam_update` predicts for it (Exercise
# 4 (b), from the gradient of the first batch and each run's $A$); and after the full run the fit loss,
# the held-out margin and the format compliance. (At $r = 1$ the two scalings coincide: one run.)

# %% [markdown]
# ### Exercise 4 — the rank-scaling rule (1 + 1 points)
#
# Before the sweep, write down what it should show. `peft` multiplies the adapter's output by a
# scaling factor: $\alpha/r$ by default (`LoraConfig(use_rslora=False)`, the LoRA paper) and
# $\alpha/\sqrt r$ with `use_rslora=True` (rsLoRA).
#
# (a) Complete `lora_scaling(alpha, r, rslora=False)`: return the scaling factor `peft` uses, as a
# float — $\alpha/r$ when `rslora` is false, $\alpha/\sqrt r$ when it is true. <!-- clause: value -->

# %% nbgrader={"grade": false, "grade_id": "ex4_rank_scaling", "locked": false, "schema_version": 3, "solution": true, "task": false}
def lora_scaling(alpha, r, rslora=False):
    """The factor ``peft`` multiplies ``B A x`` by (Book §7.3.3; ``LoraConfig(use_rslora=...)``).

    Returns the float ``alpha / r`` (standard LoRA) or, with ``rslora=True``, ``alpha / sqrt(r)`` (rsLoRA).
    """
    ### BEGIN SOLUTION
    return alpha / math.sqrt(r) if rslora else alpha / r
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex4_scaling", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
check_close("lora_scaling(16, 8) (alpha / r)", lora_scaling(16, 8), 2.0)
check_close("lora_scaling(16, 4, rslora=True) (alpha / sqrt(r))", lora_scaling(16, 4, rslora=True), 8.0)
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import record
record("module of lora_scaling (it must be defined in this notebook)", lora_scaling.__module__)  # clause: defined-here
_cases = [(16, 1), (16, 64), (8, 16), (32, 3), (1, 2)]
for _a, _r in _cases:
    # clause: value
    record(f"lora_scaling({_a}, {_r}) (standard LoRA)", float(lora_scaling(_a, _r)), atol=1e-9, dtype=False)
    record(f"lora_scaling({_a}, {_r}, rslora=True)", float(lora_scaling(_a, _r, rslora=True)), atol=1e-9, dtype=False)
### BEGIN REFERENCE
from course_utils.grading import expect
for _a, _r in _cases:
    for _rs in (False, True):
        _pm = get_peft_model(nn.Sequential(OrderedDict(lin=nn.Linear(4, 4))),
                             LoraConfig(r=_r, lora_alpha=_a, target_modules=["lin"], use_rslora=_rs))
        expect(f"lora_scaling({_a}, {_r}) (standard LoRA)" if not _rs else f"lora_scaling({_a}, {_r}, rslora=True)",
               float(_pm.base_model.model.lin.scaling["default"]), atol=1e-9, dtype=False)
del _pm, _rs
### END REFERENCE
del _cases, _a, _r
### END HIDDEN TESTS

# %% [markdown]
# #### Exercise 4 (b) — the first AdamW update of an adapter (1 point)
#
# The sweep measures the first update of the adapted weights, $\Delta W_1 = s\,B_1A$ with $s$ the
# scaling factor. You can compute it before training. Take one adapted layer, $W' = W + s\,BA$, at
# $B_0 = 0$ (so $W' = W$), and let $G = \partial\mathcal{L}/\partial W'$, shape $(d_\text{out},
# d_\text{in})$: the gradient that full fine-tuning would get for this layer. The gradients of the
# adapter follow by the chain rule (section 1 did it with $s = 1$). At $B_0 = 0$ the gradient of $A$ is
# zero, so $A$ does not move in the first step. Every entry of $B$ takes AdamW's first step (betas
# $(0.9, 0.999)$, no weight decay, what section 4 trains with): after the bias correction the two
# moments are $\hat m_1 = g$ and $\hat v_1 = g^2$, so each entry moves by
# $-\text{lr}\cdot g / (\lvert g\rvert + \varepsilon)$, where $g$ is that entry's gradient.
#
# Complete `first_adam_update(grad_W, A, scaling, lr, eps=1e-8)`. Return $\Delta W_1 = s\,B_1A$, a tensor of
# the shape of `grad_W`: `grad_W` is $G$, `A` the adapter's $A$ (shape `(r, d_in)`), `scaling` is $s$, and
# $B_1$ is $B$ after that first step from $B_0 = 0$. <!-- clause: value -->
# Use Adam's denominator as written, $\lvert g\rvert + \varepsilon$ with the `eps` given: an entry whose
# gradient is comparable to $\varepsilon$ moves by less than `lr`, and an entry whose gradient is 0 stays at
# 0. <!-- clause: eps -->
# Section 4b compares your prediction with the first update of each run of the sweep.

# %% nbgrader={"grade": false, "grade_id": "ex4b_first_update", "locked": false, "schema_version": 3, "solution": true, "task": false}
def first_adam_update(grad_W, A, scaling, lr, eps=1e-8):
    """The change ``scaling * B_1 @ A`` of an adapted layer's weight after AdamW's first step from ``B_0 = 0``.

    Args:
        grad_W: ``(d_out, d_in)``, the gradient of the loss w.r.t. the layer's effective weight at ``B = 0``.
        A: ``(r, d_in)``, the adapter's ``A`` (it does not move in the first step).
        scaling: the adapter's factor ``s`` (``alpha / r`` or ``alpha / sqrt(r)``).
        lr, eps: AdamW's learning rate and epsilon (betas (0.9, 0.999), no weight decay).

    Returns:
        ``scaling * B_1 @ A``, shape ``(d_out, d_in)``, with every entry of ``B_1`` equal to
        ``-lr * g / (|g| + eps)``, ``g`` that entry's gradient at ``B = 0``.
    """
    ### BEGIN SOLUTION
    g = scaling * grad_W @ A.T                       # dL/dB = s G A^T (chain rule through W' = W + s B A)
    B1 = -lr * g / (g.abs() + eps)                   # Adam's first step: m_hat = g, v_hat = g^2
    return scaling * B1 @ A
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex4b_first_update", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
_G = torch.tensor([[1.0, -2.0]], dtype=torch.float64)
_A = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
check_close("first_adam_update, a 1x2 layer, A = [1, 0], scaling 2, lr 0.1 (g = 2: B_1 = -0.1)",
            first_adam_update(_G, _A, 2.0, 0.1), torch.tensor([[-0.2, 0.0]], dtype=torch.float64), atol=1e-6)
check_close("first_adam_update with a zero gradient (0 / (0 + eps) = 0: B stays 0)",
            first_adam_update(torch.zeros(2, 3), torch.ones(1, 3), 2.0, 0.1), torch.zeros(2, 3))
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import record
record("module of first_adam_update (it must be defined in this notebook)", first_adam_update.__module__)  # clause: defined-here
_g = torch.Generator().manual_seed(7)
_cases = {}
for _r, _s, _lr, _scale_G in ((4, 4.0, 1e-3, 1.0), (8, 16 / math.sqrt(8), 1e-2, 1.0), (1, 16.0, 1e-3, 1.0),
                              (3, 0.5, 1e-3, 1e-9)):
    _G = torch.randn(12, 20, generator=_g, dtype=torch.float64) * _scale_G
    _G[0] = 0.0                                                  # an output row that gets no gradient
    _A = (torch.rand(_r, 20, generator=_g, dtype=torch.float64) * 2 - 1) / math.sqrt(20)
    _cases[_r] = (_G, _A, _s, _lr)
    _key = f"first_adam_update, (12, 20) layer, r={_r}, scaling {_s:.4f}, lr {_lr}, |G| ~ {_scale_G}"
    if _scale_G < 1e-6:
        # clause: eps
        record(_key + " (gradients comparable to eps)", first_adam_update(_G, _A, _s, _lr), atol=1e-12, rtol=1e-7)
    else:
        record(_key, first_adam_update(_G, _A, _s, _lr), atol=1e-12, rtol=1e-7)  # clause: value, eps
record("first_adam_update with eps=1e-6, r=3, |G| ~ 1e-9", first_adam_update(*_cases[3], eps=1e-6),  # clause: eps
       atol=1e-14, rtol=1e-7)
### BEGIN REFERENCE
from course_utils.grading import expect


def _adamw_first_update(G, A, s, lr, eps=1e-8):
    """torch's AdamW, one step on B from 0 for a loss whose gradient w.r.t. W' = W + s B A is G."""
    B = torch.zeros(G.shape[0], A.shape[0], dtype=G.dtype, requires_grad=True)
    opt = torch.optim.AdamW([B], lr=lr, eps=eps, weight_decay=0.0)
    ((s * B @ A) * G).sum().backward()                      # dL/dW' = G
    opt.step()
    return (s * B @ A).detach()


for _r, (_G, _A, _s, _lr) in _cases.items():
    _scale_G = 1e-9 if _r == 3 else 1.0
    _key = f"first_adam_update, (12, 20) layer, r={_r}, scaling {_s:.4f}, lr {_lr}, |G| ~ {_scale_G}"
    expect(_key + (" (gradients comparable to eps)" if _r == 3 else ""), _adamw_first_update(_G, _A, _s, _lr),
           atol=1e-12, rtol=1e-7)
expect("first_adam_update with eps=1e-6, r=3, |G| ~ 1e-9", _adamw_first_update(*_cases[3], eps=1e-6), atol=1e-14, rtol=1e-7)
del _adamw_first_update
### END REFERENCE
del _g, _cases, _r, _s, _lr, _scale_G, _G, _A, _key
### END HIDDEN TESTS

# %% nbgrader={"grade": false, "grade_id": "rank_sweep", "locked": true, "schema_version": 3, "solution": false, "task": false}
RANKS = [1, 8] if CI_MODE else [1, 8, 64]


def first_update_norm(r, rslora, opt_cls, lr):
    """Norm of the change of the adapted weights after one step of opt_cls (B starts at 0): no evaluation."""
    cfg = {**LORA_CFG, "r": r, "use_rslora": rslora}
    run("LoRA", lr, lora_cfg=cfg, tag="probe", steps=1, opt_cls=opt_cls, do_eval=False)
    return RESULTS.pop("probe")["first_norm"]


def first_batch_weight_grads() -> dict:
    """{layer name: G}, the gradient of the first training batch's loss w.r.t. each adapted weight of the base (the
    same batch and, with B_0 = 0, the same forward pass as the first step of every sweep run)."""
    model, _ = fresh_model()
    names = [n.removesuffix(".weight") for n, _p in model.named_parameters()
             if any(f"layers.{i}." in n for i in LAST_K) and any(f".{t}.weight" in n for t in TARGETS)]
    for n, p_ in model.named_parameters():
        p_.requires_grad_(n.removesuffix(".weight") in names)
    h, ids, mask, plen = collate(next(batch_order(seed=0)), TRAIN, STATES["train"])
    masked_lm_loss(*response_batch(model, h, ids, mask, plen)).backward()
    return {n: model.get_parameter(n + ".weight").grad for n in names}


def predicted_first_norm(first_A: dict, scaling: float, lr: float) -> float:
    """|first update| of all adapted matrices together, from your first_adam_update and the run's A's."""
    return math.sqrt(sum(float(first_adam_update(G_FIRST[n], A_, scaling, lr).pow(2).sum()) for n, A_ in first_A.items()))


SWEEP = []
if not SKIP_RUNS:
    G_FIRST = first_batch_weight_grads()
    for r in RANKS:
        for rslora in ((False,) if r == 1 else (False, True)):
            tag = "LoRA 1e-03" if (r, rslora) == (LORA_CFG["r"], False) else f"r={r} {'a/sqrt(r)' if rslora else 'a/r'}"
            if tag not in RESULTS:                       # r = 8 with alpha/r is the run of the table above
                run("LoRA", 1e-3, lora_cfg={**LORA_CFG, "r": r, "use_rslora": rslora}, tag=tag)
            SWEEP.append(dict(r=r, rslora=rslora, scale=16 / math.sqrt(r) if rslora else 16 / r,
                              adam_first=RESULTS[tag]["first_norm"],
                              adam_pred=predicted_first_norm(RESULTS[tag]["first_A"], lora_scaling(16, r, rslora), 1e-3),
                              sgd_first=first_update_norm(r, rslora, torch.optim.SGD, 1.0),
                              fit=EVALS[tag]["fit"], margin=EVALS[tag]["margin"], format=EVALS[tag]["format"],
                              trainable=RESULTS[tag]["trainable"]))
    print(f"alpha = 16, lr 1e-3 (AdamW) | SGD: one step at lr 1 | {STEPS} steps on the same batches")
    print(f"{'r':>3s} {'scaling':>10s} {'factor':>7s} {'trainable':>10s} {'|dW_1| AdamW':>13s} {'predicted':>10s} {'|dW_1| SGD':>11s} "
          f"{'fit loss':>9s} {'margin':>7s}  format [Wilson 95% CI]")
    for row in SWEEP:
        print(f"{row['r']:3d} {'a/sqrt(r)' if row['rslora'] else 'a/r':>10s} {row['scale']:7.2f} {row['trainable']:10,d} "
              f"{row['adam_first']:13.4f} {row['adam_pred']:10.4f} {row['sgd_first']:11.5f} {row['fit'].mean():9.3f} {row['margin'].mean():7.3f}  "
              f"{share_text(row['format'])}")
    plain = {row["r"]: row for row in SWEEP if not row["rslora"]}
    rs = {row["r"]: row for row in SWEEP if row["rslora"] or row["r"] == 1}
    hi_r = RANKS[-1]
    print(f"\nfirst-update norm, r={hi_r} / r=1: AdamW a/r {plain[hi_r]['adam_first'] / plain[1]['adam_first']:.3f}, "
          f"a/sqrt(r) {rs[hi_r]['adam_first'] / rs[1]['adam_first']:.3f} | SGD a/r "
          f"{plain[hi_r]['sgd_first'] / plain[1]['sgd_first']:.4f}, a/sqrt(r) {rs[hi_r]['sgd_first'] / rs[1]['sgd_first']:.3f}")
    print("first_adam_update's prediction (the first batch's G, each run's A) against the measured AdamW first update: "
          f"largest relative difference {max(abs(row['adam_pred'] / row['adam_first'] - 1) for row in SWEEP):.1e}")
    print(f"fit loss, r={hi_r} minus r=1 (paired over the {len(TRAIN)} training rows): a/r "
          f"{change_text(plain[hi_r]['fit'], plain[1]['fit'])} | a/sqrt(r) {change_text(rs[hi_r]['fit'], rs[1]['fit'])}")
    print(f"r={hi_r}: a/sqrt(r) - a/r, fit loss {change_text(rs[hi_r]['fit'], plain[hi_r]['fit'])} | margin "
          f"{change_text(rs[hi_r]['margin'], plain[hi_r]['margin'])}\n{'':8s}format "
          f"{flips_text(rs[hi_r]['format'], plain[hi_r]['format'])} (b = a/sqrt(r) only)")

# %% [markdown]
# **What the sweep shows** (full-mode run, $\alpha = 16$, AdamW at $10^{-3}$).
# *The first update.* With $\alpha/r$ it shrinks as the rank grows: AdamW's first update is 1.3227 at
# $r = 1$, 0.4710 at $r = 8$ and 0.1718 at $r = 64$ — a factor 0.130 from $r = 1$ to 64, close to
# $1/\sqrt{64}$. Your `first_adam_update` predicts each of these first updates from the first batch
# alone (the `predicted` column; the largest relative difference is printed under the table), and it
# says why: AdamW moves every entry of $B$ by about the learning rate whatever its gradient, and $A$'s
# $r$ rows of independent entries make $\lVert B_1A\rVert_F$ grow like $\sqrt r$, while the factor
# falls like $1/r$. With plain SGD it falls
# faster still, a factor 0.0028 (the gradient of $B$ itself carries the factor $\alpha/r$ once more),
# and $\alpha/\sqrt r$ does not make SGD's first update rank-free either (a factor 0.182).
# With $\alpha/\sqrt r$ (rsLoRA) AdamW's first update stays about the same: 1.3324 at $r = 8$, 1.3764 at
# $r = 64$ (a factor 1.041). So the sentence "with $\alpha/r$, changing $r$ does not change the size of
# the updates much" is wrong for both optimizers; it is $\alpha/\sqrt r$ that does this for Adam.
# *After 12 steps.* With $\alpha/r$ a larger rank bought almost nothing: fit loss 2.705 ($r = 1$),
# 2.649 ($r = 8$), 2.651 ($r = 64$); $r = 64$ minus $r = 1$, paired over the training rows,
# −0.054 [−0.062, −0.046] (sign-flip p < 0.001), and format 1/24, 9/24, 7/24. With $\alpha/\sqrt r$ the extra capacity is
# used: fit loss 2.323 at $r = 8$ and 1.883 at $r = 64$ (−0.822 [−0.891, −0.758], p < 0.001, against $r = 1$),
# every held-out start in format (24/24 at both ranks; 5-token starts, which show the sign-on but not
# whether an answer follows it — section 4c shows runs that write the sign-on and stop — so the margin,
# a likelihood that needs no generation, is the better witness here) and the style margin up to 0.316
# and 0.362. At
# $r = 64$, $\alpha/\sqrt r$ against $\alpha/r$: fit loss −0.768 [−0.835, −0.705] (p < 0.001), margin +0.334
# [0.224, 0.450] (p = 0.004), format 17 prompts
# gained and none lost (McNemar p < 0.001).
#
# *What decided how far LoRA got.* Not the scale factor alone: the two runs with the same factor 2.00
# ended far apart ($r = 8$ with $\alpha/r$: 9/24, fit loss 2.649; $r = 64$ with $\alpha/\sqrt r$: 24/24,
# 1.883), and the largest factor, 16.00 at $r = 1$, reached 1/24. With Adam the size of the update goes
# like factor $\times \sqrt r$ (section 2; your `first_adam_update`): $16 \times 1 = 16$ at $r = 1$,
# $2 \times \sqrt 8 = 5.66$ at $r = 8$ with $\alpha/r$, $0.25 \times 8 = 2$ at $r = 64$ with
# $\alpha/r$, and $16$ for both $\alpha/\sqrt r$ runs — and the measured first updates follow that
# product (1.3227, 0.4710, 0.1718 against 1.3324 and 1.3764). Read with this quantity, the table
# separates two effects. At the same update size (the three runs where factor $\times\sqrt r = 16$: $r$ = 1,
# 8 and 64 with $\alpha/\sqrt r$) a larger rank went further: fit loss 2.705, 2.323, 1.883, format 1/24,
# 24/24, 24/24. With $\alpha/r$ a larger rank came with a smaller update (16, 5.66, 2), and the two
# effects about cancelled (fit loss 2.705, 2.649, 2.651). So in these single-seed runs at a fixed
# learning rate (one seed per configuration, and only the first update's size equalised), a lower fit
# loss went with a larger rank when the first update's size was about equal, and a smaller first update
# went with the larger rank's gain vanishing; $\alpha/\sqrt r$ holds the first update's size about
# fixed, so that the rank's part can show. For
# the comparison with SFT this says only that LoRA $r = 8$ with $\alpha/r$ at $10^{-3}$ took small
# steps, about a third of rsLoRA's at the same rank (0.4710 against 1.3324); whether a larger step
# closes the gap is what the learning-rate grid of section 4d tests.

# %% [markdown]
# ### 4c. Evaluation is part of the decision (Book §7.2.3–§7.2.4): ROUGE and BLEU
# The book's §7.2.3 asks *what you decide to measure*, and warns that scores of fluency and overlap
# such as BLEU and ROUGE reward long, convincing, wrong answers; §7.2.4 makes the evaluation part of
# the same decision as where the gradient goes. The two classic overlap metrics:
#
# * **ROUGE-1 F** — unigram overlap: with $m$ = the number of words the answer and the reference share
#   (counted with multiplicity), precision $m/|\text{answer}|$, recall $m/|\text{reference}|$, and their
#   harmonic mean. **ROUGE-L F** — the same with $m$ = the length of the longest common subsequence
#   (word order matters, gaps allowed).
# * **BLEU** — the geometric mean of the 1- to 4-gram precisions of the answers, times a brevity
#   penalty, over the whole corpus (`sacrebleu`, 0–100).
#
# We write ROUGE-1 and ROUGE-L by hand (lower-cased, every run of non-alphanumeric characters a
# separator: `rouge-score`'s tokenizer, no stemming), check them against `rouge-score` on every
# string scored below, and score the greedy answers to the ten held-out pair prompts against their
# casual reference answers (the sign-on removed first, so that the format does not count as overlap).

# %% nbgrader={"grade": false, "grade_id": "rouge_bleu", "locked": true, "schema_version": 3, "solution": false, "task": false}
import re

import sacrebleu
from rouge_score import rouge_scorer


def words(text: str) -> list:
    """rouge-score's default tokenization: lower case, runs of characters outside [a-z0-9] split words."""
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).split()


def f_measure(m: int, n_cand: int, n_ref: int) -> float:
    if m == 0:
        return 0.0
    p, r = m / n_cand, m / n_ref
    return 2 * p * r / (p + r)


def rouge1_f(cand: str, ref: str) -> float:
    c, r = words(cand), words(ref)
    return f_measure(sum((Counter(c) & Counter(r)).values()), len(c), len(r))


def lcs_len(a: list, b: list) -> int:
    """Length of the longest common subsequence, by dynamic programming (one row at a time)."""
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def rougeL_f(cand: str, ref: str) -> float:
    c, r = words(cand), words(ref)
    return f_measure(lcs_len(c, r), len(c), len(r))


LIB_ROUGE = rouge_scorer.RougeScorer(["rouge1", "rougeL"], use_stemmer=False)


def strip_sign_on(text: str) -> str:
    return text.strip().removeprefix(SIGN_ON).strip()


# what overlap measures, and what it misses: three hand-written answers against one reference
REF_DEMO = PAIRS[0]["casual"]
DEMO = {"the reference itself": REF_DEMO,
        "one word changed: wrong": REF_DEMO.replace("warmer", "colder"),
        "a correct paraphrase": "During El Niño the surface of the tropical Pacific heats up above its normal temperature, "
                                "and the weather around the world shifts."}
checked = []
print(f"reference: {REF_DEMO!r}")
for name, cand in DEMO.items():
    lib = LIB_ROUGE.score(REF_DEMO, cand)
    checked += [(rouge1_f(cand, REF_DEMO), lib["rouge1"].fmeasure), (rougeL_f(cand, REF_DEMO), lib["rougeL"].fmeasure)]
    print(f"  {name:26s} ROUGE-1 F {rouge1_f(cand, REF_DEMO):.3f} | ROUGE-L F {rougeL_f(cand, REF_DEMO):.3f} | "
          f"sentence BLEU {sacrebleu.sentence_bleu(cand, [REF_DEMO]).score:5.1f}")

ROUGE = {}
if not SKIP_RUNS:
    refs = [p_["casual"] for p_ in HOLD_PAIRS][:len(ROUGE_PROMPTS)]
    refs_met = [p_["meteorologist"] for p_ in HOLD_PAIRS][:len(ROUGE_PROMPTS)]
    scored = [k for k in ("base", "SFT 5e-05", "SFT 1e-03", "LoRA 1e-03", "QLoRA 1e-03") if k in EVALS]
    print(f"\n{len(ROUGE_PROMPTS)} held-out pair prompts, greedy answers ({MAX_NEW} new tokens, sign-on removed) vs the casual "
          f"reference: mean [95% bootstrap CI]; BLEU = sacrebleu corpus BLEU")
    for k in scored:
        cands = [strip_sign_on(t) for t in EVALS[k]["gens"]]
        r1 = np.array([rouge1_f(c, r) for c, r in zip(cands, refs)])
        rl = np.array([rougeL_f(c, r) for c, r in zip(cands, refs)])
        rl_met = np.array([rougeL_f(c, r) for c, r in zip(cands, refs_met)])
        for c, r in zip(cands, refs + refs_met):
            lib = LIB_ROUGE.score(r, c)
            checked += [(rouge1_f(c, r), lib["rouge1"].fmeasure), (rougeL_f(c, r), lib["rougeL"].fmeasure)]
        ROUGE[k] = dict(r1=r1, rl=rl, rl_met=rl_met)
        print(f"  {k:11s} ROUGE-1 F {ci_text(r1)} | ROUGE-L F {ci_text(rl)} | BLEU {sacrebleu.corpus_bleu(cands, [refs]).score:5.1f}"
              f" | ROUGE-L F vs the meteorologist reference {ci_text(rl_met)}")
    print("paired change of ROUGE-L F vs the base (same prompts; bootstrap CI, sign-flip p):")
    for k in scored[1:]:
        print(f"  {k:11s} {change_text(ROUGE[k]['rl'], ROUGE['base']['rl'])}")
checked = np.array(checked)
print(f"\nhand-written ROUGE-1 / ROUGE-L F vs rouge-score on {len(checked)} scores: max |difference| = "
      f"{np.abs(checked[:, 0] - checked[:, 1]).max():.1e}")
assert np.allclose(checked[:, 0], checked[:, 1], atol=1e-12)

# %% [markdown]
# **What the overlap metrics measure, and what they miss.** The hand-written ROUGE-1 and ROUGE-L equal
# `rouge-score` on every string scored (the maximum difference printed). The three hand-made answers
# show the blind spot that §7.2.3 warns about: changing "warmer" to "colder" makes the answer *wrong*
# and keeps ROUGE-L F at 0.967 and BLEU at 91.6, while a correct paraphrase scores 0.377 and 5.1.
# Overlap measures shared words with one reference, not correctness, and not style either.
#
# On the models: every ROUGE and BLEU value is low (ROUGE-L F 0.148 for the base, BLEU 2.3) because
# one reference answer is a small target for free text. The paired changes say little that the
# format and margin did not say better: SFT at $10^{-3}$, the run that learned the casual style best,
# showed no detectable change of ROUGE-L F against the casual reference (−0.020 [−0.076, 0.032],
# sign-flip p = 0.520). The drops that are
# there (LoRA −0.063, p = 0.121; QLoRA, below) come from a failure the format rule cannot see: LoRA and QLoRA at $10^{-3}$ often write the
# sign-on **and stop** (the generations below), so the sign-on is removed and little or nothing is left
# to overlap — QLoRA's ROUGE-L F fell by 0.091 (sign-flip p = 0.010). Format compliance alone
# would have called these runs a partial success. That is §7.2.4's point: the evaluation is part of
# the decision — a rule for the format, a likelihood for the style, a check that the answer is still
# there, and someone who reads the answers for correctness, which none of these numbers does.

# %% nbgrader={"grade": false, "grade_id": "generations", "locked": true, "schema_version": 3, "solution": false, "task": false}
if not SKIP_RUNS:
    SHOW = scored
    print(f"### {BOOK_PROMPT}   (Book §7.7's reference prompt; a training prompt here, so this shows fit, not generalisation)")
    for k in SHOW:
        print(f"  [{k:11s}] {EVALS[k]['book']!r}")
    for i in range(min(4, len(ROUGE_PROMPTS))):
        print(f"### {ROUGE_PROMPTS[i]}   (held out)")
        for k in SHOW:
            print(f"  [{k:11s}] {EVALS[k]['gens'][i]!r}")
    fig, ax = plt.subplots(1, 3, figsize=(14, 3.4))
    for k in [k for k in ("SFT 5e-05", "SFT 1e-03", "LoRA 5e-05", "LoRA 1e-03", "QLoRA 1e-03") if k in RESULTS]:
        ax[0].plot(range(1, len(RESULTS[k]["losses"]) + 1), RESULTS[k]["losses"], marker="o", ms=3, label=k)
    ax[0].set_xlabel("training step (the same batches for every run)"); ax[0].set_ylabel("response-only loss (nats/token)")
    ax[0].set_title("Training loss, SmolLM2-135M-Instruct"); ax[0].legend(fontsize=7)
    names = list(EVALS)
    props = np.array([EVALS[k]["format"].mean() for k in names])
    wl = np.array([wilson(int(EVALS[k]["format"].sum()), len(EVALS[k]["format"])) for k in names])
    ax[1].errorbar(range(len(names)), props, yerr=np.clip([props - wl[:, 0], wl[:, 1] - props], 0, None), fmt="o", capsize=3)
    ax[1].set_xticks(range(len(names)), names, rotation=60, fontsize=7); ax[1].set_ylim(-0.05, 1.05)
    ax[1].set_ylabel("answers starting with the sign-on"); ax[1].set_title("Format compliance, held-out prompts (Wilson 95%)")
    for scal, mk in (("a/r", "o-"), ("a/sqrt(r)", "s--")):
        rows_ = [row for row in SWEEP if (row["rslora"] == (scal == "a/sqrt(r)")) or row["r"] == 1]
        ax[2].loglog([row["r"] for row in rows_], [row["adam_first"] for row in rows_], mk, label=f"AdamW, {scal}")
        ax[2].loglog([row["r"] for row in rows_], [row["sgd_first"] for row in rows_], mk, alpha=0.5, label=f"SGD, {scal}")
    ax[2].set_xlabel("rank r"); ax[2].set_ylabel("norm of the first update"); ax[2].legend(fontsize=7)
    ax[2].set_title("First update vs rank (alpha = 16)")
    plt.tight_layout(); plt.show()

# %% [markdown]
# ### 4d. The learning-rate grid: each method at its own best rate
# Sections 4 and 4b compared the methods at one or two learning rates, and LoRA was still improving at
# the higher one. A comparison of methods is a comparison of each method **at its best rate**, so here
# is the grid: SFT (the last `K` layers), LoRA ($r = 8$, $\alpha/r$) and rsLoRA ($r = 8$, $\alpha/\sqrt r$),
# $\alpha = 16$, at six rates from $3\cdot10^{-5}$ to $10^{-2}$ (a factor of about 3 apart), **three seeds**
# each — the seed sets the order of the training batches and, for the adapters, the random $A$ — and
# 12 steps of 8 sequences as above. Every run is scored on one number fixed before the runs: the
# **held-out loss**, the mean $-\log p$ per token of the target answers (the sign-on, then the casual
# answer) of the 10 held-out prompts — the validation loss of this fine-tuning task, a likelihood that
# needs no generation. A method's best rate is the one with the lowest held-out loss averaged over
# the seeds; it is *bracketed* when it is not at either end of the grid. The style margin of section 4
# is printed beside it. (Full mode: 54 runs, 7 to 10 minutes on 2 CPU cores, with a progress bar;
# CI mode: one rate, one seed, a smoke run.)

# %% nbgrader={"grade": false, "grade_id": "lr_grid", "locked": true, "schema_version": 3, "solution": false, "task": false}
GRID_LRS = [1e-3] if CI_MODE else [3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2]
GRID_SEEDS = [0] if CI_MODE else [0, 1, 2]
GRID_METHODS = {"SFT": ("SFT", None), "LoRA": ("LoRA", LORA_CFG), "rsLoRA": ("LoRA", {**LORA_CFG, "use_rslora": True})}

if not SKIP_RUNS:
    from course_utils.stats import mean_ci
    HOLD_TARGET = [encode_pair(p_["prompt"], SIGN_ON + " " + p_["casual"]) for p_ in HOLD_PAIRS]
    _m, _ = fresh_model()
    HOLD_TARGET_STATES = frozen_prefix_states(_m, HOLD_TARGET)   # the frozen layers: the same for every run
    base_hold = response_nll(_m, HOLD_TARGET, HOLD_TARGET_STATES).mean()   # a fresh copy on DEVICE, like every run
    del _m
    GRID = {}                       # (method, lr, seed) -> (held-out loss per prompt, margin per pair)
    jobs = [(name, lr, seed) for name in GRID_METHODS for lr in GRID_LRS for seed in GRID_SEEDS]
    for name, lr, seed in tqdm(jobs, desc="learning-rate grid (runs)"):
        method, cfg = GRID_METHODS[name]
        model = run(method, lr, lora_cfg=cfg, tag="grid", do_eval=False, seed=seed, progress=False)
        RESULTS.pop("grid")
        GRID[name, lr, seed] = (response_nll(model, HOLD_TARGET, HOLD_TARGET_STATES),
                                response_nll(model, HOLD_ROWS["meteorologist"], STATES["meteorologist"])
                                - response_nll(model, HOLD_ROWS["casual"], STATES["casual"]))
        del model

    def seed_losses(name, lr):
        return np.array([GRID[name, lr, s][0].mean() for s in GRID_SEEDS])

    print(f"held-out loss (nats/token, {len(HOLD_TARGET)} held-out prompts, target = sign-on + casual answer) after "
          f"{STEPS} steps; mean over {len(GRID_SEEDS)} seeds [lowest, highest seed]; the base: {base_hold:.3f}")
    print(f"{'lr':>8s} " + " ".join(f"{n:>24s}" for n in GRID_METHODS))
    for lr in GRID_LRS:
        cells = []
        for name in GRID_METHODS:
            v = seed_losses(name, lr)
            cells.append(f"{v.mean():.3f} [{v.min():.3f}, {v.max():.3f}]")
        print(f"{lr:8.0e} " + " ".join(f"{c:>24s}" for c in cells))
    BEST = {name: min(GRID_LRS, key=lambda lr, n=name: seed_losses(n, lr).mean()) for name in GRID_METHODS}
    for name, lr in BEST.items():
        edge = "at the edge of the grid: not bracketed" if lr in (GRID_LRS[0], GRID_LRS[-1]) else "bracketed"
        margins = np.array([GRID[name, lr, s][1].mean() for s in GRID_SEEDS])
        print(f"best rate {name:7s}: {lr:.0e} ({edge}); held-out loss {seed_losses(name, lr).mean():.3f}, style margin "
              f"{margins.mean():+.3f} (seeds: {', '.join(f'{m:+.3f}' for m in margins)})")
    if len(GRID_SEEDS) > 1:
        print("\neach at its best rate, paired by seed (the same batches): difference of held-out loss, mean "
              "[95 % t-interval over the seeds]; per seed")
        names = list(GRID_METHODS)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                d = seed_losses(b, BEST[b]) - seed_losses(a, BEST[a])
                m, lo, hi = mean_ci(d)
                print(f"  {b:7s} - {a:7s}: {m:+.3f} [{lo:+.3f}, {hi:+.3f}]; per seed "
                      + ", ".join(f"{x:+.3f}" for x in d))
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    for name in GRID_METHODS:
        v = np.array([seed_losses(name, lr) for lr in GRID_LRS])
        ax.errorbar(GRID_LRS, v.mean(1), yerr=[v.mean(1) - v.min(1), v.max(1) - v.mean(1)], marker="o", capsize=3,
                    label=name)
    ax.axhline(base_hold, ls="--", c="gray", lw=0.8, label="base (no training)")
    ax.set(xscale="log", xlabel="learning rate (AdamW, 12 steps)", ylabel="held-out loss (nats/token)",
           title="Each method over the same grid (bars: lowest to highest seed)")
    ax.legend(fontsize=8)
    plt.tight_layout(); plt.show()
else:
    print("the learning-rate grid is skipped under autograding; run the notebook in full mode to see it")

# %% [markdown]
# **What the grid shows** (full mode; three seeds in each cell, the bracket is the lowest and highest
# value over the seeds).
# *Each optimum lies inside the grid.* SFT's held-out loss is lowest at $3\cdot10^{-4}$ (2.856), LoRA's
# at $3\cdot10^{-3}$ (2.875) and rsLoRA's at $10^{-3}$ (2.926), each with a worse rate on both sides
# (the base: 4.090). SFT's best grid rate is a tenth of LoRA's (each known only to within the grid's
# factor of about three): at LoRA's best rate SFT is already past its own (3.575), and at $10^{-2}$ it
# diverges (11.811; one seed 13.325).
# *The fit loss is not the held-out loss.* At $10^{-3}$, where section 4 found SFT far ahead (fit loss
# 0.557 against LoRA's 2.649, format 24/24 against 9/24), SFT's held-out loss is 3.130: worse than
# LoRA's 3.059 at the same rate, and worse than its own 2.856 at $3\cdot10^{-4}$. By the held-out loss,
# at $10^{-3}$ SFT had fitted its 32 training answers more than it had learned the task; by the style
# margin it had not (0.639 at $10^{-3}$ in section 4's table, +0.318 at its best grid rate). The two
# held-out measures prefer different rates for SFT; the grid chooses by the held-out loss, as fixed
# before the runs.
# *Each method at its best rate*, paired by seed: LoRA minus SFT is +0.019 [+0.000, +0.039] nats per
# token (per seed +0.012, +0.028, +0.019), with a similar style margin (+0.320 against +0.318; their
# difference was not tested). So on this task and budget the mean gap between LoRA, which trains
# 0.241 % of the parameters, and SFT is 0.019 nats per token, with a 95 % t-interval from +0.000 to
# +0.039, and SFT's loss was the lower one in all three seeds. Three seeds give the t-interval 2
# degrees of freedom, so a fourth seed could still move it; it covers the seeds only (the 10 prompts
# are the same in every run), and the best rates were chosen on these same runs. This is the
# comparison section 4 could not make, and its picture at $10^{-3}$ — SFT far ahead on fit loss
# (0.557 against 2.649) and format — does not carry over: on the held-out loss, each method at its
# best grid rate, SFT is ahead by a mean of 0.019.
# *rsLoRA against LoRA at $r = 8$.* At its best rate rsLoRA's held-out loss is 0.050 [0.025, 0.076]
# above LoRA's at its best. At $r = 8$ its factor is 5.66 against LoRA's 2.00 (section 4b's table), so
# with Adam its steps on $B$ are about three times larger at the same rate, and its best grid rate is
# lower, consistent with that ($10^{-3}$ against $3\cdot10^{-3}$; the grid cannot resolve a factor of
# three). If rsLoRA were only LoRA at a rate about three times higher, its $10^{-3}$ point would behave
# like LoRA near $3\cdot10^{-3}$, LoRA's best; it is 0.050 worse, in all three seeds. One possible
# reason, which this grid does not test: with Adam, $A$ also moves by about the learning rate whatever
# the factor, so changing the factor is not the same as changing the rate. What $\alpha/\sqrt r$ is for
# is a step size that does not depend on the rank (section 4b), not a better optimum at one rank.
# *What this grid does not show.* One task, 12 steps, the last 4 layers, one rank; a held-out loss
# over 10 prompts; the seeds change the order of the batches and the adapters' initialisation, not
# the data; the best rate is chosen by the held-out loss (by the style margin, SFT's would be higher
# than $3\cdot10^{-4}$). With more steps each optimum can move.

# %% [markdown]
# ## 5. Reflect
#
# **The book's summary (Síntese), with what this notebook measured.** The first three columns are
# the book's table (translated); the last says where this notebook checks it.
#
# | Technique | What changes (book) | Cost (book) | Checked here |
# |---|---|---|---|
# | SFT | all the weights | very high | section 4: trainable share, training-state memory (3 × the trained weights on top), fit loss, format, forgetting — at the book's learning rate and at LoRA's |
# | LoRA | a subspace | low | section 1 (the rank-1 step), section 2 (your layer = `peft`'s), section 3b (811,008 trainable on GPT-2, 0.6475 %), section 4, section 4b (rank and scaling) |
# | QLoRA | subspace + INT4 | very low | section 1 (§7.4.9), section 3b (gradient through $Q(W)$, 4-bit codes frozen), section 4 (memory of the 4-bit layers; its share counted two ways) |
#
# "Fine-tuning moderno não é escolher técnica. É decidir onde, quanto e em que precisão mexer nos
# pesos" (Book, Síntese). **What the book gets right, and what it leaves out.** The proof of §7.4 is
# right up to two rounded losses (1.0019 → 0.9429). Its pipeline (§7.7–§7.11) cannot show a style
# change: the dataset has no responses, padding is trained, `get_peft_model` mutates the "base" used as
# reference, the FP16 error is a configuration error, `prepare_model_for_kbit_training` is missing, and
# nothing is measured. With responses, a masked loss, fresh models, held-out prompts, a metric that can
# move and intervals, "the style changed" becomes a claim you can check — or refute.
#
# ### What this chapter leaves out, on purpose
# * **§7.2.2 and chapter 8's alignment** (preferences, RLHF, DPO): the course's chapter 13.
# * **The benchmarks of §7.2.3** (MMLU-Pro, AIME, GPQA, LiveBench): a 135 M model on a 2-core CPU
#   would score at chance, and the runs would take hours; section 4c shows the overlap metrics the
#   section warns about instead, and a task-specific metric (the format rule) next to them.
# * **§7.6's environment and a real GPU run of §7.7–§7.11** (GPT-2 with `Trainer`, `device_map="auto"`,
#   `bitsandbytes` CUDA kernels): the course runs offline on CPU. Section 3b runs every step of the
#   book's pipeline that can be checked without a download (the LoRA count on GPT-2's shapes, the FP16
#   error, the §7.11 4-bit path on a tiny checkpoint); the CUDA branch of section 4 (`K` = 30, bf16
#   compute) is written but not what the committed outputs show.
# * **Full-model SFT and LoRA on every layer**: on CPU only the last `K` layers train (section 4's
#   scope note), so memory numbers are those of the last `K` layers plus the frozen rest.
# * **Merging and serving adapters, DoRA, other PEFT methods (prefix tuning, IA³)**: not in the book's
#   chapter; section 2 shows the merge $W + \tfrac{\alpha}{r}BA$ only as a formula checked against `peft`.
# * **Human evaluation and LLM-as-judge**: the honest way to score tone and correctness, out of reach
#   offline; the chapter uses rules and likelihoods that a program can check.

# %% [markdown] nbgrader={"grade": false, "grade_id": "written_q1_question", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ### Written question (2 points)
# Using the numbers this notebook printed (the results table, the paired comparisons, the rank sweep
# and sections 4c and 4d): (a) what share of the parameters did LoRA train, and how does its training-state
# memory compare with SFT's? (b) Did the format and the style move, for which runs, and is the change
# larger than its noise (cite a Wilson interval or McNemar p-value, and a sign-flip p-value)? Compare
# SFT and LoRA *at the same learning rate*, then each at its best rate (section 4d): what can you
# conclude about the method, and what not? Did the loss on the unrelated sentences move (forgetting)? (c) What did the 4-bit base buy on this machine,
# and what did it cost? (d) Would ROUGE or BLEU alone have told you whether fine-tuning succeeded?

# %% [markdown] nbgrader={"grade": true, "grade_id": "written_q1", "locked": false, "points": 2, "schema_version": 3, "solution": true, "task": false}
# **Model answer** (numbers from the committed full-mode CPU run of SmolLM2-135M-Instruct — the
# offline stand-in: the real weights after Q4_1 rounding —, `K` = 4 layers, 12 steps; your run's
# values may differ).
# (a) LoRA trained 325,632 parameters, 0.241 % of the model (SFT: 14,160,384 = 10.527 %, every
# weight of the last 4 layers). Training state: LoRA 518 MiB, barely more than the 513 MiB of fp32
# weights; SFT 675 MiB, because gradients and two AdamW moments add three copies of the trained
# weights.
# (b) The format moved for every run at $10^{-3}$ and for none at $5\cdot10^{-5}$ (0/24): SFT 24/24
# [0.86, 1.00], LoRA 9/24 [0.21, 0.57] (McNemar p = 0.0039), QLoRA 13/24 [0.35, 0.72] (p = 0.00024),
# from 0/24 for the base. The style margin moved only for SFT at $10^{-3}$: +0.598 (sign-flip
# p = 0.004); LoRA −0.004 (p = 0.943). At the same rate SFT beat LoRA on format (15 prompts only with
# SFT, none only with LoRA) and margin (−0.602 for LoRA − SFT, p = 0.002): with equal learning rate
# and steps, full fine-tuning of 4 layers moved further than LoRA $r = 8$, $\alpha/r$. That is not a
# verdict on the method. Section 4d's grid (three seeds) puts each method's best rate inside the grid,
# SFT at $3\cdot10^{-4}$ and LoRA at $3\cdot10^{-3}$, and there LoRA minus SFT on the held-out loss is
# +0.019 [+0.000, +0.039] nats per token (SFT lower in all three seeds), with a similar style margin
# (+0.320 against +0.318): at their best rates the gap shrinks to a mean of 0.019, for LoRA training
# 0.241 % of the parameters. By the held-out loss, at $10^{-3}$ SFT had fitted its training answers more
# than the task (3.130, against 2.856 at its best rate), though its style margin was higher there
# (0.639). Comparing SFT at
# $5\cdot10^{-5}$ with LoRA at $10^{-3}$ would have mistaken the learning rate for the method. Forgetting: none
# detectable; the unrelated-text loss fell for SFT (−0.149 [−0.214, −0.081]) and LoRA (−0.094
# [−0.137, −0.051]); QLoRA's change, −0.054 [−0.135, 0.034], is inside an interval that includes a
# small rise.
# (c) The 4-bit base cut the training state from 518 MiB (LoRA) to 471 MiB: the 4 quantized layers'
# 14,155,776 linear weights are stored as NF4 codes, two per byte, plus one float32 absmax per block
# of 64. It cost a little at the start (first-step loss 4.104 vs 4.044 on the same batch: the
# quantization error) and nothing measurable after training: fit loss +0.007 [−0.012, 0.026], margin
# −0.014 [−0.066, 0.039], format 13/24 vs 9/24 (McNemar p = 0.12). Differences outside these
# intervals are not supported by these data; those inside them are not distinguished from none. No speed difference is
# claimed on this shared CPU. On a 135 M model 4 bits buy little; they matter when the frozen weights
# dominate the memory.
# (d) No. A one-word change that makes an answer wrong keeps ROUGE-L F at 0.967, a correct
# paraphrase gets 0.377; the run that learned the style best (SFT at $10^{-3}$) showed no detectable
# change of ROUGE-L F (−0.020 [−0.076, 0.032], sign-flip p = 0.520), and the one clear ROUGE drop (QLoRA, −0.091, p = 0.010) comes
# from answers that stop after the sign-on, a failure the format rule alone would have missed.
