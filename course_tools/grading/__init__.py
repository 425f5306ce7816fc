"""Grading a submission: what ``nbgrader_config.py`` adds to ``nbgrader autograde``.

The flow, in the order one submission meets it:

1. ``preprocessors`` (sanitising step, in nbgrader's process): the submission's notebook is
   restored from the instructor's source where it must be (locked and test cells), tags and
   reference blocks are stripped, kernel hooks are flagged.
2. ``pristine``: the files of the submission reach the kernel as a copy of regular files only
   (no links, no special files, sizes capped, sparse files refused).
3. ``sandbox`` + ``limits`` + ``launch``: the kernel runs under bubblewrap on an allow-list of
   read-only paths, as an unprivileged user with no capabilities, in a private working folder
   that is discarded, within limits on memory, processes, disk, output, time and cell count;
   ``seccomp`` refuses the kernel keyrings (nothing persists from one kernel to the next).
4. ``references`` + ``probe``: the instructor's source runs once per version (the reference
   records); exercises that must be written without a library are recorded again in a kernel
   where it does not exist, starting from the same pristine copy.
5. ``preprocessors.VerifyRecords`` (the verdict, in nbgrader's process): the submission's records
   are compared with the reference; nothing the kernel produced is executed or followed.

Around it: ``exchange`` (``nbgrader collect``: only folders owned by the account they name, times
from the file system, refused folders kept aside), ``export`` (a CSV with no formula cell) and
``course_code`` (grader and kernels import the same course code, checked before any student).

``i18n`` writes what a student reads outside her kernel (the verdict, the feedback's notes and page,
the answer stubs, ``validate``'s report with its lines wrapped, not cut) in her edition's language.

``integrity`` is the one module imported inside the student's kernel (the end-of-cell check the
autograder appends); ``selftest`` and ``attacks`` prove the flow on the real chapters (tests,
``llm-course selftest``).
"""
