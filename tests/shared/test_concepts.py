"""Concept questions: a permanent randomized answer reported through a second, instantaneous
forced-response layer; the two layers compose into one mechanism, which the aggregator inverts."""

import itertools
import json
import math
import random
from dataclasses import replace
from fractions import Fraction as F

import pytest

from ldpsurvey.client import Ceilings
from ldpsurvey.client.verify import check_ceilings
from ldpsurvey.shared import Mechanism, estimate, parse_definition, parse_manifest
from ldpsurvey.shared.mechanisms.randomizer import randomize
from ldpsurvey.shared.stats.design import compose

from helpers import SURVEY, release_due

CONCEPT_SURVEY = {"title": "Wave 1", "release_batch": 1, "questions": [
    {"id": "smoked", "text": "Have you ever smoked?", "type": "yes_no", "alpha": 0.5,
     "concept": "smoking.ever"},
    {"id": "diet", "text": "Your diet?", "type": "choice", "options": ["meat", "fish", "plants"],
     "alpha": 0.4, "beta": [0.5, 0.3, 0.2], "concept": "diet", "irr_alpha": 0.6},
]}
ROOMY = Ceilings(per_question=5.0, total=10.0, lifetime=100.0)


def published(definition):
    return replace(parse_definition(definition), survey_id="s", key_id="k").manifest_bytes()


def two_layers(alpha_p, beta_p, alpha_i, beta_i, true, reported):
    """P(report | true) summed over the permanent answer, the definition compose must equal."""
    def layer(alpha, beta, i, j):
        return alpha * (i == j) + (1 - alpha) * beta[j]
    return sum(layer(alpha_p, beta_p, true, p) * layer(alpha_i, beta_i, p, reported)
               for p in range(len(beta_p)))


def test_composition_worked_by_hand():
    """alpha_p = 1/2, beta_p = (1/5, 4/5), alpha_i = 3/4 (uniform): alpha = 3/8 and
    beta_0 = (3/4 * 1/2 * 1/5 + 1/4 * 1/2) / (5/8) = (1/5) / (5/8) = 8/25."""
    assert compose(F(1, 2), (F(1, 5), F(4, 5)), F(3, 4), (F(1, 2), F(1, 2))) == \
        (F(3, 8), (F(8, 25), F(17, 25)))
    # uniform into uniform stays uniform
    assert compose(F(1, 2), (F(1, 2),) * 2, F(3, 4), (F(1, 2),) * 2) == (F(3, 8), (F(1, 2),) * 2)


@pytest.mark.parametrize("alpha_p, beta_p, alpha_i, beta_i", [
    (F(1, 2), (F(1, 2), F(1, 2)), F(3, 4), (F(1, 2), F(1, 2))),
    (F(2, 5), (F(1, 2), F(3, 10), F(1, 5)), F(3, 5), (F(1, 3),) * 3),
    (F(9, 10), (F(1, 7), F(2, 7), F(4, 7)), F(1, 10), (F(1, 2), F(1, 4), F(1, 4))),
])
def test_composition_equals_the_two_layers_exactly(alpha_p, beta_p, alpha_i, beta_i):
    alpha, beta = compose(alpha_p, beta_p, alpha_i, beta_i)
    assert sum(beta) == 1
    for true, reported in itertools.product(range(len(beta)), repeat=2):
        assert alpha * (true == reported) + (1 - alpha) * beta[reported] == \
            two_layers(alpha_p, beta_p, alpha_i, beta_i, true, reported)


def test_a_concept_question_reports_through_the_composed_mechanism():
    survey = parse_manifest(published(CONCEPT_SURVEY))
    diet = survey.question("diet")
    assert diet.reported_mechanism == Mechanism(*compose(0.4, (0.5, 0.3, 0.2), 0.6, (1 / 3,) * 3))
    # one report reveals less than the permanent answer, which bounds every report together
    assert diet.reported_mechanism.epsilon < diet.epsilon == diet.mechanism.epsilon


def test_reports_follow_the_composed_distribution_and_share_the_permanent_answer():
    """10^5 respondents per true option, each with a permanent answer drawn once and two
    reports of it (two waves), with the randomizer's integer thresholds as the client builds
    them and a seeded generator (deterministic). Each report's frequencies match the composed
    mechanism, and the pairs match sum_p P(p | t) P(r1 | p) P(r2 | p), not independent draws:
    within 5 standard errors, sqrt(p (1 - p) / n)."""
    survey = parse_manifest(published(CONCEPT_SURVEY))
    verified = check_ceilings("http://x", survey, ROOMY)
    question = survey.question("diet")
    permanent, layer = verified.thresholds["diet"], verified.instantaneous["diet"]
    generator = random.Random(13)

    def draw():
        return generator.getrandbits(53)

    m, p_layer, i_layer = question.reported_mechanism, question.mechanism, question.instantaneous
    n, k = 100_000, len(question.options)
    for true in range(k):
        pairs = {}
        for _ in range(n):
            kept = randomize(true, permanent, draw)
            pair = (randomize(kept, layer, draw), randomize(kept, layer, draw))
            pairs[pair] = pairs.get(pair, 0) + 1
        for reported in range(k):
            for wave in (0, 1):
                observed = sum(c for pair, c in pairs.items() if pair[wave] == reported) / n
                expected = m.probability(true, reported)
                assert abs(observed - expected) < 5 * math.sqrt(expected * (1 - expected) / n)
        for (r1, r2), count in pairs.items():
            expected = sum(p_layer.probability(true, p) * i_layer.probability(p, r1)
                           * i_layer.probability(p, r2) for p in range(k))
            assert abs(count / n - expected) < 5 * math.sqrt(expected * (1 - expected) / n)
        # independent draws would give the product of the marginals: far outside the tolerance
        same = sum(c for (r1, r2), c in pairs.items() if r1 == r2) / n
        independent = sum(m.probability(true, r) ** 2 for r in range(k))
        assert abs(same - independent) > 10 * math.sqrt(independent * (1 - independent) / n)


def create(client, auth, definition):
    response = client.post("/api/surveys", json=definition, headers=auth)
    assert response.status_code == 201, response.json
    return response.json["survey_id"]


def test_the_aggregator_publishes_a_concept_with_its_irr_alpha(client, auth):
    survey_id = create(client, auth, CONCEPT_SURVEY)
    manifest = client.get(f"/api/surveys/{survey_id}").json
    assert manifest["format"] == "ldp-survey-manifest/8"  # /8: every survey published since
    smoked, diet = manifest["questions"]
    assert (smoked["concept"], smoked["irr_alpha"]) == ("smoking.ever", 0.75)  # the default
    assert (diet["concept"], diet["irr_alpha"]) == ("diet", 0.6)
    plain = client.get(f"/api/surveys/{create(client, auth, SURVEY)}").json
    assert "concept" not in plain["questions"][0] and "irr_alpha" not in plain["questions"][0]


def test_concept_estimates_invert_the_composed_mechanism(client, auth):
    """10,000 respondents whose true answer is Yes with probability 0.9, each reporting through
    both layers: the estimate is within 5 SE of 0.9 (inverting the permanent layer alone would
    give about 0.8, outside), equals the shared estimator on the composed mechanism, and the
    export's report matrix is the composed one."""
    survey_id = create(client, auth, CONCEPT_SURVEY)
    survey = parse_manifest(client.get(f"/api/surveys/{survey_id}").data)
    verified = check_ceilings("http://x", survey, ROOMY)
    generator = random.Random(7)

    def draw():
        return generator.getrandbits(53)

    def report(qid, true):
        return randomize(randomize(true, verified.thresholds[qid], draw),
                         verified.instantaneous[qid], draw)

    responses = [{"answers": {"smoked": report("smoked", int(generator.random() < 0.9)),
                              "diet": report("diet", 2)}} for _ in range(10_000)]
    posted = client.post(f"/api/surveys/{survey_id}/responses/batch",
                         json={"responses": responses}, headers=auth)
    assert posted.status_code == 201, posted.json
    release_due(client.application)
    document = client.get(f"/api/surveys/{survey_id}/estimates", headers=auth).json
    smoked = document["questions"][0]
    composed = survey.question("smoked").reported_mechanism
    assert smoked["reported"] == {"alpha": composed.alpha, "beta": list(composed.beta)}
    assert (smoked["concept"], smoked["irr_alpha"]) == ("smoking.ever", 0.75)
    counts = [o["reported_count"] for o in smoked["options"]]
    expected = estimate(composed, counts)
    assert [o["p_hat"] for o in smoked["options"]] == [e.p_hat for e in expected]
    yes = smoked["options"][1]
    assert abs(yes["p_hat"] - 0.9) < 5 * yes["standard_error"]
    permanent_only = estimate(survey.question("smoked").mechanism, counts)[1]
    assert abs(permanent_only.p_hat - 0.9) > 5 * yes["standard_error"]
    exported = client.get(f"/api/surveys/{survey_id}/export.jsonl", headers=auth).text
    parameters = json.loads(exported.splitlines()[0])["parameters"]["smoked"]
    assert parameters["report_matrix"] == [[composed.probability(i, j) for j in range(2)]
                                           for i in range(2)]
