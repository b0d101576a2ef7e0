// Optimized unary encoding, as ldpsurvey/shared/oue.py, bit for bit: the true option v becomes
// k bits; bit j is [U_j < P] if j = v else [U_j < Q], one 53-bit draw per bit (exactly k), with
// P = floor(p 2^53) and Q = floor(q 2^53) from the manifest. epsilon = ln(P (N - Q) / ((N - P) Q))
// (derived in oue.py); these doubles divide products near 2^105, so the value agrees with the
// Python client's exact ratio to about 1e-15, far inside EPSILON_TOLERANCE.

import { _ } from "./words.js";
import { N, secureDraw } from "./randomizer.js";
import { marked } from "./multi_select.js";

export function unaryEncoding(question) {
  const keep = Math.floor(question.p * N);
  const flip = Math.floor(question.q * N);
  if (!(flip > 0 && flip < keep && keep < N)) throw new Error("oue needs 0 < q < p < 1");
  const k = question.options.length;
  return {
    epsilon: Math.log(((keep / (N - keep)) * (N - flip)) / flip),
    randomize(truth, draw = secureDraw) {
      if (!(Number.isInteger(truth) && truth >= 0 && truth < k)) {
        throw new Error("the answer is not one of the question's options");
      }
      return question.options.map((_, j) => (draw() < (j === truth ? keep : flip) ? 1 : 0));
    },
    largest: () => Array(k).fill(1),
    shown: (report) => _("marks {marks} (one per option)", { marks: report.join("") }),
    plain: (report) => marked(question, report),
    parameters: () => [question.mechanism, question.p, question.q],
    note: (percent) => _("The server receives one yes/no mark per option: your own option " +
      "is marked with {own} probability and each other option with {other}.",
    { own: percent(question.p), other: percent(question.q) }),
  };
}
