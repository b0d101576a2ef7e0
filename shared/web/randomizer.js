// The randomizer of ldpsurvey/shared/randomizer.py, bit for bit, for the browser.
//
// Every draw is a uniform 53-bit integer U from crypto.getRandomValues: two 32-bit words a, b
// give (a >>> 5) * 2^26 + (b >>> 6). One randomization consumes exactly two draws U1, U2:
// report the true option if U1 < T, otherwise the first option j with U2 < C_j, where
//   T   = floor(alpha * 2^53)
//   C_j = floor(S_j * 2^53), S_j the left-to-right double sum of beta_0..beta_j; the last is 2^53.
// Every one of these numbers is an integer below 2^53 + 1, exact in a JavaScript number.
// Randomness comes only from the operating system's CSPRNG, never a non-cryptographic generator.

export const N = 2 ** 53;
export const EPSILON_TOLERANCE = 1e-9; // ldpsurvey.shared.mechanisms.budget.EPSILON_TOLERANCE
export const DEFAULT_MAX_EPSILON = Math.log(3); // per question, as the Python client
export const DEFAULT_MAX_TOTAL_EPSILON = 4 * Math.log(3); // per submission
export const DEFAULT_MAX_LIFETIME_EPSILON = 8 * Math.log(3); // per site (origin), all surveys
export const DEFAULT_IRR_ALPHA = 0.75; // ldpsurvey.shared.survey.manifest.DEFAULT_IRR_ALPHA

export function secureDraw() {
  const words = new Uint32Array(2);
  crypto.getRandomValues(words);
  return (words[0] >>> 5) * 2 ** 26 + (words[1] >>> 6);
}

export function thresholds(alpha, beta) {
  const keep = Math.floor(alpha * N);
  const cumulative = [];
  let running = 0;
  for (const b of beta) {
    running += b;
    cumulative.push(Math.floor(running * N));
  }
  cumulative[cumulative.length - 1] = N;
  const weights = cumulative.map((c, j) => c - (j === 0 ? 0 : cumulative[j - 1]));
  if (!(keep >= 0 && keep < N) || Math.min(...weights) <= 0) {
    throw new Error("these parameters leave an option with no chance of being forced: no privacy");
  }
  return { keep, cumulative, weights };
}

// eps = ln(1 + T N / ((N - T) min_j w_j)); the Python client divides the exact integers, this
// divides doubles, so the two agree to about 1e-15 (far inside EPSILON_TOLERANCE).
export function realizedEpsilon(t) {
  return Math.log1p((t.keep / (N - t.keep)) * (N / Math.min(...t.weights)));
}

export function randomize(trueOption, t, draw = secureDraw) {
  if (!(Number.isInteger(trueOption) && trueOption >= 0 && trueOption < t.cumulative.length)) {
    throw new Error("the answer is not one of the question's options");
  }
  const keepDraw = draw();
  const optionDraw = draw();
  if (keepDraw < t.keep) return trueOption;
  return t.cumulative.findIndex((c) => optionDraw < c);
}

export function exceeds(epsilon, ceiling) {
  return epsilon > ceiling * (1 + EPSILON_TOLERANCE);
}

// The largest posterior after an eps-LDP report, from a prior q: q e^eps / (1 + q (e^eps - 1)).
export function posteriorMax(prior, epsilon) {
  const e = Math.exp(epsilon);
  return (prior * e) / (1 + prior * (e - 1));
}

// P(report j | true i) = alpha [i = j] + (1 - alpha) beta_j
export function reportProbability(alpha, beta, trueOption, reported) {
  return alpha * (trueOption === reported ? 1 : 0) + (1 - alpha) * beta[reported];
}

// Two forced-response layers in a row as one (ldpsurvey.shared.stats.design.compose, derived
// there): alpha = aP aI, beta_r = (aI (1 - aP) bP_r + (1 - aI) bI_r) / (1 - aP aI).
export function compose(alphaP, betaP, alphaI, betaI) {
  const alpha = alphaP * alphaI;
  const beta = betaP.map((b, r) => (alphaI * (1 - alphaP) * b + (1 - alphaI) * betaI[r]) / (1 - alpha));
  return { alpha, beta };
}

export function uniformBeta(k) {
  return Array(k).fill(1 / k);
}
