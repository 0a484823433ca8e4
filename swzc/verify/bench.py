"""The acceptance loop: propose -> prove -> splice -> compile -> check -> time -> profile -> keep the best.

For each kernel the L2 model's candidates are tried best first, up to `max_iterations` (after the best, the
best of each other kind of order the model rates as a tie: swzc.model.rank.Ranking.to_measure).  Each is
rewritten (proven and spliced by the pipeline), built beside the original, checked on two random inputs,
timed interleaved with an A/A control, and profiled where a profiler is present (ncu on NVIDIA,
rocprofv3 on AMD; without one the loop says so and goes on with time only).  A candidate is
accepted only by measured time (swzc.verify.accept); the fastest accepted one is kept.  Every attempt goes into
the report, accepted or not.

A check that cannot run to its end (a build that fails, a harness that crashes, times out or prints no
result) is a failed check, reported with how it ended and the first lines of its output: a kernel is
declined either as "measured, not faster" or as "the check failed (...)".  A kernel's loop builds in one
temporary folder of its own, removed however the loop ends: the original's library and the harness once,
then each candidate's library alone (SizedBencher: a harness per size).
"""

from __future__ import annotations

import csv
import io
import json
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from swzc.core import processes
from swzc.verify.accept import judge
from swzc.verify.calibrate import (LRC_DELIVERED, LRC_MERGED, Observed, instrumented, observed, probe_failed, unmeasured,
                                   wave_spread)
from swzc.analysis.records import FileAnalysis, KernelInfo
from swzc.core.errors import SwzcError
from swzc.core.inputs import TOOL_OUTPUT_BYTES, read_regular
from swzc.verify.harness import (
    Build,
    Builder,
    HarnessResult,
    gpu_vendor,
    load_spec,
    plan_launch,
    run_harness,
    toolchain_for,
)
from swzc.target.hw import HardwareModel
from swzc.verify.program import OriginalFailed, ProgramBench, run_program, run_program_sizes
from swzc.analysis.context import FileContext
from swzc.formulas.swizzles import Formula
from swzc.model.calibration import Calibration

NCU_HIT, NCU_DRAM = "lts__t_sector_hit_rate.pct", "dram__bytes_read.sum"  # what a profile of one variant reads
# rocprofv3 counters: L2 (TCC) hits and misses summed over the channels, in one pass; then kilobytes read
# from device memory, a derived counter whose name differs between ROCm releases (the first one found)
ROCPROF_L2 = ("TCC_HIT_sum", "TCC_MISS_sum")
ROCPROF_FETCH_KB = ("FETCH_SIZE", "FetchSize")
PROFILERS = {"nvcc": "ncu", "hipcc": "rocprofv3"}
PROFILE_TIMEOUT_S = 600
REASON_LINES = 6  # lines of a failed check's output kept in a kernel's reason


ATTEMPT_STATUSES = ("accepted", "not faster", "slower", "outputs differ", "check failed")  # "slower": at one size of several
KERNEL_STATUSES = ("accepted", "not faster", "check failed")


@dataclass(frozen=True)
class Attempt:
    candidate: str
    predicted_l2_hit_rate: float | None
    correct: bool
    accepted: bool
    speedup: float | None
    lower_bound: float | None
    noise: float | None
    baseline_ms: float | None
    ms: float | None
    l2_hit_rate: float | None  # measured by ncu, where present
    dram_read_bytes: float | None
    reason: str
    seconds: float
    status: str = "not faster"  # one of ATTEMPT_STATUSES: "outputs differ" ran and disagreed, "check failed" did not run through
    formula: Formula | None = field(default=None, compare=False)  # the order measured; `candidate` is its name
    size: int | None = None  # the size it ran at, in a loop over several (SizedBencher); None: the file's one launch
    upper_bound: float | None = None  # bootstrap 95th percentile of the speedup

    @classmethod
    def unmeasured(cls, formula: Formula, predicted: float | None, status: str, reason: str, seconds: float) -> Attempt:
        return cls(formula.name, predicted, False, False, None, None, None, None, None, None, None, reason, seconds, status,
                   formula)


@dataclass(frozen=True)
class KernelBench:
    kernel: str
    line: int
    attempts: tuple[Attempt, ...]
    chosen: str | None  # the fastest accepted candidate
    reason: str
    baseline_l2_hit_rate: float | None = None
    profiler: str = ""  # the profiler used, or why there was none
    status: str = "not faster"  # one of KERNEL_STATUSES
    formula: Formula | None = field(default=None, compare=False)  # the chosen order; `chosen` is its name
    by_size: tuple[Attempt, ...] = ()  # in a loop over several sizes: each candidate at each size (the size x order table)
    baseline_dram_read_bytes: float | None = None  # the original's, measured by the profiler
    calibration: Calibration | None = None  # what the original's instrumented run set in the model (swzc.model.calibration)


def profiler_note(toolchain: str) -> str:
    tool = PROFILERS[toolchain]
    return tool if shutil.which(tool) else f"none ({tool} is not on PATH): timed only, no L2 hit rates"


def profile(built: Build, variant: str) -> tuple[float | None, float | None]:
    """(L2 hit %, DRAM bytes read) of one variant's launch; (None, None) without the profiler."""
    if built.toolchain == "hipcc":
        return _rocprof(built, variant)
    return _ncu(built, variant)


def _ncu(built: Build, variant: str) -> tuple[float | None, float | None]:
    counters = ncu_counters(built, variant, (NCU_HIT, NCU_DRAM)) or {}
    return counters.get(NCU_HIT), counters.get(NCU_DRAM)


def ncu_counters(built: Build, variant: str, metrics: Sequence[str]) -> dict[str, float] | None:
    """ncu's values of `metrics` for the last launch of one variant's kernel in its harness (byte counts in
    bytes); a metric ncu did not give is missing; None without ncu or where its run gave no table."""
    ncu = shutil.which("ncu")
    if ncu is None:
        return None
    cmd = [ncu, "--clock-control", "none", "--metrics", ",".join(metrics), "--csv", "--page", "raw",
           str(built.harness), str(built.a), str(built.b), f"profile-{variant}"]
    run = processes.run(cmd, PROFILE_TIMEOUT_S)
    rows = [r for r in csv.reader(io.StringIO("\n".join(l for l in run.stdout.splitlines() if l.startswith('"'))))]
    if len(rows) < 3:
        return None
    header, units, last = rows[0], rows[1], rows[-1]
    values: dict[str, float] = {}
    for name in metrics:
        try:
            at = header.index(name)
            value = float(last[at].replace(",", ""))
        except (ValueError, IndexError):
            continue
        values[name] = value * {"Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12}.get(units[at] if at < len(units) else "", 1.0)
    return values


def _rocprof(built: Build, variant: str) -> tuple[float | None, float | None]:
    tool = shutil.which("rocprofv3")
    if tool is None:
        return None, None
    with tempfile.TemporaryDirectory(prefix="swzc-rocprof-") as folder:
        l2 = _rocprof_pass(tool, ROCPROF_L2, Path(folder), built, variant)
        fetched = None
        for name in ROCPROF_FETCH_KB:
            fetched = _rocprof_pass(tool, (name,), Path(folder), built, variant).get(name)
            if fetched is not None:
                break
    hit, miss = l2.get("TCC_HIT_sum"), l2.get("TCC_MISS_sum")
    rate = 100.0 * hit / (hit + miss) if hit is not None and miss is not None and hit + miss > 0 else None
    return rate, fetched * 1024 if fetched is not None else None


def _rocprof_pass(tool: str, names: tuple[str, ...], folder: Path, built: Build, variant: str) -> dict[str, float]:
    """One rocprofv3 run of the harness collecting `names`; the kernel's values ({} if it wrote none)."""
    out = folder / names[0]
    cmd = [tool, "--pmc", *names, "-d", str(out), "-o", "swzc", "--output-format", "csv", "--",
           str(built.harness), str(built.a), str(built.b), f"profile-{variant}"]
    if processes.run(cmd, PROFILE_TIMEOUT_S).timed_out:
        return {}
    found: dict[str, float] = {}
    for table in sorted(out.rglob("*counter_collection.csv")):
        try:
            written = read_regular(str(table), TOOL_OUTPUT_BYTES).decode(errors="replace")
        except SwzcError:  # not a regular file, or past the limit: no counters from it
            continue
        found.update(rocprof_counters(written, built.kernel))
    return found


def rocprof_counters(text: str, kernel: str) -> dict[str, float]:
    """Counter values of the last dispatch of `kernel` in a rocprofv3 counter_collection.csv (one row per
    dispatch and counter); the runtime's own copy and fill kernels are skipped by name."""
    rows = [r for r in csv.DictReader(io.StringIO(text)) if _kernel_named(r.get("Kernel_Name") or "", kernel)]
    if not rows:
        return {}
    last = max(_dispatch(r) for r in rows)
    values: dict[str, float] = {}
    for r in rows:
        if _dispatch(r) == last:
            try:
                values[r["Counter_Name"]] = values.get(r["Counter_Name"], 0.0) + float(r["Counter_Value"])
            except (KeyError, ValueError):
                continue
    return values


def _dispatch(row: dict) -> int:
    try:
        return int(row.get("Dispatch_Id") or 0)
    except ValueError:
        return 0


def _kernel_named(shown: str, kernel: str) -> bool:
    """rocprofv3 shows the demangled signature ("void k<float>(float*, int)") or the bare name."""
    head = shown.split("(")[0].split("<")[0].split()
    return bool(head) and head[-1].split("::")[-1] == kernel


def _build_batch(builder: Builder, rewrite: Callable[[Formula], bytes], formulas: Sequence[Formula],
                 libs: dict[str, Path | SwzcError], built: int, shared: list[tuple[list[str], Path]]
                 ) -> tuple[int, list[Path | SwzcError]]:
    """The candidates of `formulas` not in `libs` built with the `shared` jobs (the original, the harnesses) in one
    batch of parallel compiles; each candidate's library, or why it has none, goes into `libs`.  Returns the count
    of candidate libraries named so far (they are b1, b2, …) and what each shared job gave."""
    todo, jobs = [], []
    for formula in dict.fromkeys(f for f in formulas if f.name not in libs):
        try:
            data = rewrite(formula)
        except SwzcError as exc:  # not spliced: nothing to build, said when it is measured
            libs[formula.name] = exc
            continue
        built += 1
        todo.append(formula)
        jobs.append(builder.variant(f"b{built}", data))
    done = builder.compile_each(jobs + shared)
    libs.update((f.name, got) for f, got in zip(todo, done))
    return built, done[len(jobs):]


class Bencher:
    """One kernel's acceptance loop, a candidate at a time: a proposer may choose its next candidate from the
    results of the last (swzc.search.proposers).  `rewrite` gives the whole rewritten file for a formula; with
    `program` the user's own program is built and timed instead of the generated harness (no profiler then)."""

    def __init__(self, ctx: FileContext, analysis: FileAnalysis, index: int, rewrite: Callable[[Formula], bytes],
                 hw: HardwareModel, spec_file: str | None = None, rounds: int = 30,
                 progress: Callable[[str], None] | None = None, program: ProgramBench | None = None,
                 flags: tuple[str, ...] = ()) -> None:
        src = ctx.src
        self.src, self.rewrite, self.hw, self.rounds, self.progress, self.program = src, rewrite, hw, rounds, progress, program
        self.flags = flags
        self.kernel = analysis.kernels[index]
        self.plan = plan_launch(ctx, self.kernel, load_spec(spec_file, self.kernel.name)) if program is None else None
        self.toolchain = toolchain_for(src.dialect, gpu_vendor()) if program is None else ""
        self.arch = (hw.arch if hw.vendor == "amd" else "native") if self.toolchain == "hipcc" else hw.nvcc_arch
        self.profiler = profiler_note(self.toolchain) if self.toolchain else "none (the user's own program is timed)"
        self.include_dir = str(Path(src.path).resolve().parent)
        self.attempts: list[Attempt] = []
        self.by_size: list[Attempt] = []  # with --bench-sizes: each candidate at each size
        self.baseline_hit: float | None = None
        self.baseline_dram: float | None = None
        # the generated harness: the original's library and the harness are built once, at the first candidate,
        # in a folder of the loop's own (removed by `close`); each candidate builds only its own library
        self._folder: tempfile.TemporaryDirectory[str] | None = None
        self._builder: Builder | None = None
        self._shared: tuple[Path, Path] | None = None
        self._libs: dict[str, Path | SwzcError] = {}  # prebuilt candidates' libraries (or their builds' errors), by name
        self._built = 0

    def _make_builder(self) -> Builder:
        assert self.plan is not None
        if self._builder is None:
            self._folder = tempfile.TemporaryDirectory(prefix="swzc-bench-", ignore_cleanup_errors=True)
            self._builder = Builder(self.src.path, self.plan.kernel, self.arch, self.include_dir, Path(self._folder.name),
                                    self.src.dialect, self.toolchain, self.flags)
        return self._builder

    def prebuild(self, formulas: Sequence[Formula], extra: Sequence[tuple[list[str], Path]] = ()) -> list[Path | SwzcError]:
        """Build these candidates, with the original and the harness, in one batch of parallel compiles before any
        is measured: the loop then waits for one build, not one per candidate (the generated harness only; the
        user's own program is built by its command).  A build that fails is reported when its candidate is.
        `extra` compiles go into the same batch; returned is what each gave."""
        if self.plan is None:
            return []
        builder = self._make_builder()
        shared = [] if self._shared is not None else [builder.variant("a", self.src.data),
                                                      builder.harness("", self.plan, self.hw.flush_bytes)]
        self._built, rest = _build_batch(builder, self.rewrite, formulas, self._libs, self._built, [*shared, *extra])
        rest, extras = rest[:len(shared)], rest[len(shared):]
        failed = next((got for got in rest if isinstance(got, SwzcError)), None)
        if failed is not None:
            self._libs = {name: failed for name in self._libs}  # no candidate can run without them
        elif shared:
            self._shared = (rest[0], rest[1])  # type: ignore[assignment]  # both paths
        return extras

    def calibrate(self, formulas: Sequence[Formula], coalescer: bool) -> Observed:
        """The original order's instrumented run and its profile (swzc.verify.calibrate), built with these
        candidates in one batch; `coalescer`: measure the coalescer's share."""
        if self.plan is None:
            return unmeasured("the user's own program is timed: the model keeps its defaults")
        builder = self._make_builder()
        plan = self.plan

        def original() -> tuple[Build, tuple[int, int, int]] | None:
            if self._shared is None:
                return None
            lib, harness = self._shared
            return Build(builder.folder, harness, lib, lib, self.toolchain, plan.kernel.partition("<")[0]), plan.grid

        return _calibrate(self, builder, formulas, coalescer, original)

    def _build(self, formula: Formula) -> Build:
        """The candidate's library (prebuilt, or built now), with the original's and the harness built once for
        every candidate."""
        assert self.plan is not None
        builder = self._make_builder()
        ready = self._libs.get(formula.name)
        if isinstance(ready, SwzcError):
            raise ready
        if ready is None:
            self._built += 1
            jobs = [builder.variant(f"b{self._built}", self.rewrite(formula))]
            if self._shared is None:
                jobs += [builder.variant("a", self.src.data), builder.harness("", self.plan, self.hw.flush_bytes)]
            built = builder.compile(jobs)
            ready = built[0]
            if self._shared is None:
                self._shared = (built[1], built[2])
        assert self._shared is not None
        original, harness = self._shared
        return Build(builder.folder, harness, original, ready, self.toolchain, self.plan.kernel.partition("<")[0])

    def measure(self, formula: Formula, predicted: float | None, position: str = "") -> Attempt:
        """Build, check, time and profile one candidate; the attempt is also kept for `result`."""
        name = formula.name
        if self.progress:
            self.progress(f"{self.kernel.name}: {name}" + (f" ({position})" if position else ""))
        start = time.perf_counter()
        if self.program is not None and self.program.sizes:
            return self._measure_sizes(formula, predicted, start)
        built: Build | None = None
        try:
            if self.program is not None:
                result: HarnessResult = run_program(self.src.path, self.src.data, self.rewrite(formula), self.program)
            else:
                built = self._build(formula)
                result = run_harness(built, self.rounds)
        except OriginalFailed:
            raise
        except SwzcError as exc:
            result = HarnessResult(False, exc.message, None, failed=True)
        if result.failed or result.timing is None:
            attempt = replace(_failed(formula, predicted, result), seconds=time.perf_counter() - start)
        else:
            verdict = judge(result.timing, True)
            hit = dram = None
            if built is not None:  # ncu profiles the generated harness, not the user's program
                if self.baseline_hit is None:
                    self.baseline_hit, self.baseline_dram = profile(built, "a")
                hit, dram = profile(built, "b")
            attempt = Attempt(name, predicted, True, verdict.accepted, verdict.speedup, verdict.lower, verdict.noise,
                              verdict.baseline_ms, verdict.candidate_ms, hit, dram, verdict.reason,
                              time.perf_counter() - start, "accepted" if verdict.accepted else "not faster", formula)
        self.attempts.append(attempt)
        return attempt

    def _measure_sizes(self, formula: Formula, predicted: float | None, start: float) -> Attempt:
        """The user's program at each of --bench-sizes (`{size}` in its command), built once per version; judged
        as SizedBencher judges the generated harness's sizes."""
        assert self.program is not None
        try:
            results = run_program_sizes(self.src.path, self.src.data, self.rewrite(formula), self.program)
        except OriginalFailed:
            raise
        except SwzcError as exc:
            results = [(self.program.sizes[0], HarnessResult(False, exc.message, None, failed=True))]
        mine = [_sized_attempt(formula, predicted, size or 0, result) for size, result in results]
        self.by_size += mine
        attempt = _combined(formula, predicted, mine, len(self.program.sizes), time.perf_counter() - start)
        self.attempts.append(attempt)
        return attempt

    def result(self) -> KernelBench:
        status, chosen, reason = conclude(self.attempts)
        return KernelBench(self.kernel.name, self.kernel.line, tuple(self.attempts), chosen and chosen.candidate, reason,
                           self.baseline_hit, self.profiler, status, chosen and chosen.formula, tuple(self.by_size),
                           self.baseline_dram)

    def close(self) -> None:
        """Remove the builds (the loop's folder)."""
        if self._folder is not None:
            self._folder.cleanup()
            self._folder, self._builder, self._shared, self._libs = None, None, None, {}


@dataclass(frozen=True)
class Size:
    """One size a loop over several measures a kernel at: the value its size names were bound to, and the kernel
    there (its launches evaluated at that size: swzc.model.sweep.kernel_at)."""

    size: int
    kernel: KernelInfo


class SizedBencher:
    """The acceptance loop of a kernel whose sizes are set at run time, over several sizes (smallest first).  Each
    candidate is built once and checked and timed at every size, on the harness of that size's launch; the
    original and the harnesses are built once for every candidate.  A candidate is accepted only where it is
    correct at every size, slower beyond the noise at none (swzc.verify.accept.Verdict.slower) and faster beyond
    it at the largest; the profiler runs at the largest size only.  The same interface as `Bencher`."""

    def __init__(self, ctx: FileContext, sizes: list[Size], rewrite: Callable[[Formula], bytes], hw: HardwareModel,
                 spec_file: str | None = None, rounds: int = 30, progress: Callable[[str], None] | None = None,
                 flags: tuple[str, ...] = (), every_size: bool = False) -> None:
        """`every_size`: run each candidate at every size even once it is slower at one (a study of the orders,
        bench/sizes); the loop stops there, as the candidate cannot be accepted."""
        if not sizes:
            raise SwzcError("no size to measure at")
        self.every_size = every_size
        src = ctx.src
        self.src, self.rewrite, self.hw, self.rounds, self.progress, self.sizes = src, rewrite, hw, rounds, progress, sizes
        self.kernel = sizes[-1].kernel
        self.ctx, self.spec = ctx, load_spec(spec_file, self.kernel.name)
        self.plans = [plan_launch(ctx, s.kernel, self.spec) for s in sizes]
        self.toolchain = toolchain_for(src.dialect, gpu_vendor())
        arch = (hw.arch if hw.vendor == "amd" else "native") if self.toolchain == "hipcc" else hw.nvcc_arch
        self.profiler = profiler_note(self.toolchain)
        self._folder = tempfile.TemporaryDirectory(prefix="swzc-bench-", ignore_cleanup_errors=True)
        self.builder = Builder(src.path, self.plans[-1].kernel, arch, str(Path(src.path).resolve().parent),
                               Path(self._folder.name), src.dialect, self.toolchain, flags)
        self._shared: tuple[Path, list[Path]] | None = None  # the original's library and a harness per size
        self._libs: dict[str, Path | SwzcError] = {}  # each candidate's library (or its build's error), by name
        self._failed: SwzcError | None = None  # why the original or a harness did not build
        self.attempts: list[Attempt] = []
        self.by_size: list[Attempt] = []
        self.baseline_hit: float | None = None
        self.baseline_dram: float | None = None
        self._built = 0
        self._resized = 0  # harness sets built again for other sizes (at_sizes)

    def close(self) -> None:
        self._folder.cleanup()

    def prebuild(self, formulas: Sequence[Formula], extra: Sequence[tuple[list[str], Path]] = ()) -> list[Path | SwzcError]:
        """Build these candidates (with the original and the harnesses) in one batch of parallel compiles before
        any is measured: the loop then waits for one build, not one per candidate.  A build that fails is
        reported when its candidate is measured.  `extra` compiles go into the same batch; returned is what each
        gave."""
        shared = [] if self._shared is not None else [self.builder.variant("a", self.src.data), *(
            self.builder.harness(f"{i}", plan, self.hw.flush_bytes) for i, plan in enumerate(self.plans))]
        self._built, rest = _build_batch(self.builder, self.rewrite, formulas, self._libs, self._built, [*shared, *extra])
        rest, extras = rest[:len(shared)], rest[len(shared):]
        failed = next((got for got in rest if isinstance(got, SwzcError)), None)
        if shared and failed is None:
            self._shared = (rest[0], rest[1:])  # type: ignore[arg-type]  # all paths
        self._failed = failed
        return extras

    def at_sizes(self, sizes: list[Size]) -> str:
        """Measure at these sizes from now on (a calibrated ranking moved the crossover they span): the harness of
        each size is built again; the original's and the candidates' libraries are kept.  Where a new size cannot be
        planned or its harness does not build, the loop stays at the sizes it had: returned is why ('' otherwise)."""
        if not sizes or [s.size for s in sizes] == [s.size for s in self.sizes]:
            return ""
        try:
            plans = [plan_launch(self.ctx, s.kernel, self.spec) for s in sizes]
        except SwzcError as exc:
            return f"measured at the sizes first chosen: {exc.message}"
        harnesses = None
        if self._shared is not None:
            self._resized += 1
            got = self.builder.compile_each([self.builder.harness(f"r{self._resized}.{i}", plan, self.hw.flush_bytes)
                                             for i, plan in enumerate(plans)])
            failed = next((g for g in got if isinstance(g, SwzcError)), None)
            if failed is not None:
                return f"measured at the sizes first chosen: {failed.message.splitlines()[0]}"
            harnesses = got
        if sizes[-1].size != self.sizes[-1].size:  # the original is profiled again where the candidates are
            self.baseline_hit = self.baseline_dram = None
        self.sizes, self.kernel, self.plans = sizes, sizes[-1].kernel, plans
        if self._shared is not None and harnesses is not None:
            self._shared = (self._shared[0], harnesses)  # type: ignore[assignment]  # all paths
        return ""

    def calibrate(self, formulas: Sequence[Formula], coalescer: bool) -> Observed:
        """As Bencher.calibrate, at the largest size (where the loop profiles)."""
        def original() -> tuple[Build, tuple[int, int, int]] | None:
            if self._shared is None:
                return None
            lib, harnesses = self._shared
            plan = self.plans[-1]
            return Build(self.builder.folder, harnesses[-1], lib, lib, self.toolchain, plan.kernel.partition("<")[0]), plan.grid

        return _calibrate(self, self.builder, formulas, coalescer, original)

    def measure(self, formula: Formula, predicted: float | None, position: str = "") -> Attempt:
        """Build one candidate (unless built before), then check and time it at each size, smallest first, until
        it is slower at one (it cannot be accepted then); the profiler runs at the largest size on an accepted
        candidate only.  The combined attempt is also kept for `result`."""
        name = formula.name
        if self.progress:
            self.progress(f"{self.kernel.name}: {name}" + (f" ({position})" if position else "") +
                          f" at {len(self.sizes)} sizes")
        start = time.perf_counter()
        if name not in self._libs or self._shared is None:
            self.prebuild([formula])
        lib = self._libs.get(name)
        if self._shared is None or not isinstance(lib, Path):
            failed = lib if isinstance(lib, SwzcError) else self._failed
            why = failed.message if failed is not None else "the benchmark did not build"
            attempt = Attempt.unmeasured(formula, predicted, "check failed", why, time.perf_counter() - start)
            self.attempts.append(attempt)
            return attempt
        candidate, (original, harnesses) = lib, self._shared
        mine: list[Attempt] = []
        for size, harness in zip(self.sizes, harnesses):
            run = Build(Path(self._folder.name), harness, original, candidate, self.toolchain, self.plans[0].kernel.partition("<")[0])
            try:
                result = run_harness(run, self.rounds)
            except SwzcError as exc:
                result = HarnessResult(False, exc.message, None, failed=True)
            attempt = _sized_attempt(formula, predicted, size.size, result)
            if size is self.sizes[-1] and attempt.accepted:  # profiled where it may be chosen
                if self.baseline_hit is None:
                    self.baseline_hit, self.baseline_dram = profile(run, "a")
                hit, dram = profile(run, "b")
                attempt = replace(attempt, l2_hit_rate=hit, dram_read_bytes=dram)
            mine.append(attempt)
            if attempt.speedup is None or attempt.status == "slower" and not self.every_size:
                break
        self.by_size += mine
        attempt = _combined(formula, predicted, mine, len(self.sizes), time.perf_counter() - start)
        self.attempts.append(attempt)
        return attempt

    def result(self) -> KernelBench:
        status, chosen, reason = conclude(self.attempts)
        return KernelBench(self.kernel.name, self.kernel.line, tuple(self.attempts), chosen and chosen.candidate, reason,
                           self.baseline_hit, self.profiler, status, chosen and chosen.formula, tuple(self.by_size),
                           self.baseline_dram)


def _calibrate(bencher: Bencher | SizedBencher, builder: Builder, formulas: Sequence[Formula], coalescer: bool,
               original: Callable[[], tuple[Build, tuple[int, int, int]] | None]) -> Observed:
    """Build the instrumented copy with the candidates, then run it and profile the original (`original`: its
    build, with the harness of the launch measured, and that launch's grid; None where they did not build).
    The original's L2 hit rate becomes the loop's baseline."""
    if bencher.toolchain != "nvcc":
        bencher.prebuild(formulas)
        return unmeasured("the timeline stamps read NVIDIA's global timer: on this GPU the model keeps its defaults")
    try:
        probe = builder.variant("t", instrumented(bencher.src.data, bencher.kernel))
    except SwzcError as exc:
        bencher.prebuild(formulas)
        return unmeasured(exc.message)
    (lib,) = bencher.prebuild(formulas, [probe])
    got = original()
    if got is None:
        return unmeasured("the original or the harness did not build")
    built, (gx, gy, gz) = got
    if isinstance(lib, SwzcError):
        spread, running, why = None, None, probe_failed(lib)
    else:
        spread, running, why = wave_spread(replace(built, b=lib), gx * gy * gz)
    counters = ncu_counters(built, "a", (NCU_HIT, NCU_DRAM, *((LRC_MERGED, LRC_DELIVERED) if coalescer else ())))
    seen = observed(spread, running, why, counters, coalescer, (counters or {}).get(NCU_HIT), (counters or {}).get(NCU_DRAM),
                    bencher.profiler)
    if seen.hit_rate is not None:
        bencher.baseline_hit, bencher.baseline_dram = seen.hit_rate, seen.dram_bytes
    return seen


def _failed(formula: Formula, predicted: float | None, result: HarnessResult, where: str = "") -> Attempt:
    """A candidate whose check did not run through ("check failed") or whose outputs differ."""
    status = "check failed" if result.failed or result.correct else "outputs differ"
    why = result.detail if status == "check failed" else f"outputs differ from the original: {result.detail}"
    return Attempt.unmeasured(formula, predicted, status, where + why, 0.0)


def _sized_attempt(formula: Formula, predicted: float | None, size: int, result: HarnessResult) -> Attempt:
    """One candidate at one size of several: a failed check, or the verdict with "slower" where it is."""
    if result.failed or result.timing is None:
        return replace(_failed(formula, predicted, result, f"at {size}: "), size=size)
    verdict = judge(result.timing, True)
    status = "accepted" if verdict.accepted else "slower" if verdict.slower else "not faster"
    return Attempt(formula.name, predicted, True, verdict.accepted, verdict.speedup, verdict.lower, verdict.noise,
                   verdict.baseline_ms, verdict.candidate_ms, None, None, verdict.reason, 0.0, status, formula, size, verdict.upper)


def _combined(formula: Formula, predicted: float | None, mine: list[Attempt], sizes: int, seconds: float) -> Attempt:
    """One candidate's attempts at every size as one: failed where any failed; accepted only where it is slower
    at no size and faster at the largest; its numbers are the largest size's."""
    failed = next((a for a in mine if a.speedup is None), None)
    if failed is not None:
        return replace(failed, size=None, seconds=seconds)
    said = ", ".join(f"{a.speedup:.3f}x at {a.size}" for a in mine)
    largest = mine[-1]
    slower = [a for a in mine if a.status == "slower"]
    if slower:
        accepted, why = False, (f"slower than the original beyond the noise at {', '.join(str(a.size) for a in slower)} "
                                f"({said})")
    elif largest.accepted:
        accepted, why = True, f"{said}: faster at the largest size ({largest.reason}) and slower at none"
    else:
        accepted, why = False, f"not faster at the largest size ({said}; {largest.reason})"
    return replace(largest, accepted=accepted, reason=why, seconds=seconds, size=None,
                   status="accepted" if accepted else "not faster")


def bench_kernel(ctx: FileContext, analysis: FileAnalysis, index: int, rewrite: Callable[[Formula], bytes],
                 candidates: list[tuple[Formula, float | None]], hw: HardwareModel, spec_file: str | None = None,
                 rounds: int = 30, progress: Callable[[str], None] | None = None,
                 program: ProgramBench | None = None, flags: tuple[str, ...] = ()) -> KernelBench:
    """Try each (formula, predicted hit rate) in order; keep the fastest accepted one."""
    bencher = Bencher(ctx, analysis, index, rewrite, hw, spec_file, rounds, progress, program, flags)
    try:
        for n, (formula, predicted) in enumerate(candidates):
            bencher.measure(formula, predicted, f"{n + 1}/{len(candidates)}")
    finally:
        bencher.close()
    return bencher.result()


def conclude(attempts: list[Attempt]) -> tuple[str, Attempt | None, str]:
    """(status, chosen attempt, reason) of a kernel from its attempts: the fastest accepted candidate; else
    "measured, not faster" when any candidate was timed; else "the check failed (...)" with the first
    failure's detail (how the harness ended and its first lines of output)."""
    accepted = [a for a in attempts if a.accepted]
    if accepted:
        best = max(accepted, key=lambda a: a.speedup or 0.0)
        return "accepted", best, f"measured {best.speedup:.3f}x faster ({best.reason})"
    measured = [a for a in attempts if a.speedup is not None]
    others = [f"{a.candidate}: {a.reason.splitlines()[0]}" for a in attempts if a.speedup is None]
    if measured:
        tried = [f"{a.candidate} {a.speedup:.3f}x" for a in measured]
        return "not faster", None, "measured, not faster: " + "; ".join(tried + others)
    if not attempts:
        return "not faster", None, "measured, not faster: no candidate to try"
    first = next(a for a in attempts if a.status in ("check failed", "outputs differ"))
    detail = "\n".join(first.reason.splitlines()[:REASON_LINES])
    rest = [line for line in others if not line.startswith(first.candidate + ":")]
    return "check failed", None, f"the check failed ({first.candidate}: {detail}" + "".join(f"; {r}" for r in rest) + ")"


def report_json(results: list[KernelBench], meta: dict) -> str:
    return json.dumps({**meta, "kernels": [{**_record(replace(r, attempts=(), by_size=())), "attempts": [_record(a) for a in r.attempts],
                                            "by_size": [_record(a) for a in r.by_size]} for r in results]}, indent=2)


def _record(measured: Attempt | KernelBench) -> dict:
    """A record as JSON: the order by its name (`candidate`, `chosen`), not its steps."""
    return {k: v for k, v in asdict(measured).items() if k not in ("formula", "attempts", "by_size")}


def size_table(result: KernelBench) -> list[list[str]]:
    """The size x order table of a loop over several sizes: a row per size, a column per candidate, each cell
    the measured speedup (marked where slower beyond the noise, or faster beyond it)."""
    sizes = sorted({a.size for a in result.by_size if a.size is not None})
    names = list(dict.fromkeys(a.candidate for a in result.by_size))
    cells = {(a.size, a.candidate): a for a in result.by_size}
    rows = [["size", *names]]
    for size in sizes:
        row = [str(size)]
        for name in names:
            a = cells.get((size, name))
            if a is None or a.speedup is None:
                row.append("–" if a is None else a.status)
            else:
                row.append(f"{a.speedup:.3f}x" + (" (faster)" if a.accepted else " (slower)" if a.status == "slower" else ""))
        rows.append(row)
    return rows


def report_markdown(results: list[KernelBench], meta: dict) -> str:
    lines = [f"# swzc benchmark report: {meta.get('file', '')} on {meta.get('device', '')}", ""]
    for r in results:
        lines += [f"## {r.kernel} (line {r.line}): {'accepted ' + r.chosen if r.chosen else 'declined'}", "", r.reason, "",
                  f"Profiler: {r.profiler or '–'}", ""]
        if r.baseline_l2_hit_rate is not None or r.baseline_dram_read_bytes is not None:
            hit, dram = r.baseline_l2_hit_rate, r.baseline_dram_read_bytes
            lines += ["The original, measured: " + ", ".join(filter(None, [
                f"{hit:.1f} % L2 hits" if hit is not None else "", f"{dram / 1e6:,.0f} MB read from DRAM" if dram is not None else ""])), ""]
        if r.calibration is not None:
            lines += [f"Calibration (one instrumented run of the original): {r.calibration.text()}", ""]
        if r.by_size:  # before the candidates' table, not inside it
            table = size_table(r)
            lines += ["Measured speedup over the original, by size:", "", "| " + " | ".join(table[0]) + " |",
                      "|" + "---|" * len(table[0]), *("| " + " | ".join(row) + " |" for row in table[1:]), ""]
        lines += ["| candidate | predicted L2 % | correct | speedup | lower bound | A/A noise | baseline ms | ms | measured L2 % | DRAM read MB | verdict |",
                  "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|"]
        for a in r.attempts:
            def f(v: float | None, fmt: str) -> str:
                return format(v, fmt) if v is not None else "–"
            lines.append(f"| {a.candidate} | {f(a.predicted_l2_hit_rate, '.1f')} | {'yes' if a.correct else 'no'} | "
                         f"{f(a.speedup, '.3f')} | {f(a.lower_bound, '.3f')} | {f(a.noise, '.2%')} | {f(a.baseline_ms, '.3f')} | "
                         f"{f(a.ms, '.3f')} | {f(a.l2_hit_rate, '.1f')} | {f(a.dram_read_bytes and a.dram_read_bytes / 1e6, ',.0f')} | "
                         f"{'accepted' if a.accepted else ' / '.join(a.reason.splitlines())} |")
        lines.append("")
    return "\n".join(lines)
