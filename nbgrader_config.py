"""nbgrader configuration of the course (nbgrader 0.9.6).

solutions/  = nbgrader *source* (instructor notebooks, solutions and hidden tests inside markers)
notebooks/  = nbgrader *release* (student notebooks, generated, never edited by hand)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from nbgrader.preprocessors import (  # noqa: E402
    AssignLatePenalties,
    CheckCellMetadata,
    ClearOutput,
    DeduplicateIds,
    Execute,
    IgnorePattern,
    LimitOutput,
    OverwriteCells,
    OverwriteKernelspec,
    SaveAutoGrades,
)
from nbconvert.preprocessors import ClearMetadataPreprocessor  # noqa: E402

from course_tools.sandbox import SandboxedExecute  # noqa: E402
from course_tools.nbgrader_ext import (  # noqa: E402
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
c.CourseDirectory.release_directory = "notebooks"
c.CourseDirectory.course_id = "llm-course"
# nbgrader copies every file of a source folder into the release. Chapter scripts live in
# chapters/ (outside solutions/); should one ever be copied next to a solution notebook, it is
# still not handed out: a percent script holds the solutions and the hidden tests.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "*.py", "*.md", "*.txt"]

# Student notebooks: outputs stripped, solution regions replaced by this stub.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"
c.ClearSolutions.enforce_metadata = True
c.ClearHiddenTests.begin_test_delimeter = "BEGIN HIDDEN TESTS"
c.ClearHiddenTests.end_test_delimeter = "END HIDDEN TESTS"

# Execution limits (seconds per cell); a heavy cell in full mode stays well under this.
c.Execute.timeout = int(os.environ.get("LLM_COURSE_CELL_TIMEOUT", "300"))
c.Execute.interrupt_on_timeout = True

# Autograding (see course_utils/nbgrader_ext.py and README "Grading integrity"): re-add deleted
# graded cells, strip every tag (tags can skip cells), zero submissions that use kernel hooks,
# require each test cell to run to its end, keep library warnings from zeroing tests.
c.OverwriteCells.add_missing_cells = True
c.Autograde.sanitize_preprocessors = [
    ClearOutput,
    ResolveDuplicateCells,
    DeduplicateIds,
    OverwriteKernelspec,
    OverwriteCells,
    StripReferenceBlocks,
    StripExecutionTags,
    FlagKernelHooks,
    AppendIntegrityCheck,
    CheckCellMetadata,
]
# Each submission's kernel runs in a bubblewrap sandbox (course_tools/sandbox.py): no network,
# read-only system and course, no solutions/gradebook/other submissions, a fresh home. Without
# bubblewrap, autograding refuses (--SandboxedKernelManager.allow_unsandboxed=True overrides).
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
