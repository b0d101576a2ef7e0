"""HTTP hardening: security headers on every response, cookie settings, the reverse proxy."""

import base64
import hashlib

from flask import Flask, current_app, g, has_app_context
from flask.sessions import SecureCookieSessionInterface
from werkzeug.middleware.proxy_fix import ProxyFix

# Only our own origin; no inline script (but, by its hash, an import map a page renders:
# allow_inline_script); forms may post only here; no framing.
CONTENT_SECURITY_POLICY = ("default-src 'self'; script-src 'self'; style-src 'self'; "
                           "img-src 'self' data:; connect-src 'self'; form-action 'self'; "
                           "frame-ancestors 'none'; base-uri 'none'; object-src 'none'")
HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    # Results, exports and pages stay out of every cache (a shared browser's too, after logout).
    "Cache-Control": "no-store",
}


def script_hash(text: str) -> str:
    """The hash-source (CSP Level 3) that lets a page run the inline script `text`, exactly
    these characters: 'sha256-' + base64(SHA-256(text))."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def allow_inline_script(text: str) -> None:
    """Let this response's page run the inline script `text` and no other: its hash joins
    script-src."""
    g.setdefault("inline_scripts", []).append(script_hash(text))


def allowed_inline_scripts() -> list[str]:
    """The hashes allow_inline_script gathered for this response (none outside a request)."""
    return g.get("inline_scripts", []) if has_app_context() else []


def content_security_policy(inline_scripts: list[str]) -> str:
    """CONTENT_SECURITY_POLICY with the hashes of the inline scripts a page may run."""
    return CONTENT_SECURITY_POLICY.replace(
        "script-src 'self'", " ".join(["script-src 'self'", *inline_scripts]), 1)


def hosted_policy(inline_scripts: list[str], api_origin: str) -> str:
    """The policy of a copy of the form another origin serves (hosted_form.py), for its meta
    element: content_security_policy's, but for connect-src, which also names the aggregator
    at `api_origin`, and without frame-ancestors, which a meta element cannot set (the host's
    own header can: docs/hosted-form.md)."""
    policy = content_security_policy(inline_scripts).replace(
        "connect-src 'self'", f"connect-src 'self' {api_origin}", 1)
    return "; ".join(part for part in policy.split("; ")
                     if not part.startswith("frame-ancestors"))


def add_headers(response):
    """HEADERS, each unless the view set it: one pass over the response's headers (werkzeug's
    setdefault raises and catches an exception for every header it does not find). The
    Content-Security-Policy allows the inline scripts the page allowed (allow_inline_script)."""
    present = {name.lower() for name, _ in response.headers}
    for name, value in HEADERS.items():
        if name.lower() not in present:
            response.headers.add(name, value if name != "Content-Security-Policy" else
                                 content_security_policy(allowed_inline_scripts()))
    return response


class CookieSessions(SecureCookieSessionInterface):
    """Flask's signed-cookie session, opened without building its signer when the request
    sends no session cookie, as API calls and respondents' requests do (Flask builds one for
    every request), and without parsing cookies when it sends no Cookie header (werkzeug's
    parse of an absent header was 4 % of a submission's instructions). Without a secret key,
    Flask's own (a null session)."""

    def open_session(self, app, request):
        if app.secret_key and ("HTTP_COOKIE" not in request.environ
                               or self.get_cookie_name(app) not in request.cookies):
            return self.session_class()
        return super().open_session(app, request)


def response_headers(config) -> list[tuple[str, str]]:
    """The headers add_headers and name_the_replica give a response, for one that Flask does
    not make (submissions.py)."""
    served_by = [("Served-By", config["SERVED_BY"])] if config["SERVED_BY"] else []
    return [*HEADERS.items(), *served_by]


def name_the_replica(response):
    """Served-By: the replica's name (SERVED_BY), so a deployment can tell replicas apart
    without a log line per request."""
    response.headers["Served-By"] = current_app.config["SERVED_BY"]
    return response


def init_app(app: Flask) -> None:
    """Headers on every response; the researcher session cookie HttpOnly, SameSite=Strict and,
    in production, Secure; trust X-Forwarded-* from exactly PROXY_HOPS reverse proxies."""
    app.after_request(add_headers)
    app.session_interface = CookieSessions()
    if app.config["SERVED_BY"]:
        app.after_request(name_the_replica)
    production = app.config["DEPLOYMENT"] == "production"
    app.config.update(SESSION_COOKIE_HTTPONLY=True, SESSION_COOKIE_SAMESITE="Strict",
                      SESSION_COOKIE_SECURE=production, SESSION_COOKIE_NAME="ldp_researcher")
    hops = int(app.config["PROXY_HOPS"])
    if hops:
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=hops, x_proto=hops, x_host=hops,
                                x_prefix=hops)
