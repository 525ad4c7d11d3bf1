"""The port triple P-1, P, P+1: chosen at random, free of every socket in the namespaces."""

from __future__ import annotations

import random
import socket
from typing import ClassVar

import pytest

from probes.base import ProbeError
from probes.tools.ports import PORT_HIGH, PORT_LOW, choose_port_triple, pick_triple, used_ports


def test_pick_triple_avoids_every_neighbour():
    rng = random.Random(7)
    for _ in range(200):
        used = set(rng.sample(range(100, 130), 12))
        p = pick_triple(used, rng, low=101, high=128)
        assert not {p - 1, p, p + 1} & used


def test_pick_triple_gives_up_with_a_clear_error():
    with pytest.raises(ProbeError, match="no free port triple"):
        pick_triple(set(range(0, 200)), random.Random(1), low=50, high=100)
    with pytest.raises(ProbeError, match="port range"):
        pick_triple(set(), random.Random(1), low=0, high=70000)


@pytest.mark.parametrize("kind", [socket.SOCK_STREAM, socket.SOCK_DGRAM])
def test_used_ports_sees_a_real_socket_and_the_choice_avoids_it(kind):
    port = pick_triple(used_ports(None), random.Random())
    s = socket.socket(socket.AF_INET, kind)
    try:
        s.bind(("127.0.0.1", port))
        if kind == socket.SOCK_STREAM:
            s.listen()
        assert port in used_ports(None)

        class Offers(random.Random):  # offers the taken port and its neighbours first
            seq: ClassVar[list[int]] = [port, port + 1, port - 1]

            def randint(self, a, b):
                return self.seq.pop(0) if self.seq else super().randint(a, b)

        p = choose_port_triple([None], Offers())
        assert PORT_LOW <= p <= PORT_HIGH and abs(p - port) > 1
    finally:
        s.close()
