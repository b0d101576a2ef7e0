"""The respondent client: verifies a survey's signed parameters, randomizes on this device with
a CSPRNG, remembers the randomized answers per aggregator signing key, keeps a lifetime ledger
of the epsilon this device disclosed (to every key together, and to each), and sends only
randomized answers.

    state = LocalState()
    verified = fetch_survey(url, survey_id, state)          # TrustError if not trustworthy
    submission = prepare(verified, {"smoked": 1}, state)    # randomized, memoized
    submit(verified, submission, state)                     # charged, then sent
"""

from ldpsurvey.client.ceilings import Ceilings
from ldpsurvey.client.http import ApiError, NetworkError
from ldpsurvey.client.ledger import CountedBefore, OverBudget
from ldpsurvey.client.notes import (
    ALL_OPEN,
    INTRO,
    OPEN_INTRO,
    OPEN_WORDS,
    WHY_IT_MAY_DIFFER,
    bound_note,
    concept_note,
    intro,
    question_note,
    randomized_epsilons,
    release_note,
    release_summary,
    sent_note,
    survey_notes,
)
from ldpsurvey.client.respondent import Submission, prepare, submit, unanswered
from ldpsurvey.client.state import LocalState
from ldpsurvey.client.verified import VerifiedSurvey
from ldpsurvey.client.verify import SurveyUnavailable, TrustError, fetch_survey

__all__ = [
    "ALL_OPEN", "INTRO", "OPEN_INTRO", "OPEN_WORDS", "WHY_IT_MAY_DIFFER", "ApiError", "Ceilings",
    "CountedBefore", "LocalState", "NetworkError", "OverBudget", "Submission", "SurveyUnavailable",
    "TrustError", "VerifiedSurvey", "bound_note", "concept_note", "fetch_survey", "intro", "prepare",
    "question_note", "randomized_epsilons", "release_note", "release_summary", "sent_note",
    "submit", "survey_notes", "unanswered",
]
