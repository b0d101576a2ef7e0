"""The respondent's limits: what one question, one submission and one aggregator may get.

Epsilon bounds how much likelier any guess about the respondent can become: an answer at
epsilon e makes it at most e^e times likelier. ln 3 per question means at most 3 times.
"""

import math
from dataclasses import dataclass

DEFAULT_MAX_EPSILON = math.log(3)                # per question: at most 3x likelier either way
DEFAULT_MAX_TOTAL_EPSILON = 4 * math.log(3)      # per submission: four such questions
DEFAULT_MAX_LIFETIME_EPSILON = 8 * math.log(3)   # per aggregator signing key, over all surveys


@dataclass(frozen=True)
class Ceilings:
    per_question: float = DEFAULT_MAX_EPSILON
    total: float = DEFAULT_MAX_TOTAL_EPSILON
    lifetime: float = DEFAULT_MAX_LIFETIME_EPSILON


DEFAULTS = Ceilings()
