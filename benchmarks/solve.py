"""Fit + solve for 2 PM x 6 CC x 60 buffers x 9 runs (6,480 samples): milliseconds on one core.

    .venv/bin/python benchmarks/solve.py [--repeat 30]

Target (issue 2): under 50 ms. Prints the median and p90 of repeated runs, for both model kinds.
BLAS threads are pinned to one so that the figure is a one-core figure.
"""

import os

for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from service.algorithm.paper_tables import TABLE4  # noqa: E402
from service.algorithm.regression import Sample, fit  # noqa: E402
from service.algorithm.solver import solve  # noqa: E402

CURVES = TABLE4["SRL-HU"]


def samples(runs: int = 9) -> list[Sample]:
    rng = np.random.default_rng(0)
    grid = np.arange(1, 61) * 0.5
    rows = []
    for pm, curves in CURVES.items():
        for cc, (a, b, c) in curves.items():
            for _ in range(runs):
                tp = np.clip(a + b * grid + c * grid**2 + rng.normal(0, 3, grid.size), 0, None)
                rows += [Sample(pm, cc, float(x), float(y)) for x, y in zip(grid, tp, strict=True)]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    data = samples()
    print(f"samples: {len(data)} (2 PM x 6 CC x 60 buffers x 9 runs)")
    for model in ("paper", "per-arm"):
        fit(data, model=model)  # warm-up: first-call imports and caches
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            fits = fit(data, model=model)
            solution = solve([c for f in fits for c in f.curves])
            times.append((time.perf_counter() - start) * 1000)
        times.sort()
        p90 = times[int(0.9 * (len(times) - 1))]
        print(
            f"model={model:8s} fit+solve median {statistics.median(times):6.1f} ms  "
            f"p90 {p90:6.1f} ms  (target < 50 ms)  -> {solution.opm}/{solution.occ} "
            f"OBS {solution.obs_mib:.2f} MiB"
        )


if __name__ == "__main__":
    main()
