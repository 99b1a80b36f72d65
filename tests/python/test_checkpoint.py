"""A checkpoint saved from Python at ZeRO-3 on 2 ranks resumes at ZeRO-1 on 3 ranks: the 20 steps
(10 at N = 2, 10 at N = 3) equal one process training with torch.optim.AdamW on the same global
batches within 1e-4; the step counter and client_state come back."""
import torch

import tiny_lm
import train_worker
from conftest import launch


def test_stage3_n2_resumes_at_stage1_n3(tmp_path):
    ckpt, out = tmp_path / "ckpt", tmp_path / "out"
    out.mkdir()
    launch(2, "train_worker.py", "--configs", "s3", "--steps", 10, "--out", out, "--save", ckpt)
    launch(3, "train_worker.py", "--configs", "s1", "--steps", 20, "--out", out, "--load", ckpt)
    ref_losses, ref_state = tiny_lm.adamw_reference(train_worker.config_for("s0"),
                                                    lambda step: 2 if step < 10 else 3, 20)
    first = torch.load(out / "s3.pt")
    second = torch.load(out / "s1.pt")
    losses = first["losses"] + second["losses"]
    loss_diff = max(abs(a - b) for a, b in zip(losses, ref_losses))
    param_diff = max((second["state"][n] - ref_state[n].float()).abs().max().item()
                     for n in ref_state)
    print(f"s3 N=2 -> s1 N=3: max loss diff {loss_diff:.2e}, max parameter diff {param_diff:.2e}")
    assert len(losses) == 20
    assert loss_diff <= 1e-4
    assert param_diff <= 1e-4
