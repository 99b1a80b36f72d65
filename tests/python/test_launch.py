"""`deepshard launch -n 2 -- python3 script.py`: a rank that dies stops the job (the rank waiting for
it in a collective is stopped) and the launcher exits with the dead rank's status."""
import time

from conftest import launch


def test_dying_rank_stops_the_job():
    start = time.monotonic()
    proc = launch(2, "dying_rank_worker.py", timeout=120, expect_ok=False)
    elapsed = time.monotonic() - start
    print(f"launcher exit {proc.returncode} after {elapsed:.1f} s")
    assert proc.returncode == 3, proc.stderr
    assert elapsed < 60
