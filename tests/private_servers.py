"""Servers of a test's own, never the machine's shared ones: a PostgreSQL (initdb + pg_ctl) and a
Redis on free ports, which a test may stop and start again to cause a real outage."""

from __future__ import annotations

import glob
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.support import free_port, listening, real_clock_env, wait_for


class PrivatePostgres:
    """initdb + pg_ctl as the postgres user (the server refuses root), on a free port."""

    def __init__(self) -> None:
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
        assert found, "PostgreSQL's server binaries are not installed (/usr/lib/postgresql)"
        self.bin = Path(found[-1]).parent
        self.root = Path(tempfile.mkdtemp(prefix="mpcoa-pg-"))
        self.root.chmod(0o755)
        self.data = self.root / "data"
        self.port = free_port()
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"
        shutil.chown(self.root, "postgres")
        self._as_postgres([str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust",
                           "-U", "postgres", "--no-sync"])

    def _as_postgres(self, argv: list[str]) -> None:
        subprocess.run(["runuser", "-u", "postgres", "--", *argv], check=True,
                       capture_output=True, timeout=120)

    def start(self, *extra: str) -> None:
        """`extra`: more server options (`-c name=value`), e.g. TLS."""
        opts = " ".join([f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1",
                         "-c fsync=off", *extra])
        self._as_postgres([str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", opts, "-w",
                           "-l", str(self.root / "log"), "start"])

    def stop(self) -> None:
        self._as_postgres([str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w",
                           "stop"])

    def destroy(self) -> None:
        subprocess.run(["runuser", "-u", "postgres", "--", str(self.bin / "pg_ctl"), "-D",
                        str(self.data), "-m", "immediate", "-w", "stop"],
                       capture_output=True, timeout=60, check=False)
        shutil.rmtree(self.root, ignore_errors=True)


class PrivateRedis:
    """redis-server on a free port with an append-only file: a restart keeps queued tasks.
    `tls`: the port speaks TLS only, with `tls`'s server.crt/server.key (no plain port)."""

    def __init__(self, tls: Path | None = None) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="mpcoa-redis-"))
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.tls = tls
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        ports = ["--port", str(self.port)] if self.tls is None else [
            "--port", "0", "--tls-port", str(self.port), "--tls-cert-file",
            str(self.tls / "server.crt"), "--tls-key-file", str(self.tls / "server.key"),
            "--tls-ca-cert-file", str(self.tls / "ca.crt"), "--tls-auth-clients", "no"]
        self.proc = subprocess.Popen(
            ["redis-server", *ports, "--bind", "127.0.0.1", "--dir",
             str(self.dir), "--appendonly", "yes", "--save", ""],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=real_clock_env())
        wait_for(lambda: listening(self.port), 20, "redis to listen")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=20)

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
