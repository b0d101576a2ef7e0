"""Fetching a survey the respondent can trust and answer: signed by the key pinned for the
aggregator's origin, within the ceilings, open, and within the device's lifetime budget."""

import base64
import hashlib
import json
import math

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ldpsurvey.client import http, ledger
from ldpsurvey.client.ceilings import DEFAULTS, Ceilings
from ldpsurvey.client.state import LocalState
from ldpsurvey.client.urls import origin
from ldpsurvey.client.verified import VerifiedSurvey
from ldpsurvey.shared import Survey, SurveyError, parse_manifest
from ldpsurvey.shared.mechanisms.budget import exceeds
from ldpsurvey.shared.mechanisms.randomizer import thresholds
from ldpsurvey.shared.survey.manifest import check_instantaneous, key_id, web_origin


class TrustError(Exception):
    """The survey cannot be trusted or is above the respondent's ceilings; nothing is sent."""


class SurveyUnavailable(Exception):
    """The survey takes no answer from this device now: it is closed, or it needs the
    invitation link. Checked before any question is asked."""


def aggregator_key(aggregator: str, state: LocalState, public_key: bytes | None
                   ) -> tuple[bytes, bool]:
    """The key to verify with, and whether to pin it once a manifest verifies: a key given
    explicitly (accepted for this origin), or the served key on first use. A served key that
    differs from the pinned one is refused."""
    if public_key is not None:
        return public_key, public_key != state.pinned_key(aggregator)
    served = base64.b64decode(http.request("GET", f"{aggregator}/api/key").json()["public_key"])
    pinned = state.pinned_key(aggregator)
    if pinned is None:
        return served, True
    if pinned != served:
        raise TrustError(
            f"the aggregator at {aggregator} now presents a different signing key "
            f"({key_id(served)}) from the one this device pinned ({key_id(pinned)}). It may "
            "have been replaced or impersonated; nothing was sent. If its researchers announced "
            "a new key, pass it with --public-key (what this device kept for the old key moves "
            f"to it), or delete what was kept for the old key with `ldp-survey privacy --forget "
            f"{key_id(pinned)}`.")
    return served, False


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


def check_origin(survey: Survey, aggregator: str) -> None:
    """TrustError unless the survey was fetched from the origin its manifest is signed for (a
    manifest before format /5 names none: nothing to check)."""
    if survey.origin is not None and origin(survey.origin) != origin(web_origin(aggregator)):
        raise TrustError(f"the survey is signed for {survey.origin} but was fetched from "
                         f"{aggregator}: answer it at {survey.origin}; nothing was sent")


def check_ceilings(aggregator: str, survey: Survey, ceilings: Ceilings) -> VerifiedSurvey:
    """Recompute each question's epsilon from its integer randomizer and refuse a survey above
    the respondent's per-question or total ceiling, explaining what was asked, or with a
    concept's instantaneous layer above the bound (manifest.check_instantaneous)."""
    concepts = [q for q in survey.questions if q.concept is not None]
    found = {q.id: q.scheme.thresholds for q in concepts}
    layers = {q.id: thresholds(q.instantaneous.alpha, q.instantaneous.beta) for q in concepts}
    eps = {q.id: q.scheme.realized_epsilon for q in survey.questions}
    for question in survey.questions:
        try:
            check_instantaneous(question)
        except SurveyError as exc:
            raise TrustError(f"{exc}; nothing was sent") from None
    for qid, value in eps.items():
        if exceeds(value, ceilings.per_question):
            raise TrustError(
                f"question {qid!r} asks for epsilon {value:.4g}, above your ceiling of "
                f"{ceilings.per_question:.4g} per question: one answer could make a guess about "
                f"you {math.exp(value):.3g} times likelier, more than you allow; nothing was sent")
    verified = VerifiedSurvey(aggregator, survey.key_id, survey, found, layers, eps, ceilings)
    if exceeds(verified.total_epsilon, ceilings.total):
        raise TrustError(
            f"the survey asks for a total epsilon of {verified.total_epsilon:.4g} over "
            f"{len(eps)} questions, above your ceiling of {ceilings.total:.4g} per submission; "
            "nothing was sent")
    return verified


def check_answerable(verified: VerifiedSurvey, token: str | None) -> None:
    """SurveyUnavailable unless the survey's status endpoint says it is open and, for an
    invitation-only survey, a token was given. (Whether a token is spent shows only at Send:
    no endpoint tells, as the researchers, who hold every token, could watch who answered.)"""
    url = f"{verified.aggregator}/api/surveys/{verified.survey.survey_id}/status"
    if http.request("GET", url).json().get("status") != "open":
        raise SurveyUnavailable("this survey is closed: it takes no more answers")
    if verified.survey.invitation_only and not token:
        raise SurveyUnavailable("this survey is by invitation only: answer with the link from "
                                "your invitation (--url 'LINK', or --link to paste it unseen)")


def fetch_survey(aggregator: str, survey_id: str, state: LocalState,
                 ceilings: Ceilings = DEFAULTS, public_key: bytes | None = None,
                 token: str | None = None) -> VerifiedSurvey:
    """Fetch, verify and check a survey before any question is asked. Raises TrustError,
    SurveyUnavailable, ledger.OverBudget, http.ApiError, http.NetworkError or ValueError (a
    URL that is not http(s))."""
    aggregator = origin(aggregator)
    key, new_pin = aggregator_key(aggregator, state, public_key)
    raw = http.request("GET", f"{aggregator}/api/surveys/{survey_id}").body
    signature = http.request("GET", f"{aggregator}/api/surveys/{survey_id}/manifest.sig").body
    survey = verify_manifest(raw, signature, key)
    if survey.survey_id != survey_id:
        raise TrustError("the aggregator served a different survey than the one asked for")
    check_origin(survey, aggregator)
    if new_pin:  # a key is pinned (and an accepted one takes over the old one's records) only
        state.pin_key(aggregator, key)  # once a manifest verified with it
    verified = check_ceilings(aggregator, survey, ceilings)
    check_answerable(verified, token)
    with state.transaction():
        check_unchanged(verified, state)
        ledger.settle(verified, state, parameters(survey))
        ledger.check_lifetime(verified, state)
    return verified


def parameters(survey: Survey) -> str:
    """The digest a record keeps of what its survey asks and how each answer is randomized:
    SHA-256 over each question's id, options, parameters (scheme.fields; for forced response
    alpha and beta), concept and irr_alpha (not its wording, whose correction changes nothing
    a respondent discloses)."""
    asked = [[q.id, list(q.options), *q.scheme.fields().values(), q.concept, q.irr_alpha]
             for q in survey.questions]
    return hashlib.sha256(json.dumps(asked).encode()).hexdigest()


def check_unchanged(verified: VerifiedSurvey, state: LocalState) -> None:
    """TrustError if this device answered this survey id (under this key) when it asked other
    questions or randomized them otherwise: an aggregator re-signing a survey id with new
    questions would otherwise get fresh randomizations that the ledger, which charges a survey
    once, never counts. A record kept before digests were (release 0.3 and migrated ones) must
    hold answers to exactly these question ids."""
    survey = verified.survey
    record = state.record(verified.key_id, survey.survey_id)
    kept = record.get("parameters")
    if kept is None and set(record["answers"]) in (set(), {q.id for q in survey.questions}):
        return
    if kept is not None and kept == parameters(survey):
        return
    raise TrustError(
        f"survey {survey.survey_id} was answered on this device when it asked other questions "
        "or randomized them otherwise: the aggregator has changed what it signs under that id, "
        "and answering it again would disclose more than was counted, so this device refuses "
        "it; nothing was sent")
