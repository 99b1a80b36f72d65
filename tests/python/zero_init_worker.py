"""One rank of the zero.Init test, under `deepshard launch`: builds a stack of Linear layers under
deepshard.zero.Init and measures this process's peak RSS growth during the build (VmHWM, reset
through /proc/self/clear_refs), then the same for a plain build; checks under GatheredParameters
that the partitioned model holds rank 0's initial values, then trains it 3 steps at ZeRO-3 and
compares with the plain model trained on all ranks' data in this process. Rank 0 writes
<out>/zero_init.json."""
import ctypes
import json
import os
import sys

import torch
import torch.nn as nn

import deepshard

LAYERS, WIDTH = 24, 1024
CONFIG = {
    "train_micro_batch_size_per_gpu": 2,
    "gradient_accumulation_steps": 1,
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.0}},
    "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0},
}


def status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def peak_growth_mib(build):
    """The peak RSS growth (MiB) while `build()` runs, and its result."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current RSS
    before = status_kib("VmRSS")
    result = build()
    return (status_kib("VmHWM") - before) / 1024, result


def build_model():
    torch.manual_seed(7)
    return nn.Sequential(*[nn.Linear(WIDTH, WIDTH) for _ in range(LAYERS)])


def batch(step, rank):
    g = torch.Generator().manual_seed(100 * step + rank)
    return torch.randn(CONFIG["train_micro_batch_size_per_gpu"], WIDTH, generator=g)


def fixed_mmap_threshold():
    """Large blocks mmap'ed and unmapped when freed, at a fixed threshold: glibc's default raises
    the threshold after the first large free, so the freed full storages of partitioned units
    would stay in the heap as free but resident pages and count in the RSS as if in use."""
    M_MMAP_THRESHOLD = -3
    if ctypes.CDLL("libc.so.6").mallopt(M_MMAP_THRESHOLD, 128 * 1024) != 1:
        raise RuntimeError("mallopt(M_MMAP_THRESHOLD) failed")


def main():
    out = sys.argv[1]
    fixed_mmap_threshold()
    deepshard.init_distributed()
    rank, world = deepshard.get_rank(), deepshard.get_world_size()
    full_mib = LAYERS * (WIDTH * WIDTH + WIDTH) * 4 / 2**20

    # The shared-memory transport's segment (fixed per job, not the model) becomes resident as
    # collectives first use it: a few layers built under zero.Init first touch it as the measured
    # build will.
    with deepshard.zero.Init(config_dict_or_path=CONFIG):
        warm_up = build_model()[:4]
    del warm_up
    init = deepshard.zero.Init(config_dict_or_path=CONFIG)

    def build_partitioned():
        with init:
            return build_model()

    init_growth, model = peak_growth_mib(build_partitioned)
    plain_growth, reference = peak_growth_mib(build_model)

    engine, _, _, _ = deepshard.initialize(model=model, config=CONFIG)
    with deepshard.zero.GatheredParameters(list(model.parameters())):
        initial_diff = max((a - b).abs().max().item()
                           for a, b in zip(model.parameters(), reference.parameters()))

    optimizer = torch.optim.AdamW(reference.parameters(), lr=1e-3, weight_decay=0.0)
    for step in range(3):
        loss = engine(batch(step, rank)).square().mean()
        engine.backward(loss)
        engine.step()
        ref_loss = sum(reference(batch(step, r)).square().mean() for r in range(world)) / world
        optimizer.zero_grad()
        ref_loss.backward()
        optimizer.step()
    with deepshard.zero.GatheredParameters(list(model.parameters())):
        trained_diff = max((a - b).abs().max().item()
                           for a, b in zip(model.parameters(), reference.parameters()))
    result = {"rank": rank, "world": world, "full_mib": full_mib,
              "init_peak_growth_mib": init_growth, "plain_peak_growth_mib": plain_growth,
              "peak_full_unit_mib": init.peak_full_bytes / 2**20, "units": len(engine._units), "layers": LAYERS,
              "initial_diff": initial_diff, "trained_diff": trained_diff}
    # Every rank reports (the RSS is per process): gather through files in `out`.
    with open(os.path.join(out, f"zero_init_rank{rank}.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
