"""OUE and OLH on choice questions (issue 24 a): exact epsilon by brute force over neighbouring
answers, the Python randomizer against the shared vectors, the hash against xxhash, estimates
against pure-LDP on identical reports, coverage by simulation, `auto`, and the question end to
end (manifest /6, intake, counters, estimates, exports, codebook, respond, mock)."""

import csv
import io
import itertools
import json
import math
import re
from dataclasses import replace
from fractions import Fraction
from importlib import resources

import numpy as np
import pytest
from click.testing import CliRunner

from ldpsurvey.cli import main
from ldpsurvey.client import LocalState, fetch_survey, prepare
from ldpsurvey.client.ceilings import Ceilings
from ldpsurvey.shared import SurveyError, parse_definition, parse_manifest
from ldpsurvey.shared.mechanisms.olh import SEEDS, hashed, xxh32
from ldpsurvey.shared.mechanisms.oue import thresholds as oue_thresholds
from ldpsurvey.shared.mechanisms.protocol import Settings
from ldpsurvey.shared.mechanisms.randomizer import N
from ldpsurvey.shared.mechanisms.registry import auto_choice

from helpers import published, release_due, respond, run_mock, sent_and_released, tally

VECTORS = json.loads((resources.files("ldpsurvey.shared") / "scheme_vectors.json").read_text())
OPTIONS = [f"option {j}" for j in range(12)]


def scheme(mechanism: str, k: int, eps: float):
    return parse_definition({"title": "t", "questions": [
        {"id": "q", "text": "Q?", "type": "choice", "options": OPTIONS[:k],
         "mechanism": mechanism, "epsilon": eps}]}).questions[0].scheme


def feed(values):
    values = iter(values)
    return lambda: next(values)


def test_xxh32_is_xxhash():
    import xxhash

    for seed in (0, 1, 2**31, SEEDS - 1, 123456789):
        for length in range(16):
            data = bytes(range(7, 7 + length))
            assert xxh32(data, seed) == xxhash.xxh32(data, seed=seed).intdigest()


@pytest.mark.parametrize("case", VECTORS["cases"], ids=[c["name"] for c in VECTORS["cases"]])
def test_python_reproduces_the_scheme_vectors(case):
    q = case["question"]
    s = parse_definition({"title": "t", "questions": [
        {"id": "q", "text": "Q?", "type": "choice", **q}]}).questions[0].scheme
    assert s.epsilon == case["epsilon"]
    for draw in case["draws"]:
        assert s.randomize(draw["true"], feed(draw["u"])) == draw["output"]
    outputs = {json.dumps(d["output"]) for d in case["draws"]}
    assert len(outputs) >= 2  # the vectors exercise several outputs (a bit has two)


def test_oue_vectors_follow_the_rule_in_exact_arithmetic():
    for case in (c for c in VECTORS["cases"] if c["question"].get("mechanism") == "oue"):
        keep = math.floor(Fraction(case["question"]["p"]) * N)
        flip = math.floor(Fraction(case["question"]["q"]) * N)
        for draw in case["draws"]:
            assert draw["output"] == [int(u < (keep if j == draw["true"] else flip))
                                      for j, u in enumerate(draw["u"])]


@pytest.mark.parametrize("eps", [0.1, 0.5, math.log(3), 2.0, 4.0])
@pytest.mark.parametrize("k", [2, 3, 4])
def test_oue_epsilon_is_exact_by_brute_force(k, eps):
    """Every output y in {0,1}^k and every ordered pair of different answers: the largest
    log-ratio of the integer mechanism's exact probabilities is the stated epsilon, and no
    more than asked for."""
    s = scheme("oue", k, eps)
    keep, flip = oue_thresholds(s.p, s.q)

    def probability(y, v):
        return math.prod(Fraction(keep if j == v else flip, N) if bit else
                         1 - Fraction(keep if j == v else flip, N) for j, bit in enumerate(y))

    worst = max(probability(y, v) / probability(y, w)
                for y in itertools.product((0, 1), repeat=k)
                for v, w in itertools.permutations(range(k), 2))
    assert math.isclose(math.log(worst), s.epsilon, rel_tol=1e-14)
    assert s.epsilon <= eps * (1 + 1e-15)
    assert s.epsilon > eps - 1e-12  # and not needlessly below


@pytest.mark.parametrize("eps", [0.5, 1.1, 2.5])
def test_olh_epsilon_is_exact_by_brute_force(eps):
    """Over 300 seeds, every pair of answers and every reported value: the exact ratio of the
    probabilities P(y | H_s(v)) of the integer forced response over g values never exceeds the
    stated epsilon and reaches it (the seed's probability is the same for every answer)."""
    s = scheme("olh", 5, eps)
    t = s.thresholds
    weights = [c - p for c, p in zip(t.cumulative, (0, *t.cumulative[:-1]), strict=True)]

    def probability(y, h):
        return Fraction(t.keep, N) * (y == h) + Fraction(N - t.keep, N) * Fraction(weights[y], N)

    worst = max(probability(y, hashed(v, seed, s.g)) / probability(y, hashed(w, seed, s.g))
                for seed in range(300) for v, w in itertools.permutations(range(5), 2)
                for y in range(s.g))
    assert math.isclose(math.log(worst), s.realized_epsilon, rel_tol=1e-14)
    assert s.epsilon <= eps * (1 + 1e-9)


class Utf8Xxhash:
    """xxhash as pure-LDP 1.2.0 calls it: xxh32 of a str, which xxhash before 3.0 hashed as
    UTF-8 and later releases refuse; this passes the UTF-8 bytes to the real xxhash."""

    def __init__(self, xxhash):
        self.xxhash = xxhash

    def xxh32(self, data, seed=0):
        return self.xxhash.xxh32(data.encode() if isinstance(data, str) else data, seed=seed)


@pytest.mark.parametrize("mechanism", ["oue", "olh"])
def test_estimates_agree_with_pure_ldp_on_identical_reports(mechanism, monkeypatch):
    """pure-LDP's OUE and OLH servers (Wang et al.'s estimators, a test-only dependency) on the
    very reports our simulation made: the same unbiased estimates to 1e-12."""
    import xxhash
    from pure_ldp.frequency_oracles.local_hashing import LHServer, lh_server
    from pure_ldp.frequency_oracles.unary_encoding import UEServer

    monkeypatch.setattr(lh_server, "xxhash", Utf8Xxhash(xxhash))

    k, eps, n = 8, 1.3, 3000
    s = scheme(mechanism, k, eps)
    rng = np.random.default_rng(7)
    reports = s.simulate(rng.integers(0, k, n), rng)
    ours = s.summary(tally(s, reports), Settings(0.95, "wilson"))
    if mechanism == "oue":
        server = UEServer(eps, k, use_oue=True)
        for report in reports:
            server.aggregate(np.array(report))
    else:
        server = LHServer(eps, k, use_olh=True)
        assert server.g == s.g
        for seed, value in reports:
            server.aggregate((value, seed))
    for j, option in enumerate(ours["options"]):
        assert option["p_hat"] == pytest.approx(server.estimate(j + 1, suppress_warnings=True) / n,
                                                abs=1e-12)


@pytest.mark.parametrize("mechanism, repeats, n", [("oue", 300, 2000), ("olh", 120, 1500)])
def test_intervals_cover_the_truth_as_stated(mechanism, repeats, n):
    """95 % intervals of every option over repeated simulated surveys: coverage at least 0.95
    minus three binomial standard errors of the coverage itself."""
    truth = [0.4, 0.25, 0.2, 0.1, 0.05, 0.0]
    s = scheme(mechanism, len(truth), 1.0)
    rng = np.random.default_rng(2024)
    covered = total = 0
    for _ in range(repeats):
        answers = rng.choice(len(truth), size=n, p=truth)
        options = s.summary(tally(s, s.simulate(answers, rng)), Settings(0.95, "clopper-pearson"))
        for p, option in zip(truth, options["options"], strict=True):
            covered += option["ci_low"] <= p <= option["ci_high"]
            total += 1
            assert option["ci_low"] <= option["p_mle"] <= option["ci_high"]
        assert math.isclose(sum(o["p_mle"] for o in options["options"]), 1.0)
    assert covered / total >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / total)


def test_standard_errors_and_covariance_match_the_spread_of_the_estimates():
    """The stated SE and covariance against the empirical spread of p_hat over simulated
    surveys (OUE, k = 4, eps = 4 so that the covariance -pi_j pi_l / n stands out of the noise),
    averaged over the surveys: to 21 % for variances (three times the 7 % spread of a variance
    from 400 surveys) and 30 % for the covariance (about three times its spread)."""
    truth = [0.5, 0.3, 0.15, 0.05]
    s = scheme("oue", 4, 4.0)
    rng = np.random.default_rng(11)
    estimates, stated = [], []
    for _ in range(400):
        summary = s.summary(tally(s, s.simulate(rng.choice(4, size=1000, p=truth), rng)),
                            Settings(0.95, "wilson"))
        estimates.append([o["p_hat"] for o in summary["options"]])
        stated.append(summary["covariance"])
    stated = np.mean(stated, axis=0)
    empirical = np.cov(np.array(estimates).T)
    assert np.allclose(np.diag(stated), np.diag(empirical), rtol=0.21)
    assert stated[0, 1] == pytest.approx(empirical[0, 1], rel=0.3)


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
def test_auto_picks_the_lowest_variance_and_forced_response_below_3e_eps_plus_2(eps):
    boundary = 3 * math.exp(eps) + 2
    for k in range(2, 40):
        chosen, variances = auto_choice(k, eps)
        assert variances[chosen] == min(variances.values())
        if k < boundary - 1:
            assert chosen == "forced_response"
        if k > boundary + 1:
            assert chosen in ("oue", "olh")


def test_definition_errors_name_the_field():
    def fails(question, message):
        with pytest.raises(SurveyError, match=message):
            parse_definition({"title": "t", "questions": [
                {"id": "q", "text": "Q?", "type": "choice", "options": OPTIONS[:4], **question}]})

    fails({"mechanism": "oue"}, r"question 'q'\.epsilon: is needed")
    fails({"mechanism": "rappor", "epsilon": 1}, r"question 'q'\.mechanism: must be one of")
    fails({"mechanism": "oue", "alpha": 0.5}, r"question 'q'\.alpha: does not apply to mechanism 'oue'")
    fails({"mechanism": "olh", "epsilon": 1, "concept": "x"}, r"\.concept: does not apply")
    fails({"mechanism": "oue", "p": 0.3, "q": 0.4}, r"\.q: oue needs 0 < q < p < 1")
    with pytest.raises(SurveyError, match=r"\.mechanism: must be one of auto, forced_response"):
        parse_definition({"title": "t", "questions": [
            {"id": "q", "text": "Q?", "type": "yes_no", "mechanism": "oue", "epsilon": 1}]})
    with pytest.raises(SurveyError, match="cross-tabs need forced-response questions"):
        parse_definition({"title": "t", "crosstabs": [["q", "r"]], "questions": [
            {"id": "q", "text": "Q?", "type": "choice", "options": OPTIONS[:4],
             "mechanism": "oue", "epsilon": 1},
            {"id": "r", "text": "R?", "type": "yes_no", "epsilon": 1}]})


LONG = {"title": "Long lists", "release_batch": 1, "questions": [
    {"id": "country", "text": "Which country?", "type": "choice", "options": OPTIONS,
     "mechanism": "oue", "epsilon": 1.0},
    {"id": "product", "text": "Which product?", "type": "choice", "options": OPTIONS[:6],
     "mechanism": "olh", "epsilon": 1.0},
    {"id": "smoked", "text": "Smoked?", "type": "yes_no", "mechanism": "auto", "epsilon": 1.0}]}


@pytest.fixture
def long_id(client, auth):
    return published(client, auth, LONG)


def test_the_manifest_is_format_6_and_reads_back(client, long_id):
    raw = client.get(f"/api/surveys/{long_id}").data
    manifest = json.loads(raw)
    assert manifest["format"] == "ldp-survey-manifest/8"  # /8: every survey published since
    assert [q.get("mechanism") for q in manifest["questions"]] == ["oue", "olh", None]
    survey = parse_manifest(raw)
    assert [q.scheme.name for q in survey.questions] == ["oue", "olh", "forced_response"]
    # Without the form's digests (as an aggregator before /8 published it): /6.
    assert replace(survey, form=None).manifest()["format"] == "ldp-survey-manifest/6"
    newer = raw.replace(b"ldp-survey-manifest/8", b"ldp-survey-manifest/10")
    with pytest.raises(SurveyError, match="unsupported format 'ldp-survey-manifest/10': this "
                                          "release reads up to ldp-survey-manifest/9"):
        parse_manifest(newer)


def test_a_forced_response_survey_keeps_format_5_without_form_digests(client, auth):
    """Published since /8 with the form's digests; its questions alone still ask for /5."""
    definition = {**LONG, "questions": LONG["questions"][2:]}
    sid = client.post("/api/surveys", json=definition, headers=auth).json["survey_id"]
    raw = client.get(f"/api/surveys/{sid}").data
    assert json.loads(raw)["format"] == "ldp-survey-manifest/8"
    assert replace(parse_manifest(raw), form=None).manifest()["format"] == "ldp-survey-manifest/5"


@pytest.mark.parametrize("answers, message", [
    ({"country": 3}, r"country must be a list of 12 bits"),
    ({"country": [1] * 11}, r"country must be a list of 12 bits"),
    ({"country": [True] + [0] * 11}, r"country must be a list of 12 bits"),
    ({"product": [1]}, r"product must be \[seed, value\]"),
    ({"product": [SEEDS, 0]}, r"product must be \[seed, value\]"),
    ({"product": [5, -1]}, r"product must be \[seed, value\]"),
])
def test_intake_refuses_reports_the_mechanism_cannot_make(client, long_id, answers, message):
    good = {"country": [0] * 12, "product": [7, 1], "smoked": 0}
    response = client.post(f"/api/surveys/{long_id}/responses",
                           json={"answers": {**good, **answers}})
    assert response.status_code == 422
    assert re.search(message, response.json["detail"]), response.json


def test_released_reports_reach_the_counters_estimates_and_exports(client, auth, long_id):
    survey = parse_manifest(client.get(f"/api/surveys/{long_id}").data)
    rng = np.random.default_rng(3)
    n = 400
    columns = [q.scheme.simulate(rng.integers(0, len(q.options), n), rng)
               for q in survey.questions]
    responses = [{"answers": dict(zip(["country", "product", "smoked"], row, strict=True))}
                 for row in zip(*columns, strict=True)]
    response = client.post(f"/api/surveys/{long_id}/responses/batch",
                           json={"responses": responses}, headers=auth)
    assert response.status_code == 201, response.json
    release_due(client.application)
    body = client.get(f"/api/surveys/{long_id}/estimates", headers=auth).json
    for question, reported in zip(survey.questions, body["questions"], strict=True):
        s = question.scheme
        want = s.summary(tally(s, [r["answers"][question.id] for r in responses]),
                         Settings(0.95, "clopper-pearson"))
        assert reported["n"] == n and reported["options"] == want["options"]
        assert reported["covariance"] == want["covariance"]
    assert body["questions"][0]["mechanism"] == "oue" and body["questions"][1]["g"] == 4
    export = client.get(f"/api/surveys/{long_id}/export.csv", headers=auth).get_data(as_text=True)
    rows = list(csv.reader(io.StringIO(export)))
    assert rows[0] == [f"country_{j}" for j in range(12)] + ["product_seed", "product_value",
                                                             "smoked"]
    assert len(rows) == n + 1
    assert sorted(rows[1:]) == sorted(
        [*map(str, r["answers"]["country"]), *map(str, r["answers"]["product"]),
         ["No", "Yes"][r["answers"]["smoked"]]] for r in responses)
    book = client.get(f"/api/surveys/{long_id}/codebook.json", headers=auth).json
    assert book["questions"][0]["columns"] == rows[0][:12]
    assert book["questions"][1]["mechanism"] == "olh"
    assert "columns" not in book["questions"][2]
    page = client.get(f"/s/{long_id}/results", headers=auth)
    assert page.status_code in (200, 302)


def test_the_client_randomizes_and_sends_each_mechanism(live_server, client, auth, long_id,
                                                        tmp_path):
    state = LocalState(tmp_path / "client" / "state.json")
    verified = fetch_survey(live_server, long_id, state, Ceilings(per_question=2, total=5))
    submission = prepare(verified, {"country": 4, "product": 2, "smoked": 1}, state)
    assert len(submission.answers["country"]) == 12
    seed, value = submission.answers["product"]
    assert 0 <= seed < SEEDS and 0 <= value < 4
    assert sent_and_released(client, auth, verified, submission, state) == [1, 1, 1]
    with pytest.raises(ValueError, match="not one of the question's options"):
        prepare(verified, {"country": 12, "product": 0, "smoked": 0},
                LocalState(tmp_path / "other" / "state.json"))


def test_respond_reads_option_text_and_shows_the_report(live_server, long_id, tmp_path):
    result = respond(live_server, long_id, "country=option 3,product=2,smoked=yes",
                     tmp_path / "respondent", "--max-total-epsilon", "5", "--details")
    assert result.exit_code == 0, result.output
    assert "one yes/no mark per option" in result.stdout
    assert "a random seed and a number from 0 to 3" in result.stdout
    assert "Sent." in result.stdout


def test_survey_check_says_what_auto_chose(tmp_path):
    path = tmp_path / "long.json"
    path.write_text(json.dumps({**LONG, "questions": [
        {**LONG["questions"][0], "mechanism": "auto"}, LONG["questions"][2]]}))
    result = CliRunner().invoke(main, ["survey", "check", str(path)])
    assert result.exit_code == 0, result.output
    assert "country (oue)" in result.output
    assert "mechanism auto chose oue: the lowest variance" in result.output
    assert "mechanism auto chose forced_response" in result.output
    data = json.loads(CliRunner().invoke(main, ["survey", "check", str(path), "--json"]).stdout)
    assert data["questions"][0]["auto"]["chosen"] == "oue"


def test_mock_simulates_and_reports_each_estimate_with_the_truth(tmp_path):
    shares = [0.3, 0.2, 0.1, 0.1] + [0.3 / 8] * 8
    result = run_mock(tmp_path, LONG, f"[truth]\ncountry = {shares}\n"
                      "product = [0.5, 0.2, 0.1, 0.1, 0.05, 0.05]\nsmoked = 0.3\n",
                      "--respondents", "3000", "--seed", "5", "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["results"]
    assert len(rows) == 12 + 6 + 2
    for row in rows:
        assert {"question", "option", "true_proportion", "ci_low", "ci_high", "covered"} <= set(row)
        assert row["covered"] == (row["ci_low"] <= row["true_proportion"] <= row["ci_high"])
    assert sum(row["covered"] for row in rows) >= 15


def test_plan_takes_each_question_with_its_own_mechanism(tmp_path):
    path = tmp_path / "long.json"
    path.write_text(json.dumps(LONG))
    result = CliRunner().invoke(main, ["plan", "--survey", str(path), "--margin", "0.05",
                                       "--json"])
    assert result.exit_code == 0, result.output
    planned = json.loads(result.stdout)
    survey = parse_definition(LONG)
    for entry, question in zip(planned["questions"], survey.questions, strict=True):
        n = entry["n_required"]
        assert entry["mechanism"] == question.scheme.name
        assert question.scheme.expected_margin(n) <= 0.05 < question.scheme.expected_margin(n - 1)
    assert planned["n_required"] == max(q["n_required"] for q in planned["questions"])
    alone = json.loads(CliRunner().invoke(main, ["plan", "--epsilon", "1", "--margin", "0.05",
                                                 "--json"]).stdout)
    assert planned["questions"][2]["n_required"] == alone["n_required"]  # yes/no: the same
    assert "mechanism auto chose forced_response" in planned["questions"][2]["auto"]
    mixed = CliRunner().invoke(main, ["plan", "--survey", str(path), "--margin", "0.05",
                                      "--options", "3"])
    assert mixed.exit_code != 0 and "drop --options" in mixed.output
    bare = CliRunner().invoke(main, ["plan", "--margin", "0.05"])
    assert bare.exit_code != 0 and "Missing option '--epsilon' (or '--survey')" in bare.output


def test_the_vectorized_hash_and_wide_randomizer_of_the_simulation_match_the_device():
    from ldpsurvey.shared.mechanisms.randomizer import thresholds
    from ldpsurvey.shared.sim.simulation import hashed_many, randomize_many, xxh32_many
    from ldpsurvey.shared.stats.design import uniform_beta

    rng = np.random.default_rng(31)
    seeds = rng.integers(0, SEEDS, 3000)
    for data in (b"", b"7", b"63", b"1234", b"12345", b"123456789012345"):
        assert [int(h) for h in xxh32_many(data, seeds)] == [xxh32(data, int(s)) for s in seeds]
    options = rng.integers(0, 64, 3000)
    assert list(hashed_many(options, seeds, 149)) == [
        hashed(int(v), int(s), 149) for v, s in zip(options, seeds, strict=True)]
    wide = thresholds(0.9, uniform_beta(300))  # more values than int8 holds: OLH at eps 5
    reports = randomize_many(np.full(40_000, 250), wide, rng)
    kept = 0.9 + 0.1 / 300
    assert reports.max() < 300 and abs((reports == 250).mean() - kept) < 5 * math.sqrt(
        kept * (1 - kept) / 40_000)
