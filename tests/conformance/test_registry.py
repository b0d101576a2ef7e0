"""The registry against the suite (issue 41): every (type, mechanism or design) the registry
offers has an example question in helpers.EVERY_TYPE, so every test of tests/conformance runs
on it; and each entry's estimate covers the truth in a small simulation of its own (a spot
check: tests/shared/test_coverage.py and bench/coverage.py sweep the number mechanisms and the
comparisons)."""

import math

from helpers import tally
from mechanisms import each_entry, registered

REGISTERED = registered()
REPEATS, RESPONDENTS = 200, 200
LEVEL = 0.94  # the floor bench/coverage.py holds a 95 % interval to


def test_every_entry_of_the_registry_has_an_example_question():
    """A mechanism or design added to the registry without a question in EVERY_TYPE (and so
    without the surfaces' tests) fails here."""
    assert [entry for entry, question in REGISTERED.items() if question is None] == []
    assert len({question["id"] for question in REGISTERED.values()}) == len(REGISTERED)


def scenario(scheme, kind: str):
    """A population for the question: 30 % Yes; 40 % the first option, the rest equal; each
    option ticked by 30 %; a number at its min for 70 % and at its max for 30 %."""
    k = len(scheme.options)
    given = {"yes_no": 0.3, "choice": [0.4] + [0.6 / (k - 1)] * (k - 1),
             "multi_select": [0.3] * k}
    if kind == "numeric":
        given[kind] = {"values": [scheme.low, scheme.high], "weights": [0.7, 0.3]}
    return scheme.truth_of(given[kind])


@each_entry
def test_its_intervals_cover_the_truth(question):
    """REPEATS simulated surveys of RESPONDENTS drawn from the scenario, through the scheme's
    own simulated reports, the aggregator's counters and its summary (the printed 95 %
    interval): each quantity's interval covers its true value at least LEVEL of the time,
    within 3 binomial standard deviations."""
    import numpy as np

    from ldpsurvey.shared import parse_definition
    from ldpsurvey.shared.mechanisms.protocol import Settings

    scheme = parse_definition({"title": "t", "questions": [question]}).questions[0].scheme
    truth = scenario(scheme, question["type"])
    true_values = scheme.true_values(truth)
    rng = np.random.default_rng([ord(c) for c in question["id"]])
    covered = [0] * len(true_values)
    for _ in range(REPEATS):
        reports = scheme.simulate(scheme.draw_answers(truth, RESPONDENTS, rng), rng)
        for entry in scheme.summary(tally(scheme, reports), Settings(0.95, "clopper-pearson")
                                    )["options"]:
            covered[entry["index"]] += entry["ci_low"] <= true_values[entry["index"]] <= (
                entry["ci_high"])
    floor = LEVEL - 3 * math.sqrt(LEVEL * (1 - LEVEL) / REPEATS)
    assert min(covered) / REPEATS >= floor, (covered, true_values)

