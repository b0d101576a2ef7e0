// Number questions, as ldpsurvey/shared/numeric.py, bit for bit: the answer clamped to
// [min, max], r = (x - min) / (max - min) in double arithmetic, R = floor(r 2^53), the bit
// b = [U1 < R], then the yes/no randomizer (alpha, beta 1/2) on U2, U3: three draws, one bit
// reported. epsilon is the yes/no randomizer's realized epsilon (derived in numeric.py).
// numberAnswer is what every number mechanism shares (piecewise.js builds on it).

import { _ } from "./words.js";
import { N, randomize, realizedEpsilon, secureDraw, thresholds } from "./randomizer.js";

export function numberAnswer(question) {
  const low = question.min;
  const high = question.max;
  const unit = question.unit ? ` ${question.unit}` : "";
  const clamp = (x) => {
    if (typeof x !== "number" || !Number.isFinite(x)) throw new Error("the answer must be a number");
    return Math.min(high, Math.max(low, x));
  };
  return {
    answer: "number",
    limit: null,
    // The page takes only an answer in [min, max]: one outside is an error at the question,
    // never clamped unseen (randomize still clamps, as numeric.py's check_truth).
    accepts: (x) => x >= low && x <= high,
    clamp,
    // R = floor(r 2^53), as NumberAnswer.rounding_threshold
    rounded: (x) => Math.floor(((clamp(x) - low) / (high - low)) * N),
    truth: (x) => `${clamp(x)}${unit}`,
    belief: _("your number is {high} rather than {low}", { high, low }),
  };
}

export function numeric(question) {
  const low = question.min;
  const high = question.max;
  const unit = question.unit ? ` ${question.unit}` : "";
  const t = thresholds(question.alpha, [0.5, 0.5]);
  const keep = question.alpha + (1 - question.alpha) / 2;
  const { rounded, ...answer } = numberAnswer(question);
  return {
    ...answer,
    epsilon: Math.max(realizedEpsilon(t), Math.log1p(question.alpha / ((1 - question.alpha) * 0.5))),
    randomize(truth, draw = secureDraw) {
      const up = draw() < rounded(truth) ? 1 : 0;
      return randomize(up, t, draw);
    },
    largest: () => 1,
    shown: (report) => (report ? _("a randomized bit 1 (toward max)") :
      _("a randomized bit 0 (toward min)")),
    plain: (report) => (report ? _("the high end ({value})", { value: `${high}${unit}` }) :
      _("the low end ({value})", { value: `${low}${unit}` })),
    parameters: () => [question.mechanism, low, high, question.alpha, question.unit ?? null],
    note: (percent) => _("The server receives one yes/no bit: your number is rounded at " +
      "random to {high} or {low} (to {high} the more often the higher it is), and that is " +
      "kept with {chance} probability, else flipped.", { high, low, chance: percent(keep) }),
  };
}
