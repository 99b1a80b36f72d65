"""The process group: one per process, joined from the launcher's torchrun variables (MASTER_ADDR,
MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK; Open MPI's and Slurm's otherwise; none: one rank)."""
from . import _C


def init_distributed(dist_backend=None, timeout=None, **kwargs):
    """Joins the job's group (deepspeed.init_distributed). `dist_backend` may be None or "gloo"
    (the engines' transport is their own); `timeout`: a datetime.timedelta or seconds bounding the
    rendezvous and every collective (default 30 min). Returns (rank, world_size)."""
    if dist_backend not in (None, "gloo"):
        raise ValueError(f"deepshard.init_distributed: dist_backend={dist_backend!r}: deepshard "
                         "runs its own CPU transport (None or 'gloo')")
    unknown = set(kwargs) - {"auto_mpi_discovery", "distributed_port", "verbose", "init_method",
                              "dist_init_required", "config", "rank", "world_size"}
    if unknown:
        raise TypeError(f"deepshard.init_distributed: unknown arguments {sorted(unknown)}")
    if timeout is None:
        seconds = 1800.0
    elif hasattr(timeout, "total_seconds"):
        seconds = timeout.total_seconds()
    else:
        seconds = float(timeout)
    return _C.init_distributed(seconds)


def is_initialized():
    return _C.is_initialized()


def get_rank():
    init_distributed()
    return _C.get_rank()


def get_world_size():
    init_distributed()
    return _C.get_world_size()


def barrier():
    _C.barrier()
