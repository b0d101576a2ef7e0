"""`ldp-survey deploy systemd`: a systemd service running `serve --public` (public_site.py),
sandboxed, with the resources it may use at most."""

import re
import shlex
import sys
from dataclasses import dataclass

import click

from ldpsurvey.cli.public_site import (
    CADDY_INSTALL,
    STOP_SECONDS,
    Site,
    caddy_executable,
    checked_site,
    public_options,
)

SERVICE_NAME = "ldp-survey-public"
SERVICE_USER = "ldp-survey"
SERVICE_STATE = "/var/lib/ldp-survey"
SERVICE_ENV = "/etc/ldp-survey/public.env"


SANDBOX = """NoNewPrivileges=true
PrivateTmp=true
ProtectSystem=strict
ProtectHome=true
ReadWritePaths={state}
UMask=0077
CapabilityBoundingSet={capabilities}
AmbientCapabilities={capabilities}
RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX
PrivateDevices=true
ProtectKernelTunables=true
ProtectKernelModules=true
ProtectControlGroups=true
ProtectHostname=true
ProtectClock=true
SystemCallFilter=@system-service
SystemCallArchitectures=native
LockPersonality=true
RestrictNamespaces=true
RestrictRealtime=true
RestrictSUIDSGID=true
MemoryDenyWriteExecute=true"""
# Folders the sandbox hides from the service, and the setting that hides each (refused as
# places to run from, never written to).
HIDDEN_FROM_SERVICES = {"/home/": "ProtectHome", "/root/": "ProtectHome",
                        "/run/user/": "ProtectHome",
                        "/tmp/": "PrivateTmp", "/var/tmp/": "PrivateTmp"}  # noqa: S108  # nosec B108


@dataclass(frozen=True)
class Resources:
    """What the service may use at most (systemd's MemoryMax, TasksMax and CPUQuota): a runaway
    request or a flood then stops at the service, not at the machine."""

    memory: str = "1G"  # gunicorn's worker and Caddy together, with room for large analyses
    tasks: int = 512  # processes and threads: gunicorn's threads, Caddy's, SQLite's
    cpu: str = "200%"  # two cores' worth


MEMORY = re.compile(r"[1-9][0-9]*[KMGT]?|[1-9][0-9]?%|100%|infinity")
CPU = re.compile(r"[1-9][0-9]*%")


def checked_resources(memory: str, tasks: int, cpu: str) -> Resources:
    """The resources, or a one-line error naming the option."""
    if not MEMORY.fullmatch(memory):
        raise click.BadParameter(f"{memory!r} is not a memory size (e.g. 1G, 512M, 50%, "
                                 "infinity)", param_hint="--memory-max")
    if not CPU.fullmatch(cpu):
        raise click.BadParameter(f"{cpu!r} is not a CPU quota (a percentage of one core: "
                                 "100% is one core, 200% two)", param_hint="--cpu-quota")
    return Resources(memory, tasks, cpu)


def hidden_by_sandbox(path: str) -> str | None:
    """The sandbox setting that would hide `path` from the service, or None."""
    return next((setting for folder, setting in HIDDEN_FROM_SERVICES.items()
                 if path.startswith(folder)), None)


def systemd_unit(site: Site, python: str, caddy: str, limits: Resources = Resources()) -> str:
    """A systemd service running `serve --public` for `site` (gunicorn and Caddy, stopped
    together), sandboxed as deploy/ldp-survey.service is, with the one capability needed to
    listen on ports below 1024 when it uses them, and at most `limits`."""
    command = [python, "-m", "ldpsurvey.cli", "serve", "--public", site.hostname]
    for option, value, default in (("--https-port", site.https_port, 443),
                                   ("--http-port", site.http_port, 80),
                                   ("--tls", site.tls, "acme")):
        if value != default:
            command += [option, str(value)]
    privileged = min(site.https_port, site.http_port) < 1024
    sandbox = SANDBOX.format(state=SERVICE_STATE,
                             capabilities="CAP_NET_BIND_SERVICE" if privileged else "")
    return f"""# ldp-survey at {site.origin}: gunicorn behind Caddy ({caddy}), as
# `ldp-survey serve --public` runs them. Written by `ldp-survey deploy systemd`. To install:
#   useradd --system --home-dir {SERVICE_STATE} --shell /usr/sbin/nologin {SERVICE_USER}
#   cp {SERVICE_NAME}.service /etc/systemd/system/
#   systemctl daemon-reload && systemctl enable --now {SERVICE_NAME}
# For PostgreSQL instead of SQLite in {SERVICE_STATE}, put
# LDP_SURVEY_DATABASE_URL=postgresql://... in {SERVICE_ENV} (mode 0600).
# Researcher keys:
#   sudo -u {SERVICE_USER} {python} -m ldpsurvey.cli admin create-key --instance {SERVICE_STATE}
# Backups: never {SERVICE_STATE} as a whole, which holds the database and the key that
# unlocks its pending answers and token hashes (storage-key) side by side. Back up each apart:
#   the database: sqlite3 {SERVICE_STATE}/ldp-survey.sqlite3 ".backup FILE" (or pg_dump -Fc)
#   the keys, elsewhere (offline): {SERVICE_STATE}/storage-key, secret-key, signing-key.pem
[Unit]
Description=ldp-survey aggregator at {site.origin} (gunicorn behind Caddy)
After=network-online.target postgresql.service
Wants=network-online.target

[Service]
Type=simple
User={SERVICE_USER}
Group={SERVICE_USER}
StateDirectory=ldp-survey
StateDirectoryMode=0700
EnvironmentFile=-{SERVICE_ENV}
Environment=LDP_SURVEY_INSTANCE={SERVICE_STATE}
Environment=MALLOC_ARENA_MAX=2
ExecStart={shlex.join(command)}
Restart=on-failure
RestartSec=2
# SIGTERM to serve alone, which stops Caddy and then gunicorn; anything left is killed.
KillMode=mixed
KillSignal=SIGTERM
TimeoutStopSec={2 * STOP_SECONDS + 10}
MemoryMax={limits.memory}
TasksMax={limits.tasks}
CPUQuota={limits.cpu}
{sandbox}

[Install]
WantedBy=multi-user.target
"""


@click.group()
def deploy() -> None:
    """Files that run ldp-survey as a service."""


@deploy.command("systemd")
@click.argument("hostname")
@public_options
@click.option("--memory-max", default=Resources.memory, show_default=True,
              help="systemd's MemoryMax: the most memory gunicorn and Caddy use together "
                   "(K, M, G, T, a percentage of the machine's, or infinity).")
@click.option("--tasks-max", type=click.IntRange(16), default=Resources.tasks,
              show_default=True, help="systemd's TasksMax: the most processes and threads.")
@click.option("--cpu-quota", default=Resources.cpu, show_default=True,
              help="systemd's CPUQuota: 100% is one core.")
def systemd(hostname: str, https_port: int, http_port: int, tls: str, memory_max: str,
            tasks_max: int, cpu_quota: str) -> None:
    """Print a systemd service running `serve --public HOSTNAME` (same options) with this
    installation of ldp-survey, sandboxed, as user ldp-survey with its data in
    /var/lib/ldp-survey, using at most --memory-max, --tasks-max and --cpu-quota; the install
    and backup steps are its first lines."""
    site = checked_site(hostname, https_port, http_port, tls)
    limits = checked_resources(memory_max, tasks_max, cpu_quota)
    visible(sys.executable, "this ldp-survey", "e.g. python3 -m venv /opt/ldp-survey/venv && "
            "/opt/ldp-survey/venv/bin/pip install 'ldp-survey[server]'")
    caddy = visible(caddy_executable(), "Caddy", CADDY_INSTALL)
    click.echo(systemd_unit(site, sys.executable, caddy, limits), nl=False)


def visible(path: str, what: str, instead: str) -> str:
    """`path`, or a one-line error if the service's sandbox would hide it."""
    if setting := hidden_by_sandbox(path):
        raise click.ClickException(f"{what} ({path}) is installed where the service's sandbox "
                                   f"hides it ({setting}): install it elsewhere, {instead}")
    return path


COMMANDS = (deploy,)
