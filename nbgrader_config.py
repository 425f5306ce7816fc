"""nbgrader configuration of the course (nbgrader 0.9.6).

solutions/  = nbgrader *source* (instructor notebooks, solutions and hidden tests inside markers)
notebooks/  = nbgrader *release* (student notebooks, generated, never edited by hand); a class given
              the Brazilian Portuguese edition (`llm-course edition pt_BR`) is released pt_BR/notebooks/
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from nbgrader.preprocessors import (  # noqa: E402
    AssignLatePenalties,
    CheckCellMetadata,
    ClearOutput,
    DeduplicateIds,
    IgnorePattern,
    LimitOutput,
    OverwriteKernelspec,
    SaveAutoGrades,
)
from nbconvert.preprocessors import ClearMetadataPreprocessor  # noqa: E402

from course_tools.grading.overwrite import CourseOverwriteCells  # noqa: E402
from course_tools.grading.sandbox import SandboxedExecute  # noqa: E402
from course_tools.grading.preprocessors import (  # noqa: E402
    AppendIntegrityCheck,
    FlagKernelHooks,
    RequireIntegrityCheck,
    ResolveDuplicateCells,
    StderrToStdout,
    StripExecutionTags,
    StripReferenceBlocks,
    VerifyRecords,
)

c = get_config()  # noqa: F821  (provided by traitlets when nbgrader loads this file)

c.CourseDirectory.root = os.environ.get("LLM_COURSE_NBGRADER_ROOT", os.path.dirname(os.path.abspath(__file__)))
c.CourseDirectory.source_directory = "solutions"
# The release is the class edition's (course_tools/editions.py): notebooks/ (English) unless
# `llm-course edition pt_BR` recorded the Brazilian Portuguese one in .llm-course/edition; then
# `nbgrader release_assignment NN` and Formgrader's Release button hand out pt_BR/notebooks/NN
# (`nbgrader generate_assignment` still writes notebooks/: it never overwrites an edition's release).
# Grading is the same for both: one gradebook, the English source registered from solutions/.
from course_tools import editions as _editions  # noqa: E402

c.CourseDirectory.release_directory = _editions.release_directory(c.CourseDirectory.root, sys.argv)
c.CourseDirectory.course_id = "llm-course"
# The gradebook: nbgrader's default is sqlite:///<course root>/gradebook.db (kept 0600, below). A
# PostgreSQL one goes here WITHOUT its password, e.g.
#   c.CourseDirectory.db_url = "postgresql+psycopg2://grader@/gradebook?host=/var/run/postgresql"
# with peer authentication, or the password in a ~/.pgpass of mode 0600 (README "A larger gradebook").
# `llm-course` hands the URL to the nbgrader processes it starts in $LLM_COURSE_DB_URL, never on a
# command line (every account reads those in /proc); it leaves the environment here, so no grading
# kernel inherits it (course_tools/grading/privacy.py).
from course_tools.grading import privacy as _privacy  # noqa: E402

if _privacy.take_db_url():
    c.CourseDirectory.db_url = _privacy.take_db_url()
# nbgrader copies every file of a source folder into the release. Chapter scripts live in
# chapters/ (outside solutions/); should one ever be copied next to a solution notebook, it is
# still not handed out: a percent script holds the solutions and the hidden tests. Text files
# neither, except the exchange's own `timestamp.txt` (a plain "*.txt" made `collect` drop every
# submission's timestamp: no late penalties, `release_feedback` crashed): course_tools/classroom.py.
from course_tools.classroom import ignore_patterns  # noqa: E402

c.CourseDirectory.ignore = ignore_patterns()
# The exchange (course_tools/exchange_service, README "What the course guarantees about the
# exchange"): students cannot write it. `nbgrader submit` hands the files to the instructor's
# submission service (`llm-course exchange serve`, a socket that learns the account from the kernel
# and stamps the time with its own clock); release never makes the exchange root world-writable and
# keeps inbound 0700; fetch, fetch_feedback and list refuse an exchange another account could have
# replaced; `nbgrader collect` takes only the service's folders (receipt, uid, digests), judging and
# copying each in isolation (refused ones kept in refused/NN/ with report.jsonl). The students'
# side is the same plugins in <environment>/etc/jupyter/nbgrader_config.py (make install writes it).
c.ExchangeFactory.collect = "course_tools.grading.exchange.SafeCollect"
c.ExchangeFactory.release_assignment = "course_tools.exchange_service.client.CourseReleaseAssignment"
c.ExchangeFactory.release_feedback = "course_tools.exchange_service.client.CourseReleaseFeedback"
c.ExchangeFactory.submit = "course_tools.exchange_service.client.ServiceSubmit"
c.ExchangeFactory.fetch_assignment = "course_tools.exchange_service.client.CheckedFetchAssignment"
c.ExchangeFactory.fetch_feedback = "course_tools.exchange_service.client.CheckedFetchFeedback"
c.ExchangeFactory.list = "course_tools.exchange_service.client.CheckedList"
# `nbgrader export`: quoted CSV, no cell can start a spreadsheet formula (course_tools/grading/export.py).
c.ExportApp.plugin_class = "course_tools.grading.export.SafeCsvExportPlugin"

# Student notebooks: outputs stripped, solution regions replaced by this stub.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"
c.ClearSolutions.enforce_metadata = True
c.ClearHiddenTests.begin_test_delimeter = "BEGIN HIDDEN TESTS"
c.ClearHiddenTests.end_test_delimeter = "END HIDDEN TESTS"

# Execution limits (seconds per cell); a heavy cell in full mode stays well under this.
c.Execute.timeout = int(os.environ.get("LLM_COURSE_CELL_TIMEOUT", "300"))
c.Execute.interrupt_on_timeout = True

# Autograding (see course_tools/grading/preprocessors.py and README "Grading integrity"): re-add deleted
# graded cells, strip every tag (tags can skip cells), zero submissions that use kernel hooks,
# require each test cell to run to its end, keep library warnings from zeroing tests.
c.OverwriteCells.add_missing_cells = True
c.Autograde.sanitize_preprocessors = [
    ClearOutput,
    ResolveDuplicateCells,
    DeduplicateIds,
    OverwriteKernelspec,
    CourseOverwriteCells,   # OverwriteCells, silent only for a test cell exactly as released (hidden tests cleared)
    StripReferenceBlocks,
    StripExecutionTags,
    FlagKernelHooks,
    AppendIntegrityCheck,
    CheckCellMetadata,
]
# Each submission's kernel runs in a bubblewrap sandbox (course_tools/grading/sandbox.py): an
# allow-list of read-only paths (system, Python, the course packages, model caches; nothing of
# the course directory), as an unprivileged user without capabilities, in a private tmpfs copy of
# the submission's regular files, no network. Without bubblewrap, autograding refuses
# (--SandboxedKernelManager.allow_unsandboxed=True overrides).
# Limits per kernel (course_tools/grading/limits.py; `llm-course doctor` says which are in force):
c.GradingLimits.memory_mb = 6144          # cgroup, tmpfs included
c.GradingLimits.pids = 256                # tasks (processes and threads)
c.GradingLimits.wall_seconds = 1800       # the whole notebook; a cell: Execute.timeout above
c.GradingLimits.workdir_mb = 512          # tmpfs sizes: working folder, /tmp, $HOME
c.GradingLimits.tmp_mb = 512
c.GradingLimits.home_mb = 64
c.GradingLimits.cell_output_kb = 2048     # beyond: outputs dropped; per notebook beyond 16 MiB: kernel stopped
c.GradingLimits.notebook_output_mb = 16
# Showing submissions (README "Grading integrity", course_tools/grading/render.py): Formgrader's
# submission pages and the feedback HTML render a submission's markdown, raw cells and outputs
# sanitized (no script, handler, iframe, javascript: link; SVG as an image; JavaScript and unknown
# outputs replaced by a note). The autograded notebooks on disk keep everything.
c.HTMLExporter.sanitize_html = True
c.HTMLExporter.skip_svg_encoding = False
c.HTMLExporter.preprocessors = ["course_tools.grading.render.SanitizeSubmission"]
c.HTMLExporter.filters = {"markdown2html": "course_tools.grading.render.SafeMarkdown2HTML",
                          "clean_html": "course_tools.grading.render.clean_html"}
# Feedback shows each hidden check's name and what kind of thing differs, never its code, inputs
# or reference values (course_tools/grading/feedback.py); Formgrader keeps the full report.
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
    "course_tools.grading.feedback.RedactHiddenTests",
]

c.Autograde.autograde_preprocessors = [
    SandboxedExecute,
    VerifyRecords,
    RequireIntegrityCheck,
    StderrToStdout,
    IgnorePattern,
    ClearMetadataPreprocessor,
    LimitOutput,
    SaveAutoGrades,
    AssignLatePenalties,
    CheckCellMetadata,
]

# Late submissions: only an assignment with a due date (`llm-course register NN --duedate "..."` or
# `nbgrader db assignment add NN --duedate=...`) has any; a late one scores 0 (nbgrader's "zero"
# plugin; the timestamp is the one `nbgrader submit` wrote, kept by `collect`). Keep late work at
# full marks with --LateSubmissionPlugin.penalty_method=none.
c.LateSubmissionPlugin.penalty_method = "zero"
# "zero" on the total: the written answers graded by hand after autograding are taken too, in any
# grading order (course_tools/grading/late.py follows the penalty whenever a grade changes).
from course_tools.grading import late as _late  # noqa: E402

_late.install()
# Formgrader: no configuration panel (it cannot show this config, which holds classes, and logged
# "Formgrader config is not serializable" at every page load).
c.FormgradeExtension.debug = False

# Student work, grades, feedback, refused copies, secrets and reference records are the instructor's
# alone, while the checkout stays readable (students run its .venv): whenever the owner of the course
# root runs nbgrader or llm-course here, submitted/, autograded/, feedback/, refused/, .llm-course/,
# cluster/ become 0700 and gradebook.db, grade exports (*.csv) and nbgrader's log 0600; a command that
# writes them creates its folders 0700 first (collect, export, db: umask 077). `llm-course doctor`
# lists what other accounts can still reach (course_tools/grading/privacy.py).
_privacy.secure_course(c.CourseDirectory.root,
                       c.CourseDirectory.db_url if "db_url" in c.CourseDirectory
                       else "sqlite:///" + os.path.join(os.path.abspath(c.CourseDirectory.root), "gradebook.db"),
                       sys.argv)

# --- Issue 47: what a student of an edition reads, in the edition's language ---------------------
# (a block of its own; course_tools/grading/i18n.py). The answer stubs of pt_BR/notebooks are
# Portuguese ("# SEU CÓDIGO AQUI"), chosen per notebook from its setup cell's LLM_COURSE_LANG line;
# notebooks/ keeps ClearSolutions.code_stub/text_stub above. The feedback page's words follow each
# notebook's language (nbgrader's feedback template, labels looked up: templates/llm_course_feedback).
# `nbgrader validate` wraps a long line instead of cutting it at Validator.width (course_tools/grading/validate.py).
from nbgrader.converters import GenerateAssignment as _GenerateAssignment  # noqa: E402
from nbgrader.preprocessors import ClearSolutions as _ClearSolutions  # noqa: E402

from course_tools.grading import i18n as _i18n, validate as _validate  # noqa: E402

c.GenerateAssignment.preprocessors = [_i18n.EditionClearSolutions if p is _ClearSolutions else p
                                      for p in _GenerateAssignment.class_traits()["preprocessors"].default()]
c.GenerateFeedback.exporter_class = "course_tools.grading.i18n.FeedbackExporter"
c.FeedbackExporter.template_name = _i18n.FEEDBACK_TEMPLATE
c.FeedbackExporter.extra_template_basedirs = [str(_i18n.TEMPLATES), _i18n.NBGRADER_TEMPLATES]
_validate.install()
