"""The Square Wave mechanism (shared/mechanisms/square_wave.py) and its estimates
(shared/stats/deconvolution.py):
Li et al.'s b, exact epsilon by brute force over small grids, the sampler's draws, EMS, the
bounds' inequalities at the exact report rates (every distribution, point masses at the ends
included), the summary's shape, the survey file's fields and manifest format /8."""

import itertools
import json
import math
import tomllib
from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest

from ldpsurvey.shared import SurveyError, parse_definition, parse_manifest
from ldpsurvey.shared.mechanisms.protocol import Settings
from ldpsurvey.shared.mechanisms.randomizer import N
from ldpsurvey.shared.mechanisms.square_wave import QUANTILES, SquareWave, half_width, window_for_epsilon
from ldpsurvey.shared.stats.deconvolution import (
    Window,
    bin_bounds,
    cdf_bounds,
    ems,
    quantile_bounds,
    smooth,
)

from helpers import tally

SMALL = [(grid, eps) for grid in (4, 8, 16) for eps in (0.3, 1.0, 2.0, 5.0)]


def question(**fields):
    return parse_definition({"title": "t", "questions": [
        {"id": "q", "text": "Q?", "type": "numeric", "min": 0, "max": 1, **fields}]}
    ).questions[0]


@pytest.mark.parametrize("eps", [0.1, 0.5, 1.0, 2.0, 5.0, 10.0])
def test_b_is_li_et_als(eps):
    """b = (eps e^eps - e^eps + 1) / (2 e^eps (e^eps - 1 - eps)); the window is round(2 b K)."""
    e = math.exp(eps)
    assert half_width(eps) == pytest.approx((eps * e - e + 1) / (2 * e * (e - 1 - eps)),
                                            rel=1e-9)
    assert window_for_epsilon(eps, 256) == max(1, round(2 * half_width(eps) * 256))


def test_b_tends_to_a_half_and_to_zero():
    assert half_width(1e-3) == pytest.approx(0.5, abs=1e-3)
    assert half_width(20.0) == pytest.approx(19 / (2 * math.exp(20)), rel=1e-6)


@pytest.mark.parametrize("grid, eps", SMALL)
def test_epsilon_is_exact_by_brute_force(grid, eps):
    """Over every pair of positions and every cell, the largest ratio of the exact
    probabilities is 1 + u/v, whose log is the scheme's epsilon, at most the target; rows sum
    to 1."""
    s = SquareWave.from_epsilon(0.0, 1.0, eps, grid=grid, bins=2)
    table = [[s.probability(j, i) for j in range(s.outputs)] for i in range(grid + 1)]
    assert all(sum(row) == 1 for row in table)
    worst = max(max(column) / min(column) for column in zip(*table, strict=True))
    assert worst == 1 + Fraction(s.in_window, s.anywhere)
    assert math.isclose(math.log(worst), s.epsilon, rel_tol=1e-12)
    assert s.epsilon <= eps


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0, 5.0, 10.0])
def test_the_window_holds_what_the_continuous_wave_does(eps):
    """On the default grid: epsilon within 1e-6 of the target, and the window's probability
    m e^eps / (m e^eps + K) is the continuous mechanism's 2b e^eps / (2b e^eps + 1) at
    2b = m/K (Li et al., section 4)."""
    s = SquareWave.from_epsilon(0.0, 1.0, eps)
    assert s.epsilon == pytest.approx(eps, rel=1e-6)
    window = sum(s.probability(j, 10) for j in range(10, 10 + s.window))
    two_b, e = s.window / s.grid, math.exp(s.epsilon)
    assert float(window) == pytest.approx(two_b * e / (two_b * e + 1), rel=1e-9)


def test_every_cell_gets_exactly_its_draws():
    """The sampler (piecewise's rule) gives each cell of position i u + v draws in the window,
    v outside, and uses all 2^53."""
    s = SquareWave.from_epsilon(0.0, 1.0, 1.0, grid=8, bins=2)
    u, v, keep = s.in_window, s.anywhere, s.keep
    for i in range(s.grid + 1):
        for k in range(s.window):
            assert s.cell(i, k * u) == i + k == s.cell(i, (k + 1) * u - 1)
        for j in range(s.outputs):
            assert s.cell(i, keep + j * v) == j == s.cell(i, keep + (j + 1) * v - 1)
    assert keep + s.outputs * v == N


def positions(shares, weights, grid):
    """The exact distribution of the device's position for answers at these shares."""
    x = np.zeros(grid + 1)
    for r, w in zip(shares, weights, strict=True):
        p = math.floor(r * N)
        base, up = p * grid // N, Fraction(p * grid % N, N)
        x[base] += w * float(1 - up)
        if up:
            x[base + 1] += w * float(up)
    return x


POPULATIONS = {"at 0": ([0.0], [1.0]), "at 1": ([1.0], [1.0]), "ends": ([0.0, 1.0], [0.5, 0.5]),
               "between positions": ([0.3001, 0.7], [0.25, 0.75]),
               "spread": (list(np.linspace(0, 1, 41)), [1 / 41] * 41)}


def truth_of(shares, weights, bins):
    """The true quartiles (least x with P(r <= x) >= q) and bin shares of a population."""
    order = np.argsort(shares)
    values, cumulative = np.array(shares)[order], np.cumsum(np.array(weights)[order])
    quartiles = [float(values[np.searchsorted(cumulative, q - 1e-12)]) for q in QUANTILES]
    edges = np.arange(bins + 1) / bins
    shares_ = [sum(w for r, w in zip(shares, weights, strict=True)
                   if lo <= r and (r < hi or hi == 1)) for lo, hi in itertools.pairwise(edges)]
    return quartiles, shares_


@pytest.mark.parametrize("eps", [0.5, 2.0, 10.0])
@pytest.mark.parametrize("population", POPULATIONS)
def test_the_bounds_hold_at_the_exact_report_rates(eps, population):
    """With the reported CDF known exactly (its bounds equal to it), L <= F <= U at every
    position, and the quartiles' and bins' intervals contain the truth: the inequalities
    deconvolution.py derives, at point masses at the ends and between grid positions."""
    s = SquareWave.from_epsilon(0.0, 1.0, eps, grid=64, bins=8)
    shares, weights = POPULATIONS[population]
    x = positions(shares, weights, s.grid)
    rates = np.cumsum(s.channel.reported(list(x)))
    lower, upper = cdf_bounds(s.channel, (rates, rates))
    cdf = np.cumsum(x)
    assert all(lower[t] - 1e-12 <= cdf[t] <= upper[t] + 1e-12 for t in range(s.grid + 1))
    quartiles, bins = truth_of(shares, weights, s.bins)
    for q, truth in zip(QUANTILES, quartiles, strict=True):
        low, high = quantile_bounds(lower, upper, q)
        assert low <= truth <= high, (q, truth, low, high)
    step = s.grid // s.bins
    for b, truth in enumerate(bins):
        low, high = bin_bounds(lower, upper, b * step, (b + 1) * step)
        assert low - 1e-12 <= truth <= high + 1e-12, (b, truth, low, high)


def test_at_high_epsilon_the_exact_bounds_are_tight():
    """At epsilon 10 (a window of one cell) and exact rates, the median's interval of a point
    mass is within two positions of it."""
    s = SquareWave.from_epsilon(0.0, 1.0, 10.0, grid=64, bins=8)
    x = positions([0.5], [1.0], s.grid)
    rates = np.cumsum(s.channel.reported(list(x)))
    low, high = quantile_bounds(*cdf_bounds(s.channel, (rates, rates)), 0.5)
    assert 0.5 - 2 / 64 <= low <= 0.5 <= high <= 0.5 + 2 / 64


def test_smoothing_keeps_the_mass_and_spreads_it():
    """(1, 2, 1)/4 inside, (2, 1)/3 at the ends, renormalized: [1/3, 1/2, 1/3] / (7/6)."""
    assert smooth([0.0, 1.0, 0.0]) == pytest.approx([2 / 7, 3 / 7, 2 / 7])
    assert sum(smooth([1.0, 0.0, 0.0, 0.0])) == pytest.approx(1.0)


def test_ems_recovers_a_smooth_distribution_from_its_expected_counts():
    """From the expected report counts of 100,000 answers spread as a triangle on [0.2, 0.6],
    EMS's CDF is within 0.05 of the truth at every position (Li et al.'s EMS; its smoothing
    blurs point masses, which the exact intervals do not rely on)."""
    channel = SquareWave.from_epsilon(0.0, 1.0, 2.0, grid=64, bins=8).channel
    shares = np.linspace(0.2, 0.6, 41)
    weights = 1 - np.abs(shares - 0.4) / 0.2
    x = positions(shares, weights / weights.sum(), 64)
    counts = [round(100_000 * p) for p in channel.reported(list(x))]
    fitted = ems(channel, counts)
    assert sum(fitted) == pytest.approx(1.0)
    assert np.max(np.abs(np.cumsum(fitted) - np.cumsum(x))) < 0.05


def test_the_reported_distribution_is_the_channel_applied():
    """Window.reported (prefix sums) equals the sum over positions of x_i P(j | i)."""
    s = SquareWave.from_epsilon(0.0, 1.0, 1.0, grid=8, bins=2)
    x = [0.1, 0.0, 0.2, 0.05, 0.05, 0.3, 0.0, 0.1, 0.2]
    want = [sum(x[i] * float(s.probability(j, i)) for i in range(9)) for j in range(s.outputs)]
    assert s.channel.reported(x) == pytest.approx(want, abs=1e-15)


def test_a_window_channel_is_its_integers():
    c = Window(4, 2, 3, 1, 12)
    assert c.outputs == 6 and c.window * c.in_window + c.outputs * c.anywhere == c.total


def test_the_summary_has_the_mean_histogram_and_quartiles_inside_their_intervals():
    s = question(min=18, max=99, epsilon=3.0, mechanism="square_wave", bins=8).scheme
    assert s.counters == s.outputs
    rng = np.random.default_rng(2)
    answers = rng.normal(40, 8, 500)
    summary = s.summary(tally(s, s.simulate(answers, rng)), Settings(0.95, "clopper-pearson"))
    mean = summary["options"][0]
    assert mean["ci_low"] <= mean["p_mle"] <= mean["ci_high"]
    assert mean["ci_low"] <= float(np.mean(np.clip(answers, 18, 99))) <= mean["ci_high"]
    distribution = summary["distribution"]
    assert [b["low"] for b in distribution["bins"]][:2] == [18.0, 18 + 81 / 8]
    assert distribution["bins"][-1]["high"] == 99.0
    assert sum(b["share"] for b in distribution["bins"]) == pytest.approx(1.0, abs=0.05)
    for b in distribution["bins"]:
        assert 0 <= b["ci_low"] <= b["share"] <= b["ci_high"] <= 1
    assert [q["q"] for q in distribution["quantiles"]] == [0.25, 0.5, 0.75]
    for q in distribution["quantiles"]:
        assert 18 <= q["ci_low"] <= q["value"] <= q["ci_high"] <= 99
    assert distribution["quantiles"][1]["ci_low"] <= 40.5 <= distribution["quantiles"][1]["ci_high"]
    empty = s.summary([0] * s.counters, Settings(0.95, "clopper-pearson"))
    assert empty["distribution"] is None and empty["options"][0]["p_hat"] is None


def test_auto_asks_square_wave_for_a_distribution_and_the_manifest_is_format_8():
    q = question(epsilon=2.0, mechanism="auto", distribution=True, bins=32)
    assert q.scheme.name == "square_wave" and q.scheme.bins == 32
    assert question(epsilon=2.0, mechanism="auto").scheme.name != "square_wave"
    assert question(epsilon=2.0, mechanism="auto", distribution=False).scheme.name != "square_wave"
    survey = replace(parse_definition({"title": "t", "questions": [
        {"id": "q", "text": "Q?", "type": "numeric", "min": 0, "max": 9, "epsilon": 1.0,
         "mechanism": "square_wave"}]}), survey_id="s", key_id="k", origin="https://a.example")
    manifest = survey.manifest()
    assert manifest["format"] == "ldp-survey-manifest/8"
    assert manifest["questions"][0]["bins"] == 16
    back = parse_manifest(survey.manifest_bytes())
    assert back.questions[0].scheme == survey.questions[0].scheme
    older = survey.manifest_bytes().replace(b"manifest/8", b"manifest/7")
    # a /7 reader knows neither /8's languages (always written in /8) nor a question's bins
    with pytest.raises(SurveyError, match=r"unknown field 'languages'|bins"):
        parse_manifest(older)


@pytest.mark.parametrize("fields, where, message", [
    ({"distribution": "yes"}, "distribution", "must be true or false"),
    ({"mechanism": "square_wave", "distribution": False}, "distribution", "always estimates"),
    ({"bins": 8}, "bins", "applies when the question asks for its distribution"),
    ({"distribution": True, "bins": 10}, "bins", "power of two"),
    ({"distribution": True, "bins": 128}, "bins", "whole number from 2 to 64"),
    ({"mechanism": "duchi", "distribution": True}, "distribution", "does not apply"),
    ({"mechanism": "square_wave", "epsilon": 0}, "epsilon", "must be a number in"),
])
def test_the_survey_file_refuses_a_wrong_distribution_field(fields, where, message):
    with pytest.raises(SurveyError, match=f"question 'q'.{where}: .*{message}"):
        question(**{"epsilon": 1.0, "mechanism": "auto", **fields})


@pytest.mark.parametrize("fields, message", [
    ({"window": 3}, "alpha times 2"), ({"grid": 2048}, "grid"), ({"bins": 3}, "power of two"),
])
def test_manifest_parameters_that_are_no_exact_grid_are_refused(fields, message):
    s = SquareWave.from_epsilon(0.0, 1.0, 1.0)
    data = {**s.fields(), **fields}
    with pytest.raises(SurveyError, match=message):
        question(**{k: v for k, v in data.items() if k not in ("min", "max")})


def test_the_design_names_the_mechanism_and_bins():
    design = SquareWave.from_epsilon(0.0, 1.0, 1.0).design()
    assert design["bins"] == 16 and "square wave" in design["report"]
    assert design["histogram"].startswith("a histogram on 16 equal bins")
    assert json.dumps(design)


INCOMES = {"title": "Incomes", "release_batch": 1, "public_results": True, "questions": [
    {"id": "income", "text": "Your income, in thousands?", "type": "numeric", "min": 0,
     "max": 200, "unit": "thousand", "mechanism": "auto", "distribution": True, "bins": 8,
     "epsilon": 3.0}]}


def test_end_to_end_intake_estimates_results_page_and_exports(client, auth):
    """Intake refuses a report off the grid (422 naming the range); the released reports'
    estimates are the scheme's summary, distribution included; the results page shows the
    median and quartiles and the histogram, its CSV the distribution's rows; the codebook
    names the mechanism and its bins, the JSON lines export's parameters the histogram."""
    import csv
    import io

    from helpers import published, release_due

    survey_id = published(client, auth, INCOMES)
    survey = parse_manifest(client.get(f"/api/surveys/{survey_id}").data)
    s = survey.question("income").scheme
    assert s.name == "square_wave" and s.bins == 8
    for bad in (s.outputs, -1, 2.5, True, [1], "3"):
        response = client.post(f"/api/surveys/{survey_id}/responses",
                               json={"answers": {"income": bad}})
        assert response.status_code == 422, bad
        assert f"must be a whole number from 0 to {s.outputs - 1}" in response.json["detail"]
    rng = np.random.default_rng(8)
    reports = s.simulate(rng.normal(60, 15, 300), rng)
    assert client.post(f"/api/surveys/{survey_id}/responses/batch", headers=auth, json={
        "responses": [{"answers": {"income": r}} for r in reports]}).status_code == 201
    release_due(client.application)
    body = client.get(f"/api/surveys/{survey_id}/estimates", headers=auth).json
    question = body["questions"][0]
    want = s.summary(tally(s, reports), Settings(0.95, "clopper-pearson"))
    assert question["distribution"] == json.loads(json.dumps(want["distribution"]))
    assert question["options"] == json.loads(json.dumps(want["options"]))
    page = client.get(f"/s/{survey_id}/results").get_data(as_text=True)  # public_results
    assert "How the answers spread" in page and "Median" in page and "Upper quartile" in page
    assert "how the answers spread: Your income" in page  # the histogram's label
    rows = list(csv.DictReader(io.StringIO(client.get(
        f"/s/{survey_id}/results/estimates.csv").get_data(as_text=True))))
    median = next(row for row in rows if row["option"] == "median")
    assert float(median["p_mle"]) == pytest.approx(question["distribution"]["quantiles"][1]["value"])
    assert sum(row["option"].startswith("share from ") for row in rows) == 8
    book = client.get(f"/api/surveys/{survey_id}/codebook.json", headers=auth).json
    entry = book["questions"][0]
    assert entry["mechanism"] == "square_wave" and entry["bins"] == 8
    assert "the square wave" in entry["report"]
    head = json.loads(client.get(f"/api/surveys/{survey_id}/export.jsonl",
                                 headers=auth).get_data(as_text=True).splitlines()[0])
    assert head["parameters"]["income"]["histogram"].startswith("a histogram on 8 equal bins")


def test_the_distribution_example_passes_survey_check(tmp_path):
    """docs/question-types.md's distribution example, as written: `survey check` refuses
    nothing under a respondent's default limits, and `auto` chose square_wave."""
    from helpers import checked_doc_example

    block, checked = checked_doc_example("distribution-example", tmp_path)
    assert checked["refusals"] == []
    assert parse_definition(tomllib.loads(block)).questions[0].scheme.name == "square_wave"


def test_the_distribution_is_computed_once_per_counts_and_never_shared():
    """summary keeps the distribution of the same counts and confidence (distribution_of),
    and each caller gets its own copy: changing one changes no later summary."""
    from ldpsurvey.shared.mechanisms.square_wave import distribution_of

    s = SquareWave.from_epsilon(0.0, 10.0, 3.0, grid=64, bins=4)
    counts = [3] * s.counters
    first = s.summary(counts, Settings(0.95, "wilson"))
    hits = distribution_of.cache_info().hits
    first["distribution"]["bins"][0]["share"] = -1.0
    second = s.summary(counts, Settings(0.95, "wilson"))
    assert distribution_of.cache_info().hits == hits + 1
    assert second["distribution"]["bins"][0]["share"] >= 0
    assert second["distribution"] == s.distribution(counts, 0.95)


@pytest.mark.parametrize("confidence", [5e-324, 0.5, 0.95, 1 - 1e-12])
def test_every_confidence_gives_intervals_inside_the_range(confidence):
    """The estimates endpoint takes any confidence in (0, 1): at 5e-324 a one-sided bound
    fails with probability 1/2 (it was a 500: Clopper-Pearson at confidence 0)."""
    s = SquareWave.from_epsilon(0.0, 10.0, 2.0, grid=64, bins=4)
    distribution = s.distribution([2] * s.counters, confidence)
    for q in distribution["quantiles"]:
        assert 0 <= q["ci_low"] <= q["value"] <= q["ci_high"] <= 10
    for b in distribution["bins"]:
        assert 0 <= b["ci_low"] <= b["share"] <= b["ci_high"] <= 1
