// Check-all-that-apply questions, as ldpsurvey/shared/multi_select.py, bit for bit. The true
// answer is a list of option indices. `bits`: each option's membership through the yes/no
// randomizer (alpha, beta), two draws per option; epsilon for the declared max_selected m is
// max{a e1 + b e0 : a, b <= m, a + b <= k} (derived in multi_select.py). `padding`: the set padded
// with dummies k, k+1, ... to m items, one picked by a draw against the cumulative thresholds of
// a uniform beta over them (over the set itself when it holds more), then forced response over
// k + m values; epsilon ln(1 + T W / ((N - T) min_j w_j)), W the largest slot weight.

import { _ } from "./words.js";
import { N, randomize, secureDraw, thresholds, uniformBeta } from "./randomizer.js";

// A report of one mark per option, in plain words: the options marked.
export function marked(question, report) {
  const names = question.options.filter((option, j) => report[j] === 1);
  return names.length ? _("marked: {options}", { options: names.join("; ") }) :
    _("nothing marked");
}

function checkSet(truth, k, limit) {
  const ok = Array.isArray(truth) && truth.every((j) => Number.isInteger(j) && j >= 0 && j < k) &&
    new Set(truth).size === truth.length;
  if (!ok) throw new Error("the answer must be a list of distinct options of the question");
  if (limit !== null && truth.length > limit) throw new Error(`takes at most ${limit} option${limit === 1 ? "" : "s"} (${truth.length} given)`);
  return [...truth].sort((a, b) => a - b);
}

const log1pRatio = (keep, weight) => Math.log1p((keep / (N - keep)) * (N / weight));

function optionBits(question) {
  const k = question.options.length;
  const m = question.max_selected ?? k;
  const t = thresholds(question.alpha, [1 - question.beta, question.beta]);
  const [wNo, wYes] = t.weights;
  const eYes = log1pRatio(t.keep, wYes);
  const eNo = log1pRatio(t.keep, wNo);
  const total = (e1, e0) => (2 * m <= k ? m * (e1 + e0) :
    m * Math.max(e1, e0) + (k - m) * Math.min(e1, e0));
  const a = question.alpha;
  const nominal = total(Math.log1p(a / ((1 - a) * question.beta)),
    Math.log1p(a / ((1 - a) * (1 - question.beta))));
  const pStar = a + (1 - a) * question.beta;
  const qStar = (1 - a) * question.beta;
  return {
    epsilon: Math.max(total(eYes, eNo), nominal),
    limit: question.max_selected ?? null,
    randomize(truth, draw = secureDraw) {
      const chosen = new Set(checkSet(truth, k, question.max_selected ?? null));
      return question.options.map((option, j) => randomize(chosen.has(j) ? 1 : 0, t, draw));
    },
    largest: () => Array(k).fill(1),
    shown: (report) => _("marks {marks} (one per option)", { marks: report.join("") }),
    plain: (report) => marked(question, report),
    parameters: () => [question.mechanism, question.max_selected ?? null, question.alpha,
      question.beta],
    note: (percent) => _("The server receives one yes/no mark per option: each option you " +
      "select is marked with {selected} probability and each other option with {other}.",
    { selected: percent(pStar), other: percent(qStar) }),
  };
}

function slots(size) {
  return size === 1 ? [N] : thresholds(0, uniformBeta(size)).cumulative;
}

function paddingSampling(question) {
  const k = question.options.length;
  const m = question.max_selected;
  const d = k + m;
  const t = thresholds(question.alpha, uniformBeta(d));
  const cumulative = slots(m);
  const largest = Math.max(...cumulative.map((c, j) => c - (j === 0 ? 0 : cumulative[j - 1])));
  const a = question.alpha;
  return {
    epsilon: Math.max(Math.log1p((t.keep / (N - t.keep)) * (largest / Math.min(...t.weights))),
      Math.log1p((a * d) / ((1 - a) * m))),
    // At most m on this page (more would bias the shares low, and intake cannot tell);
    // randomize takes a set of any size, for which the epsilon holds (as multi_select.py).
    limit: m,
    randomize(truth, draw = secureDraw) {
      const chosen = checkSet(truth, k, null);
      const padded = [...chosen];
      for (let dummy = k; padded.length < m; dummy += 1) padded.push(dummy);
      const pick = draw();
      const item = padded[slots(padded.length).findIndex((c) => pick < c)];
      return randomize(item, t, draw);
    },
    largest: () => d - 1,
    shown: (report) => (report < k ? question.options[report] :
      _("(a placeholder, {code})", { code: report })),
    plain: (report) => (report < k ? question.options[report] : _("a placeholder")),
    parameters: () => [question.mechanism, m, question.alpha],
    note: () => _("The server receives one item: one of your selections (or a placeholder " +
      "if you select fewer than {m}), picked at random, then randomized among the options and " +
      "placeholders.", { m }),
  };
}

// Asked with check boxes; a true answer read back as the options' texts.
export function multiSelect(question) {
  const scheme = question.mechanism === "padding" ? paddingSampling(question) : optionBits(question);
  return { ...scheme, answer: "many", belief: _("you selected a particular option"),
    truth: (chosen) => chosen.map((j) => question.options[j]).join("; ") || _("(none)") };
}
