# %% [markdown]
# # 02 · BERT from the inside: embeddings and attention
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/llm-course/llm-course/blob/main/notebooks/02_bert_embeddings_attention/02_bert_embeddings_attention.ipynb)
#
# **Goal.** Follow the book's sentence *"A cute teddy bear is reading a book."* through the first
# stages of a real BERT: from token ids to input vectors, and from input vectors to the attention
# matrices the model computes in every layer and head. You will look at the tensors the model
# actually produces, then rebuild them yourself until they match to the last decimal.
#
# **Book sections.** §2.3 (embeddings), §2.4 (input embeddings in BERT, PCA view), §2.5 (self-attention
# observed), §2.7 (residuals and multi-head attention), and the code map of §2.9–2.10 (feed-forward block,
# LayerNorm).
#
# **You will implement (graded, 9 points + 3 for a written answer):**
# 1. `bert_input_embeddings`: token + position + segment embeddings and the LayerNorm BERT applies to their sum (3 pts);
# 2. `pca_2d`: principal component analysis through the SVD, matching scikit-learn (2 pts);
# 3. `head_attention`: one head's attention matrix recomputed from the layer's input and its query/key
#    weights, padding mask included, matching `outputs.attentions` to 1e-5 (4 pts);
# 4. a written answer: what an attention heatmap does and does not tell us about "meaning" (3 pts).
#
# Define each graded function in its answer cell in this notebook (helpers of your own are fine): the
# hidden tests check where each one is defined. <!-- clause-all: defined-here -->
#
# **Which model?** `load_model("bert-base-uncased")` gives the real `bert-base-uncased` (12 layers,
# d = 768) when the Hugging Face hub or its cache is available. Offline it gives a stand-in:
# the pretrained `all-MiniLM-L6-v2`, a smaller BERT (6 layers, 12 heads, d = 384) with the *same*
# vocabulary. Everything below reads the sizes from `model.config`, so the code runs unchanged on both;
# every number that depends on the weights is printed next to the name of the model that produced it.

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

# %% [markdown]
# ## 1. The model and the sentence
#
# We load the model once and keep its configuration at hand: `L` layers, `H` heads per layer,
# hidden size `D`, and `D // H` features per head.

# %%
import numpy as np
import torch
import matplotlib.pyplot as plt
from course_utils.models import load_model, last_loaded
from course_utils.plotting import heatmap, scatter_labels

model, tok = load_model("bert-base-uncased")
MODEL = last_loaded().actual          # quoted next to every weight-dependent number below
cfg = model.config
L, H, D = cfg.num_hidden_layers, cfg.num_attention_heads, cfg.hidden_size
print(f"{MODEL}: L = {L} layers, H = {H} heads, D = {D}, d_k = D/H = {D // H}, "
      f"d_ff = {cfg.intermediate_size}, vocabulary {cfg.vocab_size}")

# %% [markdown]
# Chapter 01 tokenized the sentence; here is the result again. The ids are those printed in
# Book §2.2.2 (both models share the uncased WordPiece vocabulary, so this cell prints the same thing
# whichever model you loaded).

# %% nbgrader={"grade": false, "grade_id": "tokens", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
text = "A cute teddy bear is reading a book."
enc = tok(text, return_tensors="pt")
ids = enc["input_ids"]
tokens = tok.convert_ids_to_tokens(ids[0].tolist())
BOOK_IDS = [101, 1037, 10140, 11389, 4562, 2003, 3752, 1037, 2338, 1012, 102]  # book value, §2.2.2
print("ids equal the book's:", ids[0].tolist() == BOOK_IDS)
print(" ".join(f"{i}:{t}" for i, t in enumerate(tokens)))

# %% [markdown]
# ## 2. From ids to vectors: three embedding tables (Book §2.3–2.4)
#
# BERT owns three lookup tables, all with `D` columns:
#
# | table | module | rows | answers |
# |---|---|---|---|
# | $E$ (token) | `model.embeddings.word_embeddings` | vocabulary size | *who* is the token? |
# | $P$ (position) | `model.embeddings.position_embeddings` | maximum length (512) | *where* is it? |
# | $S$ (segment) | `model.embeddings.token_type_embeddings` | 2 | *which sentence* of a pair? |

# %%
emb = model.embeddings
for name in ["word_embeddings", "position_embeddings", "token_type_embeddings"]:
    print(f"model.embeddings.{name:<22} weight shape {tuple(getattr(emb, name).weight.shape)}")

# %% [markdown]
# Following the book's code, we look up one row of each table per token (positions $0,\dots,n-1$;
# segment 0 everywhere, since there is only one sentence) and add them:
# $X = E_{\text{tok}} + E_{\text{pos}} + E_{\text{seg}}$, a tensor of shape $(1, n, D)$.

# %%
n = ids.shape[1]
with torch.no_grad():
    position_ids = torch.arange(n).unsqueeze(0)
    token_type_ids = torch.zeros_like(ids)
    token_embeds = emb.word_embeddings(ids)
    position_embeds = emb.position_embeddings(position_ids)
    segment_embeds = emb.token_type_embeddings(token_type_ids)
    X = token_embeds + position_embeds + segment_embeds
print("X:", tuple(X.shape))

# %% [markdown]
# "a" occurs twice (positions 1 and 7). Book §2.3.4 predicts: same token row, different position
# rows, so different input vectors, and the difference is *exactly* the difference of the two
# position rows. The segment rows carry no distinction at all in a single sentence.

# %% nbgrader={"grade": false, "grade_id": "two_a", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
P = emb.position_embeddings.weight
print("same token row for both 'a'          :", torch.equal(token_embeds[0, 1], token_embeds[0, 7]))
print("same position row for both 'a'       :", torch.equal(position_embeds[0, 1], position_embeds[0, 7]))
print("all segment rows identical           :", bool((segment_embeds[0] == segment_embeds[0, 0]).all()))
print("X differs between the two 'a'        :", not torch.equal(X[0, 1], X[0, 7]))
print("X[7] - X[1] equals P[7] - P[1]       :", torch.allclose(X[0, 7] - X[0, 1], (P[7] - P[1]).detach(), atol=1e-6))

# %% [markdown]
# ### What actually enters layer 1: the sum is normalised first
#
# Book §2.3.4 says that the vector entering the first layer *is* the sum $X$. The model's code says
# otherwise: `BertEmbeddings.forward` adds the three lookups, then applies a **LayerNorm**
# (`model.embeddings.LayerNorm`, the formula of Book §2.10.4) and a dropout (inactive in evaluation
# mode). The book skips this step. The model returns what enters layer 1 as
# `outputs.hidden_states[0]`, so we can check which of the two it is:

# %% nbgrader={"grade": false, "grade_id": "layernorm_erratum", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
with torch.no_grad():
    out = model(**enc, output_hidden_states=True, output_attentions=True)
    X_ln = emb.LayerNorm(X)
h0 = out.hidden_states[0]
print("dropout active (training mode)?      :", emb.dropout.training)
print("hidden_states[0] == the book's sum X  :", torch.allclose(h0, X, atol=1e-3))
print("hidden_states[0] == LayerNorm(X)      :", torch.allclose(h0, X_ln, atol=1e-6))

# %% [markdown]
# LayerNorm works inside each token: it removes the token's mean over its `D` features, divides by
# their standard deviation, then rescales every feature with learned $\gamma$ and shifts it with
# learned $\beta$. The per-token statistics show how much this changes the scale:

# %%
print(f"({MODEL})")
print(f"{'token':>8} | {'mean X':>8} {'std X':>7} | {'mean LN(X)':>10} {'std LN(X)':>9}")
for i, t in enumerate(tokens):
    print(f"{t:>8} | {X[0, i].mean():8.4f} {X[0, i].std(unbiased=False):7.4f} | "
          f"{X_ln[0, i].mean():10.4f} {X_ln[0, i].std(unbiased=False):9.4f}")


# %% [markdown]
# ### Exercise 1 — the input embeddings, by hand (3 points)
#
# Write `bert_input_embeddings(model, input_ids, token_type_ids=None, layer_norm=True)`:
#
# * read the three tables' weights, look up the rows for `input_ids`, positions `0 … n-1` (the same
#   for every sequence of the batch) and `token_type_ids`, and add them (with `layer_norm=False`,
#   return this sum); <!-- clause: sum --> when `token_type_ids` is `None`, every position is in
#   segment 0; <!-- clause: default-segments -->
# * if `layer_norm` is true, apply the LayerNorm **formula** of Book §2.10.4 over the last dimension,
#   with the **biased** variance (divide by `D`), `eps = model.embeddings.LayerNorm.eps`,
#   $\gamma$ = `model.embeddings.LayerNorm.weight` and $\beta$ = `model.embeddings.LayerNorm.bias`. <!-- clause: layer-norm -->
#
# Don't call `model.embeddings(...)` or `model.embeddings.LayerNorm(...)`, nor a library layer norm
# (`F.layer_norm`, `torch.layer_norm`, `nn.LayerNorm`, their `torch.ops.aten` kernels, nor a norm that
# computes the same thing: `F.group_norm` with one group, `F.instance_norm`, `F.batch_norm`, `F.rms_norm`):
# the tests compare your result with what those modules produce, and a hidden test switches all of them
# off while your function runs (also when your code reaches them through another name). Write the mean,
# the biased variance and the normalisation with tensor operations. <!-- clause: no-library --> Compute
# the variance as the mean of the squared deviations $(x - \mu)^2$: the one-pass formula
# $\overline{x^2} - \mu^2$ is equal on paper but loses every digit when $|\mu| \gg \sigma$ (a hidden
# test checks this case). <!-- clause: stable-variance --> The result has the dtype of the model's
# weights (a `bfloat16` or `float16` model gives `bfloat16` / `float16` vectors). <!-- clause: keeps-dtype -->
# Neither the model nor the id tensors are modified. <!-- clause: unchanged-input -->

# %% nbgrader={"grade": false, "grade_id": "ex1_embeddings", "locked": false, "schema_version": 3, "solution": true, "task": false}
def bert_input_embeddings(model, input_ids, token_type_ids=None, layer_norm=True):
    """Input vectors of a BERT model built from its three embedding tables (Book §2.4).

    model: a transformers BertModel. input_ids: LongTensor (B, n).
    token_type_ids: LongTensor (B, n), or None for all zeros.
    Returns a tensor (B, n, D) with the dtype of the model's weights (float32, float16, bfloat16):
    E_tok + E_pos + E_seg, followed by the embeddings' LayerNorm when layer_norm is True, with the
    variance computed as the mean of squared deviations (accurate even when |mean| >> std).
    The model, input_ids and token_type_ids are not modified.
    """
    ### BEGIN SOLUTION
    emb = model.embeddings
    B, n = input_ids.shape
    if token_type_ids is None:
        token_type_ids = torch.zeros_like(input_ids)
    position_ids = torch.arange(n, device=input_ids.device).expand(B, n)
    x = (emb.word_embeddings.weight[input_ids]
         + emb.position_embeddings.weight[position_ids]
         + emb.token_type_embeddings.weight[token_type_ids])
    if not layer_norm:
        return x
    ln = emb.LayerNorm
    mu = x.mean(dim=-1, keepdim=True)
    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)
    return ln.weight * (x - mu) / torch.sqrt(var + ln.eps) + ln.bias
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex1_embeddings", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from course_utils.grading import check_close, check_shape, check_true, passed

# Reference: what the model's own embedding module computes, captured before and after its LayerNorm.
_cap = {}
_hook = model.embeddings.LayerNorm.register_forward_hook(
    lambda mod, inp, outp: _cap.update(sum=inp[0].detach().clone(), ln=outp.detach().clone()))
_enc = tok(["A cute teddy bear is reading a book."], return_tensors="pt")
with torch.no_grad():
    model.embeddings(input_ids=_enc["input_ids"])
_hook.remove()
with torch.no_grad():
    _mine_sum = bert_input_embeddings(model, _enc["input_ids"], layer_norm=False)
    _mine_ln = bert_input_embeddings(model, _enc["input_ids"])
check_shape("bert_input_embeddings(..., layer_norm=False)", _mine_sum, tuple(_cap["sum"].shape))
check_close("sum of the three embeddings (before LayerNorm)", _mine_sum, _cap["sum"], atol=1e-5, rtol=0)
check_shape("bert_input_embeddings(...)", _mine_ln, tuple(_cap["ln"].shape))
check_close("input embeddings after LayerNorm", _mine_ln, _cap["ln"], atol=1e-5, rtol=0)
passed()
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
import copy as _copy
import transformers as _tf
from course_utils.grading import record, switched_off
from course_utils.models import load_model as _load_model
# clause: defined-here
record("module of bert_input_embeddings (it must be defined in this notebook)", bert_input_embeddings.__module__)


_LN_OFF = ("torch.nn.functional.layer_norm", "torch.layer_norm", "torch.native_layer_norm", "torch.nn.LayerNorm.forward",
           "torch.ops.aten.layer_norm", "torch.ops.aten.native_layer_norm",
           "torch.nn.functional.group_norm", "torch.group_norm", "torch.native_group_norm",
           "torch.ops.aten.group_norm", "torch.ops.aten.native_group_norm", "torch.nn.GroupNorm.forward",
           "torch.nn.functional.instance_norm", "torch.instance_norm", "torch.ops.aten.instance_norm",
           "torch.nn.functional.batch_norm", "torch.batch_norm", "torch.native_batch_norm",
           "torch.ops.aten.batch_norm", "torch.ops.aten.native_batch_norm",
           "torch.nn.functional.rms_norm", "torch.rms_norm", "torch.ops.aten.rms_norm")
_LN_HINT = ("bert_input_embeddings must apply the LayerNorm formula itself (mean, biased variance, eps inside the "
            "square root); it called F.layer_norm, torch.layer_norm, an nn.LayerNorm such as "
            "model.embeddings.LayerNorm, an ATen layer-norm kernel or an equivalent norm (group_norm, "
            "instance_norm, batch_norm, rms_norm), which this test switches off.")


def _no_embeddings_module(*args, **kwargs):
    raise AssertionError("bert_input_embeddings must add the three table rows itself; it called model.embeddings(...).")


# (a) a fresh copy of the course model, a padded batch of sentence pairs (segments 0 and 1)
_m, _t = _load_model("bert-base-uncased", verbose=False)
_pairs = _t(["A cute teddy bear is reading a book.", "Hello!"], ["It is a good book.", "Hi."],
            padding=True, return_tensors="pt")
with torch.no_grad(), switched_off(*_LN_OFF, functions=[bert_input_embeddings], hint=_LN_HINT):
    _ps = bert_input_embeddings(_m, _pairs["input_ids"], _pairs["token_type_ids"], layer_norm=False)
    _pl = bert_input_embeddings(_m, _pairs["input_ids"], _pairs["token_type_ids"])
# clause: sum, no-library
record("sum of the three embeddings for a padded batch of sentence pairs (segments 0 and 1)", _ps, atol=1e-5, rtol=0)
# clause: layer-norm, no-library
record("LayerNorm output for a padded batch of sentence pairs (segments 0 and 1)", _pl, atol=1e-5, rtol=0)

# (b) a small random BERT with a large eps and non-trivial gamma/beta; its embedding modules switched off
torch.manual_seed(2024)
_cfg = _tf.BertConfig(vocab_size=60, hidden_size=24, num_hidden_layers=1, num_attention_heads=3,
                      intermediate_size=48, max_position_embeddings=20, type_vocab_size=2, layer_norm_eps=1e-3)
_small = _tf.BertModel(_cfg).eval()
with torch.no_grad():
    _small.embeddings.LayerNorm.weight.normal_(1.0, 0.5)
    _small.embeddings.LayerNorm.bias.normal_(0.0, 0.5)
_ids = torch.randint(1, 60, (3, 9))
_tt = torch.randint(0, 2, (3, 9))
# (c) the same model with every word row shifted by 10: |mean| >> std (std of a token's features ~0.035)
_shifted = _copy.deepcopy(_small)
with torch.no_grad():
    _shifted.embeddings.word_embeddings.weight.add_(10.0)
# (d) the same model in half precision
_halves = {_dt: _copy.deepcopy(_small).to(_dt) for _dt in (torch.bfloat16, torch.float16)}
for _mod in (_small, _shifted, *_halves.values()):
    _mod.embeddings.forward = _no_embeddings_module
with torch.no_grad(), switched_off(*_LN_OFF, functions=[bert_input_embeddings], hint=_LN_HINT):
    _gs = bert_input_embeddings(_small, _ids, _tt, layer_norm=False)
    _gl = bert_input_embeddings(_small, _ids, _tt)
    _gl0 = bert_input_embeddings(_small, _ids)
    _gc = bert_input_embeddings(_shifted, _ids, _tt)
    _gh = {_dt: (bert_input_embeddings(_h, _ids, _tt, layer_norm=False), bert_input_embeddings(_h, _ids, _tt))
           for _dt, _h in _halves.items()}
# clause: sum
record("sum on a small random float32 BERT (random segments): a float32 result", _gs, atol=1e-5, rtol=0)
# clause: layer-norm
record("LayerNorm output on a small random float32 BERT (eps = 1e-3, random gamma/beta): a float32 result", _gl,
       atol=1e-5, rtol=0)
# clause: default-segments
record("LayerNorm output on a small random BERT with token_type_ids=None", _gl0, atol=1e-5, rtol=0)
# clause: stable-variance
record("LayerNorm output when every feature is ~10 and the spread ~0.035 (compute the variance as the mean of "
       "squared deviations from the mean, not as mean(x**2) - mean(x)**2, which cancels)", _gc, atol=2e-4, rtol=0)
# clause: unchanged-input
record("input_ids after bert_input_embeddings (it must not be modified)", _ids)
# clause: unchanged-input
record("token_type_ids after bert_input_embeddings (it must not be modified)", _tt)
# clause: unchanged-input
record("the weights of the model after bert_input_embeddings (they must not be modified)", dict(_shifted.state_dict()))
for _dt, _tol in ((torch.bfloat16, 8e-2), (torch.float16, 2e-2)):
    # clause: keeps-dtype
    record(f"sum of the three embeddings of a {_dt} model (a {_dt} result: the dtype of its weights)", _gh[_dt][0],
           atol=_tol, rtol=0)
    # clause: keeps-dtype
    record(f"LayerNorm output of a {_dt} model (a {_dt} result: the dtype of its weights)", _gh[_dt][1],
           atol=_tol, rtol=2e-2)
### BEGIN REFERENCE
from course_utils.grading import check_true, expect


def _reference_embeddings(m, input_ids, token_type_ids=None):
    """What the model's own embedding module computes, captured before and after its LayerNorm."""
    cap = {}
    hk = m.embeddings.LayerNorm.register_forward_hook(
        lambda mod, inp, outp: cap.update(sum=inp[0].detach().clone(), ln=outp.detach().clone()))
    with torch.no_grad():
        m.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)
    hk.remove()
    return cap["sum"], cap["ln"]


check_true(bool((_pairs["token_type_ids"] == 1).any()), "internal: the test batch should contain segment 1")
_rs, _rl = _reference_embeddings(_m, _pairs["input_ids"], _pairs["token_type_ids"])
expect("sum of the three embeddings for a padded batch of sentence pairs (segments 0 and 1)", _rs, atol=1e-5, rtol=0)
expect("LayerNorm output for a padded batch of sentence pairs (segments 0 and 1)", _rl, atol=1e-5, rtol=0)
for _mod in (_small, _shifted, *_halves.values()):
    del _mod.embeddings.forward
_rs, _rl = _reference_embeddings(_small, _ids, _tt)
_rs0, _rl0 = _reference_embeddings(_small, _ids)
expect("sum on a small random float32 BERT (random segments): a float32 result", _rs, atol=1e-5, rtol=0)
expect("LayerNorm output on a small random float32 BERT (eps = 1e-3, random gamma/beta): a float32 result", _rl,
       atol=1e-5, rtol=0)
expect("LayerNorm output on a small random BERT with token_type_ids=None", _rl0, atol=1e-5, rtol=0)
_rs, _rl = _reference_embeddings(_shifted, _ids, _tt)
expect("LayerNorm output when every feature is ~10 and the spread ~0.035 (compute the variance as the mean of "
       "squared deviations from the mean, not as mean(x**2) - mean(x)**2, which cancels)", _rl, atol=2e-4, rtol=0)
for _dt, _tol in ((torch.bfloat16, 8e-2), (torch.float16, 2e-2)):
    _rs, _rl = _reference_embeddings(_halves[_dt], _ids, _tt)
    expect(f"sum of the three embeddings of a {_dt} model (a {_dt} result: the dtype of its weights)", _rs,
           atol=_tol, rtol=0)
    expect(f"LayerNorm output of a {_dt} model (a {_dt} result: the dtype of its weights)", _rl, atol=_tol, rtol=2e-2)
del _m, _t, _small, _shifted, _halves, _cfg, _rs, _rl, _rs0, _rl0
### END REFERENCE
### END HIDDEN TESTS

# %% [markdown]
# ## 3. A picture of the input vectors: PCA (Book §2.4.7)
#
# The input vectors live in $D$ dimensions. Principal component analysis (PCA) finds the two
# orthogonal directions along which the 11 points spread the most, and projects them onto that plane.
# The axes PC1 and PC2 have no meaning of their own; only relative positions do. First with
# scikit-learn, for the book's $X$ (left) and for what the model really feeds to layer 1,
# LayerNorm$(X)$ (right). The inset zooms in on the two occurrences of "a".

# %%
from sklearn.decomposition import PCA


def pca_panel(Z, ax, title):
    pca = PCA(n_components=2, svd_solver="full")
    pts = pca.fit_transform(Z[0].double().numpy())
    labels = [f"{i}:{t}" for i, t in enumerate(tokens)]
    scatter_labels(pts, labels, ax=ax, title=f"{title}\nPC1+PC2 explain {pca.explained_variance_ratio_.sum():.0%} of the variance")
    ax.scatter(pts[[1, 7], 0], pts[[1, 7], 1], color="tab:red", zorder=3)
    ax.set_xlabel("PC1")
    ax.set_ylabel("PC2")
    # Zoom on the two "a" tokens: a square box around them, 3x their distance (at least 2% of the range).
    mid, gap = pts[[1, 7]].mean(0), np.abs(pts[1] - pts[7]).max()
    half = max(1.5 * gap, 0.02 * np.ptp(pts, axis=0).max())
    # Put the zoom in the corner of the panel that covers the fewest points (labels extend to the right).
    (x_lo, x_hi), (y_lo, y_hi) = ax.get_xlim(), ax.get_ylim()
    frac = (pts - [x_lo, y_lo]) / [x_hi - x_lo, y_hi - y_lo]              # positions as fractions of the panel
    corners = [(0.62, 0.04), (0.03, 0.04), (0.62, 0.58), (0.03, 0.58)]
    covered = [int(np.sum((frac[:, 0] > x0 - 0.15) & (frac[:, 0] < x0 + 0.37) & (frac[:, 1] > y0 - 0.05)
                          & (frac[:, 1] < y0 + 0.42))) for x0, y0 in corners]
    inset = ax.inset_axes([*corners[int(np.argmin(covered))], 0.35, 0.35])
    inset.scatter(pts[[1, 7], 0], pts[[1, 7], 1], color="tab:red")
    for i in (1, 7):
        inset.annotate(labels[i], pts[i], textcoords="offset points", xytext=(3, 3), fontsize=8)
    inset.set_xlim(mid[0] - half, mid[0] + half)
    inset.set_ylim(mid[1] - half, mid[1] + half)
    inset.set_xticks([])
    inset.set_yticks([])
    inset.set_title("zoom on the two 'a'", fontsize=8)
    ax.indicate_inset_zoom(inset, edgecolor="gray")
    return pts


fig, axes = plt.subplots(1, 2, figsize=(12, 5))
pts_X = pca_panel(X, axes[0], f"X = tok + pos + seg ({D}→2)")
pts_ln = pca_panel(X_ln, axes[1], f"LayerNorm(X), the input of layer 1 ({D}→2)")
fig.suptitle(f"PCA of the input embeddings — {MODEL}")
fig.tight_layout()
plt.show()


# %% [markdown]
# The two "a" points do not coincide: only their position rows differ (checked above). How far
# apart are they, compared with the other tokens? Distances in the full $D$-dimensional space and in
# the 2-D picture:

# %%
def pair_dist(Z, i, j):
    return float(np.linalg.norm(np.asarray(Z[i], dtype=float) - np.asarray(Z[j], dtype=float)))


others = [pair_dist(X[0], i, j) for i in range(n) for j in range(i + 1, n) if {i, j} != {1, 7}]
print(f"({MODEL})")
print(f"'a'(1) vs 'a'(7):  in R^{D}: {pair_dist(X[0], 1, 7):.3f}   in the PCA plane: {pair_dist(pts_X, 1, 7):.3f}")
print(f"other token pairs: in R^{D}: median {np.median(others):.3f}")
print("norms of the position rows 0..n-1:", " ".join(f"{x:.2f}" for x in P[:n].norm(dim=-1).tolist()))


# %% [markdown]
# The distance between the two "a" is the norm of $P[7]-P[1]$. On the offline stand-in the position
# rows are short (norm ≈ 0.4) except that of position 0 (≈ 2.4), so the two "a" are close compared
# with other pairs, and `[CLS]` (position 0) lies far from everything along PC1 of the left panel. The
# projection keeps only the part of a distance that lies in the PC1–PC2 plane: most of the "a"–"a"
# distance is invisible in the picture, hence the zoom. (On bert-base-uncased, compare your own numbers.)

# %% [markdown]
# ### Exercise 2 — PCA through the SVD (2 points)
#
# *Derivation.* Centre the data, $X_c = X - \bar{x}$ (subtract the mean row). Its SVD is
# $X_c = U \Sigma V^\top$ with singular values $\sigma_1 \ge \sigma_2 \ge \dots$. The covariance matrix is
# $\frac{1}{n-1} X_c^\top X_c = V \frac{\Sigma^2}{n-1} V^\top$, so the rows of $V^\top$ are the principal
# directions and $\sigma_k^2/(n-1)$ the variance along direction $k$. The coordinates ("scores") of the
# points are $X_c V_{:, :k} = U_{:, :k}\Sigma_{:k}$, and the share of the total variance explained by
# component $k$ is $\sigma_k^2 / \sum_j \sigma_j^2$.
#
# Write `pca_2d(X, k=2)`, which returns `(scores, ratio)`: the $(n, k)$ scores of the rows of `X` on
# the first `k` principal directions, and the `k` shares of the total variance those directions
# explain (scikit-learn's `explained_variance_ratio_`). <!-- clause: value --> Use `np.linalg.svd`
# (no scikit-learn: the autograder also runs it where scikit-learn is not installed, with this
# notebook's imports only). <!-- clause: no-sklearn --> Each component's sign is arbitrary: the tests
# accept either sign. Return NumPy `float64` arrays whatever the dtype of `X` (`float32`, integers). <!-- clause: float64 -->
# Leave `X` unchanged (the caller's array must not be centred in place). <!-- clause: unchanged-input -->

# %% nbgrader={"grade": false, "grade_id": "ex2_pca", "locked": false, "schema_version": 3, "solution": true, "task": false}
def pca_2d(X, k=2):
    """Principal component analysis of the rows of X via the SVD (Book §2.4.7).

    X: NumPy array (n, d) of any real dtype (float64, float32, integers); it is not modified.
    Returns (scores, ratio), both NumPy float64 arrays (np.ndarray, not torch tensors), whatever X's dtype:
      scores: float64 array (n, k), the centred rows projected on the first k principal directions;
      ratio: float64 array (k,), the fraction of the total variance explained by each of them
             (scikit-learn's explained_variance_ratio_).
    """
    ### BEGIN SOLUTION
    X = np.asarray(X, dtype=np.float64)
    Xc = X - X.mean(axis=0)
    U, S, Vt = np.linalg.svd(Xc, full_matrices=False)
    scores = Xc @ Vt[:k].T
    ratio = S[:k] ** 2 / (S ** 2).sum()
    return scores, ratio
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex2_pca", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from sklearn.decomposition import PCA as _PCA
from course_utils.grading import check_close, check_shape, passed


def _align_signs(a, b):
    """Flip the columns of a whose sign is opposite to b's (a component's sign is arbitrary)."""
    s = np.sign(np.sum(np.asarray(a) * np.asarray(b), axis=0))
    s[s == 0] = 1
    return np.asarray(a) * s


with torch.no_grad():
    _Z = model.embeddings(input_ids=tok("A cute teddy bear is reading a book.", return_tensors="pt")["input_ids"])
_Z = _Z[0].double().numpy()
_ref = _PCA(n_components=2, svd_solver="full").fit(_Z)
_scores, _ratio = pca_2d(_Z)
check_shape("scores", _scores, (_Z.shape[0], 2))
check_shape("ratio", _ratio, (2,))
check_close("explained variance ratio", _ratio, _ref.explained_variance_ratio_, atol=1e-8)
check_close("scores (up to the sign of each column)", _align_signs(_scores, _ref.transform(_Z)), _ref.transform(_Z),
            atol=1e-8)
passed()
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import record
# clause: defined-here
record("module of pca_2d (it must be defined in this notebook)", pca_2d.__module__)
### BEGIN PROBE WITHOUT sklearn
# recorded twice: here, and by the autograder in a kernel where this package is not installed
import copy as _copy
import numpy as np
from course_utils.grading import record
_rng = np.random.default_rng(7)
_cases = [
    (_rng.normal(size=(40, 7)) * np.array([5.0, 3.0, 2.0, 1.0, 0.5, 0.2, 0.1]) + 10.0, 3),  # n > d, far from 0
    (_rng.normal(size=(6, 30)) - 4.0, 2),                                                 # n < d
    (_rng.normal(size=(25, 12)) @ _rng.normal(size=(12, 12)) + _rng.normal(size=12) * 8, 4),
    (np.round(_rng.normal(size=(30, 9)) * 4.0 + 50.0, 2).astype(np.float32), 3),        # float32 input
    (_rng.integers(-20, 20, size=(15, 5)), 2),                                            # integer input
]
_got = [pca_2d(A, k=k) for A, k in _cases]


def _canonical_signs(scores):
    """`scores` with each column's sign fixed so that its largest entry (in absolute value) is positive; same type
    and dtype (a component's sign is arbitrary)."""
    a = np.asarray(scores)
    flip = [j for j in range(a.shape[1]) if a[np.argmax(np.abs(a[:, j])), j] < 0]
    if not flip:
        return scores
    out = _copy.deepcopy(scores)
    for j in flip:
        out[:, j] = -out[:, j]
    return out


for (A, k), (sc, ra) in zip(_cases, _got):
    _what = f"X of shape {A.shape} and dtype {A.dtype}, k={k}"
    # clause: unchanged-input
    record(f"X after pca_2d ({_what}): it must not be modified (centre a copy, not X in place)", A)
    # clause: value, float64, no-sklearn
    record(f"explained variance ratio for {_what} (a NumPy float64 array)", ra, atol=1e-8)
    # clause: value, float64, no-sklearn
    record(f"scores for {_what} (a NumPy float64 array; each column's sign fixed so that its largest entry is positive)",
           _canonical_signs(sc), atol=1e-7)
### END PROBE
### BEGIN REFERENCE
from course_utils.grading import check_true, expect
for A, k in _cases:
    _what = f"X of shape {A.shape} and dtype {A.dtype}, k={k}"
    _ref = _PCA(n_components=k, svd_solver="full").fit(A.astype(np.float64))
    expect(f"explained variance ratio for {_what} (a NumPy float64 array)", _ref.explained_variance_ratio_, atol=1e-8)
    _exp = _ref.transform(A.astype(np.float64))
    _top = np.sort(np.abs(_exp), axis=0)[-2:]
    check_true(bool((_top[1] - _top[0] > 1e-4).all()),
               f"internal: the sign rule needs each column's two largest |scores| well apart ({_what})")
    expect(f"scores for {_what} (a NumPy float64 array; each column's sign fixed so that its largest entry is positive)",
           _canonical_signs(_exp), atol=1e-7)
del _cases, _got, _ref, _exp
### END REFERENCE
### END HIDDEN TESTS

# %% [markdown]
# **Verify.** Your PCA of the book's $X$ against scikit-learn's (after matching the signs):

# %% nbgrader={"grade": false, "grade_id": "verify_pca", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
_sk = PCA(n_components=2, svd_solver="full").fit(X[0].double().numpy())
_mine, _mine_ratio = pca_2d(X[0].double().numpy())
_sk_pts = _sk.transform(X[0].double().numpy())
_signs = np.sign((_mine * _sk_pts).sum(0))
print("scores match scikit-learn up to sign:", np.allclose(_mine * _signs, _sk_pts, atol=1e-8))
print("explained variance ratio matches    :", np.allclose(_mine_ratio, _sk.explained_variance_ratio_, atol=1e-8))

# %% [markdown]
# ## 4. Self-attention observed (Book §2.5)
#
# With `output_attentions=True` the model returns, for every layer, a tensor of shape
# `(batch, heads, n, n)`: one $n \times n$ matrix per head. Book §2.5.1 prints 12 layers and
# `(1, 12, 11, 11)` for layer 0. The number of layers is a property of the model, so it differs
# between bert-base-uncased and the stand-in; the per-layer shape does not (both have 12 heads).
# The book's 12 layers are checked below against `BertConfig()`, whose defaults are bert-base-uncased's
# sizes, whichever model you loaded.

# %%
print(f"({MODEL}) number of attention tensors: {len(out.attentions)}   (book value: 12, for bert-base-uncased)")

# %% nbgrader={"grade": false, "grade_id": "attn_shapes", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
from transformers import BertConfig

BOOK_LAYERS = 12              # book value, §2.5.1: 12 attention tensors (bert-base-uncased)
BOOK_SHAPE = (1, 12, 11, 11)  # book value, §2.5.1 (layer 0)
BERT_BASE = BertConfig()      # the defaults are bert-base-uncased's sizes: no weights needed
print(f"layers: book {BOOK_LAYERS} vs BertConfig() {BERT_BASE.num_hidden_layers}: "
      f"{'OK' if BERT_BASE.num_hidden_layers == BOOK_LAYERS else 'DIFFERS'}")
print(f"heads : book {BOOK_SHAPE[1]} vs BertConfig() {BERT_BASE.num_attention_heads}: "
      f"{'OK' if BERT_BASE.num_attention_heads == BOOK_SHAPE[1] else 'DIFFERS'}")
print("one attention tensor per layer       :", len(out.attentions) == cfg.num_hidden_layers)
print("every layer's shape == book's shape  :", all(tuple(a.shape) == BOOK_SHAPE for a in out.attentions))
print("shape:", tuple(out.attentions[0].shape))

# %% [markdown]
# Book §2.5.2 states two properties of every such matrix $A$: each row is a probability distribution
# (non-negative, sums to 1), and bidirectional does not mean symmetric, $A \ne A^\top$. We check them
# for all layers and heads at once.

# %% nbgrader={"grade": false, "grade_id": "attn_properties", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
att = torch.stack(out.attentions)[:, 0]          # (L, H, n, n): layer, head, query i, key j
print("all weights >= 0                      :", bool((att >= 0).all()))
print("every row sums to 1 (within 1e-5)     :", bool(((att.sum(-1) - 1).abs() < 1e-5).all()))
asym = (att - att.transpose(-1, -2)).abs().amax(dim=(-1, -2))   # (L, H): max |A - A^T| per head
print("every head is asymmetric (A != A^T)   :", bool((asym > 1e-3).all()))

# %% [markdown]
# ### Where does "teddy" look?
#
# Book §2.5.4 lists the five keys that `teddy` attends to most in one (unnamed) layer and head:
# `is, [CLS], [SEP], ., reading`. It also shows a row "such as" `[0.04, 0.06, …]`. That row cannot
# come from the same head: in it `[CLS]` gets 0.04, the second smallest weight, yet the list puts
# `[CLS]` second. The illustrative row's own top five are different:

# %% nbgrader={"grade": false, "grade_id": "book_row", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
BOOK_ROW = [0.04, 0.06, 0.09, 0.11, 0.10, 0.18, 0.21, 0.05, 0.07, 0.06, 0.03]  # book value, §2.5.4 (illustrative)
BOOK_TOP5 = ["is", "[CLS]", "[SEP]", ".", "reading"]                         # book value, §2.5.4 (observed)
row_top5 = [tokens[j] for j in np.argsort(BOOK_ROW)[::-1][:5]]
print("illustrative row sums to", round(sum(BOOK_ROW), 4))
print("top five of the illustrative row  :", row_top5)
print("same as the book's observed list? :", row_top5 == BOOK_TOP5)

# %% [markdown]
# The book does not say which layer and head it plotted. Let us look for the head of *our* model whose
# top five for `teddy` overlap most with the book's list. (With L × H heads to choose from, some head
# will match almost any story: keep that in mind for the written question.)

# %%
TEDDY = tokens.index("teddy")
top5 = att[:, :, TEDDY].topk(5, dim=-1).indices                     # (L, H, 5)
overlap = torch.tensor([[len(set(BOOK_TOP5) & {tokens[j] for j in top5[l, h].tolist()})
                         for h in range(H)] for l in range(L)])
LAYER, HEAD = divmod(int(overlap.argmax()), H)
print(f"({MODEL}) overlap with the book's list, per layer (rows) and head (columns):")
print(overlap.numpy())
print(f"chosen: layer {LAYER}, head {HEAD} ({int(overlap[LAYER, HEAD])} of 5 in common)")
print(f"'teddy' attends most to:")
for j in top5[LAYER, HEAD].tolist():
    print(f"  -> pos {j:02d} {tokens[j]!r:10} {att[LAYER, HEAD, TEDDY, j]:.3f}")

# %%
A = att[LAYER, HEAD]
heatmap(A, tokens, tokens, title=f"{MODEL}\nlayer {LAYER}, head {HEAD}: rows = queries, columns = keys",
        vmin=0, vmax=1)
plt.xlabel("key j (is looked at)")
plt.ylabel("query i (looks)")
plt.show()
print(f"({MODEL}) layer {LAYER}, head {HEAD}: max |A - A^T| = {asym[LAYER, HEAD]:.3f}; "
      f"A[teddy, [CLS]] = {A[TEDDY, 0]:.3f} but A[[CLS], teddy] = {A[0, TEDDY]:.3f}")

# %% [markdown]
# ### Every head at once
#
# One small heatmap per layer (rows) and head (columns), same colour scale (0 to 1), token order as
# above (query rows, key columns), drawn as one tiled image.

# %%
gap = np.full((L, H, n + 1, n + 1), np.nan)                 # NaN = blank separator between tiles
gap[:, :, :n, :n] = att.numpy()
tiles = gap.transpose(0, 2, 1, 3).reshape(L * (n + 1), H * (n + 1))[:-1, :-1]
fig, ax = plt.subplots(figsize=(0.9 * H + 1.5, 0.9 * L + 1))
heatmap(tiles, ax=ax, annotate=False, vmin=0, vmax=1,
        title=f"Attention of every layer (rows) and head (columns) — {MODEL}")
centres = np.arange(H) * (n + 1) + (n - 1) / 2
ax.set_xticks(centres, labels=[f"head {h}" for h in range(H)], rotation=0, ha="center", fontsize=7)
ax.set_yticks(np.arange(L) * (n + 1) + (n - 1) / 2, labels=[f"layer {l}" for l in range(L)], fontsize=8)
plt.show()

# %% [markdown]
# Some patterns repeat across heads: a bright first column (everyone looks at `[CLS]`), bright last
# columns (`.` and `[SEP]`), a bright diagonal (each token looks at itself) or a bright
# off-diagonal (each token looks at its neighbour). A number summarises how *focused* a head is: the
# **entropy** of each row, $-\sum_j A_{ij} \ln A_{ij}$, averaged over the queries. It is 0 when every
# token looks at exactly one key and $\ln n$ when it spreads its attention uniformly.

# %%
row_entropy = -(att * torch.log(att.clamp_min(1e-30))).sum(-1)    # (L, H, n), in nats
head_entropy = row_entropy.mean(-1)                              # (L, H)
fig, ax = plt.subplots(figsize=(0.6 * H + 2, 0.45 * L + 1.5))
heatmap(head_entropy, [f"layer {l}" for l in range(L)], [f"h{h}" for h in range(H)], ax=ax, cmap="magma",
        vmin=0, vmax=float(np.log(n)), title=f"{MODEL}\nmean attention entropy per head (nats; uniform = ln {n} = {np.log(n):.2f})")
plt.show()
l_min, h_min = divmod(int(head_entropy.argmin()), H)
print(f"({MODEL}) most focused head: layer {l_min}, head {h_min}, entropy {head_entropy[l_min, h_min]:.3f}; "
      f"each query's favourite key:")
print("  " + ", ".join(f"{tokens[i]}->{tokens[j]}" for i, j in enumerate(att[l_min, h_min].argmax(-1).tolist())))

# %% nbgrader={"grade": false, "grade_id": "entropy_bound", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
print(f"uniform attention over n = {n} keys: ln n = {np.log(n):.4f} nats")
print("every row entropy lies in [0, ln n]:", bool(((row_entropy >= -1e-6) & (row_entropy <= np.log(n) + 1e-5)).all()))

# %% [markdown]
# How much of all attention goes to the three *structural* tokens `[CLS]`, `.` and `[SEP]`, which
# are 3 of the 11 positions (27 %)?

# %%
STRUCT = [0, n - 2, n - 1]                                       # [CLS], '.', [SEP]
share = att[..., STRUCT].sum(-1).mean(-1)                        # (L, H): mean over queries
print(f"({MODEL}) share of attention on [CLS], '.', [SEP], averaged over heads, per layer:")
print("  " + "  ".join(f"layer {l}: {share[l].mean():.0%}" for l in range(L)))
print(f"  whole model: {share.mean():.0%}")

# %% [markdown]
# ## 5. Where the numbers come from (Book §2.6–2.7)
#
# Layer $\ell$ receives the hidden states $X^{(\ell)}$ = `outputs.hidden_states[ℓ]` (shape $(B, n, D)$;
# `hidden_states[0]` is the embedding output from Section 2). In the Hugging Face code, head $h$ of that
# layer computes
#
# $$Q^{(h)} = X^{(\ell)} W_Q^{(h)\top} + b_Q^{(h)}, \qquad K^{(h)} = X^{(\ell)} W_K^{(h)\top} + b_K^{(h)},
# \qquad A^{(h)} = \operatorname{softmax}\!\Big(\frac{Q^{(h)} K^{(h)\top}}{\sqrt{d_k}} + M\Big),$$
#
# where
# * `layer.attention.self.query` is one `nn.Linear` for **all** heads: weight $(D, D)$, bias $(D,)$,
#   computing $x W^\top + b$ (note the transpose: `nn.Linear` stores $W$ as *(out, in)*, the book writes
#   $XW_Q$ with $W_Q$ of shape *(in, out)*). The output features are split into $H$ consecutive blocks
#   of $d_k = D/H$: head $h$ owns features $h\,d_k, \dots, (h+1)\,d_k - 1$, i.e. rows of the weight;
# * the scale is $\sqrt{d_k}$, the size of one head, not $\sqrt{D}$;
# * $M$ is the padding mask of Book §2.2.5: $M_{ij} = 0$ when key $j$ is a real token and $-\infty$
#   when it is padding (`attention_mask` = 0). The library adds the most negative float32
#   (≈ −3.4·10³⁸) instead of $-\infty$ or the book's −10⁹; after the softmax the weight is exactly 0
#   either way. Padding rows (queries that are padding) are computed too; only keys are masked.
#
# Let us observe the mask at work on a padded batch before you reproduce it:

# %% nbgrader={"grade": false, "grade_id": "padding_observed", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
batch = tok([text, "A cute teddy bear."], padding=True, return_tensors="pt")
print("attention_mask:\n", batch["attention_mask"].numpy())
with torch.no_grad():
    out_b = model(**batch, output_attentions=True)
pad_cols = batch["attention_mask"][1] == 0
n_real = int(batch["attention_mask"][1].sum())
with torch.no_grad():
    alone = model(**tok("A cute teddy bear.", return_tensors="pt"), output_attentions=True)
print("weight on [PAD] keys is exactly 0, every layer and head:",
      all(bool((a[1][..., pad_cols] == 0).all()) for a in out_b.attentions))
print("real tokens attend as if the sentence were alone      :",
      all(torch.allclose(a[1][:, :n_real, :n_real], b[0], atol=1e-5) for a, b in zip(out_b.attentions, alone.attentions)))


# %% [markdown]
# ### Exercise 3 — one head's attention matrix, from the weights (4 points)
#
# Write `head_attention(layer, hidden_states, head, num_heads, attention_mask=None)` that returns the
# $(B, n, n)$ attention matrix of head `head` of the BERT layer `layer` (= `model.encoder.layer[ℓ]`),
# given that layer's input `hidden_states` (= `outputs.hidden_states[ℓ]`), following the formula above.
# `attention_mask` is `None` or the tokenizer's $(B, n)$ tensor of 1 (token) / 0 (padding); keys
# that are padding get weight exactly 0 (the mask $M$ above), in every dtype, while queries that are
# padding are computed like the others. <!-- clause: padding-mask -->
# Use the weights and biases of `layer.attention.self.query` and `.key` with tensor operations
# only: do not call the layer or its attention modules, nor a fused attention function
# (`F.scaled_dot_product_attention` or its `torch.ops.aten` kernels): a hidden test switches them off. <!-- clause: no-library -->
# It must match `outputs.attentions[ℓ][:, head]` to 1e-5. <!-- clause: value --> Like the library,
# return the dtype of `hidden_states` (a `bfloat16` / `float16` layer gives `bfloat16` / `float16`
# weights). <!-- clause: keeps-dtype --> Stay finite when the scores are huge (hundreds or more: the
# softmax must subtract the row maximum, as `torch.softmax` does). <!-- clause: stable-softmax -->
# Leave `hidden_states` and `attention_mask` unchanged. <!-- clause: unchanged-input -->

# %% nbgrader={"grade": false, "grade_id": "ex3_head_attention", "locked": false, "schema_version": 3, "solution": true, "task": false}
def head_attention(layer, hidden_states, head, num_heads, attention_mask=None):
    """Attention weights of one head of a BERT layer, recomputed from the layer's input (Book §2.6–2.7).

    layer: a BertLayer (model.encoder.layer[l]); hidden_states: float tensor (B, n, D), its input;
    head: int in [0, num_heads); attention_mask: None or tensor (B, n) of 1 (token) / 0 (padding).
    Returns a tensor (B, n, n) with the dtype of hidden_states (float32, float16 or bfloat16): entry
    [b, i, j] is the weight of query i on key j; rows sum to 1 and padded keys get weight exactly 0, also
    when the scores are huge (no overflow). hidden_states and attention_mask are not modified.
    """
    ### BEGIN SOLUTION
    sa = layer.attention.self
    d_k = hidden_states.shape[-1] // num_heads
    rows = slice(head * d_k, (head + 1) * d_k)
    q = hidden_states @ sa.query.weight[rows].T + sa.query.bias[rows]      # (B, n, d_k)
    k = hidden_states @ sa.key.weight[rows].T + sa.key.bias[rows]          # (B, n, d_k)
    scores = q @ k.transpose(-1, -2) / d_k ** 0.5                          # (B, n, n)
    if attention_mask is not None:
        scores = scores.masked_fill(attention_mask[:, None, :] == 0, float("-inf"))
    return torch.softmax(scores, dim=-1)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex3_head_attention", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
from course_utils.grading import check_close, check_shape, check_true, msg, passed

_enc3 = tok("A cute teddy bear is reading a book.", return_tensors="pt")
with torch.no_grad():
    _o3 = model(**_enc3, output_attentions=True, output_hidden_states=True)
    for _l, _h in [(0, 0), (model.config.num_hidden_layers - 1, model.config.num_attention_heads - 1)]:
        _mine = head_attention(model.encoder.layer[_l], _o3.hidden_states[_l], _h, model.config.num_attention_heads)
        check_shape(msg("head_attention(layer {layer}, head {head})", layer=_l, head=_h), _mine, (1, 11, 11))
        check_close(msg("attention of layer {layer}, head {head}", layer=_l, head=_h), _mine, _o3.attentions[_l][:, _h], atol=1e-5, rtol=0)

# a padded batch of 2 sentences: the second one is shorter, its last keys are [PAD] (attention_mask 0)
_pad3 = tok(["A cute teddy bear is reading a book.", "A cute teddy bear."], padding=True, return_tensors="pt")
with torch.no_grad():
    _op3 = model(**_pad3, output_attentions=True, output_hidden_states=True)
    _minep = head_attention(model.encoder.layer[0], _op3.hidden_states[0], 1, model.config.num_attention_heads,
                            _pad3["attention_mask"])
check_shape("head_attention on a padded batch of 2 sentences", _minep, (2, 11, 11))
check_true(bool((_minep[1][:, _pad3["attention_mask"][1] == 0] == 0).all()),
           "on the padded batch, the [PAD] keys of sentence 2 must get weight exactly 0: use attention_mask "
           "(0 = padding) to set their scores to -inf before the softmax.")
check_close("attention on a padded batch with attention_mask (layer 0, head 1)", _minep, _op3.attentions[0][:, 1],
            atol=1e-5, rtol=0)
passed()
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
import copy as _copy
import transformers as _tf
from course_utils.grading import record, switched_off
from course_utils.models import load_model as _load_model
# clause: defined-here
record("module of head_attention (it must be defined in this notebook)", head_attention.__module__)

# (a) fresh course model, padded batch of three sentences, every layer, several heads
_m, _t = _load_model("bert-base-uncased", verbose=False)
_b = _t(["A cute teddy bear is reading a book.", "Hello!", "The bear reads."], padding=True, return_tensors="pt")
_Hh = _m.config.num_attention_heads
_lh = [(_l, _h) for _l in range(_m.config.num_hidden_layers) for _h in sorted({(_l * 5 + 1) % _Hh, (_l * 7 + 3) % _Hh})]
with torch.no_grad():
    _hb = _m(**_b, output_hidden_states=True).hidden_states          # the input of every layer
    _ga = [head_attention(_m.encoder.layer[_l], _hb[_l], _h, _Hh, _b["attention_mask"]) for _l, _h in _lh]
for (_l, _h), _g in zip(_lh, _ga):
    # clause: value, padding-mask
    record(f"attention on a padded batch of 3 sentences with attention_mask (layer {_l}, head {_h})", _g,
           atol=1e-5, rtol=0)

# (b) small random BERT (d_k = 8, sharp attention), padded batch, attention modules switched off
torch.manual_seed(11)
_cfg = _tf.BertConfig(vocab_size=50, hidden_size=24, num_hidden_layers=2, num_attention_heads=3,
                      intermediate_size=48, max_position_embeddings=16, attn_implementation="eager")
_small = _tf.BertModel(_cfg).eval()
with torch.no_grad():
    for _lay in _small.encoder.layer:
        for _lin in (_lay.attention.self.query, _lay.attention.self.key):
            _lin.weight.normal_(0.0, 0.6)
            _lin.bias.normal_(0.0, 0.6)
_ids = torch.randint(1, 50, (2, 7))
_mask = torch.tensor([[1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0, 0]])
# (c) huge scores: the same model with the embeddings' LayerNorm scaled by 30, so that layer 0's scores reach the thousands
_big = _copy.deepcopy(_small)
with torch.no_grad():
    _big.embeddings.LayerNorm.weight.mul_(30.0)
# (d) half-precision copies: the weights keep the dtype of hidden_states
_halves = {_dt: _copy.deepcopy(_small).to(_dt) for _dt in (torch.bfloat16, torch.float16)}
with torch.no_grad():
    _hs = _small(input_ids=_ids, attention_mask=_mask, output_hidden_states=True).hidden_states
    _hbig = _big(input_ids=_ids, attention_mask=_mask, output_hidden_states=True).hidden_states
    _hh = {_dt: _x(input_ids=_ids, attention_mask=_mask, output_hidden_states=True).hidden_states
           for _dt, _x in _halves.items()}

# the layer, its attention modules and eager_attention_forward are switched off while head_attention runs:
# calling them raises AssertionError with the explanation; any other error of the student's code
# (a shape error, ...) propagates unchanged, with its own traceback
_lay0 = _small.encoder.layer[0]
_attn_paths = [f"{type(_o).__module__}.{type(_o).__qualname__}.forward" for _o in (_lay0, _lay0.attention, _lay0.attention.self)]
_attn_paths.append(f"{type(_lay0.attention.self).__module__}.eager_attention_forward")
_attn_paths += ["torch.nn.functional.scaled_dot_product_attention", "torch._C._nn.scaled_dot_product_attention",
                "torch.ops.aten.scaled_dot_product_attention", "torch.ops.aten._scaled_dot_product_attention_math",
                "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu"]
_attn_hint = ("head_attention must use the query/key weights directly; it called the layer, its attention module "
              "or a fused attention function (scaled_dot_product_attention), which are switched off in this test.")
with torch.no_grad(), switched_off(*_attn_paths, functions=[head_attention], hint=_attn_hint):
    _gs = [head_attention(_small.encoder.layer[_l], _hs[_l], _h, 3, _mask) for _l in range(2) for _h in range(3)]
    _gb = [head_attention(_big.encoder.layer[0], _hbig[0], _h, 3, _mask) for _h in range(3)]
    _gh = {_dt: [head_attention(_x.encoder.layer[_l], _hh[_dt][_l], _h, 3, _mask) for _l in range(2) for _h in range(3)]
           for _dt, _x in _halves.items()}
for _i, _g in enumerate(_gs):
    # clause: value, no-library
    record(f"attention of a small random float32 BERT with d_k = 8 (layer {_i // 3}, head {_i % 3}): a float32 result",
           _g, atol=1e-5, rtol=0)
    # clause: padding-mask
    record(f"weights on the 3 [PAD] keys of sentence 2, small random BERT (layer {_i // 3}, head {_i % 3}): exactly 0",
           _g[1][:, 4:])
# clause: unchanged-input
record("hidden_states after head_attention (they must not be modified)", _hs)
# clause: unchanged-input
record("attention_mask after head_attention (it must not be modified)", _mask)
for _h, _g in enumerate(_gb):
    # clause: stable-softmax
    record(f"attention with huge scores (layer 0, head {_h}): finite (subtract each row's maximum before exp, "
           "or use torch.softmax)", _g, atol=1e-5, rtol=0)
for _dt, _tol in ((torch.bfloat16, 3e-2), (torch.float16, 1e-2)):
    for _i, _g in enumerate(_gh[_dt]):
        # clause: keeps-dtype
        record(f"attention of a {_dt} BERT (layer {_i // 3}, head {_i % 3}): a {_dt} result, as the library's",
               _g, atol=_tol, rtol=0)
        # clause: padding-mask
        record(f"weights on the 3 [PAD] keys of sentence 2, {_dt} BERT (layer {_i // 3}, head {_i % 3}): exactly 0",
               _g[1][:, 4:])
### BEGIN REFERENCE
from course_utils.grading import check_close, check_true, expect
check_true(bool((_b["attention_mask"] == 0).any()), "internal: the test batch should be padded")


def _library_attentions(model, hidden_states, **inputs):
    """The model's own attention weights; the run also checks that its layer inputs are the ones given to head_attention."""
    with torch.no_grad():
        out = model(**inputs, output_attentions=True, output_hidden_states=True)
    for a, b in zip(out.hidden_states, hidden_states):
        check_close("internal: layer inputs of the reference run", a, b, atol=1e-6, rtol=0)
    return out.attentions


_att = _library_attentions(_m, _hb, **_b)
for (_l, _h), _g in zip(_lh, _ga):
    expect(f"attention on a padded batch of 3 sentences with attention_mask (layer {_l}, head {_h})", _att[_l][:, _h],
           atol=1e-5, rtol=0)
_att = _library_attentions(_small, _hs, input_ids=_ids, attention_mask=_mask)
for _i in range(6):
    expect(f"attention of a small random float32 BERT with d_k = 8 (layer {_i // 3}, head {_i % 3}): a float32 result",
           _att[_i // 3][:, _i % 3], atol=1e-5, rtol=0)
    expect(f"weights on the 3 [PAD] keys of sentence 2, small random BERT (layer {_i // 3}, head {_i % 3}): exactly 0",
           torch.zeros(7, 3))
_att = _library_attentions(_big, _hbig, input_ids=_ids, attention_mask=_mask)
for _h in range(3):
    expect(f"attention with huge scores (layer 0, head {_h}): finite (subtract each row's maximum before exp, "
           "or use torch.softmax)", _att[0][:, _h], atol=1e-5, rtol=0)
for _dt, _tol in ((torch.bfloat16, 3e-2), (torch.float16, 1e-2)):
    _att = _library_attentions(_halves[_dt], _hh[_dt], input_ids=_ids, attention_mask=_mask)
    for _i in range(6):
        expect(f"attention of a {_dt} BERT (layer {_i // 3}, head {_i % 3}): a {_dt} result, as the library's",
               _att[_i // 3][:, _i % 3], atol=_tol, rtol=0)
        expect(f"weights on the 3 [PAD] keys of sentence 2, {_dt} BERT (layer {_i // 3}, head {_i % 3}): exactly 0",
               torch.zeros(7, 3, dtype=_dt))
del _m, _t, _small, _big, _halves, _att, _hb, _hs, _hbig, _hh
### END REFERENCE
### END HIDDEN TESTS

# %% [markdown]
# ## 6. Verify: the whole layer, from the code map of Book §2.7, §2.9 and §2.10
#
# With your `head_attention` and the modules the book names, one full BERT layer can be rebuilt:
#
# | book | module | shape (this model) |
# |---|---|---|
# | $W_Q, W_K, W_V$ (all heads) | `encoder.layer[ℓ].attention.self.query / key / value` | see below |
# | $W_O$ (§2.7.3) | `encoder.layer[ℓ].attention.output.dense` | |
# | post-norm after attention (§2.10.5) | `encoder.layer[ℓ].attention.output.LayerNorm` | |
# | FFN $W_1$ + GELU (§2.9) | `encoder.layer[ℓ].intermediate.dense` | |
# | FFN $W_2$ (§2.9) | `encoder.layer[ℓ].output.dense` | |
# | post-norm after the FFN (§2.10.5) | `encoder.layer[ℓ].output.LayerNorm` | |

# %%
lay0 = model.encoder.layer[0]
for path, mod in [("attention.self.query", lay0.attention.self.query), ("attention.self.key", lay0.attention.self.key),
                  ("attention.self.value", lay0.attention.self.value), ("attention.output.dense", lay0.attention.output.dense),
                  ("attention.output.LayerNorm", lay0.attention.output.LayerNorm),
                  ("intermediate.dense", lay0.intermediate.dense), ("output.dense", lay0.output.dense),
                  ("output.LayerNorm", lay0.output.LayerNorm)]:
    print(f"encoder.layer[0].{path:<27} {mod}")
print(f"({MODEL}) d_ff / d = {cfg.intermediate_size} / {D}; the book's bert-base-uncased: 3072 / 768 (checked below)")

# %% nbgrader={"grade": false, "grade_id": "book_ffn_sizes", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
BOOK_D_FF, BOOK_D = 3072, 768                               # book value, §2.9: 768 -> 3072 -> 768 in BERT-base
print(f"d_ff: book {BOOK_D_FF} vs BertConfig() {BERT_BASE.intermediate_size}: "
      f"{'OK' if BERT_BASE.intermediate_size == BOOK_D_FF else 'DIFFERS'}")
print(f"d   : book {BOOK_D} vs BertConfig() {BERT_BASE.hidden_size}: {'OK' if BERT_BASE.hidden_size == BOOK_D else 'DIFFERS'}")
print(f"d_ff / d = {BERT_BASE.intermediate_size // BERT_BASE.hidden_size} (the FFN expands each token 4x, then projects back)")


# %% [markdown]
# Each layer is: all heads' $Z^{(h)} = A^{(h)} V^{(h)}$ concatenated, projected by $W_O$, added to the
# input (residual, §2.7.1) and normalised (post-norm, §2.10.5); then the position-wise FFN
# $\mathrm{GELU}(yW_1 + b_1)W_2 + b_2$ (§2.9), again residual + LayerNorm. We rebuild every layer from
# its input `hidden_states[ℓ]` and compare with `hidden_states[ℓ+1]`:

# %% nbgrader={"grade": false, "grade_id": "verify_layer", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
def bert_layer_by_hand(layer, x, num_heads, attention_mask=None):
    d_k = x.shape[-1] // num_heads
    v = layer.attention.self.value(x)                                            # all heads' V, (B, n, D)
    z = torch.cat([head_attention(layer, x, h, num_heads, attention_mask) @ v[..., h * d_k:(h + 1) * d_k]
                   for h in range(num_heads)], dim=-1)                          # Concat(Z^(1..H))
    y = layer.attention.output.LayerNorm(x + layer.attention.output.dense(z))   # residual + post-norm
    ffn = layer.output.dense(layer.intermediate(y))                             # GELU(y W1 + b1) W2 + b2
    return layer.output.LayerNorm(y + ffn)                                      # residual + post-norm


with torch.no_grad():
    out_b = model(**batch, output_hidden_states=True)
    ok = [torch.allclose(bert_layer_by_hand(model.encoder.layer[l], out_b.hidden_states[l], H, batch["attention_mask"]),
                         out_b.hidden_states[l + 1], atol=1e-4) for l in range(L)]
print("every layer rebuilt by hand matches hidden_states[l+1] (padded batch, 1e-4):", all(ok))

# %% [markdown]
# ## 7. Attention weight is not influence
#
# A heatmap shows the weights $A_{ij}$, but what token $j$ actually adds to token $i$'s update is
# $A_{ij}\, v_j W_O^{(h)}$: the weight times the value vector of $j$, carried through this head's slice of
# $W_O$. If a key's transformed value vector is tiny, a large weight on it changes almost nothing. The
# norms $\lVert A_{ij}\, v_j W_O^{(h)} \rVert$ (normalised to sum to 1) for the row of `teddy` in the head
# shown above:

# %%
with torch.no_grad():
    lay = model.encoder.layer[LAYER]
    d_k = D // H
    blk = slice(HEAD * d_k, (HEAD + 1) * d_k)
    x = out.hidden_states[LAYER][0]
    v = lay.attention.self.value(x)[:, blk]                                               # (n, d_k): this head's V
    f = v @ lay.attention.output.dense.weight[:, blk].T                                   # (n, D): v_j W_O^(h)
    contrib = (A[TEDDY][:, None] * f).norm(dim=-1)
    contrib = contrib / contrib.sum()
fig, ax = plt.subplots(figsize=(8, 3))
pos = np.arange(n)
ax.bar(pos - 0.2, A[TEDDY].numpy(), width=0.4, label="attention weight A[teddy, j]")
ax.bar(pos + 0.2, contrib.numpy(), width=0.4, label="share of ||A[teddy, j] v_j W_O|| (normalised)")
ax.set_xticks(pos, labels=tokens, rotation=45, ha="right")
ax.set_title(f"{MODEL}, layer {LAYER}, head {HEAD}: the row of 'teddy'")
ax.legend(fontsize=8)
plt.tight_layout()
plt.show()
print(f"({MODEL}) ||v_j W_O|| per key:", " ".join(f"{t}:{x:.2f}" for t, x in zip(tokens, f.norm(dim=-1).tolist())))
print(f"({MODEL}) weight A[teddy, j]   :", " ".join(f"{t}:{x:.2f}" for t, x in zip(tokens, A[TEDDY].tolist())))
print(f"({MODEL}) share of contribution:", " ".join(f"{t}:{x:.2f}" for t, x in zip(tokens, contrib.tolist())))

# %% [markdown]
# ## What this chapter leaves out
#
# This chapter covers Book §2.3, §2.4 and §2.5 in full, and the code map of §2.7, §2.9 and §2.10.
# What it leaves out or simplifies, on purpose:
#
# * **§2.6 and §2.8** (the formal definition, and "teddy reads" computed by hand): chapter 03 derives
#   them; here the formula only serves to rebuild the model's own matrices (Exercise 3, Section 6).
# * **§2.10.1 and §2.10.6** (why normalization is needed, and what it does not do): chapter 03 shows
#   them on a deep stack of blocks; here LayerNorm appears only after the embedding sum and as a module
#   of the code map.
# * **§2.5.3's `[CLS]` as a "global collector"** for classification: the chapter measures how much
#   attention `[CLS]` receives, but trains no classifier on its vector, which needs a labelled task and
#   a fine-tuning run (the book does not do it either).
# * **The book's pictures from bert-base-uncased** (the PCA figure of §2.4.7, the heatmap of §2.5.2,
#   the `teddy` row of §2.5.4): offline the chapter runs a smaller BERT with the same vocabulary, so it
#   checks shapes and properties, not the book's exact values; the book does not say which layer and
#   head it plotted anyway.
# * **Dropout**, in the embeddings and in every layer, is inactive in evaluation mode and absent from
#   the book: it matters only for training.

# %% [markdown] nbgrader={"grade": false, "grade_id": "written_meaning_question", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## 8. Reflect (written, 3 points)
#
# Attention heatmaps are often read as "what the model thinks is related to what". Using **at least
# three pieces of evidence printed in this notebook** (quote the numbers, and name the model, layer and
# head they come from), explain what the attention heatmap of one head **does** tell us about this
# sentence, and what it does **not** tell us about "meaning". You may use: the head chosen to resemble
# the book's list and how it was chosen; the most focused head and what its favourite keys are; the
# share of attention that goes to `[CLS]`, `.` and `[SEP]`; the weight-versus-contribution bars; the fact
# that another checkpoint (bert-base-uncased vs the stand-in) has different heads.

# %% [markdown] nbgrader={"grade": true, "grade_id": "written_meaning", "locked": false, "points": 3, "schema_version": 3, "solution": true, "task": false}
# **Model answer** (numbers from the offline stand-in all-MiniLM-L6-v2; a student on bert-base-uncased
# quotes their own).
#
# *What it tells us.* A heatmap is an exact record of one step of computation: row $i$ says with which
# proportions head $h$ of layer $\ell$ mixes the value vectors of the keys into token $i$'s update. It
# shows where information *can* flow in that step (rows sum to 1, padding gets exactly 0, $A \ne A^\top$),
# and some heads have a clear, checkable function: the most focused head (layer 0, head 2, mean entropy
# ≈ 0.02 nats out of ln 11 ≈ 2.40) sends every token to the previous one (`a->[CLS]`, `cute->a`,
# `teddy->cute`, …). That is a positional rule, not a semantic one.
#
# *What it does not tell us.* (1) The head "most like the book" (layer 1, head 5, 4 of the 5 tokens in
# common) was found by searching 72 heads for a match: with that many heads, some head fits almost any
# story, so a match is not evidence of meaning. (2) In that head `teddy` puts 0.87 of its weight on
# `[CLS]`; the next four keys get 0.01–0.03 each, so the "top five" after the first is ranking noise.
# Averaged over the model, `[CLS]`, `.` and `[SEP]` (27 % of the positions) receive about 60 % of all
# attention, which looks like a default "parking place" rather than semantic relevance. (3) Weight is
# not influence: `[CLS]`'s transformed value vector has norm ≈ 0.09 against ≈ 3–6.5 for the other keys,
# so its share of what is actually added to `teddy` drops from 0.87 to ≈ 0.11, while `book` and `reading`
# (weights 0.03) contribute ≈ 0.2 each. (4) One head is one of L×H parallel mixtures, followed by $W_O$,
# residuals, LayerNorms and the FFN; meaning, if the word applies, is in the resulting vectors, not in a
# single matrix, and another checkpoint (bert-base-uncased) spreads its attention differently over
# different heads. A heatmap shows *where* a head reads from, not *why* or *what it means*.

# %% [markdown]
# ## Summary
#
# * Input vectors are the sum of a token row, a position row and a segment row, **then a LayerNorm**
#   (missing in the book's account): `hidden_states[0]` = LayerNorm$(X)$. Two occurrences of "a" differ
#   only by their position rows.
# * PCA is an SVD of the centred data; the 2-D picture keeps only part of the geometry.
# * Every head produces an $n\times n$ row-stochastic, asymmetric matrix; you recomputed one from the
#   layer's input and its query/key weights, padding mask included, and rebuilt whole layers from the
#   modules of the book's code map.
# * The book's illustrative `teddy` row does not match its own top-five list.
#
# Next, chapter 03 computes self-attention by hand on the book's two-token example and builds the rest
# of the Transformer block (residuals, LayerNorm, FFN) from scratch.
