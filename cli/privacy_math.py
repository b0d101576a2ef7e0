"""The privacy-math commands: epsilon, alpha, estimate, plan, shuffle."""

import math

import click

from ldpsurvey.cli.check import plan
from ldpsurvey.cli.options import confidence_option, json_option, method_option
from ldpsurvey.cli.output import emit, emit_json
from ldpsurvey.shared import (
    DEFAULT_DELTA,
    Mechanism,
    SurveyError,
    central_epsilon,
    closed_form_epsilon,
    estimate,
    load_definition,
    n_required,
    n_required_central_laplace,
    n_required_question,
    numerical_epsilon,
    posterior_bounds,
    release_batch_required,
)

ALPHA = click.FloatRange(0.0, 1.0, max_open=True)
BETA = click.FloatRange(0.0, 1.0, min_open=True, max_open=True)
UNIT_OPEN = click.FloatRange(0.0, 1.0, min_open=True, max_open=True)
POSITIVE = click.FloatRange(0.0, min_open=True)


def _finite(value: float, option: str) -> None:
    if not math.isfinite(value):
        raise click.BadParameter("must be finite", param_hint=f"'{option}'")


def _mechanism(alpha: float, beta: float) -> Mechanism:
    try:
        return Mechanism(alpha, beta)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@click.command("epsilon")
@click.option("--alpha", type=ALPHA, required=True, help="Probability of reporting the truth.")
@click.option("--beta", type=BETA, default=0.5, show_default=True,
              help="P(report yes) when not reporting the truth.")
@json_option
def epsilon_command(alpha: float, beta: float, as_json: bool) -> None:
    """Epsilon of a yes/no question with the given alpha and beta."""
    mechanism = _mechanism(alpha, beta)
    emit({
        "epsilon": mechanism.epsilon,
        "p_yes_given_yes": mechanism.probability(1, 1),
        "p_yes_given_no": mechanism.probability(0, 1),
        "posterior_max_at_prior_half": posterior_bounds(0.5, mechanism.epsilon).high,
    }, as_json)


@click.command("alpha")
@click.option("--epsilon", "eps", type=POSITIVE, required=True, help="Target epsilon.")
@click.option("--beta", type=BETA, default=0.5, show_default=True,
              help="P(report yes) when not reporting the truth (1/2 minimizes variance).")
@json_option
def alpha_command(eps: float, beta: float, as_json: bool) -> None:
    """The largest alpha whose epsilon does not exceed the target."""
    _finite(eps, "--epsilon")
    mechanism = Mechanism.from_epsilon(eps, beta)
    emit({"alpha": mechanism.alpha, "beta": beta, "epsilon": mechanism.epsilon}, as_json)


@click.command("estimate")
@click.option("--alpha", type=ALPHA, required=True, help="Probability of reporting the truth.")
@click.option("--beta", type=BETA, default=0.5, show_default=True,
              help="P(report yes) when not reporting the truth.")
@click.option("--n", "n", type=click.IntRange(min=1), required=True, help="Number of reports.")
@click.option("--yes", "yes", type=click.IntRange(min=0), required=True,
              help="Number of reports that said yes.")
@confidence_option
@method_option
@json_option
def estimate_command(alpha: float, beta: float, n: int, yes: int, confidence: float,
                     method: str, as_json: bool) -> None:
    """Estimate the true yes proportion from n randomized reports of which `yes` said yes."""
    if yes > n:
        raise click.BadParameter(f"{yes} yes reports out of n = {n}", param_hint="'--yes'")
    if alpha == 0.0:
        raise click.BadParameter("alpha = 0 reports pure noise", param_hint="'--alpha'")
    result = estimate(_mechanism(alpha, beta), [n - yes, yes], confidence=confidence,
                      method=method)[1]
    emit({key: getattr(result, key) for key in (
        "p_hat", "standard_error", "p_hat_clipped", "p_mle", "ci_low", "ci_high", "ci_method",
        "confidence", "n", "fit_p_value", "design_consistent", "warning")}, as_json)


def _numbers(value: str | None, option: str) -> list[float] | None:
    """A comma-separated list of finite numbers (None stays None)."""
    if value is None:
        return None
    try:
        numbers = [float(part) for part in value.split(",")]
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a comma-separated list of numbers",
                                 param_hint=f"'{option}'") from None
    for number in numbers:
        _finite(number, option)
    return numbers


def _plan_design(eps: float, beta: str | None, options: int | None) -> Mechanism:
    """The mechanism at epsilon with --beta (P(report yes) for yes/no, or one probability per
    option; its length gives k) or uniform over --options (default 2)."""
    given = _numbers(beta, "--beta")
    if given is not None and len(given) == 1:
        given = [1.0 - given[0], given[0]]
    k = options or (len(given) if given else 2)
    if given is not None and len(given) != k:
        raise click.BadParameter(f"needs {k} probabilities (--options), got {len(given)}",
                                 param_hint="'--beta'")
    try:
        return Mechanism.from_epsilon(eps, given, k=k)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--beta'") from None


def _planned_n(mechanism: Mechanism, proportion: list[float] | None, margin: float,
               confidence: float) -> int:
    """n_required for yes/no with one proportion of yes, else n_required_question (the given
    proportions, one per option, or the worst case)."""
    try:
        if proportion is not None and len(proportion) == 1 and mechanism.k == 2:
            return n_required(mechanism, proportion[0], margin, confidence)
        return n_required_question(mechanism, proportion, margin, confidence)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--proportion'") from None


MARGIN_NOTE = ("The margin is an expected half-width: about what the interval's half-width will "
               "be on average, not a bound that holds in every survey.")


@click.command("plan")
@click.option("--epsilon", "eps", type=POSITIVE, help="Epsilon per answer (needed without "
              "--survey).")
@click.option("--survey", "survey_file", type=click.Path(exists=True, dir_okay=False),
              help="Plan every question of this survey file with its own mechanism and "
                   "epsilon (for a number question --margin is a share of its range).")
@click.option("--options", "options", type=click.IntRange(2, 64),
              help="Options of the question [default: 2 (yes/no), or as many as --beta gives].")
@click.option("--beta", help="P(report yes) when forced, or one probability per option, "
              "comma-separated [default: uniform].")
@click.option("--proportion", help="Expected true proportion of yes, or one per option, "
              "comma-separated [default: the worst case].")
@click.option("--margin", type=UNIT_OPEN,
              help="Wanted expected CI half-width on every option.")
@confidence_option
@click.option("--central-epsilon", "central", type=POSITIVE,
              help="Wanted central epsilon of a shuffled release: adds release_batch_required.")
@click.option("--delta", type=UNIT_OPEN, help=f"Delta of the central epsilon [default: {DEFAULT_DELTA:g}].")
@json_option
def plan_command(eps: float | None, survey_file: str | None, options: int | None,
                 beta: str | None, proportion: str | None, margin: float | None,
                 confidence: float, central: float | None, delta: float | None,
                 as_json: bool) -> None:
    """Respondents needed for an expected margin of error on every option of a question with
    k options and any beta (at given proportions or the worst case) and, for a yes/no question
    at a given proportion, under central differential privacy with Laplace noise for
    comparison; with --central-epsilon, the smallest batch of shuffled reports whose central
    epsilon reaches it. With --survey, every question of a survey file with its own mechanism
    (forced response, OUE, OLH, check-all-that-apply, numbers). The margin is an expected
    half-width, not a bound for every survey."""
    if survey_file is not None:
        _plan_survey(survey_file, margin, confidence, as_json, eps=eps, options=options,
                     beta=beta, proportion=proportion, central=central)
        return
    if eps is None:
        raise click.UsageError("Missing option '--epsilon' (or '--survey').")
    for value, option in ((eps, "--epsilon"), (margin, "--margin"),
                          (confidence, "--confidence"), (central, "--central-epsilon"),
                          (delta, "--delta")):
        if value is not None:
            _finite(value, option)
    if proportion is not None and margin is None:
        raise click.UsageError("Missing option '--margin': --proportion needs it.")
    if margin is None and central is None:
        raise click.UsageError("Missing option '--margin' (or '--central-epsilon').")
    if central is None and delta is not None:
        raise click.UsageError("Option '--delta' needs '--central-epsilon'.")
    mechanism = _plan_design(eps, beta, options)
    shares = _numbers(proportion, "--proportion")
    record: dict[str, float | int | list[float] | None] = {"alpha": mechanism.alpha}
    if beta is not None or mechanism.k != 2:
        record["beta"] = list(mechanism.beta)
    if margin is not None:
        record["n_required"] = _planned_n(mechanism, shares, margin, confidence)
        if shares is not None and len(shares) == 1 and mechanism.k == 2:
            record["n_required_central_laplace"] = n_required_central_laplace(
                eps, shares[0], margin, confidence)
        click.echo(MARGIN_NOTE, err=True)
    if central is not None:
        record["release_batch_required"] = release_batch_required(
            eps, central, DEFAULT_DELTA if delta is None else delta)
    emit(record, as_json)


def _plan_survey(path: str, margin: float | None, confidence: float, as_json: bool,
                 **alone: object) -> None:
    """plan --survey: check.plan on the survey file, for people or as JSON."""
    given = [name for name, value in alone.items() if value is not None]
    if given:
        raise click.UsageError(f"--survey plans each question with its own settings: drop "
                               f"--{given[0].replace('_', '-')}")
    if margin is None:
        raise click.UsageError("Missing option '--margin': --survey needs it.")
    try:
        planned = plan(load_definition(path), margin, confidence)
    except SurveyError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(MARGIN_NOTE, err=True)
    if as_json:
        emit_json(planned)
        return
    click.echo(f"{planned['title']}: {planned['n_required']:,} respondents for an expected "
               f"margin of {margin:g} on every estimate ({confidence:.0%} intervals)")
    for q in planned["questions"]:
        units = f" (±{q['margin_units']:g} in its units)" if "margin_units" in q else ""
        click.echo(f"  {q['id']} ({q['mechanism']}, epsilon {q['epsilon']:.4g}): "
                   f"{q['n_required']:,}{units}")
        if "auto" in q:
            click.echo(f"    {q['auto']}")


@click.command("shuffle")
@click.option("--epsilon", "eps", type=POSITIVE, required=True,
              help="Local epsilon of each report (a whole submission: the survey's total).")
@click.option("--n", "n", type=click.IntRange(min=1), required=True,
              help="Reports shuffled together in one release, all from honest respondents.")
@click.option("--delta", type=UNIT_OPEN, default=DEFAULT_DELTA, show_default=True,
              help="Delta of the central guarantee.")
@json_option
def shuffle_command(eps: float, n: int, delta: float, as_json: bool) -> None:
    """Central epsilon of a release of n shuffled eps-LDP reports (Feldman, McMillan and
    Talwar 2021): the closed form (null where it does not apply), the numerical bound and
    the smallest of them and the local epsilon."""
    _finite(eps, "--epsilon")
    _finite(delta, "--delta")
    emit({
        "epsilon_local": eps,
        "n": n,
        "delta": delta,
        "epsilon_closed_form": closed_form_epsilon(eps, n, delta),
        "epsilon_numerical": numerical_epsilon(eps, n, delta),
        "epsilon_central": central_epsilon(eps, n, delta),
    }, as_json)


COMMANDS = (epsilon_command, alpha_command, estimate_command, plan_command, shuffle_command)
