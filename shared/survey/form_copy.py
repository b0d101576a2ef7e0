"""The layout of a copy of a survey's form hosted elsewhere (`ldp-survey survey form`, written
by aggregator/web/hosted_form.py; read by `verify` and the extension): a folder s/<survey id>/
holding the form's page in each of the survey's languages, its files under assets/, and the
signed manifest, its signature and the aggregator's key beside them."""

from ldpsurvey.shared.survey.manifest import Survey

ASSETS = "assets"  # the folder of the form's modules and stylesheet, beside the pages
MANIFEST = "manifest.json"  # the signed manifest, byte for byte
SIGNATURE = "manifest.sig"  # its Ed25519 signature
KEY = "key.json"  # the aggregator's public key, as GET /api/key serves it


def page_name(survey: Survey, language: str) -> str:
    """The page of the form in `language`: index.html in the survey's first."""
    return "index.html" if language == survey.languages[0] else f"index.{language}.html"


def file_url(name: str) -> str:
    """An asset's URL from the pages: relative, so the copy can live under any path."""
    return f"./{ASSETS}/{name}"
