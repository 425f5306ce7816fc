"""A null result is read by its interval, never by power or a minimum detectable effect.

A run that finds no significant difference says what its confidence interval says: every effect
inside the interval is compatible with the data, every effect outside it is excluded. The power of
a test, or the minimum detectable effect (MDE, :func:`course_utils.stats.paired_mde`), sizes the
*next* run; it does not say what *this* run excludes. "Power 0.8 at an effect of 0.250, so probably
no effect of 0.250 or more" is wrong whenever 0.250 lies inside the interval (issue 49: chapter 09's
+0.125 [−0.051, +0.301] and chapter 13's 14/24 [0.366, 0.779] against 0.75 both did this).

:func:`power_readings` flags the phrasings of that mistake in prose, English and Portuguese:

* "no effect of X or more", "probably no effect" (the MDE read as a bound), anywhere;
* what a run can *detect* read as what it found: "only a large difference could show", "out of this
  grid's reach", "what 24 pairs can detect" (pt: "só uma diferença grande apareceria", "fora do alcance",
  "o que 24 pares conseguem detectar"), anywhere;
* a non-negated "rule(s) out" / "exclude(s)" (pt: "descarta", "exclui", "afasta") in a sentence
  that mentions power or an MDE, or right after one that does.

``tests/test_null_results.py`` runs it on the markdown of every chapter of both editions.
"""
from __future__ import annotations

import re

# the MDE read as a bound
_BOUND = re.compile(r"\b(?:probably no effect|no effect of [^.;]{1,40}? or (?:more|larger)|"
                    r"provavelmente nenhum efeito|nenhum efeito de [^.;]{1,40}? ou mais)\b", re.I)
# what a run could detect, read as what it found (the MDE in other words)
_REACH = re.compile(r"\b(?:only an? (?:large|larger|big|bigger) (?:difference|effect|change|gain) (?:could|would|can|might) "
                    r"(?:show|appear|be seen|be detected)|out of (?:this|the|our) (?:grid|run|experiment|test|sample|design)(?:'s|’s) reach|"
                    r"beyond (?:this|the) (?:grid|run|experiment|test|sample)(?:'s|’s) reach|what [^.;]{1,40}? can detect|"
                    r"só uma diferença (?:grande|maior) (?:apareceria|poderia aparecer|seria vista|seria detectada)|"
                    r"(?:fora do|além do) alcance d(?:esta|este|a|o) (?:grade|execução|experimento|teste|amostra|desenho)|o que [^.;]{1,40}? (?:pode|podem|consegue|conseguem) detectar)", re.I)
_EXCLUDES = re.compile(r"\b(?:rul(?:e|es|ed|ing) out|exclud(?:e|es|ed)|descart(?:a|am|ou|aram)|"
                       r"exclu(?:i|em|iu|íram)|afast(?:a|am|ou))\b", re.I)
_NEGATION = re.compile(r"\b(?:not|cannot|can't|nor|never|n't|não|nem|nunca)\b[\w\s,]{0,12}$", re.I)
_POWER = re.compile(r"\b(?:power|MDE|minimum detectable|paired_mde|poder(?: estatístico)?|"
                    r"efeito mínimo detectável)\b", re.I)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"“*(\-])|\n\s*\n|\n\s*[-*] ")


def sentences(text: str) -> list[str]:
    """The sentences (and list items) of a markdown text, in order."""
    return [s for s in (x.strip() for x in _SENTENCE_END.split(text)) if s]


def power_readings(text: str) -> list[str]:
    """Sentences of ``text`` that read a null result by power or an MDE (empty when none)."""
    out = []
    sents = sentences(text)
    for i, s in enumerate(sents):
        if _BOUND.search(s) or _REACH.search(s):
            out.append(s)
            continue
        near_power = _POWER.search(s) or (i > 0 and _POWER.search(sents[i - 1]))
        if not near_power:
            continue
        for m in _EXCLUDES.finditer(s):
            if not _NEGATION.search(s[:m.start()]):
                out.append(s)
                break
    return out
