"""deepshard.zero.Init: a model built under it never exists whole on one rank (each rank's peak RSS
growth during the build, measured, stays below the model's size, while a plain build's reaches
it); the partitioned model holds rank 0's initial values and trains as the plain one does."""
import json

import pytest

from conftest import launch


@pytest.mark.parametrize("world", [2])
def test_full_model_never_on_one_rank(tmp_path, world):
    launch(world, "zero_init_worker.py", tmp_path)
    for rank in range(world):
        r = json.loads((tmp_path / f"zero_init_rank{rank}.json").read_text())
        print(f"rank {rank}/{world}: model {r['full_mib']:.1f} MiB; peak RSS growth while "
              f"building: under zero.Init {r['init_peak_growth_mib']:.1f} MiB, plain "
              f"{r['plain_peak_growth_mib']:.1f} MiB; largest unit gathered in the build "
              f"{r['peak_full_unit_mib']:.1f} MiB; {r['units']} units; initial diff "
              f"{r['initial_diff']:.1e}, after 3 steps {r['trained_diff']:.1e}")
        # The slices (1/world of the units), the root kept whole (one layer) and the unit being
        # partitioned (its layer and its flat storage): well under the whole model; the plain
        # build holds all of it.
        layer_mib = r["full_mib"] / r["layers"]
        bound = r["full_mib"] / world + 3 * layer_mib + 4.0
        assert r["init_peak_growth_mib"] < bound
        assert r["init_peak_growth_mib"] < 0.75 * r["full_mib"]
        assert r["plain_peak_growth_mib"] > 0.9 * r["full_mib"]
        assert r["peak_full_unit_mib"] <= layer_mib * 1.01
        assert r["initial_diff"] == 0.0
        assert r["trained_diff"] <= 1e-4
