"""A minimal MPTCP userspace path manager (generic netlink ``mptcp_pm``), for subflow control.

Why: the in-kernel path manager can mark a *local address* as backup (every subflow from it),
not one (local ISP, remote ISP) subflow. The userspace path manager (``net.mptcp.path_manager =
userspace``) creates exactly the subflows we ask for and sets the backup flag per subflow
(local address + remote address), so an excluded subflow stays established but the default
scheduler sends no payload on it while a non-backup subflow is available.

Run inside the sender's namespace: ``python -m probes.tools.upm CONFIG.json``. Addresses are IPv4 or
IPv6 (each subflow's two of one family, as MPTCP joins them). CONFIG::

    {"dport": 5201, "ready_file": "...",
     "subflows": [{"local": "10.1.0.1", "local_id": 1, "remote": "10.2.0.1", "backup": false}, ...]}

For every new client connection to ``dport`` it creates the missing subflows (with the backup
flag where asked: the MP_JOIN then carries the backup bit) once the connection is established.
Events are printed as JSON lines.

Optional phases (one long connection whose subflows are switched to backup and back, the paper's
single-connection impact method)::

    "anchor_connection": 2,
    "phases": [{"at_s": 8.0, "backup": [["10.1.0.1", "10.2.0.1"]]}, ...]

Once the ``anchor_connection``-th connection to ``dport`` is established (iperf3's data
connection follows its control connection), each phase's flags are set ``at_s`` seconds later on
every connection handled so far: the listed (local, remote) subflows backup, every other one not.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import socket
import struct
import sys
import threading
import time
from typing import Any

from probes.tools.addressing import family, normalized, unmapped

NETLINK_GENERIC = 16
SOL_NETLINK = 270
NETLINK_ADD_MEMBERSHIP = 1
NETLINK_EXT_ACK = 11
GENL_ID_CTRL = 0x10
CTRL_CMD_GETFAMILY = 3
CTRL_ATTR_FAMILY_ID = 1
CTRL_ATTR_FAMILY_NAME = 2
CTRL_ATTR_MCAST_GROUPS = 7
CTRL_ATTR_MCAST_GRP_NAME = 1
CTRL_ATTR_MCAST_GRP_ID = 2
NLM_F_REQUEST = 1
NLM_F_ACK = 4
NLMSG_ERROR = 2
NLMSG_DONE = 3
NLA_F_NESTED = 0x8000

# include/uapi/linux/mptcp_pm.h
MPTCP_PM_NAME = "mptcp_pm"
MPTCP_PM_EV_GRP_NAME = "mptcp_pm_events"
MPTCP_PM_VER = 1
MPTCP_PM_CMD_SET_FLAGS = 7
MPTCP_PM_CMD_SUBFLOW_CREATE = 10
MPTCP_PM_ATTR_ADDR = 1
MPTCP_PM_ATTR_TOKEN = 4
MPTCP_PM_ATTR_ADDR_REMOTE = 6
MPTCP_PM_ADDR_ATTR_FAMILY = 1
MPTCP_PM_ADDR_ATTR_ID = 2
MPTCP_PM_ADDR_ATTR_ADDR4 = 3
MPTCP_PM_ADDR_ATTR_ADDR6 = 4
MPTCP_PM_ADDR_ATTR_PORT = 5
MPTCP_PM_ADDR_ATTR_FLAGS = 6
MPTCP_PM_ADDR_FLAG_BACKUP = 1 << 2

EVENTS = {1: "created", 2: "established", 3: "closed", 6: "announced", 7: "removed",
          10: "sub_established", 11: "sub_closed", 13: "sub_priority"}
ATTR_TOKEN, ATTR_FAMILY, ATTR_LOC_ID, ATTR_REM_ID = 1, 2, 3, 4
ATTR_SADDR4, ATTR_SADDR6, ATTR_DADDR4, ATTR_DADDR6 = 5, 6, 7, 8
ATTR_SPORT, ATTR_DPORT, ATTR_BACKUP = 9, 10, 11
ATTR_ERROR, ATTR_SERVER_SIDE = 12, 18


class NetlinkError(OSError):
    pass


def _attr(kind: int, payload: bytes) -> bytes:
    ln = 4 + len(payload)
    return struct.pack("=HH", ln, kind) + payload + b"\0" * ((4 - ln % 4) % 4)


def _parse_attrs(data: bytes) -> dict[int, bytes]:
    out: dict[int, bytes] = {}
    off = 0
    while off + 4 <= len(data):
        ln, kind = struct.unpack_from("=HH", data, off)
        if ln < 4:
            break
        out[kind & 0x3FFF] = data[off + 4 : off + ln]
        off += (ln + 3) & ~3
    return out


def _extack(msg: bytes, flags: int) -> str:
    """The kernel's error text (NLMSGERR_ATTR_MSG) from an NLMSG_ERROR payload, if any."""
    if not flags & 0x200:  # NLM_F_ACK_TLVS
        return ""
    orig_len = struct.unpack_from("=I", msg, 4)[0] if len(msg) >= 8 else 16
    off = 4 + (16 if flags & 0x100 else orig_len)  # NLM_F_CAPPED: only the header is echoed
    text = _parse_attrs(msg[off:]).get(1, b"")
    return text.rstrip(b"\0").decode(errors="replace")


class GenlSocket:
    """Just enough generic netlink for the mptcp_pm family."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_GENERIC)
        self.sock.bind((0, 0))
        with contextlib.suppress(OSError):
            self.sock.setsockopt(SOL_NETLINK, NETLINK_EXT_ACK, 1)
        self.seq = int(time.time()) & 0xFFFF
        self.family_id, self.groups = self._resolve(MPTCP_PM_NAME)

    def _send(self, msg_type: int, cmd: int, version: int, attrs: bytes, flags: int) -> int:
        self.seq += 1
        body = struct.pack("=BBH", cmd, version, 0) + attrs
        hdr = struct.pack("=IHHII", 16 + len(body), msg_type, flags, self.seq, 0)
        self.sock.send(hdr + body)
        return self.seq

    def _recv_reply(self, seq: int) -> list[bytes]:
        """Payloads (after the genl header) of the answer to ``seq``; raises on an error."""
        out = []
        while True:
            data = self.sock.recv(65536)
            off = 0
            while off + 16 <= len(data):
                ln, typ, _fl, mseq, _pid = struct.unpack_from("=IHHII", data, off)
                msg = data[off + 16 : off + ln]
                off += (ln + 3) & ~3
                if mseq != seq:
                    continue
                if typ == NLMSG_ERROR:
                    err = struct.unpack_from("=i", msg)[0]
                    if err:
                        raise NetlinkError(-err, f"{os.strerror(-err)} {_extack(msg, _fl)}".strip())
                    return out
                if typ == NLMSG_DONE:
                    return out
                out.append(msg[4:])
            if not out:
                continue
            return out

    def _resolve(self, name: str) -> tuple[int, dict[str, int]]:
        seq = self._send(GENL_ID_CTRL, CTRL_CMD_GETFAMILY, 1,
                         _attr(CTRL_ATTR_FAMILY_NAME, name.encode() + b"\0"), NLM_F_REQUEST)
        msgs = self._recv_reply(seq)
        if not msgs:
            raise NetlinkError(errno.ENOENT, f"generic netlink family {name} not found")
        a = _parse_attrs(msgs[0])
        fam = struct.unpack("=H", a[CTRL_ATTR_FAMILY_ID][:2])[0]
        groups = {}
        for g in _parse_attrs(a.get(CTRL_ATTR_MCAST_GROUPS, b"")).values():
            ga = _parse_attrs(g)
            gname = ga[CTRL_ATTR_MCAST_GRP_NAME].rstrip(b"\0").decode()
            groups[gname] = struct.unpack("=I", ga[CTRL_ATTR_MCAST_GRP_ID][:4])[0]
        return fam, groups

    def request(self, cmd: int, attrs: bytes) -> None:
        seq = self._send(self.family_id, cmd, MPTCP_PM_VER, attrs, NLM_F_REQUEST | NLM_F_ACK)
        self._recv_reply(seq)

    def subscribe(self, group: str) -> None:
        self.sock.setsockopt(SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, self.groups[group])

    def events(self):
        """Yield (event name, attrs dict) from the subscribed groups."""
        while True:
            data = self.sock.recv(65536)
            off = 0
            while off + 16 <= len(data):
                ln, typ, _fl, _seq, _pid = struct.unpack_from("=IHHII", data, off)
                msg = data[off + 16 : off + ln]
                off += (ln + 3) & ~3
                if typ != self.family_id or len(msg) < 4:
                    continue
                yield EVENTS.get(msg[0], str(msg[0])), _parse_attrs(msg[4:])


def addr_attr(kind: int, address: str, *, addr_id: int | None = None, port: int | None = None,
              flags: int | None = None) -> bytes:
    """An address attribute of either family (the kernel takes the family from FAMILY and the
    address from ADDR4 or ADDR6)."""
    fam = family(address)
    inner = _attr(MPTCP_PM_ADDR_ATTR_FAMILY, struct.pack("=H", fam))
    if addr_id is not None:
        inner += _attr(MPTCP_PM_ADDR_ATTR_ID, struct.pack("=B", addr_id))
    if fam == socket.AF_INET6:
        inner += _attr(MPTCP_PM_ADDR_ATTR_ADDR6, socket.inet_pton(fam, address))
    else:
        inner += _attr(MPTCP_PM_ADDR_ATTR_ADDR4, socket.inet_aton(address))
    if port is not None:
        inner += _attr(MPTCP_PM_ADDR_ATTR_PORT, struct.pack("=H", port))
    if flags is not None:
        inner += _attr(MPTCP_PM_ADDR_ATTR_FLAGS, struct.pack("=I", flags))
    return _attr(kind | NLA_F_NESTED, inner)


def token_attr(token: int) -> bytes:
    return _attr(MPTCP_PM_ATTR_TOKEN, struct.pack("=I", token))


def decode_event(attrs: dict[int, bytes]) -> dict[str, Any]:
    ev: dict[str, Any] = {}
    if ATTR_TOKEN in attrs:
        ev["token"] = struct.unpack("=I", attrs[ATTR_TOKEN][:4])[0]
    for k, name in ((ATTR_SADDR4, "saddr"), (ATTR_DADDR4, "daddr")):
        if k in attrs:
            ev[name] = socket.inet_ntoa(attrs[k][:4])
    for k, name in ((ATTR_SADDR6, "saddr"), (ATTR_DADDR6, "daddr")):
        if k in attrs:  # an IPv4 subflow of an IPv6 socket comes as ::ffff:a.b.c.d
            ev[name] = unmapped(socket.inet_ntop(socket.AF_INET6, attrs[k][:16]))
    for k, name in ((ATTR_SPORT, "sport"), (ATTR_DPORT, "dport")):
        if k in attrs:
            ev[name] = struct.unpack("!H", attrs[k][:2])[0]
    for k, name in ((ATTR_LOC_ID, "loc_id"), (ATTR_REM_ID, "rem_id"), (ATTR_BACKUP, "backup"),
                    (ATTR_SERVER_SIDE, "server_side"), (ATTR_ERROR, "error")):
        if k in attrs:
            ev[name] = attrs[k][0]
    return ev


def run(config: dict[str, Any]) -> int:
    dport = int(config["dport"])
    # as the kernel's events print them, so the connection's first subflow is recognised
    subflows = [{**s, "local": normalized(s["local"]), "remote": normalized(s["remote"])}
                for s in config["subflows"]]
    backups = {(s["local"], s["remote"]) for s in subflows if s.get("backup")}
    nl = GenlSocket()
    nl.subscribe(MPTCP_PM_EV_GRP_NAME)
    cmd = GenlSocket()
    handled: set[int] = set()

    def log(obj: dict[str, Any]) -> None:
        print(json.dumps(obj), flush=True)

    phases = list(config.get("phases") or [])
    anchor = int(config.get("anchor_connection", 1))
    state = {(s["local"], s["remote"]): bool(s.get("backup")) for s in subflows}
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    if config.get("ready_file"):
        with open(config["ready_file"], "w", encoding="ascii") as f:
            f.write(str(os.getpid()))
    for name, attrs in nl.events():
        ev = decode_event(attrs)
        ev["event"] = name
        ev["t"] = time.time()
        log(ev)
        token = ev.get("token")
        if token is None or ev.get("server_side"):
            continue
        if name == "established" and ev.get("dport") == dport and token not in handled:
            handled.add(token)
            initial = (ev.get("saddr"), ev.get("daddr"))
            for s in subflows:
                if (s["local"], s["remote"]) == initial:
                    continue
                flags = MPTCP_PM_ADDR_FLAG_BACKUP if s.get("backup") else 0
                try:
                    cmd.request(
                        MPTCP_PM_CMD_SUBFLOW_CREATE,
                        token_attr(token)
                        + addr_attr(MPTCP_PM_ATTR_ADDR, s["local"], addr_id=s["local_id"],
                                    flags=flags)
                        + addr_attr(MPTCP_PM_ATTR_ADDR_REMOTE, s["remote"], port=dport),
                    )
                    log({"action": "subflow_create", "token": token, **s})
                except OSError as exc:
                    log({"action": "subflow_create", "token": token, "error": str(exc), **s})
            if initial in backups:
                _set_backup(cmd, token, *initial, ev.get("sport"), dport, log)
            if phases and len(handled) == anchor:
                threading.Thread(target=_run_phases, daemon=True,
                                 args=(phases, sorted(handled), state, dport, log)).start()
    return 0


def _run_phases(phases: list[dict[str, Any]], tokens: list[int],
                state: dict[tuple[str, str], bool], dport: int, log) -> None:
    """Set each phase's backup flags at its time after the anchor connection (own socket: the
    event loop's sockets are not shared between threads)."""
    nl = GenlSocket()
    t0 = time.monotonic()
    log({"action": "phases_anchor", "t": time.time(), "tokens": tokens})
    for k, phase in enumerate(phases):
        time.sleep(max(0.0, t0 + float(phase["at_s"]) - time.monotonic()))
        backup = {(normalized(lo), normalized(re_)) for lo, re_ in phase.get("backup", [])}
        for (lo, re_), was in sorted(state.items()):
            want = (lo, re_) in backup
            if want == was:
                continue
            errors = []
            for token in tokens:
                try:
                    nl.request(
                        MPTCP_PM_CMD_SET_FLAGS,
                        token_attr(token)
                        + addr_attr(MPTCP_PM_ATTR_ADDR, lo,
                                    flags=MPTCP_PM_ADDR_FLAG_BACKUP if want else 0)
                        + addr_attr(MPTCP_PM_ATTR_ADDR_REMOTE, re_, port=dport),
                    )
                except OSError as exc:
                    errors.append(f"token {token}: {exc}")
            state[(lo, re_)] = want
            log({"action": "phase_flags", "phase": phase.get("phase", k), "t": time.time(),
                 "local": lo, "remote": re_, "backup": want,
                 **({"errors": errors} if errors else {})})


def _set_backup(cmd: GenlSocket, token: int, local: str, remote: str, sport: int | None,
                dport: int | None, log) -> None:
    try:
        cmd.request(
            MPTCP_PM_CMD_SET_FLAGS,
            token_attr(token)
            + addr_attr(MPTCP_PM_ATTR_ADDR, local, port=sport, flags=MPTCP_PM_ADDR_FLAG_BACKUP)
            + addr_attr(MPTCP_PM_ATTR_ADDR_REMOTE, remote, port=dport),
        )
        log({"action": "set_backup", "token": token, "local": local, "remote": remote})
    except OSError as exc:
        log({"action": "set_backup", "token": token, "local": local, "remote": remote,
             "error": str(exc)})


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m probes.tools.upm CONFIG.json", file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as f:
        return run(json.load(f))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
