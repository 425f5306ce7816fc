"""pytest settings for the whole repository (unit tests in tests/, nbval over solutions/).

* Offline, CI mode, no GPU assumptions: the environment variables below apply to every test
  and to every kernel the tests start (kernels inherit the environment).
* nbval kernels start over IPC with retries (course_tools.kernels explains the race it fixes).
"""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LLM_COURSE_OFFLINE", "1")
os.environ.setdefault("LLM_COURSE_CI", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("MPLBACKEND", "Agg")


def pytest_configure(config):  # noqa: ARG001 (pytest hook signature)
    from course_tools.kernels import harden_nbval

    harden_nbval()
