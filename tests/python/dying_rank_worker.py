"""Rank 1 raises after joining the group while rank 0 waits in a barrier for it (test_launch.py)."""
import deepshard

deepshard.init_distributed()
if deepshard.get_rank() == 1:
    raise SystemExit(3)
deepshard.barrier()
