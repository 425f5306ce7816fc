import os
import subprocess
import sys
import time


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "course_tools.cli", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=120)


def test_doctor_answers_offline_within_10_seconds():
    t0 = time.perf_counter()
    res = _cli("doctor")
    elapsed = time.perf_counter() - t0
    assert res.returncode == 0, res.stderr
    for needle in ("torch", "transformers", "OFFLINE", "bert-base-uncased", "STAND-IN", "corpus", "cache"):
        assert needle in res.stdout, f"doctor does not report {needle}:\n{res.stdout}"
    assert elapsed < 10, f"doctor took {elapsed:.1f} s"


def test_check_release_cli_exit_code():
    res = _cli("check-release")
    assert res.returncode == 0, res.stdout + res.stderr


def test_unknown_command_is_an_error():
    assert _cli("frobnicate").returncode != 0
