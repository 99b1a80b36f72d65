"""Paths the Python tests need, from the environment CTest sets (cmake/python.cmake):
DS_EXE (the deepshard executable), DS_PYTHON (the interpreter), PYTHONPATH (<build>/python)."""
import os
import signal
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def launch(n, script, *args, timeout=300, expect_ok=True):
    """Runs `deepshard launch -n N -- python script args`; returns the CompletedProcess. A job still
    running after `timeout` seconds is killed (the launcher and its ranks: one process group) and
    the test fails, so a hang cannot stall the suite."""
    exe = os.environ["DS_EXE"]
    python = os.environ.get("DS_PYTHON", "/usr/bin/python3")
    cmd = [exe, "launch", "-n", str(n), "--", python, os.path.join(HERE, script), *map(str, args)]
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               OMP_WAIT_POLICY="PASSIVE")
    with subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True) as child:
        try:
            stdout, stderr = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            stdout, stderr = child.communicate()
            pytest.fail(f"{' '.join(cmd)} still running after {timeout} s (killed)\n"
                        f"{stdout}\n{stderr}")
    proc = subprocess.CompletedProcess(cmd, child.returncode, stdout, stderr)
    if expect_ok and proc.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc
