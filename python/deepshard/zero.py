"""deepspeed.zero's parts: Init (a model partitioned as it is built, so its full size never exists
on one rank) and GatheredParameters (every parameter whole within a with-block)."""
import json
import os

import torch

from . import _C
from .comm import init_distributed
from .module_tree import has_own_trainable, tree_of


def _all_subclasses(cls):
    out = set()
    for sub in cls.__subclasses__():
        out.add(sub)
        out |= _all_subclasses(sub)
    return out


def _training_dtype(config, dtype):
    if dtype is not None:
        if dtype not in (torch.float32, torch.bfloat16):
            raise ValueError(f"deepshard.zero.Init: dtype {dtype}: want torch.float32 or "
                             "torch.bfloat16")
        return "bf16" if dtype == torch.bfloat16 else "fp32"
    if isinstance(config, (str, os.PathLike)):
        with open(config) as f:
            config = json.load(f)
    return "bf16" if (config or {}).get("bf16", {}).get("enabled") else "fp32"


class Init:
    """Within `with deepshard.zero.Init(config_dict_or_path=ds_config):`, each ZeRO-3 unit of a
    model is partitioned across the ranks as soon as it is built (rank 0's values broadcast, this
    rank's slice kept, the full storage freed): a module that holds trainable parameters of its
    own (with its submodules), or a whole module of one of `unit_classes` (also marked as
    utils.set_z3_leaf_modules does), unless a module being built around it (the model aside)
    holds parameters of its own already. The first unit built stays whole (the root, always gathered).
    A module's parameters must get their values in its own __init__; a parameter assigned to
    another module afterwards (a tied weight) cannot be in a partitioned unit. Pass the model to
    deepshard.initialize with a stage-3 config."""

    def __init__(self, module=None, data_parallel_group=None, mem_efficient_linear=True,
                 remote_device=None, pin_memory=False, config_dict_or_path=None, config=None,
                 enabled=True, dtype=None, mpu=None, unit_classes=()):
        if module is not None:
            raise ValueError("deepshard.zero.Init(module=...): partitioning a model built "
                             "earlier is not supported; build it inside the with-block")
        if data_parallel_group is not None or mpu is not None:
            raise ValueError("deepshard.zero.Init: the group is the job's (data_parallel_group "
                             "and mpu are not supported)")
        if remote_device not in (None, "cpu"):
            raise ValueError(f"deepshard.zero.Init: remote_device={remote_device!r}: the slices "
                             "stay in host memory (offload_param nvme is the engine's)")
        self.enabled = enabled
        self.unit_classes = tuple(unit_classes)
        self._dtype = _training_dtype(config_dict_or_path or config, dtype)
        self._build = None
        self._stack = []
        self._built = []  # the partitioned modules, by unit index
        self._first_kept = False
        self._patched = []

    # --- the context
    def __enter__(self):
        if not self.enabled:
            return self
        init_distributed()
        self._build = _C.PartitionedBuild(self._dtype)
        for cls in _all_subclasses(torch.nn.Module) | {torch.nn.Module}:
            if "__init__" in cls.__dict__:
                self._patch(cls)
        original_init_subclass = torch.nn.Module.__dict__.get("__init_subclass__")
        init = self

        def init_subclass(cls, **kwargs):
            super(torch.nn.Module, cls).__init_subclass__(**kwargs)
            if "__init__" in cls.__dict__:
                init._patch(cls)

        torch.nn.Module.__init_subclass__ = classmethod(init_subclass)
        self._original_init_subclass = original_init_subclass
        return self

    def __exit__(self, *exc):
        if not self.enabled:
            return False
        for cls, original in self._patched:
            cls.__init__ = original
        self._patched = []
        if self._original_init_subclass is None:
            del torch.nn.Module.__init_subclass__
        else:
            torch.nn.Module.__init_subclass__ = self._original_init_subclass
        return False

    def _patch(self, cls):
        original = cls.__dict__["__init__"]
        init = self

        def __init__(module, *args, **kwargs):
            init._stack.append(module)
            try:
                original(module, *args, **kwargs)
            finally:
                init._stack.pop()
            if not any(m is module for m in init._stack):  # its outermost __init__ ended
                init._built_module(module)

        __init__.__wrapped__ = original
        cls.__init__ = __init__
        self._patched.append((cls, original))

    def _built_module(self, module):
        # The outermost module being built (the model) does not count for parameters of its own.
        if any(isinstance(m, self.unit_classes) for m in self._stack) or any(
                has_own_trainable(m) for m in self._stack[1:]):
            return  # part of a unit still being built
        if isinstance(module, self.unit_classes):
            module._z3_leaf = True
        elif not has_own_trainable(module) or any(
                hasattr(m, "_ds_zero_init") for m in module.modules()):
            return  # no parameters of its own, or holding a unit already partitioned
        if not self._first_kept:
            self._first_kept = True  # the root's
            return
        self._build.partition(len(self._built), tree_of(module))
        module._ds_zero_init = self
        self._built.append(module)

    # --- for deepshard.initialize
    @property
    def peak_full_bytes(self):
        """The most bytes of whole (gathered) unit storage held at once during the build."""
        return self._build.peak_full_bytes if self._build else 0

    def units_of(self, model):
        """The paths in `model` of the units partitioned, by unit index."""
        paths = {id(m): p for p, m in model.named_modules(remove_duplicate=False)}
        missing = [type(m).__name__ for m in self._built if id(m) not in paths]
        if missing:
            raise ValueError(f"deepshard.zero.Init: modules built under Init are not part of the "
                             f"model given to initialize: {missing}")
        return [paths[id(m)] for m in self._built]


def init_of(model):
    """The Init that partitioned `model`'s units, or None."""
    for m in model.modules():
        init = getattr(m, "_ds_zero_init", None)
        if init is not None:
            return init
    return None


class GatheredParameters:
    """Within the with-block, every parameter of the engine that trains `params` holds its full
    value (ZeRO-3: a collective; every rank enters it; at other stages nothing happens). Reading
    only: modifier_rank must be None (changes are not written back into the partitions)."""

    def __init__(self, params, modifier_rank=None, fwd_module=None, enabled=True):
        if modifier_rank is not None:
            raise ValueError("deepshard.zero.GatheredParameters: modifier_rank is not supported "
                             "(changes made in the block are not written back)")
        if isinstance(params, torch.nn.Parameter):
            params = [params]
        self.params = list(params)
        self.enabled = enabled
        self._held = None

    def __enter__(self):
        if not self.enabled or not self.params:
            return self
        from .engine import engine_of
        engine = engine_of(self.params)
        if engine is not None and engine.zero_optimization_stage() == 3:
            self._held = engine._core.full_parameters()
            self._held.enter()
        return self

    def __exit__(self, *exc):
        if self._held is not None:
            held, self._held = self._held, None
            held.exit()
        return False
