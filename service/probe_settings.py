"""The probes' own settings (`probes.environment` asks for them), read at each use: as the
environment and the operator's .env are when a probe needs them."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import SettingsConfigDict

from probes.tools.ports import parse_port_range

from .settings_checks import OPERATORS_ENV_FILE, OperatorsSettings, env_file, root_may_run


class ProbeSettings(OperatorsSettings):
    """The probes' own settings (probes/environment.py asks for them): as the environment
    and .env are at each use, as the probes read them at the moment they need them."""

    model_config = SettingsConfigDict(env_prefix="MPCOA_", env_file=OPERATORS_ENV_FILE,
                                      extra="ignore")

    netperfmeter: str | None = Field(
        default=None, description="the NetPerfMeter binary (a path or a name on PATH); unset: "
        "netperfmeter")
    apply_state: Path | None = Field(
        default=None, description="the apply journal's folder (keep it on a volume); unset: "
        "/run/mpcoa/apply")
    testbed_state: Path | None = Field(
        default=None, description="the emulated testbeds' state; unset: /run/mpcoa/testbeds")
    cc_users_dir: Path | None = Field(
        default=None, description="running probes' congestion-control claims; unset: "
        "/run/mpcoa/cc-users")
    quiet_timeout_s: float | None = Field(
        default=None, ge=0, le=600, description="how long a probe waits for quiet sites, s; "
        "unset: 10")
    bpf_cc_cache: Path | None = Field(
        default=None, description="compiled BPF congestion controls; unset: "
        "/var/lib/mpcoa/bpf_cc (root) or $XDG_CACHE_HOME/mpcoa/bpf_cc")
    excluded_max_bytes: int | None = Field(
        default=None, ge=0, le=1 << 30, description="bytes an excluded subflow may carry; "
        "unset: 4096")
    probe_ports: str | None = Field(
        default=None, description="LOW-HIGH: every port a probe, a passive side or an apply's "
        "confirmation listens on (the site firewall's range); unset: 20000-31999")

    @field_validator("probe_ports")
    @classmethod
    def _port_range(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        low, high = parse_port_range(value)
        return f"{low}-{high}"

    @field_validator("netperfmeter")
    @classmethod
    def _netperfmeter_root_may_run(cls, value: str | None) -> str | None:
        return value if value is None else root_may_run(value)


_probe_settings: tuple[tuple, ProbeSettings] | None = None


def _probe_settings_now() -> ProbeSettings:
    """ProbeSettings as the environment and the .env file are now: built again only when one
    of them changed (a probe asks about ten times, and building them cost 10 ms each)."""
    global _probe_settings
    env = tuple(sorted((k.upper(), v) for k, v in os.environ.items()
                       if k.upper().startswith("MPCOA_")))
    try:
        path = env_file()
        st = os.stat(path)
        dotenv: tuple | None = (str(path.resolve()), st.st_mtime_ns, st.st_size)
    except OSError:
        dotenv = None
    key = (env, dotenv)
    cached = _probe_settings
    if cached is not None and cached[0] == key:
        return cached[1]
    built = ProbeSettings()  # a bad value raises here, and nothing is kept
    _probe_settings = (key, built)
    return built


def probe_setting(name: str):
    """One of ProbeSettings' values; a bad value is a ValueError that names its variable."""
    from pydantic import ValidationError

    try:
        return getattr(_probe_settings_now(), name)
    except ValidationError as exc:
        bad = "; ".join(f"MPCOA_{'_'.join(map(str, e['loc'])).upper()}: {e['msg']} "
                        f"(got {e.get('input')!r})" for e in exc.errors(include_url=False))
        raise ValueError(bad) from None
