"""Aggregator addresses: one spelling per origin, and the invitation links respondents get.

`origin` normalizes what a respondent types, so that http://LocalHost:80/ and http://localhost
are one aggregator: scheme and host lower case, the host percent-decoded and in IDNA (ASCII)
form without a trailing dot, IP addresses in one standard form, the default port dropped, no
user name, query, fragment or trailing slash, dot segments resolved (a path prefix is kept, for
a server below one). Keys are pinned per origin; what a device remembers is kept per signing key.
"""

import ipaddress
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
    host = canonical_host(urllib.parse.unquote(parts.hostname))
    port = parts.port  # ValueError when it is not a number in range
    netloc = host if port in (None, DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    path = "/".join(resolved_path(parts.path))
    return f"{scheme}://{netloc}" + (f"/{path}" if path else "")


def canonical_host(host: str) -> str:
    """One spelling per host: an IP address in its standard form (IPv4 in dotted decimal, from
    any form inet_aton reads: 127.1, 0x7f.1, 017700000001, 2130706433; IPv6 compressed in
    brackets, an IPv4-mapped one as its IPv4), a name in lower-case IDNA without the trailing
    dot of the DNS root. ValueError for a name that is neither."""
    try:
        address = ipaddress.IPv6Address(host)
        return str(address.ipv4_mapped) if address.ipv4_mapped else f"[{address.compressed}]"
    except ValueError:
        pass
    name = host[:-1] if host.endswith(".") else host
    try:
        name = name.encode("idna").decode("ascii").lower()
    except UnicodeError:
        raise ValueError(f"{host!r} is not a valid host name") from None
    numeric = ipv4_numbers(name)
    return str(numeric) if numeric else name


def ipv4_numbers(name: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address inet_aton reads in `name` (1 to 4 parts, each decimal, 0x hex or
    0-led octal, the last filling the remaining bytes), None if a part is not a number.
    ValueError for numbers out of range."""
    parts = name.split(".")
    try:
        numbers = [int(p, 16) if p[:2] == "0x" else int(p, 8) if p[:1] == "0" and len(p) > 1
                   else int(p, 10) for p in parts]
    except ValueError:
        return None
    last_bits = 8 * (5 - len(parts))
    if len(parts) > 4 or any(n > 255 for n in numbers[:-1]) or numbers[-1] >= 2**last_bits:
        raise ValueError(f"{name!r} is not a valid IPv4 address")
    value = numbers[-1]
    for index, number in enumerate(numbers[:-1]):
        value |= number << 8 * (3 - index)
    return ipaddress.IPv4Address(value)


def resolved_path(path: str) -> list[str]:
    """The path's segments without empty ones, with '.' dropped and '..' removing the segment
    before it (RFC 3986 section 5.2.4)."""
    segments: list[str] = []
    for segment in path.split("/"):
        if segment == "..":
            segments = segments[:-1]
        elif segment not in ("", "."):
            segments.append(segment)
    return segments


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
