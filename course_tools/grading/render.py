"""Showing a submission to the instructor without running it (issue 27).

A submission is untrusted data: its markdown (written answers) and its outputs were produced by
the student. nbgrader's Formgrader renders them with ``HTMLExporter(template_name="formgrade")``
on the Jupyter server's own origin, and ``generate_feedback`` writes them into HTML files; stock,
both keep raw HTML, ``<script>`` and ``application/javascript`` outputs, so a written answer such
as ``<img src=x onerror=...>`` ran as the instructor, with the instructor's ``_xsrf`` cookie
(``PUT /api/contents``, ``POST /api/terminals``).

What this module adds (wired in ``nbgrader_config.py`` and
``course_tools/grading/jupyter_server_config.py``; README, "Grading integrity"):

* :func:`sanitize_html`: an allow-list HTML sanitizer (bleach): text, headings, lists, tables,
  code, links to ``http(s)``/``mailto``/``#`` only, images only from ``data:image/...`` URIs; no
  ``script``/``style``/``iframe``/``svg``/``object``/``form``, no event handler, ``style``, ``id``
  or ``class`` attribute (a student's element cannot pose as a grading input of Formgrader).
* :class:`SanitizeSubmission`: an exporter preprocessor that keeps only inert output mimetypes
  (``text/html`` and ``text/markdown`` sanitized, ``image/png``/``jpeg``/``gif`` with checked
  base64, ``image/svg+xml`` shown as an ``<img>`` data URI, ``text/latex``, ``text/plain``),
  replaces ``application/javascript``, widgets and every unknown mimetype by a visible note,
  sanitizes raw cells and drops output metadata other than numeric ``width``/``height``.
* :class:`SafeMarkdown2HTML` and :func:`clean_html`: the exporter's ``markdown2html`` and
  ``clean_html`` template filters, sanitizing (nbgrader's ``formgrade`` and ``feedback``
  templates render markdown cells without nbconvert's ``sanitize_html``).
* A Jupyter server extension (``course_tools.grading.render``) that gives Formgrader's submission
  pages a Content-Security-Policy in which only the template's own scripts run (a fresh nonce per
  page; student content comes after the template's scripts and never gets the nonce; inline
  handlers, ``javascript:`` URLs, plugins, frames, ``<base>`` and foreign form targets are
  refused by the browser even if something slipped through the sanitizer). MathJax's
  configuration runs as a nonced script (MathJax would ``eval`` it), and MathJax may be served by
  the grading server itself (``llm_course_mathjax_url`` tornado setting).

  Why not ``Content-Security-Policy: sandbox`` without ``allow-same-origin`` on these pages:
  Formgrader's own script saves every score and comment through ``/formgrader/api`` with the
  page's cookies and ``_xsrf`` token; from an opaque origin those requests are cross-origin and
  carry no cookie, so grading would stop. The nonce policy refuses the same payloads (measured:
  each of them, with the sanitizer switched off) and keeps grading working.
* :class:`GradingAuthorizer`: for the instructor's grading server, refuses terminals, kernels,
  sessions and writes through the contents API, so that a script that did run would find little
  to use.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import html
import re
import secrets
from typing import Any

import bleach
from jinja2.utils import _PassArg
from nbconvert.preprocessors import Preprocessor
from nbformat.notebooknode import NotebookNode, from_dict
from traitlets import Bool
from traitlets.config import LoggingConfigurable

# --- the sanitizer ----------------------------------------------------------------------------

ALLOWED_TAGS = frozenset({
    "a", "abbr", "b", "blockquote", "br", "caption", "code", "col", "colgroup", "dd", "del", "details", "div",
    "dl", "dt", "em", "figcaption", "figure", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "ins", "kbd",
    "li", "mark", "ol", "p", "pre", "q", "s", "samp", "small", "span", "strong", "sub", "summary", "sup",
    "table", "tbody", "td", "tfoot", "th", "thead", "tr", "u", "ul", "var",
})
# data: images only (an SVG inside <img> never runs a script); links to the web, mail or the page
IMAGE_DATA_URI = re.compile(r"^data:image/(png|jpeg|gif|webp|svg\+xml)(;[a-z0-9=.+-]+)*(;base64)?,", re.I)
LINK_SCHEMES = ("http://", "https://", "mailto:")
# content that is never shown, not even as text
_DROP_WITH_CONTENT = re.compile(r"<(script|style|template|noscript|iframe|object|embed|xmp|noembed|noframes|title)"
                                r"\b[^>]*>.*?</\1\s*>", re.I | re.S)
_CONTROL = re.compile(r"[\x00-\x20\x7f]+")


def _allowed_attribute(tag: str, name: str, value: str) -> bool:
    compact = _CONTROL.sub("", value).lower()
    if name == "href":
        return tag == "a" and (compact.startswith(LINK_SCHEMES) or compact.startswith("#"))
    if name == "src":
        return tag == "img" and bool(IMAGE_DATA_URI.match(compact))
    if name in ("alt", "title"):
        return True
    if name in ("width", "height"):
        return tag in ("img", "col", "td", "th") and value.strip().rstrip("%").isdigit()
    if name in ("colspan", "rowspan", "start"):
        return value.strip().isdigit()
    if name == "align":
        return compact in ("left", "right", "center", "justify")
    return False


_CLEANER = bleach.Cleaner(tags=ALLOWED_TAGS, attributes=_allowed_attribute,
                          protocols=["http", "https", "mailto", "data"], strip=True, strip_comments=True)


def sanitize_html(fragment: str | bytes) -> str:
    """``fragment`` with everything that could run, load or pose as the grading UI removed.

    Keeps text, math (TeX is text until MathJax typesets it), headings, lists, tables, code,
    ``http(s)``/``mailto``/``#`` links and ``data:image`` images; removes every other tag (the
    content of ``script``, ``style``, ``iframe`` and similar with it), every event handler and
    ``style``/``id``/``class`` attribute, and ``javascript:``/``data:`` links.
    """
    text = fragment.decode("utf-8", "replace") if isinstance(fragment, bytes) else str(fragment)
    text = _DROP_WITH_CONTENT.sub("", text)
    cleaned = _IMG_WITHOUT_SRC.sub(_alt_text, _CLEANER.clean(text))
    links = re.compile(r"<a (?=[^>]*\bhref=)")
    return links.sub('<a rel="noopener noreferrer nofollow" target="_blank" ', cleaned)


# An image whose source was removed (a web image such as the Colab badge: only data: images load
# under the page's policy) would show as a broken image: its alt text is shown instead.
_IMG_WITHOUT_SRC = re.compile(r"""<img\b(?:[^>"']|"[^"]*"|'[^']*')*>""", re.I)
_ALT = re.compile(r'\balt="([^"]*)"', re.I)
_SRC = re.compile(r'\ssrc="', re.I)


def _alt_text(m: re.Match) -> str:
    if _SRC.search(re.sub(r'"[^"]*"', '""', m.group(0))):   # a kept (data:) image
        return m.group(0)
    alt = _ALT.search(m.group(0))
    text = html.unescape(alt.group(1)).strip() if alt else ""
    return f"<span>{html.escape(text)}</span>" if text else ""


def clean_html(element: Any) -> str:
    """Template filter replacing nbconvert's ``clean_html`` (stricter: see :func:`sanitize_html`)."""
    return sanitize_html(element)


class SafeMarkdown2HTML(LoggingConfigurable):
    """Template filter replacing the exporter's ``markdown2html``: the same rendering, sanitized.

    Registered through ``HTMLExporter.filters`` (nbgrader_config.py); its ``parent`` is the
    exporter, whose own ``markdown2html`` (attachments, anchor links) does the rendering.
    """

    jinja_pass_arg = _PassArg.context  # jinja2 hands the template context first

    def __call__(self, context: Any, source: str) -> str:
        exporter = self.parent
        rendered = exporter.markdown2html(context, source) if exporter is not None else _plain_markdown(source)
        return sanitize_html(rendered)


def _plain_markdown(source: str) -> str:
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    return markdown2html_mistune(source)


# --- the notebook preprocessor ----------------------------------------------------------------

INERT_TEXT = ("text/plain", "text/latex")
IMAGES = ("image/png", "image/jpeg", "image/gif")
FEEDBACK_MIME = "application/vnd.llm-course.feedback.v1+json"   # student-safe messages (course_tools/grading/feedback.py)
_BASE64 = re.compile(r"^[A-Za-z0-9+/=\s]*$")
NOTE = "[removed by the course's renderer: {what} in a submission is not shown]"


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _base64_ok(value: str) -> bool:
    if not _BASE64.match(value):
        return False
    try:
        base64.b64decode("".join(value.split()), validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def sanitize_output_data(data: dict[str, Any]) -> dict[str, Any]:
    """The inert part of an output's mime bundle (what :class:`SanitizeSubmission` keeps)."""
    safe: dict[str, Any] = {}
    removed: list[str] = []
    for mime, value in data.items():
        if mime in INERT_TEXT:
            safe[mime] = _text(value)
        elif mime == "text/html":
            safe[mime] = sanitize_html(_text(value))
        elif mime == "text/markdown":
            if "text/html" not in data:
                safe["text/html"] = sanitize_html(_plain_markdown(_text(value)))
        elif mime in IMAGES:
            if isinstance(value, str) and _base64_ok(value):
                safe[mime] = value
            else:
                removed.append(f"a malformed {mime} image")
        elif mime == "image/svg+xml":
            # shown as <img src="data:image/svg+xml;base64,...">: an image never runs its scripts
            svg = base64.b64encode(_text(value).encode("utf-8")).decode("ascii")
            safe.setdefault("text/html", f'<img src="data:image/svg+xml;base64,{svg}" alt="SVG figure">')
        elif mime == FEEDBACK_MIME:
            safe[mime] = value
        else:
            removed.append(f"a {mime} output")
    if removed and not (set(safe) - {FEEDBACK_MIME, "text/plain"}):
        note = NOTE.format(what=", ".join(removed))
        safe["text/plain"] = (safe.get("text/plain", "") + "\n" + note).strip()
    return safe


def _safe_output_metadata(meta: Any) -> dict[str, Any]:
    keep: dict[str, Any] = {}
    if not isinstance(meta, dict):
        return keep
    for mime in IMAGES:
        sub = meta.get(mime)
        if isinstance(sub, dict):
            dims = {k: int(v) for k, v in sub.items() if k in ("width", "height") and isinstance(v, int)
                    and not isinstance(v, bool) and 0 < v < 100_000}
            if dims:
                keep[mime] = dims
    return keep


class SanitizeSubmission(Preprocessor):
    """Make a notebook inert for display (Formgrader's submission pages, feedback HTML).

    Registered as an exporter preprocessor in ``nbgrader_config.py``
    (``HTMLExporter.preprocessors``): it runs before the template, on a copy of the notebook;
    the autograded notebook on disk keeps its outputs for the instructor.
    """

    def preprocess(self, nb: NotebookNode, resources: Any) -> tuple[NotebookNode, Any]:
        for key in ("widgets", "jupyter-widgets"):
            nb.metadata.pop(key, None)
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell: NotebookNode, resources: Any, index: int) -> tuple[NotebookNode, Any]:
        if cell.get("cell_type") in ("markdown", "raw"):
            atts = cell.get("attachments") or {}
            cell["attachments"] = {name: {m: v for m, v in bundle.items()
                                          if (m in IMAGES and isinstance(v, str) and _base64_ok(v))}
                                   for name, bundle in atts.items() if isinstance(bundle, dict)}
            if not cell["attachments"]:
                cell.pop("attachments")
        if cell.get("cell_type") == "raw":
            cell.source = sanitize_html(cell.source)
            return cell, resources
        if cell.get("cell_type") != "code":
            return cell, resources
        outputs = []
        for out in cell.get("outputs", []):
            kind = out.get("output_type")
            if kind in ("display_data", "execute_result", "update_display_data"):
                data = out.get("data") if isinstance(out.get("data"), dict) else {}
                new = {"output_type": "display_data" if kind == "update_display_data" else kind,
                       "data": sanitize_output_data(data), "metadata": _safe_output_metadata(out.get("metadata"))}
                if kind == "execute_result":
                    new["execution_count"] = out.get("execution_count")
                if new["data"]:
                    outputs.append(from_dict(new))
            elif kind == "stream":
                outputs.append(from_dict({"output_type": "stream", "name": out.get("name", "stdout"),
                                          "text": _text(out.get("text", ""))}))
            elif kind == "error":
                outputs.append(from_dict({"output_type": "error", "ename": str(out.get("ename", "")),
                                          "evalue": str(out.get("evalue", "")),
                                          "traceback": [str(t) for t in out.get("traceback", [])]}))
        cell["outputs"] = outputs
        return cell, resources


# --- the Formgrader page: Content-Security-Policy ----------------------------------------------

# Formgrader's own inline handlers (templates/formgrade/formgrade_macros.html.j2, the name toggle)
TEMPLATE_HANDLERS = ("toggle_name(true);", "toggle_name(false);")
MATHJAX_HOST = "https://cdnjs.cloudflare.com"
STUDENT_CONTENT_START = 'id="notebook-container"'
MATHJAX_SETTING = "llm_course_mathjax_url"   # tornado setting: MathJax URL for Formgrader's pages


def submission_page_csp(nonce: str) -> str:
    """The Content-Security-Policy of a Formgrader submission page whose template scripts carry ``nonce``.

    Scripts: only those with the nonce (and what they load: MathJax), so no script of the
    student's content, no inline event handler other than Formgrader's own name toggle, no
    ``javascript:`` URL. No plugins, frames, workers, ``<base>``; forms post to the server only;
    requests (Formgrader's grading API) only to the server itself.
    """
    hashes = " ".join("'sha256-" + base64.b64encode(hashlib.sha256(h.encode()).digest()).decode() + "'"
                      for h in TEMPLATE_HANDLERS)
    return "; ".join([
        "default-src 'none'",
        f"script-src 'nonce-{nonce}' 'strict-dynamic' 'unsafe-hashes' {hashes}",
        f"style-src 'self' 'unsafe-inline' {MATHJAX_HOST}",
        f"font-src 'self' data: {MATHJAX_HOST}",
        "img-src 'self' data:",
        "connect-src 'self'",
        "object-src 'none'", "frame-src 'none'", "child-src 'none'", "worker-src 'none'", "media-src 'none'",
        "base-uri 'none'", "form-action 'self'", "frame-ancestors 'self'",
    ])


def add_nonce(page: str, nonce: str, mathjax_url: str | None = None) -> str:
    """Give the nonce to the template's scripts: those before the student content begins.

    Formgrader's template writes every script of its own in ``<head>`` and the navigation bar,
    before ``#notebook-container``; whatever comes after is the notebook, and keeps no nonce.
    ``mathjax_url``: load MathJax from there instead of nbconvert's CDN default (the
    ``formgrade`` template ignores ``HTMLExporter.mathjax_url``).
    """
    cut = page.find(STUDENT_CONTENT_START)
    if cut < 0:
        return page
    head = re.sub(r"<script\b", f'<script nonce="{nonce}"', page[:cut], flags=re.I)
    # MathJax evaluates the text of x-mathjax-config scripts (eval, refused by the policy): the
    # template's configuration runs as an ordinary nonced script instead, right after MathJax.js
    head = head.replace('type="text/x-mathjax-config"', 'type="text/javascript"')
    if mathjax_url:
        head = re.sub(r'src="https://cdnjs\.cloudflare\.com/ajax/libs/mathjax/[^"]*"',
                      'src="' + html.escape(mathjax_url) + '"', head)
    return head + page[cut:]


def _patch_formgrader() -> None:
    """Give nbgrader's ``SubmissionHandler`` the policy and the nonce (idempotent)."""
    from nbgrader.server_extensions.formgrader import handlers

    cls = handlers.SubmissionHandler
    if getattr(cls, "_llm_course_csp", False):
        return

    def nonce(self: Any) -> str:
        if not getattr(self, "_llm_course_nonce", None):
            self._llm_course_nonce = secrets.token_urlsafe(18)
        return self._llm_course_nonce

    def content_security_policy(self: Any) -> str:
        return submission_page_csp(nonce(self))

    original_write = cls.write

    def write(self: Any, chunk: Any) -> None:
        if isinstance(chunk, bytes):
            chunk = chunk.decode("utf-8")
        if isinstance(chunk, str):
            chunk = add_nonce(chunk, nonce(self), self.settings.get(MATHJAX_SETTING))
        original_write(self, chunk)

    cls.content_security_policy = property(content_security_policy)
    cls.write = write
    cls._llm_course_csp = True


# --- Formgrader for this course: late work shown, no "Generate" ---------------------------------

GENERATE_REFUSED = (
    "Not on this course: `nbgrader generate_assignment` would rewrite the committed release "
    "(notebooks/) and, with --force after an autograde, delete it. Register an assignment in the "
    "gradebook with `llm-course register NN` (in a shell, in the course root); `llm-course release` "
    "regenerates notebooks/ (README, \"A class, step by step\").")
# Formgrader's assignment table: the "Generate" column (nbgrader generate_assignment) says what to
# run instead, as text, with no button (manage_assignments.js's AssignmentUI renders it).
NO_GENERATE_SCRIPT = """<script>
(function () {
  if (typeof AssignmentUI === "undefined") { return; }
  var render = AssignmentUI.prototype.render;
  AssignmentUI.prototype.render = function () {
    var out = render.apply(this, arguments);
    this.$assign.empty().append($("<code/>").addClass("llm-course-register")
      .attr("title", "nbgrader generate_assignment is not used on this course: run this in a shell")
      .text("llm-course register " + this.model.get("name")));
    return out;
  };
})();
</script>"""
LATE_LABEL = "LATE"


def late_note(seconds_late: float) -> str:
    """What Formgrader shows next to a late submission."""
    from course_tools.grading.late import describe_late

    return f"{LATE_LABEL} ({describe_late(seconds_late)}; late work scores 0)"


def _late_map(api: Any, assignment: str) -> dict[str, dict[str, float]]:
    from course_tools.grading.late import late_submissions

    try:
        with api.gradebook as gb:
            return late_submissions(gb, assignment)
    except Exception:  # pragma: no cover - an unregistered assignment: nothing is late
        return {}


def _mark_late(row: dict[str, Any], late: dict[str, float], timestamp: bool) -> dict[str, Any]:
    """A Formgrader row of a late submission: the score after the penalty, and the word LATE."""
    row["late"] = True
    row["seconds_late"] = late["seconds_late"]
    if row.get("score") is not None:
        row["raw_score"] = row["score"]
        row["score"] = max(0.0, float(row["score"]) - late["penalty"])
    note = late_note(late["seconds_late"])
    if timestamp:
        row["display_timestamp"] = f"{row.get('display_timestamp') or ''} {note}".strip()
    else:   # the per-notebook tables have no time column: the name cell says it
        row["last_name"] = f"{row.get('last_name') or row.get('student')} [{LATE_LABEL}]"
    return row


def _patch_formgrader_api() -> None:
    """nbgrader's ``NbGraderAPI`` (Formgrader's data) for this course (idempotent)."""
    from nbgrader.apps.api import NbGraderAPI

    if getattr(NbGraderAPI, "_llm_course_api", False):
        return

    def generate_assignment(self: Any, assignment_id: str, force: bool = True, create: bool = True) -> dict:
        self.log.warning("refused generate_assignment %s from Formgrader: %s", assignment_id, GENERATE_REFUSED)
        return {"success": False, "error": GENERATE_REFUSED, "log": GENERATE_REFUSED}

    get_submission, get_submissions = NbGraderAPI.get_submission, NbGraderAPI.get_submissions
    get_nb_subs, get_student_nb_subs = NbGraderAPI.get_notebook_submissions, NbGraderAPI.get_student_notebook_submissions

    def get_submission_(self: Any, assignment_id: str, student_id: str, *a: Any, **kw: Any) -> dict:
        row = get_submission(self, assignment_id, student_id, *a, **kw)
        late = _late_map(self, assignment_id).get(student_id)
        return _mark_late(row, late, True) if late and row.get("autograded") else row

    def get_submissions_(self: Any, assignment_id: str) -> list:
        rows = get_submissions(self, assignment_id)
        late = _late_map(self, assignment_id)
        return [_mark_late(r, late[r["student"]], True) if r.get("student") in late and r.get("autograded") else r
                for r in rows]

    def get_notebook_submissions_(self: Any, assignment_id: str, notebook_id: str) -> list:
        rows = get_nb_subs(self, assignment_id, notebook_id)
        late = _late_map(self, assignment_id)
        return [_mark_late(r, late[r["student"]], False) if r.get("student") in late else r for r in rows]

    def get_student_notebook_submissions_(self: Any, student_id: str, assignment_id: str) -> list:
        rows = get_student_nb_subs(self, student_id, assignment_id)
        late = _late_map(self, assignment_id).get(student_id)
        return [_mark_late(r, late, False) if late and r.get("id") else r for r in rows]

    NbGraderAPI.generate_assignment = generate_assignment
    NbGraderAPI.get_submission = get_submission_
    NbGraderAPI.get_submissions = get_submissions_
    NbGraderAPI.get_notebook_submissions = get_notebook_submissions_
    NbGraderAPI.get_student_notebook_submissions = get_student_notebook_submissions_
    NbGraderAPI._llm_course_api = True


def late_banner(gb: Any, submission_id: str) -> str:
    """The banner of a Formgrader submission page when the submission was late, else ``""``."""
    from nbgrader.api import MissingEntry

    try:
        nb = gb.find_submission_notebook_by_id(submission_id)
        sub = nb.assignment
        late = float(sub.total_seconds_late or 0.0)
        if late <= 0:
            return ""
        due = sub.duedate
        penalty = float(nb.late_submission_penalty or 0.0)
        score = max(0.0, float(nb.score) - penalty)
    except (MissingEntry, AttributeError, TypeError):
        return ""
    return ('<div class="alert alert-danger llm-course-late" role="alert"><strong>'
            + html.escape(late_note(late)) + "</strong>: submitted "
            + html.escape(f"{sub.timestamp:%Y-%m-%d %H:%M:%S}") + " UTC, due "
            + html.escape(f"{due:%Y-%m-%d %H:%M:%S}") + " UTC. Score after the late penalty: "
            + html.escape(f"{score:g} / {float(nb.max_score):g}") + " (whatever you grade here).</div>")


def _insert_banner(page: str, banner: str) -> str:
    cut = page.find(STUDENT_CONTENT_START)
    if not banner or cut < 0:
        return page
    start = page.rfind("<", 0, cut)
    return page[:start] + banner + page[start:]


def _patch_formgrader_pages() -> None:
    """Formgrader's assignment page without "Generate" buttons; late submissions marked (idempotent)."""
    from nbgrader.server_extensions.formgrader import handlers

    cls = handlers.ManageAssignmentsHandler
    if not getattr(cls, "_llm_course_pages", False):
        original = cls.write

        def write(self: Any, chunk: Any) -> None:
            if isinstance(chunk, bytes):
                chunk = chunk.decode("utf-8")
            if isinstance(chunk, str) and "manage_assignments.js" in chunk:
                chunk = re.sub(r'(<script src="[^"]*/manage_assignments\.js"></script>)',
                               lambda m: m.group(1) + NO_GENERATE_SCRIPT, chunk, count=1)
                chunk = chunk.replace('<th class="text-center no-sort">Generate</th>',
                                      '<th class="text-center no-sort">Register (shell)</th>')
                chunk = re.sub(r"<li>To <b>generate</b>.*?</li>",
                               "<li>To put an assignment into the gradebook, run <code>llm-course register NN</code> "
                               "in a shell (not the generate step: the release is committed).</li>", chunk, flags=re.S)
            original(self, chunk)

        cls.write = write
        cls._llm_course_pages = True
    sub = handlers.SubmissionHandler
    if not getattr(sub, "_llm_course_late", False):
        original_sub = sub.write

        def write_sub(self: Any, chunk: Any) -> None:
            if isinstance(chunk, bytes):
                chunk = chunk.decode("utf-8")
            if isinstance(chunk, str) and self.path_args:
                try:
                    chunk = _insert_banner(chunk, late_banner(self.gradebook, self.path_args[0]))
                except Exception as exc:  # pragma: no cover - never lose the page for a banner
                    self.log.warning("llm-course: no late banner: %s", exc)
            original_sub(self, chunk)

        sub.write = write_sub
        sub._llm_course_late = True


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "course_tools.grading.render"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    """Jupyter server extension: the Formgrader submission pages get :func:`submission_page_csp`;
    late submissions are marked, "Generate" is replaced by what to run, and a grade saved in
    Formgrader keeps late work at 0 (:mod:`course_tools.grading.late`)."""
    from course_tools.grading import late

    late.install()
    _patch_formgrader_pages()   # before the nonce patch: its write wraps this one
    _patch_formgrader()
    _patch_formgrader_api()
    serverapp.log.info("llm-course: Formgrader submission pages served with a script nonce policy")


# --- the grading server -----------------------------------------------------------------------

try:
    from jupyter_server.auth.authorizer import Authorizer as _Authorizer
except ImportError:  # pragma: no cover  (jupyter_server < 2)
    _Authorizer = LoggingConfigurable  # type: ignore[misc,assignment]


class GradingAuthorizer(_Authorizer):  # type: ignore[misc,valid-type]
    """The instructor's grading server grades, it does not run code or edit files.

    Refused: terminals, kernels and sessions (starting or talking to a kernel), and every write
    through the contents API (unless ``refuse_contents_writes`` is False). Formgrader (its pages and ``/formgrader/api``) and reading files
    keep working: nbgrader's autograding runs in the server's process, not through these APIs.
    """

    DENIED = {("terminals", "read"), ("terminals", "write"), ("terminals", "execute"),
              ("kernels", "write"), ("kernels", "execute"), ("sessions", "write")}

    refuse_contents_writes = Bool(True, help="Refuse every write through the contents API "
                                             "(False: the instructor may save files on this server).").tag(config=True)

    def is_authorized(self, handler: Any, user: Any, action: str, resource: str) -> bool:
        denied = (resource, action) in self.DENIED or (
            self.refuse_contents_writes and (resource, action) == ("contents", "write"))
        if denied:
            self.log.warning("grading server: refused %s on %s (%s %s)", action, resource,
                             getattr(handler.request, "method", "?"), html.escape(getattr(handler.request, "path", "?")))
            return False
        return True
