"""The one sentence an answer leads with."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.state.confidence_summary import (
    Alternative,
    confidence_statement,
    format_rate,
    format_relative,
)


def test_the_example_sentence():
    text = confidence_statement(17.93, 19.08, 0.9, pm_settled=False, cc_settled=True,
                                alternatives=[Alternative("FullMesh/bbr", -0.021, ("pm",))])
    assert text == ("Expect 17.9-19.1 Mbit/s (90 %); CC settled, PM open; FullMesh/bbr (−2 %) is "
                    "within reach.")


def test_everything_settled_with_the_subset():
    assert confidence_statement(8.01, 8.78, 0.95, pm_settled=True, cc_settled=True,
                                subset_settled=True) == \
        "Expect 8.01-8.78 Mbit/s (95 %); PM, CC and subset settled."


def test_open_choices_are_named_and_long_lists_counted():
    alts = [Alternative("PCDC/bbr", -0.012, ("pm", "cc")), Alternative("K-C alone", -0.007),
            Alternative("FullMesh/cubic", -0.03, ("cc",)), Alternative("all subflows", -0.9)]
    text = confidence_statement(18.1, 19.5, 0.9, pm_settled=False, cc_settled=False,
                                subset_settled=False, alternatives=alts)
    assert text == ("Expect 18.1-19.5 Mbit/s (90 %); PM, CC and subset open; K-C alone (−0.7 %), "
                    "PCDC/bbr (−1 %) and 2 more are within reach.")
    assert "CC settled, PM open" in confidence_statement(
        1, 2, 0.9, pm_settled=False, cc_settled=True)


def test_a_campaign_stopped_by_its_budget_says_so():
    text = confidence_statement(8.0, 9.0, 0.9, pm_settled=True, cc_settled=False,
                                budget_spent=True)
    assert text == ("Expect 8.00-9.00 Mbit/s (90 %); PM settled, CC open; the probe budget ran "
                    "out first: the best measured so far.")


def test_numbers():
    assert format_rate(0.1423, 0.1481) == "0.142-0.148"
    assert format_rate(112.31, 112.38) == "112.3-112.4"  # digits until the ends differ
    assert format_rate(0.0, 3.2) == "0-3.20"
    assert format_relative(-0.021) == "−2 %"
    assert format_relative(0.125) == "+12 %"
    assert format_relative(-0.0071) == "−0.7 %"
    assert format_relative(0.0001) == "±0 %"


@pytest.mark.parametrize(("low", "high", "level", "match"), [
    (2.0, 1.0, 0.9, "above high"),
    (float("nan"), 1.0, 0.9, "finite"),
    (1.0, 2.0, 1.0, "confidence"),
])
def test_bad_pieces_are_refused(low, high, level, match):
    with pytest.raises(ValueError, match=match):
        confidence_statement(low, high, level, pm_settled=True, cc_settled=True)


@given(low=st.floats(0, 1e4), width=st.floats(0, 1e3), level=st.floats(0.5, 0.999),
       pm=st.booleans(), cc=st.booleans(), subset=st.none() | st.booleans())
def test_the_sentence_always_reads_the_same_way(low, width, level, pm, cc, subset):
    text = confidence_statement(low, low + width, level, pm_settled=pm, cc_settled=cc,
                                subset_settled=subset)
    assert text.startswith("Expect ") and text.endswith(".") and " Mbit/s (" in text
    lo, hi = (float(x) for x in text.split()[1].split("-"))
    assert lo <= hi
    assert ("subset" in text) == (subset is not None)
