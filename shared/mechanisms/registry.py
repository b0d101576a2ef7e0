"""Which scheme a question's type and `mechanism` select (the registry of scheme modules), and
the choice `mechanism = "auto"` makes.

`auto` compares, at the question's epsilon and k options, the variance of an unheld option's
unbiased estimate, n Var = q*(1 - q*)/(p* - q*)^2 (support.variance_at_zero), of forced
response with uniform beta (p* = alpha + (1 - alpha)/k, q* = (1 - alpha)/k: (e^eps + k - 2) /
(e^eps - 1)^2), OUE (4 e^eps / (e^eps - 1)^2) and OLH (about the same, g rounded), each as its
integer randomizer realizes it, and takes the smallest; forced response on a tie, OUE over OLH
(shorter reports' cost aside, OUE's variance is exact where OLH's assumes a random hash).
Forced response wins while k < 3 e^eps + 2 (Wang et al. 2017, section 5).
"""

from typing import Any

from ldpsurvey.shared.mechanisms import cheating, multi_select, numeric, olh, oue, support
from ldpsurvey.shared.mechanisms.protocol import FieldError, Fields, Scheme
from ldpsurvey.shared.stats.design import Mechanism

CHOICE_MECHANISMS = ("auto", "forced_response", "oue", "olh")
# Each mechanism's name for people.
WORDS = {"forced_response": "forced response", "oue": "optimized unary encoding (OUE)",
         "olh": "optimized local hashing (OLH)", "bits": "one randomized yes/no per option",
         "padding": "padding and sampling",
         "duchi": "stochastic rounding then randomized response (Duchi et al.)",
         cheating.DESIGN: "cheating detection (two forced-response groups, Clark and "
                          "Desharnais)",
         "piecewise": "the piecewise mechanism on a grid (Wang et al.)",
         "hybrid": "the hybrid of the piecewise and Duchi's mechanisms (Wang et al.)",
         "square_wave": "the square wave mechanism on a grid, for the distribution (Li et al.)"}
# Question types beyond yes/no and choice, each one module: its MECHANISMS (the first is the
# default), FIELDS per mechanism and scheme_for(mechanism, options, fields).
TYPES = {multi_select.TYPE: multi_select, numeric.TYPE: numeric}
# Designs of a yes/no question (its `design` field), each one module: FIELDS and
# scheme_for(options, fields).
DESIGNS = {cheating.DESIGN: cheating}
MECHANISM_FIELDS = {"auto": {"epsilon"}, "oue": {"epsilon", "p", "q"},
                    "olh": {"epsilon", "g", "alpha"}}


def unary(options: tuple[str, ...], fields: Fields) -> oue.UnaryEncoding:
    """OUE from p and q (a manifest) or from epsilon (a definition)."""
    if fields.has("p") or fields.has("q"):
        try:
            return oue.UnaryEncoding(options, fields.number("p", 0.0, 1.0),
                                     fields.number("q", 0.0, 1.0))
        except ValueError as exc:
            raise FieldError("q", str(exc)) from None
    return oue.UnaryEncoding.from_epsilon(options, fields.epsilon())


def hashing(options: tuple[str, ...], fields: Fields) -> olh.LocalHashing:
    """OLH from g and alpha (a manifest) or from epsilon (a definition)."""
    if fields.has("g") or fields.has("alpha"):
        try:
            return olh.LocalHashing(options, fields.count("g", 2, olh.MAX_G),
                                    fields.number("alpha", 0.0, 1.0))
        except ValueError as exc:
            raise FieldError("alpha", str(exc)) from None
    return olh.LocalHashing.from_epsilon(options, fields.epsilon())


BUILDERS = {"oue": unary, "olh": hashing}


def auto_variances(k: int, eps: float) -> dict[str, float]:
    """n Var of an unheld option's estimate under each mechanism at eps (module docstring)."""
    fr = Mechanism.from_epsilon(eps, k=k)
    candidates = {"forced_response": (fr.alpha + (1 - fr.alpha) / k, (1 - fr.alpha) / k)}
    for name, build in BUILDERS.items():
        scheme: Any = build(("",) * k, Fields({"epsilon": eps}))
        candidates[name] = (scheme.p_star, scheme.q_star)
    return {name: support.variance_at_zero(*pq) for name, pq in candidates.items()}


def auto_choice(k: int, eps: float) -> tuple[str, dict[str, float]]:
    """The mechanism `auto` picks (smallest variance; ties in CHOICE_MECHANISMS order) and the
    variances it compared."""
    variances = auto_variances(k, eps)
    return min(variances, key=lambda name: (variances[name], list(variances).index(name))), (
        variances)


def choice(mechanism: str, options: tuple[str, ...], fields: Fields) -> Scheme:
    """The OUE or OLH scheme of a choice question."""
    return BUILDERS[mechanism](options, fields)
