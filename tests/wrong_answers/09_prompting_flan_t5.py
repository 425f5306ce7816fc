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

_TRUNCATE_VISIBLE_ONLY = '''def truncate_tokens(ids, budget, side="left"):
    # right for lists, but returns the input itself when it fits and never checks its arguments
    if len(ids) <= budget:
        return ids
    return list(ids[len(ids) - budget:]) if side == "left" else list(ids[:budget])
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
    # Exercise 5: truncation
    {"name": "truncate_off_by_one",
     "cells": {"ex5_truncate": [('return ids[-budget:] if side == "left" else ids[:budget]',
                                 'return ids[-budget:] if side == "left" else ids[:budget + 1]')]},
     "loses": ["test_ex5_truncate"]},
    {"name": "truncate_sides_swapped_default",       # default side keeps the head
     "cells": {"ex5_truncate": [('def truncate_tokens(ids, budget, side="left"):', 'def truncate_tokens(ids, budget, side="right"):')]},
     "loses": ["test_ex5_truncate"]},
    {"name": "truncate_visible_inputs_only",
     "cells": {"ex5_truncate": _TRUNCATE_VISIBLE_ONLY},
     "loses": ["test_ex5_truncate"]},
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

_CONTROLS_SHUFFLED = '''def control_demos(demos, condition, suffix="zo"):
    # "wrong pairs" as a random shuffle of the outputs: a shuffle can leave pairs right, and is not the rotation asked
    import random
    if condition not in CONDITIONS:
        raise ValueError(f"unknown condition {condition!r}")
    pairs = [tuple(pair) for pair in demos]
    if condition == "wrong pairs":
        outputs = [y for _, y in pairs]
        random.Random(0).shuffle(outputs)
        return [(x, y) for (x, _), y in zip(pairs, outputs)]
    if condition == "reversed order":
        return pairs[::-1]
    if condition == "made-up":
        return [(x, x + suffix) for x, _ in pairs]
    return pairs
'''

VARIANTS_ISSUE40 = [
    # Exercise 6: control demonstrations (issue 40)
    {"name": "controls_wrong_pairs_previous_output",     # rotates the other way: input i takes output i - 1
     "cells": {"ex6_controls": [("pairs[(i + 1) % len(pairs)][1]", "pairs[i - 1][1]")]},
     "loses": ["test_ex6_controls"]},
    {"name": "controls_wrong_pairs_random_shuffle",
     "cells": {"ex6_controls": _CONTROLS_SHUFFLED},
     "loses": ["test_ex6_controls"]},
    {"name": "controls_reversed_swaps_each_pair",        # "reversed" read as output -> input, order kept
     "cells": {"ex6_controls": [("return pairs[::-1]", "return [(y, x) for x, y in pairs]")]},
     "loses": ["test_ex6_controls"]},
    {"name": "controls_made_up_fixed_suffix",            # passes the visible test (default suffix), ignores `suffix`
     "cells": {"ex6_controls": [("return [(x, x + suffix) for x, _ in pairs]", 'return [(x, x + "zo") for x, _ in pairs]')]},
     "loses": ["test_ex6_controls"]},
    {"name": "controls_made_up_suffix_on_output",        # appends the suffix to the pair's own output
     "cells": {"ex6_controls": [("return [(x, x + suffix) for x, _ in pairs]", "return [(x, y + suffix) for x, y in pairs]")]},
     "loses": ["test_ex6_controls"]},
    {"name": "controls_keeps_lists_and_returns_input",   # no copy: lists stay lists, "true" returns demos itself
     "cells": {"ex6_controls": [("pairs = [tuple(pair) for pair in demos]", "pairs = demos if isinstance(demos, list) else list(demos)")]},
     "loses": ["test_ex6_controls"]},
    {"name": "controls_unknown_condition_is_true",       # no validation: any other name gives the pairs as given
     "cells": {"ex6_controls": [('raise ValueError(f"condition must be one of {CONDITIONS}, got {condition!r}")', "pass")]},
     "loses": ["test_ex6_controls"]},
    {"name": "controls_case_insensitive",                # accepts "Wrong pairs": the statement asks for exact names
     "cells": {"ex6_controls": [("if condition not in CONDITIONS:", "condition = condition.lower()\n    if condition not in CONDITIONS:")]},
     "loses": ["test_ex6_controls"]},
]
# An honest answer a reader wrote from the student notebook's text alone (issue 40): full marks.
_CONTROLS_READER = """CONDITIONS = ("true", "wrong pairs", "reversed order", "made-up")


def control_demos(demos, condition, suffix="zo"):
    \"\"\"The demonstrations of one control condition (Min et al. 2022; Wei et al. 2023).

    Args:
        demos: a sequence of ``(input, output)`` pairs (tuples or lists), possibly empty.
        condition: ``"true"`` (the pairs as given), ``"wrong pairs"`` (the same inputs in order,
            each with the output of the next pair, the last with the first's), ``"reversed order"``
            (the same pairs, last first) or ``"made-up"`` (each input ``x`` with ``x + suffix``).
        suffix: the ending the made-up mapping appends to each input.

    Returns:
        A new ``list`` of ``(input, output)`` tuples. ``demos`` is not modified.

    Raises:
        ValueError: if ``condition`` is not one of the four names above.
    \"\"\"
    # Exact names only (no case folding); a tuple scan with == also copes with unhashable values.
    if not isinstance(condition, str) or condition not in CONDITIONS:
        raise ValueError(f"unknown condition {condition!r}; expected one of {CONDITIONS}")
    pairs = [(x, y) for x, y in demos]          # fresh tuples, even from lists; demos untouched
    if condition == "true":
        return pairs
    if condition == "wrong pairs":              # rotation by one: input i takes output i + 1
        n = len(pairs)
        return [(pairs[i][0], pairs[(i + 1) % n][1]) for i in range(n)]
    if condition == "reversed order":
        return pairs[::-1]
    return [(x, x + suffix) for x, _ in pairs]  # "made-up"
"""
VARIANTS_ISSUE40.append(
    {"name": "honest_controls_reader",                   # validates first, copies to tuples, rotation by index
     "cells": {"ex6_controls": _CONTROLS_READER},
     "loses": []})
VARIANTS += VARIANTS_ISSUE40
