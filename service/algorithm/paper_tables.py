"""The paper's fitted curves (Chen et al. 2021, Table 4), transcribed once: pure data.

TABLE4[scenario][pm][cc] = (a, b, c) of tp = a + b*bs + c*bs^2 (bs in MiB, tp in Mbit/s). The
tests check the solver against Table 5 with them; the benchmarks and the example sample file
draw synthetic measurements from the SRL-HU curves.
"""

from __future__ import annotations

from probes.vocabulary import PathManager

Coefficients = tuple[float, float, float]

TABLE4: dict[str, dict[PathManager, dict[str, Coefficients]]] = {
    "SRL-HU": {
        "FullMesh": {"cubic": (3.49, 4.85, -0.15), "olia": (7.01, 5.26, -0.15),
                     "hybla": (5.91, 5.00, -0.15), "reno": (4.47, 4.59, -0.15),
                     "scalable": (3.49, 4.85, -0.15), "vegas": (4.67, 4.63, -0.15)},
        "PCDC": {"cubic": (6.31, 5.45, -0.17), "olia": (2.41, 6.51, -0.17),
                 "hybla": (24.49, 6.16, -0.17), "reno": (3.49, 5.30, -0.17),
                 "scalable": (1.99, 5.64, -0.17), "vegas": (0.47, 5.38, -0.17)},
    },
    "UNIS-HiN": {
        "FullMesh": {"cubic": (171.62, 11.08, -0.29), "olia": (102.04, 13.16, -0.29),
                     "hybla": (109.0, 13.48, -0.29), "reno": (111.74, 13.54, -0.29),
                     "scalable": (130.48, 12.95, -0.29), "vegas": (55.28, 9.85, -0.29)},
        "PCDC": {"cubic": (200.82, 9.63, -0.27), "olia": (118.6, 12.25, -0.27),
                 "hybla": (159.5, 11.42, -0.27), "reno": (138.3, 12.17, -0.27),
                 "scalable": (178.56, 10.74, -0.27), "vegas": (66.8, 7.77, -0.27)},
    },
    "UiT-HAW": {
        "FullMesh": {"cubic": (0.763, 0.002, 0.0), "olia": (0.675, 0.004, 0.0),
                     "hybla": (0.795, 0.002, 0.0), "reno": (0.753, 0.002, 0.0),
                     "scalable": (0.807, 0.002, 0.0), "vegas": (0.743, 0.002, 0.0)},
        "PCDC": {"cubic": (0.764, 0.002, 0.0), "olia": (0.68, 0.003, 0.0),
                 "hybla": (0.796, 0.002, 0.0), "reno": (0.754, 0.002, 0.0),
                 "scalable": (0.808, 0.002, 0.0), "vegas": (0.744, 0.002, 0.0)},
    },
}
