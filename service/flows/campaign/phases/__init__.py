"""A campaign's phases, each answering what it needs next (`base.Phase`);
`flows.campaign.calibration` asks them in order."""
