"""What the autograder and the feedback page write, in the language of the submission's edition.

A notebook of the Brazilian Portuguese edition sets ``LLM_COURSE_LANG`` in its setup cell
(``course_tools/translation.py`` writes the line), so the checks that run *in its kernel* print in
Portuguese (:mod:`course_utils.translation`). What is written *outside* the kernel — the hidden
checks' verdict and ``HiddenTestFailed`` (``VerifyRecords``), the feedback's notes
(``RedactHiddenTests``), the labels of the feedback page (``templates/llm_course_feedback``), the
answer stubs of the edition's student notebooks (:class:`EditionClearSolutions`) and
``nbgrader validate``'s report — follows the same line: :func:`notebook_language` reads it from the
notebook being graded, :func:`translator` looks the English message up in the same ``course_utils``
catalogue. Only the setup cell decides: once the autograder has run, that cell is the trusted text of
an edition (``CourseOverwriteCells`` restores any other form), and a language only changes words, never
what is shown or scored.

Every English message of these modules is marked with :func:`N_` or looked up as ``_t("…")``;
``tests/test_translation_messages.py`` extracts them and fails when one has no translated, non-fuzzy
entry in ``locale/<lang>/LC_MESSAGES/course_utils.po``, whose template
(:func:`course_tools.translation.messages_template`) extracts them from these modules
(``MESSAGE_WRITERS``).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

from nbconvert.exporters import HTMLExporter
from nbgrader.preprocessors import ClearSolutions

from course_tools.editions import STUB_LINES, edition_answer_stub  # noqa: F401  (re-exported)
from course_utils.translation import ENV_VAR, LOCALE_DIR, DOMAIN, translator as _translator

# the setup cell's language line, e.g. os.environ["LLM_COURSE_LANG"] = "pt_BR"
_LANG_LINE = re.compile(r"""^[ \t]*os\.environ\[\s*["']""" + ENV_VAR + r"""["']\s*\]\s*=\s*["']([A-Za-z_]{2,16})["']""",
                        re.M)


def N_(message: str) -> str:
    """Marks an English message that is translated where it is shown (gettext's ``N_``)."""
    return message


def available(lang: str) -> bool:
    """True when ``lang`` has compiled messages (``llm-course translate build``)."""
    return (LOCALE_DIR / lang / "LC_MESSAGES" / f"{DOMAIN}.mo").is_file()


def _is_setup(cell: Any) -> bool:
    return cell.get("cell_type") == "code" and cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "setup"


def notebook_language(nb: Any) -> str:
    """The language a notebook's kernel printed in: its setup cell's ``LLM_COURSE_LANG`` line
    (:func:`notebook_edition`; English when there is none, or when that language has no compiled
    messages)."""
    lang = notebook_edition(nb)
    return lang if lang != "en" and available(lang) else "en"


def translator(lang: str) -> Callable[[str], str]:
    """English message -> ``lang`` (the message itself when English or untranslated)."""
    return _translator(lang)


# The feedback page's words (nbgrader's feedback template, copied in templates/llm_course_feedback
# with each label looked up here) and nbgrader's comment on an answer left as released.
FEEDBACK_LABELS = (
    N_("Score"), N_("Test cell"), N_("Coding free-response"), N_("Written response"), N_("Task"),
    N_("Comment"), N_("Comments"), N_("Late submission penalty"), N_("Top"), N_("Student's answer"),
    N_("Student's task"), N_("Grade cell"), N_("No response."),
)


def feedback_labels(lang: str) -> dict[str, str]:
    """The feedback page's labels in ``lang`` (English label -> shown label)."""
    t = translator(lang)
    return {label: t(label) for label in FEEDBACK_LABELS}


# --- the feedback page ---------------------------------------------------------------------------
TEMPLATES = Path(__file__).resolve().parent / "templates"
FEEDBACK_TEMPLATE = "llm_course_feedback"
# nbgrader's own templates (GenerateFeedback's default extra_template_basedirs)
NBGRADER_TEMPLATES = str(Path(__import__("nbgrader").__file__).resolve().parent / "server_extensions"
                         / "formgrader" / "templates")


class FeedbackExporter(HTMLExporter):
    """``generate_feedback``'s exporter (``GenerateFeedback.exporter_class``): nbgrader's HTML
    exporter and its configuration (``HTMLExporter.*``: sanitizing, filters, preprocessors, among
    them ``RedactHiddenTests``), with the page's words in each notebook's language: the template
    ``templates/llm_course_feedback`` (nbgrader's feedback template, its labels looked up) reads
    them from ``resources["llm_course_labels"]``."""

    def from_notebook_node(self, nb: Any, resources: Any = None, **kw: Any) -> Any:
        lang = notebook_language(nb)
        resources = dict(resources or {})
        resources["llm_course_lang"] = lang.replace("_", "-")
        resources["llm_course_labels"] = feedback_labels(lang)
        return super().from_notebook_node(nb, resources, **kw)


# --- the answer stubs of an edition's student notebooks -----------------------------------------
# (STUB_LINES and edition_answer_stub live in course_tools.editions, which translation.py also uses)


def edition_stub(stub: str, lang: str) -> str:
    """``stub`` (``ClearSolutions.code_stub``/``text_stub``) in ``lang``: each line the catalogue
    translates (:data:`STUB_LINES`) replaced, the code (``raise NotImplementedError()``) kept."""
    t = translator(lang)
    return "\n".join(t(line) for line in stub.split("\n"))


def notebook_edition(nb: Any) -> str:
    """The edition a notebook belongs to, from its setup cell's ``LLM_COURSE_LANG`` line alone
    (compiled messages or not): ``en`` without one."""
    for cell in nb.get("cells", []):
        if _is_setup(cell):
            source = cell.get("source", "")
            m = _LANG_LINE.search("".join(source) if isinstance(source, list) else str(source))
            return m.group(1) if m else "en"
    return "en"


class EditionClearSolutions(ClearSolutions):
    """nbgrader's ``ClearSolutions`` (in ``GenerateAssignment.preprocessors``, ``nbgrader_config.py``),
    with the stubs in the language of the notebook's edition: ``# SEU CÓDIGO AQUI`` in a student
    notebook of ``pt_BR/notebooks``, ``# YOUR CODE HERE`` in ``notebooks/``. A stub left as released
    is still recognised at grading (nbgrader compares checksums: ``CourseOverwriteCells`` keeps the
    edition's own for an answer exactly as that edition released it)."""

    def preprocess(self, nb: Any, resources: Any) -> Any:
        lang = notebook_edition(nb)
        if lang == "en":
            return super().preprocess(nb, resources)
        code_stub, text_stub = self.code_stub, self.text_stub
        try:
            self.code_stub = {k: edition_stub(v, lang) for k, v in code_stub.items()}
            self.text_stub = edition_stub(text_stub, lang)
            return super().preprocess(nb, resources)
        finally:
            self.code_stub, self.text_stub = code_stub, text_stub


def edition_release(assignment: str, notebook: str) -> list[Path]:
    """The student notebooks of ``assignment``/``notebook`` that the translated editions released
    (``pt_BR/notebooks/NN/NN.ipynb``), from the course checkout."""
    from course_tools.editions import LANGUAGES, edition_dir

    paths = [edition_dir(lang, "notebooks") / assignment / f"{notebook}.ipynb" for lang in LANGUAGES]
    return [p for p in paths if p.is_file()]


