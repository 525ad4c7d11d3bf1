"""Write examples/srl-hu-samples.csv: the paper's SRL-HU curves (Table 4) over its buffer grid
(0.5..30 MiB), 3 runs each, with Gaussian noise of 3 Mbit/s. A stand-in for a measured campaign
so that `mpcoa recommend` has something to chew on before any testbed exists.

    .venv/bin/python examples/make_srl_hu_samples.py > examples/srl-hu-samples.csv
"""

import csv
import sys

import numpy as np

TABLE4_SRL_HU = {
    "FullMesh": {"cubic": (3.49, 4.85, -0.15), "olia": (7.01, 5.26, -0.15),
                 "hybla": (5.91, 5.00, -0.15), "reno": (4.47, 4.59, -0.15),
                 "scalable": (3.49, 4.85, -0.15), "vegas": (4.67, 4.63, -0.15)},
    "PCDC": {"cubic": (6.31, 5.45, -0.17), "olia": (2.41, 6.51, -0.17),
             "hybla": (24.49, 6.16, -0.17), "reno": (3.49, 5.30, -0.17),
             "scalable": (1.99, 5.64, -0.17), "vegas": (0.47, 5.38, -0.17)},
}


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
