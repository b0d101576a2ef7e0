"""Content-addressed assets (assets.py): one name, one content, cached for good; the pages
link them; another release's name is 404, not another content under an old name."""

import hashlib
import re
from dataclasses import replace

from ldpsurvey.aggregator.web import assets
from ldpsurvey.aggregator.web.assets import IMMUTABLE, bundle, digest_of


def test_every_asset_is_served_under_the_digest_of_them_all(client, survey_id):
    found = bundle()
    assert {"form.js", "randomizer.js", "style.css", "dashboard.js"} <= set(found.files)
    for name, asset in found.files.items():
        response = client.get(f"/web/{found.digest}/{name}")
        assert response.status_code == 200 and response.data == asset.body
        assert response.headers["Cache-Control"] == IMMUTABLE
        assert response.mimetype == asset.mimetype
        assert response.headers["X-Content-Type-Options"] == "nosniff"
    for page in (f"/s/{survey_id}", "/researcher"):
        linked = re.findall(r'(?:src|href)="(/web/[^"]+)"', client.get(page).text)
        assert linked and all(url.startswith(f"/web/{found.digest}/") for url in linked)


def test_no_asset_name_is_in_both_folders():
    names = [[entry.name for entry in folder.iterdir()] for folder in assets.FOLDERS]
    assert not set(names[0]) & set(names[1])


def test_another_digest_or_name_is_not_found(client):
    found = bundle()
    other = "0" * len(found.digest)
    for path in (f"/web/{other}/form.js", f"/web/{found.digest}/missing.js",
                 f"/web/{found.digest}/..%2fpages.py"):
        response = client.get(path)
        assert response.status_code == 404, path
        assert response.headers["Cache-Control"] == "no-store"


def test_changing_any_file_changes_the_digest():
    files = bundle().files
    for name, asset in files.items():
        changed = {**files, name: replace(asset, sha256=hashlib.sha256(
            asset.body + b" ").hexdigest())}
        assert digest_of(changed) != digest_of(files), name
    renamed = {("x" + name if name == "oue.js" else name): asset for name, asset in files.items()}
    assert digest_of(renamed) != digest_of(files)
