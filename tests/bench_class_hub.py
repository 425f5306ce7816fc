"""A class-sized load on the class hub, on loopback (README "Run the class on a JupyterHub").

    sudo .venv/bin/python tests/bench_class_hub.py --students 24

N real accounts (tests/_hub.py) log in at once, start their servers at once, fetch the released
assignment and submit it at once (the Assignments tab's endpoints, each with her own cookie); then
everyone goes idle and the idle culler (``--cull-idle``) must stop every server. Printed: login and
spawn times (median, 95th percentile, slowest), the memory of an idle server (resident set of its
process tree, from /proc), fetch and submit times, the time until the culler has stopped all
servers, and what one 16-core / 64 GB node would hold at that memory. Bounded: at most 64 students,
each step with a timeout, addresses on 127.0.0.1 only.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _hub import class_hub  # noqa: E402
from test_class_hub import COURSE_ID, _release_once, _server_post  # noqa: E402
from _classroom import AID  # noqa: E402


def _tree_rss_kb(pid: int) -> int:
    """Resident set (kB) of ``pid`` and all its descendants."""
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                ppid = int(open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            children.setdefault(ppid, []).append(int(d))
    total, stack = 0, [pid]
    while stack:
        p = stack.pop()
        try:
            for line in open(f"/proc/{p}/status"):
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
        stack += children.get(p, [])
    return total


def _stats(xs: list[float]) -> str:
    xs = sorted(xs)
    p95 = xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))]
    return f"median {statistics.median(xs):.1f} s, p95 {p95:.1f} s, max {xs[-1]:.1f} s"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--students", type=int, default=12)
    ap.add_argument("--cull-idle", type=int, default=40)
    args = ap.parse_args()
    n = max(1, min(args.students, 64))
    base = Path(tempfile.mkdtemp(prefix="llmc-hubload-"))
    base.chmod(0o755)
    with class_hub(base, n_students=n, cull_idle=args.cull_idle) as hub:
        _release_once(hub)
        who = hub.students

        def timed(fn, u):
            t0 = time.perf_counter()
            fn(u)
            return time.perf_counter() - t0

        with ThreadPoolExecutor(n) as pool:
            logins = list(pool.map(lambda u: timed(lambda v: hub.login(v), u), who))
            spawns = list(pool.map(lambda u: timed(lambda v: hub.start_server(v, timeout=600), u), who))
            list(pool.map(lambda u: hub.get(u, f"/user/{u}/lab"), who))
            fetches = list(pool.map(lambda u: timed(lambda v: _server_post(
                hub, v, "/assignments/fetch", data={"course_id": COURSE_ID, "assignment_id": AID}), u), who))
            replies: dict[str, str] = {}

            def submit(v: str) -> None:
                r = _server_post(hub, v, "/assignments/submit", data={"course_id": COURSE_ID, "assignment_id": AID})
                replies[v] = r.text
            submits = list(pool.map(lambda u: timed(submit, u), who))
        got = sum(1 for u in who if any((hub.exchange / COURSE_ID / "inbound").glob(f"{u}+{AID}+*")))
        for u in who:
            if not any((hub.exchange / COURSE_ID / "inbound").glob(f"{u}+{AID}+*")):
                print(f"  not received from {u}: {replies.get(u, '')[:300]}")
        rss = []
        for u in who:
            found = subprocess.run(["pgrep", "-u", u, "-f", "jupyterhub-singleuser"], capture_output=True, text=True)
            for pid in found.stdout.split()[:1]:
                rss.append(_tree_rss_kb(int(pid)) / 1024)
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 10 * args.cull_idle:
            running = [u for u in who if hub.api(u, "GET", f"/users/{u}").json().get("servers", {}).get("")]
            if not running:
                break
            time.sleep(2)
        culled = time.perf_counter() - t0
        print(f"class hub load, {n} students at once on {os.cpu_count()} cores (loopback):")
        print(f"  login            {_stats(logins)}")
        print(f"  server spawn     {_stats(spawns)}")
        print(f"  fetch            {_stats(fetches)}")
        print(f"  submit           {_stats(submits)}  ({got}/{n} submissions received by the service)")
        if rss:
            print(f"  idle server RSS  median {statistics.median(rss):.0f} MiB, max {max(rss):.0f} MiB "
                  f"(JupyterLab server, no kernel; {len(rss)} servers)")
            per = statistics.median(rss)
            print(f"  one 16-core / 64 GB node: {int(0.8 * 64 * 1024 / per)} idle servers by memory (80 % of RAM); "
                  f"with a chapter kernel each (~1.1 GiB peak, chapter 10's notebook) "
                  f"{int(0.8 * 64 * 1024 / (per + 1126))} students working at once")
        print(f"  idle culler      {'all servers stopped' if not running else f'{len(running)} still running'} "
              f"{culled:.0f} s after the last request (--cull-idle {args.cull_idle})")
        return 0 if got == n and not running else 1


if __name__ == "__main__":
    sys.exit(main())
