"""Several sysctls read in one process, as each probe records them: the same values as one
`sysctl -n` per key, None for a key this kernel lacks (no root needed to read)."""

from probes.netns import sysctl_get, sysctl_get_many


def test_many_keys_in_one_read_agree_with_one_read_each():
    keys = ("net.ipv4.tcp_rmem", "net.ipv4.tcp_available_congestion_control",
            "net.core.rmem_max", "net.mptcp.no_such_key")
    many = sysctl_get_many(None, keys)
    assert list(many) == list(keys)
    assert many["net.mptcp.no_such_key"] is None
    for key in keys[:3]:
        assert many[key] == sysctl_get(None, key) and many[key]
    assert "\t" in many["net.ipv4.tcp_rmem"]  # three numbers, as the kernel prints them
