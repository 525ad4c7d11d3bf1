"""The deployment guide's transport, for real: PostgreSQL that takes TCP clients over TLS only
(deploy/pg_hba.conf, the file docker-compose.tls.yml mounts) and Redis on a TLS-only port, reached
with the URLs docs/deploy.md and .env.example give a site host (sslmode=verify-full, rediss://
with ssl_cert_reqs=required). The migration runs over them, a worker started as compose's
control-worker is started takes a task over them and the task reads the database; a plain URL is
refused by both."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.private_servers import PrivatePostgres, PrivateRedis
from tests.support import wait_for

from .conftest import BIN

pytestmark = [pytest.mark.postgres, pytest.mark.broker]
REPO = Path(__file__).resolve().parents[2]


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture
def certificates(tmp_path) -> Path:
    """A CA and a server certificate for 127.0.0.1, as docs/deploy.md makes them."""
    tls = tmp_path / "tls"
    tls.mkdir()
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
             "ca.crt", "-days", "2", "-subj", "/CN=mpcoa test CA", cwd=tls)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out",
             "server.csr", "-subj", "/CN=127.0.0.1", cwd=tls)
    (tls / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "server.crt", "-days", "2", "-extfile", "san.ext", cwd=tls)
    return tls


@pytest.fixture
def tls_postgres(certificates):
    pg = PrivatePostgres()
    try:
        own = pg.root / "tls"
        own.mkdir()
        for name in ("server.crt", "server.key"):
            shutil.copy(certificates / name, own / name)
        shutil.copy(REPO / "deploy" / "pg_hba.conf", own / "pg_hba.conf")
        for path in (own, *own.iterdir()):
            shutil.chown(path, "postgres")
        (own / "server.key").chmod(0o600)
        pg.start("-c ssl=on", f"-c ssl_cert_file={own / 'server.crt'}",
                 f"-c ssl_key_file={own / 'server.key'}", f"-c hba_file={own / 'pg_hba.conf'}")
        # deploy/pg_hba.conf wants a password over TCP: set it over the local socket.
        subprocess.run(["runuser", "-u", "postgres", "--", str(pg.bin / "psql"), "-h",
                        str(pg.root), "-p", str(pg.port), "-d", "postgres", "-c",
                        "ALTER USER postgres PASSWORD 'tls-test-password'"],
                       check=True, capture_output=True, timeout=60)
        yield pg
    finally:
        pg.destroy()


@pytest.fixture
def tls_redis(certificates):
    redis = PrivateRedis(tls=certificates)
    try:
        redis.start()
        yield redis
    finally:
        redis.destroy()


def _urls(pg: PrivatePostgres, redis: PrivateRedis, tls: Path) -> tuple[str, str]:
    database = (f"postgresql+psycopg://postgres:tls-test-password@127.0.0.1:{pg.port}/postgres"
                f"?sslmode=verify-full&sslrootcert={tls / 'ca.crt'}")
    broker = (f"rediss://127.0.0.1:{redis.port}/0?ssl_cert_reqs=required"
              f"&ssl_ca_certs={tls / 'ca.crt'}")
    return database, broker


def _env(database: str, broker: str, data: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPCOA_")}
    env.update({"MPCOA_DATABASE_URL": database, "MPCOA_BROKER_URL": broker,
                "MPCOA_DATA_DIR": str(data)})
    return env


def test_the_guides_urls_carry_the_database_and_the_broker_over_tls(
        tls_postgres, tls_redis, certificates, tmp_path):
    database, broker = _urls(tls_postgres, tls_redis, certificates)
    env = _env(database, broker, tmp_path)
    subprocess.run([str(BIN / "mpcoa"), "db", "upgrade"], env=env, check=True,
                   capture_output=True, text=True, timeout=300)
    engine = sa.create_engine(database)
    try:
        with engine.connect() as conn:
            assert conn.execute(sa.text(
                "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")).scalar() is True
            assert conn.execute(sa.text("SELECT count(*) FROM campaigns")).scalar() == 0
    finally:
        engine.dispose()

    # Without TLS the server refuses the client (hostssl only), whatever its password.
    plain = sa.create_engine(database.split("?", 1)[0] + "?sslmode=disable")
    with pytest.raises(sa.exc.OperationalError, match=r"no pg_hba\.conf entry"), plain.connect():
        pass
    plain.dispose()

    # compose's control-worker command, over rediss:// and the TLS database.
    log = tmp_path / "worker.log"
    with open(log, "w") as out:
        worker = subprocess.Popen(
            [str(BIN / "celery"), "-A", "workers.app", "worker", "-Q", "mpcoa.control", "-P",
             "solo", "-n", f"tls-{os.getpid()}@%h", "--loglevel", "INFO"],
            env=env, stdout=out, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True)
    try:
        wait_for(lambda: "ready." in log.read_text(), 120, "the worker to connect over TLS")
        sender = subprocess.run(
            [sys.executable, "-c",
             "from workers.app import app; app.send_task('mpcoa.resume_campaigns',"
             " queue='mpcoa.control'); print('sent')"],
            env=env, cwd=REPO, capture_output=True, text=True, timeout=120)
        assert sender.returncode == 0 and "sent" in sender.stdout, sender.stderr
        wait_for(lambda: "mpcoa.resume_campaigns" in log.read_text()
                 and "succeeded" in log.read_text(), 120,
                 "the control task to run over the TLS broker and database")
    finally:
        os.killpg(worker.pid, 15)
        worker.wait(timeout=60)

    # A plain redis:// client on the TLS port gets no answer it can read.
    import redis

    with pytest.raises(redis.exceptions.ConnectionError):
        redis.Redis(host="127.0.0.1", port=tls_redis.port, socket_timeout=5).ping()
