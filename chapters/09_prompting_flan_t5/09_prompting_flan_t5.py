# %% [markdown]
# # Chapter 9 — Prompting an instruction-tuned model: templates, few-shot, self-consistency, context
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/llm-course/llm-course/blob/main/notebooks/09_prompting_flan_t5/09_prompting_flan_t5.ipynb)
#
# **Goal.** Book ch. 5 changes *no weight*: "alteramos apenas o **contexto textual**". Every
# difference in this chapter comes from the prompt, the template, the randomness of decoding
# (when we switch it on) or the finite context window. The book looks at one sentence per idea;
# here we build the machinery to **measure** each idea on a labelled set of 48 reviews
# (24 Portuguese, 24 English, `assets/09_prompting_flan_t5/sentiment.jsonl`), and on a task the
# small offline model *can* learn from its prompt: antonyms defined only by demonstrations
# (section 9.6, 40 held-out words, `assets/09_prompting_flan_t5/antonyms.tsv`).
#
# **Book sections.** Book §5.3 (the model), §5.4 (deterministic vs sampled generation), §5.5
# (zero-shot vs few-shot), §5.6 (loose vs restrictive template), §5.7 (self-consistency), §5.8
# (the context window), §5.9 (in practice).
#
# **You will implement (graded).**
# 1. `build_few_shot_prompt` — the book's `Texto: … / Sentimento: …` prompt with any number of examples (1 pt)
# 2. `normalize_label` — model answer → `POSITIVO` / `NEGATIVO` / `None` (accents, case, punctuation, extra words, English) (2 pts)
# 3. `majority_vote` — self-consistency vote that abstains (`INDETERMINADO`) on ties (2 pts)
# 4. `evaluate_accuracy` — an accuracy harness around any generator (2 pts)
# 5. `derangement` — a seeded random order that moves every demonstration (1 pt, section 9.7)
# 6. `control_demos` — the control demonstrations that tell *recognising* a task from *learning* a
#    mapping in context: wrong pairs, other orders, pairs that contradict the instruction, an
#    arbitrary code (2 pts, section 9.7)
#
# plus one written question (3 pts) that must cite the accuracies this notebook measured.
#
# Every graded function is tested without a model (a **scripted fake generator** — a Python
# function that returns canned answers — or plain lists), so no test depends on a model. The model
# is only used to measure. Each exercise states its whole contract in the text above the code: the
# hidden tests check every clause stated there, and nothing else.
#
# Define each graded function in its answer cell in this notebook (helpers of your own are fine):
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
import json
import math
import os
import re
import unicodedata
from collections import Counter

import matplotlib.pyplot as plt
import numpy as np
import torch
from course_utils.progress import tqdm
from transformers import GPT2Config

from course_utils import CI_MODE
from course_utils.generation import generate_text
from course_utils.models import load_model, quiet_hf
from course_utils.paths import asset_path

quiet_hf()
AUTOGRADING = bool(os.environ.get("NBGRADER_EXECUTION"))

# %% [markdown]
# ## 1. The model (Book §5.3)
#
# The book prompts `google/flan-t5-small` (77 M parameters), an encoder-decoder tuned on
# instructions. Without network access the course loads a **stand-in**: SmolLM2-135M-Instruct, a
# decoder-only chat model — the banner below says which model you actually have. Every
# model-generated output in this notebook says "(model in the banner)"; your numbers will differ
# from the book's and from a classmate's with the other model. `generate_text` hides the
# difference between the two kinds of model (encoder input vs chat template).

# %% nbgrader={"grade": false, "grade_id": "load_model", "locked": true, "schema_version": 3, "solution": false, "task": false}
torch.set_num_threads(min(2, torch.get_num_threads()))
model, tok = load_model("google/flan-t5-small", verbose=True)
model.eval()
print("seq2seq (encoder-decoder):", bool(getattr(model.config, "is_encoder_decoder", False)))

# %% [markdown]
# ## 2. The book's prompts, verbatim — and its three syntax errors
#
# The prompts below are copied from Book §5.5–§5.7 in Portuguese. The book's code does **not run
# as printed**; we fixed three defects (Book ch. 5 is quoted, not copied):
#
# 1. §5.5.1, §5.5.3 and §5.6.3 close their f-strings with **four** quotes, `Sentimento:""""` →
#    `SyntaxError: unterminated string literal`. Fixed: `Sentimento:"""`.
# 2. §5.6.1 (loose template) lacks the opening `"` before `Este filme` — it compiles, but it is
#    not the intended prompt. Fixed: the quote is restored.
# 3. §5.7.1 never closes its triple-quoted prompt, so `samples = …` ends up *inside* the string
#    (`SyntaxError`), and the voting code whose result the book prints is not shown. Fixed: the
#    string is closed; the vote is your exercise 3.
#
# The cell below proves defect 1 with `compile()` instead of asking you to trust us.

# %% nbgrader={"grade": false, "grade_id": "book_defects", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
book_snippet = 'prompt = f"""{task}\n\nTexto: "Este filme foi um desperdício de tempo."\nSentimento:""""\n'
fixed_snippet = book_snippet.replace('Sentimento:""""', 'Sentimento:"""')
for name, src in [("book §5.5.1 as printed", book_snippet), ("fixed", fixed_snippet)]:
    try:
        compile(src, "<book>", "exec")
        print(f"{name:24s}: compiles")
    except SyntaxError as err:
        print(f"{name:24s}: SyntaxError: {err.msg}")

# %% nbgrader={"grade": false, "grade_id": "book_prompts", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
task = "Classifique o sentimento como POSITIVO ou NEGATIVO."

prompt_zero = f"""{task}

Texto: "Este filme foi um desperdício de tempo."
Sentimento:"""                                   # Book §5.5.1 (fixed: 3 closing quotes, not 4)

prompt_few = f"""{task}

Texto: "Adorei, foi excelente e emocionante."
Sentimento: POSITIVO

Texto: "Péssimo. Não recomendo para ninguém."
Sentimento: NEGATIVO

Texto: "Este filme foi um desperdício de tempo."
Sentimento:"""                                   # Book §5.5.3 (fixed)

prompt_loose = f"""{task}
"Este filme foi um desperdício de tempo." ->"""  # Book §5.6.1 (fixed: opening quote restored)

prompt_strict = f"""{task}

Responda APENAS com: POSITIVO ou NEGATIVO.

Texto: "Este filme foi um desperdício de tempo."
Sentimento:"""                                   # Book §5.6.3 (fixed)

prompt_sc = """Classifique o sentimento como POSITIVO ou NEGATIVO.
Responda APENAS com POSITIVO ou NEGATIVO.

Texto: "O atendimento foi ótimo, mas o produto quebrou no dia seguinte."
Sentimento:"""                                   # Book §5.7.1 (fixed: the string is closed)

BOOK_PROMPTS = {"zero-shot §5.5.1": prompt_zero, "few-shot §5.5.3": prompt_few,
                "loose §5.6.1": prompt_loose, "strict §5.6.3": prompt_strict}
print(prompt_few)

# %% [markdown]
# ## 3. Deterministic vs sampled generation (Book §5.4)
#
# The book's `generate_t5` decodes greedily (`do_sample=False`): the same prompt gives the same
# answer every time, so differences between prompts come from the prompts. `generate_t5_sampled`
# sets `do_sample=True` and nothing else, which means temperature 1.0 **and** the `top_k=50`
# that `generate` adds silently. We pass both explicitly and seed each sample, so the sampled
# answers below are reproducible too — but they differ from one seed to the next.
#
# Outputs below come from the model in the banner (not checked by CI). The book printed
# `NEGATIVO` for the zero-shot and few-shot prompts, `POSITIVO or NEGATIVO. "This film was a
# desperdício de tempo."` for the loose one and `NEGATIVO` for the strict one (Book §5.5.2–§5.6.4);
# a re-run of the book's companion notebook printed `POSITIVO` for the very same greedy
# zero-shot prompt, so even the book's outputs are not a fixed target.
#
# Read the stand-in's greedy answers closely: under the chat template it does not classify, it
# **repeats the review** — and not even faithfully: it writes the non-word `desperdo` where the
# review says `desperdício` (the last line of the cell checks the review's word is not in the
# answer). A 135 M-parameter chat model copying a user message token by token can drop a syllable;
# section 9.2 shows where the echo comes from.

# %% nbgrader={"grade": false, "grade_id": "demo_greedy", "locked": true, "schema_version": 3, "solution": false, "task": false}
if AUTOGRADING:   # no test reads this demo: the autograder skips it (6 s less per graded notebook)
    print("skipped while autograding")
else:
    for name, p in BOOK_PROMPTS.items():
        a1 = generate_text(model, tok, p, max_new_tokens=16)
        a2 = generate_text(model, tok, p, max_new_tokens=16)
        print(f"{name:18s} greedy: {a1!r:50s} same again: {a1 == a2}")

    samples_demo = [generate_text(model, tok, prompt_zero, max_new_tokens=8, do_sample=True, temperature=1.0,
                                  top_k=50, seed=s) for s in range(2 if CI_MODE else 5)]
    print(f"\nzero-shot, sampled (temperature 1.0, top_k 50), seeds 0-{len(samples_demo) - 1}:")
    for s, a in enumerate(samples_demo):
        print(f"  seed {s}: {a!r}")
    print("same seed again gives the same sample:",
          generate_text(model, tok, prompt_zero, max_new_tokens=8, do_sample=True, temperature=1.0, top_k=50,
                        seed=0) == samples_demo[0])
    zero_answer = generate_text(model, tok, prompt_zero, max_new_tokens=16)
    print(f"greedy zero-shot answer {zero_answer!r} contains the review's word 'desperdício':", "desperdício" in zero_answer)


# %% [markdown]
# ## 4. Exercise 1 — the few-shot prompt builder (Book §5.5)
#
# Zero-shot and few-shot prompts of the book share one shape: the task, then one block per
# example, then the query block, separated by a blank line. A block is
#
# ```
# Texto: "<text>"
# Sentimento: <label>
# ```
#
# and the query block ends with `Sentimento:` (nothing after the colon: the model writes the
# label). With no example you get the book's zero-shot prompt exactly; with the book's two
# examples, its few-shot prompt exactly.
#
# **The contract** (each clause is checked):
# - the result is `separator.join([task, block_1, ..., block_n, query_block])`, a `str`; <!-- clause: value -->
#   `separator` defaults to a blank line (`"\n\n"`) and goes between
#   consecutive parts; <!-- clause: separator -->
# - `examples` is any iterable of `(text, label)` pairs (tuples or lists), possibly empty (zero-shot), <!-- clause: any-iterable -->
#   and is not modified; <!-- clause: unchanged-input --> texts, labels
#   and the query are used as given (no stripping); <!-- clause: no-stripping -->
# - `ValueError` if `task` or `query` is empty or only whitespace, if an example is not a pair, or if
#   an example's text or label is empty or only whitespace. <!-- clause: invalid-raises -->

# %% nbgrader={"grade": false, "grade_id": "ex1_few_shot", "locked": false, "schema_version": 3, "solution": true, "task": false}
def build_few_shot_prompt(task, examples, query, separator="\n\n"):
    """Build the book's prompt: ``task``, one block per example, the query block.

    Args:
        task: the instruction, a non-empty string (e.g. "Classifique o sentimento como ...").
        examples: an iterable of ``(text, label)`` pairs (tuples or lists), possibly empty
            (zero-shot). Each example becomes the block ``'Texto: "<text>"\\nSentimento: <label>'``.
        query: the text to classify; its block is ``'Texto: "<query>"\\nSentimento:'``.
        separator: the string put between consecutive parts (task, blocks, query block).

    Returns:
        ``separator.join([task, block_1, ..., block_n, query_block])`` (a ``str``).
        ``examples`` is not modified.

    Raises:
        ValueError: if ``task`` or ``query`` is empty or only whitespace, if an example is not
            a pair, or if an example's text or label is empty or only whitespace. Texts, labels
            and the query are used as given (no stripping).
    """
    ### BEGIN SOLUTION
    if not isinstance(task, str) or not task.strip():
        raise ValueError("task must be a non-empty string")
    if not isinstance(query, str) or not query.strip():
        raise ValueError("query must be a non-empty string")
    parts = [task]
    for i, example in enumerate(examples):
        if len(example) != 2:
            raise ValueError(f"example {i} must be a (text, label) pair, got {example!r}")
        text, label = example
        if not str(text).strip() or not str(label).strip():
            raise ValueError(f"example {i} has an empty text or label: {example!r}")
        parts.append(f'Texto: "{text}"\nSentimento: {label}')
    parts.append(f'Texto: "{query}"\nSentimento:')
    return separator.join(parts)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex1_few_shot", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
from course_utils.grading import check_close, check_equal, check_true, passed

_book_ex = [("Adorei, foi excelente e emocionante.", "POSITIVO"), ("Péssimo. Não recomendo para ninguém.", "NEGATIVO")]
_q = "Este filme foi um desperdício de tempo."
check_true(isinstance(build_few_shot_prompt(task, [], _q), str), "build_few_shot_prompt must return a str.")
check_equal("zero-shot prompt (must equal Book §5.5.1, prompt_zero)", build_few_shot_prompt(task, [], _q), prompt_zero)
check_equal("few-shot prompt with the book's two examples (Book §5.5.3, prompt_few)",
            build_few_shot_prompt(task, _book_ex, _q), prompt_few)
passed()
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import outcome, record
record("module of build_few_shot_prompt (it must be defined in this notebook)", build_few_shot_prompt.__module__)  # clause: defined-here
_ex3 = [["a b", "X"], ("c", "Y"), ("d e f", "Z")]
# clause: value, separator, any-iterable
record("build_few_shot_prompt('T', three examples, 'q?', separator='\\n---\\n')",
       build_few_shot_prompt("T", _ex3, "q?", separator="\n---\n"))
record("examples after build_few_shot_prompt (they must not be modified)", _ex3)  # clause: unchanged-input
# clause: value, separator
record("build_few_shot_prompt('Tarefa.', [('bom', 'POSITIVO')], 'ruim') (one example, default separator)",
       build_few_shot_prompt("Tarefa.", [("bom", "POSITIVO")], "ruim"))
# clause: value, separator, any-iterable
record("build_few_shot_prompt('T', (), 'x', separator=' | ') (zero-shot)", build_few_shot_prompt("T", (), "x", separator=" | "))
# clause: any-iterable
record("build_few_shot_prompt('T', iter([('a', 'B')]), 'x') (examples may be any iterable of pairs)",
       build_few_shot_prompt("T", iter([("a", "B")]), "x"))
_bad_calls = [dict(task="", examples=[], query="x"), dict(task="   ", examples=[], query="x"),
              dict(task="T", examples=[], query=""), dict(task="T", examples=[], query=" \n"),
              dict(task="T", examples=[("a", "")], query="x"), dict(task="T", examples=[("", "L")], query="x"),
              dict(task="T", examples=[("a", "B", "C")], query="x"), dict(task="T", examples=[("a", " ")], query="x"),
              dict(task="T", examples=[("b", "B"), ("\t", "L")], query="x")]
for _bad in _bad_calls:
    record(f"build_few_shot_prompt(**{_bad!r})", outcome(build_few_shot_prompt, **_bad))  # clause: invalid-raises
# clause: no-stripping
record("build_few_shot_prompt('T', [(' bom ', ' POSITIVO')], '  ruim. ') (texts, labels and query as given, no stripping)",
       build_few_shot_prompt("T", [(" bom ", " POSITIVO")], "  ruim. "))
### BEGIN REFERENCE
from course_utils.grading import expect
expect("build_few_shot_prompt('T', three examples, 'q?', separator='\\n---\\n')",
       'T\n---\nTexto: "a b"\nSentimento: X\n---\nTexto: "c"\nSentimento: Y\n---\nTexto: "d e f"\nSentimento: Z'
       '\n---\nTexto: "q?"\nSentimento:')
expect("examples after build_few_shot_prompt (they must not be modified)", [["a b", "X"], ("c", "Y"), ("d e f", "Z")])
expect("build_few_shot_prompt('Tarefa.', [('bom', 'POSITIVO')], 'ruim') (one example, default separator)",
       'Tarefa.\n\nTexto: "bom"\nSentimento: POSITIVO\n\nTexto: "ruim"\nSentimento:')
expect("build_few_shot_prompt('T', (), 'x', separator=' | ') (zero-shot)", 'T | Texto: "x"\nSentimento:')
expect("build_few_shot_prompt('T', iter([('a', 'B')]), 'x') (examples may be any iterable of pairs)",
       'T\n\nTexto: "a"\nSentimento: B\n\nTexto: "x"\nSentimento:')
for _bad in _bad_calls:
    expect(f"build_few_shot_prompt(**{_bad!r})", "raises ValueError")
expect("build_few_shot_prompt('T', [(' bom ', ' POSITIVO')], '  ruim. ') (texts, labels and query as given, no stripping)",
       'T\n\nTexto: " bom "\nSentimento:  POSITIVO\n\nTexto: "  ruim. "\nSentimento:')
### END REFERENCE
### END HIDDEN TESTS

# %% [markdown]
# ## 5. Exercise 2 — reading the model's answer
#
# A model rarely answers with the bare label. It writes `Negativo.`, `  positivo!!`,
# `Sentimento: POSITIVO`, answers in English (`Negative`), adds accents (`NEGATÍVO`), or echoes
# the options (`POSITIVO or NEGATIVO` — the book's loose-template output, §5.6.2). A fair
# accuracy needs one precise rule, written down:
#
# 1. remove accents (Unicode NFKD decomposition, then drop the combining marks), upper-case; <!-- clause: accents-case -->
# 2. split into words: maximal runs of the letters `A`–`Z` (punctuation and digits separate words); <!-- clause: words -->
# 3. map words: `POSITIVO`, `POSITIVA`, `POSITIVE` → `POSITIVO`; `NEGATIVO`, `NEGATIVA`,
#    `NEGATIVE` → `NEGATIVO`; other words are ignored (no substring matching: `POSITIVELY`
#    is not `POSITIVE`); <!-- clause: label-words -->
# 4. exactly one label found (possibly several times) → that label; none, or both → `None`. <!-- clause: one-label -->
#
# An `answer` that is not a `str` (`None`, a number, a list, `bytes`) raises `TypeError`. <!-- clause: not-str-raises -->

# %% nbgrader={"grade": false, "grade_id": "ex2_normalize", "locked": false, "schema_version": 3, "solution": true, "task": false}
def normalize_label(answer):
    """Map a model's answer to ``"POSITIVO"``, ``"NEGATIVO"`` or ``None`` (the 4 rules above).

    Args:
        answer: the generated text (a ``str``).

    Returns:
        ``"POSITIVO"`` or ``"NEGATIVO"`` when the answer's words name exactly one of the two labels
        (in Portuguese, masculine or feminine, or in English; any case; accents and punctuation
        ignored; other words ignored); ``None`` when they name neither or both.

    Raises:
        TypeError: if ``answer`` is not a ``str``.
    """
    ### BEGIN SOLUTION
    if not isinstance(answer, str):
        raise TypeError(f"answer must be a str, got {type(answer).__name__}")
    words_to_label = {"POSITIVO": "POSITIVO", "POSITIVA": "POSITIVO", "POSITIVE": "POSITIVO",
                      "NEGATIVO": "NEGATIVO", "NEGATIVA": "NEGATIVO", "NEGATIVE": "NEGATIVO"}
    decomposed = unicodedata.normalize("NFKD", answer)
    plain = "".join(c for c in decomposed if not unicodedata.combining(c)).upper()
    found = {words_to_label[w] for w in re.findall(r"[A-Z]+", plain) if w in words_to_label}
    return found.pop() if len(found) == 1 else None
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex2_normalize", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from course_utils.grading import check_close, check_equal, check_true, msg, passed

for _ans, _want in [("NEGATIVO", "NEGATIVO"), ("Negativo.", "NEGATIVO"), ("  positivo!!", "POSITIVO"),
                    ("Sentimento: POSITIVO", "POSITIVO"), ("Negative", "NEGATIVO"),
                    ("POSITIVO or NEGATIVO.", None), ("Este filme fo", None),
                    ("NEGATIVO_2", "NEGATIVO"),    # rule 2: digits and "_" separate words too
                    ("posıtıvo", "POSITIVO")]:     # rule 1: the dotless "ı" is no accent, it stays; "ı".upper() is "I"
    check_equal(msg("normalize_label({answer})", answer=repr(_ans)), normalize_label(_ans), _want)
passed()
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import outcome, record
record("module of normalize_label (it must be defined in this notebook)", normalize_label.__module__)  # clause: defined-here
_answers = ["NEGATÍVO", "pósitivo", "Positíva!", "negativa", "POSITIVE.", "\tnegative\n",
            "O sentimento é negativo, sem dúvida", "positivo positivo POSITIVO", "(POSITIVO)", "label=negativo;",
            "2 NEGATIVO 3", "NEGATIVO/POSITIVO", "positive and negative", "", "   ", "POSITIVELY", "NEGATIVOS",
            "neutro", "INDETERMINADO", "Sentimento:", "ＰＯＳＩＴＩＶＯ",
            "NEGATIVO2", "1positivo", "_Positivo_", "sentimento_negativo", "POSITIVO_3", "negativo negativo",
            "NEGATIVO, negativa, NEGATIVE", "NEGATIVO NEGATIVO POSITIVO", "posıtıvo", "NEGATİVO", "positivo\u00a0!"]
for _ans in _answers:
    record(f"normalize_label({_ans!r})", normalize_label(_ans))  # clause: accents-case, words, label-words, one-label
_bads = [None, 3, ["POSITIVO"], b"POSITIVO"]
for _bad in _bads:
    record(f"normalize_label({_bad!r}) (not a str)", outcome(normalize_label, _bad))  # clause: not-str-raises
### BEGIN REFERENCE
from course_utils.grading import expect
_wants = ["NEGATIVO", "POSITIVO", "POSITIVO", "NEGATIVO", "POSITIVO", "NEGATIVO", "NEGATIVO", "POSITIVO", "POSITIVO",
          "NEGATIVO", "NEGATIVO", None, None, None, None, None, None, None, None, None, "POSITIVO",
          "NEGATIVO", "POSITIVO", "POSITIVO", "NEGATIVO", "POSITIVO", "NEGATIVO",
          "NEGATIVO", None, "POSITIVO", "NEGATIVO", "POSITIVO"]
assert len(_wants) == len(_answers)
for _ans, _want in zip(_answers, _wants):
    expect(f"normalize_label({_ans!r})", _want)
for _bad in _bads:
    expect(f"normalize_label({_bad!r}) (not a str)", "raises TypeError")
### END REFERENCE
### END HIDDEN TESTS

# %% [markdown]
# ## 6. Exercise 3 — self-consistency vote with abstention (Book §5.7)
#
# Self-consistency samples the same prompt $k$ times and keeps the most frequent answer. Two
# details decide what it reports: samples that name no label (`None` from `normalize_label`)
# do not vote, and when the top count is shared — a tie, or no vote at all — the honest answer
# is to abstain. The book prints `VOTO FINAL (self-consistency): INDETERMINADO` (§5.7.2): that
# is this fallback firing on samples that were all unreadable, not a "consensus" finding.
#
# `collections.Counter.most_common(1)` is **not** enough: on a tie it returns whichever label it
# met first.
#
# **The contract** (each clause is checked): `labels` is a non-empty sequence (list or tuple) of
# labels (any strings) and `None`; <!-- clause: sequence --> the winner is the label with strictly
# more votes than every other label, among any number of labels; <!-- clause: value --> `None`
# entries do not vote; <!-- clause: none-no-vote --> when no sample voted or two or more labels share
# the top count, return `abstain` (default `"INDETERMINADO"`, any value the caller passes, `None`
# included); <!-- clause: abstain --> `labels` is not modified; <!-- clause: unchanged-input --> an
# empty `labels` raises `ValueError`. <!-- clause: empty-raises -->

# %% nbgrader={"grade": false, "grade_id": "ex3_vote", "locked": false, "schema_version": 3, "solution": true, "task": false}
def majority_vote(labels, abstain="INDETERMINADO"):
    """Majority vote over normalized samples, abstaining on ties.

    Args:
        labels: a non-empty sequence of labels (strings) or ``None`` (an unreadable sample).
        abstain: what to return when there is no strict winner.

    Returns:
        The label with strictly more votes than every other label; ``None`` entries do not vote.
        ``abstain`` when no sample voted or when two or more labels share the top count.
        ``labels`` is not modified.

    Raises:
        ValueError: if ``labels`` is empty.
    """
    ### BEGIN SOLUTION
    labels = list(labels)
    if not labels:
        raise ValueError("majority_vote needs at least one sample, got an empty sequence")
    counts = Counter(label for label in labels if label is not None)
    if not counts:
        return abstain
    ranked = counts.most_common()
    if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
        return abstain
    return ranked[0][0]
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex3_vote", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from course_utils.grading import check_close, check_equal, check_true, passed

check_equal("majority_vote(['POSITIVO', 'NEGATIVO', 'POSITIVO'])", majority_vote(["POSITIVO", "NEGATIVO", "POSITIVO"]), "POSITIVO")
check_equal("majority_vote(['POSITIVO', 'NEGATIVO']) (a tie must abstain)", majority_vote(["POSITIVO", "NEGATIVO"]), "INDETERMINADO")
check_equal("majority_vote([None, None, None]) (no sample voted, Book §5.7.2)", majority_vote([None, None, None]), "INDETERMINADO")
passed()
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import outcome, record
record("module of majority_vote (it must be defined in this notebook)", majority_vote.__module__)  # clause: defined-here
_votes = [(["NEGATIVO", "POSITIVO", "POSITIVO", "NEGATIVO"], {}, "a tie where the first-seen label would win"),
          ([None, None, "NEGATIVO"], {}, "None does not vote"),
          ([None, "POSITIVO", None, None, "POSITIVO"], {}, "None does not vote: 3 None vs 2"),
          ([None, "POSITIVO", None, "NEGATIVO"], {}, "a tie; the None do not count"),
          (["NEGATIVO"], {}, "a single sample"),
          (["a", "b", "c", "c"], {}, "three labels, the winner last"),
          (["a", "b", "a", "b", "c"], {}, "three labels, a 2-2-1 tie"),
          (["x", "y"], {"abstain": None}, "abstain=None on a tie"),
          ([None], {"abstain": "?"}, "abstain='?' when nothing voted"),
          (("POSITIVO", "POSITIVO", "NEGATIVO"), {}, "a tuple of labels")]
for _labels, _kw, _what in _votes:
    # clause: sequence, value, none-no-vote, abstain
    record(f"majority_vote({_labels!r}{''.join(f', {k}={v!r}' for k, v in _kw.items())}) ({_what})",
           majority_vote(_labels, **_kw))
_lab = ["NEGATIVO", None, "POSITIVO", "NEGATIVO"]
majority_vote(_lab)
record("labels after majority_vote(labels) (they must not be modified)", _lab)  # clause: unchanged-input
record("majority_vote([]) (no samples at all is a caller error)", outcome(majority_vote, []))  # clause: empty-raises
### BEGIN REFERENCE
from course_utils.grading import expect
_wants = ["INDETERMINADO", "NEGATIVO", "POSITIVO", "INDETERMINADO", "NEGATIVO", "c", "INDETERMINADO", None, "?", "POSITIVO"]
for (_labels, _kw, _what), _want in zip(_votes, _wants, strict=True):
    expect(f"majority_vote({_labels!r}{''.join(f', {k}={v!r}' for k, v in _kw.items())}) ({_what})", _want)
expect("labels after majority_vote(labels) (they must not be modified)", ["NEGATIVO", None, "POSITIVO", "NEGATIVO"])
expect("majority_vote([]) (no samples at all is a caller error)", "raises ValueError")
### END REFERENCE
### END HIDDEN TESTS

# %% [markdown]
# ## 7. Exercise 4 — an accuracy harness
#
# To compare prompts we need one number per prompt on the same labelled set. The harness takes
# the generator as a plain function `generate(prompt) -> str`: the real model, or — in the
# tests — a scripted fake. Unparsed answers (`parse` returns `None`) and abstentions are
# **wrong answers**, not excluded examples: dividing by the number of parsed answers would
# reward a prompt that makes the model refuse every hard example.
#
# **The contract** (each clause is checked):
# - `examples` is a non-empty sequence (list or tuple) of dicts with keys `"text"` and `"label"`
#   (other keys are ignored); <!-- clause: sequence --> it is not modified; <!-- clause: unchanged-input -->
# - `generate` is called **exactly once per example, in the order of `examples`**, on
#   `make_prompt(example["text"])`; <!-- clause: once-in-order --> no caching: the same text twice is
#   two calls (a sampled model may answer differently); <!-- clause: no-caching -->
# - each answer goes through `parse`, and the result is a dict with these keys:
#   - `"predictions"`: a list of the parsed answers, one per example, in order; <!-- clause: predictions -->
#   - `"accuracy"`: a `float`, the number of predictions equal to the label divided by the number of
#     examples (unparsed answers count as wrong); <!-- clause: accuracy -->
#   - `"n"` (number of examples), `"n_correct"` and `"n_unparsed"` (number of `None` predictions — an
#     abstention such as `INDETERMINADO` is parsed, and wrong); <!-- clause: counts -->
# - an empty `examples` raises `ValueError` before any call to `generate`. <!-- clause: empty-raises -->

# %% nbgrader={"grade": false, "grade_id": "ex4_harness", "locked": false, "schema_version": 3, "solution": true, "task": false}
def evaluate_accuracy(generate, examples, make_prompt, parse):
    """Accuracy of a generator on a labelled set.

    Args:
        generate: a function ``prompt (str) -> answer (str)``; called exactly once per example,
            in the order of ``examples``.
        examples: a non-empty sequence of dicts with keys ``"text"`` and ``"label"``.
        make_prompt: a function ``text -> prompt``.
        parse: a function ``answer -> predicted label`` (``None`` = unreadable).

    Returns:
        A dict with ``"accuracy"`` (float: number of predictions equal to the label / number of
        examples), ``"n"`` (number of examples), ``"n_correct"``, ``"n_unparsed"`` (number of
        ``None`` predictions) and ``"predictions"`` (list, one per example, in order).
        ``examples`` is not modified.

    Raises:
        ValueError: if ``examples`` is empty.
    """
    ### BEGIN SOLUTION
    examples = list(examples)
    if not examples:
        raise ValueError("the labelled set is empty: accuracy is undefined")
    predictions = [parse(generate(make_prompt(ex["text"]))) for ex in examples]
    n_correct = sum(p == ex["label"] for p, ex in zip(predictions, examples))
    return {"accuracy": n_correct / len(examples), "n": len(examples), "n_correct": n_correct,
            "n_unparsed": sum(p is None for p in predictions), "predictions": predictions}
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex4_harness", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from course_utils.grading import check_close, check_equal, check_true, passed

_canned = {"P: bom": "POSITIVO", "P: ruim": "talvez", "P: ok": "NEGATIVO"}
_res = evaluate_accuracy(lambda p: _canned[p], [{"text": "bom", "label": "POSITIVO"}, {"text": "ruim", "label": "NEGATIVO"},
                                               {"text": "ok", "label": "POSITIVO"}],
                         lambda t: "P: " + t, lambda a: a if a in ("POSITIVO", "NEGATIVO") else None)
check_close("accuracy (1 right, 1 unparsed, 1 wrong out of 3)", _res["accuracy"], 1 / 3)
check_equal("predictions", _res["predictions"], ["POSITIVO", None, "NEGATIVO"])
check_equal("n_unparsed", _res["n_unparsed"], 1)
passed()
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import outcome, record
record("module of evaluate_accuracy (it must be defined in this notebook)", evaluate_accuracy.__module__)  # clause: defined-here

class _Scripted:
    """Fake generator: returns the scripted answers in order ("" once they run out) and records every prompt."""
    def __init__(self, answers):
        self.answers, self.prompts = list(answers), []
    def __call__(self, prompt):
        self.prompts.append(prompt)
        return self.answers[len(self.prompts) - 1] if len(self.prompts) <= len(self.answers) else ""


def _acc(res):
    """The accuracy as recorded: a float subclass (e.g. numpy.float64) counts as a float, anything else stays what it is."""
    a = res["accuracy"]
    return float(a) if isinstance(a, float) else a


_ex = [{"text": f"t{i}", "label": lab} for i, lab in enumerate(["A", "B", "A", "A", "B", "B", "A"])]
_gen = _Scripted(["a", "?", "b", "a", "?", "b", "b"])
_res = evaluate_accuracy(_gen, _ex, lambda t: f"<{t}>", lambda s: None if s == "?" else s.upper())
_case = "7 examples: 3 right, 2 unparsed, 2 wrong"
record(f"prompts passed to generate ({_case}; once per example, in order, make_prompt(text))", _gen.prompts)  # clause: once-in-order
record(f"predictions ({_case})", _res["predictions"])  # clause: predictions
record(f"accuracy, a float ({_case}; correct / all examples, not / parsed ones)", _acc(_res), atol=1e-9)  # clause: accuracy
# clause: counts
record(f"n ({_case})", _res["n"])
record(f"n_correct ({_case})", _res["n_correct"])
record(f"n_unparsed ({_case})", _res["n_unparsed"])
record(f"examples after evaluate_accuracy ({_case}; they must not be modified)", _ex)  # clause: unchanged-input
_res1 = evaluate_accuracy(lambda p: "x", ({"text": "only", "label": "x", "lang": "pt"},), str, str)
record("accuracy with one example (a tuple), right", _acc(_res1), atol=1e-9)  # clause: sequence, accuracy
_res0 = evaluate_accuracy(lambda p: "?", [{"text": "a", "label": "A"}] * 4, str, lambda s: None)
record("accuracy with 4 examples, all unparsed", _acc(_res0), atol=1e-9)  # clause: accuracy
record("n_unparsed with 4 examples, all unparsed", _res0["n_unparsed"])  # clause: counts
# the same text twice: generate is still called once per example (a sampled model may answer differently)
_gen2 = _Scripted(["NEGATIVO", "POSITIVO", "POSITIVO", "NEGATIVO"])
_res2 = evaluate_accuracy(_gen2, [{"text": "mesmo", "label": "POSITIVO"}, {"text": "mesmo", "label": "POSITIVO"},
                                  {"text": "outro", "label": "POSITIVO"}, {"text": "mesmo", "label": "NEGATIVO"}],
                          lambda t: t, lambda s: s)
record("prompts passed to generate (4 examples, 3 with the same text; once per example, no caching)", _gen2.prompts)  # clause: no-caching
record("predictions (4 examples, 3 with the same text, answers from successive calls)", _res2["predictions"])  # clause: no-caching, predictions
record("n_correct (4 examples, 3 with the same text)", _res2["n_correct"])  # clause: no-caching, counts
# a prediction that is not None and not the label: wrong, but parsed
_res3 = evaluate_accuracy(lambda p: p, [{"text": "INDETERMINADO", "label": "POSITIVO"}, {"text": "?", "label": "NEGATIVO"},
                                        {"text": "NEGATIVO", "label": "NEGATIVO"}], str,
                          lambda s: None if s == "?" else s)
# clause: counts
record("n_unparsed when one prediction is 'INDETERMINADO' (only None counts as unparsed)", _res3["n_unparsed"])
record("n_correct when one prediction is 'INDETERMINADO'", _res3["n_correct"])
_calls = []
# clause: empty-raises
record("evaluate_accuracy on an empty labelled set",
       outcome(evaluate_accuracy, lambda p: _calls.append(p) or "x", [], str, str))
record("prompts generated for an empty labelled set (there must be none)", _calls)
### BEGIN REFERENCE
from course_utils.grading import expect
expect(f"prompts passed to generate ({_case}; once per example, in order, make_prompt(text))", [f"<t{i}>" for i in range(7)])
expect(f"predictions ({_case})", ["A", None, "B", "A", None, "B", "B"])
expect(f"accuracy, a float ({_case}; correct / all examples, not / parsed ones)", 3 / 7, atol=1e-9)
expect(f"n ({_case})", 7)
expect(f"n_correct ({_case})", 3)
expect(f"n_unparsed ({_case})", 2)
expect(f"examples after evaluate_accuracy ({_case}; they must not be modified)",
       [{"text": f"t{i}", "label": lab} for i, lab in enumerate(["A", "B", "A", "A", "B", "B", "A"])])
expect("accuracy with one example (a tuple), right", 1.0, atol=1e-9)
expect("accuracy with 4 examples, all unparsed", 0.0, atol=1e-9)
expect("n_unparsed with 4 examples, all unparsed", 4)
expect("prompts passed to generate (4 examples, 3 with the same text; once per example, no caching)",
       ["mesmo", "mesmo", "outro", "mesmo"])
expect("predictions (4 examples, 3 with the same text, answers from successive calls)",
       ["NEGATIVO", "POSITIVO", "POSITIVO", "NEGATIVO"])
expect("n_correct (4 examples, 3 with the same text)", 3)
expect("n_unparsed when one prediction is 'INDETERMINADO' (only None counts as unparsed)", 1)
expect("n_correct when one prediction is 'INDETERMINADO'", 1)
expect("evaluate_accuracy on an empty labelled set", "raises ValueError")
expect("prompts generated for an empty labelled set (there must be none)", [])
### END REFERENCE
### END HIDDEN TESTS

# %% [markdown]
# ## 8. The context window (Book §5.8) — truncation to a token budget
#
# A model sees at most a fixed number of positions: GPT-2 has learned position embeddings for
# `n_positions = 1024` (Book §5.8.2 prints `Janela GPT-2: 1024`); SmolLM2 uses rotary positions
# and was trained up to `max_position_embeddings = 8192`; T5 uses relative position buckets, so
# its config holds no hard limit at all. A prompt longer than the window must be cut **by the
# caller**, and the side you cut decides what the model never sees:
#
# - `side="left"` drops tokens at the **start** and keeps the last `budget` tokens (the end of
#   a chat history, the question) — `tokenizer.truncation_side = "left"`;
# - `side="right"` drops tokens at the **end** and keeps the first `budget` tokens (the
#   instruction) — the tokenizers' default `truncation_side = "right"`.
#
# `truncate_tokens` below does both, and its cell checks it against the tokenizer's own
# truncation on a real text.

# %% nbgrader={"grade": false, "grade_id": "window_sizes", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
gpt2_window = GPT2Config().n_positions          # no download: the default config is GPT-2 small's
print("Janela GPT-2 (n_positions):", gpt2_window, "| book §5.8.2: 1024")
assert gpt2_window == 1024

# %% nbgrader={"grade": false, "grade_id": "window_model", "locked": true, "schema_version": 3, "solution": false, "task": false}
print("context length of the model in the banner:",
      getattr(model.config, "max_position_embeddings", None) or getattr(model.config, "n_positions", None)
      or "none in the config (relative positions, T5)")


# %% nbgrader={"grade": false, "grade_id": "truncate", "locked": true, "schema_version": 3, "solution": false, "task": false}
def truncate_tokens(ids, budget, side="left"):
    """Cut a token sequence to at most ``budget`` tokens: a new list of ints, in the original order.

    ``side="left"`` drops tokens at the start (keeps the LAST ``budget`` tokens); ``side="right"``
    drops tokens at the end (keeps the FIRST ``budget`` tokens).
    """
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ValueError(f"budget must be an int >= 1, got {budget!r}")
    if side not in ("left", "right"):
        raise ValueError(f"side must be 'left' or 'right', got {side!r}")
    ids = [int(i) for i in ids]
    return ids[-budget:] if side == "left" else ids[:budget]


_text = "INICIO " + "bla " * 60 + "FIM"
_full = tok(_text, add_special_tokens=False)["input_ids"]
_old_side = tok.truncation_side
try:
    for _side in ["left", "right"]:
        tok.truncation_side = _side
        _lib = tok(_text, add_special_tokens=False, truncation=True, max_length=17)["input_ids"]
        print(f"{len(_full)}-token text cut to 17, side={_side!r}: the same ids as the tokenizer's truncation_side:",
              truncate_tokens(_full, 17, side=_side) == [int(i) for i in _lib])
finally:
    tok.truncation_side = _old_side

# %% [markdown]
# ### What truncation drops: the companion's "BANANA" experiment
#
# An instruction at the head of a long prompt, 5000 filler words, a question at the tail.
# Cut to GPT-2's window the two ways, and look for the instruction and the question in what
# is left. Token counts depend on the tokenizer in the banner (GPT-2's tokenizer gives 10 063
# tokens for this prompt in the companion; yours may differ). Keeping the head **and** the
# tail keeps both — the rule of thumb the book's companion notebook prints after this experiment,
# "put an important instruction at the head and repeat it near the tail" (the companion's, not
# Book §5.8's: the book's §5.8 only prints GPT-2's window).

# %% nbgrader={"grade": false, "grade_id": "banana", "locked": true, "schema_version": 3, "solution": false, "task": false}
instruction = "INSTRUÇÃO CRÍTICA: responda sempre com a palavra 'BANANA'.\nNão explique. Não escreva mais nada.\n\n"
question = "\nPergunta: qual é a capital da França?\nResposta:"
long_prompt = instruction + "bla " * 5000 + question
long_ids = tok(long_prompt, add_special_tokens=False)["input_ids"]
budget = gpt2_window
print(f"prompt: {len(long_ids)} tokens; window: {budget}")
for side in ["left", "right"]:
    kept = tok.decode(truncate_tokens(long_ids, budget, side=side))
    print(f"side={side:5s}: kept {len(truncate_tokens(long_ids, budget, side=side))} tokens | "
          f"instruction kept: {'BANANA' in kept} | question kept: {'França' in kept}")
head_ids = tok(instruction, add_special_tokens=False)["input_ids"]
tail_ids = tok(question, add_special_tokens=False)["input_ids"]
head_tail = truncate_tokens(long_ids, len(head_ids), side="right") + truncate_tokens(long_ids, len(tail_ids), side="left")
kept = tok.decode(head_tail)
print(f"head + tail : kept {len(head_tail)} tokens | instruction kept: {'BANANA' in kept} | question kept: {'França' in kept}")

# %% [markdown]
# ## 9. Measure, do not eyeball: 48 labelled reviews, scored the way evaluation harnesses do
#
# One sentence per idea (the book's method) cannot tell a better prompt from luck: the book's
# run says `NEGATIVO` for the zero-shot prompt, the companion's run of the same greedy prompt
# says `POSITIVO`. We run every prompt style over the labelled set and report each accuracy with
# a 95 % **Wilson** interval (a binomial interval that behaves at 0 and 1), and compare two
# prompts on the *same* examples with **McNemar's exact test**: only the discordant examples
# (right with one prompt, wrong with the other) carry information, and under "no difference"
# each of them is a fair coin, so the p-value is a two-sided binomial test on them.
#
# Budget: full mode uses all 48 examples; CI mode a balanced subset of 8 (2 per language ×
# label); while autograding the sweeps are skipped (the graded tests never depend on them).

# %% nbgrader={"grade": false, "grade_id": "dataset", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
with open(asset_path("09_prompting_flan_t5/sentiment.jsonl"), encoding="utf-8") as f:
    DATA = [json.loads(line) for line in f if line.strip()]
print(len(DATA), "examples:", dict(sorted(Counter((d["lang"], d["label"]) for d in DATA).items())))


def balanced_subset(data, per_group):
    """The first ``per_group`` examples of every (lang, label) group, in file order."""
    seen = Counter()
    out = []
    for d in data:
        if seen[(d["lang"], d["label"])] < per_group:
            seen[(d["lang"], d["label"])] += 1
            out.append(d)
    return out


from course_utils.stats import mcnemar_exact, mean_ci, wilson
# wilson(k, n): 95 % Wilson interval of k/n; mcnemar_exact(right_a, right_b): (b, c, p) of McNemar's exact
# test; mean_ci(values): mean and its 95 % t interval


print("Wilson 95% interval of 24/48:", tuple(round(x, 4) for x in wilson(24, 48)))
print("McNemar exact, A alone right on 2 examples, B alone on 9:", tuple(mcnemar_exact([1] * 2 + [0] * 9, [0] * 2 + [1] * 9)))
print("McNemar exact, 0 vs 6 discordant:", tuple(mcnemar_exact([0] * 6, [1] * 6)))

# %% nbgrader={"grade": false, "grade_id": "eval_set", "locked": true, "schema_version": 3, "solution": false, "task": false}
N_PER_GROUP = 0 if AUTOGRADING else (2 if CI_MODE else 12)
EVAL = balanced_subset(DATA, N_PER_GROUP)
print("evaluation set:", len(EVAL), "examples", "(CI subset)" if CI_MODE and not AUTOGRADING else "")

# %% [markdown]
# ### 9.1 How a harness asks a model for a label: the log-likelihood of each answer
#
# Free generation mixes two questions: *which label does the model prefer?* and *does it write
# the label in the format my parser reads, within my token budget?* Evaluation harnesses
# (lm-evaluation-harness, HELM) ask only the first: for a prompt $x$ and each candidate answer
# $y = (y_1, \dots, y_m)$ they compute the log-likelihood of the answer as a **continuation** of
# the prompt,
#
# $$\log p(y \mid x) = \sum_{t=1}^{m} \log p(y_t \mid x, y_{<t}),$$
#
# and predict $\arg\max_y$ over $y \in \{$`POSITIVO`, `NEGATIVO`$\}$. Every prompt then gets an
# answer (nothing is "unparsed"), and the accuracy measures what the prompt changes in the
# model's preference between the labels. For FLAN-T5 (the book's model, online) the prompt goes
# into the encoder and $\log p(y \mid x)$ is the decoder's likelihood of the label; for a decoder-only
# model the label follows the prompt tokens.
#
# A decoder-only chat model can be prompted in two ways, and this choice matters:
# - **chat**: the prompt is wrapped in the model's chat template (a system turn, the prompt as a
#   user turn, then the assistant header); the label is the start of the assistant's reply.
#   This is what `generate_text` does by default, and what section 3 did.
# - **raw**: the prompt text itself, continued as a document (Book §5.5's prompts end with
#   `Sentimento:` precisely so that the continuation is the label); the label follows a space.
#
# `course_utils.scoring` does the bookkeeping, so this notebook can stay with the prompts:
# `label_scores(model, tok, prompt, labels, fmt)` is the formula above, one full forward pass per
# (prompt, label); `run_prompts(model, tok, prompts, labels, fmt, ...)` computes the same scores for a
# whole template at once, and from the same pass the next-token distribution at the label slot,
# the greedy answer (free generation, parsed later by your `normalize_label`) and seeded samples for
# self-consistency. It is faster only because the prompts of one template share their beginning
# (task, few-shot examples), which it encodes once and reuses (the KV cache of chapter 8). The next
# cell checks the fast path against the definition on the book's two prompts.

# %% nbgrader={"grade": false, "grade_id": "scoring", "locked": true, "schema_version": 3, "solution": false, "task": false}
from course_utils.generation import is_seq2seq
from course_utils.scoring import formats, label_scores, label_token_ids, prompt_token_ids, run_prompts

LABELS = ("POSITIVO", "NEGATIVO")
SEQ2SEQ = is_seq2seq(model)
FORMATS = formats(model)     # ("chat", "raw") for a chat model; an encoder-decoder has no chat template to choose
for fmt in FORMATS:
    print(f"{fmt:4s}: label tokens",
          {lab: [tok.decode([i]) for i in label_token_ids(tok, lab, fmt, SEQ2SEQ)] for lab in LABELS})

# %% nbgrader={"grade": false, "grade_id": "scoring_check", "locked": true, "schema_version": 3, "solution": false, "task": false}
if not AUTOGRADING:
    _check = [prompt_zero, prompt_few]
    for fmt in FORMATS:
        fast = run_prompts(model, tok, _check, LABELS, fmt, gen_tokens=6)
        slow = torch.tensor([label_scores(model, tok, p, LABELS, fmt) for p in _check], dtype=torch.float64)
        print(f"{fmt:4s}: log p(label | book prompt), rows zero-shot / few-shot, columns {LABELS}:",
              [[round(v, 3) for v in row] for row in fast["scores"].tolist()],
              f"| batched = one pass per prompt+label: {torch.allclose(fast['scores'], slow, atol=1e-3)}",
              f"| greedy answers: {fast['greedy']}")

# %% [markdown]
# ### 9.2 Where the echo comes from: chat template or raw text
#
# Below, the book's few-shot prompt as the stand-in reads it under the chat template: the
# examples, the labels and the review are now the *user's message*, and the assistant's reply
# starts on a fresh line — nothing tells the model to continue the `Sentimento:` pattern, and a
# small chat model often answers by repeating part of the message. As raw text, the prompt ends
# at `Sentimento:` and the continuation is the slot the examples taught. (With FLAN-T5 online
# there is only one way: the prompt is the encoder's input.)

# %% nbgrader={"grade": false, "grade_id": "echo", "locked": true, "schema_version": 3, "solution": false, "task": false}
for fmt in FORMATS:
    seen = tok.decode(prompt_token_ids(tok, prompt_few, fmt)) if not SEQ2SEQ else prompt_few
    print(f"--- {fmt}: what the model reads (last 160 characters) ---\n...{seen[-160:]}")
    if not AUTOGRADING:                           # autograding: keep it short
        answer = generate_text(model, tok, prompt_few, max_new_tokens=16, chat=(fmt == "chat") if not SEQ2SEQ else None)
        print(f"--- {fmt}: greedy answer, 16 new tokens: {answer!r}\n")

# %% [markdown]
# ### 9.3 Five templates × two formats on the labelled set
#
# - **zero-shot** — Book §5.5.1 shape; **few-shot** — the book's two examples plus two English
#   ones (none of them in the labelled set);
# - **loose** — Book §5.6.1 shape `"<text>" ->`; **strict** — Book §5.6.3 ("Responda APENAS com:
#   POSITIVO ou NEGATIVO."); **strict few-shot** — both ideas together.
#
# For every template and format we record, per example: the label the log-likelihood prefers, the
# greedy answer (6 new tokens, parsed by `normalize_label`: the *parse rate* is the share it can
# read), and the distribution of the next token at the label position. Both accuracies use
# your `evaluate_accuracy` harness.
#
# A model can prefer one label whatever the review says (a *label bias*). The share of
# `POSITIVO` predictions shows it (the set is balanced: an unbiased classifier predicts about
# half), and the **calibrated** accuracy removes it the way Zhao et al. (2021, "Calibrate before
# use") do: subtract from each label's score its score for the content-free input `N/A` in the
# same template, then take the argmax.

# %% nbgrader={"grade": false, "grade_id": "templates", "locked": true, "schema_version": 3, "solution": false, "task": false}
FEW_SHOT = [("Adorei, foi excelente e emocionante.", "POSITIVO"),      # Book §5.5.3
            ("Péssimo. Não recomendo para ninguém.", "NEGATIVO"),      # Book §5.5.3
            ("An amazing phone, I love it.", "POSITIVO"),              # course
            ("It stopped working on day one. Awful.", "NEGATIVO")]     # course
STRICT_TASK = task + "\n\nResponda APENAS com: POSITIVO ou NEGATIVO."
TEMPLATES = {
    "zero-shot": lambda text: build_few_shot_prompt(task, [], text),
    "few-shot": lambda text: build_few_shot_prompt(task, FEW_SHOT, text),
    "loose": lambda text: f'{task}\n"{text}" ->',
    "strict": lambda text: build_few_shot_prompt(STRICT_TASK, [], text),
    "strict few-shot": lambda text: build_few_shot_prompt(STRICT_TASK, FEW_SHOT, text),
}
print(TEMPLATES["strict few-shot"]("O produto chegou rápido."))

# %% [markdown]
# Self-consistency (section 10) needs samples that can be read, so its samples are drawn in the
# same pass, from one template and format fixed here in advance: **strict few-shot, raw** (the
# book's §5.7 prompt is strict too; raw because of 9.2). Protocol: $k_{\max}$ samples per example,
# temperature 1.0 and top-k 50 (the book's implicit `do_sample=True` settings), 6 new tokens each,
# seeded per batch of prompts; the vote over $k$ samples uses the **first** $k$ of them.

# %% nbgrader={"grade": false, "grade_id": "sweep_templates", "locked": true, "schema_version": 3, "solution": false, "task": false}
SC_TEMPLATE, SC_FORMAT = "strict few-shot", FORMATS[-1]
K_VALUES = [1, 3, 5] if CI_MODE else [1, 3, 5, 9, 15]
K_MAX = max(K_VALUES)
RUNS, RESULTS, RIGHT = {}, {}, {}


def as_generator(prompts, answers):
    """A ``generate(prompt) -> str`` for ``evaluate_accuracy`` that returns precomputed answers."""
    table = dict(zip(prompts, answers, strict=True))
    return lambda p: table[p]


if EVAL:
    combos = [(name, fmt) for fmt in FORMATS for name in TEMPLATES]
    for name, fmt in tqdm(combos, desc="template × format"):
        make = TEMPLATES[name]
        prompts = [make(d["text"]) for d in EVAL]
        sc = (name, fmt) == (SC_TEMPLATE, SC_FORMAT)
        run = run_prompts(model, tok, prompts, LABELS, fmt, gen_tokens=6, n_samples=K_MAX if sc else 0, seed=1000,
                          chunk=max(1, 64 // K_MAX) if sc else 16)
        run["content_free"] = run_prompts(model, tok, [make("N/A")], LABELS, fmt, gen_tokens=1)["scores"][0]
        RUNS[(name, fmt)] = run
        best = [LABELS[j] for j in run["scores"].argmax(1).tolist()]
        calibrated = [LABELS[j] for j in (run["scores"] - run["content_free"]).argmax(1).tolist()]
        RESULTS[(name, fmt)] = {
            "scored": evaluate_accuracy(as_generator(prompts, best), EVAL, make, normalize_label),
            "calibrated": evaluate_accuracy(as_generator(prompts, calibrated), EVAL, make, normalize_label),
            "greedy": evaluate_accuracy(as_generator(prompts, run["greedy"]), EVAL, make, normalize_label)}
        for kind, r in RESULTS[(name, fmt)].items():
            RIGHT[(name, fmt, kind)] = [p == d["label"] for p, d in zip(r["predictions"], EVAL)]
    print(f"model in the banner, n = {len(EVAL)} examples; accuracy [95% Wilson]")
    print(f"{'template':16s} {'fmt':4s} {'label-scored':>21s} {'said POSITIVO':>13s} {'calibrated':>21s}"
          f" {'greedy parsed':>13s} {'greedy accuracy':>21s}")
    for (name, fmt), r in RESULTS.items():
        cells = []
        for kind in ["scored", "calibrated", "greedy"]:
            lo, hi = wilson(r[kind]["n_correct"], r[kind]["n"])
            cells.append(f"{r[kind]['accuracy']:.3f} [{lo:.3f}, {hi:.3f}]")
        share_pos = r["scored"]["predictions"].count("POSITIVO") / r["scored"]["n"]
        parsed = r["greedy"]["n"] - r["greedy"]["n_unparsed"]
        print(f"{name:16s} {fmt:4s} {cells[0]:>21s} {share_pos:13.3f} {cells[1]:>21s} {parsed:8d}/{r['greedy']['n']:<4d}"
              f" {cells[2]:>21s}")
    print("greedy answers, first 3 examples:")
    for (name, fmt), run in RUNS.items():
        print(f"  {name:16s} {fmt:4s} {run['greedy'][:3]}")
else:
    print("sweep skipped while autograding")

# %% [markdown]
# ### 9.4 Which differences are real? Paired tests on the same examples
#
# The chapter's (and Book §5.5.4's) main claim is **few-shot beats zero-shot**; we also test
# strict against loose (§5.6.4), both ideas together against zero-shot, and the chat template
# against raw text for each template. Each line: accuracy of A and of B (label-scored), `b` = the
# examples only A got right, `c` = only B, and McNemar's exact p-value. With a dozen tests, one
# p below 0.05 can be luck; the first line is the one planned in advance.

# %% nbgrader={"grade": false, "grade_id": "paired_tests", "locked": true, "schema_version": 3, "solution": false, "task": false}
if RESULTS:
    pairs = [(("few-shot", f), ("zero-shot", f)) for f in FORMATS]
    pairs += [(("strict", f), ("loose", f)) for f in FORMATS] + [(("strict few-shot", f), ("zero-shot", f)) for f in FORMATS]
    pairs += [((name, "raw"), (name, "chat")) for name in TEMPLATES] if len(FORMATS) == 2 else []
    PAIRED = {}
    print(f"label-scored accuracy, n = {len(EVAL)}; McNemar exact test")
    print(f"{'A':22s} {'B':22s} {'acc A':>6s} {'acc B':>6s} {'A - B':>7s} {'b':>3s} {'c':>3s} {'p':>7s}")
    for a, b_ in pairs:
        ra, rb = RIGHT[(*a, "scored")], RIGHT[(*b_, "scored")]
        b, c, p = mcnemar_exact(ra, rb)
        PAIRED[(a, b_)] = (b, c, p)
        print(f"{' '.join(a):22s} {' '.join(b_):22s} {np.mean(ra):6.3f} {np.mean(rb):6.3f} {np.mean(ra) - np.mean(rb):+7.3f}"
              f" {b:3d} {c:3d} {p:7.4f}")
    a, b_ = ("few-shot", SC_FORMAT), ("zero-shot", SC_FORMAT)
    b, c, p = mcnemar_exact(RIGHT[(*a, "calibrated")], RIGHT[(*b_, "calibrated")])
    print(f"calibrated, few-shot vs zero-shot ({SC_FORMAT}): b = {b}, c = {c}, p = {p:.4f}")
else:
    print("tests skipped while autograding")

# %% [markdown]
# **What can a null result at this n tell?** A p-value above 0.05 says the data are compatible with
# "no difference"; it does not say the difference is zero. Two computations say what the planned
# test (the first line above) can tell, neither of them a function of its p-value:
# - the 95 % interval of the paired accuracy difference (`paired_t` on the per-example differences
#   right A − right B): every difference inside it is compatible with the data;
# - the **minimum detectable effect** at a power fixed before the run, 0.8 at α = 0.05
#   (`course_utils.stats.paired_mde`): the smallest true mean difference a paired test on n examples
#   finds four times in five. It needs the standard deviation of the per-example difference, from a
#   stated source: (i) the bound that holds for any two right/wrong outcomes — a difference of 0 or
#   ±1 has a standard deviation of at most 1 — which needs no data at all, and (ii) this run's own
#   standard deviation, as a pilot would give it for the next, larger run.
#
# (The "observed power" — the power computed at the effect the run happened to see — is a function of
# the p-value and says nothing the p-value does not; it is not used.)

# %% nbgrader={"grade": false, "grade_id": "power", "locked": true, "schema_version": 3, "solution": false, "task": false}
from course_utils.stats import paired_mde, paired_t

if RESULTS:
    (a, b_) = pairs[0]                            # the planned test: few-shot vs zero-shot
    ra, rb = RIGHT[(*a, "scored")], RIGHT[(*b_, "scored")]
    diff_ab = np.array(ra, float) - np.array(rb, float)
    d = paired_t(np.array(ra, float), np.array(rb, float))
    b, c, p = PAIRED[(a, b_)]
    print(f"{' '.join(a)} - {' '.join(b_)}, label-scored, n = {len(EVAL)}: accuracy difference {d.diff:+.3f}"
          f" [95% paired t interval {d.low:+.3f}, {d.high:+.3f}]; McNemar b = {b}, c = {c}, p = {p:.4f}")
    SD_SOURCES = {"bound for right/wrong outcomes": 1.0, "this run's differences (a pilot's)": float(diff_ab.std(ddof=1))}
    MDE = {}
    print("minimum detectable accuracy difference, paired test, power 0.8, alpha 0.05:")
    for source, sd in SD_SOURCES.items():
        MDE[source] = {n: paired_mde(sd, n) for n in (len(EVAL), 2 * len(EVAL), 4 * len(EVAL), 8 * len(EVAL))}
        print(f"  SD {sd:.3f} ({source}): " + ", ".join(f"n = {n}: {m:.3f}" for n, m in MDE[source].items()))
else:
    print("skipped while autograding")

# %% [markdown]
# **What the offline stand-in shows** (SmolLM2-135M-Instruct, the model in the banner of the
# committed run; full mode, n = 48; your numbers differ with another model):
#
# - **Label-scored, every template is at chance.** The accuracies range from 0.500 to 0.625 and
#   every Wilson interval contains 0.5. The cause is a label bias: in 7 of the 10 template ×
#   format cells the model prefers `NEGATIVO` for every review (`said POSITIVO` 0.000), and
#   contextual calibration does not rescue it (calibrated 0.500 everywhere but loose raw, 0.583).
# - **Few-shot vs zero-shot (the planned test): no significant effect.** With the chat template
#   0.625 vs 0.500 (+0.125; 12 examples only few-shot got right, 6 only zero-shot; p = 0.2379), in
#   raw text 0.500 vs 0.521 (−0.021, p = 1.0000). **Strict vs loose: none either**: +0.000 with the
#   chat template, +0.083 in raw text (b = 4, c = 0, p = 0.1250). No line of the table reaches
#   p < 0.05.
# - **"Not detected" is not "absent".** The paired interval of the difference, +0.125 [−0.051, +0.301]
#   (`paired_t`), contains no effect and also a gain of 0.3: the data rule out a loss larger than
#   0.051 from the examples, and cannot tell a small gain from none. Fixed before looking (power
#   0.8, α = 0.05), a paired test on n = 48 examples detects a difference of 0.413 whatever the two
#   prompts do (the standard deviation bound 1), or 0.250 if the next run's differences spread like
#   this one's (SD 0.606); a gain of 0.125 would need between 192 examples (0.123) and more than 384
#   (0.143 at the bound). These numbers size the next run, not this one's conclusion: its interval still
#   contains a gain of 0.250. So this null says "no loss larger than 0.051, and any gain up to 0.301", not
#   "no effect". (Section 9.6
#   shows what a large in-context effect looks like on the same model.)
# - **What the prompt does change is the format of the free answer.** Few-shot parses 0/48 greedy
#   answers with the chat template and 48/48 as raw text; strict 3/48 vs 30/48. The chat-template
#   answers echo the message (`Passei o que n`, `Texto: "Adore`), the raw ones continue the
#   `Sentimento:` slot (`NEGATIVO`): the echo comes from the chat template, while the label the
#   model prefers does not move (few-shot raw vs chat, label-scored: p = 0.2379). Greedy accuracy
#   therefore mixes the two questions: few-shot greedy is 0.000 with the chat template and 0.562 raw.

# %% [markdown]
# ### 9.5 Do templates "reduce the effective entropy"? (Book §5.6.4, measured)
#
# The book says the restrictive template "reduz a entropia efetiva" of the answer. We measure it at
# the label position, per example, in three ways, and report the mean over the examples with a
# 95 % t interval:
# - $H_\text{next}$: the entropy (nats) of the model's whole next-token distribution — how open the
#   first token of the answer is;
# - **label mass**: the probability of the first token of `POSITIVO` plus that of `NEGATIVO` — how
#   much of that distribution the two labels take;
# - $H_\text{label}$: the entropy (bits) of the choice between the two labels, from their
#   log-likelihoods renormalised — 1 bit is a coin flip, 0 a certain choice.
#
# The last lines test the differences the book's claims imply, paired by example (mean
# difference and its interval: an interval that excludes 0 is a real difference).

# %% nbgrader={"grade": false, "grade_id": "entropy", "locked": true, "schema_version": 3, "solution": false, "task": false}
ENTROPY = {}
if RUNS:
    for (name, fmt), run in RUNS.items():
        first = run["first"]
        h_next = -(first.exp() * first).sum(-1).double()
        label_first = [label_token_ids(tok, lab, fmt, SEQ2SEQ)[0] for lab in LABELS]
        mass = first[:, label_first].exp().sum(-1).double()
        q = torch.softmax(run["scores"], -1)
        h_label = -(q * torch.log2(q.clamp_min(1e-300))).sum(-1)
        ENTROPY[(name, fmt)] = {"H_next": h_next.numpy(), "mass": mass.numpy(), "H_label": h_label.numpy()}
    print(f"model in the banner, n = {len(EVAL)}; mean [95% t interval] over the examples")
    print(f"{'template':16s} {'fmt':4s} {'H_next (nats)':>22s} {'label mass':>22s} {'H_label (bits)':>22s}")
    for (name, fmt), e in ENTROPY.items():
        print(f"{name:16s} {fmt:4s} " + " ".join("{:.3f} [{:.3f}, {:.3f}]".format(*mean_ci(e[k])).rjust(22)
                                               for k in ["H_next", "mass", "H_label"]))
    print("paired differences (A - B), mean [95% t interval]:")
    for a, b_ in [(("strict", f), ("loose", f)) for f in FORMATS] + [(("strict", f), ("zero-shot", f)) for f in FORMATS] \
            + [(("few-shot", f), ("zero-shot", f)) for f in FORMATS]:
        print(f"  {' '.join(a):16s} - {' '.join(b_):16s} " + " ".join(
            f"{k} " + "{:+.3f} [{:+.3f}, {:+.3f}]".format(*mean_ci(ENTROPY[a][k] - ENTROPY[b_][k]))
            for k in ["H_next", "mass"]))
else:
    print("skipped while autograding")

# %%
if RESULTS:
    names = list(TEMPLATES)
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.4))
    x = np.arange(len(names))
    width = 0.8 / len(FORMATS)
    for i, fmt in enumerate(FORMATS):
        acc = np.array([RESULTS[(n, fmt)]["scored"]["accuracy"] for n in names])
        ci = np.array([wilson(RESULTS[(n, fmt)]["scored"]["n_correct"], len(EVAL)) for n in names])
        axes[0].bar(x + (i - (len(FORMATS) - 1) / 2) * width, acc, width, yerr=[acc - ci[:, 0], ci[:, 1] - acc],
                    capsize=3, label=f"{fmt}: label-scored")
        h = np.array([mean_ci(ENTROPY[(n, fmt)]["H_next"]) for n in names])
        axes[1].bar(x + (i - (len(FORMATS) - 1) / 2) * width, h[:, 0], width,
                    yerr=[h[:, 0] - h[:, 1], h[:, 2] - h[:, 0]], capsize=3, label=fmt)
    axes[0].axhline(0.5, ls="--", c="gray", lw=1, label="chance (balanced set)")
    axes[0].set_ylim(0, 1)
    axes[0].set_ylabel("accuracy (95% Wilson)")
    axes[1].set_ylabel("mean next-token entropy at the label (nats)")
    for ax in axes:
        ax.set_xticks(x, names, fontsize=8)
        ax.set_xlabel("prompt template")
        ax.legend(fontsize=8)
    fig.suptitle(f"n = {len(EVAL)} (model in the banner)")
    plt.tight_layout()
    plt.show()

# %% [markdown]
# **What the stand-in shows (section 9.5).** The few-shot *examples*, in raw text, are what concentrates
# the next-token distribution: 1.367 nats [95 % t interval 1.311, 1.423] at the label instead of 4.619 for
# zero-shot (paired difference −3.253 [−3.352, −3.153]), and the first tokens of the two labels
# take 0.903 of the probability instead of 0.156. The restrictive *wording* barely moves it: strict
# − zero-shot in raw text is −0.084 [−0.123, −0.046] nats (real, but small) with a label mass
# change of +0.000 [−0.008, +0.009]; with the chat template strict *raises* the entropy (+0.310
# [+0.288, +0.332]) and lowers the label mass (0.041 vs 0.093). Strict vs loose in raw text: +0.747
# nats more entropy but +0.147 more label mass (the loose `->` is continued with a quote: label
# mass 0.009). None of this makes the model surer *which* label: the choice between the two
# stays between 0.696 and 0.800 bits for the raw zero-shot, few-shot, strict and strict few-shot
# templates (1 bit is a coin). So on this model "templates reduce the effective entropy" holds
# for the **format** (examples put the answer in the label slot), not for the **decision**, and
# not for the restrictive instruction.

# %% [markdown]
# ### 9.6 Where in-context learning does show: a task defined only by its demonstrations
#
# The sentiment prompts *describe* the task in words, and the stand-in does not follow the
# description: its preference for `NEGATIVO` hardly moves. In-context learning in the sense of
# Brown et al. (2020, the GPT-3 paper) is something else: the prompt carries **no instruction at all**,
# only input → output pairs, and the model must infer the mapping from them. The simplest such
# task is antonyms with a bare prompt:
#
# ```
# hot -> cold
# big -> small
# fast ->
# ```
#
# Protocol (one factor at a time, everything seeded):
# - 60 word pairs (`assets/09_prompting_flan_t5/antonyms.tsv`), shuffled with seed 0: **40 evaluation
#   words**, never used as demonstrations, and a pool of 20 demonstration pairs;
# - a *demonstration set* is 8 pairs drawn from the pool with seed s; the k-shot prompt uses its
#   first k pairs, k = 0, 1, 2, 4, 8 — so only k changes along a row; 5 sets (seeds 0–4) in full
#   mode, 1 set and k = 0, 4 in CI mode. With k = 0 the prompt is just `word ->`, the same for every set;
# - raw text (no chat template), greedy decoding of 3 new tokens (more than any accepted answer
#   needs, so a longer word cannot be cut down to a right one), the answer is the first line,
#   stripped and lower-cased; **exact match** against the accepted antonyms (`big → small|little`);
# - each accuracy with its 95 % Wilson interval; zero- vs few-shot on the same 40 words with
#   McNemar's exact test for each set, and, averaging the sets word by word, the paired t interval
#   of the accuracy difference.
#
# The prompts of one set share their demonstrations, so `run_prompts` (with no labels to score:
# generation only) encodes them once per set.

# %% nbgrader={"grade": false, "grade_id": "antonyms", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
ANT_ROWS = []
with open(asset_path("09_prompting_flan_t5/antonyms.tsv"), encoding="utf-8") as f:
    for line in f:
        if line.strip() and not line.startswith("#"):
            word, accepted = line.rstrip("\n").split("\t")
            ANT_ROWS.append((word, accepted.split("|")))
_order = np.random.default_rng(0).permutation(len(ANT_ROWS))
ANT_TEST = [ANT_ROWS[i] for i in _order[:40]]
ANT_POOL = [(ANT_ROWS[i][0], ANT_ROWS[i][1][0]) for i in _order[40:]]
print(f"{len(ANT_ROWS)} pairs: {len(ANT_TEST)} evaluation words, {len(ANT_POOL)} demonstration pairs")
print("evaluation words:", ", ".join(w for w, _ in ANT_TEST))


def antonym_prompt(demos, word):
    """The bare prompt: one ``x -> y`` line per demonstration, then ``word ->`` (no instruction)."""
    return "".join(f"{x} -> {y}\n" for x, y in demos) + f"{word} ->"


def antonym_answers(prompts):
    """Greedy answers (raw text, 3 new tokens), each cut to its first line, stripped and lower-cased."""
    greedy = run_prompts(model, tok, prompts, (), "raw", gen_tokens=3, chunk=len(prompts))["greedy"]
    return [g.split("\n")[0].strip().lower() for g in greedy]


print(f"--- a 2-shot prompt ---\n{antonym_prompt(ANT_POOL[:2], ANT_TEST[0][0])}")

# %% nbgrader={"grade": false, "grade_id": "icl_sweep", "locked": true, "schema_version": 3, "solution": false, "task": false}
ICL_K = [0, 4] if CI_MODE else [0, 1, 2, 4, 8]
ICL_SEEDS = [0] if CI_MODE else [0, 1, 2, 3, 4]
ICL_RIGHT, ICL_ANSWERS, ICL_DEMOS = {}, {}, {}
if not AUTOGRADING:
    for seed in tqdm(ICL_SEEDS, desc="demonstration sets"):
        ICL_DEMOS[seed] = [ANT_POOL[i] for i in np.random.default_rng(seed).choice(len(ANT_POOL), 8, replace=False)]
        for k in ICL_K:
            if k == 0 and seed != ICL_SEEDS[0]:   # no demonstration: the same prompts for every set
                ICL_ANSWERS[(seed, 0)], ICL_RIGHT[(seed, 0)] = ICL_ANSWERS[(ICL_SEEDS[0], 0)], ICL_RIGHT[(ICL_SEEDS[0], 0)]
                continue
            ICL_ANSWERS[(seed, k)] = antonym_answers([antonym_prompt(ICL_DEMOS[seed][:k], w) for w, _ in ANT_TEST])
            ICL_RIGHT[(seed, k)] = [a in ok for a, (_, ok) in zip(ICL_ANSWERS[(seed, k)], ANT_TEST)]
    n_ant = len(ANT_TEST)
    print(f"model in the banner, {n_ant} evaluation words, greedy, exact match; accuracy [95% Wilson] per demonstration set")
    print(f"{'k':>2s} " + " ".join(f"{'set ' + str(s):>20s}" for s in ICL_SEEDS) + f" {'mean over sets':>14s}")
    for k in ICL_K:
        cells = [f"{sum(ICL_RIGHT[(s, k)]) / n_ant:.3f} [{{:.3f}}, {{:.3f}}]".format(*wilson(sum(ICL_RIGHT[(s, k)]), n_ant))
                 for s in ICL_SEEDS]
        print(f"{k:2d} " + " ".join(f"{c:>20s}" for c in cells)
              + f" {np.mean([np.mean(ICL_RIGHT[(s, k)]) for s in ICL_SEEDS]):14.3f}")
    s0 = ICL_SEEDS[0]
    for k in ICL_K:
        print(f"set {s0}, k = {k}, first 6 answers:", ICL_ANSWERS[(s0, k)][:6])
    if 1 in ICL_K:
        copies = [sum(a == ICL_DEMOS[s][0][1] for a in ICL_ANSWERS[(s, 1)]) for s in ICL_SEEDS]
        print(f"1-shot answers that copy the demonstration's own answer, per set: {copies} of {n_ant}")
else:
    print("skipped while autograding")

# %% nbgrader={"grade": false, "grade_id": "icl_tests", "locked": true, "schema_version": 3, "solution": false, "task": false}
from statsmodels.stats.contingency_tables import cochrans_q

ICL_TESTS = {}
if ICL_RIGHT:
    zero = np.array(ICL_RIGHT[(ICL_SEEDS[0], 0)], float)
    print(f"zero-shot: {int(zero.sum())}/{len(zero)} right, 95% Wilson [{{:.3f}}, {{:.3f}}]".format(*wilson(zero.sum(), len(zero))))
    for k in [k for k in ICL_K if k > 0]:
        tests = [mcnemar_exact(ICL_RIGHT[(s, k)], ICL_RIGHT[(s, 0)]) for s in ICL_SEEDS]
        per_word = np.mean([ICL_RIGHT[(s, k)] for s in ICL_SEEDS], axis=0)   # accuracy of each word over the sets
        d = paired_t(per_word, zero)
        ICL_TESTS[k] = (tests, d)
        print(f"k = {k} vs k = 0, McNemar exact per set (b, c, p): "
              + "; ".join(f"({t.b}, {t.c}, {t.pvalue:.2g})" for t in tests))
        print(f"        mean over the sets - zero-shot, per word: {d.diff:+.3f} [95% paired t interval {d.low:+.3f},"
              f" {d.high:+.3f}], p = {d.pvalue:.2g}")
    if len(ICL_SEEDS) > 1 and {4, 8} <= set(ICL_K):
        # do the demonstration sets differ? the same 40 words under every set: Cochran's Q (McNemar for > 2 conditions)
        for k in [4, 8]:
            q = cochrans_q(np.array([ICL_RIGHT[(s, k)] for s in ICL_SEEDS], int).T)
            accs = [np.mean(ICL_RIGHT[(s, k)]) for s in ICL_SEEDS]
            print(f"k = {k}: the {len(ICL_SEEDS)} sets range {min(accs):.3f}-{max(accs):.3f} (spread {max(accs) - min(accs):.3f});"
                  f" Cochran's Q = {q.statistic:.2f}, df = {len(ICL_SEEDS) - 1}, p = {q.pvalue:.3f}")
        d84 = paired_t(np.mean([ICL_RIGHT[(s, 8)] for s in ICL_SEEDS], axis=0),
                       np.mean([ICL_RIGHT[(s, 4)] for s in ICL_SEEDS], axis=0))
        print(f"k = 8 vs k = 4, mean over the sets, per word: {d84.diff:+.3f} [95% paired t interval {d84.low:+.3f},"
              f" {d84.high:+.3f}], p = {d84.pvalue:.2g}")
else:
    print("skipped while autograding")

# %%
if ICL_RIGHT:
    fig, ax = plt.subplots(figsize=(5.5, 3.2))
    for s in ICL_SEEDS:
        ax.plot(ICL_K, [np.mean(ICL_RIGHT[(s, k)]) for k in ICL_K], "-", lw=1, alpha=0.5, label=f"set {s}")
    m = np.array([mean_ci([np.mean(ICL_RIGHT[(s, k)]) for s in ICL_SEEDS]) if len(ICL_SEEDS) > 1
                  else (np.mean(ICL_RIGHT[(ICL_SEEDS[0], k)]),) * 3 for k in ICL_K])
    ax.errorbar(ICL_K, m[:, 0], yerr=[m[:, 0] - m[:, 1], m[:, 2] - m[:, 0]], fmt="o-", c="k", lw=2, capsize=3,
                label="mean over sets (95% t)")
    ax.set_xticks(ICL_K)
    ax.set_ylim(0, 1)
    ax.set_xlabel("number of demonstrations k")
    ax.set_ylabel("exact-match accuracy")
    ax.set_title(f"Antonyms from demonstrations, {len(ANT_TEST)} words (model in the banner)", fontsize=9)
    ax.legend(fontsize=7)
    plt.tight_layout()
    plt.show()

# %% [markdown]
# **What the stand-in shows (section 9.6).** Here the demonstrations have a large effect. With no
# demonstration the bare `word ->` prompt gets 0/40 words right (0.000, 95 % Wilson [0.000, 0.088]):
# the model continues with numbers (`10`) or chatter, since nothing says what `->` means. With four
# demonstrations set 0 gets 0.700 [0.546, 0.819], and the five sets get between 0.525 and 0.700;
# McNemar on the same 40 words, four-shot vs zero-shot: 21 to 28 words gained and none lost per set,
# every p < 1e-6. Averaged word by word over the sets, four-shot minus zero-shot is +0.610 [95 %
# paired t interval +0.487, +0.733] — far from 0. The mean accuracy over the sets is 0.135 (k = 1),
# 0.555 (k = 2), 0.610 (k = 4), 0.805 (k = 8); eight against four, word by word, +0.195 [+0.105,
# +0.285]. Two more readings of the table:
#
# - **One demonstration is often copied.** With k = 1 the model often repeats the demonstration's
#   own answer (set 0: `good`, `good`, `poor`, `good`, …); 2 to 31 of the 40 answers per set are that
#   copy. One example shows the format (`->`, then one word), not the relation.
# - **Do the demonstration sets differ?** At k = 4 the five sets range from 0.525 to 0.700, but on the
#   same 40 words Cochran's Q (McNemar's test for more than two conditions) finds no difference between
#   them (Q = 5.79, p = 0.216): a range of 0.175 over five sets is what 40 words give by chance. At
#   k = 8 they do differ (0.675 to 0.875, Q = 11.49, p = 0.022, still below 0.05 after Holm's
#   adjustment for the two values of k, which doubles the smaller p). A range (largest minus smallest
#   of five) grows with the number of sets drawn and is no effect size: it cannot be set beside the
#   paired gain of a condition. Report several demonstration sets, and test their differences.
#
# Why here and not with the reviews? The antonym prompt carries no instruction: the task exists only
# in the demonstrations, so they carry all the information the model needs, and the relation itself
# is one it knows well — or do they only point to it? Section 9.8 separates the two. The sentiment prompts already state the task and the labels; what the
# small model lacks there is the *decision* between the labels, which four examples do not supply
# (they did fix the *format*: label mass 0.903 in raw text, section 9.5).

# %% [markdown]
# ### 9.7 Exercises 5 and 6 — controls that tell *recognising* a task from *learning* a mapping
#
# Section 9.6 does not yet say *what* the demonstrations taught. The stand-in knows antonyms from
# pre-training: the four pairs may only tell it **which** known task to do and in which format (task
# recognition), or the model may take the input → output mapping from the pairs themselves (task
# learning). A control separates the two only if the two readings predict different results on it.
# Every control runs on the **same** 40 evaluation words and the same demonstration sets as the
# four-shot prompt, so every comparison is paired:
#
# - **instruction only** (no demonstration): does naming the task do what the demonstrations do?
# - **wrong pairs** (Min et al. 2022, "Rethinking the role of demonstrations"): the same inputs and
#   outputs, mis-paired. A drop shows that the pairing matters — but both readings predict it: a model
#   that only *recognises* "antonyms" from correct pairs fails to recognise it from wrong ones.
# - **the instruction against the pairs**: `Write the opposite of each word.` followed by four pairs
#   that show the *same word* (`hot -> hot`), and `Repeat each word exactly.` followed by the four true
#   antonym pairs. Each prompt names one task and demonstrates another; every answer is scored against
#   both (the antonym; the word itself), so the table shows which of the two the model follows.
# - **an arbitrary code** (after Wei et al. 2023, "Larger language models do in-context learning
#   differently", whose labels are unrelated to the task): every word gets an unrelated noun, drawn at
#   random for each set (`hot -> lamp`), and the query word's own pair is one of the four
#   demonstrations, at a random position. The right answer is that noun: no knowledge of the word and
#   no copy or edit of it can produce it — only the pair in the prompt. Its control is the same
#   prompt without the query's pair (the set's four code pairs): the answer is then not determined by
#   anything, so what the first prompt gains over it is read from the pair. This tests whether the
#   model reads a word's mapping from the demonstrations against what it knows about the word (it
#   still knows the word's antonym); it does not test whether the model *generalises* a new rule to
#   words it was not shown.
# - **the same four pairs in other orders**: three orders per set, each drawn at random and moving
#   every demonstration (a *derangement*). The order carries no information about the task, so a
#   difference measures the prompt's fragility, not learning.
#
# #### Exercise 5 — an order that moves every demonstration (1 pt)
#
# A shuffle can leave a demonstration where it was (with 4 pairs, 9 of the 24 orders leave none in
# place — a *derangement*; 15 leave at least one). We want orders drawn at random and reproducible,
# among those that move every position.
#
# **Your task.** Write `derangement(n, seed)`. **The contract** (each clause is checked):
#
# - draw from **one** generator `rng = numpy.random.default_rng(seed)`: `perm = rng.permutation(n)`,
#   again and again from the same `rng`, until a draw leaves no position in place (`perm[i] != i` for
#   every `i`); return that first such draw, <!-- clause: seeded-draw --> so every position moves and
#   each of `0, ..., n - 1` appears once; <!-- clause: moves-every-position -->
# - the result is a `list` of Python `int`s; <!-- clause: list-of-ints --> `n = 0` gives `[]`
#   (nothing to move); <!-- clause: empty -->
# - `ValueError` when no such order exists (`n = 1`) or `n` is not an `int` ≥ 0 (`True`, `4.0` and
#   `-2` are not). <!-- clause: invalid-raises -->

# %% nbgrader={"grade": false, "grade_id": "ex5_derangement", "locked": false, "schema_version": 3, "solution": true, "task": false}
def derangement(n, seed):
    """A seeded random order of ``range(n)`` that leaves no position in place.

    Args:
        n: the number of positions, an ``int`` >= 0 other than 1.
        seed: the seed of ``numpy.random.default_rng``.

    Returns:
        A ``list`` of Python ints: the first ``rng.permutation(n)`` drawn from
        ``rng = numpy.random.default_rng(seed)`` (one generator, drawn again and again) with
        ``perm[i] != i`` for every ``i``. ``[]`` for ``n = 0``.

    Raises:
        ValueError: if ``n`` is not an ``int`` >= 0, or ``n = 1`` (no such order exists).
    """
    ### BEGIN SOLUTION
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be an int >= 0, got {n!r}")
    if n == 1:
        raise ValueError("a single position cannot move: no derangement of 1 element exists")
    rng = np.random.default_rng(seed)
    while True:
        perm = rng.permutation(n)
        if not np.any(perm == np.arange(n)):
            return [int(i) for i in perm]
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex5_derangement", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
from course_utils.grading import check_close, check_equal, check_true, passed

check_equal("derangement(5, 3) (the first three draws, [4, 2, 1, 3, 0], [3, 0, 2, 1, 4] and [0, 1, 4, 2, 3], "
            "leave 1, 2 and 2 positions in place: the fourth is the first to move every position)",
            derangement(5, 3), [4, 3, 0, 1, 2])
check_equal("derangement(4, 1) (the first two draws, [0, 1, 2, 3] and [3, 0, 2, 1], leave 4 and 1 positions in place: "
            "the third is the first to move every position)", derangement(4, 1), [3, 0, 1, 2])
check_true(all(p != i for p, i in zip(derangement(6, 11), range(6))), "derangement(6, 11) must move every position.")
passed()
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import outcome, record
record("module of derangement (it must be defined in this notebook)", derangement.__module__)  # clause: defined-here
_der_cases = [(2, 0), (2, 5), (3, 0), (3, 2), (4, 0), (4, 7), (5, 1), (6, 0), (7, 42), (9, 3), (12, 2026)]
for _n, _s in _der_cases:
    record(f"derangement({_n}, {_s})", derangement(_n, _s))  # clause: seeded-draw, list-of-ints
_moves = []
for _s in range(40):
    _p = derangement(5, _s)
    _moves.append(sorted(_p) == list(range(5)) and all(int(_p[i]) != i for i in range(5)))
record("derangement(5, seed) for seeds 0-39: every position moves, each index once", _moves)  # clause: moves-every-position
record("derangement(0, 3) (nothing to move)", derangement(0, 3))  # clause: empty
_der_bad = [(1, 0), (-2, 0), (4.0, 0), (True, 0)]
for _n, _s in _der_bad:
    record(f"derangement({_n!r}, {_s})", outcome(derangement, _n, _s))  # clause: invalid-raises
### BEGIN REFERENCE
from course_utils.grading import expect


def _ref_derangement(n, seed):
    rng = np.random.default_rng(seed)
    while True:
        p = rng.permutation(n).tolist()
        if all(p[i] != i for i in range(n)):
            return p


for _n, _s in _der_cases:
    expect(f"derangement({_n}, {_s})", _ref_derangement(_n, _s))
expect("derangement(5, seed) for seeds 0-39: every position moves, each index once", [True] * 40)
expect("derangement(0, 3) (nothing to move)", [])
for _n, _s in _der_bad:
    expect(f"derangement({_n!r}, {_s})", "raises ValueError")
### END REFERENCE
### END HIDDEN TESTS

# %% [markdown]
# #### Exercise 6 — the control demonstrations (2 pts)
#
# **Your task.** Write `control_demos(demos, condition, seed=0, code=None)`, which turns a
# demonstration set into the demonstrations of one condition (the instructions are added by the
# notebook). `demos` is a sequence of `(input, output)` pairs (tuples or lists), possibly
# empty. <!-- clause: any-pairs --> The contract (each clause is checked):
#
# - `condition="true"`: the pairs as given, in the same order; <!-- clause: true-pairs -->
# - `condition="wrong pairs"`: the same inputs in the same order, each with the output of the
#   **next** demonstration, the last input with the first output (a rotation by one: with a single
#   demonstration the pair stays as it is); <!-- clause: wrong-pairs -->
# - `condition="permuted"`: the same pairs in the order of your `derangement(len(demos), seed)`:
#   position `i` of the result holds demonstration `perm[i]` (so a single demonstration raises
#   `ValueError`, as `derangement(1, seed)` does, and no demonstration gives `[]`); <!-- clause: permuted -->
# - `condition="same word"`: each input `x` paired with itself, `(x, x)` — the pairs that contradict
#   an instruction asking for the opposite; <!-- clause: same-word -->
# - `condition="code"`: each input `x` paired with `code[x]` (`code` is a dict; the pair's own output
#   is dropped); <!-- clause: code --> an input that `code` does not map raises `KeyError`; <!-- clause: code-missing-raises -->
# - the result is always a **new** `list` <!-- clause: new-list --> of `(input, output)` **tuples**
#   (also when the pairs came as lists, and for `"true"`); <!-- clause: tuples --> `demos` is not
#   modified; <!-- clause: unchanged-input -->
# - any other `condition` (including another spelling, such as `"Wrong pairs"`) raises `ValueError`. <!-- clause: unknown-condition-raises -->

# %% nbgrader={"grade": false, "grade_id": "ex6_controls", "locked": false, "schema_version": 3, "solution": true, "task": false}
CONDITIONS = ("true", "wrong pairs", "permuted", "same word", "code")


def control_demos(demos, condition, seed=0, code=None):
    """The demonstrations of one control condition.

    Args:
        demos: a sequence of ``(input, output)`` pairs (tuples or lists), possibly empty.
        condition: ``"true"`` (the pairs as given), ``"wrong pairs"`` (the same inputs in order,
            each with the output of the next pair, the last with the first's), ``"permuted"``
            (position ``i`` holds pair ``derangement(len(demos), seed)[i]``), ``"same word"``
            (each input ``x`` with ``x``) or ``"code"`` (each input ``x`` with ``code[x]``).
        seed: the seed of the ``"permuted"`` order.
        code: a dict from inputs to outputs, for ``"code"``.

    Returns:
        A new ``list`` of ``(input, output)`` tuples. ``demos`` is not modified.

    Raises:
        ValueError: if ``condition`` is not one of the five names above; for ``"permuted"``,
            whatever ``derangement`` raises (a single demonstration cannot move).
        KeyError: for ``"code"``, if an input is not a key of ``code``.
    """
    ### BEGIN SOLUTION
    if condition not in CONDITIONS:
        raise ValueError(f"condition must be one of {CONDITIONS}, got {condition!r}")
    pairs = [tuple(pair) for pair in demos]
    if condition == "wrong pairs":
        return [(x, pairs[(i + 1) % len(pairs)][1]) for i, (x, _) in enumerate(pairs)]
    if condition == "permuted":
        return [pairs[j] for j in derangement(len(pairs), seed)]
    if condition == "same word":
        return [(x, x) for x, _ in pairs]
    if condition == "code":
        return [(x, code[x]) for x, _ in pairs]
    return pairs
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex6_controls", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from course_utils.grading import check_close, check_equal, check_true, passed

_demos = [("hot", "cold"), ("big", "small"), ("fast", "slow")]
check_equal("control_demos(hot/big/fast, 'true')", control_demos(_demos, "true"), _demos)
check_equal("control_demos(hot/big/fast, 'wrong pairs') (each input takes the NEXT output, the last the first)",
            control_demos(_demos, "wrong pairs"), [("hot", "small"), ("big", "slow"), ("fast", "cold")])
check_equal("control_demos(hot/big/fast, 'same word')", control_demos(_demos, "same word"),
            [("hot", "hot"), ("big", "big"), ("fast", "fast")])
check_equal("control_demos(hot/big/fast, 'code', code=a dict: hot -> lamp, big -> river, fast -> chair)",
            control_demos(_demos, "code", code={"hot": "lamp", "big": "river", "fast": "chair"}),
            [("hot", "lamp"), ("big", "river"), ("fast", "chair")])
_d4 = [("up", "down"), ("in", "out"), ("old", "new"), ("win", "lose")]
check_equal("control_demos(up/in/old/win, 'permuted', seed=1) (position i holds pair derangement(4, 1)[i])",
            control_demos(_d4, "permuted", seed=1), [_d4[j] for j in derangement(4, 1)])
passed()
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import outcome, record
record("module of control_demos (it must be defined in this notebook)", control_demos.__module__)  # clause: defined-here
# control_demos is graded on its own: "permuted" calls a right derangement here, whatever exercise 5 returns
_own_derangement = derangement


def derangement(n, seed):
    if isinstance(n, bool) or not isinstance(n, int) or n < 0 or n == 1:
        raise ValueError(f"no derangement of {n!r} positions")
    _rng = np.random.default_rng(seed)
    while True:
        _p = _rng.permutation(n)
        if not np.any(_p == np.arange(n)):
            return [int(i) for i in _p]


_d5 = [["up", "down"], ["in", "out"], ["old", "new"], ["win", "lose"], ["open", "shut"]]
_code5 = {"up": "lamp", "in": "river", "old": "chair", "win": "apple", "open": "window", "a": "x1", "c": "x2",
          "x": "pen", "y": "cup", "z": "box", "p": "key", "r": "map"}
for _cond in ["true", "wrong pairs", "permuted", "same word", "code"]:
    # clause: true-pairs, wrong-pairs, permuted, same-word, code, any-pairs, tuples
    record(f"control_demos(five pairs given as lists, {_cond!r}, seed=4, code=...) (a list of tuples)",
           control_demos(_d5, _cond, seed=4, code=_code5))
    # clause: true-pairs, wrong-pairs, permuted, same-word, code
    record(f"control_demos([('a', 'b'), ('c', 'd')], {_cond!r}, code=...) (two demonstrations)",
           control_demos([("a", "b"), ("c", "d")], _cond, code=_code5))
    # clause: any-pairs, true-pairs, wrong-pairs, permuted, same-word, code
    record(f"control_demos(a tuple of three pairs, {_cond!r}, seed=9, code=...)",
           control_demos((("x", "1"), ("y", "2"), ("z", "3")), _cond, seed=9, code=_code5))
    if _cond != "permuted":
        # clause: any-pairs, true-pairs, wrong-pairs, same-word, code
        record(f"control_demos([('a', 'b')], {_cond!r}, code=...) (a single demonstration)",
               control_demos([("a", "b")], _cond, code=_code5))
        record(f"control_demos([], {_cond!r}) (no demonstration)", control_demos([], _cond))
    _mine = [("p", "q"), ("r", "s")]
    _out = control_demos(_mine, _cond, code=_code5)
    if isinstance(_out, list):
        _out.append(("extra", "pair"))
    # clause: new-list, unchanged-input
    record(f"demos after appending to the list control_demos(demos, {_cond!r}) returned (a new list, demos not modified)",
           _mine)
# clause: permuted
for _s in [0, 1, 2, 3, 5, 8]:
    record(f"control_demos(five pairs, 'permuted', seed={_s})", control_demos(_d5, "permuted", seed=_s))
record("control_demos([('a', 'b')], 'permuted') (one demonstration cannot move)",
       outcome(control_demos, [("a", "b")], "permuted"))
record("control_demos([], 'permuted') (no demonstration)", control_demos([], "permuted"))
# clause: code
record("control_demos(hot/big/fast, 'code', code=a dict with extra keys)",
       control_demos(_demos, "code", code={"fast": "x", "hot": "y", "big": "z", "cold": "w"}))
# clause: code-missing-raises
record("control_demos(hot/big/fast, 'code', code={'hot': 'lamp', 'big': 'river'}) ('fast' is not mapped)",
       outcome(control_demos, _demos, "code", code={"hot": "lamp", "big": "river"}))
record("hot/big/fast after all these calls (not modified)", _demos)  # clause: unchanged-input
for _bad in ["wrong", "Wrong pairs", "shuffled", "", "reversed order", "made-up", "Permuted"]:
    # clause: unknown-condition-raises
    record(f"control_demos(hot/big/fast, {_bad!r}) (not one of the five conditions)", outcome(control_demos, _demos, _bad))
derangement = _own_derangement
### BEGIN REFERENCE
from course_utils.grading import expect

# _ref_derangement comes from exercise 5's reference block: reference blocks never run in a submission, only in
# the instructor's notebook (one kernel, in order), where any failing test cell rejects the whole reference run
_t5 = [tuple(p) for p in _d5]
_want5 = {"true": _t5, "wrong pairs": [(x, _t5[(i + 1) % 5][1]) for i, (x, _) in enumerate(_t5)],
          "permuted": [_t5[j] for j in _ref_derangement(5, 4)], "same word": [(x, x) for x, _ in _t5],
          "code": [(x, _code5[x]) for x, _ in _t5]}
_want2 = {"true": [("a", "b"), ("c", "d")], "wrong pairs": [("a", "d"), ("c", "b")],
          "permuted": [("c", "d"), ("a", "b")], "same word": [("a", "a"), ("c", "c")], "code": [("a", "x1"), ("c", "x2")]}
_t3 = [("x", "1"), ("y", "2"), ("z", "3")]
_want3 = {"true": _t3, "wrong pairs": [("x", "2"), ("y", "3"), ("z", "1")], "permuted": [_t3[j] for j in _ref_derangement(3, 9)],
          "same word": [("x", "x"), ("y", "y"), ("z", "z")], "code": [("x", "pen"), ("y", "cup"), ("z", "box")]}
_want1 = {"true": [("a", "b")], "wrong pairs": [("a", "b")], "same word": [("a", "a")], "code": [("a", "x1")]}
for _cond in ["true", "wrong pairs", "permuted", "same word", "code"]:
    expect(f"control_demos(five pairs given as lists, {_cond!r}, seed=4, code=...) (a list of tuples)", _want5[_cond])
    expect(f"control_demos([('a', 'b'), ('c', 'd')], {_cond!r}, code=...) (two demonstrations)", _want2[_cond])
    expect(f"control_demos(a tuple of three pairs, {_cond!r}, seed=9, code=...)", _want3[_cond])
    if _cond != "permuted":
        expect(f"control_demos([('a', 'b')], {_cond!r}, code=...) (a single demonstration)", _want1[_cond])
        expect(f"control_demos([], {_cond!r}) (no demonstration)", [])
    expect(f"demos after appending to the list control_demos(demos, {_cond!r}) returned (a new list, demos not modified)",
           [("p", "q"), ("r", "s")])
for _s in [0, 1, 2, 3, 5, 8]:
    expect(f"control_demos(five pairs, 'permuted', seed={_s})", [_t5[j] for j in _ref_derangement(5, _s)])
expect("control_demos([('a', 'b')], 'permuted') (one demonstration cannot move)", "raises ValueError")
expect("control_demos([], 'permuted') (no demonstration)", [])
expect("control_demos(hot/big/fast, 'code', code=a dict with extra keys)", [("hot", "y"), ("big", "z"), ("fast", "x")])
expect("control_demos(hot/big/fast, 'code', code={'hot': 'lamp', 'big': 'river'}) ('fast' is not mapped)", "raises KeyError")
expect("hot/big/fast after all these calls (not modified)", [("hot", "cold"), ("big", "small"), ("fast", "slow")])
for _bad in ["wrong", "Wrong pairs", "shuffled", "", "reversed order", "made-up", "Permuted"]:
    expect(f"control_demos(hot/big/fast, {_bad!r}) (not one of the five conditions)", "raises ValueError")
### END REFERENCE
### END HIDDEN TESTS

# %% [markdown]
# ### 9.8 Task recognition or task learning? The controls, paired on the same words
#
# Protocol, fixed before the run: k = 4 demonstrations (the first four of each set of section 9.6,
# the same five sets in full mode, set 0 in CI mode), the same 40 evaluation words, raw text, greedy,
# 3 new tokens, the answer read as in section 9.6; your `control_demos` builds every demonstration list below.
#
# - **Instructions**, fixed in advance, each on the line before the pairs (or before the bare
#   `word ->` line when there is no pair): `Write the opposite of each word.`, `Antonyms (opposites):`
#   and `Repeat each word exactly.`
# - **Orders**: for set s, the first three *different* orders `derangement(4, seed)` for seeds
#   `100 * s`, `100 * s + 1`, … (three seeded draws may coincide: a repeated order is skipped).
# - **Code**: 60 common nouns (none an antonym of the file); for set s, a seeded random one-to-one
#   code from the 60 words of `antonyms.tsv` to the nouns, and for each evaluation word a seeded
#   random position (1 to 4) at which its own pair replaces that demonstration of the set.
#
# Each answer is scored against a **target**: the accepted antonyms (`antonym`), the query word itself
# (`same word`) or the query word's code noun (`code`). Each test compares a condition with a
# reference on the same words and the same target: McNemar's exact test per set, and, averaging the
# sets word by word, the paired t interval of the accuracy difference and its p-value. The twelve
# comparisons below form one family: their p-values are adjusted with Holm's method
# (`course_utils.stats.holm`), and only an adjusted p below 0.05 counts.

# %% nbgrader={"grade": false, "grade_id": "icl_controls", "locked": true, "schema_version": 3, "solution": false, "task": false}
from course_utils.stats import holm

CONTROL_K, N_ORDERS = 4, 3
OPPOSITE, ANTONYMS, REPEAT = "Write the opposite of each word.\n", "Antonyms (opposites):\n", "Repeat each word exactly.\n"
NOUNS = ("lamp river chair apple window pencil garden bottle candle mirror basket button carpet castle cloud coffee cookie"
         " desk doctor engine farmer feather forest garlic guitar hammer island jacket kettle kitchen ladder lemon letter"
         " monkey mountain needle orange pocket potato rabbit ribbon saddle salad shoe spoon stone sugar tiger tomato towel"
         " tractor turtle violin wallet wagon whale wheel wire wool zebra").split()
assert len(set(NOUNS)) == len(ANT_ROWS) and not set(NOUNS) & {w for row in ANT_ROWS for w in [row[0], *row[1]]}
CTRL_ANSWERS, CTRL_ORDERS, CODE, CODE_POS = {}, {}, {}, {}


def score(answers, target, s):
    """Right/wrong per evaluation word against a target: 'antonym', 'same word' or 'code' (set s's code)."""
    if target == "antonym":
        return [a in ok for a, (_, ok) in zip(answers, ANT_TEST)]
    if target == "same word":
        return [a == w for a, (w, _) in zip(answers, ANT_TEST)]
    return [a == CODE[s][w] for a, (w, _) in zip(answers, ANT_TEST)]


if ICL_RIGHT:
    for name, head in [("instruction 'opposite'", OPPOSITE), ("instruction 'antonyms'", ANTONYMS)]:
        answers = antonym_answers([head + antonym_prompt([], w) for w, _ in ANT_TEST])   # the same for every set
        CTRL_ANSWERS[name] = {s: answers for s in ICL_SEEDS}
    for s in tqdm(ICL_SEEDS, desc="control conditions, per set"):
        demos = ICL_DEMOS[s][:CONTROL_K]
        orders, seed = [], 100 * s
        while len(orders) < N_ORDERS:
            order = derangement(CONTROL_K, seed)
            if order not in orders:
                orders.append(order)
                CTRL_ORDERS[(s, len(orders))] = (seed, order)
            seed += 1
        rng = np.random.default_rng(1000 + s)
        CODE[s] = dict(zip([row[0] for row in ANT_ROWS], rng.permutation(NOUNS).tolist()))
        CODE_POS[s] = rng.integers(0, CONTROL_K, size=len(ANT_TEST)).tolist()
        prompts = {"4-shot": None,
                   "wrong pairs": [antonym_prompt(control_demos(demos, "wrong pairs"), w) for w, _ in ANT_TEST],
                   "'opposite' + true pairs": [OPPOSITE + antonym_prompt(demos, w) for w, _ in ANT_TEST],
                   "'opposite' + same-word pairs": [OPPOSITE + antonym_prompt(control_demos(demos, "same word"), w)
                                                    for w, _ in ANT_TEST],
                   "'repeat' + true pairs": [REPEAT + antonym_prompt(demos, w) for w, _ in ANT_TEST],
                   "code, query's pair shown": [antonym_prompt(control_demos(demos[:j] + [(w, "")] + demos[j + 1:], "code",
                                                                             code=CODE[s]), w)
                                                for (w, _), j in zip(ANT_TEST, CODE_POS[s])],
                   "code, query's pair not shown": [antonym_prompt(control_demos(demos, "code", code=CODE[s]), w)
                                                    for w, _ in ANT_TEST]}
        for o in range(1, N_ORDERS + 1):
            prompts[f"order {o}"] = [antonym_prompt(control_demos(demos, "permuted", seed=CTRL_ORDERS[(s, o)][0]), w)
                                     for w, _ in ANT_TEST]
        for name, ps in prompts.items():
            CTRL_ANSWERS.setdefault(name, {})[s] = ICL_ANSWERS[(s, CONTROL_K)] if ps is None else antonym_answers(ps)

    def right(name, target):
        return {s: score(CTRL_ANSWERS[name][s], target, s) for s in ICL_SEEDS}

    print(f"model in the banner, {len(ANT_TEST)} evaluation words, k = {CONTROL_K} unless no demonstration;"
          f" accuracy per set {ICL_SEEDS}, then the mean over the sets")
    print("orders (seed: order) per set:", "; ".join(f"set {s}: " + ", ".join(
        f"{CTRL_ORDERS[(s, o)][0]}: {CTRL_ORDERS[(s, o)][1]}" for o in range(1, N_ORDERS + 1)) for s in ICL_SEEDS))
    print(f"{'condition':30s} {'antonym':>38s} {'same word':>38s}")
    for name in ["4-shot", "instruction 'opposite'", "instruction 'antonyms'", "wrong pairs"] \
            + [f"order {o}" for o in range(1, N_ORDERS + 1)] \
            + ["'opposite' + true pairs", "'opposite' + same-word pairs", "'repeat' + true pairs"]:
        cells = []
        for target in ["antonym", "same word"]:
            r = right(name, target)
            cells.append((" ".join(f"{np.mean(r[s]):.3f}" for s in ICL_SEEDS)
                          + f" | {np.mean([np.mean(r[s]) for s in ICL_SEEDS]):.3f}").rjust(38))
        print(f"{name:30s} " + " ".join(cells))
    print(f"{'condition':30s} {'code':>38s} {'antonym':>38s} {'same word':>38s}")
    for name in ["code, query's pair shown", "code, query's pair not shown"]:
        cells = []
        for target in ["code", "antonym", "same word"]:
            r = right(name, target)
            cells.append((" ".join(f"{np.mean(r[s]):.3f}" for s in ICL_SEEDS)
                          + f" | {np.mean([np.mean(r[s]) for s in ICL_SEEDS]):.3f}").rjust(38))
        print(f"{name:30s} " + " ".join(cells))
    others = [sum(a in {CODE[s][x] for x, _ in ICL_DEMOS[s][:CONTROL_K]} - {CODE[s][w]}
                  for a, (w, _) in zip(CTRL_ANSWERS["code, query's pair shown"][s], ANT_TEST)) for s in ICL_SEEDS]
    print(f"code, query's pair shown: answers that are another demonstration's noun, per set: {others} of {len(ANT_TEST)}")
    shown = right("code, query's pair shown", "code")
    print("code, query's pair shown, by the position of the query's pair (all sets): " + ", ".join(
        f"position {j + 1}: {sum(shown[s][i] for s in ICL_SEEDS for i in range(len(ANT_TEST)) if CODE_POS[s][i] == j)}/"
        f"{sum(CODE_POS[s][i] == j for s in ICL_SEEDS for i in range(len(ANT_TEST)))}" for j in range(CONTROL_K)))
    for name in ["instruction 'opposite'", "wrong pairs", "'opposite' + same-word pairs", "'repeat' + true pairs",
                 "code, query's pair shown"]:
        print(f"set {ICL_SEEDS[0]}, {name}, first 8 answers:", CTRL_ANSWERS[name][ICL_SEEDS[0]][:8])
    print(f"set {ICL_SEEDS[0]}, code of the first 8 words:", [CODE[ICL_SEEDS[0]][w] for w, _ in ANT_TEST[:8]])

    FAMILY = [("instruction 'opposite'", "4-shot", "antonym"), ("instruction 'antonyms'", "4-shot", "antonym"),
              ("wrong pairs", "4-shot", "antonym")] \
        + [(f"order {o}", "4-shot", "antonym") for o in range(1, N_ORDERS + 1)] \
        + [("'opposite' + true pairs", "4-shot", "antonym"),
           ("'opposite' + same-word pairs", "'opposite' + true pairs", "antonym"),
           ("'opposite' + same-word pairs", "'opposite' + true pairs", "same word"),
           ("'repeat' + true pairs", "4-shot", "antonym"),
           ("'repeat' + true pairs", "4-shot", "same word"),
           ("code, query's pair shown", "code, query's pair not shown", "code")]
    rows = []
    for name, ref, target in FAMILY:
        a, b = right(name, target), right(ref, target)
        per_a, per_b = np.mean([a[s] for s in ICL_SEEDS], axis=0), np.mean([b[s] for s in ICL_SEEDS], axis=0)
        rows.append((name, ref, target, per_a.mean(), per_b.mean(), paired_t(per_a, per_b),
                     [mcnemar_exact(a[s], b[s]) for s in ICL_SEEDS]))
    adjusted = holm([r[5].pvalue if np.isfinite(r[5].pvalue) else 1.0 for r in rows])   # no word differs: p = 1
    CONTROLS = {}
    print(f"the family of {len(rows)} paired comparisons (A - B, mean over the sets, per word), Holm-adjusted:")
    for (name, ref, target, ma, mb, d, mc), p_adj in zip(rows, adjusted):
        CONTROLS[(name, ref, target)] = (ma, mb, d, p_adj)
        print(f"{name:29s} - {ref:29s} [{target}]: {ma:.3f} - {mb:.3f} = {d.diff:+.3f} [95% paired t {d.low:+.3f},"
              f" {d.high:+.3f}], p = {d.pvalue:.2g}, Holm p = {p_adj:.2g} | McNemar per set (b, c): "
              + " ".join(f"({t.b}, {t.c})" for t in mc))
else:
    print("skipped while autograding")
# %% [markdown]
# **What the stand-in shows (section 9.8).** Against the four-shot prompt with the true pairs (mean
# 0.610 over the five sets), on the same 40 words; every p below is Holm-adjusted over the twelve
# comparisons.
#
# - **The pairing matters — which both readings predict.** Mis-paired demonstrations fall to 0.130
#   (−0.480 [95 % paired t −0.584, −0.376], Holm p = 2e-10; no word gained in any set). A model that
#   only recognises "antonyms" from correct pairs fails to recognise it from wrong ones too, so this
#   drop does not tell recognition from learning.
# - **When the instruction and the pairs disagree, the model follows the pairs.** `Write the opposite
#   of each word.` with pairs that show the same word: 0.005 antonyms (against 0.580 with the true
#   pairs after the same instruction, −0.575 [−0.704, −0.446], Holm p = 4.3e-10) and 0.940 answers that
#   repeat the word (+0.800 [+0.711, +0.889], Holm p = 1.6e-19). The other way round, `Repeat each word
#   exactly.` with the true antonym pairs: 0.605 antonyms, no detectable change from four-shot
#   (−0.005 [−0.089, +0.079], Holm p = 1), and a few more repeated words (0.180 against 0.065, +0.115
#   [+0.050, +0.180], Holm p = 0.0062). Naming the task on top of the true pairs changed nothing
#   detectable either (0.580, −0.030 [−0.096, +0.036]). So the demonstrations mostly decide *which*
#   task is done; the instruction against them still shifted some answers (the +0.115 of repeated
#   words). Both demonstrated relations are ones the model already has (repeating a word is also what
#   it does with an instruction alone, 0.425 of the answers): this shows the pairs select the task; it
#   does not show that a new mapping is learned.
# - **An arbitrary code is read from its pair, for about one word in four.** With the query's own
#   `word -> noun` pair among the four demonstrations, the model answers that noun for 0.235 of the
#   words (0.100 to 0.400 per set); with the same prompt without the query's pair, 0.000 (+0.235
#   [+0.170, +0.300], Holm p = 6.2e-08). No knowledge of the word and no copy of it produces that
#   noun, so this part of the answer comes from the pair in the prompt — a mapping learned in context,
#   in the narrow sense of looking up a pair it was shown. The rest of the answers repeat the query
#   word (0.210) or give another demonstration's noun (0 to 8 of 40 per set), almost never its antonym
#   (0.005); and the lookup works almost only when the query's pair is not the first demonstration
#   (1/51 right at position 1 vs 15 or 16 of 48 to 52 at positions 2 to 4; the difference between
#   positions is not tested). Whether the model would
#   *generalise* a new rule to words it was not shown is not tested here.
# - **Three orders of the same pairs, each moving every demonstration: no difference survives Holm's
#   adjustment.** −0.020 [−0.065, +0.025], +0.040 [−0.022, +0.102] and +0.075 [+0.006, +0.144] (Holm p =
#   1, 0.79 and 0.17); together the intervals span −0.065 to +0.144, so order effects of that size on
#   the mean are compatible with these data. Single sets moved more (order 1: 7 words lost and none
#   gained in set 3, 10 gained and 1 lost in set 4); those per-set tests are not adjusted and not read
#   as effects.
#
# So, on the model in the banner, the antonym demonstrations mostly decide which task is done, against
# an instruction that names another (which still shifts some answers), and the model can take an arbitrary word's answer from its pair in
# about a quarter of the cases; none of these controls shows it learning a new *relation* from four
# pairs. Wei et al. (2023) find following labels against the model's priors only in much larger
# models.

# %% [markdown]
# ## 10. Self-consistency as the number of samples grows (Book §5.7)
#
# The samples were drawn in section 9.3 (strict few-shot, raw, temperature 1.0, top-k 50, 6 new
# tokens, seeded). Each is read by your `normalize_label`; the vote over $k$ samples is your
# `majority_vote` on the first $k$; a tie or no readable sample gives `INDETERMINADO`, which
# counts as wrong. Odd $k$ cannot tie between two labels, but unreadable samples can still make
# it tie. We compare the vote with the greedy answer and the label-scored answer of the same
# template, and test $k = 1$ against $k_{\max}$ with McNemar.

# %% nbgrader={"grade": false, "grade_id": "sweep_sc", "locked": true, "schema_version": 3, "solution": false, "task": false}
SC_ACC = {}
if RUNS:
    samples = [[normalize_label(s) for s in row] for row in RUNS[(SC_TEMPLATE, SC_FORMAT)]["samples"]]
    print(f"model in the banner, {SC_TEMPLATE} ({SC_FORMAT}), temperature 1.0, top-k 50, n = {len(EVAL)} examples,"
          f" {K_MAX} samples each; first samples of example 0: {RUNS[(SC_TEMPLATE, SC_FORMAT)]['samples'][0][:4]}")
    sc_right = {}
    for k in K_VALUES:
        votes = [majority_vote(row[:k]) for row in samples]
        sc_right[k] = [v == d["label"] for v, d in zip(votes, EVAL)]
        SC_ACC[k] = float(np.mean(sc_right[k]))
        lo, hi = wilson(sum(sc_right[k]), len(EVAL))
        readable = np.mean([s is not None for row in samples for s in row[:k]])
        print(f"k = {k:2d}: vote accuracy {SC_ACC[k]:.3f} [{lo:.3f}, {hi:.3f}] | abstained {votes.count('INDETERMINADO'):2d}"
              f" | readable samples {readable:.3f} | votes POSITIVO {votes.count('POSITIVO'):2d}")
    b, c, p = mcnemar_exact(sc_right[K_MAX], sc_right[1])
    print(f"k = {K_MAX} vs k = 1: b = {b}, c = {c}, McNemar p = {p:.4f}")
    for kind in ["greedy", "scored"]:
        r = RESULTS[(SC_TEMPLATE, SC_FORMAT)][kind]
        b, c, p = mcnemar_exact(sc_right[K_MAX], RIGHT[(SC_TEMPLATE, SC_FORMAT, kind)])
        print(f"{kind:6s} (one answer), same examples: {r['accuracy']:.3f} | k = {K_MAX} vs {kind}: b = {b}, c = {c},"
              f" p = {p:.4f}")
else:
    print("sweep skipped while autograding")

# %%
if SC_ACC:
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot(K_VALUES, [SC_ACC[k] for k in K_VALUES], "o-", label="self-consistency vote")
    ci = np.array([wilson(round(SC_ACC[k] * len(EVAL)), len(EVAL)) for k in K_VALUES])
    ax.fill_between(K_VALUES, ci[:, 0], ci[:, 1], alpha=0.2, label="95% Wilson")
    ax.axhline(RESULTS[(SC_TEMPLATE, SC_FORMAT)]["greedy"]["accuracy"], ls="--", c="C1", label="greedy (one answer)")
    ax.axhline(RESULTS[(SC_TEMPLATE, SC_FORMAT)]["scored"]["accuracy"], ls=":", c="C2", label="label-scored")
    ax.set_xlabel("number of samples k")
    ax.set_ylabel("accuracy")
    ax.set_ylim(0, 1)
    ax.set_xticks(K_VALUES)
    ax.set_title(f"Self-consistency, n = {len(EVAL)} (model in the banner)")
    ax.legend(fontsize=8)
    plt.tight_layout()
    plt.show()

# %% [markdown]
# **What the stand-in shows (section 10).** Raw text makes the samples readable: 0.917 of them at k = 1
# and 0.922 over all 15 (`NEGATIVO`, `NEGATIVE\n\nText`, `POSITIVE\n\nN`). The vote scored
# 0.583 [0.443, 0.712] with one sample, 0.625 at k = 5 and 0.542 [0.403, 0.674] at k = 15; k = 15
# against k = 1: b = 7, c = 9, p = 0.8036 — **the number of samples has no measurable effect on
# accuracy**. What it changes is the spread: the `POSITIVO` votes fall from 12 (k = 1) to 2
# (k = 15) and the abstentions from 4 to 1, i.e. the vote converges on the label the model
# prefers — the one greedy decoding and label scoring already give (both 0.500 on these
# examples; k = 15 vs either: b = 2, c = 0, p = 0.5000). That is the book's "redução de variância,
# não de aumento de viés correto" (§5.7.2), measured: voting removes the sampling noise, and with it
# the lucky right answers; it cannot remove the model's bias toward `NEGATIVO`.

# %% [markdown]
# The book's own self-consistency prompt (§5.7.1), 10 samples as in the book. The book printed
# garbage samples (`'Adunator "Initive an'`, …) and `INDETERMINADO`; with a 77 M model sampled
# at temperature 1.0 that is mostly the off-format fallback firing — not a sign of
# "multiple plausible internal trajectories" for an ambiguous text.

# %% nbgrader={"grade": false, "grade_id": "book_sc", "locked": true, "schema_version": 3, "solution": false, "task": false}
if AUTOGRADING:   # no test reads this demo: the autograder skips it
    print("skipped while autograding")
else:
    n_book = 2 if CI_MODE else 10
    book_samples = [generate_text(model, tok, prompt_sc, max_new_tokens=8, do_sample=True, temperature=1.0, top_k=50,
                                  seed=s) for s in range(n_book)]
    print("Amostras brutas:", book_samples)
    print("normalizadas:", [normalize_label(s) for s in book_samples])
    print("VOTO FINAL (self-consistency):", majority_vote([normalize_label(s) for s in book_samples]))

# %% [markdown]
# ## What this chapter leaves out
#
# This chapter covers all of Book ch. 5 (§5.1–§5.9). What it leaves out or simplifies, on purpose:
#
# * **The book's model, offline.** Without network access the chapter runs SmolLM2-135M-Instruct, a
#   decoder-only chat model, instead of FLAN-T5-small; the book's single outputs are therefore not
#   reproduced, and the labelled-set measurements replace them.
# * **§1.2.4's claim that in-context learning emerges with scale**: it would take the same prompts on
#   a family of model sizes, far beyond what a CPU chapter runs; the chapter measures in-context
#   learning on one small model only (Section 9.6).
# * **Chain-of-thought prompting** (Book §4.13) is chapter 08's Part C, not repeated here.
# * **Constrained decoding** (a grammar or a list of allowed outputs enforced during generation), the
#   strongest form of §5.6's restrictive template: the chapter scores the labels directly instead,
#   which answers the same question without a constrained-generation library.
# * **Long contexts beyond truncation.** §5.8 is treated as a hard window (what truncation drops);
#   how well a long-context model uses the middle of a long prompt is not measured, since it needs
#   long-context models and long evaluation texts.
# * **Retrieval and tools in the prompt** (Book §1.4, §9.1.2): outside the book's hands-on chapters
#   and the course's scope.

# %% [markdown] nbgrader={"grade": false, "grade_id": "written_q1_question", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## 11. Reflect (written, graded by hand)
#
# **Question (3 pts).** Using the numbers **this notebook printed** (sections 9.3–9.8 and 10; say
# which model the banner named and how many examples were evaluated):
# (a) Did few-shot beat zero-shot (label-scored), and the strict template beat the loose one?
#     Quote the accuracies with their Wilson intervals and the McNemar p-values, and say which
#     differences are real; for the planned test, say what the interval of the difference allows
#     you to conclude from a p above 0.05, and use the minimum detectable effect (power 0.8, fixed
#     in advance) only to size the next run. Then use the other columns (share of `POSITIVO`, calibrated accuracy,
#     greedy parse rate, chat vs raw) to say whether the prompt changed *which label the model
#     prefers* or *the format of its answer*, and where the echo of section 9.2 comes from.
#     Does section 9.5 support "templates reduce the effective entropy"? Which template did, by how much?
# (b) What did self-consistency do as $k$ grew, compared with one greedy answer and with the
#     label-scored answer of the same template? Relate it to the book's claim "redução de
#     variância, não de aumento de viés correto" (§5.7.2).
# (c) In the BANANA experiment, which truncation side lost the instruction, and what would you
#     do in a chat application whose history outgrows the window?
# (d) Sections 9.6–9.8: did the demonstrations change the antonym answers? Quote zero-shot and
#     four-shot accuracy with their Wilson intervals and the paired test, and say what Cochran's Q
#     says about the choice of demonstration set. Then, from the controls of section 9.8 (paired,
#     Holm-adjusted): which of them would a model that only *recognises* a task it knows pass as well
#     as one that *learns* the mapping the pairs show, and which tell the two apart? Say what the
#     wrong pairs, the instruction against the pairs, the arbitrary code and the three orders each
#     show, and what none of them shows. Why does this task show an effect of the demonstrations on
#     the model in the banner when the sentiment prompts did not?

# %% [markdown] nbgrader={"grade": true, "grade_id": "written_q1", "locked": false, "points": 3, "schema_version": 3, "solution": true, "task": false}
# **Model answer** (instructor; numbers from the committed full-mode run, n = 48, with the offline
# stand-in SmolLM2-135M-Instruct named by the banner — a student on the real FLAN-T5 or another
# stand-in quotes *their* printed numbers and is graded on the reasoning).
#
# (a) Label-scored (log-likelihood of each label after the prompt), few-shot did **not** beat
# zero-shot significantly: 0.625 [0.484, 0.748] vs 0.500 [0.364, 0.636] with the chat template
# (b = 12, c = 6, McNemar p = 0.2379), 0.500 vs 0.521 [0.383, 0.655] in raw text (p = 1.0000). Strict
# did not beat loose either: 0.500 vs 0.500 (chat), 0.583 [0.443, 0.712] vs 0.500 in raw text (b = 4,
# c = 0, p = 0.1250). No difference is significant and every interval contains 0.5: the stand-in is at
# chance, because it prefers `NEGATIVO` for nearly every review (`said POSITIVO` 0.000 in 7 of the 10
# cells), and calibration against `N/A` does not fix it (0.500, loose raw 0.583). But this is a weak
# null, read by its interval: the paired interval of few- minus zero-shot (chat), +0.125 [−0.051, +0.301], still
# allows a gain of 0.3 — it rules out a loss larger than 0.051, not a small gain. For the next run, at
# power 0.8 fixed in advance, a paired test on 48 examples detects only differences of 0.413 (SD bound 1)
# or 0.250 (this run's SD, 0.606); a gain of 0.125 would need about 192 examples or more. What the prompt
# changed is the **format**: greedy parse rate 0/48 (few-shot, chat) vs 48/48 (few-shot, raw), 3/48 vs
# 30/48 (strict). The echo comes from the chat template: the prompt becomes a user message and the
# small model repeats it — not even faithfully: section 9.2's answer `Este filme foi um desperdo de
# tempo.` turns the review's `desperdício` into the non-word `desperdo` — while as raw text the
# continuation of `Sentimento:` is `NEGATIVO`. Entropy: the few-shot examples in raw text cut the
# next-token entropy at the label by −3.253 [−3.352, −3.153] nats and raise the label mass from 0.156
# to 0.903; the strict wording changes it by only −0.084 nats in raw text and *raises* it by +0.310
# with the chat template; the choice between the two labels stays near 0.696–0.800 bits. So
# "templates reduce the effective entropy" holds for the examples and the format, not for the
# decision and not for the restrictive instruction, on this model.
#
# (b) Strict few-shot, raw, temperature 1.0: 0.917 of the samples were readable; the vote scored
# 0.583 [0.443, 0.712] at k = 1, 0.625 at k = 5, 0.542 [0.403, 0.674] at k = 15 (k = 15 vs 1: p =
# 0.8036, no effect); greedy and label-scored both scored 0.500 on the same examples. As k grew the
# `POSITIVO` votes fell from 12 to 2 and the abstentions from 4 to 1: the vote converged on the
# model's preferred label. Voting reduces the variance of the answer (the sampling noise, including
# its lucky right answers) and cannot remove the systematic bias toward `NEGATIVO`: "redução de
# variância, não de aumento de viés correto". The book's own mixed review gave 2 readable samples out
# of 10 with the chat template (section 10, last cell), both `NEGATIVO`: a vote of 2, no consensus.
#
# (c) `side="left"` (keep the tail) dropped the instruction: `instruction kept: False`, the
# question survived; `side="right"` kept the instruction and lost the question; head + tail kept
# both. In a chat, drop or summarise the *oldest* turns (left truncation of the history) but pin
# the system instruction at the head and re-state critical constraints near the end.
#
# (d) Yes, by a large margin. The bare `word ->` prompt got 0/40 antonyms without demonstrations
# (0.000 [0.000, 0.088]) and 0.700 [0.546, 0.819] with four (set 0; McNemar: 28 words gained, none
# lost, p < 1e-6); over the five demonstration sets, four-shot minus zero-shot is +0.610 [+0.487,
# +0.733] per word, and eight demonstrations reach 0.805 on average (+0.195 [+0.105, +0.285] over
# four). The choice of set: at k = 4 the sets range from 0.525 to 0.700, but Cochran's Q finds no
# difference between them (p = 0.216); at k = 8 they differ (p = 0.022). With a single demonstration
# the model often copies its answer (12, 25, 31, 27 and 2 of 40 per set; accuracy 0.135). The controls (paired on the same words, Holm over
# twelve comparisons): **wrong pairs** fall to 0.130 (−0.480 [−0.584, −0.376]) — the pairing matters,
# but a model that only recognises the task from correct pairs predicts this drop too. The
# **instruction against the pairs** tells more: `Write the opposite of each word.` with same-word
# pairs gives 0.005 antonyms and 0.940 repeated words (antonyms −0.575 [−0.704, −0.446] against the
# same instruction with the true pairs), and `Repeat each word exactly.` with the true pairs still
# gives 0.605 antonyms (−0.005 [−0.089, +0.079] against four-shot, no detectable change), though more
# repeated words (+0.115 [+0.050, +0.180], Holm p = 0.0062): the pairs mostly decide which task is
# done, and the instruction still shifts some answers — but both relations are ones the model already
# knows. The **arbitrary
# code** is the only control whose answer nothing but the pairs can give: 0.235 of the words get their
# noun when their own pair is among the demonstrations, 0.000 when it is not (+0.235 [+0.170, +0.300]),
# almost all of them at positions 2 to 4 — a lookup of a shown pair, learned in context, for about a
# quarter of the words; generalising a new rule to words not shown is not tested. The **three
# orders** (each moving every pair) differ from the original order by −0.020, +0.040 and +0.075, none
# of them significant after Holm's adjustment (the intervals span −0.065 to +0.144). The instruction alone gets 0.350 or
# 0.200. The antonym prompt has no instruction, so the demonstrations carry the whole task, and the
# relation is one the model already knows; the sentiment prompt already states task and labels, and what the stand-in lacks
# there is the decision between the labels, which examples did not supply (they fixed the format
# instead: label mass 0.903 in raw text).

# %% [markdown]
# ## 12. In practice (Book §5.9) — what the measurements add
#
# - Fix the model and record which one you loaded (the banner): prompting results are
#   model-specific; the book, its companion and this notebook disagree on the same greedy prompt.
# - Compare prompts **over a labelled set**, with an interval, and pair the comparison (McNemar on
#   the same examples): a single sentence proves nothing, and two overlapping intervals hide how
#   many examples actually changed.
# - Separate *which label the model prefers* (score each label's log-likelihood, as evaluation
#   harnesses do) from *whether it writes it in your format* (free generation + a written-down
#   parser, `normalize_label`; unreadable answers count as errors). On the stand-in the prompt
#   changed the second, not the first.
# - For a chat model, decide between the chat template and raw completion on purpose: the echo
#   came from the chat template.
# - Demonstrations teach most where they *define* the task: on the stand-in, antonyms from a bare
#   `x ->` prompt went from 0/40 to 0.610 with four demonstrations (mean over five sets) and 0.805
#   with eight, while the sentiment examples moved no label preference measurably. Check *what* they
#   carry with controls on the same items, chosen so that recognising a known task and learning the
#   shown mapping predict different results: mis-paired demonstrations fell to 0.130 (both readings
#   predict that); pairs that contradicted the instruction won over it (0.940 of the answers followed
#   the pairs); an arbitrary word → noun code was read from its pair for 0.235 of the words. Use several
#   demonstration sets and several orders, and read a non-significant test with its interval
#   ("no effect found" is not "no effect"); use the minimum detectable effect, at a power fixed in
#   advance, only to size the next run.
# - Self-consistency needs sampling, a seed protocol, readable samples and an abstention rule; it
#   reduces variance and cannot fix a systematic error.
# - The context window is a hard limit: truncate deliberately, and choose the side.
