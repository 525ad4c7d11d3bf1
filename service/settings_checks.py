"""What the settings check beyond a value's type: where the .env file is read from, whether an
address is loopback, what a Host name may be, and whether a probe binary may run as root."""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import stat
from pathlib import Path

from pydantic import field_validator
from pydantic_settings import BaseSettings, DotEnvSettingsSource, SettingsConfigDict

#: the checkout (or the installed packages' folder): its .env is the operator's, wherever the
#: process was started; a .env in the current directory is not read (a root worker started in
#: a folder others can write would otherwise run their MPCOA_IPERF3_BINARY)
REPOSITORY_ROOT = Path(__file__).resolve().parent.parent

_HOST = re.compile(r"(\*\.)?[a-z0-9]([a-z0-9-]{0,62})(\.[a-z0-9]([a-z0-9-]{0,62}))*")


class _WhereEnvFile(BaseSettings):
    """MPCOA_ENV_FILE, from the environment only (it says where the .env file is)."""

    model_config = SettingsConfigDict(env_prefix="MPCOA_", extra="ignore")

    env_file: Path | None = None

    @field_validator("env_file", mode="before")
    @classmethod
    def _empty_is_unset(cls, value):
        return None if isinstance(value, str) and not value.strip() else value


def env_file() -> Path:
    """The .env file the settings read: MPCOA_ENV_FILE when set, else the repository root's."""
    return _WhereEnvFile().env_file or REPOSITORY_ROOT / ".env"


#: `model_config`'s env_file: replaced, as each settings object is built, by `env_file()`
OPERATORS_ENV_FILE = "<MPCOA_ENV_FILE, else the repository root's .env>"


class OperatorsSettings(BaseSettings):
    """Settings whose .env is the operator's (`settings_checks.env_file`), looked up when they
    are built; `_env_file=` still chooses another (None: none)."""

    @classmethod
    def settings_customise_sources(cls, settings_cls, init_settings, env_settings,
                                   dotenv_settings, file_secret_settings):
        if getattr(dotenv_settings, "env_file", None) == OPERATORS_ENV_FILE:
            dotenv_settings = DotEnvSettingsSource(settings_cls, env_file=env_file())
        return init_settings, env_settings, dotenv_settings, file_secret_settings


def ip_literal(value: str) -> bool:
    """An IP address, IPv6 with or without its brackets."""
    try:
        ipaddress.ip_address(value[1:-1] if value.startswith("[") and value.endswith("]")
                             else value)
    except ValueError:
        return False
    return True


def host_name(entry: str) -> bool:
    """A Host name the API may answer: a name, `*.domain`, an IP literal ([...] for IPv6)."""
    return entry == "*" or bool(_HOST.fullmatch(entry)) or ip_literal(entry)


def is_loopback(host: str) -> bool:
    """Whether a bind address listens on this host only (0.0.0.0 and :: listen everywhere;
    a name other than localhost may resolve anywhere)."""
    host = host.strip().strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _unsafe(st: os.stat_result, directory: bool) -> str | None:
    if st.st_uid != 0:
        return f"owned by uid {st.st_uid}, not root"
    if directory and st.st_mode & stat.S_ISVTX:  # /tmp: nobody renames root's entries
        return None
    if st.st_mode & stat.S_IWOTH:
        return "writable by others"
    if st.st_mode & stat.S_IWGRP and st.st_gid != 0:
        return f"writable by group {st.st_gid}"
    return None


def root_may_run(binary: str) -> str:
    """`binary` as it is, when this process may run it: as root, the file it names (a path, or
    a name found on PATH) and every folder above it belong to root and nobody else can write
    them. A ValueError names the file and why. Not found: left to the probe, which
    says so when it runs."""
    if os.geteuid() != 0:
        return binary
    found = shutil.which(binary)
    if found is None:
        return binary
    path = Path(os.path.realpath(found))
    for place in (path, *path.parents):
        try:
            st = place.stat()
        except OSError:
            continue
        why = _unsafe(st, directory=place != path)
        if why is not None:
            raise ValueError(f"refusing to run {path} as root: {place} is {why}")
    return binary
