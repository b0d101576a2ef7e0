"""Checking a respondent page against what its survey signed (`ldp-survey verify URL`): the
page at <base>/s/<id>, or a copy of the form another origin hosts (`survey form`, any other
URL: its manifest beside it must be the one the aggregator signs, and the survey must list its
origin in form_origins), every script, module and stylesheet it loads (its tags, its import map
and, recursively, every module's imports), each compared by SHA-384 with the digests the
survey's manifest signs (format /8, field `form`) and with those of this installation's
release (form_integrity.release_digests). Nothing here answers, pins or remembers anything.

What it proves: the code this machine was served is the code that was signed and the code of
a published release. What it cannot: that a browser elsewhere, at another time, was served the
same (a server can tell `verify` from a browser); the extension (extension/) checks in the
respondent's own browser."""

import base64
import json
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser

from ldpsurvey.client import http
from ldpsurvey.client.state import LocalState
from ldpsurvey.client.urls import parse_link
from ldpsurvey.client.verify import TrustError, check_origin, verify_manifest
from ldpsurvey.shared import Survey
from ldpsurvey.shared.survey import form_copy
from ldpsurvey.shared.survey.form_integrity import module_imports, release_digests, sri
from ldpsurvey.shared.survey.manifest import key_id, parse_manifest, web_origin

IMPORT_MAP = "importmap"
# Script elements a browser never runs (HTML's data blocks): the form's words, as JSON.
DATA_BLOCKS = frozenset({"application/json"})
MAX_FILES = 64  # a page that loads more than this is not the form
# A copy's page in a language as this release writes it, given its survey and the aggregator's
# release schedule in seconds (aggregator/web/hosted_form.render, encoded).
PageRenderer = Callable[[Survey, str, float], bytes]


@dataclass
class Loaded:
    """One file the page loads: where, its name, how it is loaded, the integrity the page
    declares for it (its tag's attribute or the import map's entry), its digest as served,
    and the digests the survey signs and the release ships for its name."""

    url: str
    name: str
    kind: str  # "stylesheet", "script", "module"
    declared: str | None = None
    served: str | None = None
    signed: str | None = None
    released: str | None = None

    @property
    def matches(self) -> bool:
        return self.served is not None and self.served == self.signed == self.released \
            and self.declared == self.signed


@dataclass
class Audit:
    """What `verify` found: the survey, its key and whether it is the one expected, every file
    the page loads, and each problem in plain words (none: everything matches)."""

    url: str
    survey_id: str
    release: str
    key_id: str | None = None
    key_checked_against: str | None = None  # "pinned", "given" or None (first sight)
    files: list[Loaded] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    aggregator: str | None = None  # a copy's: where its answers go
    copy_checks: list[str] = field(default_factory=list)  # what held of a copy, in words

    @property
    def matches(self) -> bool:
        return not self.problems

    def as_json(self) -> dict:
        return {"url": self.url, "survey_id": self.survey_id, "release": self.release,
                "key_id": self.key_id, "key_checked_against": self.key_checked_against,
                "matches": self.matches, "problems": self.problems,
                "aggregator": self.aggregator, "copy_checks": self.copy_checks,
                "files": [{"url": f.url, "name": f.name, "kind": f.kind, "declared": f.declared,
                           "served": f.served, "signed": f.signed, "released": f.released,
                           "matches": f.matches} for f in self.files]}


class PageReader(HTMLParser):
    """The scripts, stylesheets and import maps of a page, and anything else that would run
    code: an inline script that is not an import map or a JSON data block, an event-handler
    attribute."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, str, str | None]] = []  # (kind, url, integrity)
        self.survey: dict[str, str | None] = {}  # the form's element's attributes
        self.import_maps: list[str] = []
        self.inline: list[str] = []  # what runs without a file: problems, in words
        self._script: str | None = None  # the type of an open inline script
        self._text: list[str] = []

    def handle_starttag(self, tag, attrs):
        values = dict(attrs)
        handlers = sorted(name for name in values if name.startswith("on"))
        if handlers:
            self.inline.append(f"a <{tag}> has the event handler {handlers[0]}")
        rel = (values.get("rel") or "").lower().split()
        if values.get("id") == "survey" and not self.survey:
            self.survey = values
        if tag == "script" and values.get("src"):
            kind = "module" if (values.get("type") or "").lower() == "module" else "script"
            self.tags.append((kind, values["src"], values.get("integrity")))
        elif tag == "script":
            self._script, self._text = (values.get("type") or "").lower(), []
        elif tag == "link" and "stylesheet" in rel:
            self.tags.append(("stylesheet", values.get("href") or "", values.get("integrity")))
        elif tag == "link" and "modulepreload" in rel:
            self.tags.append(("module", values.get("href") or "", values.get("integrity")))

    def handle_data(self, data):
        if self._script is not None:
            self._text.append(data)

    def handle_endtag(self, tag):
        if tag == "script" and self._script is not None:
            text = "".join(self._text)
            if self._script == IMPORT_MAP:
                self.import_maps.append(text)
            elif self._script not in DATA_BLOCKS and text.strip():
                self.inline.append("the page runs an inline script")
            self._script = None


def audit(url: str, state: LocalState | None = None, public_key: bytes | None = None,
          render_page: PageRenderer | None = None) -> Audit:
    """Check the respondent page at `url`: a copy of the form (its page reads its manifest
    from beside it: data-manifest-url), at the address a browser ends at after any redirects,
    else the aggregator's <base>/s/<id>. The key must be `public_key` when given, else the one
    this device pinned for the aggregator, if any. A copy's pages are compared with what
    `render_page` makes (hosted_form.render: the server extra). ValueError for a URL that is
    neither; http.ApiError, http.NetworkError when it cannot be fetched."""
    link = parse_link(url)
    release = release_digests()
    given = urllib.parse.urlsplit(url.strip())._replace(fragment="").geturl()
    try:
        fetched = http.request("GET", given)
        page, where = fetched.body, fetched.url or given
    except http.ApiError:  # the aggregator's page of a closed survey (410), say
        fetched, page, where = None, b"", given
    reader = PageReader()
    reader.feed(page.decode("utf-8", "replace"))
    if "data-manifest-url" in reader.survey and "data-preview" not in reader.survey:
        result = audit_copy(where, page, reader.survey, state, public_key, release, render_page)
        if fetched and any(name.lower() == "refresh" for name in fetched.headers):
            result.problems.append("the copy's page comes with a Refresh header, which takes a "
                                   "browser on to an address not checked here")
        return result
    if link.survey_id is None:
        raise ValueError(f"{url} is neither a survey page (https://HOST/s/SURVEY_ID) nor a "
                         "copy of a survey's form")
    page_url = f"{link.base}/s/{urllib.parse.quote(link.survey_id)}"
    result = Audit(page_url, link.survey_id, release["release"])
    try:
        signed = signed_survey(link.base, link.survey_id, state, public_key)
    except TrustError as exc:
        result.problems.append(str(exc))
        return result
    survey, result.key_id, result.key_checked_against = (
        signed.survey, key_id(signed.public_key), signed.checked_against)
    if not signs_form(survey, result):
        return result
    if given != page_url or not page:  # the page at its own address
        page = http.request("GET", page_url).body
    check_page(page_url, page, survey.form, release["form"], result)
    return result


def audit_copy(url: str, page: bytes, element: dict, state: LocalState | None,
               public_key: bytes | None, release: dict, render_page: PageRenderer | None
               ) -> Audit:
    """Check the copy of a form whose `page`, at `url`, has the form's `element`: the
    manifest beside it (form_copy.py's layout) must be, byte for byte, the one the aggregator
    at its signed origin signs, and the signature and key beside it the aggregator's; the
    survey must list the page's origin in form_origins; the files the page loads are checked
    as the aggregator's page's, and each of its pages must be, byte for byte, the page this
    release writes (`render_page`): a page can change what the form reads or where it sends
    without changing a file (a <base> element, a second form element, its policy)."""
    survey_id, manifest_url = element.get("data-survey-id"), element.get("data-manifest-url")
    result = Audit(url, survey_id or "", release["release"])
    if not survey_id or manifest_url != form_copy.MANIFEST:
        result.problems.append(f"the copy's page must read its survey's manifest from "
                               f"{form_copy.MANIFEST} beside it")
        return result
    folder = urllib.parse.urljoin(url, "./")
    copied = http.request("GET", folder + form_copy.MANIFEST).body
    try:
        origin = parse_manifest(copied).origin
        if origin is None:
            raise TrustError("the copy's manifest names no origin to check it at")
        signed = signed_survey(origin, survey_id, state, public_key)
    except (TrustError, ValueError) as exc:  # a SurveyError is a ValueError
        result.problems.append(f"the copy's manifest cannot be checked: {exc}")
        return result
    survey, result.aggregator, here = signed.survey, origin, web_origin(url)
    result.key_id, result.key_checked_against = key_id(signed.public_key), signed.checked_against
    checks = [  # (whether it holds, in words if it does, if it does not)
        (copied == signed.raw, f"its manifest is, byte for byte, the one {origin} signs",
         f"the copy's manifest differs from the one {origin} signs"),
        (same_key_files(folder, signed), f"the signature and key beside it are {origin}'s",
         f"the signature or key beside the copy is not {origin}'s (the extension checks the "
         "copy with them)"),
        (here in survey.form_origins, f"the survey lists {here} in form_origins",
         f"the survey does not list {here} in form_origins: its form refuses to run there and "
         "the aggregator refuses answers from it")]
    if signs_form(survey, result):
        check_page(url, page, survey.form, release["form"], result)
        checks.append(same_pages(folder, page, element.get("data-language"), survey, origin,
                                 release["release"], render_page))
    result.copy_checks = [said for holds, said, _ in checks if holds]
    result.problems.extend(refused for holds, _, refused in checks if not holds)
    return result


def same_pages(folder: str, page: bytes, language: str | None, survey: Survey, origin: str,
               release: str, render_page: PageRenderer | None) -> tuple[bool, str, str]:
    """Whether the `page` fetched (in its `language`) and each page of the copy by name (one
    per language) are, byte for byte, what `render_page` makes of the survey and the
    aggregator's release schedule; in words if so, if not."""
    names = [form_copy.page_name(survey, tag) for tag in survey.languages]
    if render_page is None:
        return (False, "", "comparing a copy's pages with those this release writes needs the "
                "'server' extra: pip install 'ldp-survey[server]'")
    every = http.request("GET", f"{origin}/api/surveys/{urllib.parse.quote(survey.survey_id)}"
                         "/status").json()["release_every"]
    written = {tag: render_page(survey, tag, every) for tag in survey.languages}
    same = page == written.get(language) and all(
        http.request("GET", folder + name).body == written[tag]
        for tag, name in zip(survey.languages, names, strict=True))
    return (same, f"its pages ({', '.join(names)}) are, byte for byte, those ldp-survey "
            f"{release} writes for this survey",
            f"the copy's pages are not those ldp-survey {release} writes for this survey: a page "
            "can change what the form reads or where it sends without changing any file (a "
            "<base> element, another form element, its policy)")


def same_key_files(folder: str, signed: "Signed") -> bool:
    """Whether the signature and key beside a copy (form_copy.SIGNATURE, KEY) are the
    aggregator's: the extension checks the copy's manifest with them."""
    signature = http.request("GET", folder + form_copy.SIGNATURE).body
    try:
        key = base64.b64decode(http.request("GET", folder + form_copy.KEY).json()["public_key"])
    except (ValueError, KeyError, TypeError):
        return False
    return signature == signed.signature and key == signed.public_key


def signs_form(survey: Survey, result: Audit) -> bool:
    """Whether the survey signs its form's digests; if not, say so in `result`."""
    if survey.form is None:
        result.problems.append("the survey's manifest signs no digests of its form (it was "
                               "published before format /8): there is nothing to check the "
                               "page against")
    return survey.form is not None


@dataclass(frozen=True)
class Signed:
    """A survey's manifest as the aggregator serves it, verified: the survey, its exact bytes,
    their signature, the key that verified it and what that key was checked against ("given",
    "pinned", or None: nothing)."""

    survey: Survey
    raw: bytes
    signature: bytes
    public_key: bytes
    checked_against: str | None


def signed_survey(base: str, survey_id: str, state: LocalState | None,
                  public_key: bytes | None) -> Signed:
    """The survey's manifest, verified with the served key, which must be `public_key` if
    given, else the key pinned for `base`, if any; signed for `base` and this survey id.
    TrustError."""
    served = base64.b64decode(http.request("GET", f"{base}/api/key").json()["public_key"])
    expected, source = public_key, "given"
    if expected is None and state is not None:
        expected, source = state.pinned_key(base), "pinned"
    if expected is not None and expected != served:
        raise TrustError(f"the aggregator presents the signing key {key_id(served)}, not the "
                         f"{source} key {key_id(expected)}: it may have been replaced or "
                         "impersonated")
    raw = http.request("GET", f"{base}/api/surveys/{urllib.parse.quote(survey_id)}").body
    signature = http.request(
        "GET", f"{base}/api/surveys/{urllib.parse.quote(survey_id)}/manifest.sig").body
    survey = verify_manifest(raw, signature, served)
    if survey.survey_id != survey_id:
        raise TrustError("the aggregator served another survey's manifest")
    check_origin(survey, base)
    return Signed(survey, raw, signature, served, source if expected is not None else None)


def check_page(page_url: str, page: bytes, signed: dict[str, str], released: dict[str, str],
               result: Audit) -> None:
    """Fill `result` with every file the page loads and every problem: a file that is not
    signed, differs from its signed or released digest, or loads without the signed integrity;
    a signed file the page does not load; code that runs without a file; an import map that
    remaps modules; a file from another origin."""
    reader = PageReader()
    reader.feed(page.decode("utf-8", "replace"))
    result.problems.extend(reader.inline)
    integrity = import_map_integrity(page_url, reader.import_maps, result.problems)
    pending = [(kind, urllib.parse.urljoin(page_url, src), declared)
               for kind, src, declared in reader.tags]
    seen: dict[str, Loaded] = {}
    while pending and len(seen) < MAX_FILES:
        kind, url, declared = pending.pop(0)
        if url in seen:
            seen[url].declared = seen[url].declared or declared
            continue
        name = urllib.parse.urlsplit(url).path.rpartition("/")[2]
        loaded = Loaded(url, name, kind, declared or integrity.get(url), signed=signed.get(name),
                        released=released.get(name))
        seen[url] = loaded
        if web_origin_of(url) != web_origin_of(page_url):
            result.problems.append(f"the page loads {url} from another origin")
            continue
        body = http.request("GET", url).body
        loaded.served = sri(body)
        if kind == "module":
            pending.extend(("module", urllib.parse.urljoin(url, specifier), None)
                           for specifier in module_imports(body))
    result.files = list(seen.values())
    result.problems.extend(file_problems(result.files, signed, released, result.release))


def file_problems(files: list[Loaded], signed: dict[str, str], released: dict[str, str],
                  release: str) -> list[str]:
    """The problems of each loaded file, in words, then the signed files not loaded."""
    problems = []
    for file in files:
        if file.served is None:
            continue  # another origin: said already
        if file.signed is None:
            problems.append(f"the page loads {file.name} ({file.url}), which the survey does "
                            "not sign")
        elif file.served != file.signed:
            problems.append(f"{file.name} as served differs from the digest the survey signs")
        if file.signed is not None and file.declared != file.signed:
            problems.append(f"the page loads {file.name} without the signed integrity, so a "
                            "browser would not refuse other bytes")
        if file.released is None:
            problems.append(f"{file.name} is not a file of ldp-survey {release}'s form")
        elif file.served != file.released:
            problems.append(f"{file.name} as served differs from ldp-survey {release}'s")
    loaded = {file.name for file in files}
    problems.extend(f"the page does not load {name}, which the survey signs"
                    for name in sorted(set(signed) - loaded))
    if signed != released:
        problems.append(f"the digests the survey signs are not those of ldp-survey {release}'s "
                        "form")
    return problems


def import_map_integrity(page_url: str, maps: list[str], problems: list[str]) -> dict[str, str]:
    """The integrity entries of the page's import map, by absolute URL. An import map that
    remaps modules (imports, scopes) or a second one is a problem: it could load other code
    under a checked name."""
    if len(maps) > 1:
        problems.append("the page has more than one import map")
    entries: dict[str, str] = {}
    for text in maps[:1]:
        try:
            document = json.loads(text)
        except ValueError:
            problems.append("the page's import map is not JSON")
            continue
        if not isinstance(document, dict) or set(document) - {"integrity"}:
            problems.append("the page's import map remaps modules (it has more than integrity)")
            continue
        listed = document.get("integrity", {})
        entries = {urllib.parse.urljoin(page_url, str(url)): value for url, value in
                   (listed.items() if isinstance(listed, dict) else [])}
    return entries


def web_origin_of(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()
