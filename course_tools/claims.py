"""Claims are outputs: every number the prose quotes is printed by the notebook, or marked as a quote.

Two checks, run on every chapter by ``tests/test_claims.py``:

* :func:`unbacked_numbers` — each decimal number written in a markdown cell of a solution
  notebook (the model answers included) must appear, at the precision it is quoted with, in
  that notebook's committed outputs or in its code: some number there, rounded to as many
  decimals as the quote has, equals it (``1.91`` is backed by a printed ``1.907``, ``0.67`` by
  ``0.669``; ``2.568`` is not backed by ``2.57``). A number that comes from elsewhere — the
  book, another machine, a paper — is marked as a quote and then not checked:

  - a blockquote line (``> …``) or a sentence that says where it is from (``Book §``, ``the book``,
    ``quoted``, ``measured on``, ``H100``/``T4``/``A100``, ``[source``),
  - or an inline marker right after it: ``1.06 s[^q]`` / ``(quote)``.

  Numbers inside LaTeX (``$…$``), inline code and links are formulas, names and addresses, not
  claims, and are skipped, as are version numbers (``5.0.1``) and section numbers (``§4.6``).
* :func:`unasked_answers` — every hand-graded answer cell of a student notebook (a markdown cell
  nbgrader replaces with "YOUR ANSWER HERE") is preceded by the question it answers, in a locked
  markdown cell: a student who opens the notebook sees what to answer.
"""
from __future__ import annotations

import re
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from course_tools.grading.cells import _meta

NUMBER = re.compile(r"(?<![\w.§/–-])[-−]?\d+\.\d+(?:[eE][-−+]?\d+)?(?![\w.]*\d)")  # 0.25, 5.2e-05
OUT_NUMBER = re.compile(r"[-−]?\d{1,3}(?:,\d{3})+(?:\.\d+)?|[-−]?\d+\.\d+(?:[eE][-+]?\d+)?|[-−]?\d+(?:[eE][-+]?\d+)?")
# what a number right before says it is not a measured claim: a section, a version
NOT_A_CLAIM_BEFORE = re.compile(r"(?:§|\bsections?\s|\bSections?\s|\bchapters?\s|\bversion\s|\bv|"
                                r"\b[Ss]e[çc](?:ão|ões)\s|\b[Cc]ap[íi]tulos?\s|\bvers[ãa]o\s|"   # the pt-BR edition
                                r"\b(?:transformers|torch|trl|peft|nbgrader|bitsandbytes|Python|gguf|numpy)`?\s)$")
SCALE_AFTER = re.compile(r"^\s*(?:(%)|(k|K|mil)\b|(M|milh[õo]es|milh[ãa]o)\b|(B|G|bilh[õo]es|bilh[ãa]o)\b)")  # pt-BR words too
QUOTE_LINE = re.compile(r"book §|\(book|quoted|measured on|\bthe book\b|\bthe book's|\b(?:H100|H200|A100|T4)\b|"
                        r"\[source|\bseed\b §|according to|reports?\b|the paper|"
                        # the same markers in the pt-BR edition (course_tools/translation.py)
                        r"livro §|\(livro|\bo livro\b|\bdo livro\b|\bno livro\b|citad[oa]s?\b|medid[oa]s? (?:em|num|numa)\b|"
                        r"segundo o\b|de acordo com|relat[óo]rio|\bo artigo\b|\[fonte", re.I)
QUOTE_AFTER = re.compile(r"^\s*(?:[%×x]|s|ms|nats|bits|GB|GiB|MiB)?\s*(?:\[\^q\]|\(quote\)|\(cita[çc][ãa]o\))")
SKIP_SPANS = re.compile(r"\$\$.*?\$\$|\$[^$\n]+\$|`[^`\n]*`|\]\([^)]*\)|https?://\S+", re.S)


SENTENCE_END = re.compile(r"(?<=[.!?;])\s+(?=[A-ZÁÀÂÃÉÊÍÓÔÕÚÇ*(\"'0-9])")


def _md_numbers(text: str) -> list[tuple[str, Decimal]]:
    """``(number as written, scale)`` for the decimal numbers a markdown text quotes as claims.

    Works sentence by sentence: a sentence that says where its numbers come from (``QUOTE_LINE``)
    is a quote; blockquote lines are quotes. Skips formulas, code, links, headings' section
    numbers, sections and versions. ``scale`` is what the unit after the number multiplies it by
    (``%`` 0.01, ``k``, ``M``, ``B``).
    """
    found: list[tuple[str, Decimal]] = []
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith(">")]
    lines = [re.sub(r"^\s*#+\s*[\d.]+", lambda m: " " * len(m.group(0)), ln) for ln in lines]   # "### 4.1 Title"
    for sentence in SENTENCE_END.split(" ".join(lines)):
        if QUOTE_LINE.search(sentence):
            continue
        clean = SKIP_SPANS.sub(lambda m: " " * len(m.group(0)), sentence)
        for m in NUMBER.finditer(clean):
            after = clean[m.end():]
            if QUOTE_AFTER.match(after) or NOT_A_CLAIM_BEFORE.search(sentence[:m.start()]):
                continue
            u = SCALE_AFTER.match(after)
            scale = Decimal(1)
            if u:
                scale = {1: Decimal("0.01"), 2: Decimal(10) ** 3, 3: Decimal(10) ** 6, 4: Decimal(10) ** 9}[u.lastindex]
            found.append((m.group(0).replace("−", "-"), scale))
    return found


def _decimals(s: str) -> int:
    return len(s.split(".")[1]) if "." in s else 0


def _matches(quoted: str, candidates: set[Decimal], scale: Decimal = Decimal(1)) -> bool:
    """Some candidate, rounded to the quoted precision, is the quoted number (as written, or times
    ``scale``: "46.7 B" is backed by a printed 46,702,792,704, "3.4 %" by 3.4 or by 0.034)."""
    if scale != 1 and _matches(quoted, {c / scale for c in candidates}):
        return True
    mantissa, _, exponent = quoted.lower().partition("e")   # "5.2e-05": the step is 1e-06
    q = Decimal(quoted)
    step = Decimal(1).scaleb(-_decimals(mantissa) + int(exponent or 0))
    for c in candidates:
        if abs(abs(c) - abs(q)) > step:
            continue
        for mode in (ROUND_HALF_EVEN, ROUND_HALF_UP):
            try:
                if abs(c).quantize(step, rounding=mode) == abs(q):
                    return True
            except InvalidOperation:
                pass
    return False


def _output_text(cell: Any) -> str:
    parts: list[str] = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(out.get("text", ""))
        elif out.get("output_type") in ("execute_result", "display_data"):
            data = out.get("data", {})
            for kind in ("text/plain", "text/markdown", "text/html"):
                if kind in data:
                    v = data[kind]
                    parts.append("".join(v) if isinstance(v, list) else v)
    return "\n".join(parts)


def backing_numbers(nb: Any) -> set[Decimal]:
    """Every number printed in the notebook's outputs or written in its code."""
    vals: set[Decimal] = set()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for text in (_output_text(cell), cell.source):
            for s in OUT_NUMBER.findall(text):
                try:
                    vals.add(Decimal(s.replace("−", "-").replace(",", "")))
                except InvalidOperation:
                    pass
    return vals


def unbacked_numbers(nb: Any) -> list[tuple[int, str, str]]:
    """``(cell index, number, line)`` for each quoted decimal that no output or code backs."""
    backing = backing_numbers(nb)
    problems = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            continue
        for num, scale in _md_numbers(cell.source):
            if not _matches(num, backing, scale):
                at = cell.source.find(num)
                problems.append((i, num, cell.source[max(0, at - 80):at + 80].replace("\n", " ")))
    return problems


def unasked_answers(student_nb: Any) -> list[str]:
    """Grade ids of hand-graded answer cells not preceded by a locked markdown question cell."""
    bad = []
    cells = student_nb.cells
    for i, cell in enumerate(cells):
        meta = _meta(cell)
        if cell.cell_type == "markdown" and meta.get("solution") and meta.get("grade"):
            prev = cells[i - 1] if i else None
            ok = (prev is not None and prev.cell_type == "markdown" and _meta(prev).get("locked")
                  and len(prev.source.strip()) > 40)
            if not ok:
                bad.append(meta.get("grade_id", f"cell {i}"))
    return bad
