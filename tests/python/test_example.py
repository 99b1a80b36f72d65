"""examples/python/train.py (DeepSpeed's training pipeline, `import deepshard as deepspeed`) runs
under `deepshard launch -n 2`."""
import os

from conftest import HERE, launch


def test_example_runs(tmp_path):
    example = os.path.join(HERE, "..", "..", "examples", "python", "train.py")
    proc = launch(2, os.path.abspath(example), "--steps", 4)
    print(proc.stdout)
    assert "4 steps, loss on the first batch" in proc.stdout
