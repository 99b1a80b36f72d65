"""deepshard's fused CPU kernels for PyTorch models: the kernels deepshard's C++ models run
(include/deepshard/kernels: Linear layers on one sgemm call per product, layer norm and GPT-2's tanh GELU in
one pass over memory, blocked causal attention, cross-entropy in fp32), as differentiable functions
and as torch.nn modules that run them. The modules are subclasses of the torch modules they
replace with only `forward` changed (same parameters, buffers, state_dict and hooks), and
inject_kernels(model) switches a model's nn.LayerNorm, nn.GELU(approximate="tanh") and
nn.MultiheadAttention (and, when asked, nn.Linear) to them in place;
`deepshard.initialize(..., kernel_inject=True)` does it for the engine's model. Each kernel runs
torch's own operator for what it does not handle (another device or dtype, a strided input, a
process without a verified sgemm), and the modules keep torch's forward under torch.autocast, whose casts a
kernel would bypass."""
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import _C


def linear(x, weight, bias=None):
    """y = x weightᵀ + bias on deepshard's sgemm (fp32, contiguous CPU operands), else F.linear."""
    return _C.ops.linear(x, weight, bias)


def layer_norm(x, weight, bias, eps=1e-5):
    """Layer norm over the last dimension with affine weight and bias [C] (statistics in fp32)."""
    return _C.ops.layer_norm(x, weight, bias, eps)


def gelu_tanh(x):
    """GPT-2's GELU, F.gelu(x, approximate="tanh"), forward and backward in one pass each."""
    return _C.ops.gelu_tanh(x)


def causal_attention(qkv, n_head):
    """Causal self-attention from the packed projection qkv [B, T, 3C] (q | k | v, n_head heads
    each) to y [B, T, C] (heads concatenated): softmax(q kᵀ / sqrt(C / n_head) + causal mask) v.
    The blocked kernel for contiguous fp32 CPU qkv; else the same computation in torch operators."""
    if _C.ops.causal_attention_supported(qkv, n_head):
        return _C.ops.causal_attention(qkv, n_head)
    return causal_attention_reference(qkv, n_head)


def causal_attention_reference(qkv, n_head):
    """causal_attention in torch operators (what the kernel is tested against)."""
    batch, length, width = qkv.shape
    channels = width // 3
    q, k, v = (t.view(batch, length, n_head, channels // n_head).transpose(1, 2)
               for t in qkv.split(channels, dim=2))
    scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(channels // n_head))
    mask = torch.full((length, length), float("-inf"), dtype=scores.dtype,
                      device=scores.device).triu(1)
    probs = F.softmax(scores + mask, dim=-1)
    return (probs @ v).transpose(1, 2).reshape(batch, length, channels)


def cross_entropy(logits, targets):
    """Mean cross-entropy of logits [N, V] against int64 targets [N], computed in fp32."""
    return _C.ops.cross_entropy(logits, targets)


class Linear(nn.Linear):
    """nn.Linear on deepshard's linear kernel."""

    def forward(self, x):
        if torch.is_autocast_cpu_enabled():
            return super().forward(x)
        return linear(x, self.weight, self.bias)


class LayerNorm(nn.LayerNorm):
    """nn.LayerNorm on deepshard's layer norm kernel (affine over the last dimension; any other
    LayerNorm keeps torch's forward)."""

    def forward(self, x):
        if (torch.is_autocast_cpu_enabled() or not self.elementwise_affine
                or len(self.normalized_shape) != 1):
            return super().forward(x)
        return layer_norm(x, self.weight, self.bias, self.eps)


class GELU(nn.GELU):
    """nn.GELU(approximate="tanh") on deepshard's kernel (the exact GELU keeps torch's forward)."""

    def forward(self, x):
        if self.approximate != "tanh":
            return super().forward(x)
        return gelu_tanh(x)


def is_causal_mask(mask, length):
    """True when `mask` is the causal attention mask of `length` positions as torch's attention
    takes it: [length, length], bool True above the diagonal only, or float -inf above it and 0 on
    and below it."""
    if mask is None or mask.dim() != 2 or mask.shape != (length, length):
        return False
    upper = torch.ones(length, length, dtype=torch.bool, device=mask.device).triu(1)
    if mask.dtype == torch.bool:
        return torch.equal(mask, upper)
    if not mask.is_floating_point():
        return False
    return bool(torch.isneginf(mask[upper]).all()) and bool((mask[~upper] == 0).all())


class MultiheadAttention(nn.MultiheadAttention):
    """nn.MultiheadAttention on deepshard's causal attention kernel when it is causal
    self-attention as the kernel computes it: the same tensor as query, key and value
    ([batch, length, embed] with batch_first, else [length, batch, embed]), attn_mask the causal
    mask (is_causal_mask), need_weights=False, no key_padding_mask, packed in_proj with bias (or
    none), no bias_k/bias_v, no add_zero_attn, no dropout while training. Then: the packed
    projection, the kernel, out_proj. Any other call keeps torch's forward."""

    def _kernel_applies(self, query, key, value, key_padding_mask, need_weights, attn_mask):
        if (torch.is_autocast_cpu_enabled() or need_weights or key_padding_mask is not None
                or not (query is key and key is value) or query.dim() != 3
                or not self._qkv_same_embed_dim or self.bias_k is not None
                or self.bias_v is not None or self.add_zero_attn
                or (self.training and self.dropout > 0)):
            return False
        length = query.shape[1] if self.batch_first else query.shape[0]
        return is_causal_mask(attn_mask, length)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True):
        if not self._kernel_applies(query, key, value, key_padding_mask, need_weights, attn_mask):
            return super().forward(query, key, value, key_padding_mask=key_padding_mask,
                                   need_weights=need_weights, attn_mask=attn_mask,
                                   average_attn_weights=average_attn_weights)
        x = query if self.batch_first else query.transpose(0, 1)
        qkv = F.linear(x, self.in_proj_weight, self.in_proj_bias).contiguous()
        y = causal_attention(qkv, self.num_heads)
        out = F.linear(y, self.out_proj.weight, self.out_proj.bias)
        return (out if self.batch_first else out.transpose(0, 1)), None


# What inject_kernels switches, by name: the torch class and the fused one, when the fused one
# computes the module (a subclass of the torch class may have its own forward: never switched).
_KINDS = {
    "linear": (nn.Linear, Linear, lambda m: True),
    "layer_norm": (nn.LayerNorm, LayerNorm,
                   lambda m: m.elementwise_affine and len(m.normalized_shape) == 1),
    "gelu": (nn.GELU, GELU, lambda m: m.approximate == "tanh"),
    "attention": (nn.MultiheadAttention, MultiheadAttention, lambda m: True),
}
# Switched unless asked otherwise. Not "linear": which sgemm is faster depends on the CPU (on an
# Intel Xeon OpenBLAS's SkylakeX sgemm, which torch's Linear runs on, is 1.7-1.9x oneDNN's for the
# GPT's shapes at one thread; on an AMD EPYC oneDNN's is 1.1-1.65x OpenBLAS's: docs/python.md,
# "Fused kernels"), so initialize(kernel_inject=True) adds it only where linear_speedup measures
# oneDNN's faster on the model's own shapes.
DEFAULT_KINDS = ("layer_norm", "gelu", "attention")


def linear_speedup(model, rows=512, repeats=5, largest=4):
    """How much faster deepshard's linear kernel (its sgemm: sgemm_status()) runs the model's Linear layers
    than torch's F.linear on this machine: the time of a forward and backward through F.linear
    over that through ops.linear, summed over the `largest` distinct (in, out) shapes of the
    model's fp32 CPU nn.Linear modules, each on `rows` random rows; per shape the fastest of
    `repeats` runs of each after a warm-up. CPU time of the process, not wall time: the ranks
    share the cores, so a kernel costs the CPU it takes, and OpenBLAS's own threads (which
    torch.set_num_threads does not bound, and which spin a while after each call) would make
    torch's look faster alone than it is beside the other ranks. deepshard's runs come first, after
    a pause: OpenBLAS's spinning threads would otherwise be charged to them. 0.0 when
    there is no such module or the kernel would not run it (no sgemm passed its numeric check)."""
    shapes = sorted({(m.in_features, m.out_features) for m in model.modules()
                     if isinstance(m, nn.Linear) and m.weight.dtype == torch.float32
                     and m.weight.device.type == "cpu"},
                    key=lambda s: s[0] * s[1], reverse=True)[:largest]
    cases = []
    for in_features, out_features in shapes:
        x = torch.randn(rows, in_features, requires_grad=True)
        w = torch.randn(out_features, in_features, requires_grad=True)
        b = torch.randn(out_features, requires_grad=True)
        dy = torch.randn(rows, out_features)  # a dense upstream gradient, as in training
        if not _C.ops.linear_supported(x, w, b):
            return 0.0
        cases.append((x, w, b, dy))
    totals = {}
    time.sleep(0.1)  # OpenBLAS's threads stop spinning after the model's own torch work
    for fn in (linear, F.linear):  # deepshard's first: OpenBLAS's spinning would be charged to it
        totals[fn] = 0.0
        for x, w, b, dy in cases:
            best = math.inf
            for run in range(repeats + 1):
                start = time.process_time()
                fn(x, w, b).backward(dy)
                if run > 0:  # run 0 warms up
                    best = min(best, time.process_time() - start)
            totals[fn] += best
    return totals[F.linear] / totals[linear] if shapes else 0.0


def inject_kernels(model, kinds=DEFAULT_KINDS):
    """Switches the modules of `model` (itself included) of the given kinds to deepshard's fused
    modules in place: "linear" (nn.Linear), "layer_norm" (nn.LayerNorm, affine over the last
    dimension), "gelu" (nn.GELU(approximate="tanh")), "attention" (nn.MultiheadAttention: the
    kernel for its causal self-attention calls, torch's forward for the others). Each module keeps
    its identity, parameters, buffers, hooks and state_dict keys; only its class (its forward)
    changes. Only modules of exactly torch's class are switched. Returns the number switched per
    kind. Call it before deepshard.initialize (or pass initialize kernel_inject=...): at ZeRO-3
    the engine wraps each unit's forward as it is then."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"deepshard.ops.inject_kernels: model is a {type(model).__name__}, "
                        "not a torch.nn.Module")
    if isinstance(kinds, str):
        kinds = (kinds,)
    unknown = [k for k in kinds if k not in _KINDS]
    if unknown:
        raise ValueError(f"deepshard.ops.inject_kernels: unknown kind(s) {unknown}; "
                         f"known: {sorted(_KINDS)}")
    counts = {}
    for module in model.modules():
        for kind in kinds:
            torch_class, fused, computes = _KINDS[kind]
            if type(module) is torch_class and computes(module):
                module.__class__ = fused
                counts[kind] = counts.get(kind, 0) + 1
    return counts


def sgemm_status():
    """One line: the sgemm the Linear and attention kernels run on (oneDNN's or OpenBLAS's), why,
    and its numeric check; or why they keep torch's."""
    return _C.ops.sgemm_status()
