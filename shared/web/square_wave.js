// The Square Wave mechanism for a number question's distribution, as
// ldpsurvey/shared/mechanisms/square_wave.py, bit for bit: the piecewise mechanism's grid sampler
// (piecewise.js: the answer rounded at random to a position of 0..grid, then a cell of its
// window with probability alpha, else any cell) with the square wave's window, and its epsilon
// ln(1 + u / v) recomputed from the manifest's integers. `bins` is the histogram's (a power of
// two from 2 to 64 dividing grid, at most 1024); the device only checks it.

import { piecewise } from "./piecewise.js";

export function squareWave(question) {
  const { bins, grid } = question;
  if (!Number.isInteger(bins) || bins < 2 || bins > 64 || (bins & (bins - 1)) !== 0 ||
      !Number.isInteger(grid) || grid > 1024 || grid % bins !== 0) {
    throw new Error("these square wave parameters are not an exact grid");
  }
  const pm = piecewise(question);
  return { ...pm, parameters: () => [...pm.parameters(), bins] };
}
