"""deepshard for PyTorch users: DeepSpeed's Python API over deepshard's C++ ZeRO engines.

    import deepshard as deepspeed
    engine, optimizer, _, _ = deepspeed.initialize(model=model, config=ds_config)
    loss = engine(batch); engine.backward(loss); engine.step()

The engines train the model's own parameters (the same tensors; nothing is copied). Run the
ranks with `deepshard launch -n N -- /usr/bin/python3 train.py` (docs/python.md).
"""
import torch  # noqa: F401  (libtorch and torch's Python types before the extension)

from . import _C, ops, utils, zero
from ._C import CommError, ConfigError, DeepshardError
from .comm import barrier, get_rank, get_world_size, init_distributed, is_initialized
from .engine import DeepShardEngine, initialize

__all__ = ["initialize", "init_distributed", "is_initialized", "get_rank", "get_world_size",
           "barrier", "DeepShardEngine", "ops", "zero", "utils", "ConfigError", "CommError",
           "DeepshardError"]
