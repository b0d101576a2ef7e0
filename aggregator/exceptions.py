"""What the services and the store raise: plain exceptions that know nothing of HTTP.

`errors.py` maps each to its status, JSON error code and page, in one table. The message is the
`detail` a client reads, so it names the problem and never holds an answer.
"""

from ldpsurvey.shared.http_contract import IDEMPOTENCY_KEY


class DomainError(Exception):
    """Something the caller asked for cannot be done; str(exc) says why."""


class SurveyNotFound(DomainError):
    def __init__(self, survey_id: str):
        super().__init__(f"no survey with id {survey_id[:40]!r}")


class SurveyClosed(DomainError):
    def __init__(self, detail: str = "this survey is closed and takes no answers"):
        super().__init__(detail)


class AlreadyPublished(DomainError):
    """Publish or edit a survey whose signed manifest is out: it never changes."""

    def __init__(self, survey_id: str):
        super().__init__(f"survey {survey_id} is published: its signed manifest never changes; "
                         "copy it into a new draft to change it (`ldp-survey survey copy "
                         f"{survey_id}`, POST /api/surveys/{survey_id}/copy)")


class SurveyIsDraft(DomainError):
    """Something only a published survey has (answers, tokens, a close or an archive)."""

    def __init__(self, survey_id: str):
        super().__init__(f"survey {survey_id} is a draft: publish it first (`ldp-survey survey "
                         f"publish {survey_id}`), or delete it")


class SurveyOpen(DomainError):
    """Archive or delete an open survey."""


class ArchiveConflict(DomainError):
    """Archive an archived survey, or unarchive one that is not."""


class NotInvitationOnly(DomainError):
    def __init__(self):
        super().__init__("this survey is open to anyone; tokens are for invitation-only surveys")


class IdempotencyConflict(DomainError):
    def __init__(self):
        super().__init__("this Idempotency-Key was already used with a different body")


class TokenRequired(DomainError):
    def __init__(self):
        super().__init__("this survey is by invitation only: send the invitation token in the "
                         "Survey-Token header")


class TokenRejected(DomainError):
    def __init__(self):
        super().__init__("this invitation token is unknown or already used")


class OriginNotAllowed(DomainError):
    def __init__(self, origin: str):
        super().__init__(f"this survey's form is not hosted at {origin[:100]}: it takes answers "
                         "from its own origin and those its manifest lists in form_origins")


class Unauthorized(DomainError):
    """No valid key (or session) where one is needed."""


class Forbidden(DomainError):
    """A valid key whose role may not do this."""


class BatchOnInvitationOnly(Forbidden):
    def __init__(self):
        super().__init__("this survey is by invitation only: each respondent answers with their "
                         "own token, so batches are refused")


class ResearcherNotFound(DomainError):
    def __init__(self, name: str):
        super().__init__(f"no researcher named {name[:70]!r}")


class KeyNotFound(DomainError):
    def __init__(self, api_key_id: str):
        super().__init__(f"no API key with id {api_key_id[:40]!r}")


class InvalidKeyRequest(DomainError):
    """A key asked for with a bad role, name or survey scope."""


class InvalidShare(DomainError):
    """A share that makes no sense (with the survey's owner, say)."""


class InvalidSurvey(DomainError):
    """The survey definition is refused."""


class EpsilonAboveCap(DomainError):
    """A question asks for more epsilon than this server allows."""


class InvalidAnswers(DomainError):
    """A response does not fit its survey."""


class BatchTooLarge(DomainError):
    """More responses in one batch than the limit."""


class InvalidCount(DomainError):
    """A token request without a count in range."""


class UnsupportedMediaType(DomainError):
    def __init__(self):
        super().__init__("send the body as application/json")


class BodyTooLarge(DomainError):
    def __init__(self, limit: int):
        super().__init__(f"the body is limited to {limit} bytes")


class MalformedJson(DomainError):
    """The body is not strict JSON."""


class InvalidUnicode(DomainError):
    """A string in the JSON body is no Unicode text (a lone surrogate)."""


class InvalidIdempotencyKey(DomainError):
    def __init__(self):
        super().__init__(f"Idempotency-Key must match {IDEMPOTENCY_KEY.pattern}")


class InvalidParameter(DomainError):
    """A query parameter out of range."""


class RegressionFailed(DomainError):
    """A regression's likelihood has no maximum to report (str(exc) says why)."""


class AnalysisUnavailable(DomainError):
    """An analysis needs the `analysis` extra, which this server lacks."""


class AnalysisTooLarge(DomainError):
    """An analysis would cost more than the caller's limit (str(exc) names it and the cost)."""


class AnalysisStopped(DomainError):
    """An analysis ran past its budget of time or memory and was stopped."""


class AnalysisBusy(DomainError):
    """As many analyses as the server allows at once are running: retry after `retry_after`
    seconds."""

    retry_after = 10


class DatabaseUnavailable(DomainError):
    """The database cannot do this now (unreachable, restarting, its disk full, or the
    survey's lock not free within the lock timeout): nothing was stored; retry after
    `retry_after` seconds."""

    retry_after = 5


class ConfigurationError(RuntimeError):
    """The aggregator cannot start safely with this configuration or database."""
