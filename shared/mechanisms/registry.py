"""The registry: every mechanism and design a question can select, collected from the modules
that declare them (protocol.Declaration: name, question types, words, fields and builder), for
the manifest, the OpenAPI description, the browser's registry (web/schemes.js, checked against
this one) and the pages to read. A new mechanism is its module's DECLARATIONS, listed here once.

`auto` on a yes/no or choice question compares, at the question's epsilon and k options, the
variance of an unheld option's unbiased estimate, n Var = q*(1 - q*)/(p* - q*)^2
(support.variance_at_zero), of forced response with uniform beta (p* = alpha + (1 - alpha)/k,
q* = (1 - alpha)/k: (e^eps + k - 2) / (e^eps - 1)^2), OUE (4 e^eps / (e^eps - 1)^2) and OLH
(about the same, g rounded), each as its integer randomizer realizes it, and takes the smallest;
forced response on a tie, OUE over OLH (shorter reports' cost aside, OUE's variance is exact
where OLH's assumes a random hash). Forced response wins while k < 3 e^eps + 2 (Wang et al.
2017, section 5).
"""

from typing import Any

from ldpsurvey.shared.mechanisms import (
    cheating,
    disclosed,
    forced_response,
    multi_select,
    numeric,
    olh,
    oue,
    piecewise,
    square_wave,
    support,
)
from ldpsurvey.shared.mechanisms.protocol import EPSILON, Declaration, Fields
from ldpsurvey.shared.stats.design import Mechanism


def auto_variances(k: int, eps: float) -> dict[str, float]:
    """n Var of an unheld option's estimate under each choice mechanism at eps (module
    docstring): forced response, then every other one built from epsilon (its p* and q*)."""
    fr = Mechanism.from_epsilon(eps, k=k)
    candidates = {forced_response.NAME: (fr.alpha + (1 - fr.alpha) / k, (1 - fr.alpha) / k)}
    for declared in (*oue.DECLARATIONS, *olh.DECLARATIONS):
        scheme: Any = declared.build("choice", ("",) * k, Fields({"epsilon": eps}))
        candidates[declared.name] = (scheme.p_star, scheme.q_star)
    return {name: support.variance_at_zero(*pq) for name, pq in candidates.items()}


def auto_choice(k: int, eps: float) -> tuple[str, dict[str, float]]:
    """The mechanism `auto` picks (smallest variance; ties in the order compared) and the
    variances it compared."""
    variances = auto_variances(k, eps)
    return min(variances, key=lambda name: (variances[name], list(variances).index(name))), (
        variances)


def choose_choice(options: tuple[str, ...], fields: Fields) -> tuple[str, dict[str, float]]:
    """`auto` on a yes/no or choice question: auto_choice at the epsilon it spends."""
    return auto_choice(len(options), forced_response.spent_epsilon(fields))


CHOICE_AUTO = Declaration(
    "auto", ("yes_no", "choice"), "the lowest variance of an option's estimate at the "
    "question's epsilon (forced response, OUE or OLH)", (EPSILON,), choose=choose_choice,
    measure=multi_select.AUTO_MEASURE)
# Every declaration, in the order error messages list them (auto first for choices).
DECLARATIONS: tuple[Declaration, ...] = (
    CHOICE_AUTO, *forced_response.DECLARATIONS, *oue.DECLARATIONS, *olh.DECLARATIONS,
    *multi_select.DECLARATIONS, *numeric.DECLARATIONS, *piecewise.DECLARATIONS,
    *square_wave.DECLARATIONS, *cheating.DECLARATIONS, *disclosed.DECLARATIONS)
QUESTION_TYPES = tuple(dict.fromkeys(kind for d in DECLARATIONS for kind in d.types))
# Each scheme's name for people (the names a manifest can hold).
WORDS = {d.name: d.words for d in DECLARATIONS if d.build is not None}


def names(kind: str, key: str = "mechanism") -> tuple[str, ...]:
    """What a question of this type may give as its `key` (mechanism or design), in order."""
    return tuple(d.name for d in DECLARATIONS if kind in d.types and d.key == key)


def default(kind: str) -> str:
    """The mechanism of a question of this type that names none."""
    return next(d.name for d in DECLARATIONS if kind in d.types and d.default)


def declared(kind: str, name: str, key: str = "mechanism") -> Declaration:
    """The declaration a question of this type selects by giving `key` = name."""
    return next(d for d in DECLARATIONS if kind in d.types and d.key == key and d.name == name)


def offered() -> set[tuple[str, str]]:
    """Every (question type, scheme name) a survey can hold (an `auto` resolves to one)."""
    return {(kind, d.name) for d in DECLARATIONS if d.build is not None for kind in d.types}


def fields(key: str | None = None) -> set[str]:
    """The names of the fields the declarations take (those selected by `key`, or all)."""
    return {param.name for d in DECLARATIONS if key in (None, d.key) for param in d.params}
