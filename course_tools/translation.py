"""Editions in other languages: the text through gettext catalogues, the code exactly once.

The English chapter (``chapters/NN/NN.py`` built into ``solutions/NN/NN.ipynb``) is the only source
of code, tests, hidden checks and nbgrader metadata. An edition in another language (today
``pt_BR``, Brazilian Portuguese, the language of the book the course follows) is *built* from it:

* **Notebook text.** Every markdown cell is cut into blocks (paragraphs, lists, tables, headings;
  a fenced code block or a ``$$`` display stays whole). Each block with words in it is one entry of
  the chapter's catalogue ``locale/<lang>/LC_MESSAGES/<chapter>.po``: ``msgid`` the English block,
  ``msgstr`` its translation, a comment naming the cell id. Catalogues are read, merged and written
  with Babel (``babel.messages``), the maintained Python library for gettext catalogues: when the
  English text changes, ``llm-course translate update`` merges the new template and Babel marks the
  changed entries *fuzzy* (stale) with the previous English text beside them (``#| msgid``); an
  edition is built only from translated, non-fuzzy entries, and the coverage report says which are
  stale.
* **Messages of the checks.** The visible tests print what :mod:`course_utils.grading` says when a
  check fails; those templates and the names the tests give to what they check are the entries of
  ``locale/<lang>/LC_MESSAGES/course_utils.po``, compiled into ``course_utils/locale`` and looked up
  at run time (:mod:`course_utils.translation`), so the test code is the same in every edition.
* **The edition's notebooks.** ``pt_BR/solutions/NN/NN.ipynb`` is the executed English solution
  notebook with its markdown translated (the outputs are the English run's, byte for byte: the
  code is identical, so the numbers are the same run), the Colab badge pointing at the edition,
  and one line added to the setup cell (``os.environ["LLM_COURSE_LANG"] = "pt_BR"``). The student
  notebooks ``pt_BR/notebooks/NN/NN.ipynb`` are generated from it by nbgrader, as ``notebooks/`` is.

Grading is one class, one gradebook, one assignment per chapter: a submission of either edition
has the same grade ids, code and hidden checks; the autograder restores a locked cell of the
edition the student handed in from that edition's trusted release
(``course_tools/grading/overwrite.py``). ``tests/test_translation.py`` checks that the catalogues
are current, the editions' code cells and metadata byte-identical, every inline code span, formula,
link and number intact in every entry, every entry translated, and grades a Portuguese submission
with real nbgrader. A class is *released* one edition: ``llm-course edition pt_BR`` makes nbgrader's
release (the command and Formgrader's button) hand out ``pt_BR/notebooks`` (``course_tools/editions.py``,
``tests/test_edition_class.py``).
"""
from __future__ import annotations

import ast
import copy
import io
import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import nbformat

from course_utils.paths import repo_root

# which editions exist, where their notebooks are, the chapters and nbgrader's generation step:
# course_tools/editions.py (this module never imports course_tools.release, which imports it)
from .editions import LANGUAGES, LOCALE, chapters, edition_answer_stub, edition_dir, editions, generate  # noqa: F401
MESSAGES_DOMAIN = "course_utils"
LANG_LINE = {"pt_BR": 'os.environ["LLM_COURSE_LANG"] = "pt_BR"  # edição em português: mensagens dos testes em português'}
_SETUP_IMPORT = "import importlib.util, os, subprocess, sys\n"
_BADGE_RE = re.compile(r"\[!\[Open In Colab\]\([^)]*\)\]\([^)]*\)")
_FENCE_RE = re.compile(r"^\s*(```|~~~)")
_LETTERS_RE = re.compile(r"[A-Za-z]{2,}")
# What must survive translation unchanged (d2l-book protects the same list): inline code, formulas,
# link targets and numbers. A translated entry must hold exactly the same multiset of each.
_FENCED_RE = re.compile(r"^[ \t]*(```|~~~)[^\n]*\n.*?^[ \t]*\1[ \t]*$", re.M | re.S)
_CODE_RE = re.compile(r"`[^`]+`")   # a code span may wrap onto the next line (CommonMark)
_MATH_RE = re.compile(r"\$\$.+?\$\$|\$[^$]+\$", re.S)   # inline math may wrap onto the next line too
_LINK_RE = re.compile(r"\]\(([^)\s]+)\)|(?<![(\w])(https?://[^\s)>\]]+)")
_FIELD_RE = re.compile(r"\{[a-z_]+\}")  # str.format fields of the checks' message templates
_NUMBER_RE = re.compile(r"(?<![\w.])\d+(?:\.\d+)*(?:[eE][-+]?\d+)?")
# the statement's marker of a graded clause (course_tools/clauses.py): an edition keeps every one
_CLAUSE_RE = re.compile(r"<!--\s*clause(?:-all)?:[^>]*-->")
# list items (a translation that drops a bullet drops content no other check sees: the number of
# items must match)
_ITEM_RE = re.compile(r"(?m)^[ \t]*(?:[-*+]|\d+\.)[ \t]+")
# A Portuguese source quoted in its own words keeps its decimal comma ("5,4 milhões", note 003): inside a
# quotation a comma between digits that does not start a group of exactly three is a decimal point.
_QUOTED_RE = re.compile(r'"[^"]*"|“[^”]*”|«[^»]*»')
_DECIMAL_COMMA_RE = re.compile(r"(?<![\d,.])(\d+),(\d{1,2}|\d{4,})(?![\d,.])")


def _source_decimals(text: str) -> str:
    """``text`` with the decimal commas of its quotations written as points ("5,4" -> "5.4")."""
    return _QUOTED_RE.sub(lambda m: _DECIMAL_COMMA_RE.sub(r"\1.\2", m.group(0)), text)
# The checks whose first argument (check_true: second) is a message a student reads.
_NAMED_CHECKS = {"check_close": 0, "check_equal": 0, "check_shape": 0, "check_type": 0, "to_numpy": 1,
                 "check_true": 1}
# course_utils.grading's message templates written in test cells: msg("… {field} …", field=…), passed("…")
_TEMPLATES = {"msg": 0, "passed": 0}
_MESSAGE_ARGS = {**_NAMED_CHECKS, **_TEMPLATES}   # where each function takes the message a student reads


class TranslationError(RuntimeError):
    """A catalogue or edition problem the maintainer must fix; the message says how."""


# --- blocks of a markdown cell -----------------------------------------------------------------
def split_blocks(text: str) -> tuple[list[str], list[str]]:
    """``text`` cut at blank lines into blocks, and the separators between them.

    A fenced code block and a ``$$`` display are never cut. ``join_blocks(*split_blocks(t)) == t``.
    """
    lines = text.split("\n")
    blocks: list[str] = []
    seps: list[str] = []
    cur: list[str] = []
    gap: list[str] = []
    fence = math = False
    lead = ""
    for line in lines:
        blank = line.strip() == ""
        if blank and not fence and not math:
            if cur:
                blocks.append("\n".join(cur))
                cur = []
            gap.append(line)
            continue
        if gap:
            if blocks:
                seps.append("\n" + "\n".join(gap) + "\n")
            else:
                lead = "\n".join(gap) + "\n"
            gap = []
        cur.append(line)
        if _FENCE_RE.match(line):
            fence = not fence
        elif not fence and line.count("$$") % 2 == 1:
            math = not math
    if cur:
        blocks.append("\n".join(cur))
    trail = ("\n" + "\n".join(gap)) if gap else ""
    return blocks, [lead, *seps, trail]


def join_blocks(blocks: list[str], seps: list[str]) -> str:
    """The inverse of :func:`split_blocks`."""
    out = seps[0]
    for i, b in enumerate(blocks):
        out += b + (seps[i + 1] if i + 1 < len(seps) - 1 else "")
    return out + seps[-1]


def _strip_protected(block: str) -> str:
    return _LINK_RE.sub(" ", _MATH_RE.sub(" ", _CODE_RE.sub(" ", block)))


def translatable(block: str) -> bool:
    """Whether a block holds words to translate (not a Colab badge, a fenced code block or pure math)."""
    if _BADGE_RE.search(block) and not _LETTERS_RE.search(_BADGE_RE.sub(" ", block)):
        return False
    if _FENCE_RE.match(block.split("\n", 1)[0]) and block.rstrip().endswith(("```", "~~~")):
        return False
    return bool(_LETTERS_RE.search(_strip_protected(block)))


def protected(text: str) -> dict[str, Counter]:
    """The parts of a block a translation must keep: code blocks, inline code, formulas, link
    targets, numbers, message fields, clause markers (``<!-- clause: id -->``), the number of list items."""
    blocks = [m.group(0) for m in _FENCED_RE.finditer(text)]
    text = _FENCED_RE.sub(" ", text)   # a fence (in a list item too) is not an inline span
    no_code = _CODE_RE.sub(" ", text)
    no_math = _MATH_RE.sub(" ", no_code)
    links = [a or b for a, b in _LINK_RE.findall(no_math)]
    plain = _LINK_RE.sub(" ", no_math)
    def norm(spans: list[str]) -> Counter:  # line breaks inside a span are free to move
        return Counter(" ".join(x.split()) for x in spans)

    return {"code blocks": Counter(blocks), "inline code": norm(_CODE_RE.findall(text)), "math": norm(_MATH_RE.findall(no_code)),
            "links": Counter(links), "numbers": Counter(_NUMBER_RE.findall(_source_decimals(plain))),
            "placeholders": Counter(_FIELD_RE.findall(plain)),
            "clause markers": norm(_CLAUSE_RE.findall(text)),
            "list items": Counter(["item"] * len(_ITEM_RE.findall(text)))}


def protected_problems(msgid: str, msgstr: str) -> list[str]:
    """How a translation changed what it must keep (empty when intact)."""
    want, got = protected(msgid), protected(msgstr)
    out = []
    for kind in want:
        if want[kind] != got[kind]:
            missing = sorted((want[kind] - got[kind]).elements())
            extra = sorted((got[kind] - want[kind]).elements())
            out.append(f"{kind}: missing {missing}, added {extra}")
    return out


# --- catalogues ---------------------------------------------------------------------------------
def catalogue_path(name: str, lang: str, root: Path | None = None) -> Path:
    """``locale/<lang>/LC_MESSAGES/<name>.po``."""
    return (root or repo_root()) / LOCALE / lang / "LC_MESSAGES" / f"{name}.po"


def _new_catalog(name: str, lang: str | None = None):  # -> babel.messages.catalog.Catalog
    from datetime import datetime, timezone

    from babel.messages.catalog import Catalog

    fixed = datetime(2026, 11, 27, tzinfo=timezone.utc)  # a fixed header: the files change only with their entries
    cat = Catalog(locale=lang, domain=name, project="llm-course", version="1", msgid_bugs_address="",
                  copyright_holder="llm-course contributors", charset="utf-8", fuzzy=False,
                  creation_date=fixed, revision_date=fixed, last_translator="llm-course contributors",
                  language_team="pt_BR")
    cat.header_comment = ("# Translations of the llm-course (see course_tools/translation.py and locale/pt_BR/GLOSSARY.md).\n"
                          "# msgid: one block of the English text; msgstr: its translation. Keep every `code`,\n"
                          "# $math$, link target and number exactly as in the msgid (tests/test_translation.py).")
    return cat


def chapter_template(chapter: str, root: Path | None = None):  # -> Catalog
    """The catalogue template of a chapter: one entry per translatable block of its markdown cells."""
    from .authoring import read_script, script_path

    nb = read_script(script_path(chapter, root))
    cat = _new_catalog(chapter)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            continue
        for block in split_blocks(cell.source)[0]:
            if translatable(block):
                old = cat.get(block)
                comments = [f"cell {cell['id']}"]
                if old is not None:
                    old.locations.append((f"{chapter}.ipynb", i))
                    old.auto_comments.extend(c for c in comments if c not in old.auto_comments)
                else:
                    cat.add(block, locations=[(f"{chapter}.ipynb", i)], auto_comments=comments)
    return cat


def _string_at(call: ast.Call, pos: int) -> str | None:
    if len(call.args) > pos and isinstance(call.args[pos], ast.Constant) and isinstance(call.args[pos].value, str):
        return call.args[pos].value
    return None


def _calls(source: str) -> list[tuple[str | None, ast.AST]]:
    """``(function name, node)`` of every call and ``raise`` in a cell's code (none if it is not Python)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    return [(node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None), node)
            if isinstance(node, ast.Call) else (None, node)
            for node in ast.walk(tree) if isinstance(node, (ast.Call, ast.Raise))]


def _literal_arguments(source: str) -> list[tuple[str, str]]:
    """``(function, literal)``: the string literals a cell's code hands to the checks and to ``msg`` /
    ``passed`` at the position :data:`_MESSAGE_ARGS` names."""
    return [(fn, s) for fn, node in _calls(source) if fn in _MESSAGE_ARGS
            for s in [_string_at(node, _MESSAGE_ARGS[fn])] if s]


def check_names(source: str) -> list[str]:
    """The literal messages a cell's code hands to the checks (``check_close("name", ...)`` ...) and
    to :mod:`course_utils.grading`'s ``msg`` / ``passed``."""
    return [s for _fn, s in _literal_arguments(source)]


def untranslatable_messages(source: str) -> list[str]:
    """What a test cell's visible part shows a student that no catalogue can translate.

    An f-string (or any built string) as a check's name or message, a ``print`` of text, a
    ``raise AssertionError`` with its own text: write ``msg("… {x} …", x=…)``, ``passed()`` and
    ``raise AssertionError(msg("…"))`` instead (:mod:`course_utils.grading`). The hidden part is not
    looked at: it only records, and the autograder writes its verdicts in the student's language.
    """
    out = []
    for fn, node in _calls(source.split("### BEGIN HIDDEN TESTS")[0]):
        if isinstance(node, ast.Call):
            pos = _MESSAGE_ARGS.get(fn)
            if pos is not None and len(node.args) > pos:
                arg = node.args[pos]
                literal = isinstance(arg, ast.Constant) and isinstance(arg.value, str)
                wrapped = isinstance(arg, ast.Call) and getattr(arg.func, "id", None) == "msg"
                if not literal and not (wrapped and fn not in _TEMPLATES):
                    out.append(f"line {node.lineno}: {fn}(...) gets a built string, {ast.unparse(arg)[:70]}")
            if fn == "print" and any(isinstance(a, (ast.Constant, ast.JoinedStr)) for a in node.args):
                out.append(f"line {node.lineno}: print of text ({ast.unparse(node)[:60]}): use passed()")
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
            arg = node.exc.args[0]
            if not (isinstance(arg, ast.Call) and getattr(arg.func, "id", None) == "msg"):
                out.append(f"line {node.lineno}: raise with its own text ({ast.unparse(arg)[:60]}): wrap it in msg()")
    return out


def message_templates(source: str) -> list[str]:
    """The templates a cell's code hands to ``msg("…", field=…)`` (their ``{fields}`` filled at run time)."""
    return [s for fn, s in _literal_arguments(source) if fn == "msg"]


# Where a student-visible message is written outside a kernel (the autograder's verdicts, the feedback
# page and its notes, the answer stubs, validate's report, what differs in a hidden check), each marked
# ``N_("…")`` or looked up as ``_t("…")`` where it is written.
MESSAGE_WRITERS = ("course_tools/grading/preprocessors.py", "course_tools/grading/feedback.py",
                   "course_tools/grading/i18n.py", "course_tools/grading/validate.py", "course_utils/records.py",
                   "course_tools/editions.py")


def messages_template(root: Path | None = None):  # -> Catalog
    """The template of ``course_utils.po``: the templates of course_utils.grading (``_tr("…")``), the
    messages :data:`MESSAGE_WRITERS` write outside a kernel (``N_("…")``, ``_t("…")``) and the literal
    names and ``msg`` templates the chapters' test cells give to their checks."""
    from babel.messages.extract import extract_from_file

    from .authoring import read_script, script_path

    root = root or repo_root()
    cat = _new_catalog(MESSAGES_DOMAIN)
    grading = root / "course_utils" / "grading.py"
    sources = [("course_utils/grading.py", {"_tr": None})] + [(rel, {"N_": None, "_t": None}) for rel in MESSAGE_WRITERS]
    for rel, keywords in sources:
        for lineno, message, comments, _ctx in extract_from_file("python", str(root / rel), keywords=keywords):
            if not isinstance(message, str):
                continue
            if message in cat:
                cat[message].locations.append((rel, lineno))
                continue
            cat.add(message, locations=[(rel, lineno)], auto_comments=comments,
                    flags=["python-brace-format"] if "{" in message else [])
    for chapter in chapters(root):
        nb = read_script(script_path(chapter, root))
        for i, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            for fn, name in _literal_arguments(cell.source):
                if name in cat:
                    cat[name].locations.append((f"{chapter}.ipynb", i))
                    continue
                if "{" in name and fn != "msg":   # braces outside msg(): not a template
                    continue
                cat.add(name, locations=[(f"{chapter}.ipynb", i)],
                        flags=["python-brace-format"] if "{" in name else [])
    return cat


def templates(root: Path | None = None) -> dict[str, object]:
    """Every catalogue's template, by catalogue name (the chapters and ``course_utils``)."""
    out: dict[str, object] = {ch: chapter_template(ch, root) for ch in chapters(root)}
    out[MESSAGES_DOMAIN] = messages_template(root)
    out[README_DOMAIN] = readme_template(root)
    return out


# --- the README's student and instructor paths -----------------------------------------------------
README_DOMAIN = "README"
# The sections of README.md the edition carries (each from its heading to the next heading).
README_SECTIONS = ("Quick start", "Editions", "For students", "For instructors", "A class, step by step",
                   "What the course guarantees about the exchange", "Run the class on a JupyterHub",
                   "A class larger than one machine")
_HEADING_RE = re.compile(r"^(#{1,6})\s+(.*?)\s*$")


def readme_sections(text: str) -> list[str]:
    """The README's title line and the listed sections, each from its heading to the next heading."""
    lines = text.split("\n")
    heads = [i for i, ln in enumerate(lines) if _HEADING_RE.match(ln)]
    out = [lines[0]] if lines and lines[0].startswith("# ") else []
    in_fence = False
    fenced: set[int] = set()
    for i, ln in enumerate(lines):
        if _FENCE_RE.match(ln):
            in_fence = not in_fence
        if in_fence:
            fenced.add(i)
    heads = [i for i in heads if i not in fenced]
    for k, i in enumerate(heads):
        title = _HEADING_RE.match(lines[i]).group(2)   # type: ignore[union-attr]
        if title in README_SECTIONS:
            end = heads[k + 1] if k + 1 < len(heads) else len(lines)
            out.append("\n".join(lines[i:end]).strip("\n"))
    return out


def readme_template(root: Path | None = None):  # -> Catalog
    """One entry per translatable block of the README sections the edition carries."""
    root = root or repo_root()
    cat = _new_catalog(README_DOMAIN)
    for section in readme_sections((root / "README.md").read_text(encoding="utf-8")):
        for block in split_blocks(section)[0]:
            if translatable(block) and block not in cat:
                cat.add(block, locations=[("README.md", 0)])
    cat.add(README_NOTE, locations=[("course_tools/translation.py", 0)])
    return cat


def readme_edition(lang: str, root: Path | None = None) -> str:
    """``README.<lang>.md``: the carried sections of README.md, translated block by block."""
    root = root or repo_root()
    table = _translations(README_DOMAIN, lang, root)
    parts = []
    for section in readme_sections((root / "README.md").read_text(encoding="utf-8")):
        blocks, seps = split_blocks(section)
        parts.append(join_blocks([table.get(b, b) for b in blocks], seps))
    note = table.get(README_NOTE, README_NOTE)
    return parts[0] + "\n\n" + note + "\n\n" + "\n\n".join(parts[1:]) + "\n"


README_NOTE = ("*This file is generated from the English README.md by `llm-course translate build` (its student and "
               "instructor paths, through `locale/pt_BR/LC_MESSAGES/README.po`); the other sections are in "
               "[README.md](README.md).*")


def read_catalogue(path: Path):  # -> Catalog
    """A ``.po`` file read with Babel."""
    from babel.messages.pofile import read_po

    with path.open("rb") as f:
        return read_po(f, abort_invalid=True)


def write_catalogue(cat, path: Path) -> None:
    """Write a catalogue as ``.po`` (entries in template order, no line wrapping: stable diffs).

    The course writes no translator comments (``# ...``) on entries: the cell is an automatic
    comment (``#.``). What Babel reads back as translator comments are the pieces of a fuzzy entry's
    previous English (``#| msgid``), which it wraps at 76 columns and cannot parse again; they are
    dropped here, so a fuzzy entry shows its previous English until it is translated, and no debris
    stays behind."""
    from babel.messages.pofile import write_po

    for message in cat:
        if message.id:
            message.user_comments = []
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    write_po(buf, cat, width=0, include_previous=True, sort_output=False, omit_header=False)
    path.write_bytes(buf.getvalue())


def merge(cat, template):  # -> Catalog
    """``cat`` updated to ``template`` by Babel: new blocks empty, changed blocks fuzzy (their old
    English kept as the previous msgid), vanished blocks dropped."""
    cat.update(template, no_fuzzy_matching=False, update_header_comment=False, keep_user_comments=True,
               update_creation_date=False)
    cat.obsolete.clear()
    return cat


def update(lang: str, root: Path | None = None, only: Iterable[str] | None = None) -> list[Path]:
    """Merge the current English templates into ``lang``'s catalogues; return those that changed.

    New English blocks become untranslated entries; a changed block is matched to its old entry
    and marked fuzzy (Babel's merge, with the old English text kept as ``#| msgid``); entries
    whose block disappeared are dropped.
    """
    root = root or repo_root()
    changed = []
    for name, template in templates(root).items():
        if only is not None and name not in only:
            continue
        path = catalogue_path(name, lang, root)
        if path.is_file():
            cat = merge(read_catalogue(path), template)
        else:
            cat = copy.deepcopy(template)
            cat.locale = lang  # type: ignore[attr-defined]
        before = path.read_bytes() if path.is_file() else b""
        write_catalogue(cat, path)
        if path.read_bytes() != before:
            changed.append(path)
    return changed


def stale_entries(chapter: str, lang: str, root: Path | None = None) -> list[str]:
    """English blocks of ``chapter`` with no current translation in ``lang`` (new, changed, or fuzzy)."""
    path = catalogue_path(chapter, lang, root)
    done = {m.id for m in _entries(read_catalogue(path)) if m.string and not m.fuzzy} if path.is_file() else set()
    return [m.id for m in _entries(chapter_template(chapter, root)) if m.id not in done]


@dataclass
class Coverage:
    """How much of one catalogue is translated."""

    name: str
    total: int
    translated: int
    fuzzy: int

    @property
    def untranslated(self) -> int:
        return self.total - self.translated - self.fuzzy

    @property
    def share(self) -> float:
        return self.translated / self.total if self.total else 1.0


def _entries(cat) -> list:
    return [m for m in cat if m.id]


def coverage(lang: str, root: Path | None = None) -> list[Coverage]:
    """Translated / fuzzy (stale) / untranslated entries of every catalogue of ``lang``."""
    root = root or repo_root()
    out = []
    for name in templates(root):
        path = catalogue_path(name, lang, root)
        if not path.is_file():
            out.append(Coverage(name, len(_entries(templates(root)[name])), 0, 0))
            continue
        entries = _entries(read_catalogue(path))
        fuzzy = sum(1 for m in entries if m.fuzzy)
        done = sum(1 for m in entries if m.string and not m.fuzzy)
        out.append(Coverage(name, len(entries), done, fuzzy))
    return out


def coverage_report(lang: str, root: Path | None = None) -> str:
    """A table of :func:`coverage`, one line per catalogue and a total."""
    rows = coverage(lang, root)
    lines = [f"{'catalogue':<34} {'entries':>7} {'done':>6} {'stale':>6} {'missing':>7} {'share':>7}"]
    for c in rows:
        lines.append(f"{c.name:<34} {c.total:>7} {c.translated:>6} {c.fuzzy:>6} {c.untranslated:>7} {c.share:>7.1%}")
    tot = Coverage("total", sum(c.total for c in rows), sum(c.translated for c in rows), sum(c.fuzzy for c in rows))
    lines.append(f"{'total':<34} {tot.total:>7} {tot.translated:>6} {tot.fuzzy:>6} {tot.untranslated:>7} {tot.share:>7.1%}")
    return "\n".join(lines)


def catalogue_problems(lang: str, root: Path | None = None) -> list[str]:
    """Catalogues out of date with the English sources, entries whose protected parts changed."""
    root = root or repo_root()
    problems = []
    for name, template in templates(root).items():
        path = catalogue_path(name, lang, root)
        rel = path.relative_to(root)
        if not path.is_file():
            problems.append(f"{rel} is missing: run `llm-course translate update`.")
            continue
        cat = read_catalogue(path)
        want = [m.id for m in _entries(template)]
        have = [m.id for m in _entries(cat)]
        if want != have:
            new = len(set(want) - set(have))
            gone = len(set(have) - set(want))
            problems.append(f"{rel} is out of date with the English source ({new} new or changed block(s), "
                            f"{gone} gone): run `llm-course translate update`, then translate the entries it "
                            "marks fuzzy or leaves empty.")
        for m in _entries(cat):
            if m.string and not m.fuzzy:
                for p in protected_problems(m.id, m.string):
                    first = m.id.split("\n", 1)[0][:70]
                    problems.append(f"{rel}: the translation of {first!r} changed its {p}")
    return problems


# --- messages: compiled for course_utils ---------------------------------------------------------
def mo_path(lang: str, root: Path | None = None) -> Path:
    """Where :mod:`course_utils.translation` reads the compiled messages."""
    return (root or repo_root()) / "course_utils" / "locale" / lang / "LC_MESSAGES" / f"{MESSAGES_DOMAIN}.mo"


def compiled_messages(lang: str, root: Path | None = None) -> bytes:
    """``course_utils.po`` compiled (``.mo``), translated non-fuzzy entries only."""
    from babel.messages.mofile import write_mo

    cat = read_catalogue(catalogue_path(MESSAGES_DOMAIN, lang, root))
    buf = io.BytesIO()
    write_mo(buf, cat, use_fuzzy=False)
    return buf.getvalue()


# --- the edition's notebooks -----------------------------------------------------------------------
def _translations(chapter: str, lang: str, root: Path) -> dict[str, str]:
    path = catalogue_path(chapter, lang, root)
    if not path.is_file():
        return {}
    return {m.id: m.string for m in _entries(read_catalogue(path)) if m.string and not m.fuzzy}


def edition_badge(chapter: str, lang: str, root: Path | None = None) -> str:
    """The Colab badge of the edition's student notebook."""
    from .colab import BADGE_IMG, repository

    repo = repository(root)
    return (f"[![Open In Colab]({BADGE_IMG})](https://colab.research.google.com/github/{repo.slug}/blob/"
            f"{repo.branch}/{lang}/notebooks/{chapter}/{chapter}.ipynb)")


def edition_setup(source: str, lang: str) -> str:
    """The English setup cell with the edition's language line after its first import."""
    if _SETUP_IMPORT not in source:
        raise TranslationError("setup cell without its import line (course_tools/colab.py writes it)")
    return source.replace(_SETUP_IMPORT, _SETUP_IMPORT + LANG_LINE[lang] + "\n", 1)


def translate_notebook(nb: nbformat.NotebookNode, chapter: str, lang: str,
                       root: Path | None = None) -> nbformat.NotebookNode:
    """The edition of an English notebook: markdown translated, badge and setup cell for ``lang``.

    Code cells, their outputs, ids and metadata are copied untouched. A block without a current
    translation stays in English (``llm-course translate status`` counts it).
    """
    root = root or repo_root()
    table = _translations(chapter, lang, root)
    out = copy.deepcopy(nb)
    badge = edition_badge(chapter, lang, root)
    for cell in out.cells:
        if cell.cell_type == "markdown":
            blocks, seps = split_blocks(cell.source)
            blocks = [_BADGE_RE.sub(lambda _m: badge, table.get(b, b)) for b in blocks]
            cell.source = join_blocks(blocks, seps)
        elif cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "setup":
            cell.source = edition_setup(cell.source, lang)
    out.metadata.setdefault("llm_course", {})["edition"] = lang
    return out


def build(lang: str, only: Iterable[str] | None = None, root: Path | None = None) -> list[Path]:
    """Write ``<lang>/solutions`` (translated solution notebooks, with the English run's outputs),
    ``<lang>/notebooks`` (nbgrader's student notebooks of them) and the compiled messages."""
    import shutil
    import tempfile

    root = root or repo_root()
    todo = list(only or chapters(root))
    written = []
    for ch in todo:
        src = nbformat.read(root / "solutions" / ch / f"{ch}.ipynb", as_version=4)
        dest = edition_dir(lang, "solutions", root) / ch / f"{ch}.ipynb"
        dest.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(translate_notebook(src, ch, lang, root), dest)
        written.append(dest)
    with tempfile.TemporaryDirectory() as tmp:
        for pattern in (["*"] if sorted(todo) == chapters(root) else todo):
            generate(root, pattern, Path(tmp), source_dir=edition_dir(lang, "solutions", root))
        for ch in todo:
            dest = edition_dir(lang, "notebooks", root) / ch
            if dest.exists():
                shutil.rmtree(dest)
            shutil.copytree(Path(tmp) / ch, dest)
            written.append(dest / f"{ch}.ipynb")
    readme = root / f"README.{lang}.md"
    readme.write_text(readme_edition(lang, root), encoding="utf-8")
    written.append(readme)
    mo = mo_path(lang, root)
    if catalogue_path(MESSAGES_DOMAIN, lang, root).is_file():
        mo.parent.mkdir(parents=True, exist_ok=True)
        mo.write_bytes(compiled_messages(lang, root))
        written.append(mo)
    return written


def _code_view(cell: nbformat.NotebookNode) -> str:
    """Everything of a cell but its text (nbgrader's checksum is a hash of the text: left out too)."""
    meta = copy.deepcopy(dict(cell.get("metadata", {})))
    meta.get("nbgrader", {}).pop("checksum", None)
    return json.dumps({"id": cell.get("id"), "type": cell.cell_type, "metadata": meta,
                       "source": cell.source if cell.cell_type == "code" else None,
                       "outputs": cell.get("outputs")}, sort_keys=True)


def edition_problems(lang: str, root: Path | None = None) -> list[str]:
    """Where ``lang``'s notebooks differ from English in anything but the translated text.

    Both pairs (solutions, student notebooks): same cells in the same order, each with the same id,
    type, metadata (nbgrader's included), and for code cells the same source and outputs; the only
    code difference allowed is the setup cell's language line. Each edition notebook must also be
    what :func:`build` writes now from the current catalogues.
    """
    root = root or repo_root()
    problems = []
    for kind in ("solutions", "notebooks"):
        for ch in chapters(root):
            en_path = root / kind / ch / f"{ch}.ipynb"
            tr_path = edition_dir(lang, kind, root) / ch / f"{ch}.ipynb"
            rel = tr_path.relative_to(root)
            if not tr_path.is_file():
                problems.append(f"{rel} is missing: run `llm-course translate build`.")
                continue
            en, tr = nbformat.read(en_path, as_version=4), nbformat.read(tr_path, as_version=4)
            if len(en.cells) != len(tr.cells):
                problems.append(f"{rel}: {len(tr.cells)} cells, English has {len(en.cells)}")
                continue
            for i, (a, b) in enumerate(zip(en.cells, tr.cells)):
                if a.cell_type == "code" and a.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "setup":
                    a = copy.deepcopy(a)
                    a.source = edition_setup(a.source, lang)
                elif kind == "notebooks" and a.cell_type == "code" and a.get("metadata", {}).get("nbgrader", {}).get("solution"):
                    a = copy.deepcopy(a)
                    a.source = edition_answer_stub(a.source, lang)
                if _code_view(a) != _code_view(b):
                    problems.append(f"{rel}: cell {i} ({a.get('id')}) differs from English in more than its text")
    return problems


def stale_editions(lang: str, root: Path | None = None) -> list[str]:
    """The edition's solution notebooks that differ from what :func:`build` writes now."""
    root = root or repo_root()
    out = []
    for ch in chapters(root):
        path = edition_dir(lang, "solutions", root) / ch / f"{ch}.ipynb"
        src = nbformat.read(root / "solutions" / ch / f"{ch}.ipynb", as_version=4)
        want = nbformat.writes(translate_notebook(src, ch, lang, root)) + "\n"
        if not path.is_file() or path.read_text(encoding="utf-8") != want:
            out.append(f"{path.relative_to(root)} is not built from the current catalogues and English "
                       "notebook: run `llm-course translate build`.")
    readme = root / f"README.{lang}.md"
    if not readme.is_file() or readme.read_text(encoding="utf-8") != readme_edition(lang, root):
        out.append(f"README.{lang}.md is not built from the current README.md and catalogue: run `llm-course translate build`.")
    mo = mo_path(lang, root)
    if catalogue_path(MESSAGES_DOMAIN, lang, root).is_file() and (not mo.is_file() or mo.read_bytes() != compiled_messages(lang, root)):
        out.append(f"{mo.relative_to(root)} is not compiled from the current catalogue: run `llm-course translate build`.")
    return out


# --- translators' tools --------------------------------------------------------------------------
def pending(name: str, lang: str, root: Path | None = None) -> list[str]:
    """The English blocks of a catalogue still without a current translation (empty or fuzzy)."""
    cat = read_catalogue(catalogue_path(name, lang, root))
    return [m.id for m in _entries(cat) if not m.string or m.fuzzy]


def fill(name: str, lang: str, table: dict[str, str], root: Path | None = None) -> tuple[int, list[str]]:
    """Set translations (English block -> translated block) in a catalogue; clears their fuzzy flag.

    Returns how many entries were set and the problems found (unknown English blocks, protected
    parts changed); an entry with a problem is not written.
    """
    path = catalogue_path(name, lang, root)
    cat = read_catalogue(path)
    problems, n = [], 0
    for english, translated in table.items():
        m = cat.get(english)
        if m is None or not english:
            problems.append(f"not an entry of {path.name}: {english[:70]!r}")
            continue
        bad = protected_problems(english, translated)
        if bad:
            problems.append(f"{english.splitlines()[0][:70]!r}: {'; '.join(bad)}")
            continue
        m.string = translated
        m.flags.discard("fuzzy")
        m.previous_id = []
        n += 1
    write_catalogue(cat, path)
    return n, problems
