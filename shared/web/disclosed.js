// Openly answered questions, as ldpsurvey/shared/disclosed.py: the answer is sent as given (an
// option index, or a whole number from min to max), with no randomization and no draw, so the
// question counts in no epsilon. The page marks it with WORDS beside the question.

export const WORDS = "Answered openly: stored as you give it.";

export function disclosed(question) {
  const number = question.type === "numeric";
  const unit = question.unit ? ` ${question.unit}` : "";
  const check = (truth) => {
    const ok = number ? Number.isInteger(truth) && truth >= question.min && truth <= question.max
      : Number.isInteger(truth) && truth >= 0 && truth < question.options.length;
    if (!ok) throw new Error("the answer is not one this question takes");
    return truth;
  };
  return {
    open: true,
    ...(number ? { answer: "number", step: "1", truth: (x) => `${check(x)}${unit}` } : {}),
    epsilon: 0,
    randomize: (truth) => check(truth),
    largest: () => (number ? [question.min, question.max].reduce(
      (a, b) => (String(b).length > String(a).length ? b : a)) : question.options.length - 1),
    shown: (report) => `${number ? `${report}${unit}` : question.options[report]} (as given)`,
    parameters: () => ["disclosed", question.min ?? null, question.max ?? null],
    note: () => `${WORDS} It is not changed at random, so it does not use up any of your ` +
      "privacy budget, and anyone who sees your answers sees this one as it is.",
  };
}
