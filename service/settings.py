"""Runtime settings, from the environment (prefix MPCOA_) or the operator's .env file (the
repository root's, or MPCOA_ENV_FILE's: never the current directory's).

With nothing set, mpcoa runs embedded: a SQLite file under the user's data directory and
in-process task execution, so that `mpcoa serve` works on a fresh machine with no server.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import secrets
from functools import lru_cache
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from probes import environment
from probes.base import MAX_PROBE_S
from probes.testbed.spec import TESTBED_NAME_PATTERN
from probes.tools.choice import AskedTool

from .probe_settings import ProbeSettings as ProbeSettings  # the probes' own, re-exported
from .probe_settings import probe_setting
from .settings_checks import (
    OPERATORS_ENV_FILE,
    OperatorsSettings,
    host_name,
    ip_literal,
    is_loopback,
    root_may_run,
)

log = logging.getLogger(__name__)

# Values that mean "nobody set this secret" (.env.example's and the old compose defaults, the
# full-stack FastAPI template's): refused in production, warned about locally.
PLACEHOLDER_SECRETS = frozenset({"", "change-me", "changeme", "changethis", "secret", "password"})


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "mpcoa"


class Settings(OperatorsSettings):
    model_config = SettingsConfigDict(env_prefix="MPCOA_", env_file=OPERATORS_ENV_FILE,
                                      extra="ignore")

    environment: Literal["local", "production"] = Field(
        default="local", description="production: refuse to start with placeholder secrets"
    )
    data_dir: Path = Field(default_factory=default_data_dir, description="SQLite file lives here")
    secret_key: SecretStr | None = Field(
        default=None,
        description="signs the dashboard's session cookies (32+ characters); unset locally: a "
        "random key kept in data_dir/secret_key",
    )
    flower_basic_auth: SecretStr | None = Field(
        default=None, description="user:password of Flower (docker-compose.yml passes it on)"
    )
    session_hours: float = Field(default=8.0, gt=0, le=24 * 30, description="dashboard login")
    database_url: str | None = Field(
        default=None,
        description="SQLAlchemy URL, e.g. postgresql+psycopg://mpcoa@db/mpcoa; "
        "unset: sqlite file in data_dir",
    )
    broker_url: str | None = Field(
        default=None, description="Celery broker URL (redis://...); unset: in-process execution"
    )
    reads_need_token: bool | None = Field(
        default=None, validate_default=False,
        description="GET endpoints need a token too (or the dashboard's session cookie); "
        "unset: yes, unless the server is the embedded kind (a SQLite file, no broker) and "
        "listens on a loopback address only",
    )
    allowed_hosts: str = Field(
        default="", max_length=4096,
        description="comma-separated Host names the API answers besides the loopback ones "
        "(localhost, 127.0.0.1, [::1]) and the address it is bound to: the name a reverse "
        "proxy or the sites reach it by; '*': any (a page on another site could then read it "
        "through DNS rebinding)",
    )
    auto_migrate: bool = Field(default=True, description="`mpcoa serve` upgrades the schema first")
    host: str = "127.0.0.1"
    # The reverse proxies (TLS terminators) whose X-Forwarded-Proto/-For are believed: comma-
    # separated addresses or networks, or "*". Behind one, the dashboard's login sees the
    # browser's https origin and sets a Secure cookie only when the proxy is listed here.
    forwarded_allow_ips: str = Field(default="127.0.0.1,::1", max_length=4096)
    port: int = Field(default=8000, ge=1, le=65535)
    db_pool_size: int = Field(default=10, ge=1, le=200)
    # The largest request body accepted (413 above it). Legitimate bodies are a few kB: an inline
    # topology with 2 x 16 ISPs and 256 RTTs is about 20 kB.
    max_body_bytes: int = Field(default=1_048_576, ge=1024, le=1_073_741_824)
    # Defaults of a campaign queued by POST /recommendations (the paper's plan, Section 4).
    campaign_ccs: list[str] = Field(
        default_factory=lambda: ["cubic", "olia", "hybla", "reno", "scalable", "vegas"])
    campaign_runs: int = Field(default=9, ge=1)
    campaign_duration_s: float = Field(default=30.0, gt=0)
    campaign_probe_seconds_budget: float | None = None
    campaign_buffer_grid_mib: list[float] | None = Field(
        default=None,
        description="unset: from the subflows' bandwidth-delay products when their RTTs are "
        "known, else the paper's 0.5..30 MiB in 0.5 MiB steps",
    )
    # auto: per (PM, CC) arm the paper's quadratic or a saturating curve, by AIC (reported).
    campaign_model_kind: str = Field(default="auto", pattern=r"^(paper|per-arm|saturating|auto)$")
    campaign_mode: str = Field(default="adaptive", pattern=r"^(grid|adaptive)$")
    # Omega's sign must be settled (its confidence interval excludes 0) before SP* is trusted:
    # the impact phase adds runs for a CC up to this many while the budget allows.
    impact_max_runs: int = Field(default=4, ge=1, le=50)
    impact_confidence: float = Field(default=0.95, gt=0, lt=1)
    # False: campaigns are queued and recorded but nothing runs them in this process or sends
    # them to Celery (API tests; a deployment that runs them with `mpcoa calibrate`).
    run_campaigns: bool = True
    # Probes: the tool, and what a failing probe gets before it is recorded as failed.
    iperf3_binary: str = "iperf3"
    # The campaigns' probe tool (a campaign's plan may name another): auto takes NetPerfMeter
    # 2.x where both sites have it, else iperf3 for bulk and the paced tool for streams.
    probe_tool: AskedTool = "auto"
    # Several emulated testbeds may run the same two sites (a demo beside an experiment): this
    # one is probed; unset, the first healthy testbed that has both sites.
    testbed: str | None = Field(default=None, pattern=TESTBED_NAME_PATTERN)
    probe_retries: int = Field(default=3, ge=0, le=20)
    probe_retry_backoff_s: float = Field(default=2.0, ge=0, le=600)
    # Celery: Redis hands a task nobody acknowledged to another worker after this long (its
    # worker died, or it still runs): a probe lasts at most half of it (longest_probe_s).
    broker_visibility_timeout_s: float = Field(default=600.0, ge=5)
    beat_interval_s: float = Field(default=60.0, ge=1)
    # With no broker the API process runs due schedules itself every beat_interval_s;
    # of several API processes on one database only the holder of the scheduler lease does. A
    # holder that dies is replaced once its lease ran out (unset: 3 x beat_interval_s).
    embedded_scheduler: bool = True
    # A scheduled recalibration first checks the last calibrated answer with a few probes and
    # only sweeps again when they drifted; false: every schedule sweeps.
    warm_recalibration: bool = True
    scheduler_lease_s: float | None = Field(default=None, ge=2, le=86400)
    # The probe lease: its holder renews it every lease_heartbeat_s while it measures; a killed
    # worker's lease runs out after lease_ttl_s and the next resume hands the campaign on.
    lease_ttl_s: float = Field(default=30.0, ge=2, le=3600)
    lease_heartbeat_s: float = Field(default=10.0, gt=0, le=600)
    # The fleet policy: a campaign gives its sites way to a busier site's
    # campaign only while that one asked for them within this many seconds (its executor
    # retries every few seconds; a dead one stops asking and stops holding anybody up).
    site_wait_fresh_s: float = Field(default=10.0, gt=0, le=600)
    # Two-sided probes (real sites): how long the sender waits for the receiver's server, and
    # how long past the probe's duration either side waits for the other before giving up.
    passive_ready_timeout_s: float = Field(default=30.0, gt=0, le=3600)
    two_sided_margin_s: float = Field(default=30.0, gt=0, le=3600)
    # A receiver site with no worker taking its passive side (restarting, or dead): the step
    # waits and is run again, for this long in all; then it is stored as failed, and the
    # campaign says which probe is missing and why.
    receiver_absent_timeout_s: float = Field(default=900.0, ge=0, le=86400)
    # A finished probe's result is stored again with a backoff for this long while the database
    # is away (a restart); past it the attempt fails and its probe runs again.
    store_retry_s: float = Field(default=60.0, ge=0, le=3600)
    # The largest socket buffer an apply writes to a host (MiB; the sysctls are C ints holding
    # twice it): an answer above it, or above what its campaign measured, is planned lower.
    apply_buffer_ceiling_mib: float = Field(default=128.0, gt=0, lt=1024)
    # The MPTCP health gate (`flows.campaign.mptcp_gate`): a calibration or an apply is refused
    # (409) while a site's blackhole lockout is in force, or once this many of the topology's
    # newest probes in a row fell back to TCP within the window (0: fallbacks never refuse).
    # The window is the kernel's own first lockout (net.mptcp.blackhole_timeout's default).
    mptcp_fallback_limit: int = Field(default=3, ge=0, le=1000)
    mptcp_fallback_window_s: float = Field(default=3600.0, gt=0, le=30 * 86400)
    # A hand-over owed for longer than this (the broker was down) is sent by the sweeper.
    redispatch_after_s: float = Field(default=5.0, ge=0, le=3600)
    # An apply or rollback still in flight this long after it started (a worker or the server
    # died, the broker was down throughout, a step hung) is settled by the sweeper from the
    # sites' journals. Longer than an apply plus its confirmation (at most 120 s) and than
    # broker_visibility_timeout_s, so a redelivered task gets its chance first.
    apply_deadline_s: float = Field(default=900.0, ge=5, le=86400)
    # For the killed-apply tests only: a site's applier stops after this many journal steps
    # and waits to be killed (`probes.site.apply`'s --hold-after). Never set in production.
    apply_hold_after_steps: int | None = Field(default=None, ge=1, le=64)
    # When a recalibration (a schedule's, or one a failover queued) gives a new answer and the
    # apply in force asked for it (`auto_reapply`), the new answer is applied through the same
    # plan and safety rules as an operator's apply. false: never; the new answer waits for an
    # operator. Only applies that opted in are ever re-applied: no surprise changes.
    reapply_on_recalibration: bool = True
    # A failover watcher that promotes a standby (a used path died) queues a recalibration of
    # the topology at once, with its schedule's parameters (a topology without an enabled
    # schedule is not recalibrated: the event says so).
    recalibrate_on_failover: bool = True

    @field_validator("forwarded_allow_ips")
    @classmethod
    def _proxy_addresses(cls, value: str) -> str:
        """Each entry an address, a network (normalised: uvicorn would silently take
        10.0.0.1/8 for a name nobody has) or '*'; empty: no proxy is believed."""
        entries = []
        for entry in (e.strip() for e in value.split(",")):
            if entry in ("", "*"):
                entries += [entry] if entry else []
                continue
            try:
                net = ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ValueError(f"{entry!r} is not an IP address or network (or '*')") from None
            entries.append(str(net) if "/" in entry else str(net.network_address))
        return ",".join(entries)

    @field_validator("iperf3_binary")
    @classmethod
    def _iperf3_root_may_run(cls, value: str) -> str:
        return root_may_run(value)

    @field_validator("database_url", "broker_url", "reads_need_token", mode="before")
    @classmethod
    def _empty_is_unset(cls, value):
        return None if value == "" else value

    @field_validator("allowed_hosts")
    @classmethod
    def _host_names(cls, value: str) -> str:
        """Each entry a host name, an IP literal ([::1] for IPv6), '*.domain' or '*'."""
        entries = [e.strip().lower() for e in value.split(",") if e.strip()]
        for entry in entries:
            if not host_name(entry):
                raise ValueError(f"{entry[:80]!r} is not a host name, an IP address ([...] for "
                                 "IPv6), *.domain or *")
        return ",".join(entries)

    @model_validator(mode="after")
    def _reads_need_token_by_default(self) -> Settings:
        """Reads show the sites' addresses, kernels and every measurement, and some cost CPU: a
        shared server (PostgreSQL or a broker: several hosts reach it), or any server that
        listens beyond loopback (`mpcoa serve --host 0.0.0.0`, the image's default), wants a
        token for them. The embedded demo (one SQLite file, on 127.0.0.1) stays open."""
        if self.reads_need_token is None:
            self.reads_need_token = not (self.is_single_host and is_loopback(self.host))
        return self

    @model_validator(mode="after")
    def _check_secrets(self) -> Settings:
        """In production every secret is real (the full-stack FastAPI template's
        `_check_default_secret`); locally a placeholder that is set is only a warning."""
        secrets_: list[tuple[str, str | None, int]] = []
        if self.database_url and not self.database_url.startswith("sqlite"):
            secrets_.append(("database password", urlsplit(self.database_url).password, 1))
        if self.broker_url:
            secrets_.append(("broker password", urlsplit(self.broker_url).password, 1))
        if self.flower_basic_auth is not None:
            auth = self.flower_basic_auth.get_secret_value()
            secrets_.append(("Flower password", auth.partition(":")[2], 1))
        if self.secret_key is not None:  # unset in production: the API refuses to start
            secrets_.append(("secret_key", self.secret_key.get_secret_value(), 32))
        if self.environment == "production":
            problems = [p for w, v, n in secrets_ if (p := _placeholder(w, v, n))]
            if problems:
                raise ValueError("refusing to start in production: " + "; ".join(problems))
        for what, value, length in secrets_:
            problem = _placeholder(what, value, length) if value is not None else None
            if problem:
                log.warning("%s (acceptable for local use only)", problem)
        return self

    @model_validator(mode="after")
    def _check_probe_task_fits_redelivery(self) -> Settings:
        """With a broker, what a probe's task spends besides measuring should fit in the half
        of the visibility timeout that `longest_probe_s` leaves it (a warning: a task that
        outlasts it is redelivered, and the copy finds the lease taken and does nothing)."""
        if self.broker_url and self.probe_task_overhead_s > self.longest_probe_s:
            log.warning(
                "a probe's task may spend %g s besides measuring (passive_ready_timeout_s + "
                "two_sided_margin_s + store_retry_s), more than the %g s that "
                "broker_visibility_timeout_s %g s leaves it: raise broker_visibility_timeout_s",
                self.probe_task_overhead_s, self.longest_probe_s,
                self.broker_visibility_timeout_s)
        return self

    @property
    def probe_task_overhead_s(self) -> float:
        """What a probe's task spends besides measuring, at most: the other side's start and
        end (two-sided probes) and the store's retries."""
        return self.passive_ready_timeout_s + self.two_sided_margin_s + self.store_retry_s

    @property
    def longest_probe_s(self) -> float:
        """The longest probe a campaign may run. With a broker, half the visibility timeout:
        the probe's task, set-up, tear-down and store included, ends before the broker hands it
        to a second worker (which would find the lease taken: it cannot measure, but it is
        not what a redelivery is for). The visibility timeout is not raised from the longest
        probe instead: it delays every task's redelivery after a worker's death (applies and
        rollbacks too), and RabbitMQ closes a delivery left unacknowledged past its
        consumer_timeout (30 min by default) whatever it is set to. Without a broker nothing
        redelivers: the probes' own bound."""
        if not self.broker_url:
            return MAX_PROBE_S
        return min(MAX_PROBE_S, self.broker_visibility_timeout_s / 2)

    def session_secret(self) -> bytes:
        """The key of the dashboard's session cookies: the setting, else (not in production)
        one random key per data directory (shared by the processes of one `mpcoa serve
        --workers N`)."""
        if self.secret_key is not None:
            return self.secret_key.get_secret_value().encode()
        if self.environment == "production":  # only the API signs: a site host has no key
            raise ValueError("refusing to start in production: secret_key is unset (set "
                             "MPCOA_SECRET_KEY, 32+ random characters, on the control host)")
        path = self.data_dir / "secret_key"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_urlsafe(48))
        return path.read_text().strip().encode()

    @property
    def sqlite_path(self) -> Path:
        return self.data_dir / "mpcoa.sqlite3"

    @property
    def effective_database_url(self) -> str:
        return self.database_url or f"sqlite:///{self.sqlite_path}"

    @property
    def is_embedded(self) -> bool:
        return self.database_url is None

    @property
    def is_single_host(self) -> bool:
        """A SQLite file and no broker: nothing but this host's processes share the data."""
        return self.effective_database_url.startswith("sqlite") and not self.broker_url

    @property
    def trusted_hosts(self) -> list[str]:
        """The Host names the API answers (Starlette's TrustedHostMiddleware): loopback's, the
        bound address when it is one address, and `allowed_hosts`. A page on another site whose
        name was rebound to this host sends its own name: refused, whatever the read rule."""
        names = ["localhost", "127.0.0.1", "[::1]"]
        bound = self.host.strip("[]")
        if ip_literal(bound) and not ipaddress.ip_address(bound).is_unspecified:
            address = ipaddress.ip_address(bound)
            names.append(f"[{address}]" if address.version == 6 else str(address))
        extra = [e for e in self.allowed_hosts.split(",") if e]
        return list(dict.fromkeys(names + extra))

    @property
    def scheduler_lease_ttl_s(self) -> float:
        """The embedded scheduler's lease: at least two beats long, or one slow tick loses it."""
        ttl = self.scheduler_lease_s or 3.0 * self.beat_interval_s
        return max(ttl, 2.0 * self.beat_interval_s)

    @property
    def executor(self) -> str:
        """How queued campaigns run: 'celery' with a broker, else 'inprocess'."""
        return "celery" if self.broker_url else "inprocess"


def _placeholder(what: str, value: str | None, min_length: int = 1) -> str | None:
    if value is None or value.strip().lower() in PLACEHOLDER_SECRETS:
        return f"{what} is empty or a placeholder; set a real one"
    if len(value) < min_length:
        return f"{what} is shorter than {min_length} characters"
    return None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()


environment.install(probe_setting)
