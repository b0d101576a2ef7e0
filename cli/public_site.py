"""`ldp-survey serve --public HOSTNAME`: the aggregator under gunicorn behind Caddy, with HTTPS
(`ldp-survey deploy systemd`, deploy.py, writes the same setup as a systemd service).

Caddy (Debian's `caddy` package) gets certificates (ACME, e.g. Let's Encrypt, or its own CA with
`--tls internal`), redirects plain HTTP, sends HSTS, keeps no access log and no error-log line
naming a client; gunicorn runs with the production settings of
`ldpsurvey.aggregator.web.gunicorn` (no access-log line for the responses endpoints) on a
Unix socket only this user can reach. Everything Caddy keeps (certificates, its CA) is in the
instance folder's `caddy/`, never in $HOME, and its root CA is never installed anywhere.
"""

import contextlib
import ctypes
import http.client
import ipaddress
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess  # nosec B404: runs gunicorn and Caddy, with arguments of our own
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import click

from ldpsurvey.cli.aggregator_app import make_app, record_database
from ldpsurvey.cli.extras import load

CADDY_INSTALL = "apt-get install caddy"
TLS_MODES = ("acme", "internal")
HSTS = "max-age=31536000; includeSubDomains"
START_SECONDS = 60  # for gunicorn to answer /healthz and for Caddy to listen
STOP_SECONDS = 30  # for each to stop gracefully before it is killed
# Caddy's limits on reading a request's headers and whole body (a 16 MiB batch upload needs
# about 4.5 Mbit/s to fit in 30 s); a slower client's connection is closed.
READ_HEADER_SECONDS = 10
READ_BODY_SECONDS = 30
FIRST_CERTIFICATE_SECONDS = 10  # Caddy's own CA signs in milliseconds: see start_caddy
# Names no public CA certifies (nor IP addresses, nor names of one label): only Caddy's own CA
# (--tls internal) can serve them.
LOCAL_NAMES = re.compile(r"(^|\.)(localhost|local|internal|home\.arpa|test|invalid)$")
LOOPBACK_NAMES = re.compile(r"(^|\.)localhost$")
DNS_NAME = re.compile(r"(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)"
                      r"(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*")


@dataclass(frozen=True)
class Site:
    """Where respondents reach the service, and how Caddy gets its certificate."""

    hostname: str
    https_port: int = 443
    http_port: int = 80
    tls: str = "acme"

    @property
    def origin(self) -> str:
        """The https origin respondents use (PUBLIC_URL): the port only when not 443."""
        port = "" if self.https_port == 443 else f":{self.https_port}"
        return f"https://{self.hostname}{port}"

    @property
    def loopback(self) -> bool:
        """Whether the name means this machine only: Caddy then listens on loopback only."""
        try:
            return ipaddress.ip_address(self.hostname).is_loopback
        except ValueError:
            return bool(LOOPBACK_NAMES.search(self.hostname))


def checked_site(hostname: str, https_port: int, http_port: int, tls: str) -> Site:
    """The site, or a one-line error: a DNS name or an IPv4 address (no scheme, no port), two
    different ports, and --tls internal for a name no public CA certifies."""
    name = hostname.strip().lower().rstrip(".")
    address = None
    with contextlib.suppress(ValueError):
        address = ipaddress.IPv4Address(name)
    if address is None and not DNS_NAME.fullmatch(name):
        raise click.BadParameter(
            f"{hostname!r} is not a host name (e.g. survey.example.org: no https://, no "
            "port, no path; use --https-port for the port)", param_hint="--public")
    if https_port == http_port:
        raise click.BadParameter(f"--https-port and --http-port are both {https_port}",
                                 param_hint="--http-port")
    if tls == "acme" and (address is not None or "." not in name or LOCAL_NAMES.search(name)):
        raise click.BadParameter(
            f"no public certificate authority certifies {name}: use a public DNS name, or "
            "--tls internal for Caddy's own CA (its clients must trust that CA)",
            param_hint="--tls")
    return Site(name, https_port, http_port, tls)


def public_options(command):
    """--https-port, --http-port and --tls: shared by `serve --public` and `deploy systemd`."""
    for option in reversed((
        click.option("--https-port", type=click.IntRange(1, 65535), default=443,
                     show_default=True, help="Port for HTTPS (with --public)."),
        click.option("--http-port", type=click.IntRange(1, 65535), default=80,
                     show_default=True,
                     help="Port for plain HTTP, redirected to HTTPS, and ACME's HTTP challenge "
                          "(with --public)."),
        click.option("--tls", type=click.Choice(TLS_MODES), default="acme", show_default=True,
                     help="acme: a certificate from Let's Encrypt (the name must point to this "
                          "host, ports 80 and 443 reachable); internal: Caddy's own CA, in the "
                          "instance folder (clients must trust it; for tests and intranets)."),
    )):
        command = option(command)
    return command


def caddyfile(site: Site, upstream: Path, storage: Path, max_body: int) -> str:
    """The Caddy configuration: HTTPS for the site, proxied to gunicorn's socket `upstream`;
    plain HTTP redirected to it with the path exactly as sent (still percent-encoded) and no
    query string, as deploy/nginx does."""
    bind = "\tdefault_bind 127.0.0.1 [::1]\n" if site.loopback else ""
    tls = "\ttls internal\n" if site.tls == "internal" else ""
    return f"""# Written by ldp-survey serve --public at every start: changes here are lost.
{{
\tadmin off
\tstorage file_system {storage}
\t# Caddy's own CA, if used, is never installed into this system's trust store.
\tskip_install_trust
\thttp_port {site.http_port}
\thttps_port {site.https_port}
{bind}\t# Caddy's redirect would drop a port other than 443 and keep the query: ours is below.
\tauto_https disable_redirects
\t# A client that stalls its headers or body holds one of the app's few threads (gunicorn
\t# reads the body Caddy streams it) this long at most: then its connection is closed.
\tservers {{
\t\ttimeouts {{
\t\t\tread_header {READ_HEADER_SECONDS}s
\t\t\tread_body {READ_BODY_SECONDS}s
\t\t}}
\t}}
\tlog {{
\t\t# A failed request's line names the client's address and the full URI.
\t\texclude http.log.error
\t}}
}}

{site.hostname} {{
{tls}\theader Strict-Transport-Security "{HSTS}"
\trequest_body {{
\t\tmax_size {max_body}
\t}}
\t# No access log: none is configured. The app trusts one X-Forwarded-Prefix (ProxyFix)
\t# and would put a client's in every URL it makes, and gunicorn takes SCRIPT_NAME and
\t# PATH_INFO headers from its proxy (forwarder_headers): never pass a client's on.
\treverse_proxy unix/{upstream} {{
\t\theader_up -X-Forwarded-Prefix
\t\theader_up -Script_name
\t\theader_up -Path_info
\t\t# one Server header: Caddy's, which names no version
\t\theader_down -Server
\t}}
}}

http://{site.hostname} {{
\troute {{
\t\tvars sent_uri {{http.request.uri}}
\t\t@path vars_regexp sent sent_uri ^(/[^?]*)
\t\tredir @path {site.origin}{{http.regexp.sent.1}} 301
\t\tredir {site.origin}/ 301
\t}}
}}
"""


def caddy_executable() -> str:
    found = shutil.which("caddy")
    if not found:
        raise click.ClickException(f"Caddy is not installed ({CADDY_INSTALL}); `serve --public` "
                                   "runs the aggregator behind it")
    return found


def caddy_folders(instance: Path) -> tuple[Path, dict[str, str]]:
    """Caddy's storage folder (certificates, keys, its CA) inside the instance folder, and the
    environment that keeps all Caddy writes (its data, autosaved config, the step library's
    ~/.step) there instead of in $HOME."""
    home = instance / "caddy"
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    env = {"HOME": str(home), "XDG_DATA_HOME": str(home), "XDG_CONFIG_HOME": str(home)}
    return home / "caddy", env


def root_certificate(storage: Path) -> Path:
    """Where Caddy keeps its own CA's root certificate (--tls internal)."""
    return storage / "pki" / "authorities" / "local" / "root.crt"


def production_settings(database: str | None, instance: str, site: Site) -> dict[str, str]:
    """The environment that runs gunicorn in production mode on this instance: its signing key
    file, secret and storage key (created on first start, as `serve` does), the database, and
    PUBLIC_URL = the site's origin. The app is created once here, in production mode, so that
    a bad setting is one line now rather than a worker failing to boot."""
    aggregator = load("ldpsurvey.aggregator")
    app = make_app(database, instance)  # development mode: creates the instance's secrets
    settings = {"DEPLOYMENT": "production", "PUBLIC_URL": site.origin,
                "KEY_FILE": app.config["KEY_FILE"] or str(Path(app.instance_path) /
                                                          aggregator.DEVELOPMENT_KEY_FILE),
                **{name: app.config[name] for name in ("SECRET_KEY", "STORAGE_KEY",
                                                        "DATABASE_URL")}}
    aggregator.close_app(app)
    try:
        aggregator.close_app(aggregator.create_app(settings, instance_path=instance))
    except (aggregator.ConfigurationError, ValueError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    record_database(database, instance)  # for `admin create-key --instance` (announce)
    return {f"LDP_SURVEY_{name}": value for name, value in settings.items()}


def die_with_parent(parent: int):
    """A preexec_fn: the child gets SIGTERM when this process dies, however it dies (Linux
    PR_SET_PDEATHSIG), so that even a killed `serve --public` leaves no server behind."""
    libc = ctypes.CDLL(None, use_errno=True)

    def arrange() -> None:
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before prctl
            os._exit(1)

    return arrange


class Stop(Exception):
    """SIGTERM or SIGHUP arrived: stop as for Ctrl-C."""


def raise_stop(signum, frame) -> None:
    raise Stop(signum)


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: Path):
        super().__init__("localhost", timeout=2)
        self.socket_path = str(path)

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.socket_path)


def gunicorn_answers(path: Path) -> bool:
    connection = UnixHTTPConnection(path)
    try:
        connection.request("GET", "/healthz")
        return connection.getresponse().status == 200
    except OSError:
        return False
    finally:
        connection.close()


def caddy_answers(site: Site, storage: Path) -> bool:
    """With its own CA: an HTTPS answer from gunicorn through Caddy on loopback, checked against
    that CA; with ACME (the certificate may take a while): Caddy accepts connections."""
    try:
        with socket.create_connection(("127.0.0.1", site.https_port), timeout=2) as sock:
            if site.tls != "internal":
                return True
            context = ssl.create_default_context(cafile=root_certificate(storage))
            with context.wrap_socket(sock, server_hostname=site.hostname) as tls:
                tls.sendall(f"GET /healthz HTTP/1.1\r\nHost: {site.hostname}\r\n"
                            "Connection: close\r\n\r\n".encode())
                return tls.recv(64).startswith(b"HTTP/1.1 200")
    except (OSError, ssl.SSLError):
        return False


class NotReady(click.ClickException):
    """A server did not answer in time."""


def wait_until(ready, process: subprocess.Popen, name: str, seconds: float = START_SECONDS
               ) -> None:
    deadline = time.monotonic() + seconds
    while not ready():
        if process.poll() is not None:
            raise click.ClickException(f"{name} stopped (exit {process.returncode}); its log "
                                       "is above")
        if time.monotonic() > deadline:
            raise NotReady(f"{name} did not start within {seconds:g} s")
        time.sleep(0.05)


def start_caddy(command: list[str], site: Site, storage: Path, running: list[subprocess.Popen],
                **popen) -> subprocess.Popen:
    """Caddy, once it answers (see caddy_answers); it joins `running` at the front, to be
    stopped first. Caddy 2.6 cleans its storage at every start, and that cleaning can delete
    the first certificate of Caddy's own CA while it is being written (the certificate is saved
    before its key): Caddy then tries again only 60 s later. So with --tls internal, a Caddy
    that has not answered within FIRST_CERTIFICATE_SECONDS is restarted instead (twice)."""
    for attempt in range(3):
        # S603, B603: caddy is the executable found on PATH; the arguments are our own.
        proxy = subprocess.Popen(command, **popen)  # noqa: S603  # nosec B603
        running.insert(0, proxy)
        quick = site.tls == "internal" and attempt < 2
        try:
            wait_until(lambda: caddy_answers(site, storage), proxy, "Caddy",
                       FIRST_CERTIFICATE_SECONDS if quick else START_SECONDS)
            return proxy
        except NotReady:
            if not quick:
                raise
        click.echo("Caddy has no certificate yet: restarting it", err=True)
        stop(running.pop(0))
    raise AssertionError("unreachable")


def stop(process: subprocess.Popen) -> None:
    """SIGTERM (a graceful stop for gunicorn and Caddy), SIGKILL after STOP_SECONDS; then
    anything left in its process group (gunicorn's workers) is killed too."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def serve_public(database: str | None, instance: str, site: Site) -> None:
    """Run gunicorn and Caddy until Ctrl-C, SIGTERM or SIGHUP, or until one of them stops
    (then the other is stopped too and this fails)."""
    caddy = caddy_executable()
    environment = production_settings(database, instance, site)
    folder = Path(instance).resolve()
    storage, caddy_env = caddy_folders(folder)
    runtime = Path(tempfile.mkdtemp(prefix="ldp-survey-"))  # 0700; short enough for a socket
    upstream = runtime / "gunicorn.sock"
    config = folder / "caddy" / "Caddyfile"
    max_body = load("ldpsurvey.aggregator").DEFAULTS["MAX_CONTENT_LENGTH"]
    config.write_text(caddyfile(site, upstream, storage, max_body))
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, raise_stop)
    # Each in a session of its own: Ctrl-C reaches this process only, which stops them in order.
    # Their logs go to stderr: stdout holds the addresses only.
    started = {"start_new_session": True, "preexec_fn": die_with_parent(os.getpid()),
               "stdout": sys.stderr}
    running: list[subprocess.Popen] = []
    try:
        gunicorn = subprocess.Popen(  # nosec B603: this Python, our own arguments
            [sys.executable, "-m", "gunicorn", "-c", "python:ldpsurvey.aggregator.web.gunicorn"],
            env={**os.environ, **environment, "LDP_SURVEY_BIND": f"unix:{upstream}",
                 # one process: the rate limits (memory://) count every request
                 "LDP_SURVEY_WORKERS": "1"},
            cwd=runtime, **started)
        running.append(gunicorn)
        wait_until(lambda: gunicorn_answers(upstream), gunicorn, "gunicorn")
        # Stopped first (at the front of `running`): no request reaches a stopping gunicorn.
        proxy = start_caddy([caddy, "run", "--config", str(config), "--adapter", "caddyfile"],
                            site, storage, running, cwd=folder / "caddy",
                            env={"PATH": os.environ.get("PATH", os.defpath), **caddy_env},
                            **started)
        announce(site, environment, folder, storage)
        while all(process.poll() is None for process in running):
            time.sleep(0.2)
        stopped = next(process for process in running if process.poll() is not None)
        name = "Caddy" if stopped is proxy else "gunicorn"
        raise click.ClickException(f"{name} stopped (exit {stopped.returncode}); its log is "
                                   "above")
    except (KeyboardInterrupt, Stop):
        click.echo("stopping Caddy and gunicorn", err=True)
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)  # a second Ctrl-C must not cut this short
        for process in running:
            stop(process)
        shutil.rmtree(runtime, ignore_errors=True)


def announce(site: Site, environment: dict[str, str], instance: Path, storage: Path) -> None:
    """The addresses, on stdout; how to reach them, on stderr."""
    shown = load("ldpsurvey.aggregator.store.connection").display_url(
        environment["LDP_SURVEY_DATABASE_URL"])
    click.echo(f"respondents: {site.origin}/s/SURVEY_ID")
    click.echo(f"dashboard:   {site.origin}/researcher")
    click.echo(f"ldp-survey serves {site.origin} through Caddy (database: {shown}); researchers "
               f"use --url {site.origin}, and keys from `ldp-survey admin create-key --instance "
               f"{instance}`", err=True)
    if site.tls == "internal":
        root = root_certificate(storage)
        click.echo(f"certificates from Caddy's own CA: clients must trust {root} (e.g. "
                   f"SSL_CERT_FILE={root} ldp-survey respond ...)", err=True)
    click.echo("Ctrl-C stops it", err=True)
