"""What a tune run asks: its settings, the files it covers, and a job for each kernel on each card model.

A job is one kernel's whole search (analysis, candidates, builds, the measured loop at its sizes), as
`swzc rewrite --bench` runs it for that kernel alone.  Its key is a digest of everything that decides its
result: swzc's version, the file's bytes, the kernel, the card model it is measured on and the settings (the
build's include folders and defines, a launch spec's bytes).  A stored result under the same key is that
job done: a rerun does not measure it again.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from swzc import __version__
from swzc.core import workers
from swzc.core.errors import ExitCode, SwzcError
from swzc.core.inputs import read_regular
from swzc.frontend.build_context import database_files
from swzc.frontend.source import DEFAULT_MAX_BYTES
from swzc.passes import block_swizzle
from swzc.pipeline.driver import Options, analyze_file, load_hw, parse_bindings, parse_launch_facts
from swzc.target import hw
from swzc.pipeline.reading import SOURCE_SUFFIXES, build_context, input_limit, source_files
from swzc.verify.harness import ANY_CARD
from swzc.verify.program import CHECK_PATTERN, TIME_PATTERN, ProgramBench

KEY_LAYOUT = 1  # what a key is made of; raising it makes every stored result a miss


@dataclass(frozen=True)
class Settings:
    """The knobs of a tune run, as plain values: each worker, on this machine or another, builds the pipeline's
    options from them exactly as `rewrite --bench` builds them from its command line."""

    hw: str = "h200"
    bindings: tuple[str, ...] = ()
    include_dirs: tuple[str, ...] = ()
    defines: tuple[str, ...] = ()
    build_path: str | None = None
    grids: tuple[str, ...] = ()
    blocks: tuple[str, ...] = ()
    compile: bool = True
    compile_flags: tuple[str, ...] = ()
    max_iterations: int = 4
    rounds: int = 30
    launch_spec: str | None = None
    bench_cmd: str | None = None
    build_cmd: str | None = None
    bench_runs: int = 5
    bench_sizes: tuple[int, ...] = ()
    time_regex: str = TIME_PATTERN
    check_regex: str = CHECK_PATTERN
    max_bytes: int = DEFAULT_MAX_BYTES

    def options(self, file: str) -> Options:
        """The pipeline's options for one FILE of the run (its build's context found as for `rewrite`)."""
        context, _ = build_context(file, self.include_dirs, self.defines, self.build_path)
        program = None
        if self.bench_cmd:
            program = ProgramBench(self.bench_cmd, self.build_cmd, self.bench_runs, self.time_regex, self.check_regex,
                                   self.bench_sizes)
        return Options(hw=load_hw(self.hw), bindings=parse_bindings(list(self.bindings)), context=context,
                       facts=parse_launch_facts(self.grids, self.blocks), facts_elsewhere=True, compile=self.compile,
                       compile_flags=self.compile_flags, bench=True, max_iterations=self.max_iterations,
                       launch_spec=self.launch_spec, rounds=self.rounds, program=program)

    def as_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Settings:
        known = {f.name: f for f in fields(cls)}
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k in known})


@dataclass(frozen=True)
class Job:
    """One kernel's search on one card model."""

    file: str  # the file's absolute path, the same on every machine of the run
    digest: str  # SHA-256 of the file's bytes when the run was planned; a worker measures only those bytes
    kernel: str
    index: int  # the kernel's place among the file's kernels
    line: int
    card: str  # the card model that measures it, or ANY_CARD
    settings: Settings = field(default_factory=Settings)
    build: tuple[str, ...] = ()  # the include folders and defines the file's build gives, as flags
    key: str = ""

    def on(self, card: str) -> Job:
        """The same kernel's job on another card model, with its key."""
        job = replace(self, card=card)
        return replace(job, key=key(job))

    def as_dict(self) -> dict[str, Any]:
        return {**{k: getattr(self, k) for k in ("file", "digest", "kernel", "index", "line", "card", "key")},
                "settings": self.settings.as_dict(), "build": list(self.build)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Job:
        return cls(str(data["file"]), str(data["digest"]), str(data["kernel"]), int(data["index"]), int(data["line"]),
                   str(data["card"]), Settings.from_dict(data["settings"]), tuple(data["build"]), str(data["key"]))

    @property
    def name(self) -> str:
        """How messages name it: `file:line kernel`, with the card where one is asked for."""
        return f"{self.file}:{self.line} {self.kernel}" + ("" if self.card == ANY_CARD else f" on {self.card}")


@dataclass(frozen=True)
class Plan:
    jobs: tuple[Job, ...]
    failed: tuple[tuple[str, str, int], ...] = ()  # (file, message, exit code): files that could not be read
    files: tuple[str, ...] = ()  # every file the run covers, read or not

    def on(self, cards: Sequence[str], hw_by_card: bool = False) -> Plan:
        """The same kernels' jobs on these card models; with `hw_by_card`, each ranked with the hardware model its
        card is named after, where there is one (an H100's jobs with h100)."""
        kernels = list(dict.fromkeys(replace(job, card="", key="") for job in self.jobs))
        return replace(self, jobs=tuple((replace(job, settings=replace(job.settings, hw=hw.named_in(card) or job.settings.hw))
                                         if hw_by_card else job).on(card) for card in cards for job in kernels))


def plan(paths: Sequence[str], settings: Settings, cards: Sequence[str], jobs: int = 1) -> Plan:
    """A job for each kernel the loop would search, in each file of PATHS, on each card model: PATHS are files,
    folders (searched as `suggest` searches them) or compilation databases (their CUDA and HIP files, each with
    the database's flags)."""
    work: list[tuple[str, Settings]] = []
    for path in paths:
        if os.path.basename(path) == "compile_commands.json" and os.path.isfile(path):
            work += [(f, replace(settings, build_path=os.path.abspath(path))) for f in _database_sources(path)]
        else:
            work += [(f, settings) for f in source_files([path])]
    seen: dict[str, tuple[str, Settings]] = {}
    for file, its in work:  # each file once, with the settings it was first found with
        seen.setdefault(os.path.realpath(file), (os.path.abspath(file), its))
    work = list(seen.values())
    found: list[Job] = []
    failed: list[tuple[str, str, int]] = []
    for (file, its), got in zip(work, workers.in_order(_kernels, work, jobs)):
        if "error" in got:
            failed.append((file, got["error"], got["code"]))
            continue
        digest, context_flags, kernels = got["digest"], got["build"], got["kernels"]
        for card in cards or (ANY_CARD,):
            found += [Job(file, digest, name, index, line, "", its, tuple(context_flags)).on(card) for index, name, line in kernels]
    return Plan(tuple(found), tuple(failed), tuple(f for f, _ in work))


def _database_sources(database: str) -> list[str]:
    """The CUDA and HIP files a compilation database compiles that are the project's own: regular files (not links,
    not folders) with a CUDA or HIP suffix, inside the project that holds the database (its git work tree, else
    the folder above the database's, as a build folder's database names the sources beside it).  A database comes
    with the repository: it does not choose other files to build and run."""
    listed, notes = database_files(database)
    if notes:
        raise SwzcError(notes[0])
    folder = os.path.dirname(os.path.realpath(database))
    root = next((str(f) for f in (Path(folder), *Path(folder).parents) if (f / ".git").exists()), os.path.dirname(folder))
    kept = []
    for path in listed:
        real = os.path.realpath(path)
        if (path.endswith(SOURCE_SUFFIXES) and not os.path.islink(path) and os.path.isfile(path)
                and os.path.commonpath([root, real]) == root):
            kept.append(path)
    return kept


def _kernels(item: tuple[str, Settings]) -> dict[str, Any]:
    """The file's digest, its build's flags and (index, name, line) of each kernel the loop would search; or the
    error and its exit code where the file cannot be read: here or on a worker process."""
    file, settings = item
    try:
        with input_limit(settings.max_bytes):
            options = settings.options(file)
            ctx, analysis = analyze_file(file, options.bindings, options.context, options.facts, facts_elsewhere=True)
    except SwzcError as exc:
        return {"error": exc.message, "code": int(exc.code)}
    return {"digest": hashlib.sha256(ctx.src.data).hexdigest(), "build": options.context.compile_flags(),
            "kernels": [(i, k.name, k.line) for i, k in enumerate(analysis.kernels) if block_swizzle.refusal(analysis, i) is None]}


def key(job: Job) -> str:
    """The digest of what decides the job's result."""
    settings = job.settings.as_dict()
    settings.pop("build_path")  # what it gives is in `context_flags`
    settings.pop("max_bytes")
    spec = settings.pop("launch_spec")
    what = {"layout": KEY_LAYOUT, "swzc": __version__, "file": job.digest, "kernel": [job.kernel, job.index],
            "hw_model": repr(hw.load(job.settings.hw)),  # a model file's values, not only its name
            "card": job.card, "settings": settings, "build": list(job.build),
            "launch_spec": _digest_of(spec, job.settings.max_bytes) if spec else None}
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()


def _digest_of(path: str, limit: int) -> str:
    try:
        return hashlib.sha256(read_regular(path, limit)).hexdigest()
    except SwzcError as exc:
        raise SwzcError(f"--launch-spec {exc.message}", ExitCode.BAD_INPUT) from None
