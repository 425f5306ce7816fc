"""course_tools.kernels: nbval kernels over IPC with retries and a useful error."""
import json
import os
import sys

import pytest

from course_tools import kernels


def test_conftest_patches_nbval():
    import nbval.kernel

    assert nbval.kernel.start_new_kernel is kernels.start_new_kernel


def test_kernel_starts_and_runs_code(tmp_path):
    km, kc = kernels.start_new_kernel(startup_timeout=60, kernel_name="python3", cwd=str(tmp_path))
    try:
        if os.name == "posix":
            assert km.transport == "ipc"
            assert os.path.dirname(km.ip) != str(tmp_path)  # sockets never land in the notebook folder
        reply = kc.execute_interactive("x = 6 * 7", timeout=30)
        assert reply["content"]["status"] == "ok"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    assert not list(tmp_path.iterdir())


def test_dead_kernel_is_retried_and_reported(tmp_path, monkeypatch):
    spec = tmp_path / "kernels" / "dies"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-c", "import sys; sys.stderr.write('boom: no kernel here'); sys.exit(3)",
            "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "dies", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    monkeypatch.setattr(kernels.time, "sleep", lambda s: None)
    with pytest.raises(RuntimeError) as err:
        kernels.start_new_kernel(startup_timeout=20, kernel_name="dies")
    msg = str(err.value)
    assert f"attempt {kernels.ATTEMPTS} of {kernels.ATTEMPTS}" in msg
    assert "boom: no kernel here" in msg
