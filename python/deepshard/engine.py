"""deepshard.initialize and DeepShardEngine: DeepSpeed's engine API over the C++ zero::Engine for
any torch.nn.Module. At ZeRO-3 each unit's forward runs through the engine's hook point (gather
before, release after, the pre-backward re-gather on its output, trace and prefetch); gradients
are reduce-scattered by the C++ engine's hooks on the parameters' gradient accumulators."""
import json
import os
import weakref

import torch

from . import _C, ops, zero
from .comm import init_distributed
from .module_tree import resolve_units, tree_of

_ENGINES = weakref.WeakSet()


def engine_of(params):
    """The live engine whose model holds the first of `params`, or None."""
    first = id(params[0])
    for engine in list(_ENGINES):
        if any(id(p) == first for p in engine.module.parameters()):
            return engine
    return None


def _config_source(config, args):
    """(json text, path) of the DeepSpeed config: a dict, a path, or args.deepspeed_config."""
    if config is None and args is not None:
        config = getattr(args, "deepspeed_config", None) or getattr(args, "deepscale_config", None)
    if config is None:
        raise ValueError("deepshard.initialize: no config (give config=dict or a JSON file path)")
    if isinstance(config, dict):
        return json.dumps(config), ""
    if isinstance(config, (str, os.PathLike)):
        return "", os.fspath(config)
    raise TypeError(f"deepshard.initialize: config is a {type(config).__name__}; "
                    "want a dict or a JSON file path")


def _output_tensor(out):
    """The tensor of a unit's output that carries the pre-backward hook, and how to put it back."""
    if isinstance(out, torch.Tensor):
        return out, lambda t: t
    if isinstance(out, (tuple, list)):
        grads = [i for i, x in enumerate(out) if isinstance(x, torch.Tensor) and x.requires_grad]
        if len(grads) > 1:
            raise TypeError("deepshard ZeRO-3: a unit returned several tensors that require grad; "
                            "make the enclosing module the unit (utils.set_z3_leaf_modules)")
        if grads:
            i = grads[0]
            return out[i], lambda t: type(out)(list(out[:i]) + [t] + list(out[i + 1:]))
    return None, None


class _UnitHooks:
    """Runs each unit module's forward through the engine's hook point (forward wrappers on the
    module instances; removed by remove())."""

    def __init__(self, core, modules):
        self._wrapped = []
        for index, module in enumerate(modules):
            original = module.forward
            module.forward = self._wrap(core, index, original)
            self._wrapped.append(module)

    @staticmethod
    def _wrap(core, index, original):
        def forward(*args, **kwargs):
            box = []

            def body():
                out = original(*args, **kwargs)
                box.append(out)
                tensor, _ = _output_tensor(out)
                return tensor if tensor is not None else torch.empty(0)

            tensor = core.run_unit(index, body)
            out = box[-1]
            original_tensor, put_back = _output_tensor(out)
            return out if original_tensor is None else put_back(tensor)

        return forward

    def remove(self):
        for module in self._wrapped:
            del module.forward  # the instance attribute: the class's forward again
        self._wrapped = []


class DeepShardOptimizer:
    """What initialize returns as the optimizer: the engine's (Adam/AdamW from the config's
    "optimizer" section, partitioned by the ZeRO stage). The engine applies it in step()."""

    def __init__(self, engine):
        self._engine = engine

    @property
    def param_groups(self):
        params = [p for p in self._engine.module.parameters() if p.requires_grad]
        return [{"params": params, "lr": self._engine._core.current_lr}]

    @property
    def loss_scale(self):
        return self._engine._core.loss_scale

    def zero_grad(self, set_to_none=True):
        """Nothing to do: the engine clears the gradients after each optimizer step."""


class DeepShardLRScheduler:
    """The config's "scheduler" (stepped by engine.step() at every optimizer step)."""

    def __init__(self, engine):
        self._engine = engine

    def get_lr(self):
        return self._engine.get_lr()

    def get_last_lr(self):
        return self._engine.get_lr()


class DeepShardEngine:
    """DeepSpeed's engine: engine(*args) runs the model, backward(loss), step()."""

    def __init__(self, model, config_json, config_path):
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"deepshard.initialize: model is a {type(model).__name__}, "
                            "not a torch.nn.Module")
        init_distributed()
        # deepshard train's heap policy (docs/python.md): freed activations stay in the process
        # instead of being unmapped and page-faulted again at every step.
        self.heap_policy = _C.retain_freed_heap_memory()
        stage = self._stage(config_json, config_path)
        self.module = model
        init = zero.init_of(model)
        if init is not None:
            if stage != 3:
                raise ValueError("deepshard.initialize: the model was built under "
                                 "deepshard.zero.Init; its config needs zero_optimization.stage 3, "
                                 f"not {stage}")
            self._units = init.units_of(model)
        else:
            self._units = resolve_units(model) if stage == 3 else []
        self._core = _C.Engine(tree_of(model), self._units, config_json, config_path,
                               init._build if init is not None else None)
        self._config = json.loads(self._core.config_json)
        modules = dict(model.named_modules(remove_duplicate=False))
        self._hooks = _UnitHooks(self._core, [modules[u] for u in self._units])
        _ENGINES.add(self)

    @staticmethod
    def _stage(config_json, config_path):
        if config_path:
            with open(config_path) as f:
                config = json.load(f)
        else:
            config = json.loads(config_json)
        return int(config.get("zero_optimization", {}).get("stage", 0))

    # --- running the model
    def __call__(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    forward = __call__

    def train(self, mode=True):
        self.module.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def parameters(self, recurse=True):
        return self.module.parameters(recurse)

    def named_parameters(self, *args, **kwargs):
        return self.module.named_parameters(*args, **kwargs)

    # --- training
    def backward(self, loss):
        """Backward of this rank's micro-batch loss (scaled by the loss scale and 1/accumulation
        steps); gradients are reduced across ranks at the accumulation boundary."""
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            raise TypeError("engine.backward: want the scalar loss tensor")
        self._core.backward(loss)
        return loss

    def step(self, lr_kwargs=None):
        """After every backward: the optimizer update at the accumulation boundary."""
        self._last_step = self._core.step()
        return self._last_step

    def is_gradient_accumulation_boundary(self):
        return self._core.is_gradient_accumulation_boundary

    @property
    def global_steps(self):
        return self._core.global_steps

    @property
    def micro_steps(self):
        return self._core.micro_steps

    @property
    def skipped_steps(self):
        return self._core.skipped_steps

    def get_lr(self):
        return [self._core.current_lr]

    def get_global_grad_norm(self):
        step = getattr(self, "_last_step", None)
        return step["grad_norm"] if step and step["applied"] else None

    def train_micro_batch_size_per_gpu(self):
        return self._config["train_micro_batch_size_per_gpu"]

    def gradient_accumulation_steps(self):
        return self._config["gradient_accumulation_steps"]

    def train_batch_size(self):
        return self._config["train_batch_size"]

    def zero_optimization_stage(self):
        return self._config["zero_optimization"]["stage"]

    @property
    def config(self):
        """The resolved DeepSpeed config (defaults filled, "auto" resolved)."""
        return self._config

    @property
    def global_rank(self):
        return _C.get_rank()

    @property
    def world_size(self):
        return _C.get_world_size()

    def memory_bytes(self):
        """This rank's engine memory by category: {name: (bytes now, peak bytes)}."""
        return self._core.memory_bytes()

    # --- checkpoints (docs/checkpoint.md): any stage and world size can load them
    def save_checkpoint(self, save_dir, tag=None, client_state=None, save_latest=True):
        """Collective: <save_dir>/<tag> (default "global_step<N>"), then <save_dir>/latest."""
        if not save_latest:
            raise ValueError("engine.save_checkpoint: save_latest=False is not supported "
                             "(<save_dir>/latest always points at the new tag)")
        tag = f"global_step{self.global_steps}" if tag is None else str(tag)
        try:
            client_json = json.dumps(client_state or {})
        except TypeError as e:
            raise TypeError(f"engine.save_checkpoint: client_state must be JSON-serialisable "
                            f"(deepshard stores it in the manifest): {e}") from None
        self._core.save_checkpoint(os.fspath(save_dir), tag, client_json)
        return True

    def load_checkpoint(self, load_dir, tag=None, load_module_strict=True,
                        load_optimizer_states=True, load_lr_scheduler_states=True,
                        load_module_only=False):
        """Collective: loads <load_dir>/<tag> (None: latest) saved at any stage and world size.
        Returns (tag directory, client_state) as DeepSpeed does."""
        if not (load_module_strict and load_optimizer_states and load_lr_scheduler_states) \
                or load_module_only:
            raise ValueError("engine.load_checkpoint: deepshard restores the whole engine state "
                             "(module, optimizer, scheduler); partial loads are not supported")
        loaded = self._core.load_checkpoint(os.fspath(load_dir), "" if tag is None else str(tag))
        return loaded["path"], json.loads(loaded["client_state_json"] or "{}")

    def destroy(self):
        """Removes the ZeRO-3 forward wrappers from the model's modules."""
        self._hooks.remove()


# initialize(kernel_inject=True) switches the Linear layers too when every rank measures
# deepshard's linear kernel at least this much faster than torch's on the model's shapes.
LINEAR_SPEEDUP_TO_SWITCH = 1.05


def _measured_linear_choice(model):
    """(switch the Linear layers?, why) for kernel_inject=True: ops.linear_speedup on every rank,
    the Linear layers switched only if all ranks agree, so that every rank runs the same kernels."""
    speedup = ops.linear_speedup(model)
    agree = torch.tensor([1.0 if speedup >= LINEAR_SPEEDUP_TO_SWITCH else 0.0])
    _C.all_reduce_sum(agree)
    switch = int(agree.item()) == _C.get_world_size()
    why = (f"linear: deepshard's sgemm measured {speedup:.2f}x torch's on the model's Linear shapes "
           f"(rank 0; switched when every rank measures >= {LINEAR_SPEEDUP_TO_SWITCH}x)")
    return switch, why


def _inject_kernels(model, kernel_inject):
    """initialize(kernel_inject=...): ops.inject_kernels on the model, said on rank 0."""
    init_distributed()
    why_linear = ""
    if kernel_inject is True:
        kinds = ops.DEFAULT_KINDS
        switch_linear, why_linear = _measured_linear_choice(model)
        if switch_linear:
            kinds = ("linear",) + kinds
    elif isinstance(kernel_inject, str):
        kinds = (kernel_inject,)
    else:
        kinds = tuple(kernel_inject)
    counts = ops.inject_kernels(model, kinds)
    if _C.get_rank() == 0:
        switched = ", ".join(f"{counts.get(k, 0)} {k}" for k in kinds)
        linear = f"; {ops.sgemm_status()}" if "linear" in kinds else ""
        measured = f"; {why_linear}" if why_linear else ""
        _C.log_info(f"deepshard.initialize(kernel_inject): modules switched to deepshard's fused "
                    f"kernels: {switched}{linear}{measured}")


def initialize(args=None, model=None, optimizer=None, model_parameters=None, training_data=None,
               lr_scheduler=None, mpu=None, dist_init_required=None, collate_fn=None,
               config=None, config_params=None, kernel_inject=False):
    """deepspeed.initialize: returns (engine, optimizer, training_dataloader, lr_scheduler).
    The optimizer and the schedule are the config's "optimizer" and "scheduler" sections (the
    engine's C++ Adam/AdamW, partitioned by the ZeRO stage); the engine trains every parameter
    with requires_grad (model_parameters, when given, must be exactly those).
    kernel_inject (deepshard's own argument): True switches the model's nn.LayerNorm,
    nn.GELU(approximate="tanh") and nn.MultiheadAttention to deepshard's fused kernels first, and
    its nn.Linear layers too where every rank measures deepshard's linear kernel faster on the
    model's shapes (ops.linear_speedup); a kind or a list of kinds chooses them ("linear",
    "layer_norm", "gelu", "attention": ops.inject_kernels); what was switched is logged."""
    if model is None:
        raise ValueError("deepshard.initialize: no model")
    if optimizer is not None:
        raise ValueError("deepshard.initialize: optimizer= is not supported; the engine's "
                         "optimizer comes from the config's \"optimizer\" section")
    if lr_scheduler is not None:
        raise ValueError("deepshard.initialize: lr_scheduler= is not supported; the schedule "
                         "comes from the config's \"scheduler\" section")
    if mpu is not None:
        raise ValueError("deepshard.initialize: mpu= is not supported (model parallelism is "
                         "configured by the config's tensor_parallel/pipeline sections in C++)")
    if config is None:
        config = config_params
    if model_parameters is not None:
        given = {id(p) for p in model_parameters}
        trainable = {id(p) for p in model.parameters() if p.requires_grad}
        if given != trainable:
            raise ValueError("deepshard.initialize: model_parameters must be the model's "
                             "parameters with requires_grad (the engine trains exactly those; "
                             "set requires_grad=False to freeze one)")
    config_json, config_path = _config_source(config, args)
    if kernel_inject:
        _inject_kernels(model, kernel_inject)
    engine = DeepShardEngine(model, config_json, config_path)
    dataloader = None
    if training_data is not None:
        sampler = torch.utils.data.distributed.DistributedSampler(
            training_data, num_replicas=engine.world_size, rank=engine.global_rank)
        dataloader = torch.utils.data.DataLoader(
            training_data, batch_size=engine.train_micro_batch_size_per_gpu(), sampler=sampler,
            collate_fn=collate_fn)
    scheduler = DeepShardLRScheduler(engine) if engine.config.get("scheduler") else None
    return engine, DeepShardOptimizer(engine), dataloader, scheduler
