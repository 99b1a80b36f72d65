"""deepshard.ops (the fused kernels for PyTorch models) against the torch operators and modules
they replace: forward values and the gradients of every input and parameter, fp32 within
FP32_TOLERANCE of the largest reference element, bf16 within BF16_TOLERANCE (one bf16 rounding of
the result plus fp32-accumulated products), and inject_kernels: which modules it switches, that
they keep their identity, parameters and state, and that a model computes what it computed.
One process (no ranks): the kernels are per-rank code; the engine tests train with them
(test_engine.py, "-kernels" configurations)."""
import copy
import os
import subprocess

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import deepshard
from deepshard import ops

# fp32: relative to the largest reference element (the kernels sum in another order than torch's
# and oneDNN's sgemm blocks differently from OpenBLAS's; measured at most 4e-7 here).
FP32_TOLERANCE = 1e-5
# bf16: the result rounded to bf16 once (2^-8 relative) on both sides, plus ordering.
BF16_TOLERANCE = 2e-2


def max_rel(got, ref):
    scale = ref.float().abs().max().clamp_min(1e-30)
    return ((got.float() - ref.float()).abs().max() / scale).item()


def check(fn, ref_fn, inputs, tolerance, label):
    """fn and ref_fn on leaf copies of `inputs` (tensors needing grad where floating point): the
    outputs and the gradient of each input for a random upstream gradient agree within
    `tolerance` (relative to the largest reference element). Parameters the functions use get
    their .grad from the same backward."""
    def leaves():
        return [t.detach().clone().requires_grad_(t.is_floating_point()) for t in inputs]

    got_in, ref_in = leaves(), leaves()
    got, ref = fn(*got_in), ref_fn(*ref_in)
    assert got.shape == ref.shape and got.dtype == ref.dtype, (label, got.shape, ref.shape,
                                                               got.dtype, ref.dtype)
    diffs = {"forward": max_rel(got, ref)}
    upstream = torch.randn_like(ref, dtype=torch.float32).to(ref.dtype)
    got.backward(upstream)
    ref.backward(upstream)
    for i, (g, r) in enumerate(zip(got_in, ref_in)):
        if r.grad is not None:
            diffs[f"grad{i}"] = max_rel(g.grad, r.grad)
    print(f"{label}: " + ", ".join(f"{k} {v:.1e}" for k, v in diffs.items()))
    for name, diff in diffs.items():
        assert diff <= tolerance, (label, name, diff)


@pytest.fixture(autouse=True)
def seeded():
    torch.manual_seed(7)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(4, 33, 96), (130, 64)])
def test_linear(shape, bias):
    out = 80
    x = torch.randn(*shape)
    w = torch.randn(out, shape[-1]) * 0.1
    b = torch.randn(out) if bias else None
    if bias:
        check(ops.linear, F.linear, [x, w, b], FP32_TOLERANCE, f"linear {shape} bias")
    else:
        check(ops.linear, F.linear, [x, w], FP32_TOLERANCE, f"linear {shape}")


def test_linear_strided_input_falls_back():
    x = torch.randn(96, 8).t()  # not contiguous: torch's linear
    w = torch.randn(16, 96)
    assert not deepshard._C.ops.linear_supported(x, w)
    check(ops.linear, F.linear, [x, w], 0.0, "linear strided")


@pytest.mark.parametrize("dtype,tolerance", [(torch.float32, FP32_TOLERANCE),
                                             (torch.bfloat16, BF16_TOLERANCE)])
def test_layer_norm(dtype, tolerance):
    x = (torch.randn(3, 17, 96) * 3 + 1).to(dtype)
    w, b = torch.randn(96).to(dtype), torch.randn(96).to(dtype)
    check(lambda x, w, b: ops.layer_norm(x, w, b, 1e-5),
          lambda x, w, b: F.layer_norm(x, (96,), w, b, 1e-5), [x, w, b], tolerance,
          f"layer_norm {dtype}")


@pytest.mark.parametrize("dtype,tolerance", [(torch.float32, FP32_TOLERANCE),
                                             (torch.bfloat16, BF16_TOLERANCE)])
def test_gelu_tanh(dtype, tolerance):
    x = (torch.randn(5, 999) * 3).to(dtype)
    check(ops.gelu_tanh, lambda x: F.gelu(x, approximate="tanh"), [x], tolerance,
          f"gelu_tanh {dtype}")


@pytest.mark.parametrize("batch,length,width,heads", [(2, 64, 96, 4), (1, 200, 64, 2)])
def test_causal_attention(batch, length, width, heads):
    qkv = torch.randn(batch, length, 3 * width)
    assert deepshard._C.ops.causal_attention_supported(qkv, heads) == \
        deepshard._C.ops.linear_supported(qkv, torch.randn(4, 3 * width))  # both need the sgemm
    check(lambda t: ops.causal_attention(t, heads),
          lambda t: ops.causal_attention_reference(t, heads), [qkv], FP32_TOLERANCE,
          f"causal_attention B{batch} T{length} C{width} h{heads}")


def test_causal_attention_reference_is_attention():
    """The reference against a per-head loop written out in full."""
    qkv = torch.randn(2, 9, 3 * 8)
    q, k, v = qkv.split(8, dim=2)
    heads = []
    for h in range(2):
        sl = slice(4 * h, 4 * h + 4)
        s = q[..., sl] @ k[..., sl].transpose(1, 2) / 2.0
        s = s.masked_fill(torch.ones(9, 9, dtype=torch.bool).triu(1), float("-inf"))
        heads.append(s.softmax(-1) @ v[..., sl])
    assert torch.allclose(ops.causal_attention_reference(qkv, 2), torch.cat(heads, -1), atol=1e-6)


def test_cross_entropy():
    logits, targets = torch.randn(70, 50) * 4, torch.randint(0, 50, (70,))
    check(lambda z: ops.cross_entropy(z, targets), lambda z: F.cross_entropy(z, targets), [logits],
          FP32_TOLERANCE, "cross_entropy")


class Custom(nn.Linear):
    """A user's subclass: its own forward, never switched."""

    def forward(self, x):
        return super().forward(x) * 2


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(20, 32)
        self.norm = nn.LayerNorm(32)
        self.plain_norm = nn.LayerNorm(32, elementwise_affine=False)
        self.up = nn.Linear(32, 64)
        self.act = nn.GELU(approximate="tanh")
        self.exact = nn.GELU()
        self.down = nn.Linear(64, 32, bias=False)
        self.custom = Custom(32, 32)
        self.head = nn.Linear(32, 20, bias=False)
        self.head.weight = self.embed.weight  # tied

    def forward(self, tokens):
        x = self.plain_norm(self.norm(self.embed(tokens)))
        x = x + self.down(self.exact(self.act(self.up(x))))
        return self.head(self.custom(x))


def test_inject_kernels_switches_in_place():
    model = Net()
    reference = copy.deepcopy(model)
    modules = dict(model.named_modules())
    params = {n: p for n, p in model.named_parameters()}
    keys = list(model.state_dict())
    assert ops.inject_kernels(model) == {"layer_norm": 1, "gelu": 1}  # the defaults
    assert type(model.up) is nn.Linear
    counts = ops.inject_kernels(model, ("linear", "layer_norm", "gelu"))
    assert counts == {"linear": 3}, counts  # the others were switched already
    assert type(model.up) is ops.Linear and type(model.down) is ops.Linear
    assert type(model.head) is ops.Linear and type(model.norm) is ops.LayerNorm
    assert type(model.act) is ops.GELU
    assert type(model.custom) is Custom  # a subclass keeps its forward
    assert type(model.plain_norm) is nn.LayerNorm and type(model.exact) is nn.GELU
    assert dict(model.named_modules()) == modules  # the same objects
    assert {n: p for n, p in model.named_parameters()} == params
    assert list(model.state_dict()) == keys
    assert model.head.weight is model.embed.weight
    assert isinstance(model.up, nn.Linear)

    tokens = torch.randint(0, 20, (3, 11))
    check(lambda: model(tokens), lambda: reference(tokens), [], FP32_TOLERANCE, "injected model")
    for (name, p), r in zip(model.named_parameters(), reference.parameters()):
        diff = max_rel(p.grad, r.grad)
        print(f"injected model grad {name}: {diff:.1e}")
        assert diff <= FP32_TOLERANCE, (name, diff)


def test_inject_kernels_keeps_autocast():
    model = nn.Sequential(nn.Linear(16, 16), nn.LayerNorm(16))
    reference = copy.deepcopy(model)
    ops.inject_kernels(model, ["linear", "layer_norm"])
    x = torch.randn(4, 16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got, ref = model[0](x), reference[0](x)
    assert got.dtype == torch.bfloat16 and torch.equal(got, ref)


def test_inject_kernels_refuses_wrong_arguments():
    with pytest.raises(TypeError, match="not a torch.nn.Module"):
        ops.inject_kernels([nn.Linear(2, 2)])
    with pytest.raises(ValueError, match="unknown kind"):
        ops.inject_kernels(nn.Linear(2, 2), ["linear", "rotary"])


def test_initialize_kernel_inject_switches_before_the_engine():
    """initialize(kernel_inject=...) at one rank (no group): the kinds asked are switched, others
    are not, and the engine trains the switched model."""
    model = nn.Sequential(nn.Linear(4, 8), nn.GELU(approximate="tanh"), nn.LayerNorm(8))
    config = {"train_micro_batch_size_per_gpu": 2,
              "optimizer": {"type": "AdamW", "params": {"lr": 1e-2}}}
    engine, _, _, _ = deepshard.initialize(model=model, config=config, kernel_inject="gelu")
    assert type(model[1]) is ops.GELU and type(model[0]) is nn.Linear
    assert type(model[2]) is nn.LayerNorm
    before = model[0].weight.detach().clone()
    loss = engine(torch.randn(2, 4)).square().mean()
    engine.backward(loss)
    engine.step()
    assert not torch.equal(before, model[0].weight.detach())
    engine.destroy()


def test_linear_speedup_times_the_models_linear_shapes():
    """ops.linear_speedup: a positive ratio for a model with fp32 Linear layers where the kernel
    runs them (a verified sgemm, oneDNN's or OpenBLAS's), 0.0 for a model without any."""
    with_linear = nn.Sequential(nn.Linear(64, 96), nn.GELU(), nn.Linear(96, 64))
    speedup = ops.linear_speedup(with_linear, rows=32, repeats=1)
    if "verified numerically" in ops.sgemm_status():
        assert speedup > 0.0
    else:
        assert speedup == 0.0
    assert ops.linear_speedup(nn.Sequential(nn.LayerNorm(8), nn.GELU())) == 0.0


@pytest.mark.parametrize("measured", [2.0, 1.0])
def test_kernel_inject_true_switches_linear_where_measured_faster(monkeypatch, measured):
    """initialize(kernel_inject=True) adds the Linear layers to the default kinds exactly when
    ops.linear_speedup (here fixed) reaches engine.LINEAR_SPEEDUP_TO_SWITCH on every rank."""
    from deepshard import engine as engine_module
    monkeypatch.setattr(ops, "linear_speedup", lambda model: measured)
    model = nn.Sequential(nn.Linear(4, 8), nn.GELU(approximate="tanh"), nn.LayerNorm(8))
    config = {"train_micro_batch_size_per_gpu": 2,
              "optimizer": {"type": "AdamW", "params": {"lr": 1e-2}}}
    engine, _, _, _ = deepshard.initialize(model=model, config=config, kernel_inject=True)
    switched = measured >= engine_module.LINEAR_SPEEDUP_TO_SWITCH
    assert (type(model[0]) is ops.Linear) == switched
    assert type(model[1]) is ops.GELU and type(model[2]) is ops.LayerNorm
    engine.destroy()


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("mask_kind", ["float", "bool"])
def test_multihead_attention_causal(batch_first, mask_kind):
    """A causal self-attention call of nn.MultiheadAttention: the injected module's output and the
    gradients of the input and every parameter within FP32_TOLERANCE of torch's."""
    length = 40
    torch_mha = nn.MultiheadAttention(48, 4, batch_first=batch_first)
    fused = copy.deepcopy(torch_mha)
    assert ops.inject_kernels(fused, ["attention"]) == {"attention": 1}
    upper = torch.ones(length, length, dtype=torch.bool).triu(1)
    mask = upper if mask_kind == "bool" else \
        torch.zeros(length, length).masked_fill(upper, float("-inf"))
    x = torch.randn(3, length, 48) if batch_first else torch.randn(length, 3, 48)
    assert fused._kernel_applies(x, x, x, None, False, mask)

    def run(module):
        return lambda t: module(t, t, t, attn_mask=mask, need_weights=False)[0]

    check(run(fused), run(torch_mha), [x], FP32_TOLERANCE,
          f"MultiheadAttention batch_first={batch_first} {mask_kind} mask")
    for (name, p), r in zip(fused.named_parameters(), torch_mha.parameters()):
        diff = max_rel(p.grad, r.grad)
        print(f"  grad {name}: {diff:.1e}")
        assert diff <= FP32_TOLERANCE, (name, diff)


def test_multihead_attention_other_calls_keep_torch():
    torch_mha = nn.MultiheadAttention(16, 2, batch_first=True)
    fused = copy.deepcopy(torch_mha)
    ops.inject_kernels(fused)
    x, other = torch.randn(2, 6, 16), torch.randn(2, 6, 16)
    causal = torch.ones(6, 6, dtype=torch.bool).triu(1)
    calls = [dict(query=x, key=x, value=x, attn_mask=causal),  # need_weights (the default)
             dict(query=x, key=other, value=other, attn_mask=causal, need_weights=False),
             dict(query=x, key=x, value=x, attn_mask=causal.t(), need_weights=False),
             dict(query=x, key=x, value=x, need_weights=False)]
    for call in calls:
        assert not fused._kernel_applies(call["query"], call["key"], call["value"], None,
                                         call.get("need_weights", True), call.get("attn_mask"))
        got, ref = fused(**call), torch_mha(**call)
        assert torch.equal(got[0], ref[0])
    assert not ops.is_causal_mask(torch.zeros(6, 6), 6)
    assert not ops.is_causal_mask(causal, 5)


HEAP_PROBE = """
import torch, deepshard
model = torch.nn.Linear(4, 4)
engine, _, _, _ = deepshard.initialize(model=model, config={
    "train_micro_batch_size_per_gpu": 2, "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}})
print(engine.heap_policy)
engine.destroy()
"""


@pytest.mark.parametrize("setting,expected", [
    ({}, "retain freed memory (glibc mmap threshold 32 MiB, trim threshold 1 GiB)"),
    ({"MALLOC_TOP_PAD_": "0"}, "the heap policy of MALLOC_TOP_PAD_ (set in the environment; kept)"),
    ({"DEEPSHARD_HEAP": "system"}, "the C library's default heap policy (DEEPSHARD_HEAP=system)"),
])
def test_initialize_applies_the_heap_policy_of_deepshard_train(setting, expected):
    """initialize applies `deepshard train`'s heap policy to the Python process (freed activations
    stay in the process), unless the environment chose one: the engine names what is in force."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("MALLOC_") and k not in ("DEEPSHARD_HEAP", "GLIBC_TUNABLES")}
    env.update(setting)
    python = os.environ.get("DS_PYTHON", "/usr/bin/python3")
    out = subprocess.run([python, "-c", HEAP_PROBE], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == expected
