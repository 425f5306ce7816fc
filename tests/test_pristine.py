"""course_tools.grading.pristine and exchange: copies that follow nothing a submission made.

The kernel's folder (sandbox.py) and ``nbgrader collect`` (exchange.py) copy a folder a student
controls. Only regular files may cross: links (to an instructor's file, to a folder), FIFOs,
oversized and sparse files stay behind, and what is skipped is reported.
"""
from __future__ import annotations

import os
from pathlib import Path

from course_tools.grading.pristine import copy_regular_files


def _student_folder(tmp_path: Path) -> tuple[Path, Path]:
    secret = tmp_path / "instructor" / "solutions.ipynb"
    secret.parent.mkdir()
    secret.write_text("the instructor's solution")
    src = tmp_path / "student"
    (src / "sub").mkdir(parents=True)
    (src / "answer.ipynb").write_text("{}")
    (src / "data.txt").write_text("mine")
    (src / "sub" / "more.csv").write_text("1,2")
    (src / "link.ipynb").symlink_to(secret)
    (src / "dirlink").symlink_to(secret.parent, target_is_directory=True)
    os.mkfifo(src / "pipe")
    with open(src / "sparse.bin", "wb") as f:
        f.truncate(8 << 30)                     # 8 GiB of holes, 0 bytes on disk
    (src / "big.bin").write_bytes(b"x" * (2 << 20))
    return src, secret


def test_only_regular_files_within_limits_are_copied(tmp_path):
    src, secret = _student_folder(tmp_path)
    dst = tmp_path / "copy"
    report = copy_regular_files(src, dst, max_file_bytes=1 << 20, ignore=())
    assert sorted(report.copied) == ["answer.ipynb", "data.txt", "sub/more.csv"]
    skipped = dict(report.skipped)
    assert skipped["link.ipynb"] == skipped["dirlink"] == "symbolic link"
    assert skipped["pipe"] == "special file"
    assert "limit per file" in skipped["big.bin"]
    assert "over the" in skipped["sparse.bin"] or "sparse" in skipped["sparse.bin"]
    assert (dst / "data.txt").read_text() == "mine" and not any(p.is_symlink() for p in dst.rglob("*"))
    assert "solution" not in "".join(p.read_text() for p in dst.rglob("*") if p.is_file())


def test_a_sparse_file_under_the_size_limits_is_refused(tmp_path):
    src = tmp_path / "s"
    src.mkdir()
    with open(src / "holes.bin", "wb") as f:
        f.truncate(4 << 20)
    report = copy_regular_files(src, tmp_path / "d", ignore=())
    assert dict(report.skipped)["holes.bin"].startswith("sparse file"), report.skipped
    assert not (tmp_path / "d" / "holes.bin").exists()


def test_the_total_size_is_capped(tmp_path):
    src = tmp_path / "s"
    src.mkdir()
    for i in range(5):
        (src / f"f{i}").write_bytes(os.urandom(300_000))
    report = copy_regular_files(src, tmp_path / "d", max_total_bytes=1_000_000, ignore=())
    assert len(report.copied) == 3 and report.total_bytes == 900_000
    assert sum(p.stat().st_size for p in (tmp_path / "d").iterdir()) == 900_000


def test_collect_copies_what_the_student_made_without_following_links(tmp_path):
    from traitlets.config import Config

    from course_tools.grading.exchange import SafeCollect

    src, _ = _student_folder(tmp_path)
    (src / "timestamp.txt").write_text("2026-11-26 00:00:00.000000 UTC")
    (src / "notes.py").write_text("ignored by the course's patterns")
    cfg = Config()
    cfg.CourseDirectory.ignore = ["*.py", ".ipynb_checkpoints"]
    cfg.CourseDirectory.max_file_size = 1000            # kB
    from nbgrader.coursedir import CourseDirectory

    collect = SafeCollect(coursedir=CourseDirectory(config=cfg), config=cfg)
    collect.do_copy(str(src), str(tmp_path / "submitted"))
    got = sorted(str(p.relative_to(tmp_path / "submitted")) for p in (tmp_path / "submitted").rglob("*") if p.is_file())
    assert got == ["answer.ipynb", "data.txt", "sub/more.csv", "timestamp.txt"]


def test_nbgrader_config_selects_the_safe_collect():
    from course_utils.paths import repo_root

    assert 'c.ExchangeFactory.collect = "course_tools.grading.exchange.SafeCollect"' in (
        repo_root() / "nbgrader_config.py").read_text()
