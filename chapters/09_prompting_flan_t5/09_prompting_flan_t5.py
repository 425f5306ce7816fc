# %% [markdown]
# # Chapter 9 — Prompting an instruction-tuned model: templates, few-shot, self-consistency, context
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/llm-course/llm-course/blob/main/notebooks/09_prompting_flan_t5/09_prompting_flan_t5.ipynb)
#
# **Goal.** Book ch. 5 changes *no weight*: "alteramos apenas o **contexto textual**". Every
# difference in this chapter comes from the prompt, the template, the randomness of decoding
# (when we switch it on) or the finite context window. The book looks at one sentence per idea;
# here we build the machinery to **measure** each idea on a labelled set of 48 reviews
# (24 Portuguese, 24 English, `assets/09_prompting_flan_t5/sentiment.jsonl`).
#
# **Book sections.** Book §5.3 (the model), §5.4 (deterministic vs sampled generation), §5.5
# (zero-shot vs few-shot), §5.6 (loose vs restrictive template), §5.7 (self-consistency), §5.8
# (the context window), §5.9 (in practice).
#
# **You will implement (graded).**
# 1. `build_few_shot_prompt` — the book's `Texto: … / Sentimento: …` prompt with any number of examples (2 pts)
# 2. `normalize_label` — model answer → `POSITIVO` / `NEGATIVO` / `None` (accents, case, punctuation, extra words, English) (2 pts)
# 3. `majority_vote` — self-consistency vote that abstains (`INDETERMINADO`) on ties (2 pts)
# 4. `evaluate_accuracy` — an accuracy harness around any generator (2 pts)
# 5. `truncate_tokens` — cut a token sequence to a budget, from the left or from the right (2 pts)
#
# plus one written question (3 pts) that must cite the accuracies this notebook measured.
#
# Every graded function is tested with a **scripted fake generator** (a Python function that
# returns canned answers), so no test depends on a model. The model is only used to measure.

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
import json
import math
import os
import re
import unicodedata
from collections import Counter

import matplotlib.pyplot as plt
import numpy as np
import torch
from tqdm.auto import tqdm
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

# %% nbgrader={"grade": false, "grade_id": "demo_greedy", "locked": true, "schema_version": 3, "solution": false, "task": false}
DEMO_PROMPTS = dict(list(BOOK_PROMPTS.items())[:1]) if AUTOGRADING else BOOK_PROMPTS   # autograding: keep it short
for name, p in DEMO_PROMPTS.items():
    a1 = generate_text(model, tok, p, max_new_tokens=16)
    a2 = generate_text(model, tok, p, max_new_tokens=16)
    print(f"{name:18s} greedy: {a1!r:50s} same again: {a1 == a2}")

samples_demo = [generate_text(model, tok, prompt_zero, max_new_tokens=8, do_sample=True, temperature=1.0,
                              top_k=50, seed=s) for s in range(2 if AUTOGRADING else 5)]
print(f"\nzero-shot, sampled (temperature 1.0, top_k 50), seeds 0-{len(samples_demo) - 1}:")
for s, a in enumerate(samples_demo):
    print(f"  seed {s}: {a!r}")
print("same seed again gives the same sample:",
      generate_text(model, tok, prompt_zero, max_new_tokens=8, do_sample=True, temperature=1.0, top_k=50,
                    seed=0) == samples_demo[0])


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


# %% nbgrader={"grade": true, "grade_id": "test_ex1_few_shot", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from course_utils.grading import check_close, check_equal, check_true

_book_ex = [("Adorei, foi excelente e emocionante.", "POSITIVO"), ("Péssimo. Não recomendo para ninguém.", "NEGATIVO")]
_q = "Este filme foi um desperdício de tempo."
check_true(isinstance(build_few_shot_prompt(task, [], _q), str), "build_few_shot_prompt must return a str.")
check_equal("zero-shot prompt (must equal Book §5.5.1, prompt_zero)", build_few_shot_prompt(task, [], _q), prompt_zero)
check_equal("few-shot prompt with the book's two examples (Book §5.5.3, prompt_few)",
            build_few_shot_prompt(task, _book_ex, _q), prompt_few)
print("Visible tests passed.")
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import outcome, record
record("module of build_few_shot_prompt (it must be defined in this notebook)", build_few_shot_prompt.__module__)
_ex3 = [["a b", "X"], ("c", "Y"), ("d e f", "Z")]
record("build_few_shot_prompt('T', three examples, 'q?', separator='\\n---\\n')",
       build_few_shot_prompt("T", _ex3, "q?", separator="\n---\n"))
record("examples after build_few_shot_prompt (they must not be modified)", _ex3)
record("build_few_shot_prompt('Tarefa.', [('bom', 'POSITIVO')], 'ruim') (one example, default separator)",
       build_few_shot_prompt("Tarefa.", [("bom", "POSITIVO")], "ruim"))
record("build_few_shot_prompt('T', (), 'x', separator=' | ') (zero-shot)", build_few_shot_prompt("T", (), "x", separator=" | "))
record("build_few_shot_prompt('T', iter([('a', 'B')]), 'x') (examples may be any iterable of pairs)",
       build_few_shot_prompt("T", iter([("a", "B")]), "x"))
_bad_calls = [dict(task="", examples=[], query="x"), dict(task="   ", examples=[], query="x"),
              dict(task="T", examples=[], query=""), dict(task="T", examples=[], query=" \n"),
              dict(task="T", examples=[("a", "")], query="x"), dict(task="T", examples=[("", "L")], query="x"),
              dict(task="T", examples=[("a", "B", "C")], query="x"), dict(task="T", examples=[("a", " ")], query="x"),
              dict(task="T", examples=[("b", "B"), ("\t", "L")], query="x")]
for _bad in _bad_calls:
    record(f"build_few_shot_prompt(**{_bad!r})", outcome(build_few_shot_prompt, **_bad))
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
# 1. remove accents (Unicode NFKD decomposition, then drop the combining marks), upper-case;
# 2. split into words: maximal runs of the letters `A`–`Z` (punctuation and digits separate words);
# 3. map words: `POSITIVO`, `POSITIVA`, `POSITIVE` → `POSITIVO`; `NEGATIVO`, `NEGATIVA`,
#    `NEGATIVE` → `NEGATIVO`; other words are ignored (no substring matching: `POSITIVELY`
#    is not `POSITIVE`);
# 4. exactly one label found (possibly several times) → that label; none, or both → `None`.

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
from course_utils.grading import check_close, check_equal, check_true

for _ans, _want in [("NEGATIVO", "NEGATIVO"), ("Negativo.", "NEGATIVO"), ("  positivo!!", "POSITIVO"),
                    ("Sentimento: POSITIVO", "POSITIVO"), ("Negative", "NEGATIVO"),
                    ("POSITIVO or NEGATIVO.", None), ("Este filme fo", None),
                    ("NEGATIVO_2", "NEGATIVO"),    # rule 2: digits and "_" separate words too
                    ("posıtıvo", "POSITIVO")]:     # rule 1: the dotless "ı" is no accent, it stays; "ı".upper() is "I"
    check_equal(f"normalize_label({_ans!r})", normalize_label(_ans), _want)
print("Visible tests passed.")
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import outcome, record
record("module of normalize_label (it must be defined in this notebook)", normalize_label.__module__)
_answers = ["NEGATÍVO", "pósitivo", "Positíva!", "negativa", "POSITIVE.", "\tnegative\n",
            "O sentimento é negativo, sem dúvida", "positivo positivo POSITIVO", "(POSITIVO)", "label=negativo;",
            "2 NEGATIVO 3", "NEGATIVO/POSITIVO", "positive and negative", "", "   ", "POSITIVELY", "NEGATIVOS",
            "neutro", "INDETERMINADO", "Sentimento:", "ＰＯＳＩＴＩＶＯ",
            "NEGATIVO2", "1positivo", "_Positivo_", "sentimento_negativo", "POSITIVO_3", "negativo negativo",
            "NEGATIVO, negativa, NEGATIVE", "NEGATIVO NEGATIVO POSITIVO", "posıtıvo", "NEGATİVO", "positivo\u00a0!"]
for _ans in _answers:
    record(f"normalize_label({_ans!r})", normalize_label(_ans))
_bads = [None, 3, ["POSITIVO"], b"POSITIVO"]
for _bad in _bads:
    record(f"normalize_label({_bad!r}) (not a str)", outcome(normalize_label, _bad))
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
from course_utils.grading import check_close, check_equal, check_true

check_equal("majority_vote(['POSITIVO', 'NEGATIVO', 'POSITIVO'])", majority_vote(["POSITIVO", "NEGATIVO", "POSITIVO"]), "POSITIVO")
check_equal("majority_vote(['POSITIVO', 'NEGATIVO']) (a tie must abstain)", majority_vote(["POSITIVO", "NEGATIVO"]), "INDETERMINADO")
check_equal("majority_vote([None, None, None]) (no sample voted, Book §5.7.2)", majority_vote([None, None, None]), "INDETERMINADO")
print("Visible tests passed.")
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import outcome, record
record("module of majority_vote (it must be defined in this notebook)", majority_vote.__module__)
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
    record(f"majority_vote({_labels!r}{''.join(f', {k}={v!r}' for k, v in _kw.items())}) ({_what})",
           majority_vote(_labels, **_kw))
_lab = ["NEGATIVO", None, "POSITIVO", "NEGATIVO"]
majority_vote(_lab)
record("labels after majority_vote(labels) (they must not be modified)", _lab)
record("majority_vote([]) (no samples at all is a caller error)", outcome(majority_vote, []))
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
from course_utils.grading import check_close, check_equal, check_true

_canned = {"P: bom": "POSITIVO", "P: ruim": "talvez", "P: ok": "NEGATIVO"}
_res = evaluate_accuracy(lambda p: _canned[p], [{"text": "bom", "label": "POSITIVO"}, {"text": "ruim", "label": "NEGATIVO"},
                                               {"text": "ok", "label": "POSITIVO"}],
                         lambda t: "P: " + t, lambda a: a if a in ("POSITIVO", "NEGATIVO") else None)
check_close("accuracy (1 right, 1 unparsed, 1 wrong out of 3)", _res["accuracy"], 1 / 3)
check_equal("predictions", _res["predictions"], ["POSITIVO", None, "NEGATIVO"])
check_equal("n_unparsed", _res["n_unparsed"], 1)
print("Visible tests passed.")
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import outcome, record
record("module of evaluate_accuracy (it must be defined in this notebook)", evaluate_accuracy.__module__)

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
record(f"prompts passed to generate ({_case}; once per example, in order, make_prompt(text))", _gen.prompts)
record(f"predictions ({_case})", _res["predictions"])
record(f"accuracy, a float ({_case}; correct / all examples, not / parsed ones)", _acc(_res), atol=1e-9)
record(f"n ({_case})", _res["n"])
record(f"n_correct ({_case})", _res["n_correct"])
record(f"n_unparsed ({_case})", _res["n_unparsed"])
record(f"examples after evaluate_accuracy ({_case}; they must not be modified)", _ex)
_res1 = evaluate_accuracy(lambda p: "x", ({"text": "only", "label": "x", "lang": "pt"},), str, str)
record("accuracy with one example (a tuple), right", _acc(_res1), atol=1e-9)
_res0 = evaluate_accuracy(lambda p: "?", [{"text": "a", "label": "A"}] * 4, str, lambda s: None)
record("accuracy with 4 examples, all unparsed", _acc(_res0), atol=1e-9)
record("n_unparsed with 4 examples, all unparsed", _res0["n_unparsed"])
# the same text twice: generate is still called once per example (a sampled model may answer differently)
_gen2 = _Scripted(["NEGATIVO", "POSITIVO", "POSITIVO", "NEGATIVO"])
_res2 = evaluate_accuracy(_gen2, [{"text": "mesmo", "label": "POSITIVO"}, {"text": "mesmo", "label": "POSITIVO"},
                                  {"text": "outro", "label": "POSITIVO"}, {"text": "mesmo", "label": "NEGATIVO"}],
                          lambda t: t, lambda s: s)
record("prompts passed to generate (4 examples, 3 with the same text; once per example, no caching)", _gen2.prompts)
record("predictions (4 examples, 3 with the same text, answers from successive calls)", _res2["predictions"])
record("n_correct (4 examples, 3 with the same text)", _res2["n_correct"])
# a prediction that is not None and not the label: wrong, but parsed
_res3 = evaluate_accuracy(lambda p: p, [{"text": "INDETERMINADO", "label": "POSITIVO"}, {"text": "?", "label": "NEGATIVO"},
                                        {"text": "NEGATIVO", "label": "NEGATIVO"}], str,
                          lambda s: None if s == "?" else s)
record("n_unparsed when one prediction is 'INDETERMINADO' (only None counts as unparsed)", _res3["n_unparsed"])
record("n_correct when one prediction is 'INDETERMINADO'", _res3["n_correct"])
_calls = []
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
# ## 8. The context window (Book §5.8) and Exercise 5 — truncation to a token budget
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

# %% nbgrader={"grade": false, "grade_id": "window_sizes", "locked": true, "schema_version": 3, "solution": false, "task": false} tags=["nbval-check-output"]
gpt2_window = GPT2Config().n_positions          # no download: the default config is GPT-2 small's
print("Janela GPT-2 (n_positions):", gpt2_window, "| book §5.8.2: 1024")
assert gpt2_window == 1024

# %% nbgrader={"grade": false, "grade_id": "window_model", "locked": true, "schema_version": 3, "solution": false, "task": false}
print("context length of the model in the banner:",
      getattr(model.config, "max_position_embeddings", None) or getattr(model.config, "n_positions", None)
      or "none in the config (relative positions, T5)")


# %% nbgrader={"grade": false, "grade_id": "ex5_truncate", "locked": false, "schema_version": 3, "solution": true, "task": false}
def truncate_tokens(ids, budget, side="left"):
    """Cut a token sequence to at most ``budget`` tokens.

    Args:
        ids: a sequence of token ids (list, tuple or 1-D ``torch.Tensor``).
        budget: the maximum number of tokens to keep, an ``int`` >= 1.
        side: ``"left"`` drops tokens at the start (keeps the LAST ``budget`` tokens);
            ``"right"`` drops tokens at the end (keeps the FIRST ``budget`` tokens).

    Returns:
        A new ``list`` of ``min(len(ids), budget)`` ints, in the original order.
        ``ids`` is not modified.

    Raises:
        ValueError: if ``budget`` is not an int >= 1 or ``side`` is not "left" or "right".
    """
    ### BEGIN SOLUTION
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ValueError(f"budget must be an int >= 1, got {budget!r}")
    if side not in ("left", "right"):
        raise ValueError(f"side must be 'left' or 'right', got {side!r}")
    ids = [int(i) for i in ids]
    return ids[-budget:] if side == "left" else ids[:budget]
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_ex5_truncate", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from course_utils.grading import check_close, check_equal, check_true

_ids = list(range(10, 20))
check_equal("truncate_tokens(range(10, 20), 4, 'left') keeps the last 4", truncate_tokens(_ids, 4, side="left"), [16, 17, 18, 19])
check_equal("truncate_tokens(range(10, 20), 4, 'right') keeps the first 4", truncate_tokens(_ids, 4, side="right"), [10, 11, 12, 13])
print("Visible tests passed.")
### BEGIN HIDDEN TESTS
# Records only: the autograder compares them, outside this kernel, with the instructor's run (course_utils/records.py)
from course_utils.grading import outcome, record
record("module of truncate_tokens (it must be defined in this notebook)", truncate_tokens.__module__)
record("truncate_tokens([1, 2, 3, 4, 5], 2) (the default side is 'left')", truncate_tokens([1, 2, 3, 4, 5], 2))
_ids = [5, 3, 9, 1, 7, 7, 2]
for _b in [1, 3, 6, 7]:
    for _side in ["left", "right"]:
        record(f"truncate_tokens({_ids}, {_b}, side={_side!r})", truncate_tokens(_ids, _b, side=_side))
for _side in ["left", "right"]:
    _ids50 = list(_ids)
    _out = truncate_tokens(_ids50, 50, side=_side)
    record(f"truncate_tokens({_ids}, 50, side={_side!r}) (budget larger than the sequence)", _out)
    if isinstance(_out, list):
        _out.append(-1)
    record(f"ids after appending to the list truncate_tokens(ids, 50, side={_side!r}) returned "
           "(it must be a new list, not ids itself)", _ids50)
    record(f"truncate_tokens({tuple(_ids)}, 2, side={_side!r}) (a tuple)", truncate_tokens(tuple(_ids), 2, side=_side))
    record(f"truncate_tokens(torch.tensor({_ids}), 3, side={_side!r}) (a list of Python ints, also for a tensor)",
           truncate_tokens(torch.tensor(_ids), 3, side=_side))
    record(f"truncate_tokens([], 3, side={_side!r})", truncate_tokens([], 3, side=_side))
record("ids after all these calls (they must not be modified)", _ids)
# on real text: the token ids of the tokenizer in the banner
_text = "INICIO " + "bla " * 60 + "FIM"
_full = tok(_text, add_special_tokens=False)["input_ids"]
for _side in ["left", "right"]:
    record(f"truncate_tokens(ids of a {len(_full)}-token text, 17, side={_side!r}) "
           f"(the tokenizer's truncation_side={_side!r}, max_length=17)", truncate_tokens(_full, 17, side=_side))
_bad_args = [dict(budget=0), dict(budget=-3), dict(budget=2.0), dict(budget=3, side="middle"), dict(budget=3, side="LEFT")]
for _bad in _bad_args:
    record(f"truncate_tokens([1, 2, 3, 4], **{_bad!r})", outcome(truncate_tokens, [1, 2, 3, 4], **_bad))
### BEGIN REFERENCE
from course_utils.grading import expect
_ids = [5, 3, 9, 1, 7, 7, 2]
expect("truncate_tokens([1, 2, 3, 4, 5], 2) (the default side is 'left')", [4, 5])
for _b in [1, 3, 6, 7]:
    expect(f"truncate_tokens({_ids}, {_b}, side='left')", _ids[len(_ids) - _b:])
    expect(f"truncate_tokens({_ids}, {_b}, side='right')", _ids[:_b])
for _side in ["left", "right"]:
    expect(f"truncate_tokens({_ids}, 50, side={_side!r}) (budget larger than the sequence)", _ids)
    expect(f"ids after appending to the list truncate_tokens(ids, 50, side={_side!r}) returned "
           "(it must be a new list, not ids itself)", _ids)
    expect(f"truncate_tokens({tuple(_ids)}, 2, side={_side!r}) (a tuple)", _ids[-2:] if _side == "left" else _ids[:2])
    expect(f"truncate_tokens(torch.tensor({_ids}), 3, side={_side!r}) (a list of Python ints, also for a tensor)",
           _ids[-3:] if _side == "left" else _ids[:3])
    expect(f"truncate_tokens([], 3, side={_side!r})", [])
expect("ids after all these calls (they must not be modified)", [5, 3, 9, 1, 7, 7, 2])
# against the tokenizer's own truncation (truncation_side)
_old_side = tok.truncation_side
try:
    for _side in ["left", "right"]:
        tok.truncation_side = _side
        _lib = tok(_text, add_special_tokens=False, truncation=True, max_length=17)["input_ids"]
        expect(f"truncate_tokens(ids of a {len(_full)}-token text, 17, side={_side!r}) "
               f"(the tokenizer's truncation_side={_side!r}, max_length=17)", [int(i) for i in _lib])
finally:
    tok.truncation_side = _old_side
for _bad in _bad_args:
    expect(f"truncate_tokens([1, 2, 3, 4], **{_bad!r})", "raises ValueError")
### END REFERENCE
### END HIDDEN TESTS

# %% [markdown]
# ### What truncation drops: the companion's "BANANA" experiment
#
# An instruction at the head of a long prompt, 5000 filler words, a question at the tail.
# Cut to GPT-2's window the two ways, and look for the instruction and the question in what
# is left. Token counts depend on the tokenizer in the banner (GPT-2's tokenizer gives 10 063
# tokens for this prompt in the companion; yours may differ). Keeping the head **and** the
# tail — the rule of thumb of §5.8 "put an important instruction at the head and repeat it near
# the tail" — keeps both.

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
# ## 9. Measure, do not eyeball: accuracy on 48 labelled reviews
#
# One sentence per idea (the book's method) cannot tell a better prompt from luck: the book's
# run says `NEGATIVO` for the zero-shot prompt, the companion's run of the same greedy prompt
# says `POSITIVO`. We run every prompt style over the labelled set with your harness and report
# the accuracy with a 95 % **Wilson** interval (a binomial interval that behaves at 0 and 1).
#
# - **zero-shot** — Book §5.5.1 shape; **few-shot** — the book's two examples plus two English
#   ones (none of them in the labelled set);
# - **loose** — Book §5.6.1 shape `"<text>" ->`; **strict** — Book §5.6.3 ("Responda APENAS com:
#   POSITIVO ou NEGATIVO."); **strict few-shot** — both ideas together.
#
# Greedy decoding, at most 5 new tokens. Budget: full mode uses all 48 examples; CI mode a
# balanced subset of 8 (2 per language × label); while autograding the sweeps are skipped
# (the graded tests never depend on them).

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


N_PER_GROUP = 0 if AUTOGRADING else (2 if CI_MODE else 12)
EVAL = balanced_subset(DATA, N_PER_GROUP)
print("evaluation set:", len(EVAL), "examples", "(CI subset)" if CI_MODE and not AUTOGRADING else "")


def wilson(k, n, z=1.96):
    """95 % Wilson score interval of a binomial proportion k/n."""
    if n == 0:
        return (float("nan"), float("nan"))
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (centre - half, centre + half)


print("Wilson 95% interval of 24/48:", tuple(round(x, 4) for x in wilson(24, 48)))

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


# %% nbgrader={"grade": false, "grade_id": "sweep_templates", "locked": true, "schema_version": 3, "solution": false, "task": false}
def greedy(prompt):
    return generate_text(model, tok, prompt, max_new_tokens=5)


RESULTS = {}
if EVAL:
    for name, make in tqdm(TEMPLATES.items(), desc="templates"):
        RESULTS[name] = evaluate_accuracy(greedy, EVAL, make, normalize_label)
    print(f"model in the banner, greedy, n = {len(EVAL)}")
    print(f"{'template':16s} {'accuracy':>8s}  {'95% Wilson':>15s}  {'unparsed':>8s}")
    for name, r in RESULTS.items():
        lo, hi = wilson(r["n_correct"], r["n"])
        print(f"{name:16s} {r['accuracy']:8.3f}  [{lo:.3f}, {hi:.3f}]  {r['n_unparsed']:4d}/{r['n']}")
    for lang in ["pt", "en"]:
        idx = [i for i, d in enumerate(EVAL) if d["lang"] == lang]
        print(f"  {lang}: " + ", ".join(
            f"{name} {np.mean([RESULTS[name]['predictions'][i] == EVAL[i]['label'] for i in idx]):.3f}" for name in RESULTS))
else:
    print("sweep skipped while autograding")

# %%
if RESULTS:
    names = list(RESULTS)
    acc = [RESULTS[n]["accuracy"] for n in names]
    ci = np.array([wilson(RESULTS[n]["n_correct"], RESULTS[n]["n"]) for n in names])
    unparsed = [RESULTS[n]["n_unparsed"] / RESULTS[n]["n"] for n in names]
    fig, ax = plt.subplots(figsize=(7.5, 3.2))
    x = np.arange(len(names))
    ax.bar(x - 0.2, acc, 0.4, yerr=[np.array(acc) - ci[:, 0], ci[:, 1] - np.array(acc)], capsize=3, label="accuracy")
    ax.bar(x + 0.2, unparsed, 0.4, label="share unparsed (None)")
    ax.axhline(0.5, ls="--", c="gray", lw=1, label="chance (balanced set)")
    ax.set_xticks(x, names)
    ax.set_ylim(0, 1)
    ax.set_xlabel("prompt template")
    ax.set_ylabel("fraction of examples")
    ax.set_title(f"Greedy accuracy per template, n = {len(EVAL)} (model in the banner)")
    ax.legend(fontsize=8)
    plt.tight_layout()
    plt.show()

# %% [markdown]
# ## 10. Self-consistency as the number of samples grows (Book §5.7)
#
# Protocol (fixed, so the numbers are reproducible): for example $i$ and sample $j$ the
# sampler is seeded with $1000\,i + j$; we draw $k_{\max}$ samples per example once with the
# book's implicit sampling settings (temperature 1.0, top-k 50), normalize each, and the vote
# over $k$ samples uses the **first** $k$ of them — so the curve over $k$ compares nested
# sample sets, not fresh draws. The prompt is the strict few-shot template. A tie or no
# readable sample gives `INDETERMINADO`, which counts as wrong. Odd $k$ cannot tie between two
# labels, but `None` samples can still make it tie. Budget: $k_{\max}$ generations per example,
# so this sweep uses 12 balanced examples and $k \in \{1, 3, 5, 9\}$ in full mode, 4 examples and
# $k \in \{1, 3, 5\}$ in CI mode — its intervals are wide; say so when you cite it.

# %% nbgrader={"grade": false, "grade_id": "sweep_sc", "locked": true, "schema_version": 3, "solution": false, "task": false}
K_VALUES = [1, 3, 5] if CI_MODE else [1, 3, 5, 9]
K_MAX = max(K_VALUES)
SC_EVAL = balanced_subset(DATA, 0 if AUTOGRADING else (1 if CI_MODE else 3))
SC_SAMPLES = {}
if SC_EVAL:
    for i, d in enumerate(tqdm(SC_EVAL, desc="self-consistency samples")):
        prompt = TEMPLATES["strict few-shot"](d["text"])
        SC_SAMPLES[i] = [normalize_label(generate_text(model, tok, prompt, max_new_tokens=5, do_sample=True,
                                                       temperature=1.0, top_k=50, seed=1000 * i + j))
                         for j in range(K_MAX)]
    SC_ACC = {}
    print(f"model in the banner, strict few-shot, temperature 1.0, top-k 50, n = {len(SC_EVAL)}")
    for k in K_VALUES:
        votes = [majority_vote(SC_SAMPLES[i][:k]) for i in range(len(SC_EVAL))]
        n_ok = sum(v == d["label"] for v, d in zip(votes, SC_EVAL))
        SC_ACC[k] = n_ok / len(SC_EVAL)
        lo, hi = wilson(n_ok, len(SC_EVAL))
        print(f"k = {k}: accuracy {SC_ACC[k]:.3f} [{lo:.3f}, {hi:.3f}] | abstained {votes.count('INDETERMINADO')}"
              f" | readable samples {np.mean([s is not None for i in SC_SAMPLES for s in SC_SAMPLES[i][:k]]):.3f}")
    greedy_same = evaluate_accuracy(greedy, SC_EVAL, TEMPLATES["strict few-shot"], normalize_label)
    print(f"greedy, same examples: {greedy_same['accuracy']:.3f}")
else:
    print("sweep skipped while autograding")

# %%
if SC_SAMPLES:
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot(K_VALUES, [SC_ACC[k] for k in K_VALUES], "o-", label="self-consistency vote")
    ax.axhline(greedy_same["accuracy"], ls="--", c="C1", label="greedy (one answer)")
    ax.set_xlabel("number of samples k")
    ax.set_ylabel("accuracy")
    ax.set_ylim(0, 1)
    ax.set_xticks(K_VALUES)
    ax.set_title(f"Self-consistency, n = {len(SC_EVAL)} (model in the banner)")
    ax.legend(fontsize=8)
    plt.tight_layout()
    plt.show()

# %% [markdown]
# The book's own self-consistency prompt (§5.7.1), 10 samples as in the book. The book printed
# garbage samples (`'Adunator "Initive an'`, …) and `INDETERMINADO`; with a 77 M model sampled
# at temperature 1.0 that is mostly the off-format fallback firing — not a sign of
# "multiple plausible internal trajectories" for an ambiguous text.

# %% nbgrader={"grade": false, "grade_id": "book_sc", "locked": true, "schema_version": 3, "solution": false, "task": false}
n_book = 2 if AUTOGRADING else 10
book_samples = [generate_text(model, tok, prompt_sc, max_new_tokens=8, do_sample=True, temperature=1.0, top_k=50, seed=s)
                for s in range(n_book)]
print("Amostras brutas:", book_samples)
print("normalizadas:", [normalize_label(s) for s in book_samples])
print("VOTO FINAL (self-consistency):", majority_vote([normalize_label(s) for s in book_samples]))

# %% [markdown] nbgrader={"grade": false, "grade_id": "written_q1_question", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## 11. Reflect (written, graded by hand)
#
# **Question (3 pts).** Using the numbers **this notebook printed** (section 9's table and
# section 10's self-consistency lines; say which model the banner named and how many examples
# were evaluated):
# (a) Did few-shot beat zero-shot, and the strict template beat the loose one? Is each difference
#     larger than the Wilson intervals allow you to call real? Use the "unparsed" column to say
#     whether the template changed *what the model knows* or *the format of its answer*.
# (b) What did self-consistency do as $k$ grew, compared with one greedy answer? Relate it to
#     the book's claim "redução de variância, não aumento de viés correto" (§5.7.2).
# (c) In the BANANA experiment, which truncation side lost the instruction, and what would you
#     do in a chat application whose history outgrows the window?

# %% [markdown] nbgrader={"grade": true, "grade_id": "written_q1", "locked": false, "points": 3, "schema_version": 3, "solution": true, "task": false}
# **Model answer** (instructor; numbers from the course's full-mode run with the offline stand-in
# SmolLM2-135M-Instruct — the committed outputs are CI mode's smaller subsets; a student's answer must
# quote *their* printed numbers).
#
# (a) n = 48, greedy, 5 new tokens: zero-shot 0.396 [0.270, 0.537] with 7/48 unparsed; few-shot 0.000 [0.000, 0.074], 48/48 unparsed; loose 0.083 [0.033, 0.196], 37/48 unparsed; strict 0.000, 48/48 unparsed; strict few-shot 0.000, 48/48 unparsed. So on this model few-shot did *not* beat zero-shot and the strict template did *not* beat the loose one — the opposite of Book §5.5.4/§5.6.4. The gaps to 0 are real (the intervals do not overlap), but zero-shot itself is no better than chance: its interval contains 0.5, and on the 41 answers it could parse it was right 19 times (46 %). The unparsed column explains the rest: the longer prompts make the 135 M stand-in *continue the review* inside its 5-token budget instead of writing a label, so the differences are about answer **format**, not about what the model knows about sentiment. With the real FLAN-T5 (online) the parsed share is the first thing to compare.
#
# (b) n = 12, strict few-shot, temperature 1.0: the vote scored 0.000 at k = 1 (12 abstentions), 0.083 at k = 3 and 5 (11 abstentions) and 0.167 [0.047, 0.448] at k = 9 (10 abstentions); greedy on the same examples scored 0.000, and only ≈ 2 % of the samples were readable at all. More samples only gave the rare readable answer more chances to appear: the rise is abstentions turning into votes, with an interval that still reaches down to 0.05. Voting reduces the variance of the answer; it cannot remove a systematic error (here: the format), which is the book's "redução de variância, não aumento de viés correto". The book's own mixed review gave 2 readable samples out of 10, both NEGATIVO, and the vote NEGATIVO — a vote of 2, which no interval would call a consensus.
#
# (c) `side="left"` (keep the tail) dropped the instruction: `instruction kept: False`, the
# question survived; `side="right"` kept the instruction and lost the question; head + tail kept
# both. In a chat, drop or summarise the *oldest* turns (left truncation of the history) but pin
# the system instruction at the head and re-state critical constraints near the end.

# %% [markdown]
# ## 12. In practice (Book §5.9) — what the measurements add
#
# - Fix the model and record which one you loaded (the banner): prompting results are
#   model-specific; the book, its companion and this notebook disagree on the same greedy prompt.
# - Compare prompts with greedy decoding and **over a labelled set**, with an interval: a
#   single sentence proves nothing.
# - Write the answer parser down (`normalize_label`) and count unreadable answers as errors;
#   a restrictive template mostly changes the *format* (fewer unparsed answers).
# - Self-consistency needs sampling, a seed protocol and an abstention rule; it reduces variance
#   and cannot fix a systematic error.
# - The context window is a hard limit: truncate deliberately, and choose the side.
