"""A campaign's phases, each answering what it needs next (`base.Phase`); `flows.calibration`
asks them in order."""
