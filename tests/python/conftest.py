"""Paths the Python tests need, from the environment CTest sets (cmake/python.cmake):
DS_EXE (the deepshard executable), DS_PYTHON (the interpreter), PYTHONPATH (<build>/python)."""
import os
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def launch(n, script, *args, timeout=600, expect_ok=True):
    """Runs `deepshard launch -n N -- python script args`; returns the CompletedProcess."""
    exe = os.environ["DS_EXE"]
    python = os.environ.get("DS_PYTHON", "/usr/bin/python3")
    cmd = [exe, "launch", "-n", str(n), "--", python, os.path.join(HERE, script), *map(str, args)]
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               OMP_WAIT_POLICY="PASSIVE")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if expect_ok and proc.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc
