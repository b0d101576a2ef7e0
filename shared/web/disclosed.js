// Openly answered questions, as ldpsurvey/shared/disclosed.py: the answer is sent as given (an
// option index, or a whole number from min to max), with no randomization and no draw, so the
// question counts in no epsilon. The page marks it with WORDS beside the question. A number is
// asked as a whole number (`whole`) and one outside [min, max] is refused at the question
// (`accepts`), never clamped: a changed open answer would be a wrong one.

import { _ } from "./words.js";

// WORDS is read when the page shows it, in its language.
export const WORDS = () => _("Answered openly: stored as you give it.");

export function disclosed(question) {
  const number = question.type === "numeric";
  const unit = question.unit ? ` ${question.unit}` : "";
  const accepts = (truth) => Number.isInteger(truth) &&
    (number ? truth >= question.min && truth <= question.max :
      truth >= 0 && truth < question.options.length);
  const check = (truth) => {
    if (!accepts(truth)) throw new Error("the answer is not one this question takes");
    return truth;
  };
  return {
    open: true,
    accepts,
    ...(number ? { answer: "number", whole: true, truth: (x) => `${check(x)}${unit}` } : {}),
    epsilon: 0,
    randomize: (truth) => check(truth),
    largest: () => (number ? [question.min, question.max].reduce(
      (a, b) => (String(b).length > String(a).length ? b : a)) : question.options.length - 1),
    shown: (report) => {
      const answer = number ? `${report}${unit}` : question.options[report];
      return _("{answer} (as given)", { answer });
    },
    // As the Python client's digest (client/verify.py parameters: scheme.fields()'s values):
    // `disclosed` true, and for a number its min, max and unit.
    parameters: () => (number ? [true, question.min, question.max,
      ...(question.unit === undefined ? [] : [question.unit])] : [true]),
    note: () => `${WORDS()} ${_("It is not changed at random, so it does not use up any of " +
      "your privacy budget, and anyone who sees your answers sees this one as it is.")}`,
  };
}
