"""Aggregator addresses: one spelling per origin, and the invitation links respondents get.

`origin` normalizes what a respondent types, so that http://LocalHost:80/ and http://localhost
are one aggregator: scheme and host lower case, the host in IDNA (ASCII) form, the default port
dropped, no user name, query, fragment or trailing slash (a path prefix is kept, for a server
below one). Keys are pinned per origin; what a device remembers is kept per signing key.
"""

import urllib.parse
from dataclasses import dataclass

DEFAULT_PORTS = {"http": 80, "https": 443}
FORM_PATH = "/s/"  # the respondent form: <base>/s/<survey id>#t=<token>


def origin(url: str) -> str:
    """The normalized base URL of an aggregator. ValueError if it is not http(s)."""
    parts = urllib.parse.urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        raise ValueError(f"only http:// and https:// URLs with a host are allowed, got {url!r}")
    try:
        host = parts.hostname.encode("idna").decode("ascii").lower()
    except UnicodeError:
        raise ValueError(f"{parts.hostname!r} is not a valid host name") from None
    if ":" in host:
        host = f"[{host}]"  # an IPv6 address
    port = parts.port  # ValueError when it is not a number in range
    netloc = host if port in (None, DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    path = "/".join(segment for segment in parts.path.split("/") if segment)
    return f"{scheme}://{netloc}" + (f"/{path}" if path else "")


@dataclass(frozen=True)
class Link:
    """What a URL given to `respond` holds: the aggregator, and from an invitation link
    (<base>/s/<survey id>#t=<token>) the survey id and token."""

    base: str
    survey_id: str | None = None
    token: str | None = None


def parse_link(url: str) -> Link:
    """Split a respondent's link into aggregator, survey id and token; a plain aggregator URL
    gives only the base. ValueError if it is not http(s)."""
    parts = urllib.parse.urlsplit(url.strip())
    token = urllib.parse.parse_qs(parts.fragment).get("t", [None])[0]
    prefix, separator, survey_id = parts.path.rstrip("/").rpartition(FORM_PATH)
    if not separator or not survey_id or "/" in survey_id:
        return Link(origin(url), None, token)
    base = urllib.parse.urlunsplit((parts.scheme, parts.netloc, prefix, "", ""))
    return Link(origin(base), urllib.parse.unquote(survey_id), token)
