"""The privacy-math commands: epsilon, alpha, estimate, plan."""

import math

import click

from ldpsurvey.shared import (
    Mechanism,
    estimate,
    n_required,
    n_required_central_laplace,
    posterior_bounds,
)

from .options import confidence_option, json_option, method_option
from .output import emit

ALPHA = click.FloatRange(0.0, 1.0, max_open=True)
BETA = click.FloatRange(0.0, 1.0, min_open=True, max_open=True)
UNIT_OPEN = click.FloatRange(0.0, 1.0, min_open=True, max_open=True)
POSITIVE = click.FloatRange(0.0, min_open=True)



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
    if not math.isfinite(eps):
        raise click.BadParameter("must be finite", param_hint="'--epsilon'")
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
        "p_hat", "p_hat_clipped", "standard_error", "ci_low", "ci_high", "ci_method",
        "confidence", "n", "design_consistent")}, as_json)


@click.command("plan")
@click.option("--epsilon", "eps", type=POSITIVE, required=True, help="Epsilon per answer.")
@click.option("--proportion", type=click.FloatRange(0.0, 1.0), required=True,
              help="Expected true proportion of yes.")
@click.option("--margin", type=UNIT_OPEN, required=True, help="Wanted CI half-width.")
@confidence_option
@json_option
def plan_command(eps: float, proportion: float, margin: float, confidence: float,
                 as_json: bool) -> None:
    """Respondents needed for a margin of error, locally (beta = 1/2) and, for comparison,
    under central differential privacy with Laplace noise."""
    if not math.isfinite(eps):
        raise click.BadParameter("must be finite", param_hint="'--epsilon'")
    mechanism = Mechanism.from_epsilon(eps)
    emit({
        "alpha": mechanism.alpha,
        "n_required": n_required(mechanism, proportion, margin, confidence),
        "n_required_central_laplace": n_required_central_laplace(eps, proportion, margin,
                                                                 confidence),
    }, as_json)


COMMANDS = (epsilon_command, alpha_command, estimate_command, plan_command)
