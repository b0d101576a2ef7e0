"""Real server processes for the deployment tests: gunicorn with deploy/gunicorn.conf.py, and
Debian's nginx with deploy/nginx/ldp-survey.conf."""

import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
INSECURE = ssl.create_default_context()
INSECURE.check_hostname = False
INSECURE.verify_mode = ssl.CERT_NONE  # our own self-signed test certificate


def production(tmp_path: Path, database_url: str):
    """Environment for production replicas sharing one key file, secret and storage key; a
    researcher key; and a direct handle on the database (under that storage key) for
    checking."""
    from ldpsurvey.aggregator import create_api_key, create_app
    from ldpsurvey.aggregator.config.signing import write_key_file

    write_key_file(tmp_path / "signing-key.pem")  # 0600: production refuses others
    env = {"LDP_SURVEY_KEY_FILE": str(tmp_path / "signing-key.pem"),
           "LDP_SURVEY_SECRET_KEY": secrets.token_hex(32),
           "LDP_SURVEY_STORAGE_KEY": secrets.token_hex(32),
           "LDP_SURVEY_DATABASE_URL": database_url, "LDP_SURVEY_INSTANCE": str(tmp_path),
           "LDP_SURVEY_PUBLIC_URL": "https://survey.example.org"}
    app = create_app({"DATABASE_URL": database_url, "STORAGE_KEY": env["LDP_SURVEY_STORAGE_KEY"]},
                     instance_path=tmp_path / "checker")
    return env, create_api_key(app).key, app



def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_up(url: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=2, context=INSECURE)
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"{url} did not come up")


def start_gunicorn(env: dict, port: int, log: Path, workers: int = 2) -> subprocess.Popen:
    """gunicorn in its own process group (so kill -9 reaches master and workers)."""
    gunicorn = shutil.which("gunicorn", path=os.path.dirname(sys.executable))
    full_env = {**os.environ, **env, "LDP_SURVEY_BIND": f"127.0.0.1:{port}",
                "LDP_SURVEY_WORKERS": str(workers), "LDP_SURVEY_THREADS": "4"}
    with open(log, "ab") as out:
        proc = subprocess.Popen([gunicorn, "-c", str(ROOT / "deploy" / "gunicorn.conf.py")],
                                env=full_env, stdout=out, stderr=subprocess.STDOUT,
                                cwd=log.parent, start_new_session=True)
    wait_until_up(f"http://127.0.0.1:{port}/healthz")
    return proc


def kill(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        return
    proc.wait(timeout=30)


def self_signed_certificate(folder: Path, rsa_key: bool = False) -> tuple[Path, Path]:
    """An ECDSA certificate, or an RSA one (rsa_key): only with RSA can a client offer a
    cipher suite without forward secrecy (RSA key exchange) that the server might accept."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from cryptography.x509.oid import NameOID

    key = (rsa.generate_private_key(public_exponent=65537, key_size=2048) if rsa_key
           else ec.generate_private_key(ec.SECP256R1()))
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "survey.example.org")])
    now = datetime.now(UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(days=1)).not_valid_after(now + timedelta(days=2))
            .sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def start_nginx(folder: Path, upstreams: list[int], rate: str | None = None,
                rsa_key: bool = False) -> tuple[subprocess.Popen, str, str]:
    """The shipped site config with only ports, certificate and log paths (and, if given, the
    rate) replaced, inside a minimal nginx.conf; returns (process, https base URL, plain-HTTP
    base URL)."""
    cert, key = self_signed_certificate(folder, rsa_key)
    port, plain_port = free_port(), free_port()
    site = (ROOT / "deploy" / "nginx" / "ldp-survey.conf").read_text()
    replacements = {
        "server 127.0.0.1:8001;": f"server 127.0.0.1:{upstreams[0]};",
        "server 127.0.0.1:8002;": f"server 127.0.0.1:{upstreams[1]};",
        "listen 443 ssl http2;": f"listen 127.0.0.1:{port} ssl http2;",
        "listen 80;": f"listen 127.0.0.1:{plain_port};",
        "/etc/letsencrypt/live/survey.example.org/fullchain.pem": str(cert),
        "/etc/letsencrypt/live/survey.example.org/privkey.pem": str(key),
        "/var/log/nginx/": f"{folder}/",
    }
    if rate:
        replacements["rate=10r/s"] = f"rate={rate}"
    for old, new in replacements.items():
        assert old in site, old
        site = site.replace(old, new)
    (folder / "site.conf").write_text(site)
    temp = "".join(f"{kind}_temp_path {folder}/{kind}_temp;\n"
                   for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    # Started as root, nginx's workers would switch to nobody, who cannot enter pytest's 0700
    # folders to buffer a request body (over 16 KiB) on disk: they keep the caller's user.
    user = "user root;\n" if os.geteuid() == 0 else ""
    (folder / "nginx.conf").write_text(
        f"daemon off;\n{user}pid {folder}/nginx.pid;\nerror_log {folder}/nginx-error.log;\n"
        f"events {{ worker_connections 256; }}\n"
        f"http {{\n{temp}include {folder}/site.conf;\n}}\n")
    proc = subprocess.Popen([NGINX, "-p", str(folder), "-c", str(folder / "nginx.conf")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"https://127.0.0.1:{port}"
    wait_until_up(url + "/healthz")
    return proc, url, f"http://127.0.0.1:{plain_port}"


def request(method: str, url: str, body=None, headers=None, timeout: float = 10):
    """(status, parsed JSON or None). Raises OSError when the server cannot be reached."""
    status, parsed, _ = exchange(method, url, body, headers, timeout)
    return status, parsed


def released_all(base: str, survey_id: str, key: str, n: int, seconds: float = 60) -> int:
    """Wait (at most `seconds`) for the server's release clocks to have released at least n
    responses of the survey; return how many its estimates count then."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        _, estimates = request("GET", f"{base}/api/surveys/{survey_id}/estimates",
                               headers={"Authorization": f"Bearer {key}"})
        if (released := estimates["questions"][0]["n"]) >= n:
            return released
        time.sleep(0.1)
    raise AssertionError(f"the release clocks did not release {n} responses within {seconds} s")


def exchange(method: str, url: str, body=None, headers=None, timeout: float = 10):
    """(status, parsed JSON or None, response headers)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=INSECURE) as response:
            raw, status, received = response.read(), response.status, response.headers
    except urllib.error.HTTPError as exc:
        raw, status, received = exc.read(), exc.code, exc.headers
    try:
        return status, json.loads(raw), received
    except ValueError:
        return status, None, received


def response_head(url: str, raw_request: bytes) -> tuple[str, list[tuple[str, str]]]:
    """(status line, header fields) of the answer to a request sent byte for byte."""
    address = urlsplit(url)
    with socket.create_connection((address.hostname, address.port), timeout=5) as sock:
        sock.sendall(raw_request)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    status, *lines = received.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    return status, [(name.strip().lower(), value.strip())
                    for name, _, value in (line.partition(":") for line in lines)]
