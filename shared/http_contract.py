"""The HTTP API's contract: header formats, default limits, key roles, researcher names and
the release schedule (instants at the multiples of `release_every` since the Unix epoch).

One source for the aggregator that enforces them, the OpenAPI document that describes them and
the CLI whose option ranges follow them. Standard library only, so the respondent client and the
CLI can read it without the server's dependencies.
"""

import math
import re

IDEMPOTENCY_KEY = re.compile(r"[A-Za-z0-9_.:-]{8,128}")  # the Idempotency-Key header
SURVEY_TOKEN = re.compile(r"[A-Za-z0-9_-]{16,64}")       # the Survey-Token header
REPLAYED_HEADER = "Idempotent-Replayed"  # "true": a repeated Idempotency-Key, counted once

MAX_BATCH_RESPONSES = 10_000     # responses in one batch (default of the aggregator's setting)
MAX_TOKENS_PER_REQUEST = 10_000  # invitation tokens minted at once (likewise)

# Key roles: researchers publish and read their own and shared surveys; relay keys only submit
# batches to the surveys named when they were made; admin keys may do anything to any survey.
ROLES = ("researcher", "relay", "admin")
RESEARCHER_NAME = re.compile(r"[a-z0-9][a-z0-9._@-]{0,63}")  # a researcher's unique name
SESSION_HOURS = 12  # a results-page login lasts this long (default of the aggregator's setting)
# A CSV export's layouts (query `format`): plain (the default: a header of question ids, one row
# per response) and rr (the design in `#` comment lines first, for R's rr package).
EXPORT_FORMATS = ("plain", "rr")


def next_instant(now: float, every: float) -> float:
    """The first scheduled instant after `now` (seconds since the Unix epoch): the next
    multiple of `every`."""
    return (math.floor(now / every) + 1) * every


def schedule_words(every: float) -> str:
    """How often releases may happen, in words: "once an hour", "once every 10 minutes"."""
    for unit, seconds in (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1)):
        if every >= seconds and every % seconds == 0:
            count = int(every // seconds)
            return f"once {'an' if unit == 'hour' else 'a'} {unit}" if count == 1 else (
                f"once every {count} {unit}s")
    return f"once every {every:g} seconds"
