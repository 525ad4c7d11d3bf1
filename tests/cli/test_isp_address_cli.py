"""`mpcoa site add --isp LABEL:DOWN:UP[:NAME]@ADDRESS`: an ISP's address, IPv4 or IPv6, stored as
the API stores it; anything else refused with one line and status 2."""

from __future__ import annotations

import json

from tests.cli.test_inventory_cli import _env, _in_process, _refused


def test_site_add_with_ipv6_addresses(database_url, tmp_path):
    env = _env(database_url, tmp_path)
    added = _in_process(env, "site", "add", "SRL", "--isp", "K:100000:40000:Kabelnett@2001:DB8::2",
                        "--isp", "T:50000:10000@2001:db8:1::2", "--json")
    assert added.returncode == 0, added.stderr
    srl = json.loads(added.stdout)
    assert [(i["label"], i["name"], i["address"]) for i in srl["isps"]] == [
        ("K", "Kabelnett", "2001:db8::2"), ("T", "T", "2001:db8:1::2")]
    text = _in_process(env, "site", "list")
    assert "@2001:db8::2" in text.stdout and "@2001:db8:1::2" in text.stdout, text.stdout
    _refused(_in_process(env, "site", "add", "X", "--isp", "K:1:1@nowhere"), 2,
             "not an IPv4 or IPv6 address")
    _refused(_in_process(env, "site", "add", "X", "--isp", "K:1:1@fe80::1"), 2, "link-local")
    _refused(_in_process(env, "site", "add", "X", "--isp", "K:1:1@10.0.0.1",
                         "--isp", "T:1:1@2001:db8::9"), 2, "both families")
