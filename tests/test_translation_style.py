"""The pt-BR edition writes numbers the Brazilian way and quotes its sources in their own words
(issue 47; locale/pt_BR/GLOSSARY.md, section 3).

* **Numbers.** A number with English thousands commas ("1,899 MiB") reads in Brazil as a decimal
  (1.9 MiB). The pt-BR prose — every markdown block of the chapter catalogues and of the built
  edition, outside inline code, formulas, fenced code and links — writes thousands with a space
  ("1 899"); numbers inside code and printed outputs stay as Python prints them. The protected-number
  check of ``course_tools.translation`` compares digit runs, so "1 899" is the same number as the
  English "1,899"; :func:`same_number` states the rule, including the one place a decimal comma is
  right: a Portuguese source quoted in its own words ("5,4 milhões", note 003).
* **Quotations.** A quoted span ("…", “…”, «…») in a sentence that cites the book (Livro §x.y,
  "o livro") or a note (nota 00N, "a nota complementar") is a quotation: it must occur, word for
  word, in the text it cites. The English edition's Portuguese quotations (the book's "relativamente",
  note 002's section titles) are held to the same rule. The seeds are not in the repository, so
  ``locale/pt_BR/sources/excerpts.md`` keeps the few sentences quoted (each with its seed and
  line); a maintainer checks the excerpts against the seed texts, word for word, with
  ``python tests/test_translation_style.py ../shared/seeds`` (:func:`excerpt_problems`).
"""
from __future__ import annotations

import glob
import re
import unicodedata
from pathlib import Path

import nbformat
import pytest

from course_tools import translation as tr

LANG = "pt_BR"
ROOT = Path(__file__).resolve().parent.parent
EXCERPTS = ROOT / "locale" / LANG / "sources" / "excerpts.md"
CHAPTERS = sorted(Path(p).parent.name for p in glob.glob(str(ROOT / "chapters" / "*" / "*.py")))

# --- numbers --------------------------------------------------------------------------------------
# What is not prose: fenced code, inline code, formulas, link targets and bare URLs.
_NOT_PROSE = re.compile(r"^[ \t]*(```|~~~)[^\n]*\n.*?^[ \t]*\1[ \t]*$|`[^`]+`|\$\$.+?\$\$|\$[^$]+\$"
                        r"|\]\([^)\s]+\)|https?://[^\s)>\]]+", re.M | re.S)
# 1,899 / 123,653,376 / 25,048.5 — not a list "1, 2" (a space follows the comma), not "0.5,0.7".
ENGLISH_THOUSANDS = re.compile(r"(?<![\w.,])\d{1,3}(?:,\d{3})+(?![\d])")
_THIN = "\u00a0\u2009\u202f"


def prose(text: str) -> str:
    """``text`` with code, formulas and link targets blanked out."""
    return _NOT_PROSE.sub(" ", text)


def english_thousands(text: str) -> list[str]:
    """Numbers written with English thousands commas in the prose of ``text``."""
    return ENGLISH_THOUSANDS.findall(prose(text))


def same_number(english: str, brazilian: str) -> bool:
    """Whether the pt-BR ``brazilian`` writes the number the English ``english`` writes.

    Thousands: a comma becomes a space (normal, no-break or thin): "2,048" ~ "2 048". Decimals keep
    their point ("0.221"), except in a Portuguese source quoted in its own words, where the source's
    decimal comma stands: "5.4" ~ "5,4". Never "2.048" for 2,048 (a Brazilian reads 2.048 as 2048,
    but the glossary keeps the point for decimals only, so that a number reads one way everywhere).
    """
    if re.fullmatch(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?", english):        # English thousands commas
        return (re.fullmatch(r"\d{1,3}(?:[ " + _THIN + r"]\d{3})+(?:\.\d+)?", brazilian) is not None
                and re.sub(f"[ {_THIN}]", "", brazilian) == english.replace(",", ""))
    if re.fullmatch(r"\d+,\d+", brazilian):                          # a quoted source's decimal comma
        return brazilian.replace(",", ".") == english
    return brazilian == english


def _po_entries():
    for ch in CHAPTERS:
        path = tr.catalogue_path(ch, LANG, ROOT)
        for m in tr.read_catalogue(path):
            if m.id and m.string:
                yield ch, m


@pytest.mark.parametrize("english, brazilian, same", [
    ("1,899", "1 899", True), ("46,702,792,704", "46 702 792 704", True), ("2,048", "2\u202f048", True),
    ("5.4", "5,4", True), ("0.221", "0.221", True),
    ("2,048", "2.048", False), ("2,048", "2048", False), ("1,899", "1,899 ", False), ("0.221", "0,2210", False),
])
def test_same_number_rule(english, brazilian, same):
    assert same_number(english, brazilian) is same


def test_thousands_commas_are_caught_outside_code_only():
    text = "O estado ocupa 1,899 MiB; `print(f'{n:,}')` imprime `1,899`, $1,000$ fica, a lista 1, 2, 3 também."
    assert english_thousands(text) == ["1,899"]
    assert english_thousands("25 048 ± 1 162 tokens/s, 0.241 %, [0.758, 1.000]") == []
    # the protected-number check sees the same digits in "1,899" and "1 899"
    assert tr.protected_problems("uses 1,899 MiB", "usa 1 899 MiB") == []
    assert tr.protected_problems("uses 1,899 MiB", "usa 1.899 MiB")


def test_no_english_thousands_commas_in_pt_br_prose():
    bad = [f"{ch}: {n!r} in {m.string[:80]!r}" for ch, m in _po_entries() for n in english_thousands(m.string)]
    for ch in CHAPTERS:
        for kind in ("solutions", "notebooks"):
            nb = nbformat.read(ROOT / LANG / kind / ch / f"{ch}.ipynb", as_version=4)
            bad += [f"{LANG}/{kind}/{ch} cell {i}: {n!r}" for i, c in enumerate(nb.cells)
                    if c.cell_type == "markdown" for n in english_thousands(c.source)]
    assert not bad, "write thousands with a space in pt-BR prose (GLOSSARY.md 3.3: \"2,048\" -> \"2 048\"):\n" + "\n".join(bad)


# --- the glossary's "never" ------------------------------------------------------------------------
# GLOSSARY.md: raise `ValueError` -> "lance um `ValueError`", "Nunca 'levante'" (a calque of *raise*).
RAISE_CALQUE = re.compile(r"\b[Ll]evant(?:e|a|am|ar|ará|ando)\b(?=[^.]{0,40}?(?:Error\b|exce[çc]ão|exce[çc]ões|\berro\b))")


def test_raise_calque_is_caught():
    assert RAISE_CALQUE.search("Levante um `ValueError` quando `tau` ≤ 0.")
    assert RAISE_CALQUE.search("a função levanta uma exceção")
    assert not RAISE_CALQUE.search("Lance um `ValueError`; levantamos os dados do corpus.")


def test_raise_is_lancar_not_levantar():
    messages = [("course_utils", m) for m in tr.read_catalogue(tr.catalogue_path(tr.MESSAGES_DOMAIN, LANG, ROOT))
                if m.id and m.string]
    bad = [f"{ch}: {m.string[max(0, x.start() - 30):x.end() + 40]!r}" for ch, m in [*_po_entries(), *messages]
           for x in RAISE_CALQUE.finditer(m.string)]
    assert not bad, "GLOSSARY.md: raise `ValueError` -> \"lance um `ValueError`\", never \"levante\":\n" + "\n".join(bad)


def test_sections_are_capitalised():
    """GLOSSARY.md: "Section 2 (of the notebook) | Seção 2 | Sempre com maiúscula"."""
    lower = re.compile(r"\bseç(?:ão|ões) \d")
    bad = [f"{ch}: {m.string[max(0, x.start() - 30):x.end() + 20]!r}" for ch, m in _po_entries()
           for x in lower.finditer(m.string)]
    assert not bad, "write \"Seção N\" (GLOSSARY.md):\n" + "\n".join(bad)


# --- quotations -----------------------------------------------------------------------------------
_QUOTE = re.compile(r'"([^"\n]*(?:\n[^"\n]*)*?)"|“([^”]*?)”|«([^»]*?)»')
# What says a sentence cites a source, and which one: the book (004) or a note (000-003).
_CITES_BOOK = re.compile(r"\b[Ll]ivro\b(?!-texto)|§\s?\d|\bSíntese\b|\bBook\b|\bthe book\b")
_CITES_NOTE = re.compile(r"\b[Nn]otas?\b(?: complementar(?:es)?)?(?: (00\d))?|\b[Ss]eeds?\b(?: (00\d))?|\b[Nn]otes?\b(?: (00\d))?"
                         r"|\b(?:Lema|Teorema|Corolário|Lemma|Theorem|Corollary) \d")
# The book's companion notebooks (github.com/brunoleomenezes/MC-CD05), quoted by chapter 09.
_CITES_COMPANION = re.compile(r"notebook complementar|companion")
# The note each chapter calls "a nota complementar" (or "the seed", "Lema 6") without a number.
CHAPTER_NOTE = {"03": "001", "04": "000", "06": "002", "10": "003"}
# Quoted words that cite nothing though a source is named nearby: the course's own labels, idioms
# and a made-up summary to be judged. Each is the English block's phrase, translated.
NOT_QUOTATIONS = {
    "03": {"quanto de cada entrada foi recuperado"},        # how the course reads its own output
    "05": {"valor do livro"},                                # the label the code prints ("book value")
    "06": {"Sem o $1/\\sqrt{d_k}$, os gradientes da atenção explodem exponencialmente em $d_k$; "
           "a escala existe para impedir a explosão."},  # a classmate's summary, to be judged
    "07": {"os ricos ficam mais ricos"},                     # an idiom ("rich get richer"), not the book's
    "13": {"longe demais"},                                  # the course's "too far" DPO run
}
# Portuguese, not English (for the English edition's quotations).
_PORTUGUESE = re.compile(r"[ãõçáéíóúâêôàÃÕÇÁÉÍÓÚÂÊÔ]|\b(?:de|da|das|dos|que|uma|com|para|pelo|pela|ao)\b|"
                         r"\b\w+(?:mente|ção|ções)\b")
_SUPERSCRIPT = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻", "0123456789-")


def normalise(text: str) -> str:
    """Text compared word for word: markdown emphasis, code ticks, ``$`` and line breaks do not count,
    nor case, nor the kind of quote mark, dash or space; a formula's `\\times` is the sign ×."""
    text = unicodedata.normalize("NFC", text)
    text = re.sub(r"[⁰¹²³⁴⁵⁶⁷⁸⁹⁻]+", lambda m: "^" + m.group(0).translate(_SUPERSCRIPT), text)
    text = text.replace("\\times", "×").replace("−", "-").replace("“", '"').replace("”", '"').replace("’", "'").replace("==", "")
    text = re.sub(r"[*`$]", "", text)
    text = re.sub(f"[\\s{_THIN}]+", " ", text)
    return text.strip().lower()


def _sentence(block: str, start: int, end: int) -> str:
    """The sentence (or list item) around ``block[start:end]``."""
    left = max(block.rfind(". ", 0, start), block.rfind("\n*", 0, start), block.rfind("\n-", 0, start),
               block.rfind("\n|", 0, start), block.rfind("\n\n", 0, start))
    ends = [i for i in (block.find(". ", end), block.find("\n*", end), block.find("\n|", end)) if i >= 0]
    return block[left + 1:min(ends) if ends else len(block)]


def quotations(block: str, chapter: str, english: str | None = None) -> list[tuple[str, set[str]]]:
    """``(quoted text, the seeds it may come from)`` for each quotation of a source in ``block``.

    ``english``: the English block a pt-BR ``block`` translates; a span copied from it unchanged
    (example text the code reads, "teddy reads", a printed label) is not a quotation. Without it
    ``block`` is English, and only its Portuguese spans are quotations.
    """
    out = []
    masked = re.sub(r"`[^`]+`", lambda m: "`" + "_" * (len(m.group(0)) - 2) + "`", block)  # quotes in code
    for m in _QUOTE.finditer(masked):
        q = block[m.start() + 1:m.end() - 1]
        if len(q.strip()) < 2 or not re.search(r"[^\W\d_]{2,}", prose(q)):
            continue
        if english is not None and q in english:
            continue
        if english is None and not _PORTUGUESE.search(prose(q)):
            continue
        sentence = _sentence(masked, m.start(), m.end())
        sources: set[str] = set()
        if _CITES_BOOK.search(sentence.replace(m.group(0), " ")):
            sources.add("004")
        for n in _CITES_NOTE.finditer(sentence.replace(m.group(0), " ")):
            num = n.group(1) or n.group(2) or n.group(3)
            sources.add(num or CHAPTER_NOTE.get(chapter[:2], "000|001|002|003"))
        if _CITES_COMPANION.search(sentence):
            sources.add("cd05")
        if " ".join(q.split()) in {" ".join(x.split()) for x in NOT_QUOTATIONS.get(chapter[:2], ())}:
            continue
        if sources:
            out.append((q, {s for x in sources for s in x.split("|")}))
    return out


def read_excerpts(path: Path = EXCERPTS) -> list[tuple[str, int, str]]:
    """``(seed, line, text)`` for each excerpt of ``locale/pt_BR/sources/excerpts.md``: a heading
    ``### 004:3623`` (seed number, line of the seed file), then the excerpt, word for word."""
    out, seed, line, buf = [], None, 0, []
    for ln in path.read_text(encoding="utf-8").splitlines() + ["### end:0"]:
        h = re.fullmatch(r"### (\d{3}|cd05|end):(\d+)", ln.strip())
        if h:
            if seed and "".join(buf).strip():
                out.append((seed, line, "\n".join(buf).strip()))
            seed, line, buf = h.group(1), int(h.group(2)), []
        elif seed:
            buf.append(ln)
    return out


def quoted_in(q: str, seeds: set[str], excerpts: list[tuple[str, int, str]]) -> bool:
    """Whether ``q`` (parts around an ellipsis each) occurs in an excerpt of one of ``seeds``."""
    texts = [normalise(t) for s, _, t in excerpts if s in seeds]
    parts = [normalise(p).strip(" .,;:") for p in re.split(r"…|\.\.\.|\[\.\.\.\]", q)]
    return all(any(p in t for t in texts) for p in parts if p)


def _all_quotations():
    """``(where, quote, seeds)`` for every quotation of a source in both editions' prose."""
    for ch, m in _po_entries():
        for q, seeds in quotations(m.string, ch, english=m.id):
            yield f"pt-BR {ch}: {m.string[:60]!r}", q, seeds
    for ch in CHAPTERS:
        for m in tr.chapter_template(ch, ROOT):
            if m.id:
                for q, seeds in quotations(m.id, ch):
                    yield f"English {ch}: {m.id[:60]!r}", q, seeds


def test_quotation_detection():
    pt = 'O Livro §8.5.4 avisa: "Se uma métrica muda muito com pequenas alterações de prompt". Já "top-p" é rótulo.'
    en = 'The book warns: "if a metric changes a lot". Already "top-p" is a label.'
    assert quotations(pt, "13", english=en) == [("Se uma métrica muda muito com pequenas alterações de prompt", {"004"})]
    assert quotations('A nota chama isso de "equivalente ao uso do embedding transposto".', "10", english="") == [
        ("equivalente ao uso do embedding transposto", {"003"})]
    assert quotations('(Book §8.2.1\'s "relativamente"); the "chosen" answer', "13") == [("relativamente", {"004"})]
    assert quotations('Sem fonte citada: "uma frase qualquer".', "13", english="") == []
    ex = [("004", 1, "Se uma métrica muda muito com pequenas alterações de prompt, ela é um sinal fraco.")]
    assert quoted_in("se uma métrica muda muito … ela é um sinal fraco", {"004"}, ex)
    assert not quoted_in("se uma métrica muda muito com pequenas mudanças de prompt", {"004"}, ex)
    assert not quoted_in("se uma métrica muda muito", {"003"}, ex)


def test_every_quotation_is_in_the_source_it_cites():
    excerpts = read_excerpts()
    bad = [f"{where}\n    \"{' '.join(q.split())}\" (seed {'/'.join(sorted(seeds))})"
           for where, q, seeds in _all_quotations() if not quoted_in(q, seeds, excerpts)]
    assert not bad, ("quotations not found, word for word, in the text they cite "
                     "(quote the source's own words; add the sentence to locale/pt_BR/sources/excerpts.md "
                     "with its seed and line):\n" + "\n".join(bad))


def excerpt_problems(d: Path) -> list[str]:
    """Excerpts that are not on the line of the seed (in folder ``d``) their heading names.

    Not a test: the seed texts live outside the repository (``../shared/seeds``), so CI cannot run
    it. A maintainer who adds or edits an excerpt runs it:
    ``python tests/test_translation_style.py ../shared/seeds`` (exit 1 and the list when one is off)."""
    bad = []
    for seed, line, text in read_excerpts():
        if not seed.isdigit():   # the companion notebook: not among the seeds
            continue
        files = sorted(d.glob(f"{seed}_*.md"))
        if not files:
            bad.append(f"{seed}: no seed {seed} in {d}")
            continue
        lines = files[0].read_text(encoding="utf-8").splitlines()
        if not (0 < line <= len(lines) and all(" ".join(p.split()) in " ".join(lines[line - 1].split())
                                                for p in text.split("\n[…]\n"))):
            bad.append(f"{seed}:{line}: {text[:80]!r}")
    return bad


if __name__ == "__main__":
    import sys

    problems = excerpt_problems(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT.parent / "shared" / "seeds")
    print("\n".join(problems) or "every excerpt is on the line of the seed it names")
    sys.exit(1 if problems else 0)
