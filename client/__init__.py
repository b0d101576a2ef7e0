"""The respondent client: verifies a survey's signed parameters, randomizes on this device with
a CSPRNG, remembers the randomized answers, and sends only those.

    state = LocalState()
    verified = fetch_survey(url, survey_id, state)          # TrustError if not trustworthy
    submission = prepare(verified, {"smoked": 1}, state)    # randomized, memoized
    submit(verified, submission, state)
"""

from .http import ApiError, NetworkError
from .notes import question_note, release_note, survey_notes
from .respondent import Submission, prepare, submit, unanswered
from .state import LocalState
from .verify import Ceilings, TrustError, VerifiedSurvey, fetch_survey

__all__ = [
    "ApiError", "Ceilings", "LocalState", "NetworkError", "Submission", "TrustError",
    "VerifiedSurvey", "fetch_survey", "prepare", "question_note", "release_note", "submit",
    "survey_notes", "unanswered",
]
