"""Run inside a private mount namespace (`unshare --mount --propagation private`) by
test_journal_full_fs: a tmpfs of a few hundred KiB as the applier's state directory, an apply,
the tmpfs filled to the last byte, then what the test asks; prints one JSON line. The tmpfs
goes with the namespace when this process ends, whatever happens."""

from __future__ import annotations

import errno
import json
import subprocess
import sys
from pathlib import Path

from probes.site import apply as siteapply
from tests.apply.sitestate import site_state


def _fill(directory: Path) -> int:
    """Write until the filesystem refuses: returns the bytes written."""
    written = 0
    with open(directory / "filler", "wb", buffering=0) as f:
        try:
            while True:
                written += f.write(b"\xff" * 512)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
    return written


def main(mountpoint: str, ns: str, targets_file: str) -> None:
    root = Path(mountpoint)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(root)], check=True)
    targets = json.loads(Path(targets_file).read_text())
    before = site_state(ns)
    siteapply.apply(targets["A"], ns=ns, root=root, label="apply 1")
    filled = _fill(root)
    try:
        (root / "one-more").write_bytes(b"x" * 4096)
        full = False
    except OSError:
        full = True
    # a second apply on the full filesystem: the slots are allocated already
    second = siteapply.apply(targets["B"], ns=ns, root=root, label="apply 2")
    holds_b = site_state(ns)["sysctls"]["net.ipv4.tcp_rmem"] == \
        targets["B"]["sysctls"]["net.ipv4.tcp_rmem"]
    out = siteapply.rollback(ns=ns, root=root, label="apply 2")
    print(json.dumps({"filled": filled, "full": full, "second": second["phase"],
                      "holds_b": holds_b, "outcome": out["outcome"],
                      "restored": site_state(ns) == before,
                      "journal": siteapply.read_journal(siteapply.state_dir(ns, root))["phase"]}))


if __name__ == "__main__":
    main(*sys.argv[1:])
