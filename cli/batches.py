"""Many responses sent as batches (POST .../responses/batch) in constant memory: rows of
randomized answers, encoded as they come, cut into batches and sent by a few threads while
the next batch is encoded, each with its own Idempotency-Key (retries are safe)."""

import secrets
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from ldpsurvey.cli.api import Api
from ldpsurvey.shared.mechanisms.protocol import Report, encode_many

SENDERS = 4  # batches in flight at once to an aggregator at --url (embedded.senders() to the mock's)


def response_rows(ids: Sequence[str], columns: Sequence[Sequence[Report]]) -> list[str]:
    """Each respondent's response as JSON, {"answers": {"<question id>": report, ...}}, from
    one column of reports per question (question ids are [a-z0-9_]: no escaping needed;
    reports as scheme.encode writes them)."""
    template = '{"answers":{' + ",".join(f'"{qid}":%s' for qid in ids) + "}}"
    return [template % row for row in zip(*map(encode_many, columns), strict=True)]


def cut(chunks: Iterable[list[str]], size: int) -> Iterator[list[str]]:
    """The rows of `chunks`, in order, in lists of `size` (the last one shorter)."""
    held: list[str] = []
    for rows in chunks:
        held.extend(rows)
        while len(held) >= size:
            yield held[:size]
            del held[:size]
    if held:
        yield held


def body(rows: list[str]) -> bytes:
    """A batch request's JSON body: {"responses": [<row>, ...]}."""
    return b'{"responses":[' + ",".join(rows).encode() + b"]}"


def send(api: Api, path: str, batches: Iterable[list[str]],
         progress: Callable[[int], None], senders: int = SENDERS) -> None:
    """POST each batch to `path` with the researcher key, at most `senders` at once, the next
    one encoded meanwhile; `progress(n)` after each batch of n is stored. The first failure stops
    the sending and is raised (batches already sent stay stored, as before)."""
    with ThreadPoolExecutor(senders, thread_name_prefix="ldp-survey-batch") as pool:
        flying: set[Future] = set()
        try:
            for rows in batches:
                if len(flying) >= senders:
                    flying = _settle(flying, progress, FIRST_COMPLETED)
                flying.add(pool.submit(_post, api, path, body(rows), len(rows)))
            _settle(flying, progress)
        except BaseException:
            for future in flying:
                future.cancel()
            raise


def _post(api: Api, path: str, data: bytes, count: int) -> int:
    api.post(path, json_text=data, headers={"Idempotency-Key": secrets.token_urlsafe(18)},
             retries=3)
    return count


def _settle(flying: set[Future], progress: Callable[[int], None],
            until: str = "ALL_COMPLETED") -> set[Future]:
    """Wait for one (FIRST_COMPLETED) or all of the requests in flight; report each done, raise
    the first failure; the ones still in flight."""
    done, flying = wait(flying, return_when=until)
    for future in done:
        progress(future.result())
    return flying
