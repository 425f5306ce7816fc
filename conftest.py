"""pytest settings for the whole repository (unit tests in tests/, nbval over solutions/).

* Offline, CI mode, no GPU assumptions: the environment variables below apply to every test
  and to every kernel the tests start (kernels inherit the environment).
* nbval kernels start over IPC with retries (course_tools.kernels explains the race it fixes).
* Every test has a time budget, and the longest scopes are scheduled first
  (``tests/_budget.py``; the exceptions are listed in ``tests/slow_tests.toml``).
"""
import importlib.util
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LLM_COURSE_OFFLINE", "1")
os.environ.setdefault("LLM_COURSE_CI", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("MPLBACKEND", "Agg")


def _budget_plugin():
    """``tests/_budget.py``, loaded by path (``tests/`` is not a package)."""
    if "_budget" not in sys.modules:
        spec = importlib.util.spec_from_file_location("_budget", Path(__file__).with_name("tests") / "_budget.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["_budget"] = module
        spec.loader.exec_module(module)
    return sys.modules["_budget"]


def pytest_addoption(parser):
    _budget_plugin().add_options(parser)


def pytest_configure(config):
    from course_tools.kernels import harden_nbval

    harden_nbval()
    _budget_plugin().register(config)
