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
