// The JavaScript twins of ldpsurvey/shared's schemes (scheme.py), one per manifest `mechanism`:
// each gives the epsilon its integer randomizer realizes (recomputed here, never read from the
// manifest), randomize(truth, draw), the longest report (for padding), a report exactly
// (`shown`) and in everyday words (`plain`, where `shown` is not: as scheme.plain_report), the
// parameters the page remembers a survey by, and its privacy note (null: forced response's,
// written in form.js).

import { randomize, realizedEpsilon, secureDraw, thresholds } from "./randomizer.js";
import { cheatingDetection } from "./cheating.js";
import { disclosed } from "./disclosed.js";
import { multiSelect } from "./multi_select.js";
import { numeric } from "./numeric.js";
import { localHashing } from "./olh.js";
import { hybrid, piecewise } from "./piecewise.js";
import { squareWave } from "./square_wave.js";
import { unaryEncoding } from "./oue.js";

function forcedResponse(question) {
  const t = thresholds(question.alpha, question.beta);
  return {
    thresholds: t,
    epsilon: realizedEpsilon(t),
    randomize: (truth, draw = secureDraw) => randomize(truth, t, draw),
    largest: () => question.options.length - 1,
    shown: (report) => question.options[report],
    parameters: () => [question.alpha, question.beta],
    note: null,
  };
}

// How a true answer is asked and read back, unless the scheme says otherwise: one option
// (radio buttons). A question type with a module of its own may ask for "many" (check boxes,
// at most `limit`) or a "number" (a number field between the question's min and max).
const oneOption = (question) => ({ answer: "one", limit: null,
  truth: (index) => question.options[index] });

const SCHEMES = { forced_response: forcedResponse, oue: unaryEncoding, olh: localHashing };
// a number question's mechanisms
const NUMERIC = { duchi: numeric, piecewise, hybrid, square_wave: squareWave };
const number = (question) => {
  const make = Object.hasOwn(NUMERIC, question.mechanism ?? "duchi") ?
    NUMERIC[question.mechanism ?? "duchi"] : null;
  if (!make) throw new Error(`this page does not know the mechanism ${question.mechanism}`);
  return make(question);
};
const TYPES = { multi_select: multiSelect, numeric: number }; // types with a module of their own
const DESIGNS = { cheating_detection: cheatingDetection }; // a yes/no question's `design`

export function schemeOf(question) {
  const make = question.disclosed === true ? disclosed :
    Object.hasOwn(TYPES, question.type) ? TYPES[question.type] :
      question.design !== undefined ? (Object.hasOwn(DESIGNS, question.design) ?
        DESIGNS[question.design] : null) : SCHEMES[question.mechanism ?? "forced_response"];
  if (!make) {
    throw new Error(`this page does not know the ${question.design !== undefined ?
      `design ${question.design}` : `mechanism ${question.mechanism}`}`);
  }
  return { ...oneOption(question), ...make(question) };
}
