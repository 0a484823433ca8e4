"""Acceptance by measured time: a rewrite is kept only if it is correct and faster than the noise.

Per round the harness times A (original), B (rewritten) and A again.  The speedup is the median of
the per-round ratios A / B; its lower bound is the 5th percentile of the medians of 2,000 bootstrap
resamples of those ratios (a fixed seed: the verdict is reproducible), its upper bound the 95th.  The
noise is the median of |A / A' - 1| over the rounds.  Accept when the lower bound exceeds
1 + max(1 %, 3 x noise); a rewrite is *slower* (`Verdict.slower`) when the upper bound is under
1 - max(1 %, 3 x noise): what a loop over several sizes refuses at any size.

A reorder of blocks does no less work, so a speedup over 10x means the measurement is wrong (a kernel
that failed to launch, work skipped): it is declined as suspect, never accepted.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from swzc.verify.harness import Timing

MIN_GAIN = 0.01
NOISE_FACTOR = 3.0
RESAMPLES = 2000
SUSPECT = 10.0  # a speedup above this is not believed


@dataclass(frozen=True)
class Verdict:
    accepted: bool
    speedup: float  # median of per-round A / B
    lower: float  # bootstrap 5th percentile of that median
    noise: float  # median |A / A' - 1|
    threshold: float  # what `lower` had to exceed
    baseline_ms: float  # median A
    candidate_ms: float  # median B
    reason: str
    upper: float = 0.0  # bootstrap 95th percentile of the median speedup

    @property
    def slower(self) -> bool:
        """Slower than the original beyond the noise: the upper bound under 1 - (threshold - 1)."""
        return self.upper < 2.0 - self.threshold


def judge(timing: Timing, correct: bool) -> Verdict:
    a, b, a2 = (np.asarray(t, dtype=np.float64) for t in (timing.a, timing.b, timing.a2))
    ratios = a / b
    speedup = float(np.median(ratios))
    rng = np.random.default_rng(0)
    medians = np.median(ratios[rng.integers(0, ratios.size, (RESAMPLES, ratios.size))], axis=1)
    lower, upper = (float(v) for v in np.percentile(medians, [5, 95]))
    noise = float(np.median(np.abs(a / a2 - 1.0)))
    threshold = 1.0 + max(MIN_GAIN, NOISE_FACTOR * noise)
    base, cand = float(np.median(a)), float(np.median(b))
    if not correct:
        return Verdict(False, speedup, lower, noise, threshold, base, cand, "outputs differ from the original", upper)
    if speedup > SUSPECT:
        return Verdict(False, speedup, lower, noise, threshold, base, cand,
                       f"suspect: {speedup:.1f}x from a block reorder is not believable; check the launch and the harness", upper)
    if lower > threshold:
        return Verdict(True, speedup, lower, noise, threshold, base, cand,
                       f"{speedup:.3f}x (lower bound {lower:.3f} > {threshold:.3f}; A/A noise {noise:.2%})", upper)
    return Verdict(False, speedup, lower, noise, threshold, base, cand,
                   f"not faster than the noise: {speedup:.3f}x, lower bound {lower:.3f} <= {threshold:.3f} "
                   f"(A/A noise {noise:.2%})", upper)
