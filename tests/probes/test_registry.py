"""The registry of probe tools: the shipped ones under their one name, what a registration must
say, and the choice taking a registered tool in its order, askable by name only if it says so."""

from __future__ import annotations

from typing import Any

import pytest

from probes.base import CapabilityError
from probes.tools.choice import askable, choose, inventory, without_inventory
from probes.tools.registry import TOOLS, ProbeTool, register, unregister

DEBIAN = {"iperf3": "3.12", "mptcpize": "present", "netperfmeter": None, "paced": "1"}


class Toy(ProbeTool):
    name = "toy"
    measures = ("bulk",)
    preference = 15  # between NetPerfMeter and iperf3
    install = "install the toy"

    def found(self, binary: str | None = None) -> dict[str, str | None]:
        return {"toy": binary or "0.1"}

    def backend(self, pair: Any, **options: Any):
        raise AssertionError("not measured here")


@pytest.fixture
def toy():
    tool = register(Toy())
    try:
        yield tool
    finally:
        unregister(tool.name)


def test_the_shipped_tools_one_name_each():
    assert list(TOOLS) == ["iperf3", "netperfmeter", "paced"]
    assert askable() == ("auto", "netperfmeter", "iperf3")  # the paced tool is never asked
    assert set(inventory()["tools"]) == {"iperf3", "mptcpize", "netperfmeter", "paced"}
    assert without_inventory("bulk") == "iperf3" and without_inventory("paced") == "paced"
    with pytest.raises(CapabilityError, match="unknown"):
        TOOLS["mpcoa-paced"]


@pytest.mark.parametrize(("change", "said"), [
    ({"name": "Toy!"}, "name"), ({"name": "auto"}, "name"), ({"name": "iperf3"}, "already"),
    ({"measures": ()}, "measures"), ({"measures": ("goodput",)}, "measures"),
])
def test_a_registration_must_be_well_formed(change, said):
    bad = type("Bad", (Toy,), change)()
    with pytest.raises(ValueError, match=said):
        register(bad)
    assert list(TOOLS) == ["iperf3", "netperfmeter", "paced"]


def test_a_registered_tool_is_found_asked_and_chosen_in_its_order(toy):
    assert askable() == ("auto", "netperfmeter", "toy", "iperf3")
    assert inventory(toy="0.2")["tools"]["toy"] == "0.2"
    with_toy = {**DEBIAN, "toy": "0.1"}
    assert choose("auto", "bulk", [with_toy, with_toy]) == "toy"  # before iperf3 in the order
    assert choose("auto", "bulk", [with_toy, DEBIAN]) == "iperf3"  # on one site only
    assert choose("iperf3", "bulk", [with_toy, with_toy]) == "iperf3"
    # the toy measures no frame: a stream's probes go to the tools after it
    assert choose("toy", "paced", [with_toy, with_toy]) == "paced"
    with pytest.raises(CapabilityError, match="probe_tool toy: not on both sites; install the toy"):
        choose("toy", "bulk", [with_toy, DEBIAN])
