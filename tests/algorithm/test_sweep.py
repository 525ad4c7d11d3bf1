"""Issue 10 item 6: the buffer grid from bandwidth-delay products; a seeded order per run."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.algorithm.sweep import bdp_buffer_grid, bdp_mib, run_order

from .test_paper_tables import topology


def test_bdp_by_hand():
    # 100 Mbit/s * 80 ms = 8 Mbit = 1 MB = 0.9537 MiB
    assert bdp_mib(100_000, 0.08) == pytest.approx(8e6 / 8 / 2**20)


def test_grid_spans_the_bdps():
    # BDPs 0.596 and 0.477 MiB: from 0.477 / 8 to 4 * 1.073 MiB, log-spaced, 3 digits.
    grid = bdp_buffer_grid([100_000, 20_000], [0.05, 0.2], points=8)
    # ratio (4.292 / 0.0596)^(1/7) = 1.842 between neighbours
    assert grid == [0.0596, 0.11, 0.202, 0.373, 0.686, 1.26, 2.33, 4.29]
    assert grid[0] == pytest.approx(bdp_mib(20_000, 0.2) / 8, rel=5e-3)
    assert grid[-1] == pytest.approx(4 * (bdp_mib(100_000, 0.05) + bdp_mib(20_000, 0.2)), rel=5e-3)


def test_srl_hu_grid_reaches_from_the_16_kib_floor_past_the_fast_paths():
    # 310 ms RTT (the service's synthetic SRL-HU campaign); P-CU's 256 kbit/s BDP is 9.5 KiB, an
    # eighth of it is below the 16 KiB floor.
    bws = [sf.bandwidth_kbps for sf in topology("SRL-HU").subflows()]
    grid = bdp_buffer_grid(bws, [0.31] * len(bws), points=10)
    assert grid == [0.0156, 0.0369, 0.0872, 0.206, 0.486, 1.15, 2.71, 6.41, 15.1, 35.8]


def test_tiny_paths_are_floored_and_a_single_path_still_gives_three_points():
    grid = bdp_buffer_grid([64], [0.01], points=5)  # BDP 80 bytes
    assert grid[0] == pytest.approx(1 / 64, rel=5e-3) and len(grid) >= 3


@settings(max_examples=100, deadline=None)
@given(
    paths=st.lists(st.tuples(st.floats(10, 1e7), st.floats(1e-3, 3.0)), min_size=1, max_size=16),
    points=st.integers(3, 40),
)
def test_grid_properties(paths, points):
    bws, rtts = zip(*paths, strict=True)
    grid = bdp_buffer_grid(list(bws), list(rtts), points=points)
    assert len(set(grid)) == len(grid) >= 3
    assert grid == sorted(grid)
    bdps = [bdp_mib(b, r) for b, r in paths]
    assert grid[0] <= max(1 / 64, min(bdps) / 8) * 1.005
    assert grid[-1] >= 4 * sum(bdps) * 0.995


def test_run_order_is_a_seeded_permutation():
    grid = [0.5, 1.0, 2.0, 4.0, 8.0, 16.0]
    orders = [run_order(grid, run, seed=42) for run in range(5)]
    assert all(sorted(o) == grid for o in orders)
    assert orders[0] == run_order(grid, 0, seed=42)  # reproducible from the stored seed
    assert len({tuple(o) for o in orders}) > 1  # runs differ
    assert run_order(grid, 0, seed=43) != orders[0] or run_order(grid, 1, seed=43) != orders[1]
    with pytest.raises(ValueError, match="seed"):
        run_order(grid, 0, seed=-1)


@pytest.mark.parametrize(
    ("args", "message"),
    [(([], []), "at least one"), (([1.0], [0.0]), r"rtts_s\[0\]"), (([1.0, 2.0], [0.1]), "each")],
)
def test_bad_grid_input(args, message):
    with pytest.raises(ValueError, match=message):
        bdp_buffer_grid(*args)


# --- the grid grows while the best arm is still climbing (issue 10: "the grid stopped below the
# plateau"); measured on benchmarks/scenarios/asymmetric.yaml, FullMesh/bbr gained 31 % from
# 0.215 to 0.515 MiB (6.64 -> 8.69 Mbit/s), so T* was read off a slope.
def test_a_climbing_best_arm_extends_the_grid_by_its_step():
    from service.algorithm.sweep import plateau_extension

    grid = [0.0897, 0.215, 0.515]
    means = {("FullMesh", "bbr"): {0.0897: 5.14, 0.215: 6.64, 0.515: 8.69},
             ("PCDC", "reno"): {0.0897: 6.64, 0.215: 7.42, 0.515: 8.37}}
    # step 0.515 / 0.215 = 2.4
    assert plateau_extension(grid, means, delta=0.07) == pytest.approx(1.23, rel=1e-3)


def test_a_flat_best_arm_or_a_cap_stops_the_extension():
    from service.algorithm.sweep import plateau_extension

    grid = [0.1, 0.2, 0.4]
    # the best arm at the top gained 5 % < delta; a climbing arm below it does not count
    means = {("a", "x"): {0.2: 9.5, 0.4: 9.9}, ("b", "y"): {0.2: 3.0, 0.4: 6.0}}
    assert plateau_extension(grid, means, delta=0.07) is None
    climbing = {("a", "x"): {0.2: 5.0, 0.4: 9.0}}
    assert plateau_extension(grid, climbing, delta=0.07, max_mib=0.4) is None
    assert plateau_extension(grid, climbing, delta=0.07, max_mib=0.5) == 0.5  # capped
    assert plateau_extension(grid, {}, delta=0.07) is None  # nothing measured at the top
