"""What one measured run of a kernel's original order tells the L2 model, and the model's inputs set from it.

Two things the model cannot read from the source decide how far it is off on a kernel
(bench/results/calibrated_h200.md, bench/results/timeline_h200.md):
- **whether its waves stay crisp**: whether each later wave's blocks start together, as the first wave's do.
  Measured as the later waves' spread: each band of as many consecutive blocks as run at once (a wave, in
  dispatch order), the 10th-90th percentile range of its start times in median block lifetimes, the median
  over the bands after the first.  0 when every wave starts at once; 0.5-0.9 on the H200's kernels whose
  blocks start as earlier ones end.  Below `CRISP_SPREAD` the model runs with `crisp_waves`.
- **how many blocks run at once**: the most blocks whose start-to-end intervals overlap.  The waves above are
  bands of that many blocks.  Where the model's count is not the compiler's (launch bounds or a default) and
  differs from the measured one by more than `RESIDENT_TOLERANCE`, the model takes the measured count,
  unless the whole grid ran at once (then it says nothing of an SM's limit).  A count from the compiler is
  kept: the stamps add registers, so the instrumented copy may fit fewer blocks than the original.
- **how many of its reads the L2 request coalescer merges** (Hopper, kernels that stage their reads):
  ncu's share of read sectors the coalescer merged at the original order.  The model's `merged` is set so
  that its own merged share at the original order is that one (bisection), and is used for every order.

Crisp waves without a measured merged share are not used where the coalescer applies: that form gets such
kernels' DRAM reads and not their hit rates (the coalescer merges more of a crisp wave's reads than the
default share says).  Measured on the H200 with both inputs, the bf16 WMMA GEMM's hit-rate error fell from
6.6 to 3.1 points and the tiled GEMM's from 4.6 to 3.2; kernels whose waves are not crisp and that merge
little keep the model as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
import math
from dataclasses import asdict, dataclass

import numpy as np

from swzc.model.footprint import Footprint
from swzc.model.l2model import L2Model
from swzc.target.hw import HardwareModel

CRISP_SPREAD = 0.1  # measured on the H200: 0.00 on the bf16 WMMA GEMM, 0.53-0.90 on seven other kernels
SOLVE_STEPS = 24  # bisection steps for `merged` (to 1e-7)
RESIDENT_TOLERANCE = 0.05  # a measured count of blocks at once this close to the model's leaves the model's


@dataclass(frozen=True)
class Calibration:
    """The inputs one run measured, and what the model takes from them."""

    spread: float | None  # the later waves' spread in block lifetimes; None: not measured, or a single wave
    merged_share: float | None  # share of read sectors the coalescer merged at the original order; None: not measured
    crisp_waves: bool  # the model's form: every wave starts at once
    merged: float | None  # the model's merged share of in-step reuses, solved; None: its default
    notes: tuple[str, ...] = ()  # what was not measured, and why
    running: int | None = None  # the most blocks measured running at once; None: not measured
    resident: int | None = None  # that count, where the model takes it in place of its own
    model_had: int = 0  # the model's own count of blocks at once

    def model_args(self) -> dict[str, bool | float]:
        """Keyword arguments of L2Model for these inputs."""
        return {"crisp_waves": self.crisp_waves, **({"merged": self.merged} if self.merged is not None else {})}

    @property
    def changes_model(self) -> bool:
        return self.crisp_waves or self.merged is not None or self.resident is not None

    def text(self) -> str:
        """One line for a report."""
        spread = f"later waves' spread {self.spread:.2f} lifetimes" if self.spread is not None else "waves not measured"
        share = f"{100 * self.merged_share:.1f} % of read sectors merged" if self.merged_share is not None else ""
        used = ", ".join(filter(None, [f"{self.resident:,} blocks at once" if self.resident else "",
                                       "crisp waves" if self.crisp_waves else "",
                                       f"merged {self.merged:.3f}" if self.merged is not None else ""]))
        at_once = (f"{self.running:,} blocks ran at once" + (f" (the model had {self.model_had:,})" if self.resident else "")
                   if self.running is not None else "")
        told = "; ".join(filter(None, [spread, at_once, share]))
        notes = "; ".join(self.notes)
        return (f"{told}: the model ran with {used or 'its defaults'}" + (f" ({notes})" if notes else ""))

    def to_json(self) -> dict:
        """As the benchmark report's JSON has it (its fields by name)."""
        return {**asdict(self), "notes": list(self.notes)}


def most_at_once(start: np.ndarray, end: np.ndarray) -> int:
    """The most intervals [start, end) open at one instant (an end before a start at the same instant)."""
    events = np.concatenate([np.stack([start, np.ones_like(start)], 1), np.stack([end, -np.ones_like(end)], 1)])
    return int(np.cumsum(events[np.lexsort((events[:, 1], events[:, 0]))][:, 1]).max())


def later_wave_spread(start: np.ndarray, end: np.ndarray, resident: int) -> float | None:
    """The median over waves after the first of each wave's start spread in median block lifetimes (see the
    module's docstring); `start` and `end` by block in dispatch order, `resident` blocks to a wave.  None with
    fewer than two waves or no lifetime."""
    resident = max(1, resident)
    life = end - start
    lived = life[life > 0]
    if start.size < 2 * resident or lived.size == 0:
        return None
    lifetime = float(np.median(lived))
    if lifetime <= 0:
        return None
    bands = [start[i:i + resident] for i in range(resident, start.size - resident + 1, resident)]
    return float(np.median([float(np.percentile(b, 90) - np.percentile(b, 10)) / lifetime for b in bands]))


def calibrate(fp: Footprint, hw: HardwareModel, resident: int, identity: np.ndarray, spread: float | None,
              merged_share: float | None, notes: Sequence[str] = (), running: int | None = None,
              compiled: bool = False) -> Calibration:
    """The model's inputs for this kernel from what its original order's run measured; `identity` is the
    original dispatch order (swzc.model.rank.identity_order), `resident` the model's own count of blocks at
    once (`compiled`: from the compiler) and `running` the measured one (None: not measured, or not
    comparable, as in a tile loop)."""
    notes = list(notes)
    off = running is not None and abs(running - resident) > RESIDENT_TOLERANCE * resident
    taken = running if off and not compiled and running < math.prod(fp.grid) else None
    if off and compiled:
        notes.append(f"{running:,} blocks ran at once in the instrumented copy; the model keeps the compiler's {resident:,}")
    model_had, resident = resident, taken or resident
    coalesces = hw.l2_request_coalescer and fp.staged
    if not coalesces and merged_share is not None:
        merged_share = None
        notes.append("the kernel does not stage its reads, so the coalescer's share does not apply")
    crisp = spread is not None and spread < CRISP_SPREAD
    if crisp and coalesces and merged_share is None:
        crisp = False
        notes.append("its waves are crisp, but without the coalescer's measured share the model keeps its usual form")
    merged = _solve_merged(fp, hw, resident, identity, merged_share, crisp) if merged_share is not None else None
    return Calibration(spread, merged_share, crisp, merged, tuple(notes), running, taken, model_had)


def _solve_merged(fp: Footprint, hw: HardwareModel, resident: int, identity: np.ndarray, share: float,
                  crisp: bool) -> float:
    """The `merged` at which the model, in the form it will run in (`crisp`), merges the share `share` of the
    reads at the original order."""
    lo, hi = 0.0, 1.0
    for _ in range(SOLVE_STEPS):
        mid = (lo + hi) / 2
        p = L2Model(fp, hw, resident, merged=mid, crisp_waves=crisp).predict("identity", identity, fp.adapter, fp.divisor)
        lo, hi = (mid, hi) if p.merged / max(1, p.reads) < share else (lo, mid)
    return round(lo, 4)
