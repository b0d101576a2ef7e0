"""The Piecewise and Hybrid mechanisms on number questions (issue 24 c, shared/mechanisms/piecewise.py):
exact epsilon and exact probabilities by brute force over small grids, exact unbiasedness, the
worst-case variance against Wang et al.'s formulas, `auto`, the vectors in exact arithmetic,
estimates by seeded simulation (bias, SE, coverage), and the question end to end (manifest,
intake, estimates, exports, device, mock)."""

import csv
import io
import json
import math
import subprocess
import sys
from dataclasses import replace
from fractions import Fraction
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from ldpsurvey.client import LocalState, fetch_survey, prepare
from ldpsurvey.client.ceilings import Ceilings
from ldpsurvey.shared import SurveyError, parse_definition, parse_manifest
from ldpsurvey.shared.mechanisms.piecewise import (
    EPS_STAR,
    Hybrid,
    Piecewise,
    duchi_worst_variance,
    worst_variance,
)
from ldpsurvey.shared.mechanisms.protocol import Settings
from ldpsurvey.shared.mechanisms.randomizer import N

from helpers import published, release_due, run_mock, sent_and_released, tally

VECTORS = json.loads((resources.files("ldpsurvey.shared") / "scheme_vectors.json").read_text())
SMALL = [(grid, eps) for grid in (2, 4, 8) for eps in (0.3, 1.0, 2.0, 4.0)]


def scheme(**fields):
    return parse_definition({"title": "t", "questions": [
        {"id": "q", "text": "Q?", "type": "numeric", **fields}]}).questions[0]


def reports(s):
    return range(s.largest_report() + 1)


def rows(s):
    """P(report | grid position i) for every i and report, exactly."""
    return [[s.probability(j, i) for j in reports(s)] for i in range(s.grid + 1)]


def largest_log_ratio(table):
    return max(math.log(max(column) / min(column)) for column in zip(*table, strict=True))


@pytest.mark.parametrize("grid, eps", SMALL)
def test_piecewise_epsilon_is_exact_by_brute_force(grid, eps):
    """Over every pair of grid positions and every cell, the largest ratio of the exact
    probabilities is e^epsilon = 1 + u/v, never above the target; each row sums to 1."""
    s = Piecewise.from_epsilon(0.0, 1.0, eps, grid=grid)
    table = rows(s)
    assert all(sum(row) == 1 for row in table)
    worst = max(max(column) / min(column) for column in zip(*table, strict=True))
    assert worst == 1 + Fraction(s.in_window, s.anywhere)
    assert math.isclose(math.log(worst), s.epsilon, rel_tol=1e-12)
    assert s.epsilon <= eps and s.epsilon == pytest.approx(eps, rel=1e-6)


@pytest.mark.parametrize("grid, eps", SMALL)
def test_hybrid_epsilon_is_exact_by_brute_force(grid, eps):
    """Both parts' reports, every pair of positions: the largest ratio is the larger part's
    epsilon (Duchi's realized one), the rows sum to 1, and a share of 0 reports only bits."""
    s = Hybrid.from_epsilon(0.0, 1.0, eps, grid=grid)
    table = rows(s)
    assert all(sum(row) == 1 for row in table)
    support = [j for j in reports(s) if table[0][j] > 0]
    ratio = largest_log_ratio([[row[j] for j in support] for row in table])
    assert math.isclose(ratio, s.realized_epsilon, rel_tol=1e-12)
    assert s.epsilon <= eps * (1 + 1e-12)
    assert (s.share == 0) == (eps < EPS_STAR)
    assert (support == [s.piecewise.outputs, s.piecewise.outputs + 1]) == (s.share == 0)


def test_inputs_between_grid_positions_reveal_no_more():
    """An answer between positions is a mixture of the two (weights from the exact integer
    threshold), so every ratio stays within e^epsilon, and the mean position is P K / N."""
    s = Piecewise.from_epsilon(0.0, 1.0, 1.0, grid=4)
    answers = [0.0, 0.1, 0.3, 1 / 3, 0.5, 0.6180339887, 0.99, 1.0]
    table = []
    for x in answers:
        base, threshold = s.position(x)
        up = Fraction(threshold, N)
        assert (base + up) / s.grid == Fraction(s.rounding_threshold(x), N)
        table.append([(1 - up) * s.probability(j, base) + (up * s.probability(j, base + 1)
                                                          if up else 0) for j in reports(s)])
    assert largest_log_ratio(table) <= s.epsilon * (1 + 1e-12)


@pytest.mark.parametrize("grid, eps", SMALL)
def test_decoded_reports_are_exactly_unbiased(grid, eps):
    """sum_j P(j | i) d(j) = i / K exactly, for both mechanisms (Duchi's part at R = i N/K)."""
    for s in (Piecewise.from_epsilon(0.0, 1.0, eps, grid=grid),
              Hybrid.from_epsilon(0.0, 1.0, eps, grid=grid)):
        for i, row in enumerate(rows(s)):
            assert sum(p * s.decode(j) for j, p in enumerate(row)) == Fraction(i, s.grid)


@pytest.mark.parametrize("grid, eps", SMALL)
def test_the_worst_variance_is_the_brute_force_one(grid, eps):
    """Var(d | i) from the exact table: the piecewise worst case is its largest (convex, at an
    end); the hybrid's quadratic maximum is at least the grid's largest and close to it."""
    pm, hm = Piecewise.from_epsilon(0.0, 1.0, eps, grid=grid), Hybrid.from_epsilon(
        0.0, 1.0, eps, grid=grid)
    for s in (pm, hm):
        variances = [sum(p * (s.decode(j) - Fraction(i, grid)) ** 2 for j, p in enumerate(row))
                     for i, row in enumerate(rows(s))]
        assert max(variances) <= s.worst_variance() <= max(variances) + Fraction(1, 4 * grid**2)
        if s is pm:
            assert s.worst_variance() == max(variances) == max(variances[0], variances[-1])


@pytest.mark.parametrize("eps", [0.7, 1.0, 2.0, math.log(3), 4.0])
def test_worst_variances_match_wang_et_al(eps):
    """On the default grid (K = 1024), as shares of the range (the [-1, 1] formulas over 4):
    PM t^2/(z-1) + (z+3)/(3(z-1)^2) at t = 1 (Lemma 1), HM (z+3)/(3z(z-1)) + C_D^2/z (Lemma
    4), Duchi C_D^2 at t = 0, within 0.3 % (the grid's rounding of the window)."""
    z, cd = math.exp(eps / 2), (math.exp(eps) + 1) / (math.exp(eps) - 1)
    pm, hm = Piecewise.from_epsilon(0, 1, eps), Hybrid.from_epsilon(0, 1, eps)
    assert float(pm.worst_variance()) == pytest.approx(
        (1 / (z - 1) + (z + 3) / (3 * (z - 1) ** 2)) / 4, rel=3e-3)
    assert float(hm.worst_variance()) == pytest.approx(
        ((z + 3) / (3 * z * (z - 1)) + cd**2 / z) / 4, rel=3e-3)
    assert float(duchi_worst_variance(hm.duchi)) == pytest.approx(cd**2 / 4, rel=1e-12)
    assert hm.piecewise_share == pytest.approx(1 - math.exp(-eps / 2), abs=1e-15)


def test_the_hybrid_switches_to_duchi_alone_at_wang_et_als_eps_star():
    assert abs(EPS_STAR - 0.61) < 0.001
    assert Hybrid.from_epsilon(0, 1, EPS_STAR - 0.003).share == 0
    assert Hybrid.from_epsilon(0, 1, EPS_STAR + 0.003).share > 0


@pytest.mark.parametrize("eps, chosen", [(0.2, "duchi"), (0.5, "duchi"), (0.7, "hybrid"),
                                         (1.0, "hybrid"), (3.0, "hybrid"), (6.0, "hybrid")])
def test_auto_takes_the_lowest_worst_case_variance_and_says_so(eps, chosen):
    q = scheme(min=0, max=10, epsilon=eps, mechanism="auto")
    assert q.scheme.name == chosen and q.auto.chosen == chosen
    assert min(q.auto.variances, key=q.auto.variances.get) == chosen or (
        q.auto.variances["duchi"] == q.auto.variances["hybrid"])
    for name in ("duchi", "piecewise", "hybrid"):
        built = scheme(min=0, max=10, epsilon=eps, mechanism=name).scheme
        assert q.auto.variances[name] == float(worst_variance(built))
    assert "the lowest worst-case variance of the mean" in q.auto.words()
    assert "below epsilon 0.61" in q.auto.words()


def test_the_vectors_are_what_the_script_writes():
    script = Path(__file__).parents[1] / "scheme_vectors.py"
    assert subprocess.run([sys.executable, str(script), "--check"]).returncode == 0


def test_the_vectors_follow_the_rule_in_exact_arithmetic():
    """An independent statement of the rule: i = floor(P K/N) + [U1 < P K mod N], the cell
    i + floor(U2 m/T) if U2 < T else floor((U2 - T) M/(N - T)); the hybrid's part by U1 < B."""
    cases = [c for c in VECTORS["cases"] if c["question"].get("mechanism") in (
        "piecewise", "hybrid", "square_wave")]  # square_wave: the piecewise rule, its window
    assert {c["question"]["mechanism"] for c in cases} == {"piecewise", "hybrid", "square_wave"}
    for case in cases:
        q = case["question"]
        s = scheme(**{k: v for k, v in q.items() if k != "type"}).scheme
        grid, window = q["grid"], q["window"]
        outputs, keep = grid + window, Fraction(q["alpha"]) * N
        for draw in case["draws"]:
            u = list(draw["u"])
            duchi = q["mechanism"] == "hybrid" and u.pop(0) >= Fraction(q["piecewise_share"]) * N
            if duchi:
                assert draw["output"] == outputs + s.duchi.randomize(draw["true"],
                                                                     iter(u).__next__)
                continue
            x = min(q["max"], max(q["min"], draw["true"]))
            p = math.floor(Fraction((x - q["min"]) / (q["max"] - q["min"])) * N)
            i = p * grid // N + (u[0] < p * grid % N)
            want = (i + math.floor(u[1] * window / keep) if u[1] < keep
                    else math.floor((u[1] - keep) * outputs / (N - keep)))
            assert draw["output"] == want


def test_every_cell_gets_exactly_its_draws():
    """The cell rule is a step function of U2; its steps are at k u (window) and T + j v, so
    each cell of position i takes u + v draws if in the window, else v."""
    s = Piecewise.from_epsilon(0.0, 1.0, 2.0, grid=8)
    u, v, keep = s.in_window, s.anywhere, s.keep
    for i in range(s.grid + 1):
        for k in range(s.window):
            assert s.cell(i, k * u) == i + k and s.cell(i, (k + 1) * u - 1) == i + k
        for j in range(s.outputs):
            assert s.cell(i, keep + j * v) == j and s.cell(i, keep + (j + 1) * v - 1) == j
    assert keep + s.outputs * v == N


def simulated(s, values, weights, n, repeats, seed, method="clopper-pearson"):
    rng = np.random.default_rng(seed)
    entries = []
    for _ in range(repeats):
        answers = rng.choice(values, size=n, p=weights)
        entries.append(s.summary(tally(s, s.simulate(answers, rng)),
                                 Settings(0.95, method))["options"][0])
    return entries


@pytest.mark.parametrize("mechanism, eps", [("piecewise", 2.0), ("hybrid", 1.0),
                                            ("hybrid", 3.0)])
def test_estimates_are_unbiased_with_honest_se_and_coverage(mechanism, eps):
    """400 surveys of 1500: the mean of the estimates within 4 SE of the truth, the SE's
    square near the spread of the estimates, coverage of the 95 % interval at least
    0.95 - 3 binomial SE, every point and interval inside [min, max]."""
    s = scheme(min=0, max=30, epsilon=eps, mechanism=mechanism).scheme
    values, weights = np.array([0, 2, 5, 10, 40]), np.array([0.4, 0.3, 0.15, 0.1, 0.05])
    truth = float(np.minimum(values, 30) @ weights)
    repeats = 400
    entries = simulated(s, values, weights, 1500, repeats, seed=7)
    points = np.array([e["p_hat"] for e in entries])
    covered = sum(e["ci_low"] <= truth <= e["ci_high"] for e in entries) / repeats
    assert covered >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / repeats)
    assert points.mean() == pytest.approx(truth, abs=4 * points.std() / math.sqrt(repeats))
    assert points.var(ddof=1) == pytest.approx(np.mean([e["standard_error"] ** 2
                                                        for e in entries]), rel=0.2)
    for e in entries:
        assert 0 <= e["ci_low"] <= e["p_mle"] <= e["ci_high"] <= 30
        assert e["ci_method"] == "normal-floor" and e["design_consistent"]


def test_the_device_distribution_is_the_simulated_one():
    """At an answer between grid positions, randomize (with a seeded draw) and simulate give
    decoded means and variances within 5 SE of the exact ones."""
    s = Hybrid.from_epsilon(0.0, 1.0, 2.0, grid=16)
    x, n = 0.3, 20_000
    rng = np.random.default_rng(3)
    base, threshold = s.piecewise.position(x)
    up = Fraction(threshold, N)
    moments = [sum(((1 - up) * s.probability(j, base) + up * s.probability(j, base + 1))
                   * s.decode(j) ** power for j in reports(s)) for power in (1, 2)]
    sd = math.sqrt(float(moments[1] - moments[0] ** 2))
    draws = iter(rng.integers(0, N, size=4 * n).tolist())
    for sample in ([s.randomize(x, draws.__next__) for _ in range(n)], s.simulate([x] * n, rng)):
        decoded = np.array([float(s.decode(j)) for j in sample])
        assert decoded.mean() == pytest.approx(float(moments[0]), abs=5 * sd / math.sqrt(n))
        assert decoded.var() == pytest.approx(sd**2, rel=0.05)


def test_summary_edges():
    s = Piecewise.from_epsilon(0.0, 10.0, 1.0)
    empty = s.summary([0, 0, 0], Settings(0.95, "wilson"))
    assert empty["n"] == 0 and empty["options"][0]["p_hat"] is None
    one = s.summary(tally(s, [0]), Settings(0.95, "wilson"))["options"][0]
    assert one["standard_error"] == pytest.approx(10 * math.sqrt(float(s.worst_variance())))
    assert one["p_mle"] == 0 and one["p_hat"] < 0 and one["warning"].startswith("small sample")
    low = s.summary(tally(s, [0] * 400), Settings(0.95, "wilson"))["options"][0]
    assert low["fit_p_value"] < 1e-6 and not low["design_consistent"]  # a mean far below min


@pytest.mark.parametrize("fields, message", [
    ({"grid": 1000, "window": 3, "alpha": 0.5}, r"\.grid: grid must be a power of two"),
    ({"grid": 1024, "window": 621, "alpha": 0.4}, r"\.alpha: alpha times 2\^53"),
    ({"grid": 1024, "window": 621}, r"\.alpha: must be a number"),
    ({"grid": 1024, "window": 0, "alpha": 0.5}, r"\.window: must be a whole number"),
])
def test_manifest_parameters_that_are_no_exact_grid_are_refused(fields, message):
    with pytest.raises(SurveyError, match=message):
        scheme(min=0, max=1, mechanism="piecewise", **fields)


NUMBERS = {"title": "Numbers", "release_batch": 1, "questions": [
    {"id": "drinks", "text": "Drinks last week?", "type": "numeric", "min": 0, "max": 30,
     "unit": "drinks", "epsilon": 1.0, "mechanism": "piecewise"},
    {"id": "hours", "text": "Hours online?", "type": "numeric", "min": 0, "max": 24,
     "epsilon": 1.5, "mechanism": "auto"}]}


@pytest.fixture
def numbers_id(client, auth):
    return published(client, auth, NUMBERS)


def test_intake_refuses_reports_off_the_grid(client, numbers_id):
    survey = parse_manifest(client.get(f"/api/surveys/{numbers_id}").data)
    cells = survey.question("drinks").scheme.outputs
    hm = survey.question("hours").scheme
    assert hm.name == "hybrid"
    for drinks, hours in ((cells, 0), (-1, 0), (1.5, 0), (True, 0), ([1], 0),
                          (0, hm.piecewise.outputs + 2), (0, "1")):
        response = client.post(f"/api/surveys/{numbers_id}/responses",
                               json={"answers": {"drinks": drinks, "hours": hours}})
        assert response.status_code == 422, (drinks, hours)
        assert "must be a whole number from 0 to" in response.json["detail"]
    ok = client.post(f"/api/surveys/{numbers_id}/responses",
                     json={"answers": {"drinks": cells - 1, "hours": hm.piecewise.outputs + 1}})
    assert ok.status_code in (200, 201, 202), ok.json


def test_a_hybrid_without_its_piecewise_part_refuses_cells():
    s = scheme(min=0, max=1, epsilon=0.4, mechanism="hybrid").scheme
    assert s.share == 0 and s.check_report(0) is not None
    assert s.check_report(s.piecewise.outputs) is None


def test_end_to_end_manifest_estimates_exports(client, auth, numbers_id):
    raw = client.get(f"/api/surveys/{numbers_id}").data
    manifest = json.loads(raw)
    assert manifest["format"] == "ldp-survey-manifest/8"  # /8: every survey published since
    assert replace(parse_manifest(raw), form=None).manifest()["format"] == "ldp-survey-manifest/7"
    assert manifest["questions"][0]["mechanism"] == "piecewise"
    assert manifest["questions"][1]["mechanism"] == "hybrid"  # what auto chose
    survey = parse_manifest(raw)
    rng = np.random.default_rng(5)
    drinks, hours = (survey.question(q).scheme for q in ("drinks", "hours"))
    a = drinks.simulate(rng.choice([0, 3, 8], size=600), rng)
    b = hours.simulate(rng.choice([1, 5], size=600), rng)
    responses = [{"answers": {"drinks": x, "hours": y}} for x, y in zip(a, b, strict=True)]
    assert client.post(f"/api/surveys/{numbers_id}/responses/batch",
                       json={"responses": responses}, headers=auth).status_code == 201
    release_due(client.application)
    body = client.get(f"/api/surveys/{numbers_id}/estimates", headers=auth).json
    for question, s, reports_ in zip(body["questions"], (drinks, hours), (a, b), strict=True):
        want = s.summary(tally(s, reports_), Settings(0.95, "clopper-pearson"))
        assert question["options"] == want["options"]
    rows_ = list(csv.DictReader(io.StringIO(client.get(
        f"/api/surveys/{numbers_id}/export.csv", headers=auth).get_data(as_text=True))))
    for qid, question in (("drinks", body["questions"][0]), ("hours", body["questions"][1])):
        values = [float(row[qid]) for row in rows_]
        assert sum(values) / len(values) == pytest.approx(question["options"][0]["p_hat"],
                                                          rel=1e-9)
    book = client.get(f"/api/surveys/{numbers_id}/codebook.md", headers=auth)
    assert "piecewise" in book.get_data(as_text=True)


def test_the_device_sends_a_cell(live_server, client, auth, numbers_id, tmp_path):
    state = LocalState(tmp_path / "client" / "state.json")
    verified = fetch_survey(live_server, numbers_id, state, Ceilings(per_question=2, total=4))
    submission = prepare(verified, {"drinks": 400, "hours": 2.5}, state)
    assert 0 <= submission.answers["drinks"] < verified.survey.question("drinks").scheme.outputs
    assert sent_and_released(client, auth, verified, submission, state) == [1, 1]


def test_mock_reports_the_mean_with_its_true_value(tmp_path):
    result = run_mock(tmp_path, NUMBERS, "[truth]\ndrinks = { values = [0, 2, 5, 10, 40], "
                      "weights = [4, 3, 1.5, 1, 0.5] }\nhours = { values = [1, 5], weights = "
                      "[1, 1] }\n", "--respondents", "3000", "--seed", "9", "--json")
    assert result.exit_code == 0, result.output
    drinks, hours = json.loads(result.stdout)["results"]
    assert drinks["question"] == "drinks" and drinks["option"] == "mean"
    assert drinks["true_value"] == pytest.approx(3.85) and hours["true_value"] == 3
    for row in (drinks, hours):
        assert row["covered"] == (row["ci_low"] <= row["true_value"] <= row["ci_high"])
        assert row["ci_high"] - row["ci_low"] < 3


def test_survey_check_says_what_auto_chose(tmp_path):
    from click.testing import CliRunner

    from ldpsurvey.cli import main

    definition = {"title": "t", "questions": [
        {"id": "low", "text": "Low?", "type": "numeric", "min": 0, "max": 24, "epsilon": 0.5,
         "mechanism": "auto"},
        {"id": "high", "text": "High?", "type": "numeric", "min": 0, "max": 24, "epsilon": 1.0,
         "mechanism": "auto"}]}
    path = tmp_path / "numbers.json"
    path.write_text(json.dumps(definition))
    result = CliRunner().invoke(main, ["survey", "check", str(path)])
    assert result.exit_code == 0, result.output
    assert "low (duchi): epsilon 0.5" in result.output
    assert "mechanism auto chose duchi: the lowest worst-case variance of the mean" in (
        result.output)
    assert "high (hybrid): epsilon 1" in result.output
    assert "mechanism auto chose hybrid" in result.output and "piecewise 1.31" in result.output
    assert "0.61):" not in result.output and "0.61: duchi" in result.output  # one bracket


@pytest.mark.parametrize("mechanism, expected", [("piecewise", "/7"), ("hybrid", "/7"),
                                                 ("duchi", "/6")])
def test_piecewise_and_hybrid_need_format_7_and_6_refuses_them(mechanism, expected):
    """A survey using a number mechanism new in /7 is /7, so a /6 reader refuses it by its
    format; the same bytes relabelled /6 are refused naming the mechanism. Duchi stays /6."""
    from dataclasses import replace

    survey = replace(parse_definition({"title": "t", "questions": [
        {"id": "n", "text": "How many?", "type": "numeric", "min": 0, "max": 10, "epsilon": 2.0,
         "mechanism": mechanism}]}), survey_id="s", key_id="k", origin="https://x.org")
    signed = survey.manifest_bytes()
    assert json.loads(signed)["format"] == f"ldp-survey-manifest{expected}"
    assert parse_manifest(signed).questions[0].scheme.name == mechanism
    if expected == "/7":
        older = signed.replace(b"ldp-survey-manifest/7", b"ldp-survey-manifest/6")
        with pytest.raises(SurveyError, match=f"{mechanism} needs format ldp-survey-manifest/7"):
            parse_manifest(older)
