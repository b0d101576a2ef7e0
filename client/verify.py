"""Fetching a survey the respondent can trust: signed by the pinned key, within the ceilings."""

import base64
import math
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ldpsurvey.shared import Survey, SurveyError, parse_manifest, total_epsilon
from ldpsurvey.shared.budget import exceeds
from ldpsurvey.shared.manifest import key_id
from ldpsurvey.shared.randomizer import Thresholds, realized_epsilon, thresholds

from . import http
from .state import LocalState

DEFAULT_MAX_EPSILON = math.log(3)            # per question: at most 3x likelier either way
DEFAULT_MAX_TOTAL_EPSILON = 4 * math.log(3)  # per submission: four such questions


class TrustError(Exception):
    """The survey cannot be trusted or is above the respondent's ceilings; nothing is sent."""


@dataclass(frozen=True)
class Ceilings:
    per_question: float = DEFAULT_MAX_EPSILON
    total: float = DEFAULT_MAX_TOTAL_EPSILON


@dataclass(frozen=True)
class VerifiedSurvey:
    """A survey whose manifest verified, with the integer thresholds the randomizer uses and the
    epsilon those thresholds realize (recomputed here, never taken from the manifest)."""

    aggregator: str
    survey: Survey
    thresholds: dict[str, Thresholds]
    epsilon: dict[str, float]

    @property
    def total_epsilon(self) -> float:
        return total_epsilon(self.epsilon.values())


def aggregator_key(aggregator: str, state: LocalState, public_key: bytes | None) -> bytes:
    """The key to verify with: given explicitly, or pinned on first use for this URL. A key
    that differs from the pinned one is refused."""
    if public_key is not None:
        return public_key
    served = base64.b64decode(http.request("GET", f"{aggregator}/api/key").json()["public_key"])
    pinned = state.pinned_key(aggregator)
    if pinned is None:
        state.pin_key(aggregator, base64.b64encode(served).decode())
        return served
    if base64.b64decode(pinned) != served:
        raise TrustError(
            f"the aggregator at {aggregator} now presents a different signing key "
            f"({key_id(served)}) from the one this device pinned ({key_id(base64.b64decode(pinned))}). "
            "It may have been replaced or impersonated; nothing was sent. If the researchers "
            "announced a new key, pass it explicitly.")
    return served


def verify_manifest(raw: bytes, signature: bytes, public_key: bytes) -> Survey:
    """Parse the manifest only if the signature over exactly these bytes verifies."""
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, raw)
    except (InvalidSignature, ValueError):
        raise TrustError("the survey's signature does not verify with the aggregator's key: "
                         "its parameters may have been altered; nothing was sent") from None
    try:
        survey = parse_manifest(raw)
    except SurveyError as exc:
        raise TrustError(f"the signed survey is malformed: {exc}") from None
    if survey.key_id != key_id(public_key):
        raise TrustError("the survey names a different signing key than the one that signed it")
    return survey


def check_ceilings(aggregator: str, survey: Survey, ceilings: Ceilings) -> VerifiedSurvey:
    """Recompute each question's epsilon from its integer thresholds and refuse a survey above
    the respondent's per-question or total ceiling, explaining what was asked."""
    found = {q.id: thresholds(q.mechanism.alpha, q.mechanism.beta) for q in survey.questions}
    eps = {qid: realized_epsilon(t) for qid, t in found.items()}
    for qid, value in eps.items():
        if exceeds(value, ceilings.per_question):
            raise TrustError(
                f"question {qid!r} asks for epsilon {value:.4g}, above your ceiling of "
                f"{ceilings.per_question:.4g} per question: one answer could make a guess about "
                f"you {math.exp(value):.3g} times likelier, more than you allow; nothing was sent")
    verified = VerifiedSurvey(aggregator, survey, found, eps)
    if exceeds(verified.total_epsilon, ceilings.total):
        raise TrustError(
            f"the survey asks for a total epsilon of {verified.total_epsilon:.4g} over "
            f"{len(eps)} questions, above your ceiling of {ceilings.total:.4g} per submission; "
            "nothing was sent")
    return verified


def fetch_survey(aggregator: str, survey_id: str, state: LocalState,
                 ceilings: Ceilings = Ceilings(), public_key: bytes | None = None
                 ) -> VerifiedSurvey:
    """Fetch, verify and check a survey. Raises TrustError, http.ApiError or http.NetworkError."""
    aggregator = aggregator.rstrip("/")
    key = aggregator_key(aggregator, state, public_key)
    raw = http.request("GET", f"{aggregator}/api/surveys/{survey_id}").body
    signature = http.request("GET", f"{aggregator}/api/surveys/{survey_id}/manifest.sig").body
    survey = verify_manifest(raw, signature, key)
    if survey.survey_id != survey_id:
        raise TrustError("the aggregator served a different survey than the one asked for")
    return check_ceilings(aggregator, survey, ceilings)
