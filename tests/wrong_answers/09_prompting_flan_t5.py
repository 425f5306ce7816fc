"""Plausible wrong answers for 09_prompting_flan_t5 (see CONTRIBUTING.md, "Wrong answers")."""

_VOTE_MOST_COMMON = '''def majority_vote(labels, abstain="INDETERMINADO"):
    # Counter.most_common(1): on a tie it returns the label met first instead of abstaining
    labels = list(labels)
    if not labels:
        raise ValueError("no samples")
    counts = Counter(label for label in labels if label is not None)
    if not counts:
        return abstain
    return counts.most_common(1)[0][0]
'''

_NORMALIZE_VISIBLE_ONLY = '''def normalize_label(answer):
    # handles exactly the visible test's shapes: strip, strip punctuation, upper, look for a label word
    s = answer.strip().strip(".!?").upper()
    pos = "POSITIVO" in s or "POSITIVE" in s
    neg = "NEGATIVO" in s or "NEGATIVE" in s
    if pos == neg:
        return None
    return "POSITIVO" if pos else "NEGATIVO"
'''

VARIANTS = [
    # Exercise 1: few-shot builder
    {"name": "few_shot_fixed_newline_separator",     # passes the visible test (default separator), ignores `separator`
     "cells": {"ex1_few_shot": [("return separator.join(parts)", 'return "\\n\\n".join(parts)')]},
     "loses": ["test_ex1_few_shot"]},
    {"name": "few_shot_drops_query",
     "cells": {"ex1_few_shot": [("""    parts.append(f'Texto: "{query}"\\nSentimento:')\n""", "")]},
     "loses": ["test_ex1_few_shot"]},
    {"name": "few_shot_no_validation",
     "cells": {"ex1_few_shot": [('raise ValueError("task must be a non-empty string")', "pass"),
                                ('raise ValueError("query must be a non-empty string")', "pass")]},
     "loses": ["test_ex1_few_shot"]},
    # Exercise 2: normalization
    {"name": "normalize_keeps_accents",
     "cells": {"ex2_normalize": [("if not unicodedata.combining(c)", "if True"),
                                 ('decomposed = unicodedata.normalize("NFKD", answer)', "decomposed = answer")]},
     "loses": ["test_ex2_normalize"]},
    {"name": "normalize_substring_match",
     "cells": {"ex2_normalize": [("if w in words_to_label}", "if w in words_to_label}\n    found |= {v for k, v in words_to_label.items() if k in plain}")]},
     "loses": ["test_ex2_normalize"]},
    {"name": "normalize_visible_inputs_only",
     "cells": {"ex2_normalize": _NORMALIZE_VISIBLE_ONLY},
     "loses": ["test_ex2_normalize"]},
    # Exercise 3: vote
    {"name": "vote_first_on_ties",
     "cells": {"ex3_vote": _VOTE_MOST_COMMON},
     "loses": ["test_ex3_vote"]},
    {"name": "vote_none_counts",
     "cells": {"ex3_vote": [("Counter(label for label in labels if label is not None)", "Counter(labels)")]},
     "loses": ["test_ex3_vote"]},
    {"name": "vote_empty_abstains",
     "cells": {"ex3_vote": [('raise ValueError("majority_vote needs at least one sample, got an empty sequence")', "return abstain")]},
     "loses": ["test_ex3_vote"]},
    # Exercise 4: harness
    {"name": "harness_divides_by_parsed",
     "cells": {"ex4_harness": [('"accuracy": n_correct / len(examples)',
                                '"accuracy": n_correct / max(1, sum(p is not None for p in predictions))')]},
     "loses": ["test_ex4_harness"]},
    {"name": "harness_empty_returns_zero",
     "cells": {"ex4_harness": [('raise ValueError("the labelled set is empty: accuracy is undefined")',
                                'return {"accuracy": 0.0, "n": 0, "n_correct": 0, "n_unparsed": 0, "predictions": []}')]},
     "loses": ["test_ex4_harness"]},
]

_NORMALIZE_WORD_BOUNDARY = '''def normalize_label(answer):
    # \\b...\\b around the labels: "NEGATIVO2" or "sentimento_negativo" has no word boundary next to the label
    if not isinstance(answer, str):
        raise TypeError("answer must be a str")
    decomposed = unicodedata.normalize("NFKD", answer)
    plain = "".join(c for c in decomposed if not unicodedata.combining(c)).upper()
    found = {"POSITIVO" if w.startswith("POS") else "NEGATIVO"
             for w in re.findall(r"\\b(POSITIV[OAE]|NEGATIV[OAE])\\b", plain)}
    return found.pop() if len(found) == 1 else None
'''

_NORMALIZE_SPLIT_STRIP = '''def normalize_label(answer):
    # str.split() then strip punctuation from each word: "label=negativo;" stays one word
    import string
    if not isinstance(answer, str):
        raise TypeError("answer must be a str")
    decomposed = unicodedata.normalize("NFKD", answer)
    plain = "".join(c for c in decomposed if not unicodedata.combining(c)).upper()
    words_to_label = {"POSITIVO": "POSITIVO", "POSITIVA": "POSITIVO", "POSITIVE": "POSITIVO",
                      "NEGATIVO": "NEGATIVO", "NEGATIVA": "NEGATIVO", "NEGATIVE": "NEGATIVO"}
    found = {words_to_label[w] for w in (w.strip(string.punctuation) for w in plain.split()) if w in words_to_label}
    return found.pop() if len(found) == 1 else None
'''

_HARNESS_CACHED = '''def evaluate_accuracy(generate, examples, make_prompt, parse):
    # caches the answer per prompt: a repeated text is generated once (the docstring says once per example)
    examples = list(examples)
    if not examples:
        raise ValueError("the labelled set is empty: accuracy is undefined")
    cache = {}
    predictions = []
    for ex in examples:
        prompt = make_prompt(ex["text"])
        if prompt not in cache:
            cache[prompt] = generate(prompt)
        predictions.append(parse(cache[prompt]))
    n_correct = sum(p == ex["label"] for p, ex in zip(predictions, examples))
    return {"accuracy": n_correct / len(examples), "n": len(examples), "n_correct": n_correct,
            "n_unparsed": sum(p is None for p in predictions), "predictions": predictions}
'''

_HARNESS_GENERATE_TWICE = '''def evaluate_accuracy(generate, examples, make_prompt, parse):
    # generates again to count the unparsed answers
    examples = list(examples)
    if not examples:
        raise ValueError("the labelled set is empty: accuracy is undefined")
    predictions = [parse(generate(make_prompt(ex["text"]))) for ex in examples]
    n_correct = sum(p == ex["label"] for p, ex in zip(predictions, examples))
    n_unparsed = sum(parse(generate(make_prompt(ex["text"]))) is None for ex in examples)
    return {"accuracy": n_correct / len(examples), "n": len(examples), "n_correct": n_correct,
            "n_unparsed": n_unparsed, "predictions": predictions}
'''

_VOTE_ABSOLUTE_MAJORITY = '''def majority_vote(labels, abstain="INDETERMINADO"):
    # wants more than half of the votes, not just more votes than every other label
    labels = list(labels)
    if not labels:
        raise ValueError("no samples")
    votes = [label for label in labels if label is not None]
    counts = Counter(votes)
    for label, n in counts.items():
        if n > len(votes) / 2:
            return label
    return abstain
'''

VARIANTS_ISSUE17 = [
    # Exercise 1
    {"name": "few_shot_strips_texts",                   # .strip() on the query and the example texts/labels
     "cells": {"ex1_few_shot": [("""parts.append(f'Texto: "{text}"\\nSentimento: {label}')""",
                                 """parts.append(f'Texto: "{str(text).strip()}"\\nSentimento: {str(label).strip()}')"""),
                                ("""parts.append(f'Texto: "{query}"\\nSentimento:')""",
                                 """parts.append(f'Texto: "{query.strip()}"\\nSentimento:')""")]},
     "loses": ["test_ex1_few_shot"]},
    {"name": "few_shot_whitespace_label_accepted",      # `if not text or not label`: a label "  " passes
     "cells": {"ex1_few_shot": [("if not str(text).strip() or not str(label).strip():", "if not text or not label:")]},
     "loses": ["test_ex1_few_shot"]},
    # Exercise 2
    {"name": "normalize_word_chars_regex",              # \\w+ : digits and "_" glue onto the label
     "cells": {"ex2_normalize": [('re.findall(r"[A-Z]+", plain)', 're.findall(r"\\w+", plain)')]},
     "loses": ["test_ex2_normalize"]},
    {"name": "normalize_word_boundary_regex",
     "cells": {"ex2_normalize": _NORMALIZE_WORD_BOUNDARY},
     "loses": ["test_ex2_normalize"]},
    {"name": "normalize_split_and_strip_punctuation",
     "cells": {"ex2_normalize": _NORMALIZE_SPLIT_STRIP},
     "loses": ["test_ex2_normalize"]},
    {"name": "normalize_label_named_once_only",         # a list, not a set: a label named twice gives None
     "cells": {"ex2_normalize": [("found = {words_to_label[w] for w in re.findall(r\"[A-Z]+\", plain) if w in words_to_label}",
                                  "found = [words_to_label[w] for w in re.findall(r\"[A-Z]+\", plain) if w in words_to_label]"),
                                 ("return found.pop() if len(found) == 1 else None",
                                  "return found[0] if len(found) == 1 else None")]},
     "loses": ["test_ex2_normalize"]},
    {"name": "normalize_majority_inside_answer",        # both labels named: the more frequent one wins
     "cells": {"ex2_normalize": [("found = {words_to_label[w] for w in re.findall(r\"[A-Z]+\", plain) if w in words_to_label}",
                                  "found = Counter(words_to_label[w] for w in re.findall(r\"[A-Z]+\", plain) if w in words_to_label)"),
                                 ("return found.pop() if len(found) == 1 else None",
                                  "ranked = found.most_common()\n    if not ranked or (len(ranked) > 1 and ranked[0][1] == ranked[1][1]):\n"
                                  "        return None\n    return ranked[0][0]")]},
     "loses": ["test_ex2_normalize"]},
    {"name": "normalize_ascii_ignore",                  # encode('ascii', 'ignore') drops letters that are not accents
     "cells": {"ex2_normalize": [('plain = "".join(c for c in decomposed if not unicodedata.combining(c)).upper()',
                                  'plain = decomposed.encode("ascii", "ignore").decode("ascii").upper()')]},
     "loses": ["test_ex2_normalize"]},
    {"name": "normalize_lower_case",                    # lower-cases instead of upper-casing
     "cells": {"ex2_normalize": [('plain = "".join(c for c in decomposed if not unicodedata.combining(c)).upper()',
                                  'plain = "".join(c for c in decomposed if not unicodedata.combining(c)).lower()'),
                                 ('re.findall(r"[A-Z]+", plain) if w in words_to_label',
                                  're.findall(r"[a-z]+", plain) if w.upper() in words_to_label'),
                                 ("found = {words_to_label[w] for w", "found = {words_to_label[w.upper()] for w")]},
     "loses": ["test_ex2_normalize"]},
    # Exercise 3
    {"name": "vote_absolute_majority",
     "cells": {"ex3_vote": _VOTE_ABSOLUTE_MAJORITY},
     "loses": ["test_ex3_vote"]},
    # Exercise 4
    {"name": "harness_caches_repeated_prompts",
     "cells": {"ex4_harness": _HARNESS_CACHED},
     "loses": ["test_ex4_harness"]},
    {"name": "harness_generates_twice",
     "cells": {"ex4_harness": _HARNESS_GENERATE_TWICE},
     "loses": ["test_ex4_harness"]},
    {"name": "harness_unparsed_means_not_a_label",      # counts any prediction outside the labels as unparsed
     "cells": {"ex4_harness": [('"n_unparsed": sum(p is None for p in predictions)',
                                '"n_unparsed": sum(p not in {ex["label"] for ex in examples} for p in predictions)')]},
     "loses": ["test_ex4_harness"]},
]
VARIANTS += VARIANTS_ISSUE17

# Exercise 5 (issue 49): derangement replaces truncate_tokens
_DERANGEMENT_RESEEDED = '''def derangement(n, seed):
    # a fresh generator for every draw, seeded seed, seed + 1, ...: seeded, but not the draws asked for
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError("n must be an int >= 0")
    if n == 1:
        raise ValueError("no derangement of 1 element")
    tries = 0
    while True:
        perm = np.random.default_rng(seed + tries).permutation(n)
        if all(perm[i] != i for i in range(n)):
            return [int(i) for i in perm]
        tries += 1
'''

_DERANGEMENT_LEGACY = '''def derangement(n, seed):
    # the legacy global generator (np.random.seed): another stream than default_rng(seed)
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError("n must be an int >= 0")
    if n == 1:
        raise ValueError("no derangement of 1 element")
    np.random.seed(seed)
    while True:
        perm = np.random.permutation(n)
        if all(perm[i] != i for i in range(n)):
            return [int(i) for i in perm]
'''

_DERANGEMENT_SHIFT = '''def derangement(n, seed):
    # a rotation by one always moves every position, but it is not drawn at random
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError("n must be an int >= 0")
    if n == 1:
        raise ValueError("no derangement of 1 element")
    return [(i + 1) % n for i in range(n)]
'''

VARIANTS_ISSUE49 = [
    {"name": "derangement_first_draw",                  # one shuffle, no rejection: positions may stay
     "cells": {"ex5_derangement": [("    while True:\n        perm = rng.permutation(n)\n"
                                    "        if not np.any(perm == np.arange(n)):\n            return [int(i) for i in perm]",
                                    "    return [int(i) for i in rng.permutation(n)]")]},
     "loses": ["test_ex5_derangement"]},
    {"name": "derangement_reseeded_each_draw",
     "cells": {"ex5_derangement": _DERANGEMENT_RESEEDED},
     "loses": ["test_ex5_derangement"]},
    {"name": "derangement_legacy_global_seed",
     "cells": {"ex5_derangement": _DERANGEMENT_LEGACY},
     "loses": ["test_ex5_derangement"]},
    {"name": "derangement_shift_by_one",
     "cells": {"ex5_derangement": _DERANGEMENT_SHIFT},
     "loses": ["test_ex5_derangement"]},
    {"name": "derangement_returns_array",               # numpy's array, not a list of Python ints
     "cells": {"ex5_derangement": [("return [int(i) for i in perm]", "return perm")]},
     "loses": ["test_ex5_derangement"]},
    {"name": "derangement_one_is_identity",             # n = 1 returns [0] instead of raising
     "cells": {"ex5_derangement": [('raise ValueError("a single position cannot move: no derangement of 1 element exists")',
                                    "return [0]")]},
     "loses": ["test_ex5_derangement"]},
    {"name": "derangement_accepts_floats",              # int(n): 4.0 and True pass
     "cells": {"ex5_derangement": [("if isinstance(n, bool) or not isinstance(n, int) or n < 0:",
                                    "n = int(n)\n    if n < 0:")]},
     "loses": ["test_ex5_derangement"]},
    {"name": "derangement_empty_raises",                # n = 0 treated as invalid
     "cells": {"ex5_derangement": [("if n == 1:", "if n <= 1:")]},
     "loses": ["test_ex5_derangement"]},
]

_CONTROLS_SHUFFLED = '''def control_demos(demos, condition, seed=0, code=None):
    # "wrong pairs" as a random shuffle of the outputs: a shuffle can leave pairs right, and is not the rotation asked
    import random
    if condition not in CONDITIONS:
        raise ValueError(f"unknown condition {condition!r}")
    pairs = [tuple(pair) for pair in demos]
    if condition == "wrong pairs":
        outputs = [y for _, y in pairs]
        random.Random(0).shuffle(outputs)
        return [(x, y) for (x, _), y in zip(pairs, outputs)]
    if condition == "permuted":
        return [pairs[j] for j in derangement(len(pairs), seed)]
    if condition == "same word":
        return [(x, x) for x, _ in pairs]
    if condition == "code":
        return [(x, code[x]) for x, _ in pairs]
    return pairs
'''

_CONTROLS_PERMUTED_SHUFFLE = '''def control_demos(demos, condition, seed=0, code=None):
    # "permuted" as a plain seeded shuffle: a demonstration may stay where it was
    if condition not in CONDITIONS:
        raise ValueError(f"unknown condition {condition!r}")
    pairs = [tuple(pair) for pair in demos]
    if condition == "wrong pairs":
        return [(x, pairs[(i + 1) % len(pairs)][1]) for i, (x, _) in enumerate(pairs)]
    if condition == "permuted":
        return [pairs[j] for j in np.random.default_rng(seed).permutation(len(pairs))]
    if condition == "same word":
        return [(x, x) for x, _ in pairs]
    if condition == "code":
        return [(x, code[x]) for x, _ in pairs]
    return pairs
'''

VARIANTS_ISSUE49 += [
    # Exercise 6: control demonstrations (issues 40, 49)
    {"name": "controls_wrong_pairs_previous_output",     # rotates the other way: input i takes output i - 1
     "cells": {"ex6_controls": [("pairs[(i + 1) % len(pairs)][1]", "pairs[i - 1][1]")]},
     "loses": ["test_ex6_controls"]},
    {"name": "controls_wrong_pairs_random_shuffle",
     "cells": {"ex6_controls": _CONTROLS_SHUFFLED},
     "loses": ["test_ex6_controls"]},
    {"name": "controls_permuted_reversed",               # "permuted" as the reversed order
     "cells": {"ex6_controls": [("return [pairs[j] for j in derangement(len(pairs), seed)]", "return pairs[::-1]")]},
     "loses": ["test_ex6_controls"]},
    {"name": "controls_permuted_plain_shuffle",
     "cells": {"ex6_controls": _CONTROLS_PERMUTED_SHUFFLE},
     "loses": ["test_ex6_controls"]},
    {"name": "controls_permuted_inverse",                # pair i goes to position perm[i] (the inverse order)
     "cells": {"ex6_controls": [("return [pairs[j] for j in derangement(len(pairs), seed)]",
                                 "perm = derangement(len(pairs), seed)\n        out = [None] * len(pairs)\n"
                                 "        for i, j in enumerate(perm):\n            out[j] = pairs[i]\n        return out")]},
     "loses": ["test_ex6_controls"]},
    {"name": "controls_same_word_swaps_pair",            # "same word" read as output -> input
     "cells": {"ex6_controls": [("return [(x, x) for x, _ in pairs]", "return [(y, x) for x, y in pairs]")]},
     "loses": ["test_ex6_controls"]},
    {"name": "controls_code_keeps_unmapped_output",      # an input missing from code keeps its own output
     "cells": {"ex6_controls": [("return [(x, code[x]) for x, _ in pairs]", "return [(x, code.get(x, y)) for x, y in pairs]")]},
     "loses": ["test_ex6_controls"]},
    {"name": "controls_code_in_dict_order",              # the code's values in the dict's order, not looked up by input
     "cells": {"ex6_controls": [("return [(x, code[x]) for x, _ in pairs]",
                                 "return [(x, c) for (x, _), c in zip(pairs, code.values())]")]},
     "loses": ["test_ex6_controls"]},
    {"name": "controls_no_demonstration_raises",         # an empty demonstration list refused: the statement allows it
     "cells": {"ex6_controls": [("pairs = [tuple(pair) for pair in demos]",
                                 "pairs = [tuple(pair) for pair in demos]\n    if not pairs:\n        raise ValueError(\"no demonstrations\")")]},
     "loses": ["test_ex6_controls"]},
    {"name": "controls_keeps_lists_and_returns_input",   # no copy: lists stay lists, "true" returns demos itself
     "cells": {"ex6_controls": [("pairs = [tuple(pair) for pair in demos]", "pairs = demos if isinstance(demos, list) else list(demos)")]},
     "loses": ["test_ex6_controls"]},
    {"name": "controls_unknown_condition_is_true",       # no validation: any other name gives the pairs as given
     "cells": {"ex6_controls": [('raise ValueError(f"condition must be one of {CONDITIONS}, got {condition!r}")', "pass")]},
     "loses": ["test_ex6_controls"]},
    {"name": "controls_case_insensitive",                # accepts "Permuted": the statement asks for exact names
     "cells": {"ex6_controls": [("if condition not in CONDITIONS:", "condition = condition.lower()\n    if condition not in CONDITIONS:")]},
     "loses": ["test_ex6_controls"]},
]

# Honest answers written from the student notebook's text alone (issues 40, 49): full marks.
_DERANGEMENT_READER = '''def derangement(n, seed):
    """A seeded random order of range(n) that leaves no position in place."""
    if type(n) is not int or n < 0:
        raise ValueError(f"n must be a non-negative int, got {n!r}")
    if n == 1:
        raise ValueError("one position cannot move")
    rng = np.random.default_rng(seed)
    perm = rng.permutation(n)
    while any(int(p) == i for i, p in enumerate(perm)):
        perm = rng.permutation(n)
    return perm.tolist()
'''

_CONTROLS_READER = """CONDITIONS = ("true", "wrong pairs", "permuted", "same word", "code")


def control_demos(demos, condition, seed=0, code=None):
    \"\"\"The demonstrations of one control condition.\"\"\"
    # Exact names only (no case folding); a tuple scan with == also copes with unhashable values.
    if not isinstance(condition, str) or condition not in CONDITIONS:
        raise ValueError(f"unknown condition {condition!r}; expected one of {CONDITIONS}")
    pairs = [(x, y) for x, y in demos]          # fresh tuples, even from lists; demos untouched
    n = len(pairs)
    if condition == "true":
        return pairs
    if condition == "wrong pairs":              # rotation by one: input i takes output i + 1
        return [(pairs[i][0], pairs[(i + 1) % n][1]) for i in range(n)]
    if condition == "permuted":                 # position i holds pair perm[i]
        perm = derangement(n, seed)
        return [pairs[perm[i]] for i in range(n)]
    if condition == "same word":
        return [(x, x) for x, _ in pairs]
    out = []
    for x, _ in pairs:                          # "code": a missing input raises KeyError
        out.append((x, code[x]))
    return out
"""
VARIANTS_ISSUE49 += [
    {"name": "honest_derangement_reader",              # type(n) is int, tolist(), a while on any()
     "cells": {"ex5_derangement": _DERANGEMENT_READER},
     "loses": []},
    {"name": "honest_controls_reader",                 # validates first, copies to tuples, index loops
     "cells": {"ex6_controls": _CONTROLS_READER},
     "loses": []},
]
VARIANTS += VARIANTS_ISSUE49
