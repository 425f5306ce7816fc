"""``nbgrader collect`` that copies a submission's regular files only.

Students write their folder of the exchange's inbound directory themselves, and can change it
after ``submit``. Stock ``collect`` copies it with ``shutil.copytree``, which follows symbolic
links with the instructor's rights: a link to ``~instructor/course/solutions/…`` placed there
would bring the solution into ``submitted/`` and from there into the student's own kernel.
:class:`SafeCollect` copies with :func:`course_tools.grading.pristine.copy_regular_files`
instead (no links, no special files, sparse files refused), keeping nbgrader's ``ignore``
patterns and ``max_file_size``; ``nbgrader_config.py`` selects it
(``c.ExchangeFactory.collect``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from nbgrader.exchange.default.collect import ExchangeCollect

from course_tools.grading.pristine import copy_regular_files


class SafeCollect(ExchangeCollect):
    """nbgrader's default collect, with a copy that follows nothing."""

    def do_copy(self, src: str, dest: str, log: Any = None) -> None:  # type: ignore[override]
        report = copy_regular_files(Path(src), Path(dest), ignore=tuple(self.coursedir.ignore),
                                    max_file_bytes=int(self.coursedir.max_file_size) * 1000,
                                    max_total_bytes=int(self.coursedir.max_dir_size) * 1000)
        for rel, why in report.skipped:
            self.log.warning("collect: not copied from %s: %s (%s)", src, rel, why)
