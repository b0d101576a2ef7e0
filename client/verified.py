"""A survey the client has verified (verify.py) and may answer: what the ledger (ledger.py)
charges and the respondent's randomizer draws with."""

from dataclasses import dataclass

from ldpsurvey.client.ceilings import Ceilings
from ldpsurvey.shared import Survey, total_epsilon
from ldpsurvey.shared.mechanisms.randomizer import Thresholds


@dataclass(frozen=True)
class VerifiedSurvey:
    """A survey whose manifest verified, with each question's epsilon as its integer randomizer
    realizes it (scheme.realized_epsilon, recomputed here, never taken from the manifest), and
    for each concept question the integer thresholds of its permanent layer (`thresholds`) and
    of its second layer (`instantaneous`)."""

    aggregator: str
    key_id: str
    survey: Survey
    thresholds: dict[str, Thresholds]
    instantaneous: dict[str, Thresholds]
    epsilon: dict[str, float]
    ceilings: Ceilings

    @property
    def total_epsilon(self) -> float:
        return total_epsilon(self.epsilon.values())
