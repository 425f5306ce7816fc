"""The student-facing messages of the checks, in the edition's language (gettext).

The course has one set of code cells for every edition (README, "Editions"): what a visible test
prints when it fails is therefore chosen at run time, not written twice. The setup cell of the
Brazilian Portuguese edition sets ``LLM_COURSE_LANG=pt_BR`` before it imports the course
(``course_tools/translation.py`` writes that line); every failure message of
:mod:`course_utils.grading` — its templates and the names the visible tests give to what they
check — is then looked up in the ``course_utils`` gettext catalogue
``course_utils/locale/<lang>/LC_MESSAGES/course_utils.mo``, compiled from
``locale/<lang>/LC_MESSAGES/course_utils.po`` by ``llm-course translate build``.

Only messages are translated: grade ids, record names (the keys the autograder compares), values
and verdicts are the same in every language. A message with no translation stays in English.
The language and its catalogue are read when this module is imported (the setup cell), and
:func:`tr` then looks nothing up in ``os`` or ``builtins``: an answer cell that rebinds a builtin
cannot turn a check's failure into another error (``tests/test_grading.py``).
"""
from __future__ import annotations

import builtins as _builtins
import gettext
import os
from pathlib import Path

__builtins__ = dict(vars(_builtins))  # a private copy, as course_utils.grading keeps (see its docstring)

DOMAIN = "course_utils"
LOCALE_DIR = Path(__file__).resolve().parent / "locale"
ENV_VAR = "LLM_COURSE_LANG"
_state: dict = {}


def use_language(lang: str | None = None) -> str:
    """Load the messages of ``lang`` (default: ``LLM_COURSE_LANG``, English when unset); return it."""
    lang = (lang if lang is not None else os.environ.get(ENV_VAR, "")).strip() or "en"
    _state["lang"] = lang
    _state["catalogue"] = (None if lang == "en" else
                           gettext.translation(DOMAIN, localedir=str(LOCALE_DIR), languages=[lang], fallback=True))
    return lang


def language() -> str:
    """The language the messages are in (``en``, ``pt_BR``)."""
    return _state["lang"]


def tr(message: str) -> str:
    """``message`` in the edition's language (itself when English or untranslated)."""
    catalogue = _state["catalogue"]
    if catalogue is None or type(message) is not str or not message:
        return message
    return catalogue.gettext(message)


def translator(lang: str | None):
    """``gettext`` of ``lang``'s catalogue, for code that writes messages *outside* a kernel (the
    autograder's verdicts, the feedback page: ``course_tools/grading/i18n.py``), in the language of
    the submission it grades rather than of the process. English, an unknown language or a missing
    catalogue: the identity."""
    lang = (lang or "").strip()
    if not lang or lang == "en":
        return str
    catalogue = gettext.translation(DOMAIN, localedir=str(LOCALE_DIR), languages=[lang], fallback=True)
    return lambda message: catalogue.gettext(message) if type(message) is str and message else message


use_language()
