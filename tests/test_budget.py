"""The time budget plugin (tests/_budget.py) fails for real, and its file names tests that exist.

Each case runs pytest in a subprocess on a tiny suite whose tests sleep a fraction of a second
over a budget of a fraction of a second (``-p _budget``, the plugin the root conftest.py loads).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent

SUITE = '''
import time
import pytest

@pytest.fixture(scope="module")
def shared():
    time.sleep(0.6)
    return 1

def test_fast():
    pass

def test_slow():
    time.sleep(0.6)

@pytest.mark.parametrize("p", ["a-1", "b"])
def test_param(p):
    time.sleep(0.6)

def test_uses_shared(shared):
    assert shared == 1
'''


def _run(tmp_path: Path, budget: str, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_tiny.py").write_text(SUITE)
    (tmp_path / "budget.toml").write_text(budget)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "_budget", "-p", "no:cacheprovider", "-q",
                           "--budget-file", str(tmp_path / "budget.toml"), "--rootdir", str(tmp_path), *args,
                           str(tmp_path)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def test_an_unlisted_slow_test_fails_the_run(tmp_path):
    res = _run(tmp_path, "default_s = 0.3\n")
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert "5 passed" in out and "time budget exceeded" in out, out
    assert re.search(r"test test_tiny.py::test_slow: 0\.\d s > default budget 0.3 s, not listed", out), out
    assert "test_tiny.py::test_param[a-1]" in out and "test_tiny.py::test_param[b]" in out, out
    assert "test_fast" not in out.split("time budget exceeded")[1], out
    # the module fixture is budgeted on its own, not charged to the test that happened to start it
    assert "shared fixture (setup) test_tiny.py::shared:" in out, out
    assert "test test_tiny.py::test_uses_shared" not in out, out


LISTED = '''default_s = 0.3
[tests."test_tiny.py::test_slow"]
measured_s = 0.6
max_s = 5
[tests."test_tiny.py::test_param[a-1]"]
measured_s = 0.6
max_s = 5
[fixtures."test_tiny.py::shared"]
measured_s = 0.6
max_s = 5
'''


def test_listed_tests_pass_and_parametrized_ids_match_exactly(tmp_path):
    res = _run(tmp_path, LISTED)
    out = res.stdout + res.stderr
    assert res.returncode == 1, out   # test_param[b] is not listed
    over = out.split("time budget exceeded")[1]
    assert "test_param[b]" in over and "test_param[a-1]" not in over and "test_slow" not in over, out
    assert "shared" not in over, out
    res = _run(tmp_path, LISTED.replace("test_param[a-1]", "test_param[b]").replace(
        'default_s = 0.3', 'default_s = 0.3\n[tests."test_tiny.py::test_param[a-1]"]\nmeasured_s = 0.6\nmax_s = 5'))
    assert res.returncode == 0, res.stdout + res.stderr


def test_a_listed_test_over_its_maximum_fails(tmp_path):
    res = _run(tmp_path, '[tests."test_tiny.py::test_slow"]\nmeasured_s = 0.3\nmax_s = 0.4\n', "--budget-default", "10")
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert re.search(r"test test_tiny.py::test_slow: 0\.\d s > listed max 0.4 s \(measured 0.3 s\)", out), out
    assert out.split("time budget exceeded")[1].count("test_tiny.py") == 1, out   # the rest: within 10 s


def test_the_budget_holds_with_xdist_workers(tmp_path):
    pytest.importorskip("xdist")
    res = _run(tmp_path, "default_s = 0.3\n", "-n", "2", "--dist", "loadscope", "--no-loadscope-reorder")
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert "test_tiny.py::test_slow" in out and "shared fixture (setup) test_tiny.py::shared" in out, out
    assert "test test_tiny.py::test_uses_shared" not in out, out


def test_the_longest_listed_scopes_are_collected_first(tmp_path):
    res = _run(tmp_path, 'default_s = 100\n[tests."test_tiny.py::test_param[b]"]\nmeasured_s = 1\nmax_s = 2\n',
               "--collect-only")
    assert res.returncode == 0, res.stdout + res.stderr
    (tmp_path / "test_other.py").write_text("def test_x():\n    pass\n")
    res = _run(tmp_path, 'default_s = 100\n[tests."test_other.py::test_x"]\nmeasured_s = 9\nmax_s = 20\n',
               "--collect-only")
    ids = [ln.strip() for ln in res.stdout.splitlines() if "::" in ln]
    assert ids[0] == "test_other.py::test_x" and ids[1:3] == ["test_tiny.py::test_fast", "test_tiny.py::test_slow"], ids


def test_a_malformed_budget_file_is_an_error(tmp_path):
    res = _run(tmp_path, '[tests."test_tiny.py::test_slow"]\nmax_s = 5\n')
    assert res.returncode == 4 and "needs measured_s and max_s" in res.stdout + res.stderr, res.stdout + res.stderr


def test_the_budget_file_names_tests_that_exist():
    """Every entry of tests/slow_tests.toml names a test (or a wider fixture) of this repository."""
    from course_tools.release import chapters

    data = tomllib.loads((TESTS / "slow_tests.toml").read_text())
    assert data["default_s"] > 0
    round_trips = {f"tests/test_notebooks.py::TestAutograde_{ch}::test_round_trip" for ch in chapters(ROOT)}
    for kind in ("tests", "fixtures"):
        for key, entry in data.get(kind, {}).items():
            assert entry["max_s"] >= entry["measured_s"] > 0 and entry["max_s"] > data["default_s"], key   # else: not needed
            if key in round_trips:
                continue
            path, name = key.split("::")[0], key.split("::")[-1].split("[")[0]
            text = (ROOT / path).read_text()
            pattern = rf"def {re.escape(name)}\(" if kind == "tests" else rf"@pytest\.fixture[^\n]*\)\ndef {re.escape(name)}\("
            assert re.search(pattern, text), f"{kind} entry {key}: no such {'test' if kind == 'tests' else 'fixture'}"
            if kind == "fixtures":
                assert re.search(rf'@pytest\.fixture\(scope="(module|class|package|session)"\)\ndef {re.escape(name)}\(', text), key
