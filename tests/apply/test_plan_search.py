"""The planner's search for the largest product inside an answer's subflows: the same pick as
trying every combination of local labels in turn (the definition), on random small cases."""

from __future__ import annotations

from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.flows.applying import largest_product as ap


def exhaustive(used: list[str], local: list[str], remote: list[str]):
    """Every subset of the local labels, smallest first, in combinations() order; the first of
    the best (area, then the lowest sum of the subflows' ranks in `used`) wins."""
    pairs = set(used)
    rank = {s: i for i, s in enumerate(used)}
    cand = [lo for lo in local if any(f"{lo}-{r}" in pairs for r in remote)]
    best, best_ls, best_rs = (0, 0), [], []
    for k in range(1, len(cand) + 1):
        for ls in combinations(cand, k):
            rs = [r for r in remote if all(f"{lo}-{r}" in pairs for lo in ls)]
            if not rs:
                continue
            score = (len(ls) * len(rs), -sum(rank[f"{lo}-{r}"] for lo in ls for r in rs))
            if not best_ls or score > best:
                best, best_ls, best_rs = score, list(ls), rs
    return best_ls, best_rs


@st.composite
def answers(draw):
    local = [f"L{i}" for i in range(draw(st.integers(1, 6)))]
    remote = [f"R{j}" for j in range(draw(st.integers(1, 6)))]
    every = [f"{lo}-{r}" for lo in local for r in remote]
    # dense subsets too: that is where many products tie on their area
    used = draw(st.lists(st.sampled_from(every), unique=True, max_size=len(every)))
    return used, draw(st.permutations(local)), draw(st.permutations(remote))


@pytest.mark.slow
@settings(max_examples=600, deadline=None)
@given(answers())
def test_the_vectorised_search_picks_what_trying_every_subset_picks(case):
    used, local, remote = case
    assert ap.largest_product(used, local, remote) == exhaustive(used, local, remote)


def test_ties_on_area_and_rank_go_to_the_fewest_then_first_local_labels():
    # U-C + K-D and the reverse orders tie on everything but the labels' order
    local, remote = ["U", "K", "T"], ["C", "D"]
    for used in (["U-C", "K-C", "T-D", "U-D"], ["K-C", "K-D", "U-C", "U-D", "T-C", "T-D"],
                 ["T-C", "U-D", "K-C", "K-D", "U-C"]):
        assert ap.largest_product(used, local, remote) == exhaustive(used, local, remote)


def test_sixteen_by_sixteen_full_and_sparse():
    local = [f"L{i}" for i in range(16)]
    remote = [f"R{j}" for j in range(16)]
    every = [f"{lo}-{r}" for lo in local for r in remote]
    assert ap.largest_product(every, local, remote) == (local, remote)
    diagonal = [f"L{i}-R{i}" for i in range(16)]
    # sixteen products of area 1 tie; the first in the answer's order wins
    assert ap.largest_product(diagonal[::-1], local, remote) == (["L15"], ["R15"])
