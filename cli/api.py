"""The one way CLI commands talk to an aggregator: an `Api` for its URL and researcher key.

Commands declare `--url` with `url_option` and receive the `Api` through `pass_api`
(click.make_pass_decorator). The key comes from LDP_SURVEY_KEY or is asked for without echo,
and only when a request needs it; there is deliberately no --key flag (it would leak into shell
history and `ps`). Every failure becomes one clear line and a non-zero exit. Everything the
server says reaches the command `terminal.clean`ed: the strings of its JSON and its errors.
"""

import ipaddress
import os
import sys
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from ldpsurvey.cli.terminal import clean, clean_json
from ldpsurvey.client import http

KEY_VARIABLE = "LDP_SURVEY_KEY"
URL_VARIABLE = "LDP_SURVEY_URL"


class ServerResponse(http.Response):
    """A response whose JSON is safe to print: every string in it `clean`ed (`body` is raw,
    for what needs the exact bytes, such as a signature check)."""

    def json(self) -> Any:
        return clean_json(super().json())


class Api:
    """The aggregator at `url`, called with a researcher key when a request needs one."""

    def __init__(self, url: str, key: str | None = None):
        self.url = url.rstrip("/")
        self._key = key

    @property
    def key(self) -> str:
        """The key given, else $LDP_SURVEY_KEY, else asked for at the terminal (without one:
        a one-line error, never a prompt that cannot be answered)."""
        if self._key is None:
            self._key = os.environ.get(KEY_VARIABLE)
        if self._key is None:
            if not can_prompt():
                raise click.ClickException(f"this needs a researcher key: set {KEY_VARIABLE} "
                                           "(there is no terminal to ask at)")
            # on stderr: stdout is the command's output (an id, links, a JSON document)
            self._key = click.prompt("Researcher key", hide_input=True, err=True)
        return self._key

    def call(self, method: str, path: str, *, auth: bool | None = True,
             headers: dict[str, str] | None = None, **kwargs: Any) -> ServerResponse:
        """`method` `path` (below the URL). auth=True sends the key; False sends none; None
        sends the key if one is known, else tries without and asks for one only on a 401."""
        headers = dict(headers or {})
        if auth or (auth is None and (self._key or os.environ.get(KEY_VARIABLE))):
            headers["Authorization"] = f"Bearer {self.key}"
        with one_line_errors(key_sent="Authorization" in headers):
            try:
                response = http.request(method, self.url + path, headers=headers, **kwargs)
                return ServerResponse(response.status, response.headers, response.body)
            except http.ApiError as exc:
                if auth is None and exc.status == 401 and "Authorization" not in headers:
                    return self.call(method, path, headers=headers, **kwargs)
                raise

    @contextmanager
    def stream(self, path: str) -> Iterator[Iterator[bytes]]:
        """GET `path` with the key and yield its body piece by piece (constant memory)."""
        with one_line_errors(key_sent=True), http.stream(
                self.url + path, headers={"Authorization": f"Bearer {self.key}"}) as pieces:
            yield pieces

    def get(self, path: str, **kwargs: Any) -> ServerResponse:
        return self.call("GET", path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> ServerResponse:
        return self.call("POST", path, **kwargs)


def can_prompt() -> bool:
    """Whether a person can answer a prompt: standard input is a terminal."""
    return sys.stdin.isatty()


@contextmanager
def one_line_errors(key_sent: bool) -> Iterator[None]:
    """Turn a refused request, a network failure or a bad URL into one clean line and exit 1."""
    try:
        yield
    except http.ApiError as exc:
        raise click.ClickException(clean(explained(exc, key_sent))) from None
    except (http.NetworkError, ValueError) as exc:
        raise click.ClickException(clean(str(exc))) from None


def explained(exc: "http.ApiError", key_sent: bool) -> str:
    """The server's error in words for this command line: a refused key says which key was
    used and how to set another."""
    if exc.status == 401 and key_sent:
        return (f"the aggregator did not accept the researcher key ({KEY_VARIABLE} or the one "
                f"typed): set {KEY_VARIABLE} to a key from `ldp-survey admin create-key`")
    return str(exc)


def is_loopback(host: str) -> bool:
    """localhost, 127.0.0.0/8 or ::1: this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_url(url: str, insecure_http: bool = False) -> str:
    """The URL, if it is https, or plain http to this machine; plain http elsewhere would show
    answers, keys and invitation tokens to the network, so it needs --insecure-http."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if parts.scheme == "https" or (parts.scheme == "http" and (
            insecure_http or is_loopback(host))):
        return url.rstrip("/")
    if parts.scheme == "http":
        raise click.BadParameter(f"{url} is plain http to another machine: use https://, or "
                                 "--insecure-http if you really mean it", param_hint="'--url'")
    raise click.BadParameter(f"{url} is not an http(s) URL", param_hint="'--url'")


def _make_api(ctx: click.Context, _param: click.Parameter, url: str) -> str:
    ctx.obj = Api(check_url(url, ctx.meta.get("ldp_insecure_http", False)))
    return url


def _allow_insecure_http(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    ctx.meta["ldp_insecure_http"] = value
    return value


def url_option(command):
    """--url (or $LDP_SURVEY_URL), checked by check_url, and --insecure-http."""
    command = click.option("--url", required=True, envvar=URL_VARIABLE, show_envvar=True,
                           callback=_make_api, expose_value=False,
                           help="The aggregator's base URL, e.g. https://survey.example.org "
                                "(plain http only to this machine).")(command)
    return click.option("--insecure-http", is_flag=True, is_eager=True, expose_value=False,
                        callback=_allow_insecure_http,
                        help="Allow a plain http:// URL to another machine.")(command)


pass_api = click.make_pass_decorator(Api)
