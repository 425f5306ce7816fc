"""A time budget per test that holds (issue 46): a pytest plugin, loaded by the root ``conftest.py``.

* **Per test**: a test's time is its setup + call + teardown, *less* the setup of fixtures of a wider
  scope (module, class, package, session), which are budgeted on their own (below): a module's
  shared nbgrader run counts once, whichever of its tests happens to start it. A test over the
  budget fails the run (exit status 1) unless ``tests/slow_tests.toml`` lists it, with its measured
  time and an allowed maximum, and it stays within that maximum.
* **Per shared fixture**: the setup of each fixture of a wider scope, named
  ``<scope node id>::<fixture name>`` (``tests/test_exchange.py::accounts``; ``::postgres`` for a
  session fixture), has the same default budget and its own entries.
* **Scheduling**: with ``-n N --dist loadscope --no-loadscope-reorder`` (``make test``), the
  collection is reordered so that the scopes (a module, or a class: each chapter's round trip) with
  the largest listed time go first, longest first, so that the longest ones start at once on
  different workers instead of being left for the end; the other scopes follow, those with more
  tests first (pytest-xdist's own order).

The budget file (TOML)::

    default_s = 60
    [tests."tests/test_notebooks.py::TestAutograde_10_pretraining_shakespeare::test_round_trip"]
    measured_s = 474
    max_s = 711
    [fixtures."tests/test_kernel_channels.py::graded"]
    measured_s = 280
    max_s = 420

Test ids are matched exactly, as pytest writes them (parameters in brackets included:
``...::test_x[05_rope]``), relative to the repository root. Options: ``--budget-file PATH`` (default
``tests/slow_tests.toml`` of the root), ``--budget-default SECONDS`` (overrides the file's default),
``--no-budget`` (measure nothing, fail nothing; for a debugger or profiler).
"""
from __future__ import annotations

import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pytest

BUDGET_FILE = Path(__file__).with_name("slow_tests.toml")
FIXTURE_PROPERTY = "budget:wider-fixture"   # (key, seconds) in a setup report's user_properties


@dataclass
class Entry:
    """An allowed exception to the default budget."""

    measured_s: float
    max_s: float
    note: str = ""


@dataclass
class Budget:
    """The contents of the budget file."""

    default_s: float
    tests: dict[str, Entry] = field(default_factory=dict)
    fixtures: dict[str, Entry] = field(default_factory=dict)

    def limit(self, kind: str, key: str) -> float:
        """The allowed seconds of a test (``kind="tests"``) or a shared fixture (``"fixtures"``)."""
        entry = getattr(self, kind).get(key)
        return entry.max_s if entry is not None else self.default_s


def load_budget(path: Path) -> Budget:
    """Read and check the budget file (a wrong entry is a usage error, not a silent pass)."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    unknown = set(data) - {"default_s", "tests", "fixtures"}
    if unknown:
        raise pytest.UsageError(f"{path}: unknown keys {sorted(unknown)}")
    budget = Budget(float(data.get("default_s", 60)))
    for kind in ("tests", "fixtures"):
        for key, raw in data.get(kind, {}).items():
            if not isinstance(raw, dict) or not {"measured_s", "max_s"} <= set(raw) or set(raw) - {"measured_s", "max_s", "note"}:
                raise pytest.UsageError(f"{path}: [{kind}.{key!r}] needs measured_s and max_s (and an optional note)")
            entry = Entry(float(raw["measured_s"]), float(raw["max_s"]), str(raw.get("note", "")))
            if entry.max_s < entry.measured_s:
                raise pytest.UsageError(f"{path}: [{kind}.{key!r}] max_s is below measured_s")
            getattr(budget, kind)[key] = entry
    return budget


def scope_of(nodeid: str) -> str:
    """The pytest-xdist ``loadscope`` work unit of a test id (its module, or its class)."""
    return nodeid.rsplit("::", 1)[0]


def add_options(parser: pytest.Parser) -> None:
    """The plugin's command-line options."""
    group = parser.getgroup("budget", "time budget per test (tests/_budget.py)")
    group.addoption("--budget-file", default=None, help="the budget file (default: tests/slow_tests.toml)")
    group.addoption("--budget-default", type=float, default=None, help="seconds allowed to an unlisted test")
    group.addoption("--no-budget", action="store_true", default=False, help="do not measure nor enforce the budget")


class TimeBudget:
    """The plugin object (see the module docstring)."""

    def __init__(self, config: pytest.Config) -> None:
        path = config.getoption("budget_file") or BUDGET_FILE
        self.path = Path(path)
        self.budget = load_budget(self.path)
        if config.getoption("budget_default") is not None:
            self.budget.default_s = float(config.getoption("budget_default"))
        self.worker = hasattr(config, "workerinput")   # the controller (or a plain run) decides
        self.seconds: dict[str, float] = {}            # test id -> its own seconds
        self.shared: dict[str, float] = {}             # shared fixture -> setup seconds
        self.over: list[str] = []

    # --- scheduling --------------------------------------------------------------------------
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """Scopes with the largest listed time first (then xdist's order: scopes with more tests)."""
        weight: dict[str, float] = {}
        count: dict[str, int] = {}
        for item in items:
            scope = scope_of(item.nodeid)
            count[scope] = count.get(scope, 0) + 1
            entry = self.budget.tests.get(item.nodeid)
            if entry is not None:
                weight[scope] = weight.get(scope, 0.0) + entry.measured_s
        for key, entry in self.budget.fixtures.items():
            scope = key.rsplit("::", 1)[0]
            if scope in count:
                weight[scope] = weight.get(scope, 0.0) + entry.measured_s
        first = {}
        for i, item in enumerate(items):
            first.setdefault(scope_of(item.nodeid), i)
        items.sort(key=lambda it: (-weight.get(scope_of(it.nodeid), 0.0), -count[scope_of(it.nodeid)],
                                   first[scope_of(it.nodeid)]))   # stable: a scope's tests keep their order

    # --- measuring (in the process that runs the test) ---------------------------------------
    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef: Any, request: Any) -> Iterator[None]:
        """Time the setup of fixtures of a wider scope than the test: they are budgeted on their own."""
        if fixturedef.scope == "function":
            return (yield)
        t0 = time.perf_counter()
        try:
            return (yield)
        finally:
            seconds = time.perf_counter() - t0
            node = getattr(request, "node", None)
            key = f"{getattr(node, 'nodeid', '') if fixturedef.scope != 'session' else ''}::{fixturedef.argname}"
            item = getattr(request, "_pyfuncitem", None)
            if item is not None:   # travels with the setup report (to the xdist controller too)
                item.user_properties.append((FIXTURE_PROPERTY, [key, seconds]))

    # --- deciding (in the controller, or in a run without workers) ---------------------------
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Add up each test's phases; a wider fixture's setup is taken out of its test."""
        if self.worker:
            return
        own = report.duration
        if report.when == "setup":
            for name, value in report.user_properties:
                if name == FIXTURE_PROPERTY:
                    key, seconds = value
                    self.shared[key] = self.shared.get(key, 0.0) + float(seconds)
                    own -= float(seconds)
        self.seconds[report.nodeid] = self.seconds.get(report.nodeid, 0.0) + max(own, 0.0)

    def violations(self) -> list[str]:
        """One line per test or shared fixture over what it is allowed."""
        out = []
        for kind, times in (("tests", self.seconds), ("fixtures", self.shared)):
            for key, seconds in sorted(times.items(), key=lambda kv: -kv[1]):
                limit = self.budget.limit(kind, key)
                if seconds > limit:
                    listed = getattr(self.budget, kind).get(key)
                    how = (f"listed max {listed.max_s:g} s (measured {listed.measured_s:g} s)" if listed
                           else f"default budget {self.budget.default_s:g} s, not listed")
                    what = "test" if kind == "tests" else "shared fixture (setup)"
                    out.append(f"{what} {key}: {seconds:.1f} s > {how}")
        return out

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Fail the run when something went over its budget."""
        if self.worker:
            return
        self.over = self.violations()
        if self.over and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """Say what went over, and where the budget is kept: last, after ``--durations``, so that the
        tail of a CI log (often all that is shown of it) says why a run with every test passed failed."""
        if self.worker or not self.over:
            return
        terminalreporter.section("time budget exceeded", sep="=", red=True, bold=True)
        for line in self.over:
            terminalreporter.line(line, red=True)
        terminalreporter.line(f"Make it faster, or list it with its measured time and an allowed maximum in "
                              f"{self.path} (README, 'For maintainers').")


def pytest_addoption(parser: pytest.Parser) -> None:
    """When loaded with ``-p _budget`` (the plugin's own tests)."""
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    """When loaded with ``-p _budget`` (the plugin's own tests)."""
    register(config)


def register(config: pytest.Config) -> None:
    """Register the plugin object unless ``--no-budget`` (idempotent)."""
    if config.getoption("no_budget") or config.pluginmanager.has_plugin("llm-course-time-budget"):
        return
    config.pluginmanager.register(TimeBudget(config), "llm-course-time-budget")
