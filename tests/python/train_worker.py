"""One rank of the Python engine tests, run under `deepshard launch`: trains tiny_lm's model with
deepshard.initialize under each configuration named on the command line and writes (rank 0)
<out>/<name>.pt: per-step losses (the mean over ranks), the final full parameters and module state,
and checks made on every rank (the buffer and the frozen parameter unchanged)."""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deepshard  # noqa: E402
import tiny_lm  # noqa: E402

BASE = {
    "train_micro_batch_size_per_gpu": 2,
    "gradient_accumulation_steps": 2,
    "gradient_clipping": 1.0,
    "optimizer": {"type": "AdamW",
                  "params": {"lr": 3e-3, "betas": [0.9, 0.99], "eps": 1e-8, "weight_decay": 0.1}},
    "zero_optimization": {"stage": 0},
}


def config_for(name):
    """name: s<stage>[-offload][-bf16][-kernels], e.g. s3-offload ("kernels": the model's Linear
    and LayerNorm modules run deepshard's fused kernels, initialize(kernel_inject=...); the config
    is the same)."""
    parts = name.split("-")
    config = json.loads(json.dumps(BASE))
    zero = config["zero_optimization"]
    zero["stage"] = int(parts[0][1:])
    if zero["stage"] == 3:
        zero["stage3_param_persistence_threshold"] = 0  # every block sharded
    if "offload" in parts:
        zero["offload_optimizer"] = {"device": "cpu"}
        if zero["stage"] == 3:
            zero["offload_param"] = {"device": "cpu"}
    if "bf16" in parts:
        config["bf16"] = {"enabled": True}
    return config


def full_state(engine):
    """The model's whole state (gathered at stage 3), cloned in fp32."""
    state = {}

    def snapshot():
        for n, t in engine.module.state_dict().items():
            state[n] = t.detach().float().clone()

    if engine.zero_optimization_stage() == 3:
        engine._core.with_full_parameters(snapshot)
    else:
        snapshot()
    return state


def train(name, steps, out, save=None, load=None):
    config = config_for(name)
    model = tiny_lm.build_model(seed=1 + deepshard.get_rank())  # rank 0's values must win
    frozen = tiny_lm.build_model().position_gain.detach().clone()
    kernels = "kernels" in name.split("-")
    engine, _, _, _ = deepshard.initialize(
        model=model, config=config, kernel_inject=("linear", "layer_norm") if kernels else False)
    if kernels:
        assert type(model.blocks[0].up) is deepshard.ops.Linear, type(model.blocks[0].up)
        assert type(model.norm) is deepshard.ops.LayerNorm, type(model.norm)
    rank, world = deepshard.get_rank(), deepshard.get_world_size()
    micro, gas = config["train_micro_batch_size_per_gpu"], config["gradient_accumulation_steps"]
    start = 0
    if load:
        _, client_state = engine.load_checkpoint(load)
        start = engine.global_steps
        assert client_state == {"next_step": start, "note": "tiny"}, client_state
    losses = []
    for step in range(start, steps):
        total = 0.0
        for m in range(gas):
            first = (m * world + rank) * micro
            loss = engine(tiny_lm.samples(step, first, micro))
            engine.backward(loss)
            engine.step()
            total += loss.item() / gas
        mean = torch.tensor([total / world], dtype=torch.float64)
        deepshard._C.all_reduce_sum(mean)
        losses.append(mean.item())
    assert engine.global_steps == steps, (engine.global_steps, steps)
    if save:
        engine.save_checkpoint(save, client_state={"next_step": steps, "note": "tiny"})
    state = full_state(engine)
    positions = tiny_lm.build_model().positions
    assert torch.equal(engine.module.positions.float(), positions.to(
        engine.module.positions.dtype).float()), "buffer changed"
    assert torch.equal(state["position_gain"], frozen.to(model.position_gain.dtype).float()), \
        "frozen parameter changed"
    assert model.head.weight is model.embed.weight, "tie broken"
    if rank == 0:
        torch.save({"losses": losses, "state": state, "memory": engine.memory_bytes()},
                   os.path.join(out, f"{name}.pt"))
    engine.destroy()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--configs", required=True, help="comma-separated names (s0, s3-offload)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--out", required=True)
    parser.add_argument("--save", help="save a checkpoint there after training")
    parser.add_argument("--load", help="resume from the latest checkpoint there")
    args = parser.parse_args()
    deepshard.init_distributed()
    for name in args.configs.split(","):
        train(name, args.steps, args.out, args.save, args.load)


if __name__ == "__main__":
    main()
