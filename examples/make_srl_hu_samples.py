"""Write examples/srl-hu-samples.csv: the paper's SRL-HU curves (Table 4) over its buffer grid
(0.5..30 MiB), 3 runs each, with Gaussian noise of 3 Mbit/s. A stand-in for a measured campaign
so that `mpcoa recommend` has something to chew on before any testbed exists.

    .venv/bin/python examples/make_srl_hu_samples.py > examples/srl-hu-samples.csv
"""

import csv
import sys

import numpy as np

from service.algorithm.paper_tables import TABLE4

TABLE4_SRL_HU = TABLE4["SRL-HU"]


def main() -> None:
    rng = np.random.default_rng(2021)
    grid = np.arange(1, 61) * 0.5
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(["pm", "cc", "bs_mib", "tp_mbps"])
    for pm, curves in TABLE4_SRL_HU.items():
        for cc, (a, b, c) in curves.items():
            for _run in range(3):
                tp = a + b * grid + c * grid**2 + rng.normal(0, 3.0, grid.size)
                for bs, y in zip(grid, np.clip(tp, 0, None), strict=True):
                    out.writerow([pm, cc, f"{bs:.1f}", f"{y:.3f}"])


if __name__ == "__main__":
    main()
