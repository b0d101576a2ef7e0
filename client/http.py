"""A small JSON-over-HTTP helper on the standard library, with errors explained in plain words."""

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

PLAIN_WORDS = {
    400: "the server could not read the request",
    401: "the server needs a valid key for this",
    403: "this key is not allowed to do that",
    404: "the server does not know this survey or address",
    409: "the server refused because of a conflict",
    413: "the request is too large for the server",
    415: "the request was sent in a format the server does not accept",
    422: "the server refused the content of the request",
    429: "the server is receiving too many requests; try again later",
}


class ApiError(Exception):
    """The server answered with an error status; `code` and `detail` come from its JSON body."""

    def __init__(self, status: int, code: str, detail: str):
        self.status, self.code, self.detail = status, code, detail
        summary = PLAIN_WORDS.get(status, f"the server answered with HTTP {status}")
        super().__init__(f"{summary}: {detail}" if detail else summary)


class NetworkError(ConnectionError):
    """The server could not be reached (after any retries)."""


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]
    body: bytes
    url: str = ""  # where it came from, after any redirects (as a browser's address bar)

    def json(self) -> Any:
        return json.loads(self.body)


def request(method: str, url: str, *, json_body: Any = None, headers: dict[str, str] | None = None,
            timeout: float = 30.0, retries: int = 0, backoff: float = 0.5,
            padded_size: int = 0, json_text: bytes | None = None) -> Response:
    """Send one request; retry network failures (never HTTP errors) up to `retries` times with
    the same headers, so an Idempotency-Key makes the retries safe. The JSON body, `json_body`
    encoded or `json_text` as given (already encoded), is padded with spaces to `padded_size`
    bytes (ValueError if it is longer)."""
    _check_scheme(url)
    headers = dict(headers or {})
    data = None
    if json_body is not None and json_text is not None:
        raise ValueError("a request has one body: json_body or json_text")
    if json_body is not None:
        json_text = json_bytes(json_body)
    if json_text is not None:
        data = padded(json_text, padded_size)
        headers["Content-Type"] = "application/json"
    for attempt in range(retries + 1):
        # S310: the scheme was checked above
        req = urllib.request.Request(url, data=data, headers=headers, method=method)  # noqa: S310
        try:
            with urllib.request.urlopen(req, timeout=timeout) as response:  # noqa: S310  # nosec B310
                return Response(response.status, dict(response.headers), response.read(),
                                response.geturl())
        except urllib.error.HTTPError as exc:
            raise _api_error(exc) from None
        except NETWORK_ERRORS as exc:
            if attempt == retries:
                raise _network_error(url, exc) from None
            time.sleep(backoff * 2**attempt)
    raise AssertionError("unreachable")


BODY_SIZE_CLASS = 256  # padded bodies are a whole number of these many bytes


def json_bytes(value: Any) -> bytes:
    """A request's JSON body as sent (before padding)."""
    return json.dumps(value).encode()


def size_class(length: int) -> int:
    """`length` rounded up to a whole BODY_SIZE_CLASS."""
    return -(-length // BODY_SIZE_CLASS) * BODY_SIZE_CLASS


def padded(data: bytes, size: int) -> bytes:
    """`data` followed by spaces up to `size` bytes: JSON allows whitespace after its value, so
    the server reads the same document, while the size on the wire is the same for every body
    padded to `size`. ValueError if `data` is longer (its size would tell it apart)."""
    if len(data) > size > 0:
        raise ValueError(f"a body of {len(data)} bytes does not fit the padded size {size}")
    return data.ljust(size, b" ")


@contextmanager
def stream(url: str, *, headers: dict[str, str] | None = None,
           timeout: float = 30.0) -> Iterator[Iterator[bytes]]:
    """GET `url` and yield its body as an iterator of pieces, read as they arrive, so a body
    of any size passes in constant memory. ApiError, NetworkError, ValueError (scheme)."""
    _check_scheme(url)
    req = urllib.request.Request(url, headers=headers or {})  # noqa: S310
    try:
        response = urllib.request.urlopen(req, timeout=timeout)  # noqa: S310  # nosec B310
    except urllib.error.HTTPError as exc:
        raise _api_error(exc) from None
    except NETWORK_ERRORS as exc:
        raise _network_error(url, exc) from None
    with response:
        yield iter(lambda: response.read(STREAM_PIECE), b"")


STREAM_PIECE = 64 * 1024
NETWORK_ERRORS = (urllib.error.URLError, ConnectionError, TimeoutError)


def _check_scheme(url: str) -> None:
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"only http:// and https:// URLs are allowed, got {url!r}")


def _network_error(url: str, exc: Exception) -> NetworkError:
    return NetworkError(f"could not reach {url}: {getattr(exc, 'reason', exc)}")


def _api_error(exc: urllib.error.HTTPError) -> ApiError:
    body = exc.read()
    try:
        payload = json.loads(body)
        return ApiError(exc.code, str(payload.get("error", "")), str(payload.get("detail", "")))
    except (ValueError, AttributeError):
        return ApiError(exc.code, "", "")
