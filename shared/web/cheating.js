// The cheating-detection design of a yes/no question, as ldpsurvey/shared/cheating.py, bit for
// bit: one 53-bit draw U0 picks the group (group 1 iff U0 < 2^52, probability exactly 1/2), then
// the group's forced response on the exact yes/no randomizer (randomizer.js) on U1, U2: three
// draws, the report [group, answer]. epsilon is the largest group's (derived in cheating.py),
// each group's the larger of its integer thresholds' and the float formula's, as Python's.

import { _ } from "./words.js";
import { N, randomize, realizedEpsilon, secureDraw, thresholds } from "./randomizer.js";

export function cheatingDetection(question) {
  const groups = question.groups.map((g) => ({ ...g, t: thresholds(g.alpha, g.beta) }));
  const epsilonOf = (g) => Math.max(realizedEpsilon(g.t),
    Math.log1p(g.alpha / ((1 - g.alpha) * Math.min(...g.beta))));
  return {
    epsilon: Math.max(...groups.map(epsilonOf)),
    randomize(truth, draw = secureDraw) {
      const group = draw() < N / 2 ? 0 : 1;
      return [group, randomize(truth, groups[group].t, draw)];
    },
    largest: () => [1, 1],
    shown: (report) => _("group {group}: {answer}",
      { group: report[0] + 1, answer: question.options[report[1]] }),
    parameters: () => [question.design, question.groups],
    note: (percent) => {
      const each = groups.map((g, j) => _("in group {group} it receives your own answer with " +
        "{own} probability, and otherwise Yes with {yes} and No with {no}", { group: j + 1,
        own: percent(g.alpha), yes: percent(g.beta[1]), no: percent(g.beta[0]) }));
      return _("Your device puts you in one of two groups at random, and the server learns " +
        "which: {groups}.", { groups: each.join("; ") });
    },
    belief: _("you would say Yes"),
  };
}
