// The JavaScript twins of ldpsurvey/shared's schemes (mechanisms/), one per manifest `mechanism`:
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

// Every scheme a manifest can name, by the name shared/mechanisms/registry.py declares it under
// (its `mechanism`, its `design`, or "disclosed" for `disclosed: true`), and the scheme of each
// question type that names none: test_browser_mechanisms checks both against the registry.
export const SCHEMES = {
  forced_response: forcedResponse, oue: unaryEncoding, olh: localHashing,
  bits: multiSelect, padding: multiSelect,
  duchi: numeric, piecewise, hybrid, square_wave: squareWave,
  cheating_detection: cheatingDetection,
  disclosed,
};
export const DEFAULTS = { yes_no: "forced_response", choice: "forced_response", numeric: "duchi" };

// The name of a manifest question's scheme.
export function schemeName(question) {
  if (question.disclosed === true) return "disclosed";
  return question.design ?? question.mechanism ?? DEFAULTS[question.type];
}

export function schemeOf(question) {
  const name = schemeName(question);
  const make = Object.hasOwn(SCHEMES, name) ? SCHEMES[name] : null;
  if (!make) {
    throw new Error(`this page does not know the ${question.design !== undefined ?
      `design ${question.design}` : `mechanism ${question.mechanism}`}`);
  }
  return { ...oneOption(question), ...make(question) };
}
