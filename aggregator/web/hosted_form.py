"""A copy of a published survey's form for another origin to serve (`ldp-survey survey form ID
--output DIR`): an ethics board, a university's web team or any static host serves it at one of
the survey's signed form_origins (manifest format /9), and respondents there run code the
operator cannot change. The page is the one /s/ID serves (survey.html, in each of the survey's
languages), its files by relative URL with their integrity, reading the signed manifest beside
it; it posts to the aggregator at the survey's signed origin, which answers the listed origins'
cross-origin requests (cors.py). DIR holds s/<survey id>/ (shared/survey/form_copy.py), so
that the copy, served from a site's root, is at https://HOST/s/<survey id>/ as on the
aggregator (the extension checks pages under /s/), and in it:

- index.html, the form in the survey's first language; index.<tag>.html in each other one (the
  language switcher links them);
- assets/<name>: the form's modules and stylesheet, the bytes whose digests the manifest signs;
- manifest.json and manifest.sig: the signed manifest, byte for byte, and its signature;
- key.json: the aggregator's public key that verified it, as GET /api/key serves it.

The Content-Security-Policy is a meta element of each page (security.hosted_policy). A page is
exactly what `render` makes of the survey, its language and the aggregator's release schedule,
so `verify` can compare a served copy with it byte for byte."""

import base64
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from flask import Flask, render_template
from markupsafe import Markup

from ldpsurvey.aggregator.services import surveys
from ldpsurvey.aggregator.web import assets, languages, security
from ldpsurvey.shared import Survey
from ldpsurvey.shared.survey.form_copy import ASSETS, KEY, MANIFEST, SIGNATURE, file_url, page_name

SURVEY_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")  # a folder name: no "/", no ".."


def render(survey: Survey, language: str, release_every: float) -> str:
    """The form's page in `language`, as a copy at another origin serves it."""
    text = assets.import_map(file_url)
    policy = security.hosted_policy([security.script_hash(text)], survey.origin or "")
    app = Flask(__name__, root_path=str(Path(__file__).resolve().parents[1]))
    with app.test_request_context(f"/?lang={language}"):
        return render_template(
            "survey.html", **languages.form_context(survey, release_every),
            exposure=surveys.exposure(survey, release_every), manifest_url=MANIFEST,
            language_pages={tag: page_name(survey, tag) for tag in survey.languages},
            page_policy=policy, asset_url=file_url, asset_integrity=assets.asset_integrity,
            form_modules=assets.form_modules,
            form_import_map=lambda: Markup(text))  # noqa: S704  # nosec B704: URLs and base64


def write(survey: Survey, manifest: bytes, signature: bytes, public_key: bytes,
          release_every: float, folder: Path) -> list[Path]:
    """Write the copy of the published `survey` (its signed `manifest` bytes, `signature` and
    the `public_key` that verified it) into `folder`, which must not exist or be empty; return
    the files written. The survey must sign this installation's form (`survey.form`, every
    file's digest): ValueError if it signs another release's, or lists no form_origins (no
    other origin may serve it)."""
    if not survey.form_origins:
        raise ValueError(f"survey {survey.survey_id} lists no form_origins, so no other site "
                         "may serve its form: a published survey never changes, so make a new "
                         f"one that lists them (`survey copy {survey.survey_id}`, add "
                         "form_origins with `survey edit`, then `survey publish`)")
    if survey.form != assets.form_digests():
        raise ValueError(f"survey {survey.survey_id} signs the form of another ldp-survey "
                         "release than this one: write the copy with the release that "
                         "published it")
    if not SURVEY_ID.fullmatch(survey.survey_id or ""):
        raise ValueError(f"the survey id {survey.survey_id!r} cannot name a folder")
    if folder.exists() and any(folder.iterdir()):
        raise ValueError(f"{folder} is not empty")
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:  # written whole in a folder of its own, then put in place: no half copy, no race
        staging.chmod(0o777 & ~current_umask())  # a web server's user reads it, as any folder
        for path, body in files(survey, manifest, signature, public_key, release_every).items():
            (staging / path).parent.mkdir(parents=True, exist_ok=True)
            (staging / path).write_bytes(body)
        if folder.exists():
            folder.rmdir()  # empty, as checked (OSError if something was put in it since)
        staging.rename(folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return sorted(path for path in folder.rglob("*") if path.is_file())


def current_umask() -> int:
    """This process's umask (reading it means setting it: set back at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def files(survey: Survey, manifest: bytes, signature: bytes, public_key: bytes,
          release_every: float) -> dict[Path, bytes]:
    """The copy's files by their path in its folder (form_copy.py's layout)."""
    home = Path("s") / survey.survey_id
    key = {"algorithm": "Ed25519", "key_id": survey.key_id,
           "public_key": base64.b64encode(public_key).decode()}
    found = {home / MANIFEST: manifest, home / SIGNATURE: signature,
             home / KEY: json.dumps(key, indent=2).encode() + b"\n"}
    for name in survey.form:
        found[home / ASSETS / name] = assets.bundle().files[name].body
    for language in survey.languages:
        found[home / page_name(survey, language)] = render(survey, language, release_every).encode()
    return found
