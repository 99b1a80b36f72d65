#!/usr/bin/python3
"""Peer benchmark: PyTorch's own DDP and DDP + ZeroRedundancyOptimizer (ZeRO-1) on CPU + gloo.

Derived from the project's peer study (torch_peer_bench.py of the deepshard workspace's
shared/peers folder, 2026-11-22: model, data and rank harness are that program's); changed here so
that the workload is the one `deepshard train` runs in scripts/bench_peers.sh: GPT-2's tanh GELU
(--gelu; the study used erf; an nn.GELU module), the attention as torch's nn.MultiheadAttention
(packed q/k/v projection, 1/sqrt(d) scale, causal mask, output projection: the study's computation
written with the standard module), DeepSpeed's WarmupCosineLR schedule and gradient clipping
(--clip), AdamW (weight decay on matrices, as deepshard), any GPT shape (the
`small` preset: --n-layer 6 --n-head 6 --n-embd 384 --block 256), one result line per run. FSDP
modes are gone (FSDP cannot run on CPU in torch 1.13).

Modes deepshard0..deepshard3 train the same Python model on the same data and ranks with
`import deepshard` (docs/python.md) at that ZeRO stage: the engine's AdamW, WarmupCosineLR and
clipping from a DeepSpeed config with the values above (PYTHONPATH must reach the package, e.g.
build/python); with --kernels the model's nn.LayerNorm, nn.GELU and nn.MultiheadAttention modules
run deepshard's fused kernels (`deepshard.initialize(kernel_inject=True)`), and its nn.Linear
layers too where the ranks measure deepshard's Linear kernel faster (docs/python.md). scripts/bench_peers.sh runs them side by side
with DDP and DDP + ZeRO-1.

Run with Debian's /usr/bin/python3 and python3-torch (torch 1.13.1). Reports global tokens/s at
the median step time after --warmup steps (per step the slowest rank; a step is forward, loss,
backward, clipping, optimizer step, as deepshard's step_time_s).

  /usr/bin/python3 bench/torch_peer_bench.py --mode ddp --world 2 --batch 8 --dtype bf16
"""
import argparse
import json
import math
import os
import sys
import time


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", default="ddp", choices=["single", "ddp", "zero1", "deepshard0", "deepshard1", "deepshard2",
                            "deepshard3"])
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5, help="steps excluded from the median")
    p.add_argument("--batch", type=int, default=8, help="sequences per rank per step")
    p.add_argument("--block", type=int, default=128)
    p.add_argument("--n-layer", type=int, default=4)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--n-embd", type=int, default=256)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--lr-warmup-steps", type=int, default=20, help="WarmupCosineLR warmup_num_steps")
    p.add_argument("--cos-min-ratio", type=float, default=0.1)
    p.add_argument("--clip", type=float, default=1.0, help="gradient clipping (0: off)")
    p.add_argument("--gelu", default="tanh", choices=["tanh", "erf"])
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"],
                   help="bf16 = torch.autocast('cpu', bfloat16) with fp32 master weights/grads")
    p.add_argument("--threads", type=int, default=0, help="intra-op threads per rank; 0 = cores // world")
    p.add_argument("--data", default="random", help="random | PATH (raw bytes)")
    p.add_argument("--kernels", action="store_true",
                   help="deepshard modes: initialize(kernel_inject=True), the model's LayerNorm, "
                        "GELU and MultiheadAttention modules (and Linear where measured faster) "
                        "on deepshard's fused kernels")
    p.add_argument("--block-units", action="store_true",
                   help="deepshard3: each transformer block one ZeRO-3 unit "
                        "(deepshard.utils.set_z3_leaf_modules, FSDP's auto-wrap by block class)")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--no-onednn-bf16", action="store_true",
                   help="keep libtorch's bf16 products off oneDNN, as libtorch does on a CPU without AVX-512 "
                        "BW/VL/DQ (scripts/bench_peers.sh --isa avx2|scalar)")
    a = p.parse_args(argv)
    if a.mode == "single":
        a.world = 1
    if a.kernels and not a.mode.startswith("deepshard"):
        p.error("--kernels is for the deepshard modes")
    return a


ARGS = parse_args()
# Before libopenblas/libgomp load (i.e. before `import torch`); spawned ranks inherit it. These are
# the values `deepshard launch` gives its ranks (design.md's traps).
if ARGS.threads <= 0:
    ARGS.threads = max(1, (os.cpu_count() or 1) // max(1, ARGS.world))
os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ["OPENBLAS_NUM_THREADS"] = str(ARGS.threads)
os.environ["OMP_NUM_THREADS"] = str(ARGS.threads)


def build_model(a):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            d = a.n_embd
            self.ln1 = nn.LayerNorm(d)
            self.attn = nn.MultiheadAttention(d, a.n_head, batch_first=True)  # packed qkv, proj
            self.ln2 = nn.LayerNorm(d)
            self.fc = nn.Linear(d, 4 * d)
            self.fc2 = nn.Linear(4 * d, d)
            self.act = nn.GELU(approximate=("tanh" if a.gelu == "tanh" else "none"))
            # additive causal mask as a plain attribute, not a buffer: DDP broadcasts buffers every
            # forward, and gloo (1.13) rejects bool tensors ("Invalid scalar type")
            self.causal = torch.triu(torch.full((a.block, a.block), float("-inf")), diagonal=1)

        def forward(self, x):
            T = x.shape[1]
            h = self.ln1(x)
            x = x + self.attn(h, h, h, attn_mask=self.causal[:T, :T], need_weights=False)[0]
            x = x + self.fc2(self.act(self.fc(self.ln2(x))))
            return x

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(a.vocab, a.n_embd)
            self.wpe = nn.Embedding(a.block, a.n_embd)
            self.blocks = nn.ModuleList([Block() for _ in range(a.n_layer)])
            self.ln_f = nn.LayerNorm(a.n_embd)
            self.head = nn.Linear(a.n_embd, a.vocab, bias=False)
            self.head.weight = self.wte.weight  # GPT-2 weight tying
            self.apply(self._init)

        @staticmethod
        def _init(m):
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)
            if isinstance(m, nn.MultiheadAttention):  # its packed q/k/v projection, as a Linear
                nn.init.normal_(m.in_proj_weight, mean=0.0, std=0.02)
                nn.init.zeros_(m.in_proj_bias)

        def forward(self, idx):
            T = idx.shape[1]
            pos = torch.arange(T, device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for b in self.blocks:
                x = b(x)
            return self.head(self.ln_f(x))

    return GPT()


def get_batch(a, corpus, step, lo, hi, global_batch):
    """Samples [lo, hi) of the global batch for `step` -- identical no matter how it is split."""
    import torch
    g = torch.Generator().manual_seed(a.seed * 1000003 + step)
    if corpus is None:
        toks = torch.randint(0, a.vocab, (global_batch, a.block + 1), generator=g)[lo:hi]
    else:
        offs = torch.randint(0, corpus.numel() - a.block - 1, (global_batch,), generator=g)[lo:hi]
        toks = torch.stack([corpus[o: o + a.block + 1] for o in offs.tolist()])
    return toks[:, :-1].contiguous(), toks[:, 1:].contiguous()


def warmup_cosine(a, step):
    """DeepSpeed's WarmupCosineLR (linear warmup) as a factor of the base lr, total = --steps."""
    if step < a.lr_warmup_steps:
        return (step + 1) / a.lr_warmup_steps
    progress = (step - a.lr_warmup_steps) / max(1, a.steps - a.lr_warmup_steps)
    return a.cos_min_ratio + (1 - a.cos_min_ratio) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


def set_threads(n):
    import ctypes
    import torch
    torch.set_num_threads(n)
    try:  # the OpenBLAS pthread build ignores torch.set_num_threads
        ctypes.CDLL("libopenblas.so.0").openblas_set_num_threads(n)
    except OSError:
        pass


def openblas_core():
    import ctypes
    try:
        lib = ctypes.CDLL("libopenblas.so.0")
        lib.openblas_get_corename.restype = ctypes.c_char_p
        return lib.openblas_get_corename().decode()
    except OSError:
        return None


def deepshard_config(a):
    """The DeepSpeed config of the deepshard modes: the training the torch modes run."""
    return {
        "train_micro_batch_size_per_gpu": a.batch,
        "gradient_accumulation_steps": 1,
        "gradient_clipping": a.clip,
        "optimizer": {"type": "AdamW", "params": {"lr": a.lr, "betas": [0.9, 0.95], "eps": 1e-8,
                                                  "weight_decay": a.weight_decay}},
        "scheduler": {"type": "WarmupCosineLR",
                      "params": {"total_num_steps": a.steps, "warmup_num_steps": a.lr_warmup_steps,
                                 "warmup_type": "linear", "cos_min_ratio": a.cos_min_ratio}},
        "zero_optimization": {"stage": int(a.mode[len("deepshard"):])},
        "bf16": {"enabled": a.dtype == "bf16"},
    }


def run_deepshard_rank(rank, world, a, port, corpus):
    """One rank of a deepshard mode: its own transport joins from torchrun's variables."""
    import torch
    import torch.nn.functional as F
    if world > 1:  # one rank joins no group (docs/python.md)
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                          WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world))
    import deepshard
    torch.manual_seed(a.seed)
    model = build_model(a)
    n_params = sum(p.numel() for p in model.parameters())
    if a.block_units:
        deepshard.utils.set_z3_leaf_modules(model, [type(model.blocks[0])])
    engine, _, _, _ = deepshard.initialize(model=model, config=deepshard_config(a),
                                           kernel_inject=a.kernels)

    def train_step(step, x, y):
        logits = engine(x)
        loss = F.cross_entropy(logits.float().view(-1, a.vocab), y.view(-1))
        engine.backward(loss)
        engine.step()
        return loss

    times, losses = timed_steps(a, rank, world, corpus, train_step)
    return times, losses, n_params


def timed_steps(a, rank, world, corpus, train_step):
    """Runs train_step(step, inputs, targets) -> loss on this rank's slice of every global batch;
    returns each step's time (the step alone, not the batch's making) and loss."""
    global_batch = a.batch * world
    lo, hi = rank * a.batch, (rank + 1) * a.batch
    times, losses = [], []
    for step in range(a.steps):
        x, y = get_batch(a, corpus, step, lo, hi, global_batch)
        t0 = time.perf_counter()
        loss = train_step(step, x, y)
        losses.append(loss.item())
        times.append(time.perf_counter() - t0)
    return times, losses


def peak_rss_bytes():
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def run_rank(rank, world, a, port, q):
    import torch
    import torch.nn.functional as F
    set_threads(a.threads)
    if a.no_onednn_bf16:
        torch.backends.mkldnn.enabled = False
    corpus = None
    if a.data != "random":
        with open(a.data, "rb") as fh:
            corpus = torch.frombuffer(bytearray(fh.read()), dtype=torch.uint8).long()
    if a.mode.startswith("deepshard"):
        try:
            times, losses, n_params = run_deepshard_rank(rank, world, a, port, corpus)
            q.put(("ok", {"rank": rank, "times": times, "losses": losses, "n_params": n_params,
                          "openblas_core": openblas_core(), "peak_rss": peak_rss_bytes()}))
        except Exception as e:
            q.put(("err", {"rank": rank, "error": f"{type(e).__name__}: {e}"}))
        return
    if world > 1:
        import torch.distributed as dist
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        torch.manual_seed(a.seed)
        model = build_model(a)
        params = list(model.parameters())
        if a.mode in ("ddp", "zero1"):
            from torch.nn.parallel import DistributedDataParallel as DDP
            model = DDP(model)
        # weight decay on matrices only, as deepshard's engines apply it
        decay = [p for p in params if p.dim() >= 2]
        no_decay = [p for p in params if p.dim() < 2]
        if a.mode == "zero1":
            from torch.distributed.optim import ZeroRedundancyOptimizer
            opt = ZeroRedundancyOptimizer(decay, optimizer_class=torch.optim.AdamW, lr=a.lr,
                                          betas=(0.9, 0.95), eps=1e-8, weight_decay=a.weight_decay)
            opt.add_param_group({"params": no_decay, "weight_decay": 0.0})
        else:
            opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                                     {"params": no_decay, "weight_decay": 0.0}],
                                    lr=a.lr, betas=(0.9, 0.95), eps=1e-8)

        def train_step(step, x, y):
            for group in opt.param_groups:
                group["lr"] = a.lr * warmup_cosine(a, step)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=(a.dtype == "bf16")):
                logits = model(x)
            loss = F.cross_entropy(logits.float().view(-1, a.vocab), y.view(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if a.clip > 0:
                torch.nn.utils.clip_grad_norm_(params, a.clip)
            opt.step()
            return loss

        times, losses = timed_steps(a, rank, world, corpus, train_step)
        q.put(("ok", {"rank": rank, "times": times, "losses": losses,
                      "n_params": sum(p.numel() for p in params), "openblas_core": openblas_core(),
                      "peak_rss": peak_rss_bytes()}))
    except Exception as e:  # report; the partner may hang in a collective -> the parent kills it
        q.put(("err", {"rank": rank, "error": f"{type(e).__name__}: {e}"}))


def median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def main():
    a = ARGS
    import torch
    import torch.multiprocessing as mp
    world = a.world
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    if world == 1:
        run_rank(0, 1, a, 0, q)
        results = [q.get()]
    else:
        port = a.port
        if not port:
            import socket
            s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
        procs = [ctx.Process(target=run_rank, args=(r, world, a, port, q)) for r in range(world)]
        for p in procs:
            p.start()
        results = []
        deadline = time.time() + 1800
        while len(results) < world and time.time() < deadline:
            try:
                results.append(q.get(timeout=5))
            except Exception:
                if any(p.exitcode not in (None, 0) for p in procs):
                    break
            if any(k == "err" for k, _ in results):
                break
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join()
    errs = [r for k, r in results if k == "err"]
    oks = sorted([r for k, r in results if k == "ok"], key=lambda r: r["rank"])
    out = {"mode": a.mode, "kernels": a.kernels, "dtype": a.dtype, "world": world, "threads": a.threads,
           "batch_per_rank": a.batch, "block": a.block, "steps": a.steps, "warmup": a.warmup,
           "torch": torch.__version__, "onednn_bf16": not a.no_onednn_bf16}
    if errs or len(oks) < world:
        out.update(status="FAIL", error=errs[0]["error"] if errs else "no result (crash/hang)")
        print("RESULT " + json.dumps(out), flush=True)
        sys.exit(1)
    w = a.warmup if a.steps > a.warmup else 0
    step_t = [max(r["times"][i] for r in oks) for i in range(a.steps)]  # slowest rank per step
    med = median(step_t[w:])
    out.update(status="OK", tokens_per_s=world * a.batch * a.block / med, step_ms_median=med * 1e3,
               loss_first=sum(r["losses"][0] for r in oks) / world,
               loss_final=sum(r["losses"][-1] for r in oks) / world,
               n_params=oks[0]["n_params"], openblas_core=oks[0]["openblas_core"],
               peak_rss_bytes=max(r["peak_rss"] for r in oks))
    print("RESULT " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
