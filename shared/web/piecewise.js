// The Piecewise and Hybrid mechanisms for number questions, as ldpsurvey/shared/piecewise.py,
// bit for bit (the rule and its exact epsilon are derived there). Piecewise: P = floor(r 2^53),
// the grid position i = floor(P / S) + [U1 < (P mod S) K] with S = 2^53 / K, then the cell
// j = i + floor(U2 / u) if U2 < T, else floor((U2 - T) / v), where T = alpha 2^53,
// u = T / window, v = (2^53 - T) / (grid + window): two draws. Hybrid: U1 < B = share 2^53
// picks the piecewise cell (U2, U3; U4 unused), else grid + window + Duchi's bit (U2, U3, U4):
// four draws. Every number here is an integer below 2^53, exact in a double.

import { _ } from "./words.js";
import { N, secureDraw } from "./randomizer.js";
import { numberAnswer, numeric } from "./numeric.js";

// floor(a / b) for integers 0 <= a < 2^53, 0 < b: Math.floor of the double quotient is exact,
// since a non-integer a / b lies at least 1/b from every integer and rounding moves it by at
// most half an ulp, below (a / b) 2^-53 < 1/b.
export const quotient = (a, b) => Math.floor(a / b);

export function piecewise(question) {
  const { grid, window } = question;
  const outputs = grid + window;
  const keep = question.alpha * N;
  const powerOfTwo = Number.isInteger(grid) && grid >= 2 && (grid & (grid - 1)) === 0;
  if (!powerOfTwo || !Number.isInteger(window) || window < 1 || !Number.isInteger(keep) ||
      keep <= 0 || keep % window !== 0 || (N - keep) % outputs !== 0 || N - keep < outputs) {
    throw new Error("these piecewise parameters are not an exact grid");
  }
  const inWindow = keep / window;
  const anywhere = (N - keep) / outputs;
  const step = N / grid;
  const chance = question.alpha + ((1 - question.alpha) * window) / outputs;
  const { rounded, ...answer } = numberAnswer(question);
  return {
    ...answer,
    outputs,
    epsilon: Math.log1p(inWindow / anywhere),
    randomize(truth, draw = secureDraw) {
      const p = rounded(truth);
      const base = Math.floor(p / step);
      const position = base + (draw() < (p - base * step) * grid ? 1 : 0);
      const u = draw();
      return u < keep ? position + quotient(u, inWindow) : quotient(u - keep, anywhere);
    },
    largest: () => outputs - 1,
    shown: (report) => _("a randomized cell {cell} of 0 to {last}",
      { cell: report, last: outputs - 1 }),
    plain: () => _("a coded number"),
    parameters: () => [question.mechanism, question.min, question.max, grid, window,
      question.alpha, question.unit ?? null],
    note: (percent) => _("The server receives one number from 0 to {last}: with {chance} " +
      "probability one of the {window} near your number, else any of them at random.",
    { last: outputs - 1, chance: percent(chance), window }),
  };
}

export function hybrid(question) {
  const pm = piecewise(question);
  const duchi = numeric({ ...question, alpha: question.duchi_alpha });
  const share = question.piecewise_share * N;
  if (!Number.isInteger(share) || share < 0 || share >= N) {
    throw new Error("piecewise_share must be a whole number over 2^53 below 1");
  }
  return {
    ...pm,
    epsilon: share ? Math.max(pm.epsilon, duchi.epsilon) : duchi.epsilon,
    randomize(truth, draw = secureDraw) {
      if (draw() < share) {
        const report = pm.randomize(truth, draw);
        draw(); // four draws always
        return report;
      }
      return pm.outputs + duchi.randomize(truth, draw);
    },
    largest: () => pm.outputs + 1,
    shown: (report) => (report < pm.outputs ? pm.shown(report) : duchi.shown(report - pm.outputs)),
    plain: (report) => (report < pm.outputs ? pm.plain(report) : duchi.plain(report - pm.outputs)),
    parameters: () => [...pm.parameters(), question.duchi_alpha, question.piecewise_share],
    note: (percent) => {
      const other = duchi.note(percent);
      if (!share) return other;
      return _("Your device picks one of two ways at random ({chance} the first). {first} " +
        "Or: {second}", { chance: percent(share / N), first: pm.note(percent),
        second: `${other[0].toLowerCase()}${other.slice(1)}` });
    },
  };
}
