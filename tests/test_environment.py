"""environment.yml (conda) and pyproject.toml (pip) must install the same dependency set."""
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _norm(req: str) -> str:
    return re.sub(r"\s+", "", req).lower()


def test_conda_and_pip_dependencies_agree():
    proj = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pip_side = {_norm(r) for r in proj["dependencies"] + proj["optional-dependencies"]["dev"]}
    text = (ROOT / "environment.yml").read_text()
    block = text.split("- pip:", 1)[1]
    conda_side = {_norm(m) for m in re.findall(r"^\s+-\s+(\S.*?)\s*$", block, flags=re.M)} - {"-e."}
    assert pip_side == conda_side, (
        f"only in pyproject.toml: {sorted(pip_side - conda_side)}; only in environment.yml: {sorted(conda_side - pip_side)}"
    )


def test_constraints_pin_what_ci_tests():
    pins = dict(line.split("==", 1) for line in (ROOT / "constraints.txt").read_text().split() if "==" in line)
    for pkg in ("transformers", "tokenizers", "nbgrader", "nbval", "numpy"):
        assert pkg in {k.lower() for k in pins}, f"{pkg} is not pinned in constraints.txt"


def test_readme_documents_the_two_commands_and_the_offline_variable():
    readme = (ROOT / "README.md").read_text()
    for needle in ("make lab", "make test", "LLM_COURSE_OFFLINE", "HF_HUB_OFFLINE", "environment.yml", "colab"):
        assert needle.lower() in readme.lower(), f"README does not mention {needle}"
