// Optimized local hashing, as ldpsurvey/shared/olh.py, byte for byte: seed s = the top 32 bits
// of the first 53-bit draw, h = xxh32(decimal digits of the option, seed s) mod g, then the
// forced-response randomizer over the g hash values (alpha, uniform beta) on two more draws:
// three draws always. The report is [s, y].

import { _ } from "./words.js";
import { randomize, realizedEpsilon, secureDraw, thresholds, uniformBeta } from "./randomizer.js";

const PRIME = [0x9e3779b1, 0x85ebca77, 0xc2b2ae3d, 0x27d4eb2f, 0x165667b1];
const SEED_DIVISOR = 2 ** 21; // 53 - 32 bits

const rotl = (x, r) => ((x << r) | (x >>> (32 - r))) >>> 0;

// XXH32 of fewer than 16 bytes (Collet's specification: steps 1b, 4, 5, 6), as olh.xxh32.
export function xxh32(bytes, seed) {
  if (bytes.length >= 16) throw new Error("this xxh32 hashes option numbers (fewer than 16 bytes)");
  let acc = (seed + PRIME[4] + bytes.length) >>> 0;
  let i = 0;
  for (; i + 4 <= bytes.length; i += 4) {
    const lane = (bytes[i] | (bytes[i + 1] << 8) | (bytes[i + 2] << 16) | (bytes[i + 3] << 24)) >>> 0;
    acc = Math.imul(rotl((acc + Math.imul(lane, PRIME[2])) >>> 0, 17), PRIME[3]) >>> 0;
  }
  for (; i < bytes.length; i += 1) {
    acc = Math.imul(rotl((acc + Math.imul(bytes[i], PRIME[4])) >>> 0, 11), PRIME[0]) >>> 0;
  }
  acc = (acc ^ (acc >>> 15)) >>> 0;
  acc = Math.imul(acc, PRIME[1]) >>> 0;
  acc = (acc ^ (acc >>> 13)) >>> 0;
  acc = Math.imul(acc, PRIME[2]) >>> 0;
  return (acc ^ (acc >>> 16)) >>> 0;
}

export function hashed(option, seed, g) {
  return xxh32(new TextEncoder().encode(String(option)), seed) % g;
}

export function localHashing(question) {
  const { g, alpha } = question;
  const t = thresholds(alpha, uniformBeta(g));
  const k = question.options.length;
  const nominal = Math.log1p((alpha * g) / (1 - alpha));
  const pStar = alpha + (1 - alpha) / g;
  return {
    epsilon: Math.max(realizedEpsilon(t), nominal),
    randomize(truth, draw = secureDraw) {
      if (!(Number.isInteger(truth) && truth >= 0 && truth < k)) {
        throw new Error("the answer is not one of the question's options");
      }
      const seed = Math.floor(draw() / SEED_DIVISOR);
      return [seed, randomize(hashed(truth, seed, g), t, draw)];
    },
    largest: () => [2 ** 32 - 1, g - 1],
    shown: (report) => _("seed {seed}, hash value {value}", { seed: report[0], value: report[1] }),
    plain: () => _("a code that fits several answers"),
    parameters: () => [question.mechanism, g, alpha],
    note: (percent) => _("The server receives a random seed and a number from 0 to {last}: " +
      "your answer hashed with that seed, kept with {chance} probability, so many options fit " +
      "each report.", { last: g - 1, chance: percent(pStar) }),
  };
}

