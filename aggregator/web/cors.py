"""The CORS headers (WHATWG Fetch standard, "CORS protocol") that let a page at one of a
survey's form_origins (manifest /9: a copy of the form hosted elsewhere) read the answers to its
status request and its submission: the origin itself, never "*", and no credentials (the form
sends none). Whether an origin is listed is the caller's question (intake.hosts_form)."""

# What the form sends with a submission (form.js) and what a cross-origin page may read.
ALLOWED_HEADERS = "Content-Type, Idempotency-Key, Survey-Token"
EXPOSED_HEADERS = "Retry-After"
PREFLIGHT_MAX_AGE = "600"  # seconds a browser may reuse a preflight's yes (Chromium caps 7200)
# Every answer on a path that answers some origins differently says so to caches.
VARY = [("Vary", "Origin")]


def response_headers(origin: str) -> list[tuple[str, str]]:
    """An answer a page at `origin` may read."""
    return [("Access-Control-Allow-Origin", origin),
            ("Access-Control-Expose-Headers", EXPOSED_HEADERS)]


def preflight_headers(origin: str) -> list[tuple[str, str]]:
    """The yes to a preflight from `origin` for a submission."""
    return [("Access-Control-Allow-Origin", origin),
            ("Access-Control-Allow-Methods", "POST"),
            ("Access-Control-Allow-Headers", ALLOWED_HEADERS),
            ("Access-Control-Max-Age", PREFLIGHT_MAX_AGE)]
