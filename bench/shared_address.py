"""Respondents behind one address (a school lab, a company proxy, a carrier's NAT), with the
default rate limits: each opens the form as a fresh browser does (the page, its stylesheet and
modules, the manifest, the status) and submits once, all within one limit window.

    python bench/shared_address.py [--respondents 50]

Prints, for assets fetched under their plain names (counted by the limits, as every page
linked them before issue 38) and under the content-addressed names pages link now: requests
per page load, loads that completed, answers accepted and requests refused (429).
"""

import argparse
import re
import tempfile
from importlib import resources
from pathlib import Path

from ldpsurvey.aggregator import DEFAULTS, close_app, create_api_key, create_app
from ldpsurvey.aggregator.web.assets import bundle
from ldpsurvey.aggregator.web.limits import SETTINGS
from ldpsurvey.shared import read_definition

ANSWERS = {"answers": {"smoked": 0, "drank_and_drove": 0, "cannabis": 0, "sleep": 1}}


def assets(page: str, content_addressed: bool) -> list[str]:
    """What a fresh browser fetches for the form: the page's links and every module."""
    modules = sorted(name for name in bundle().files
                     if name.endswith(".js") and name != "dashboard.js")
    if content_addressed:
        linked = re.findall(r'(?:src|href)="(/web/[^"]+)"', page)
        folder = linked[0].rsplit("/", 1)[0]
        return [f"{folder}/{name}" for name in [*modules, "style.css"]]
    return [f"/web/{name}" for name in modules] + ["/static/style.css"]


def run(respondents: int, content_addressed: bool) -> str:
    with tempfile.TemporaryDirectory() as folder:
        app = create_app({"DATABASE_URL": f"sqlite:///{folder}/db.sqlite3",
                          **{name: DEFAULTS[name] for name in SETTINGS.values()}},
                         instance_path=Path(folder) / "instance")
        auth = {"Authorization": f"Bearer {create_api_key(app).key}"}
        health = read_definition(resources.files("ldpsurvey.shared") / "examples" /
                                 "health.toml")
        survey = app.test_client().post("/api/surveys", json=health,
                                        headers=auth).json["survey_id"]
        client = app.test_client()
        client.environ_base["REMOTE_ADDR"] = "198.51.100.7"  # everyone's one address
        loaded = accepted = refused = requests = 0
        for _ in range(respondents):
            page = client.get(f"/s/{survey}")
            statuses = [page.status_code, *(client.get(url).status_code
                                            for url in assets(page.text, content_addressed)),
                        client.get(f"/api/surveys/{survey}").status_code,
                        client.get(f"/api/surveys/{survey}/status").status_code]
            requests += len(statuses)
            refused += statuses.count(429)
            if set(statuses) == {200}:
                loaded += 1
                status = client.post(f"/api/surveys/{survey}/responses", json=ANSWERS).status_code
                accepted += status < 300
                refused += status == 429
        close_app(app)
    names = "content-addressed" if content_addressed else "plain names"
    return (f"{names:>17}: {requests / respondents:.0f} requests a load, {loaded} loads "
            f"complete, {accepted} answers accepted, {refused} refused")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--respondents", type=int, default=50)
    respondents = parser.parse_args().respondents
    print(f"{respondents} respondents behind one address, default limits, one window")
    for content_addressed in (False, True):
        print(run(respondents, content_addressed))


if __name__ == "__main__":
    main()
