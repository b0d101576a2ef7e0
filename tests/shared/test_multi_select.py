"""Check-all-that-apply questions (issue 24 b): exact epsilon for the declared constraint by
brute force over every pair of answers, per-option bits and padding-and-sampling estimates by
simulation (coverage, the padding's factor l in the variance, its bias past max_selected, the
pair counters' covariance), `auto`, and the question end to end."""

import csv
import io
import itertools
import json
import math
from fractions import Fraction

import numpy as np
import pytest

from ldpsurvey.client import LocalState, fetch_survey, prepare
from ldpsurvey.client.ceilings import Ceilings
from ldpsurvey.shared import SurveyError, parse_definition, parse_manifest
from ldpsurvey.shared.mechanisms.multi_select import BIAS_WARNING
from ldpsurvey.shared.mechanisms.protocol import Settings
from ldpsurvey.shared.mechanisms.randomizer import N, secure_draw

from helpers import published, release_due, respond, run_mock, sent_and_released, tally

OPTIONS = ["Run", "Swim", "Bike", "Row", "Ski", "Golf", "Judo", "Polo"]


def question(k: int, **fields):
    return parse_definition({"title": "t", "questions": [
        {"id": "q", "text": "Q?", "type": "multi_select", "options": OPTIONS[:k],
         **fields}]}).questions[0]


def subsets(k: int, at_most: int):
    return [s for size in range(at_most + 1) for s in itertools.combinations(range(k), size)]


def worst_log_ratio(probability, inputs, outputs):
    return math.log(max(probability(y, s) / probability(y, t) for y in outputs
                        for s, t in itertools.permutations(inputs, 2)))


@pytest.mark.parametrize("k, m", [(3, 1), (3, 2), (3, None), (4, 1), (4, 2), (4, 3), (4, None)])
@pytest.mark.parametrize("beta", [0.5, 0.3])
def test_bits_epsilon_is_exact_for_the_declared_constraint(k, m, beta):
    """Every output in {0,1}^k and every ordered pair of answers with at most m options (any
    subset when m is absent): the integer mechanism's exact largest log-ratio is the stated
    epsilon."""
    limit = {} if m is None else {"max_selected": m}
    s = question(k, mechanism="bits", alpha=0.45, beta=beta, **limit).scheme
    t = s.thresholds
    w_no, w_yes = t.option_weights

    def bit(y, held):
        yes = Fraction(t.keep, N) * held + Fraction((N - t.keep) * w_yes, N * N)
        return yes if y else 1 - yes

    def probability(y, chosen):
        return math.prod(bit(y[j], j in chosen) for j in range(k))

    exact = worst_log_ratio(probability, subsets(k, m or k), list(itertools.product((0, 1),
                                                                                 repeat=k)))
    assert math.isclose(exact, s.realized_epsilon, rel_tol=1e-13)
    assert s.epsilon >= s.realized_epsilon
    assert w_no + w_yes == N


@pytest.mark.parametrize("k, ell", [(3, 1), (3, 2), (3, 3), (4, 2)])
def test_padding_epsilon_is_exact_over_every_pair_of_sets(k, ell):
    """Every set (of any size: randomize takes more than max_selected, as earlier releases'
    devices sent, though this release's refuse it) and every reported
    item: the exact largest log-ratio, from the integer slot and forced-response weights, is the
    stated epsilon, below the forced response's own when l > 1 (sampling amplifies)."""
    s = question(k, mechanism="padding", max_selected=ell, epsilon=1.2).scheme
    t = s.thresholds

    def probability(y, chosen):
        padded = list(chosen) + list(range(k, k + ell - len(chosen)))
        slots = s.slots(len(padded))
        weights = [c - p for c, p in zip(slots, (0, *slots[:-1]), strict=True)]
        return sum(Fraction(w, N) * (Fraction(t.keep, N) * (y == item)
                                     + Fraction((N - t.keep) * t.option_weights[y], N * N))
                   for w, item in zip(weights, padded, strict=True))

    exact = worst_log_ratio(probability, subsets(k, k), range(s.d))
    assert math.isclose(exact, s.realized_epsilon, rel_tol=1e-13)
    assert s.epsilon <= 1.2 * (1 + 1e-12)
    forced_response = math.log1p(t.keep * N / ((N - t.keep) * min(t.option_weights)))
    assert (exact < forced_response - 1e-9) == (ell > 1)


@pytest.mark.parametrize("fields", [
    {"mechanism": "bits", "epsilon": 2.0}, {"mechanism": "bits", "epsilon": 2.0, "max_selected": 2},
    {"mechanism": "padding", "epsilon": 2.0, "max_selected": 2}, {"epsilon": 0.7}])
def test_a_target_epsilon_is_never_exceeded_and_nearly_reached(fields):
    s = question(6, **fields).scheme
    assert fields["epsilon"] * (1 - 1e-9) <= s.epsilon <= fields["epsilon"] * (1 + 1e-12)


def test_auto_takes_the_lower_variance_and_says_so():
    free = question(8, epsilon=2.0)
    assert free.scheme.name == "bits" and set(free.auto.variances) == {"bits"}
    few = question(8, epsilon=2.0, max_selected=1)
    assert few.scheme.name == "padding"
    assert few.auto.variances["padding"] < few.auto.variances["bits"]
    assert "auto chose padding" in few.auto.words()
    many = question(8, epsilon=1.0, max_selected=7)
    assert many.auto.variances[many.scheme.name] == min(many.auto.variances.values())


@pytest.mark.parametrize("fields, message", [
    ({"mechanism": "padding", "epsilon": 1}, r"\.max_selected: padding and sampling needs"),
    ({"epsilon": 1, "max_selected": 9}, r"\.max_selected: must be a whole number from 1 to 8"),
    ({"mechanism": "oue", "epsilon": 1}, r"\.mechanism: must be one of auto, bits, padding"),
    ({"mechanism": "padding", "epsilon": 1, "max_selected": 2, "beta": 0.3},
     r"\.beta: does not apply to mechanism 'padding'"),
    ({}, r"\.epsilon: is needed"),
])
def test_definition_errors_name_the_field(fields, message):
    with pytest.raises(SurveyError, match=message):
        question(8, **fields)


def truths(rng, shares, n, at_most=None):
    """n sets, each option independently with its share; with at_most, each set is cut to that
    many (these simulations keep every respondent within the declared limit)."""
    bits = rng.random((n, len(shares))) < shares
    if at_most is not None:
        for row in np.flatnonzero(bits.sum(axis=1) > at_most):
            held = np.flatnonzero(bits[row])
            bits[row, rng.choice(held, size=len(held) - at_most, replace=False)] = False
    return bits.astype(np.int8)


@pytest.mark.parametrize("fields, repeats", [
    ({"mechanism": "bits", "epsilon": 2.0}, 200),
    ({"mechanism": "padding", "epsilon": 2.0, "max_selected": 2}, 200)])
def test_intervals_cover_the_truth_as_stated(fields, repeats):
    """95 % intervals over repeated simulated surveys (every set within max_selected): coverage
    of the realized shares at least 0.95 minus three binomial SEs of the coverage."""
    s = question(5, **fields).scheme
    rng = np.random.default_rng(99)
    covered = total = 0
    for _ in range(repeats):
        answers = truths(rng, [0.4, 0.3, 0.1, 0.05, 0.0], 1500, fields.get("max_selected"))
        shares = answers.mean(axis=0)
        summary = s.summary(tally(s, s.simulate(answers, rng)), Settings(0.95, "clopper-pearson"))
        for share, option in zip(shares, summary["options"], strict=True):
            covered += option["ci_low"] <= share <= option["ci_high"]
            total += 1
    assert covered / total >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / total)


def test_padding_variance_carries_the_factor_l():
    """The stated SE of padding-and-sampling (l times the item estimate's) against the spread of
    its estimates over 400 simulated surveys, to 21 % of the variance (3 SEs of a variance from
    400 draws); without the factor l (Wang, Li and Jha 2018 as published) it would be l^2 = 9
    times too small."""
    s = question(6, mechanism="padding", epsilon=2.0, max_selected=3).scheme
    rng = np.random.default_rng(5)
    estimates, stated = [], []
    for _ in range(400):
        summary = s.summary(tally(s, s.simulate(truths(rng, [0.5, 0.4, 0.3, 0.1, 0.0, 0.0], 800,
                                                           3), rng)), Settings(0.95, "wilson"))
        estimates.append([o["p_hat"] for o in summary["options"]])
        stated.append([o["standard_error"] ** 2 for o in summary["options"]])
    assert np.allclose(np.mean(stated, axis=0), np.var(estimates, axis=0, ddof=1), rtol=0.21)


def test_padding_is_biased_low_past_max_selected_and_warns():
    s = question(4, mechanism="padding", epsilon=3.0, max_selected=1).scheme
    rng = np.random.default_rng(8)
    answers = np.ones((20000, 4), dtype=np.int8)  # everyone selects all four
    summary = s.summary(tally(s, s.simulate(answers, rng)), Settings(0.95, "wilson"))
    assert summary["warning"] == BIAS_WARNING
    assert all(o["ci_high"] < 0.5 for o in summary["options"])  # each truly 1, seen as 1/4


def test_bits_covariance_from_the_pair_counters():
    """Two options selected together (Swim exactly when Run): the stated covariance of their
    estimates, from the pair counter, against the spread over 300 surveys."""
    s = question(3, mechanism="bits", epsilon=6.0).scheme
    rng = np.random.default_rng(12)
    estimates, stated = [], []
    for _ in range(300):
        answers = truths(rng, [0.5, 0.0, 0.3], 1000)
        answers[:, 1] = answers[:, 0]
        summary = s.summary(tally(s, s.simulate(answers, rng)), Settings(0.95, "wilson"))
        estimates.append([o["p_hat"] for o in summary["options"]])
        stated.append(summary["covariance"])
    empirical = np.cov(np.array(estimates).T)
    mean = np.mean(stated, axis=0)
    assert mean[0][1] == pytest.approx(empirical[0][1], rel=0.25)
    assert mean[0][1] > 0.5 * math.sqrt(mean[0][0] * mean[1][1])  # strongly correlated
    assert abs(mean[0][2]) < 0.2 * math.sqrt(mean[0][0] * mean[2][2])


SPORTS = {"title": "Sports", "release_batch": 1, "questions": [
    {"id": "sports", "text": "Which sports?", "type": "multi_select", "options": OPTIONS[:6],
     "mechanism": "bits", "max_selected": 3, "epsilon": 1.0},
    {"id": "drugs", "text": "Which of these?", "type": "multi_select", "options": OPTIONS[:5],
     "mechanism": "padding", "max_selected": 2, "epsilon": 1.0}]}


@pytest.fixture
def sports_id(client, auth):
    return published(client, auth, SPORTS)


@pytest.mark.parametrize("answers, message", [
    ({"sports": [1, 0]}, "sports must be a list of 6 bits"),
    ({"sports": 2}, "sports must be a list of 6 bits"),
    ({"drugs": 7}, "drugs must be an item index from 0 to 6"),
    ({"drugs": [1]}, "drugs must be an item index from 0 to 6")])
def test_intake_refuses_reports_the_mechanism_cannot_make(client, sports_id, answers, message):
    good = {"sports": [0] * 6, "drugs": 6}
    response = client.post(f"/api/surveys/{sports_id}/responses",
                           json={"answers": {**good, **answers}})
    assert response.status_code == 422 and message in response.json["detail"], response.json


def test_end_to_end_counters_estimates_exports(client, auth, sports_id):
    survey = parse_manifest(client.get(f"/api/surveys/{sports_id}").data)
    # /8: every published manifest signs its form's digests (manifest.Survey.form)
    assert json.loads(client.get(f"/api/surveys/{sports_id}").data)["format"] == (
        "ldp-survey-manifest/8")
    rng = np.random.default_rng(1)
    columns = [q.scheme.simulate(truths(rng, [0.5, 0.3, 0.2, 0.1, 0.0, 0.0][:len(q.options)],
                                        300, q.scheme.max_selected), rng)
               for q in survey.questions]
    responses = [{"answers": {"sports": a, "drugs": b}} for a, b in zip(*columns, strict=True)]
    assert client.post(f"/api/surveys/{sports_id}/responses/batch", json={"responses": responses},
                       headers=auth).status_code == 201
    release_due(client.application)
    body = client.get(f"/api/surveys/{sports_id}/estimates", headers=auth).json
    for q, reported in zip(survey.questions, body["questions"], strict=True):
        want = q.scheme.summary(tally(q.scheme, [r["answers"][q.id] for r in responses]),
                                Settings(0.95, "clopper-pearson"))
        assert reported["options"] == want["options"]
        assert reported["covariance"] == want["covariance"] and reported["n"] == 300
    assert body["questions"][1]["warning"] == BIAS_WARNING
    rows = list(csv.reader(io.StringIO(client.get(f"/api/surveys/{sports_id}/export.csv",
                                                  headers=auth).get_data(as_text=True))))
    assert rows[0] == [f"sports_{j}" for j in range(6)] + ["drugs"]
    assert {row[-1] for row in rows[1:]} <= set(OPTIONS[:5]) | {"(placeholder 1)", "(placeholder 2)"}
    codes = list(csv.reader(io.StringIO(client.get(f"/api/surveys/{sports_id}/export.csv?codes=true",
                                                   headers=auth).get_data(as_text=True))))
    assert {row[-1] for row in codes[1:]} <= {str(j) for j in range(7)}
    book = client.get(f"/api/surveys/{sports_id}/codebook.json", headers=auth).json
    assert book["questions"][0]["max_selected"] == 3 and book["questions"][1]["mechanism"] == (
        "padding")


def test_the_device_refuses_more_than_max_selected_under_bits_and_padding(live_server, sports_id, tmp_path,
                                                              client, auth):
    state = LocalState(tmp_path / "client" / "state.json")
    verified = fetch_survey(live_server, sports_id, state, Ceilings(per_question=2, total=4))
    with pytest.raises(ValueError, match=r"takes at most 3 options \(4 given\)"):
        prepare(verified, {"sports": [0, 1, 2, 3], "drugs": []}, state)
    with pytest.raises(ValueError, match=r"takes at most 2 options \(4 given\)"):
        prepare(verified, {"sports": [0, 2], "drugs": [0, 1, 2, 3]}, state)
    submission = prepare(verified, {"sports": [0, 2], "drugs": [1, 3]}, state)
    assert len(submission.answers["sports"]) == 6 and 0 <= submission.answers["drugs"] < 7
    assert sent_and_released(client, auth, verified, submission, state)[0] == 1


def test_intake_cannot_tell_a_set_past_max_selected():
    """Why only the device holds respondents to max_selected: under padding a set past it
    (which randomize takes, as an earlier release's device did) yields one item as any set
    does, which intake accepts; under bits every pattern of k bits is a report intake accepts;
    and every report has a positive chance from every set (each forced-response weight is
    positive), so no report proves a set too large."""
    padding = question(4, mechanism="padding", max_selected=2, epsilon=1.0).scheme
    bits = question(4, mechanism="bits", max_selected=2, epsilon=1.0).scheme
    reports = [padding.randomize([0, 1, 2, 3], secure_draw) for _ in range(50)]
    assert all(padding.check_report(report) is None for report in reports)
    assert all(bits.check_report(list(p)) is None for p in itertools.product((0, 1), repeat=4))
    assert min(padding.thresholds.option_weights + bits.thresholds.option_weights) > 0
    for scheme in (padding, bits):
        with pytest.raises(ValueError, match=r"takes at most 2 options \(4 given\)"):
            scheme.check_truth([0, 1, 2, 3])


def test_respond_takes_options_separated_by_semicolons(live_server, sports_id, tmp_path):
    result = respond(live_server, sports_id, "sports=Run;bike,drugs=none", tmp_path / "one", "--details")
    assert result.exit_code == 0, result.output
    assert "each option you select is marked with" in result.stdout
    assert "Sent." in result.stdout
    bad = respond(live_server, sports_id, "sports=Run;Tennis,drugs=none", tmp_path / "two")
    assert bad.exit_code != 0 and "'Tennis' is not one" in bad.output


def test_mock_reports_each_option_with_its_truth(tmp_path):
    result = run_mock(tmp_path, SPORTS, "[truth]\nsports = [0.5, 0.3, 0.2, 0.1, 0.0, 0.0]\n"
                      "drugs = [0.3, 0.2, 0.1, 0.0, 0.0]\n", "--respondents", "4000", "--seed",
                      "2", "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert [(r["question"], r["option"]) for r in document["results"]] == (
        [("sports", o) for o in OPTIONS[:6]] + [("drugs", o) for o in OPTIONS[:5]])
    assert document["warnings"] == {"drugs": BIAS_WARNING}
    failed = run_mock(tmp_path, SPORTS, "[truth]\nsports = [0.5, 0.3]\n"
                      "drugs = [0.3, 0.2, 0.1, 0.0, 0.0]\n")
    assert failed.exit_code != 0
    assert "question 'sports' needs 6 selection probabilities in [0, 1]" in failed.output


@pytest.mark.parametrize("chosen", [(), (1, 3), (0, 1, 2, 3, 4)])
def test_the_padding_simulation_draws_what_the_device_draws(chosen):
    """The vectorized simulation's reported items for one set against the device's exact
    probabilities (slot weights times the forced response's), within 5 SEs over 200,000."""
    s = question(5, mechanism="padding", max_selected=3, epsilon=2.0).scheme
    t, n = s.thresholds, 200_000
    padded = list(chosen) + list(range(5, 5 + 3 - len(chosen)))
    slots = s.slots(len(padded))
    weights = [c - p for c, p in zip(slots, (0, *slots[:-1]), strict=True)]
    bits = np.zeros((n, 5), dtype=np.int8)
    bits[:, list(chosen)] = 1
    reports = np.bincount(s.simulate(bits, np.random.default_rng(3)), minlength=s.d)
    for y in range(s.d):
        p = sum(w / N * (t.keep / N * (y == item) + (N - t.keep) / N * t.option_weights[y] / N)
                for w, item in zip(weights, padded, strict=True))
        assert abs(reports[y] / n - p) < 5 * math.sqrt(p * (1 - p) / n), y


def test_padding_placeholders_have_labels_no_option_has():
    """In the labels CSV a dummy item was its bare code (6, 7), which an option labelled "6"
    would share: it is "(placeholder j)", in more parentheses where an option has that label;
    with codes it stays the code."""
    from ldpsurvey.shared.mechanisms.multi_select import PaddingSampling

    plain = PaddingSampling.from_epsilon(("a", "6", "c"), 2.0, 2)
    assert plain.placeholders == ("(placeholder 1)", "(placeholder 2)")
    assert [plain.cells(j, False)[0] for j in range(5)] == ["a", "6", "c", "(placeholder 1)",
                                                          "(placeholder 2)"]
    assert [plain.cells(j, True)[0] for j in range(5)] == ["0", "1", "2", "3", "4"]
    clash = PaddingSampling.from_epsilon(("(placeholder 1)", "b"), 2.0, 2)
    assert clash.placeholders == ("((placeholder 1))", "(placeholder 2)")
