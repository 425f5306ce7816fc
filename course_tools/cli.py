"""``llm-course``: the course's command line.

doctor          versions, device, offline mode, which models are real or stand-ins, caches, and
                what of the course root and its gradebook other accounts can reach
prefetch        download the real models / build the stand-ins now (for air-gapped use later);
                --offline: only build the course cache grading kernels read (make install runs it)
release         regenerate notebooks/ from solutions/ (nbgrader, outputs stripped)
check-release   fail if notebooks/ is out of sync with solutions/
selftest        autograde round trip of one or all chapters (solution full, blank 0, wrong answers lose)
build           chapters/NN/NN.py (the chapter's source) -> solutions/NN/NN.ipynb, executed
export-script   solutions/NN/NN.ipynb -> chapters/NN/NN.py (after editing the notebook; old name: export).
                Not grades: `nbgrader export --to grades.csv` writes the gradebook's scores
check-sources   fail if a chapter script and its solution notebook disagree
execute         re-execute a solution notebook in place
references      run (and cache) the trusted reference run of each chapter (before grading a class)
register        add chapters (notebooks, graded cells, due date) to the gradebook from solutions/; notebooks/ untouched
edition [LANG]  the edition the class is released: en (notebooks/) or pt_BR (pt_BR/notebooks/); shows it without LANG
autograde NN    nbgrader autograde of every submission of NN, --jobs N at once, into one gradebook
hub-sim DIR     write a simulated Hugging Face hub: the four model names at their real configurations
cluster ...     grade a class as Slurm job arrays, one merge job the only gradebook writer
exchange ...    the class's exchange: init, the submission service (serve), check, client-config
class-hub ...   the class on a JupyterHub (PAM accounts, JupyterLab, Formgrader): config, up
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path


def _doctor(args: argparse.Namespace) -> int:
    import platform

    t0 = time.perf_counter()
    from course_utils import env, paths

    print(f"python        {platform.python_version()} ({sys.executable})")
    try:
        import torch

        cuda = torch.cuda.is_available()
        print(f"torch         {torch.__version__} | cuda available: {cuda} | threads: {torch.get_num_threads()}")
    except ImportError:
        print("torch         NOT INSTALLED: run `make install` (CPU build: pip install torch==2.13.0)")
        return 1
    import transformers

    print(f"transformers  {transformers.__version__}")
    for pkg in ("tokenizers", "nbgrader", "nbval"):
        try:
            from importlib.metadata import version

            print(f"{pkg:<13} {version(pkg)}")
        except Exception:
            print(f"{pkg:<13} not installed")
    from course_utils import data, models

    if env.offline_mode():
        net = "OFFLINE (LLM_COURSE_OFFLINE / HF_HUB_OFFLINE): cached real models, else the course's offline models"
        hub = None
    else:
        hub = models.hub_reachable(timeout=3.0)
        net = ("online: the hub answers, real models are downloaded" if hub else
               "online mode, but the hub is UNREACHABLE: uncached models fail; set LLM_COURSE_OFFLINE=1")
    print(f"mode          {'CI (reduced demos)' if env.ci_mode() else 'full'}; {net}")
    for name in models.MODEL_NAMES:
        print(f"model         {name:<36} -> {models.describe(name, hub=hub)}")
    print(f"corpus        {data.describe_corpus()}")
    print(f"cache         {paths.cache_dir()} (LLM_COURSE_CACHE)")
    try:
        from huggingface_hub import constants

        print(f"hf cache      {constants.HF_HUB_CACHE} (HF_HOME)")
    except Exception:  # pragma: no cover
        pass
    try:
        print(f"checkout      {paths.repo_root()}")
    except FileNotFoundError as exc:
        print(f"checkout      {exc}")
    from course_tools.grading import limits, sandbox

    why = sandbox.probe()
    print(f"sandbox       {'bubblewrap ready' if why is None else 'UNAVAILABLE: ' + why}")
    for line in limits.describe():
        print(f"grading limit {line}")
    for line in _privacy_lines():
        print(line)
    print(f"(doctor took {time.perf_counter() - t0:.1f} s)")
    return 0


def _privacy_lines() -> list[str]:
    """What of the course root and its gradebook other accounts can reach (course_tools/grading/privacy.py)."""
    from .classroom import course_root, db_url
    from .grading.privacy import exposure_warnings, redact_url

    root = course_root()
    try:
        url = db_url(root)
    except Exception as exc:   # a broken course config: say so, check the rest
        url = None
        lines = [f"gradebook     UNKNOWN: the course config did not load ({type(exc).__name__}: {exc})"]
    else:
        lines = [f"gradebook     {redact_url(url)}"]
    warnings = exposure_warnings(root, url)
    if not warnings:
        return [*lines, f"privacy       {root}: student work, grades, feedback and reference records are the "
                        "instructor's alone"]
    return [*lines, *(f"PRIVACY       {w}" for w in warnings)]


# commands that write student work, grades or reference records: the course root's private folders
# are made private (and created 0700) before they run (course_tools/grading/privacy.py)
PRIVATE_COMMANDS = ("register", "autograde", "references", "cluster")


def _secure(args: argparse.Namespace) -> None:
    """Before a command of :data:`PRIVATE_COMMANDS`: the course root's private items made private."""
    from .classroom import course_root, db_url
    from .grading.privacy import secure_course

    from course_utils.paths import repo_root

    if args.cmd == "references":   # where _references reads and writes
        root = Path(args.course).resolve() if args.course else repo_root()
    else:
        root = course_root()
    if args.cmd == "cluster" and args.cluster_cmd == "local-slurm":
        return
    secure_course(root, db_url(root, getattr(args, "db", None)), ["llm-course", args.cmd])


def _prefetch(args: argparse.Namespace) -> int:
    from course_utils import data, models

    from .classroom import build_caches

    # What a sandboxed grading kernel reads from the course cache but may not write (the sandbox
    # mounts it read-only): built first, without network. --offline stops there.
    build_caches()
    if args.offline:
        return 0
    data.shakespeare_dir()
    for name in args.models or models.MODEL_NAMES:
        models.load_model(name)
        if name == "gpt2":  # the other GPT-2 roles: text (logit lens) and fluent (sampling)
            models.load_model(name, need="text")
            models.load_model(name, need="fluent")
    return 0


def _release(args: argparse.Namespace) -> int:
    from .release import ReleaseError, release

    try:
        done = release(args.chapters or None, force=args.force)
    except ReleaseError as exc:
        print(f"release refused: {exc}", file=sys.stderr)
        return 2
    print("regenerated notebooks/ for: " + ", ".join(done))
    return 0


def _check_release(args: argparse.Namespace) -> int:
    from .release import ReleaseError, check_release

    try:
        problems = check_release()
    except ReleaseError as exc:
        print(f"check-release: {exc}", file=sys.stderr)
        return 2
    if problems:
        print("notebooks/ is out of sync with solutions/ (run `llm-course release`):", file=sys.stderr)
        for p in problems:
            print(f"  - {p}", file=sys.stderr)
        return 1
    print("notebooks/ is in sync with solutions/")
    return 0


def _hub_sim(args: argparse.Namespace) -> int:
    """Write the simulated hub (course_tools/hub_sim.py) and say how to use it."""
    from .hub_sim import build

    from course_utils.models import MODEL_NAMES

    home = build(Path(args.dir), names=tuple(args.names or MODEL_NAMES))
    print(f"\nuse it with:  HF_HOME={home} HF_HUB_OFFLINE=1  (load_model then prints SIMULATED hub model)")
    return 0


def _references(args: argparse.Namespace) -> int:
    """Run the trusted reference run of each chapter now (before grading a class), and summarise it."""
    from .grading.references import reference_records
    from .release import chapters

    from course_utils.paths import repo_root

    root = Path(args.course).resolve() if args.course else repo_root()
    source_dir = root / ("source" if (root / "source").is_dir() and not (root / "solutions").is_dir() else "solutions")
    os.environ.setdefault("NBGRADER_EXECUTION", "autograde")   # the environment autograding runs in
    failed = 0
    for ch in args.chapters or chapters():
        t0 = time.perf_counter()
        try:
            recs = reference_records(source_dir / ch / f"{ch}.ipynb", root)
        except RuntimeError as exc:
            print(f"{ch}: FAIL {exc}")
            failed += 1
            continue
        counts = ", ".join(f"{gid} {len(r)}" for gid, r in recs.items())
        print(f"{ch}: {sum(len(r) for r in recs.values())} reference values ({counts}) in {time.perf_counter() - t0:.0f} s")
    return 1 if failed else 0


def _register(args: argparse.Namespace) -> int:
    from .classroom import course_root, register, source_assignments

    root = course_root()
    try:
        register(args.chapters or source_assignments(root), root, duedate=args.duedate, db=args.db)
    except (RuntimeError, FileNotFoundError) as exc:
        print(f"register failed: {exc}", file=sys.stderr)
        return 1
    return 0


def _edition(args: argparse.Namespace) -> int:
    """Show or record the class edition (course_tools/editions.py): what nbgrader's release hands out."""
    from .classroom import course_root
    from .editions import EditionError, class_edition, release_folder, set_class_edition

    root = course_root()
    try:
        if args.lang:
            path = set_class_edition(args.lang, root)
            print(f"recorded in {path}")
        lang = class_edition(root)
    except EditionError as exc:
        print(f"edition: {exc}", file=sys.stderr)
        return 2
    print(f"class edition: {lang}: `nbgrader release_assignment NN` and Formgrader's Release button hand out "
          f"{root / release_folder(lang)}/NN (grading: one gradebook, the English source in solutions/)")
    return 0


def _autograde(args: argparse.Namespace) -> int:
    from .classroom import autograde, course_root

    root = course_root()
    try:
        run = autograde(args.chapter, root, students=args.student, jobs=args.jobs, db=args.db,
                        force=not args.no_force)
    except RuntimeError as exc:
        print(f"autograde refused: {exc}", file=sys.stderr)
        return 2
    n = len(run.students)
    print(f"autograded {n - len(run.failed)}/{n} submissions of {args.chapter} with {run.jobs} worker(s) "
          f"in {run.seconds:.1f} s")
    for who, why in run.failed.items():
        print(f"  FAILED {who}: {why.strip().splitlines()[-1] if why.strip() else ''}", file=sys.stderr)
    if run.failed:
        for text in run.logs:
            print(text, file=sys.stderr)
    return 1 if run.failed else 0


def _selftest(args: argparse.Namespace) -> int:
    from .grading.selftest import round_trip
    from .release import chapters

    from course_utils.env import offline_mode
    from course_utils.models import hub_reachable

    if not offline_mode() and not hub_reachable():
        # The graded notebooks load models; without the hub they need the stand-ins (README).
        print("model hub unreachable: grading with LLM_COURSE_OFFLINE=1 HF_HUB_OFFLINE=1 (stand-in models)")
        os.environ["LLM_COURSE_OFFLINE"] = os.environ["HF_HUB_OFFLINE"] = "1"
    failed = 0
    for ch in args.chapters or chapters():
        t0 = time.perf_counter()
        res = round_trip(ch, separate=args.separate)
        status = "ok" if not res.problems else "FAIL"
        print(f"{ch}: {status} ({time.perf_counter() - t0:.0f} s)")
        for who, cells in res.scores.items():
            got = sum(s for s, _ in cells.values())
            mx = sum(m for _, m in cells.values())
            print(f"    {who:<28} {got:g}/{mx:g}")
        for p in res.problems:
            print(f"    - {p}")
        failed += bool(res.problems)
    return 1 if failed else 0


def _build(args: argparse.Namespace) -> int:
    from .authoring import build
    from .release import chapters

    for ch in args.chapters or chapters():
        t0 = time.perf_counter()
        out = build(ch, run=not args.no_run, ci=not args.full)
        how = "outputs of unchanged cells kept" if args.no_run else ("executed, full mode" if args.full else "executed, CI mode")
        print(f"built {out} ({how}, {time.perf_counter() - t0:.1f} s)")
    from . import translation as tr

    for lang in tr.LANGUAGES:   # the editions: say which catalogues the English change made stale
        stale = [ch for ch in (args.chapters or chapters()) if tr.stale_entries(ch, lang)]
        if stale:
            print(f"the {lang} edition is now behind the English text of {', '.join(stale)}: run "
                  f"`llm-course translate update`, translate what it marks, then `llm-course translate build`")
    return 0


def _export(args: argparse.Namespace) -> int:
    from .authoring import export
    from .release import chapters

    for ch in args.chapters or chapters():
        print(f"wrote {export(ch)}")
    return 0


def _check_sources(args: argparse.Namespace) -> int:  # noqa: ARG001
    from .authoring import sync_problems
    from .release import chapters

    problems = [p for ch in chapters() for p in sync_problems(ch)]
    for p in problems:
        print(f"  - {p}", file=sys.stderr)
    if problems:
        return 1
    print("every chapter script matches its solution notebook")
    return 0


def _execute(args: argparse.Namespace) -> int:
    from .authoring import execute

    for nb in args.notebooks:
        t0 = time.perf_counter()
        execute(Path(nb), ci=not args.full)
        print(f"executed {nb} in {time.perf_counter() - t0:.1f} s")
    return 0


def _translate(args: argparse.Namespace) -> int:
    """The editions in other languages (course_tools/translation.py)."""
    import json

    from . import translation as tr

    lang = args.lang
    if args.action == "update":
        for path in tr.update(lang, only=args.names or None):
            print(f"updated {path}")
        print(tr.coverage_report(lang))
        return 0
    if args.action == "status":
        print(tr.coverage_report(lang))
        return 0
    if args.action == "build":
        for path in tr.build(lang, args.names or None):
            print(f"wrote {path}")
        missing = [c for c in tr.coverage(lang) if c.share < 1]
        if missing:
            print(f"not every entry is translated (the edition keeps those blocks in English):\n{tr.coverage_report(lang)}")
        return 0
    if args.action == "check":
        problems = tr.catalogue_problems(lang) + tr.stale_editions(lang) + tr.edition_problems(lang)
        for p in problems:
            print(f"  - {p}", file=sys.stderr)
        print(tr.coverage_report(lang))
        return 1 if problems else 0
    if args.action == "pending":
        for name in args.names:
            print(json.dumps(tr.pending(name, lang), ensure_ascii=False, indent=1))
        return 0
    if args.action == "fill":
        if len(args.names) != 2:
            print("usage: llm-course translate fill CATALOGUE FILE.json  (FILE: {english block: translation})", file=sys.stderr)
            return 2
        name, file = args.names
        n, problems = tr.fill(name, lang, json.loads(Path(file).read_text(encoding="utf-8")))
        for p in problems:
            print(f"  - {p}", file=sys.stderr)
        print(f"{n} entries written to {tr.catalogue_path(name, lang)}; {len(problems)} refused")
        return 1 if problems else 0
    raise AssertionError(args.action)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="llm-course", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("doctor", help="show versions, device, models in use, caches").set_defaults(fn=_doctor)
    p = sub.add_parser("prefetch", help="download/build every model now for later offline use")
    p.add_argument("models", nargs="*")
    p.add_argument("--offline", action="store_true",
                   help="only build the course cache (SmolLM2 conversion, Shakespeare GPT-2, corpus): no network")
    p.set_defaults(fn=_prefetch)
    p = sub.add_parser("release", help="regenerate notebooks/ from solutions/")
    p.add_argument("chapters", nargs="*")
    p.add_argument("--force", action="store_true", help="overwrite uncommitted edits in notebooks/")
    p.set_defaults(fn=_release)
    sub.add_parser("check-release", help="fail if notebooks/ is out of sync").set_defaults(fn=_check_release)
    p = sub.add_parser("hub-sim", help="write a simulated Hugging Face hub: the real model names and configurations")
    p.add_argument("dir", help="folder to use as HF_HOME")
    p.add_argument("names", nargs="*", help="model names (default: all four)")
    p.set_defaults(fn=_hub_sim)
    p = sub.add_parser("references", help="run (and cache) the trusted reference run of each chapter")
    p.add_argument("chapters", nargs="*")
    p.add_argument("--course", help="nbgrader course root (default: this checkout)")
    p.set_defaults(fn=_references)
    p = sub.add_parser("register", help="add chapters to the gradebook from solutions/ (notebooks/ untouched)")
    p.add_argument("chapters", nargs="*", help="default: every chapter of solutions/")
    p.add_argument("--duedate", help='e.g. "2026-12-01 17:00:00 UTC" (late submissions then score 0)')
    p.add_argument("--db", help="gradebook URL (default: the course config's, sqlite:///gradebook.db)")
    p.set_defaults(fn=_register)
    p = sub.add_parser("edition", help="the edition the class is released: en (notebooks/) or pt_BR (pt_BR/notebooks/)")
    from .editions import ENGLISH, LANGUAGES

    p.add_argument("lang", nargs="?", choices=[ENGLISH, *LANGUAGES], help="record this edition (without: show the current one)")
    p.set_defaults(fn=_edition)
    p = sub.add_parser("autograde", help="nbgrader autograde of many submissions at once")
    p.add_argument("chapter")
    p.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1,
                   help="nbgrader processes at once (default: CPU count)")
    p.add_argument("--student", action="append", help="only these students (repeatable)")
    p.add_argument("--db", help="gradebook URL (default: the course config's); e.g. postgresql://...")
    p.add_argument("--no-force", action="store_true", help="skip submissions already autograded")
    p.set_defaults(fn=_autograde)
    p = sub.add_parser("selftest", help="autograde round trip")
    p.add_argument("chapters", nargs="*")
    p.add_argument("--separate", action="store_true", help="grade every wrong-answer variant on its own")
    p.set_defaults(fn=_selftest)
    p = sub.add_parser("build", help="chapters/NN/NN.py -> solutions/NN/NN.ipynb, executed")
    p.add_argument("chapters", nargs="*", help="chapter ids (NN_name); default: all")
    p.add_argument("--no-run", action="store_true", help="do not execute: keep outputs of unchanged cells")
    p.add_argument("--full", action="store_true", help="execute in full mode instead of CI mode")
    p.set_defaults(fn=_build)
    p = sub.add_parser("export-script", aliases=["export"],
                       help="solutions/NN/NN.ipynb -> chapters/NN/NN.py (chapter sources, not grades: "
                            "grades are `nbgrader export --to grades.csv`)")
    p.add_argument("chapters", nargs="*")
    p.set_defaults(fn=_export)
    sub.add_parser("check-sources", help="fail if a script and its notebook disagree").set_defaults(fn=_check_sources)
    p = sub.add_parser("execute", help="re-execute solution notebooks in place")
    p.add_argument("notebooks", nargs="+")
    p.add_argument("--full", action="store_true", help="full mode instead of CI mode")
    p.set_defaults(fn=_execute)
    p = sub.add_parser("translate", help="the pt-BR edition: catalogues, coverage, build, checks")
    p.add_argument("action", choices=["update", "status", "build", "check", "pending", "fill"],
                   help="update [NAMES]: merge the English text into the catalogues (all, or the named ones; changed entries become fuzzy); "
                        "status: coverage; build: the edition's notebooks and compiled messages; check: drift; "
                        "pending NAME: untranslated blocks as JSON; fill NAME FILE.json: write translations")
    p.add_argument("names", nargs="*", help="chapters (build), catalogue names (pending), or NAME FILE (fill)")
    p.add_argument("--lang", default="pt_BR", help="the edition (default: pt_BR)")
    p.set_defaults(fn=_translate)
    from .cluster.commands import add_parser as add_cluster_parser

    add_cluster_parser(sub)   # llm-course cluster submit|work|merge|status|rerun|local-slurm
    from .exchange_service.commands import add_parser as add_exchange_parser

    add_exchange_parser(sub)  # llm-course exchange init|serve|check|client-config
    from .class_hub.commands import add_parser as add_class_hub_parser

    add_class_hub_parser(sub)  # llm-course class-hub config|up
    args = parser.parse_args(argv)
    if args.cmd in PRIVATE_COMMANDS:
        _secure(args)
    return int(args.fn(args))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
