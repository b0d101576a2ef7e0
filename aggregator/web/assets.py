"""The pages' scripts and stylesheet under content-addressed names, `/web/<digest>/<name>`
(the views here, registered by pages.py and by preview.py's server):
the form's modules (shared/web, package data of ldpsurvey.shared) and the aggregator's own
(static/: style.css, dashboard.js). One digest names them all, so a module's relative imports
("./randomizer.js") stay under it, and a name never serves other bytes: browsers and proxies
may keep each for good (IMMUTABLE), and the rate limits need not count them (limits.EXEMPT),
which a page load through a shared address (a school, a company proxy, a carrier's NAT) would
otherwise spend 11 of its 13 requests on.

The form's own files (FORM_ENTRY, every module it imports, the stylesheet) are `form_digests`:
their SHA-384 integrity strings, which the page loads them with and manifest format /8 signs
(form_integrity.py)."""

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from urllib.parse import urlsplit

from flask import Response, abort, url_for
from markupsafe import Markup

from ldpsurvey.aggregator.web import security
from ldpsurvey.shared.survey.form_integrity import module_imports, sri

FOLDERS = (resources.files("ldpsurvey.shared") / "web",
           resources.files("ldpsurvey.aggregator") / "static")
TYPES = {".js": "text/javascript", ".css": "text/css"}
# A release's files never change under their digest: a year, and no revalidation.
IMMUTABLE = "public, max-age=31536000, immutable"
DIGEST_HEX = 16  # 64 bits of the bundle's SHA-256: a new name for every change of any file
FORM_ENTRY = "form.js"  # the form's module; base.html links STYLESHEET on every page
STYLESHEET = "style.css"


@dataclass(frozen=True)
class Asset:
    body: bytes
    mimetype: str
    sha256: str  # of the body, hex
    integrity: str  # sha384-<base64>, Subresource Integrity metadata


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
                files[entry.name] = Asset(body, TYPES[suffix], hashlib.sha256(body).hexdigest(),
                                        sri(body))
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


def asset_integrity(filename: str) -> str:
    """The integrity attribute of an asset (a template global): sha384-<base64> of its body."""
    return bundle().files[filename].integrity


@cache
def form_modules() -> tuple[str, ...]:
    """The names of FORM_ENTRY and every module it imports, transitively, in the order first
    reached. A module outside the bundle, or an import that leaves its folder, is an error of
    this release (ValueError)."""
    files = bundle().files
    reached, pending = [FORM_ENTRY], [FORM_ENTRY]
    while pending:
        for specifier in module_imports(files[pending.pop()].body):
            name = specifier.removeprefix("./")
            if "/" in name or name not in files or urlsplit(specifier).scheme:
                raise ValueError(f"the form imports {specifier!r}, not a module beside it")
            if name not in reached:
                reached.append(name)
                pending.append(name)
    return tuple(reached)


def form_digests() -> dict[str, str]:
    """The integrity of every file the form loads (its modules and the stylesheet), by name:
    what a published survey's manifest signs."""
    files = bundle().files
    return {name: files[name].integrity for name in sorted((*form_modules(), STYLESHEET))}


def import_map(url: Callable[[str], str]) -> str:
    """The form's import map with each module at `url(name)`, with its integrity, so that
    every import is checked, not only the entry script."""
    return json.dumps({"integrity": {url(name): asset_integrity(name)
                                     for name in form_modules()}}, sort_keys=True)


def form_import_map() -> Markup:
    """The form's import map (a template global), its modules at asset_url. Its hash is added
    to this response's script-src (security.allow_inline_script); JSON of URLs and base64
    needs no escaping in a script."""
    text = import_map(asset_url)
    security.allow_inline_script(text)
    return Markup(text)  # noqa: S704  # nosec B704: our assets' URLs and base64, no "<" or "&"


# The helpers pages' templates call, registered by pages.py and preview.py's server.
TEMPLATE_GLOBALS = (asset_url, asset_integrity, form_modules, form_import_map)
