"""Plausible wrong answers for 01_tokenization: each must lose the points of the test cells it names."""

VARIANTS = [
    # ---- Exercise 1: WordPiece -------------------------------------------------------------------
    {   # keeps the pieces that matched and appends [UNK] for the rest, instead of [UNK] for the whole word
        "name": "wordpiece_partial_unk",
        "cells": {"ex1_wordpiece": [(
            "        if piece is None:                                     # nothing matches: the whole word is unknown\n"
            "            return [unk_token]",
            "        if piece is None:                                     # keep what matched, mark the rest unknown\n"
            "            return pieces + [unk_token]",
        )]},
        "loses": ["test_ex1_wordpiece"],
    },
    {   # forgets the '##' continuation prefix on pieces after the first
        "name": "wordpiece_no_continuation_prefix",
        "cells": {"ex1_wordpiece": [("word[start:end] if start == 0 else prefix + word[start:end]", "word[start:end]")]},
        "loses": ["test_ex1_wordpiece"],
    },
    {   # off by one on the length limit: a word of exactly max_chars characters becomes [UNK]
        "name": "wordpiece_max_chars_off_by_one",
        "cells": {"ex1_wordpiece": [("len(word) > max_chars", "len(word) >= max_chars")]},
        "loses": ["test_ex1_wordpiece"],
    },
    {   # lower-cases the word before the look-up (the normalizer's job): a cased vocabulary loses its capitals
        "name": "wordpiece_lowercases",
        "cells": {"ex1_wordpiece": [("    if len(word) > max_chars:\n        return [unk_token]",
                                     "    word = word.lower()\n    if len(word) > max_chars:\n        return [unk_token]")]},
        "loses": ["test_ex1_wordpiece"],
    },
    {   # the length limit counts UTF-8 bytes instead of characters: 'café' (4 characters, 5 bytes) is too long for 4
        "name": "wordpiece_counts_bytes",
        "cells": {"ex1_wordpiece": [("len(word) > max_chars", "len(word.encode(\"utf-8\")) > max_chars")]},
        "loses": ["test_ex1_wordpiece"],
    },
    {   # shortest match first instead of longest
        "name": "wordpiece_shortest_first",
        "cells": {"ex1_wordpiece": (
            "def wordpiece_tokenize_word(word, vocab, unk_token=\"[UNK]\", prefix=\"##\", max_chars=100):\n"
            "    if len(word) > max_chars:\n"
            "        return [unk_token]\n"
            "    pieces, start = [], 0\n"
            "    while start < len(word):\n"
            "        for end in range(start + 1, len(word) + 1):          # shortest candidate first\n"
            "            candidate = word[start:end] if start == 0 else prefix + word[start:end]\n"
            "            if candidate in vocab:\n"
            "                break\n"
            "        else:\n"
            "            return [unk_token]\n"
            "        pieces.append(candidate)\n"
            "        start = end\n"
            "    return pieces\n"
        )},
        "loses": ["test_ex1_wordpiece"],
    },
    {   # imports, inside the function, a copy of BERT's WordpieceTokenizer that the test does not switch off
        # (RoCBert's), under a module name built at run time, and maps a custom prefix to '##' and back
        "name": "wordpiece_imports_library_copy",
        "cells": {"ex1_wordpiece": (
            "import importlib as _il\n"
            "\n"
            "def wordpiece_tokenize_word(word, vocab, unk_token=\"[UNK]\", prefix=\"##\", max_chars=100):\n"
            "    mod = _il.import_module('.'.join(['transformers', 'models', 'roc_bert', 'tokenization_roc_bert']))\n"
            "    if prefix != '##':\n"
            "        vocab = {'##' + t[len(prefix):] if t.startswith(prefix) else t for t in vocab}\n"
            "    wp = mod.RoCBertWordpieceTokenizer(vocab, unk_token, max_input_chars_per_word=max_chars)\n"
            "    pieces = wp.tokenize(word)\n"
            "    return [prefix + p[2:] if p.startswith('##') else p for p in pieces]\n"
        )},
        "loses": ["test_ex1_wordpiece"],
    },
    # ---- Exercise 2: BPE training ----------------------------------------------------------------
    {   # ties go to the pair seen first (dict order), not to the smallest (rank(left), rank(right))
        "name": "bpe_tie_first_seen",
        "cells": {"ex2_learn_bpe": [("best = max(counts, key=lambda p: (counts[p], -rank[p[0]], -rank[p[1]]))",
                                     "best = max(counts, key=counts.get)")]},
        "loses": ["test_ex2_learn_bpe"],
    },
    {   # ties go to the lexicographically smallest pair of strings: differs once merged symbols compete
        "name": "bpe_tie_lexicographic",
        "cells": {"ex2_learn_bpe": [("best = max(counts, key=lambda p: (counts[p], -rank[p[0]], -rank[p[1]]))",
                                     "best = min(counts, key=lambda p: (-counts[p], p))")]},
        "loses": ["test_ex2_learn_bpe"],
    },
    {   # counts each pair once per distinct word, ignoring the word frequencies
        "name": "bpe_unweighted_counts",
        "cells": {"ex2_learn_bpe": [("counts[pair] += count", "counts[pair] += 1")]},
        "loses": ["test_ex2_learn_bpe"],
    },
    {   # merges with str.replace on space-joined symbols: 'ca b' + merge (a, b) wrongly becomes 'cab'
        "name": "bpe_string_replace",
        "cells": {"ex2_learn_bpe": (
            "def learn_bpe_merges(word_counts, num_merges):\n"
            "    symbols = sorted({ch for word in word_counts for ch in word})\n"
            "    rank = {s: i for i, s in enumerate(symbols)}\n"
            "    words = {\" \".join(word): count for word, count in word_counts.items()}\n"
            "    merges = []\n"
            "    for _ in range(num_merges):\n"
            "        counts = Counter()\n"
            "        for word, count in words.items():\n"
            "            syms = word.split(\" \")\n"
            "            for pair in zip(syms, syms[1:]):\n"
            "                counts[pair] += count\n"
            "        if not counts:\n"
            "            break\n"
            "        best = max(counts, key=lambda p: (counts[p], -rank[p[0]], -rank[p[1]]))\n"
            "        merges.append(best)\n"
            "        rank.setdefault(best[0] + best[1], len(rank))\n"
            "        words = {w.replace(best[0] + \" \" + best[1], best[0] + best[1]): c for w, c in words.items()}\n"
            "    return merges\n"
        )},
        "loses": ["test_ex2_learn_bpe"],
    },
    {   # tokenizers' BpeTrainer reached through importlib and getattr with names built at run time
        "name": "bpe_trainer_obfuscated_import",
        "cells": {"ex2_learn_bpe": (
            "import importlib as _il\n"
            "import json as _js\n"
            "\n"
            "def _lib(*parts):\n"
            "    obj = _il.import_module(''.join(['tok', 'enizers']))\n"
            "    for p in parts:\n"
            "        obj = getattr(obj, ''.join(p))\n"
            "    return obj\n"
            "\n"
            "def learn_bpe_merges(word_counts, num_merges):\n"
            "    alphabet = {c for w in word_counts for c in w}\n"
            "    t = _lib(['Tok', 'enizer'])(_lib(['mod', 'els'], ['B', 'PE'])())\n"
            "    t.pre_tokenizer = _lib(['pre_tok', 'enizers'], ['Whitespace', 'Split'])()\n"
            "    tr = _lib(['tra', 'iners'], ['Bpe', 'Trainer'])(vocab_size=len(alphabet) + num_merges,\n"
            "                                                    show_progress=False, special_tokens=[])\n"
            "    getattr(t, ''.join(['train_from', '_iterator']))([w for w, c in word_counts.items() for _ in range(c)], tr)\n"
            "    return [tuple(m) for m in _js.loads(t.to_str())['model']['merges']]\n"
        )},
        "loses": ["test_ex2_learn_bpe"],
    },
    # ---- Exercise 3: BPE encoding ----------------------------------------------------------------
    {   # merges the leftmost mergeable pair, whatever its rank
        "name": "bpe_encode_leftmost_pair",
        "cells": {"ex3_bpe_encode": [("best_rank, i = min(candidates)",
                                      "best_rank, i = min(candidates, key=lambda c: (c[0] == math.inf, c[1]))")]},
        "loses": ["test_ex3_bpe_encode"],
    },
    {   # replays the merges in order but merges only the first occurrence of each pair
        "name": "bpe_encode_first_occurrence_only",
        "cells": {"ex3_bpe_encode": (
            "def bpe_encode_word(word, ranks):\n"
            "    symbols = list(word)\n"
            "    for (a, b), _ in sorted(ranks.items(), key=lambda kv: kv[1]):\n"
            "        for i in range(len(symbols) - 1):\n"
            "            if symbols[i] == a and symbols[i + 1] == b:\n"
            "                symbols[i:i + 2] = [a + b]\n"
            "                break\n"
            "    return symbols\n"
        )},
        "loses": ["test_ex3_bpe_encode"],
    },
    {   # tokenizers' BPE model reached through importlib and getattr with names built at run time
        "name": "bpe_encode_obfuscated_import",
        "cells": {"ex3_bpe_encode": (
            "import importlib as _il\n"
            "\n"
            "_models = {}   # one library model per merge table (a model per word made the sonnets' demo take a minute)\n"
            "\n"
            "def bpe_encode_word(word, ranks):\n"
            "    if not word:\n"
            "        return []\n"
            "    key = (id(ranks), len(ranks))\n"
            "    if key not in _models:\n"
            "        lib = getattr(_il.import_module(''.join(['tok', 'enizers'])), ''.join(['mod', 'els']))\n"
            "        merges = sorted(ranks, key=ranks.get)\n"
            "        vocab = {chr(i): i for i in range(0x3400)}   # every byte-level symbol, and more\n"
            "        for s in [c for a, b in merges for c in (a, b, a + b)]:\n"
            "            vocab.setdefault(s, len(vocab))\n"
            "        _models[key] = getattr(lib, ''.join(['B', 'PE']))(vocab=vocab, merges=merges)\n"
            "    return [t.value for t in _models[key].tokenize(word)]\n"
        )},
        "loses": ["test_ex3_bpe_encode"],
    },
    # ---- Exercise 4: additive mask ---------------------------------------------------------------
    {   # masks the real tokens and keeps the padding
        "name": "mask_inverted",
        "cells": {"ex4_additive_mask": [("bias.masked_fill(~keep,", "bias.masked_fill(keep,")]},
        "loses": ["test_ex4_additive_mask"],
    },
    {   # the book's "-1e9 in practice": -inf in float16, wrong value in float32
        "name": "mask_minus_1e9",
        "cells": {"ex4_additive_mask": [("torch.finfo(dtype).min)", "-1e9)")]},
        "loses": ["test_ex4_additive_mask"],
    },
    {   # a true -inf: nan for a sequence that is all padding
        "name": "mask_minus_inf",
        "cells": {"ex4_additive_mask": [("torch.finfo(dtype).min)", "float(\"-inf\"))")]},
        "loses": ["test_ex4_additive_mask"],
    },
    {   # creates the bias on the CPU whatever the mask's device (a model on a GPU gets a mask on the GPU)
        "name": "mask_ignores_device",
        "cells": {"ex4_additive_mask": [("torch.zeros(keep.shape, dtype=dtype, device=keep.device)",
                                         "torch.zeros(keep.shape, dtype=dtype)")]},
        "loses": ["test_ex4_additive_mask"],
    },
    {   # bias on the query axis (B, 1, S, 1) instead of the key axis (B, 1, 1, S)
        "name": "mask_query_axis",
        "cells": {"ex4_additive_mask": [("return bias[:, None, None, :]", "return bias[:, None, :, None]")]},
        "loses": ["test_ex4_additive_mask"],
    },
]

# Issue 11 audit: a wrong answer that earned full marks before the contract named it
VARIANTS += [
    {   # "words of one character have no pair": deletes them from the caller's word_counts (same merges)
        "name": "bpe_deletes_single_character_words_in_place",
        "cells": {"ex2_learn_bpe": [("    symbols = sorted({ch for word in word_counts for ch in word})\n",
                                     "    for w in [w for w in word_counts if len(w) < 2]:\n"
                                     "        del word_counts[w]\n"
                                     "    symbols = sorted({ch for word in word_counts for ch in word})\n")]},
        "loses": ["test_ex2_learn_bpe"],
    },
]
