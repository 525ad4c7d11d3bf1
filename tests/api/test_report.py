"""The report renders from any campaign: a finished one (four pages, the answer's figures from
`solve_campaign`) and one with nothing measured yet (the same pages, saying so)."""

from __future__ import annotations

import io
import re

import pytest
from PIL import Image

from service.errors import NotFound
from service.flows.takeaways.report import render_pdf, render_pngs
from service.flows.takeaways.report_data import report_data
from tests.api.test_bundle import finished_campaign
from tests.conftest import new_campaign

pytestmark = pytest.mark.postgres


def test_a_finished_campaign_renders_four_pages(db_session):
    campaign = finished_campaign(db_session)
    data = report_data(db_session, campaign_id=campaign.id)
    assert data.solved.solution is not None
    assert data.solved.solution.obs_mib == data.answer.obs_mib  # the API's buffer, not another
    assert data.omegas and data.points and data.fitted
    pdf = render_pdf(data)
    assert pdf.startswith(b"%PDF") and len(re.findall(rb"/Type /Page\b", pdf)) == 4
    pngs = render_pngs(data, dpi=50)
    assert [Image.open(io.BytesIO(p)).size for p in pngs] == [(584, 413)] * 4


def test_a_campaign_with_nothing_measured_still_renders(db_session):
    campaign = finished_campaign(db_session)
    empty = new_campaign(db_session, campaign.topology_id, ccs=["cubic"], runs=1)
    data = report_data(db_session, campaign_id=empty.id)
    assert data.solved.solution is None and not data.points and data.answer is None
    assert len(render_pngs(data, dpi=40)) == 4
    with pytest.raises(NotFound):
        report_data(db_session, campaign_id=10**9)
