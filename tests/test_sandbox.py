"""course_tools.grading.sandbox: a submission's kernel under bubblewrap (README, "Grading integrity").

One kernel is started the way autograding starts it, in a fake course directory, and asked to do
what a cheating submission would: list the course, the repository and the whole file system
(everything visible must be on the allow-list), read the reference records, write the course code
and the grader's IPython profile, use root's powers (capabilities, umount, remount, mount), open
network connections, and leave a process running. Each must fail; its own folder (a private copy
holding the submission's files) stays writable and nbgrader's folder is untouched; torch and
course_utils import.
"""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from course_tools.grading import sandbox

CODE = r'''
import ctypes, json, os, socket, subprocess, sys
r = {}
def ls(p):
    try:
        return sorted(os.listdir(p))
    except OSError:
        return []
r["course"] = ls(os.environ["T_COURSE"])
r["repo"] = ls(os.environ["T_REPO"])
r["shared_references"] = ls(os.environ["LLM_COURSE_REFERENCES"])
r["record_env"] = os.environ.get("LLM_COURSE_RECORD")
def can_write(p):
    try:
        with open(p, "a"):
            pass
        return True
    except OSError:
        return False
import course_utils.grading as g
r["write_grading"] = can_write(g.__file__)
r["write_real_profile"] = can_write(os.environ["T_REALHOME"] + "/.ipython/x.py")
r["write_own_dir"] = can_write("mine.txt")
r["cwd"] = os.getcwd()
r["own_dir"] = ls(".")
r["home"] = os.environ["HOME"]
from ipykernel.connect import get_connection_file
r["sock"] = os.path.dirname(get_connection_file())   # the kernel's ZMQ sockets
r["preimported"] = "transformers" in sys.modules     # a kernel forked from the pre-imported template
r["uid"] = os.getuid()
status = dict(line.split(":\t", 1) for line in open("/proc/self/status").read().splitlines() if ":\t" in line)
r["CapEff"], r["CapBnd"], r["NoNewPrivs"] = status["CapEff"].strip(), status["CapBnd"].strip(), status["NoNewPrivs"].strip()
libc = ctypes.CDLL(None, use_errno=True)
r["umount"] = libc.umount2(os.getcwd().encode(), 2) == 0 or ctypes.get_errno()
r["remount_usr_rw"] = libc.mount(b"none", b"/usr", None, 32 | 4096, None) == 0 or ctypes.get_errno()  # MS_REMOUNT|MS_BIND
r["tmpfs"] = libc.mount(b"tmpfs", b"/tmp", b"tmpfs", 0, b"") == 0 or ctypes.get_errno()
# the whole visible file system, /usr, /proc and /dev aside
seen = []
for top in sorted(os.listdir("/")):
    if top in ("usr", "proc", "dev") or os.path.islink("/" + top):
        continue
    for d, dirs, files in os.walk("/" + top):
        dirs[:] = [x for x in dirs if not x.startswith("site-packages") and x not in ("lib", "include", "bin", "share")
                   or d.count("/") < 2]
        seen += [os.path.join(d, x) for x in dirs + files]
r["visible"] = seen
for name, addr in (("loopback", ("127.0.0.1", 22)), ("outside", ("10.255.255.1", 80))):
    try:
        socket.create_connection(addr, timeout=1).close()
        r[name] = "connected"
    except OSError as e:
        r[name] = type(e).__name__
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60); open(%r, 'w').write('alive')" % (os.environ["T_MARK"],)],
                 start_new_session=True)
import torch
r["torch"] = torch.__version__
print(json.dumps(r))
'''


@pytest.fixture()
def course(tmp_path):
    c = tmp_path / "course"
    (c / "solutions" / "ch").mkdir(parents=True)
    (c / "solutions" / "ch" / "ch.ipynb").write_text("hidden tests")
    (c / "autograded" / "alice" / "ch").mkdir(parents=True)
    (c / "autograded" / "bob" / "ch").mkdir(parents=True)
    (c / "gradebook.db").write_text("grades")
    (c / ".llm-course" / "references").mkdir(parents=True)
    (c / ".llm-course" / "references" / "ch-abc.json").write_text("reference records")
    return c


def _run(course: Path, code: str, **traits) -> dict:
    async def main():
        km = sandbox.SandboxedKernelManager(kernel_name="python3", **traits)
        await km.start_kernel(cwd=str(course / "autograded" / "alice" / "ch"))
        kc = km.client()
        kc.start_channels()
        try:
            await kc.wait_for_ready(timeout=60)
            out: list[str] = []
            await kc.execute_interactive(code, timeout=120, output_hook=lambda m: out.append(
                m["content"].get("text", "")) if m["msg_type"] == "stream" else None)
            return json.loads("".join(out).strip().splitlines()[-1])
        finally:
            kc.stop_channels()
            await km.shutdown_kernel(now=True)

    return asyncio.run(main())


@pytest.mark.skipif(sandbox.probe() is not None, reason=f"no bubblewrap here: {sandbox.probe()}")
@pytest.mark.parametrize("zygote", ["forked", "fresh"])
def test_a_sandboxed_kernel_cannot_reach_what_grades(course, monkeypatch, zygote):
    """Both ways a kernel starts: forked from the pre-imported template (zygote.py; as root) and from nothing."""
    from course_utils.paths import repo_root

    monkeypatch.setenv("LLM_COURSE_ZYGOTE", "1" if zygote == "forked" else "0")

    monkeypatch.setenv("T_COURSE", str(course))
    monkeypatch.setenv("T_REPO", str(repo_root()))
    monkeypatch.setenv("T_REALHOME", os.path.expanduser("~"))
    monkeypatch.setenv("T_MARK", str(course / "autograded" / "alice" / "ch" / "alive.txt"))
    shared = course.parent / "shared-references"       # the cache the test suite shares between courses
    shared.mkdir()
    (shared / "ch-abc.json").write_text("reference records")
    monkeypatch.setenv("LLM_COURSE_REFERENCES", str(shared))
    (course / "autograded" / "alice" / "ch" / "data.txt").write_text("the student's own file")
    t0 = time.perf_counter()
    # the kernel's environment is an allow-list (sandbox.kernel_env): the test's own variables are named
    r = _run(course, CODE, env_allow=["T_COURSE", "T_REPO", "T_REALHOME", "T_MARK", "LLM_COURSE_REFERENCES"])
    elapsed = time.perf_counter() - t0
    from course_utils.paths import repo_root

    in_repo = {p.relative_to(repo_root()).parts[0] for p in sandbox.allowed_paths() if repo_root() in p.parents}
    assert r["course"] == ["autograded"], r["course"]   # only the path down to its own (private) folder
    assert set(r["repo"]) <= in_repo <= {*sandbox.CHECKOUT_ALLOWED, ".venv"}, r["repo"]
    assert r["shared_references"] == [], "the reference records are visible"
    assert r["preimported"] == (zygote == "forked" and os.geteuid() == 0), r["preimported"]
    allowed = [str(p) for p in sandbox.allowed_paths()] + ["/tmp", "/run/llm-course", r["home"], r["cwd"], r["sock"]]
    outside = [p for p in r["visible"] if not any(p == a or p.startswith(a.rstrip("/") + "/") or a.startswith(p + "/")
                                                   for a in allowed)]
    assert not outside, f"visible outside the allow-list: {outside[:10]}"
    assert not any(p.endswith(("/.git", "/solutions", "/chapters", "/tests", "gradebook.db")) for p in r["visible"])
    assert r["record_env"] == "1", "hidden tests must write their records in a sandboxed kernel"
    assert not r["write_grading"] and not r["write_real_profile"], r
    assert r["write_own_dir"], "the submission's own folder must stay writable"
    assert r["own_dir"] == ["data.txt", "mine.txt"], "the kernel gets the submission's files, and only them"
    assert not (course / "autograded" / "alice" / "ch" / "mine.txt").exists(), "the kernel wrote into nbgrader's folder"
    assert r["home"] != os.path.expanduser("~")
    assert r["loopback"] == "ConnectionRefusedError" and r["outside"] == "OSError", r
    assert int(r["CapEff"], 16) == 0, f"the kernel has capabilities: CapEff {r['CapEff']}"
    assert r["umount"] is not True and r["remount_usr_rw"] is not True and r["tmpfs"] is not True, r
    if os.geteuid() == 0:
        assert r["uid"] == 65534 and int(r["CapBnd"], 16) == 0 and r["NoNewPrivs"] == "1", r
    assert r["torch"]
    time.sleep(1.5)
    alive = subprocess.run(["pgrep", "-f", str(course / "autograded" / "alice" / "ch" / "alive.txt")],
                           capture_output=True, text=True).stdout
    assert not alive.strip(), "a process started by the submission outlived its kernel"
    assert elapsed < 30, f"a sandboxed kernel took {elapsed:.1f} s to start and run"


def test_without_bubblewrap_autograding_refuses_unless_allowed(course, monkeypatch):
    monkeypatch.setattr(sandbox, "probe", lambda: "bubblewrap is not installed (test)")
    with pytest.raises(sandbox.SandboxUnavailable, match="refuses to run student code without a sandbox"):
        _run(course, "print('{}')")
    assert _run(course, "import os, json; print(json.dumps({'sandboxed': os.environ.get('LLM_COURSE_SANDBOXED')}))",
                allow_unsandboxed=True) == {"sandboxed": "0"}


def test_nbgrader_config_executes_submissions_in_the_sandbox():
    from course_utils.paths import repo_root

    text = (repo_root() / "nbgrader_config.py").read_text()
    assert "SandboxedExecute," in text
    ex = sandbox.SandboxedExecute()
    assert ex.kernel_manager_class is sandbox.SandboxedKernelManager


MASKED_CODE = r'''
import importlib, importlib.util, json, os
r = {}
for name in ("sklearn", "bitsandbytes", "tokenizers"):
    try:
        importlib.import_module(name)
        r[name] = "imported"
    except ModuleNotFoundError as e:
        r[name] = "ModuleNotFoundError" if "removed" in str(e) else str(e)
r["files"] = sorted(os.listdir(os.path.dirname(importlib.util.find_spec("torch").origin) + "/../sklearn"))
import torch
r["torch_ops_bnb"] = hasattr(torch.ops, "bitsandbytes") and hasattr(torch.ops.bitsandbytes, "quantize_4bit")
import numpy
r["numpy"] = numpy.__version__
print(json.dumps(r))
'''


@pytest.mark.skipif(sandbox.probe() is not None, reason=f"no bubblewrap here: {sandbox.probe()}")
def test_a_kernel_with_packages_removed_cannot_reach_them(course):
    """The probe's kernel (course_tools/grading/probe.py): removed packages leave nothing to import or call."""
    r = _run(course, MASKED_CODE, masked_packages=["sklearn", "bitsandbytes", "tokenizers"])
    assert r["sklearn"] == r["bitsandbytes"] == r["tokenizers"] == "ModuleNotFoundError", r
    assert r["files"] == ["__init__.py"], "files of a removed package are still there"
    assert r["torch_ops_bnb"] is False, "bitsandbytes' kernels are reachable through torch.ops"
    assert r["numpy"]
    import sklearn  # noqa: F401  (outside the sandbox nothing changed)


def _templates_of(tag: str) -> set[int]:
    """The pids of the templates whose environment holds T_TEMPLATE_TEST=tag (this test's own)."""
    out = set()
    for line in subprocess.run(["pgrep", "-f", "zygote.py serve"], capture_output=True, text=True).stdout.split():
        try:
            if Path(f"/proc/{line}/comm").read_text().strip() == "bwrap":    # its sandbox, not the template
                continue
            if f"T_TEMPLATE_TEST={tag}".encode() in Path(f"/proc/{line}/environ").read_bytes().split(b"\0"):
                out.add(int(line))
        except OSError:
            pass
    return out


@pytest.mark.skipif(sandbox.probe() is not None or os.geteuid() != 0,
                    reason="the template is a root grader's (bubblewrap needed)")
def test_a_template_that_died_is_started_again(course, monkeypatch):
    """Graders do not probe the template before each kernel: one that ended (idle) or was killed,
    its socket left behind, is found on connecting and started again, and the kernel is still forked."""
    import signal
    import uuid

    tag = uuid.uuid4().hex
    monkeypatch.setenv("LLM_COURSE_ZYGOTE", "1")
    monkeypatch.setenv("T_TEMPLATE_TEST", tag)     # this test's template has a key of its own
    probe = "import json, os, sys; print(json.dumps({'pre': 'transformers' in sys.modules, 'uid': os.getuid()}))"
    assert _run(course, probe, env_allow=["T_TEMPLATE_TEST"]) == {"pre": True, "uid": 65534}
    first = _templates_of(tag)
    assert len(first) == 1, first
    pid = first.pop()
    sock = Path(open(f"/proc/{pid}/cmdline").read().split("\0")[-2])
    os.kill(pid, signal.SIGKILL)
    time.sleep(0.5)
    assert sock.exists(), "the killed template's socket should be left behind (the case this tests)"
    assert _run(course, probe, env_allow=["T_TEMPLATE_TEST"]) == {"pre": True, "uid": 65534}
    again = _templates_of(tag)
    assert len(again) == 1 and pid not in again, (pid, again)
    for p in again:
        os.kill(p, signal.SIGKILL)
