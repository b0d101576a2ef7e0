"""Check-all-that-apply questions (type = "multi_select"), with two mechanisms and the
JavaScript twin web/multi_select.js. The true answer is a set S of option indices; with
max_selected = m declared, a respondent selects at most m (the device refuses more: under
`bits` the epsilon holds only for m; under `padding` it holds for any set, but more than m
biases the shares low, see below, and intake cannot tell: the report has one size whatever the
set).

bits (per-option randomized response; Warner 1965, one yes/no forced response per option). Each
option's membership bit is randomized by the yes/no randomizer (randomizer.py, alpha and
beta = P(yes | forced)), two draws per option, 2k always; the report is k bits.
  Exact epsilon for the declared constraint. Bits are independent given S, so for neighbouring
  sets S, S' the largest ratio over reports is the product over the options where they differ
  of that option's largest ratio: e1 = ln(1 + T N / ((N - T) w_yes)) where S holds it and S'
  does not (report "yes"), e0 = ln(1 + T N / ((N - T) w_no)) the other way round (integer
  thresholds as in randomizer.realized_epsilon). With a options in S only and b in S' only,
  |S|, |S'| <= m forces a <= m, b <= m and a + b <= k (choose S and S' disjoint: any such a, b
  is reached), so
      epsilon = max{a e1 + b e0 : a, b <= m, a + b <= k}
              = m (e1 + e0)                    if 2m <= k,
              = m max(e1, e0) + (k - m) min    otherwise (m = k: any subset, k max(e1, e0)).
  From a target epsilon, beta = 1/2 and each bit gets epsilon / min(k, 2m).
  Estimates: each option is a yes/no forced response (support.py with p* = alpha + (1 -
  alpha) beta, q* = (1 - alpha) beta); covariances from the pair counters c_jl (reports with
  bits j and l both set): Cov(pi_hat_j, pi_hat_l) = (c_jl/n - c_j c_l / n^2) / (n (p* - q*)^2),
  the plug-in covariance of the bits over the linear map.

padding (padding and sampling; Wang, Li and Jha, "Locally differentially private frequent
itemset mining", IEEE S&P 2018, section 4; Qin et al., LDPMiner, CCS 2016). S is padded with
dummy items k, k+1, ... to l = m items, one item is sampled uniformly (U1 against the
cumulative thresholds of a uniform beta over the l slots, or over |S| items when S has more
than l, which then drops items: the estimates are biased low for such respondents, whom this
release's devices refuse but an earlier release's took), and the
item is reported by forced response over d = k + l values (alpha, uniform beta; U2, U3). Three
draws always.
  Exact epsilon. P(y | S) = (T/N) pi_S(y) + ((N - T)/N)(w_y/N), pi_S(y) the chance the sampled
  item is y: at most W/N, W the largest slot weight, and 0 for some neighbour (a set without y,
  of either size), so epsilon = ln(1 + T W / ((N - T) min_y w_y)); with W = N/l this is
  ln(1 + (e^eps_FR - 1)/l), smaller than the forced response's own eps_FR (sampling
  amplifies), so from a target epsilon the forced response runs at ln(1 + l (e^eps - 1)).
  Estimates: the sampled item is j with probability f_j = pi_j / l when nobody selects more
  than l, so pi_hat_j = l f_hat_j with f_hat from estimate.estimate on the d counters; its SE,
  interval and covariance scale by l (l^2). The published variance of Wang, Li and Jha (2018)
  omits this factor l (the issue cites it); ours carries it.

`auto` (the default) takes the mechanism with the smaller variance of an unheld option's
estimate at the question's epsilon: padding only when max_selected is declared, roughly when
m < k/2.
"""

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ldpsurvey.shared.mechanisms import support
from ldpsurvey.shared.mechanisms.protocol import (
    BIT_CELLS,
    EPSILON,
    PROBABILITIES,
    BitReport,
    Declaration,
    FieldError,
    Fields,
    Param,
    Report,
    Settings,
    empty_entry,
    is_index,
    percent,
)
from ldpsurvey.shared.mechanisms.randomizer import Draw, N, Thresholds, randomize, thresholds
from ldpsurvey.shared.stats.design import Mechanism, alpha_for_epsilon, uniform_beta
from ldpsurvey.shared.stats.estimate import covariance as fr_covariance
from ldpsurvey.shared.stats.estimate import estimate
from ldpsurvey.shared.stats.planning import expected_margin
from ldpsurvey.shared.stats.posterior import best_guess_accuracy

TYPE = "multi_select"
AUTO_MEASURE = "variance of an option's estimate (n Var at a share of 0"  # manifest.Auto's default
BIAS_WARNING = ("padding and sampling: respondents who selected more than max_selected are "
                "counted for only max_selected of their options, so shares are biased low if "
                "any did")


def check_set(truth: Any, options: Sequence[str], limit: int | None) -> list[int]:
    """A true answer: a list of distinct option indices (at most `limit`), returned sorted."""
    if type(truth) is not list or not all(is_index(j, len(options)) for j in truth) or len(
            set(truth)) != len(truth):
        raise ValueError("the answer must be a list of distinct options of the question")
    if limit is not None and len(truth) > limit:
        raise ValueError(f"takes at most {limit} option{'s' * (limit != 1)} ({len(truth)} given)")
    return sorted(truth)


def parse_set(text: str, options: Sequence[str]) -> list[int]:
    """Options typed as numbers or texts separated by ';' ("none" or nothing: no option)."""
    chosen = []
    for part in filter(None, (p.strip() for p in text.split(";"))):
        if part.lower() == "none":
            continue
        for index, option in enumerate(options):
            if part.lower() in (str(index), option.lower()):
                chosen.append(index)
                break
        else:
            raise ValueError(f"takes options (numbers 0 to {len(options) - 1} or texts) "
                             f"separated by ';', or none; {part!r} is not one")
    return sorted(set(chosen))


def shown_set(truth: Sequence[int], options: Sequence[str]) -> str:
    return "; ".join(options[j] for j in truth) or "(none)"


class SetAnswer:
    """What both mechanisms share: the answer is a set of options, at most `limit` of them on
    the device (None: any number), shown and typed as option texts; a mock scenario gives each
    option's probability of being selected, independently."""

    options: tuple[str, ...]
    max_selected: int | None
    limit: int | None
    quantity = "proportion"

    def check_truth(self, truth: Any) -> list[int]:
        return check_set(truth, self.options, self.limit)

    def parse_text(self, text: str) -> list[int]:
        return self.check_truth(parse_set(text, self.options))

    def shown(self, truth: Any) -> str:
        return shown_set(truth, self.options)

    def asked(self) -> str:
        listed = "  ".join(f"{j}) {o}" for j, o in enumerate(self.options))
        most = "" if self.max_selected is None else f", at most {self.max_selected}"
        return f"{listed}  (all that apply{most}, separated by ';', or none)"

    def true_values(self, truth: list[float]) -> list[float]:
        return truth

    def truth_of(self, value: Any) -> list[float]:
        k = len(self.options)
        if not (isinstance(value, list) and len(value) == k and all(
                isinstance(p, int | float) and not isinstance(p, bool) and 0 <= p <= 1
                for p in value)):
            raise ValueError(f"{k} selection probabilities in [0, 1], one per option")
        return [float(p) for p in value]

    def draw_answers(self, truth: Sequence[float], n: int, rng: Any) -> Any:
        """An n x k array of membership bits, each option selected independently with its
        probability. Where the device takes at most `limit` (max_selected), a simulated
        respondent who drew more keeps `limit` of them at random, so the shares estimated fall
        below the scenario's."""
        import numpy as np

        bits = rng.random((n, len(truth))) < np.asarray(truth)
        if self.limit is not None:
            for row in np.flatnonzero(bits.sum(axis=1) > self.limit):
                held = np.flatnonzero(bits[row])
                bits[row, rng.choice(held, size=len(held) - self.limit, replace=False)] = False
        return bits.astype(np.int8)


def shared_parts(scheme: Any) -> dict[str, Any]:
    """Fields both mechanisms write: the mechanism and max_selected (absent: any number)."""
    limit = {} if scheme.max_selected is None else {"max_selected": scheme.max_selected}
    return {"mechanism": scheme.name, **limit}


def pair_index(k: int, j: int, m: int) -> int:
    """The counter of the pair j < m: after the k option counters, pairs in row-major order."""
    return k + j * (2 * k - j - 1) // 2 + (m - j - 1)


@dataclass(frozen=True)
class OptionBits(SetAnswer, BitReport, support.SupportMargin):
    options: tuple[str, ...]
    alpha: float
    beta: float  # P(report yes | forced)
    max_selected: int | None = None
    name: str = "bits"

    def __post_init__(self) -> None:
        self.thresholds  # noqa: B018 -- refuses parameters with no privacy

    @classmethod
    def from_epsilon(cls, options: tuple[str, ...], eps: float,
                     max_selected: int | None) -> "OptionBits":
        k = len(options)
        per_bit = eps / min(k, 2 * (max_selected or k))
        return cls(options, alpha_for_epsilon(per_bit, 0.5), 0.5, max_selected)

    @property
    def k(self) -> int:
        return len(self.options)

    @property
    def limit(self) -> int | None:
        """The device refuses more selections: the epsilon holds for at most max_selected."""
        return self.max_selected

    @property
    def thresholds(self) -> Thresholds:
        return thresholds(self.alpha, (1.0 - self.beta, self.beta))

    @property
    def counters(self) -> int:
        """Per option, per pair of options, then n."""
        return self.k + self.k * (self.k - 1) // 2 + 1

    def _total(self, e_yes: float, e_no: float) -> float:
        """max{a e_yes + b e_no : a, b <= m, a + b <= k} (module docstring)."""
        k, m = self.k, self.max_selected or self.k
        if 2 * m <= k:
            return m * (e_yes + e_no)
        return m * max(e_yes, e_no) + (k - m) * min(e_yes, e_no)

    @property
    def realized_epsilon(self) -> float:
        t = self.thresholds
        w_no, w_yes = t.option_weights
        return self._total(*(math.log1p(t.keep * N / ((N - t.keep) * w)) for w in (w_yes, w_no)))

    @property
    def nominal_epsilon(self) -> float:
        a, b = self.alpha, self.beta
        return self._total(math.log1p(a / ((1 - a) * b)), math.log1p(a / ((1 - a) * (1 - b))))

    @property
    def epsilon(self) -> float:
        return max(self.realized_epsilon, self.nominal_epsilon)

    @property
    def p_star(self) -> float:
        return self.alpha + (1 - self.alpha) * self.beta

    @property
    def q_star(self) -> float:
        return (1 - self.alpha) * self.beta

    def fields(self) -> dict[str, Any]:
        return {**shared_parts(self), "alpha": self.alpha, "beta": self.beta}

    def randomize(self, truth: Any, draw: Draw) -> Report:
        chosen = set(self.check_truth(truth))
        t = self.thresholds
        return [randomize(int(j in chosen), t, draw) for j in range(self.k)]

    def tally(self, report: Report) -> Iterable[tuple[int, int]]:
        ones = [j for j, bit in enumerate(report) if bit]
        return ([(j, 1) for j in ones]
                + [(pair_index(self.k, j, m), 1) for i, j in enumerate(ones) for m in ones[i + 1:]]
                + [(self.counters - 1, 1)])

    def summary(self, counts: Sequence[int], settings: Settings) -> dict[str, Any]:
        """Per option support.entries (each share in [0, 1] on its own) and the covariance
        from the pair counters (module docstring)."""
        n, k = counts[-1], self.k
        options = support.entries(counts[:k], n, self.p_star, self.q_star, self.epsilon,
                                  self.options, settings, simplex=False)
        scale = n * (self.p_star - self.q_star) ** 2

        def off_diagonal(i: int, j: int) -> float:
            low, high = min(i, j), max(i, j)
            return (counts[pair_index(k, low, high)] / n - counts[i] * counts[j] / n ** 2) / scale

        return {**self.fields(), "epsilon": self.epsilon, "n": n, "options": options,
                "covariance": support.covariance(options, n, off_diagonal)}

    def simulate(self, truths: Any, rng: Any) -> list[Report]:
        """truths: an n x k array of membership bits; each bit through the yes/no randomizer
        (simulation.randomize_many)."""
        import numpy as np

        from ldpsurvey.shared.sim import simulation

        truths = np.asarray(truths, dtype=np.int8)
        bits = np.column_stack([simulation.randomize_many(truths[:, j], self.thresholds, rng)
                                for j in range(self.k)])
        return bits.tolist()

    def best_guess(self) -> float:
        """Per option: a best guess of whether it was selected from its bit, both equally
        likely beforehand (posterior.best_guess_accuracy of the yes/no design)."""
        return best_guess_accuracy(self.alpha, (1 - self.beta, self.beta))

    def design(self) -> dict[str, Any]:
        return {**self.fields(), "epsilon": self.epsilon, "options": list(self.options),
                "p_star": self.p_star, "q_star": self.q_star,
                "report": "one bit per option: 1 with probability p_star if selected, q_star "
                          "if not",
                "cells": BIT_CELLS}

    def note(self) -> tuple[str, str]:
        return (f"The server receives one yes/no mark per option: each option you select is "
                f"marked with {percent(self.p_star)} probability and each other option with "
                f"{percent(self.q_star)}.", "you selected a particular option")


@dataclass(frozen=True)
class PaddingSampling(SetAnswer):
    options: tuple[str, ...]
    alpha: float  # the forced response over k + max_selected values
    max_selected: int
    name: str = "padding"

    def __post_init__(self) -> None:
        self.thresholds  # noqa: B018 -- refuses parameters with no privacy

    @classmethod
    def from_epsilon(cls, options: tuple[str, ...], eps: float,
                     max_selected: int) -> "PaddingSampling":
        d = len(options) + max_selected
        inner = math.log1p(max_selected * math.expm1(eps))
        scheme = cls(options, alpha_for_epsilon(inner, uniform_beta(d)), max_selected)
        alpha = scheme.alpha
        while scheme.epsilon > eps:  # the slots' integer weights can tip it by ~1e-16
            alpha = math.nextafter(alpha, 0.0)
            scheme = cls(options, alpha, max_selected)
        return scheme

    @property
    def k(self) -> int:
        return len(self.options)

    @property
    def limit(self) -> int:
        """The device takes at most max_selected: more would bias the shares low
        (BIAS_WARNING), though sampling keeps the epsilon for a set of any size (randomize
        takes one, as a client of an earlier release may have sent)."""
        return self.max_selected

    @property
    def d(self) -> int:
        return self.k + self.max_selected

    @property
    def mechanism(self) -> Mechanism:
        """The forced response over the k options and max_selected dummies."""
        return Mechanism(self.alpha, uniform_beta(self.d))

    @property
    def thresholds(self) -> Thresholds:
        return thresholds(self.alpha, uniform_beta(self.d))

    @property
    def counters(self) -> int:
        return self.d

    def slots(self, size: int) -> tuple[int, ...]:
        """Cumulative thresholds for a uniform pick among `size` items (C_j of randomizer.py)."""
        return (N,) if size == 1 else thresholds(0.0, uniform_beta(size)).cumulative

    @property
    def realized_epsilon(self) -> float:
        t, slots = self.thresholds, self.slots(self.max_selected)
        largest = max(c - p for c, p in zip(slots, (0, *slots[:-1]), strict=True))
        return math.log1p(t.keep * largest / ((N - t.keep) * min(t.option_weights)))

    @property
    def nominal_epsilon(self) -> float:
        return math.log1p(self.alpha * self.d / ((1 - self.alpha) * self.max_selected))

    @property
    def epsilon(self) -> float:
        return max(self.realized_epsilon, self.nominal_epsilon)

    def fields(self) -> dict[str, Any]:
        return {**shared_parts(self), "alpha": self.alpha}

    def randomize(self, truth: Any, draw: Draw) -> Report:
        chosen = check_set(truth, self.options, None)
        padded = chosen + list(range(self.k, self.k + self.max_selected - len(chosen)))
        pick = draw()
        item = padded[next(i for i, c in enumerate(self.slots(len(padded))) if pick < c)]
        return randomize(item, self.thresholds, draw)

    def check_report(self, value: Any) -> str | None:
        if not is_index(value, self.d):
            return f"must be an item index from 0 to {self.d - 1}"
        return None

    def largest_report(self) -> Report:
        return self.d - 1

    def tally(self, report: Report) -> Iterable[tuple[int, int]]:
        return ((report, 1),)

    def summary(self, counts: Sequence[int], settings: Settings) -> dict[str, Any]:
        """The forced-response estimates of the d items' sampling shares, scaled by l to the
        options' shares (module docstring): p_hat, SE, interval ends and points times l,
        clipped to [0, 1]; the covariance times l^2."""
        n, ell, k = sum(counts), self.max_selected, self.k
        document = {**self.fields(), "epsilon": self.epsilon, "n": n, "warning": BIAS_WARNING}
        if n == 0:
            return {**document, "covariance": None, "options": [
                {"index": j, "option": o, **empty_entry(self.epsilon, settings)}
                for j, o in enumerate(self.options)]}
        items = estimate(self.mechanism, counts, confidence=settings.confidence,
                         method=settings.method, simultaneous=settings.simultaneous)
        options = []
        for j, option in enumerate(self.options):
            entry = items[j].as_dict()
            entry.update({key: entry[key] * ell for key in ("p_hat", "standard_error")})
            entry.update({key: min(1.0, entry[key] * ell)
                          for key in ("p_hat_clipped", "p_mle", "ci_low", "ci_high")})
            entry["epsilon"] = self.epsilon
            options.append({"index": j, "option": option, **entry})
        cov = fr_covariance(self.mechanism, counts)
        return {**document, "options": options,
                "covariance": [[cov[i][j] * ell * ell for j in range(k)] for i in range(k)]}

    def simulate(self, truths: Any, rng: Any) -> list[Report]:
        """truths: an n x k array of membership bits; one item sampled per respondent as the
        device does (a uniform slot of the padded set), then simulation.randomize_many."""
        import numpy as np

        from ldpsurvey.shared.sim import simulation

        truths = np.asarray(truths, dtype=bool)
        held = truths.sum(axis=1)
        order = np.argsort(~truths, axis=1, kind="stable")  # each row's selections first
        slot = rng.integers(0, np.maximum(held, self.max_selected))
        chosen = order[np.arange(len(truths)), np.minimum(slot, self.k - 1)]
        items = np.where(slot < held, chosen, self.k + slot - held)
        return simulation.randomize_many(items, self.thresholds, rng).tolist()

    def best_guess(self) -> float:
        """Per option: whether it was selected, from the reported item (the item reported is
        the option: forced response's accuracy over the d items)."""
        return best_guess_accuracy(self.alpha, uniform_beta(self.d))

    def expected_margin(self, n: int, confidence: float = 0.95) -> float:
        """l times the item shares' (the estimates are l f_hat)."""
        return self.max_selected * expected_margin(self.mechanism, n, confidence)

    def design(self) -> dict[str, Any]:
        return {**self.fields(), "epsilon": self.epsilon, "options": list(self.options),
                "items": self.d, "warning": BIAS_WARNING,
                "report": "one item: an option of the padded set, or a dummy (codes k and up), "
                          "sampled uniformly, then forced response over the k + max_selected "
                          "items",
                "cells": "the reported item: an option's label, or a placeholder's "
                         "(placeholder 1), ... (codes: the item's code, placeholders from k)"}

    def columns(self, qid: str) -> list[str]:
        return [qid]

    @property
    def placeholders(self) -> tuple[str, ...]:
        """The labels of the dummy items (codes k and up) in the CSV: "(placeholder 1)", ...,
        in more parentheses where an option has that label."""
        labels = []
        for j in range(1, self.max_selected + 1):
            label = f"(placeholder {j})"
            while label in self.options:
                label = f"({label})"
            labels.append(label)
        return tuple(labels)

    def cells(self, report: Report, codes: bool) -> list[str]:
        if codes:
            return [str(report)]
        return [(self.options + self.placeholders)[report]]

    def shown_report(self, report: Report) -> str:
        return self.options[report] if report < self.k else f"(a placeholder, {report})"

    def plain_report(self, report: Report) -> str:
        return self.options[report] if report < self.k else "a placeholder"

    def note(self) -> tuple[str, str]:
        return (f"The server receives one item: one of your selections (or a placeholder if "
                f"you select fewer than {self.max_selected}), picked at random, then "
                f"randomized among the options and placeholders.",
                "you selected a particular option")


def read_limit(options: tuple[str, ...], fields: Fields) -> int | None:
    """max_selected: a whole number from 1 to k, or None (any number)."""
    return fields.count("max_selected", 1, len(options)) if fields.has("max_selected") else None


def bits_for(kind: str, options: tuple[str, ...], fields: Fields) -> "OptionBits":
    """Per-option bits from alpha (and beta, default 1/2: a manifest) or from epsilon."""
    limit = read_limit(options, fields)
    if fields.has("alpha"):
        try:
            return OptionBits(options, fields.number("alpha", 0.0, 1.0),
                              fields.number("beta", 0.0, 1.0, 0.5), limit)
        except ValueError as exc:
            raise FieldError("alpha", str(exc)) from None
    return OptionBits.from_epsilon(options, fields.epsilon(), limit)


def padding_for(kind: str, options: tuple[str, ...], fields: Fields) -> "PaddingSampling":
    """Padding and sampling (max_selected needed) from alpha (a manifest) or from epsilon."""
    limit = read_limit(options, fields)
    if limit is None:
        raise FieldError("max_selected", "padding and sampling needs max_selected")
    if fields.has("alpha"):
        try:
            return PaddingSampling(options, fields.number("alpha", 0.0, 1.0), limit)
        except ValueError as exc:
            raise FieldError("alpha", str(exc)) from None
    return PaddingSampling.from_epsilon(options, fields.epsilon(), limit)


def choose(options: tuple[str, ...], fields: Fields) -> tuple[str, dict[str, float]]:
    """`auto`: the variance of an unheld option's estimate (unheld_variance) under bits and,
    with max_selected, padding, at the question's epsilon; the smaller (bits on a tie)."""
    limit = read_limit(options, fields)
    eps = fields.epsilon()
    candidates = {"bits": OptionBits.from_epsilon(options, eps, limit)}
    if limit is not None:
        candidates["padding"] = PaddingSampling.from_epsilon(options, eps, limit)
    variances = {name: unheld_variance(scheme) for name, scheme in candidates.items()}
    return min(variances, key=variances.__getitem__), variances


def unheld_variance(scheme: Any) -> float:
    """n Var of an unheld option's estimate: support.variance_at_zero for bits; l^2 times the
    forced response's over the d items for padding."""
    if isinstance(scheme, OptionBits):
        return support.variance_at_zero(scheme.p_star, scheme.q_star)
    m = scheme.mechanism
    q = (1 - m.alpha) / scheme.d
    return scheme.max_selected ** 2 * support.variance_at_zero(m.alpha + q, q)


MAX_SELECTED = Param("max_selected", "integer", "multi_select: at most this many options "
                     "selected (absent: any number)", 1, None)
DECLARATIONS = (
    Declaration("auto", (TYPE,), "the lower variance of an option's estimate at the "
                "question's epsilon", (EPSILON, MAX_SELECTED), default=True, choose=choose,
                measure=AUTO_MEASURE),
    Declaration("bits", (TYPE,), "one randomized yes/no per option", (
        EPSILON, MAX_SELECTED,
        Param("alpha", "number", "bits: P(an option's true bit is reported)", 0.0, 1.0),
        Param("beta", "probabilities", "bits: P(1 | forced)", schema=PROBABILITIES)), bits_for),
    Declaration("padding", (TYPE,), "padding and sampling", (
        EPSILON, MAX_SELECTED,
        Param("alpha", "number", "padding: P(the sampled item is reported)", 0.0, 1.0)),
        padding_for))
