"""deepshard's fused CPU kernels for PyTorch models: the kernels deepshard's C++ models run
(include/deepshard/kernels: Linear layers on oneDNN's sgemm, layer norm and GPT-2's tanh GELU in
one pass over memory, blocked causal attention, cross-entropy in fp32), as differentiable functions
and as torch.nn modules that run them. The modules are subclasses of the torch modules they
replace with only `forward` changed (same parameters, buffers, state_dict and hooks), and
inject_kernels(model) switches a model's nn.LayerNorm and nn.GELU(approximate="tanh") (and, when
asked, nn.Linear) to them in place; `deepshard.initialize(..., kernel_inject=True)` does it for the
engine's model.
Each kernel runs torch's own operator for what it does not handle (another device or dtype, a
strided input, a build without oneDNN), and the modules keep torch's forward under
torch.autocast, whose casts a kernel would bypass."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import _C


def linear(x, weight, bias=None):
    """y = x weightᵀ + bias on oneDNN's sgemm (fp32, contiguous CPU operands), else F.linear."""
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


# What inject_kernels switches, by name: the torch class and the fused one, when the fused one
# computes the module (a subclass of the torch class may have its own forward: never switched).
_KINDS = {
    "linear": (nn.Linear, Linear, lambda m: True),
    "layer_norm": (nn.LayerNorm, LayerNorm,
                   lambda m: m.elementwise_affine and len(m.normalized_shape) == 1),
    "gelu": (nn.GELU, GELU, lambda m: m.approximate == "tanh"),
}
# Switched unless asked otherwise. Not "linear": on this project's Xeon (AVX-512) OpenBLAS's
# SkylakeX sgemm, which torch's Linear runs on, is 1.4-1.7x faster than oneDNN's for the GPT's
# shapes at one thread (docs/python.md, "Fused kernels"); the oneDNN Linear pays off where
# OpenBLAS runs a generic core.
DEFAULT_KINDS = ("layer_norm", "gelu")


def inject_kernels(model, kinds=DEFAULT_KINDS):
    """Switches the modules of `model` (itself included) of the given kinds to deepshard's fused
    modules in place: "linear" (nn.Linear), "layer_norm" (nn.LayerNorm, affine over the last
    dimension), "gelu" (nn.GELU(approximate="tanh")). Each module keeps its identity, parameters,
    buffers, hooks and state_dict keys; only its class (its forward) changes. Only modules of
    exactly torch's class are switched. Returns the number switched per kind. Call it before
    deepshard.initialize (or pass initialize kernel_inject=...): at ZeRO-3 the engine wraps each
    unit's forward as it is then."""
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
    """One line: oneDNN's sgemm (what the Linear kernel runs on) and whether it is used, or why not."""
    return _C.ops.sgemm_status()
