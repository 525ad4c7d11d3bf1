"""The paper's own numbers (Chen et al. 2021, Tables 1-5), transcribed for the tests."""

from service.algorithm import paper_tables

CCS = ("cubic", "olia", "hybla", "reno", "scalable", "vegas")

# Table 1: site -> [(ISP name, label, down kbit/s, up kbit/s)]
SITES = {
    "SRL": [("Uninett", "U", 100_000, 100_000), ("Kvantel", "K", 1_000_000, 1_000_000),
            ("PowerTech", "P", 6000, 256), ("Telenor", "T", 3000, 768)],
    "HU": [("CERNET", "C", 100_000, 100_000), ("CnUnicom", "CU", 20_000, 20_000)],
    "UNIS": [("Uninett", "U", 100_000, 100_000), ("Telenor", "T", 10_000, 10_000)],
    "HiN": [("Uninett", "U", 100_000, 100_000), ("PowerTech", "P", 6000, 512),
            ("Broadnet", "B", 16_000, 768)],
    "UiT": [("PowerTech", "P", 6000, 512), ("Telenor", "T", 2000, 384)],
    "HAW": [("DFN", "D", 100_000, 100_000)],
}
SCENARIOS = {"SRL-HU": ("SRL", "HU"), "UNIS-HiN": ("UNIS", "HiN"), "UiT-HAW": ("UiT", "HAW")}

# Table 2: scenario -> subflow -> Omega per CC (in CCS order)
TABLE2 = {
    "SRL-HU": {
        "K-C": (0.496, 0.376, 0.396, 0.469, 0.292, 0.356),
        "K-CU": (0.248, 0.359, 0.174, -0.027, 0.19, 0.135),
        "P-C": (-0.313, 0.098, -23.667, 0.174, -0.324, 0.086),
        "P-CU": (0.184, 0.172, -0.366, -0.496, 0.24, 0.077),
        "T-C": (0.032, -0.54, -40.713, 0.14, 0.057, 0.08),
        "T-CU": (0.046, 0.105, -13.235, 0.085, 0.02, 0.057),
        "U-C": (0.239, 0.305, 0.209, 0.235, 0.301, 0.325),
        "U-CU": (0.063, 0.113, 0.258, 0.165, 0.072, 0.189),
    },
    "UNIS-HiN": {
        "T-B": (-0.014, 0.017, -0.019, 0.061, -0.154, 0.014),
        "T-P": (-0.063, 0.002, 0.001, 0.028, -0.03, -0.004),
        "T-U": (-0.011, -0.047, -0.013, -0.034, 0.036, 0.027),
        "U-B": (-0.046, 0.025, -0.025, 0.02, -0.008, 0.094),
        "U-P": (-0.075, 0.054, -0.003, -0.001, 0.004, -0.13),
        "U-U": (0.897, 0.916, 0.921, 0.92, 0.923, 0.852),
    },
    "UiT-HAW": {
        "P-D": (0.59, 0.61, 0.55, 0.57, 0.61, 0.58),
        "T-D": (0.44, 0.46, 0.44, 0.43, 0.45, 0.44),
    },
}

# Table 3: scenario -> CC -> optional subflow subset SP*
TABLE3 = {
    "SRL-HU": {
        "cubic": {"K-C", "K-CU", "P-CU", "T-C", "T-CU", "U-C", "U-CU"},
        "olia": {"K-C", "K-CU", "P-C", "P-CU", "T-CU", "U-C", "U-CU"},
        "hybla": {"K-C", "K-CU", "U-C", "U-CU"},
        "reno": {"K-C", "P-C", "T-C", "T-CU", "U-C", "U-CU"},
        "scalable": {"K-C", "K-CU", "P-CU", "T-C", "T-CU", "U-C", "U-CU"},
        "vegas": {"K-C", "K-CU", "P-C", "P-CU", "T-C", "T-CU", "U-C", "U-CU"},
    },
    "UNIS-HiN": {
        "cubic": {"U-U"},
        "olia": {"T-B", "T-P", "U-B", "U-P", "U-U"},
        "hybla": {"T-P", "U-U"},
        "reno": {"T-B", "T-P", "U-B", "U-U"},
        "scalable": {"T-U", "U-P", "U-U"},
        "vegas": {"T-B", "T-U", "U-B", "U-U"},
    },
    "UiT-HAW": {cc: {"P-D", "T-D"} for cc in CCS},
}

# Table 4: scenario -> PM -> CC -> (a, b, c), kept with the code that uses it.
TABLE4 = paper_tables.TABLE4

# Table 5: scenario -> (OPM, OCC, OBS MiB, OTP Mbit/s, traditional B MiB, OBS/B)
TABLE5 = {
    "SRL-HU": ("PCDC", "hybla", 12.36, 74.65, 329.0, 0.0376),
    "UNIS-HiN": ("PCDC", "cubic", 9.22, 266.66, 54.0, 0.1707),
    "UiT-HAW": ("FullMesh", "scalable", 0.50, 0.81, 1.22, 0.4098),
}
# Section 5: the peak T* and where it is.
TSTAR = {"SRL-HU": (80.27, 18.12), "UNIS-HiN": (286.73, 17.83), "UiT-HAW": (0.87, 30.0)}

# Eq. 13, FullMesh, SRL-HU: the paper's pooled coefficients (CC order as CCS).
EQ13_FULLMESH = {
    "intercept": 3.63, "bs": 4.17, "bs^2": -0.15,
    "CC": (-0.07, 1.69, 1.14, 0.42, -0.07, 0.52),
    "bs*CC": (0.68, 1.09, 0.83, 0.42, 0.68, 0.46),
}
