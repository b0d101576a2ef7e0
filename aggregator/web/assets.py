"""The pages' scripts and stylesheet under content-addressed names, `/web/<digest>/<name>`
(the views here, registered by pages.py and by preview.py's server):
the form's modules (shared/web, package data of ldpsurvey.shared) and the aggregator's own
(static/: style.css, dashboard.js). One digest names them all, so a module's relative imports
("./randomizer.js") stay under it, and a name never serves other bytes: browsers and proxies
may keep each for good (IMMUTABLE), and the rate limits need not count them (limits.EXEMPT),
which a page load through a shared address (a school, a company proxy, a carrier's NAT) would
otherwise spend 11 of its 13 requests on."""

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib import resources

from flask import Response, abort, url_for

FOLDERS = (resources.files("ldpsurvey.shared") / "web",
           resources.files("ldpsurvey.aggregator") / "static")
TYPES = {".js": "text/javascript", ".css": "text/css"}
# A release's files never change under their digest: a year, and no revalidation.
IMMUTABLE = "public, max-age=31536000, immutable"
DIGEST_HEX = 16  # 64 bits of the bundle's SHA-256: a new name for every change of any file


@dataclass(frozen=True)
class Asset:
    body: bytes
    mimetype: str
    sha256: str  # of the body, hex


@dataclass(frozen=True)
class Bundle:
    digest: str
    files: dict[str, Asset]


def digest_of(files: dict[str, Asset]) -> str:
    """SHA-256 over "name sha256(body)" lines in name order, truncated to DIGEST_HEX digits."""
    lines = "".join(f"{name} {files[name].sha256}\n" for name in sorted(files))
    return hashlib.sha256(lines.encode()).hexdigest()[:DIGEST_HEX]


@cache
def bundle() -> Bundle:
    """Every asset of this installation, read once (no name is in both folders: a test)."""
    files = {}
    for folder in FOLDERS:
        for entry in folder.iterdir():
            suffix = entry.name[entry.name.rfind("."):]
            if suffix in TYPES:
                body = entry.read_bytes()
                files[entry.name] = Asset(body, TYPES[suffix], hashlib.sha256(body).hexdigest())
    return Bundle(digest_of(files), files)


def web_asset(filename: str) -> Response:
    """A script or the stylesheet under its plain name (for tools and tests; pages link
    asset_url): never cached, counted by the rate limits."""
    file = bundle().files.get(filename)
    if file is None:
        abort(404)
    return Response(file.body, mimetype=file.mimetype)


def asset(digest: str, filename: str) -> Response:
    """A script or the stylesheet under its content-addressed name: cached for good, not
    counted by the rate limits. Another digest (another release's) is 404."""
    found = bundle()
    if digest != found.digest or filename not in found.files:
        abort(404)
    file = found.files[filename]
    return Response(file.body, mimetype=file.mimetype, headers={"Cache-Control": IMMUTABLE})


def asset_url(filename: str) -> str:
    """The URL pages link for an asset (a template global)."""
    return url_for("pages.asset", digest=bundle().digest, filename=filename)
