"""The records the analysis makes of a file, frozen: its kernels, their reads of the block index, launches,
tile decodes and tile loops, the hazards that refuse a kernel (and the table of hazard rules), and the helpers
they reach.  Every later stage reads these; none of them imports the analysis to do so."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from swzc.formulas.adapters import Adapter
from swzc.frontend.evaluate import Dim3, Value

Shape = tuple[int, int, int, int]  # gx, gy, gz, decode divisor (0 when there is none)


@dataclass(frozen=True)
class BlockUse:
    start: int
    end: int
    axis: str  # "x", "y", "z", or "" for the whole blockIdx
    spelling: str  # "cuda" (blockIdx.x) or "hip" (hipBlockIdx_x)
    function: str  # the kernel or helper it is in
    line: int
    text: str


@dataclass(frozen=True)
class Launch:
    kernel: str
    line: int
    api: str  # "<<<>>>", "hipLaunchKernelGGL", "cudaLaunchKernel", …
    grid_text: str
    block_text: str
    grid: Dim3 | None
    block: Dim3 | None
    divisor: int | None = None  # the kernel's tile decode divisor for this launch, where known
    bindings: tuple[tuple[str, Value], ...] = ()  # kernel (template) parameters this launch fixes
    type_args: tuple[tuple[str, str], ...] = ()  # template type parameters it fixes, e.g. ("T", "float")
    tiles: int | None = None  # the tile count T of the kernel's tile loop for this launch, where known
    # Where the grid or an integer argument is set at run time: the names whose values would fix them (a
    # parameter of the launching function, a variable read from argv, ...), for swzc.model.sweep to range over.
    sizes: tuple[str, ...] = ()  # `dims.x`: the dim3 `dims` (a sweep binds it to (s, s, 1))
    block_sizes: tuple[str, ...] = ()  # where the block is set at run time too: the names that set it
    # A launch in a file that includes this one, with its grid set at run time there: the grid it gives and the values
    # it gives the kernel's parameters with the names that set them bound to each size a sweep ranges over (`sizes`
    # are then the kernel's parameters that take the size)
    by_size: tuple[tuple[int, Dim3, tuple[tuple[str, Value], ...]], ...] = ()
    where: str = ""  # a launch in a file that includes this one: where it is ("runner.cu:12"); "" for the file's own

    @property
    def at(self) -> str:
        """Where it is, for a message: "line 12", or for a launch in a file that includes this one, "runner.cu:12"."""
        return self.where or f"line {self.line}"


@dataclass(frozen=True)
class LaunchFact:
    """A kernel's launch as the user gives it (--grid/--block), as a run of the program showed it, or as a file that
    includes the kernel's launches it."""

    kernel: str
    grid: Dim3 | None
    block: Dim3 | None
    args: tuple[tuple[str, Value], ...] = ()  # scalar arguments, by parameter name
    # "--grid" (must agree with the file), "observed" (what ran) or "included" (a launch in a file that includes the
    # kernel's header, at `where`: taken only where the kernel's own file launches it nowhere)
    origin: str = "--grid"
    count: int = 1  # launches seen with this configuration
    types: tuple[tuple[str, str], ...] = ()  # template type parameters the launch fixes ("included")
    where: str = ""  # "runner.cu:12": the launch an "included" fact is
    api: str = ""  # how an "included" launch launches ("cudaLaunchCooperativeKernel": the kernel is refused)
    # "included" with a grid set at run time (grid None): the kernel's parameters that take a sweep's size, and the
    # grid and parameter values at each size (Launch.by_size)
    sizes: tuple[str, ...] = ()
    by_size: tuple[tuple[int, Dim3, tuple[tuple[str, Value], ...]], ...] = ()


@dataclass(frozen=True)
class Decode:
    """``row = blockIdx.x / n; col = blockIdx.x % n``: the kernel walks a logical 2D tile grid."""

    divisor: str  # the source text of n
    splice_text: str | None  # n as it can be written where the swizzle is declared; None if it cannot
    lines: tuple[int, ...]


@dataclass(frozen=True)
class TileLoop:
    """A persistent or grid-stride loop over a linear tile index: ``for (t = blockIdx.x; t < T; t += gridDim.x)``
    (or its ``while`` form).  The swizzle permutes ``t`` over ``[0, T)`` inside the loop body instead of
    permuting blocks: every tile is still visited once, in a new order."""

    var: str  # the loop variable, e.g. "tile"
    line: int
    start: int  # byte range of the loop statement
    end: int
    body_start: int  # byte range of the loop body, whose reads of `var` the rewrite replaces
    body_end: int
    count: str  # T as written in the loop condition
    count_splice: str | None  # T as it can be written at the top of the body; None if it cannot
    decode: Decode | None  # ``t / n`` and ``t % n`` inside the body: a logical 2D tile grid
    reads: tuple[tuple[int, int], ...] = ()  # byte ranges of the body's reads of `var`, which the rewrite replaces
    index_type: str = "unsigned"  # the declared type of `var`, which the swizzled copy takes
    insert_at: int = 0  # where the swizzled tile index is declared: before the body's first statement
    indent: str = ""
    inline: bool = True  # the insertion point is mid-line
    braced: bool = True  # the body is a { } block (else the rewrite adds the braces)


@dataclass(frozen=True)
class HazardRule:
    """A reason to leave a kernel alone, registered once: its stable id goes into every JSON output and review
    finding of a refused kernel, its name into the Hazard records its detectors make."""

    id: str  # "SWZ101": stable, never reused
    name: str  # what Hazard.rule holds, e.g. "wait"
    summary: str
    reads_block_index: bool = False  # the kernel reads the block index where the rewrite cannot reach it: the
    #                                  kernel is refused even when no direct read of blockIdx is seen


# What makes a block reorder unsafe, one rule each.  A rule's fixture folder is fixtures/hazards/<name>/
# (tests/test_hazard_registry.py): a kernel its detector must refuse, and one it must not.
HAZARDS = (
    HazardRule("SWZ101", "wait", "waits on memory other blocks write"),
    HazardRule("SWZ102", "ticket", "an atomic's return value orders blocks"),
    HazardRule("SWZ103", "grid-sync", "grid-wide synchronisation"),
    HazardRule("SWZ104", "cluster", "thread-block clusters"),
    HazardRule("SWZ105", "cooperative-launch", "a cooperative launch"),
    HazardRule("SWZ106", "cg-block-index", "reads the block index through cooperative groups", True),
    HazardRule("SWZ107", "macro-block-index", "a macro whose body reads the block index", True),
    HazardRule("SWZ108", "intrinsic-block-index", "reads the block index through an intrinsic", True),
    HazardRule("SWZ109", "asm-block-index", "inline assembly reads the block index", True),
    HazardRule("SWZ110", "tile-loop", "a tile loop the swizzle could not reorder safely"),
    HazardRule("SWZ111", "side-effect", "an expression the splice would copy has a side effect"),
    HazardRule("SWZ112", "external-helper", "a rewritten helper other files could call"),
    HazardRule("SWZ113", "header-helper", "calls a function a header defines, or a member function or operator(), that "
               "reads the block index, or one defined in no file swzc reads", True),
    HazardRule("SWZ114", "syntax-error", "a part of the file tree-sitter cannot parse", True),
)
HAZARD_RULES = {rule.name: rule for rule in HAZARDS}
READS_BLOCK_INDEX = frozenset(rule.name for rule in HAZARDS if rule.reads_block_index)


@dataclass(frozen=True)
class Hazard:
    line: int
    reason: str
    rule: str = ""  # a rule's name, a key of HAZARD_RULES

    @property
    def rule_id(self) -> str:
        """The rule's stable id ("SWZ101"), or "" for a hazard of no registered rule."""
        found = HAZARD_RULES.get(self.rule)
        return found.id if found is not None else ""


@dataclass(frozen=True)
class Helper:
    name: str
    line: int
    uses: tuple[BlockUse, ...]
    library_at: int  # start of the top-level item that holds it


@dataclass(frozen=True)
class KernelInfo:
    name: str
    line: int
    uses: tuple[BlockUse, ...]  # reads of the block index in the kernel's own body
    helpers: tuple[str, ...]  # same-file helpers it reaches that read the block index
    launches: tuple[Launch, ...]
    dims: int  # highest block-index axis read, 1..3 (0 when none)
    decode: Decode | None
    hazards: tuple[Hazard, ...]
    notes: tuple[str, ...]
    insert_at: int | None  # where the swizzled index is declared: before the first statement reading it
    indent: str
    inline: bool  # the insertion point is mid-line
    library_at: int  # start of the top-level item that holds the kernel
    spelling: str  # the block-index spelling the kernel uses
    swizzled_by: str = ""  # the swzc swizzle function a kernel already calls (a file swzc rewrote before)
    tile_loop: TileLoop | None = None  # the tile loop a persistent kernel walks; the swizzle goes there
    ignored: int = 0  # the line of a `swzc: ignore` comment on the kernel: its author wants no swizzle (0: none)

    @property
    def reads_block_index(self) -> bool:
        return bool(self.uses or self.helpers)

    @property
    def adapter(self) -> Adapter:
        if self.tile_loop is not None:  # the swizzle permutes the loop's tiles, (T / n) x n or one row of T
            return Adapter.ONE_D if self.tile_loop.decode is not None else Adapter.LINEAR
        if self.decode is not None:
            return Adapter.ONE_D
        return Adapter.TWO_D if self.dims >= 2 else Adapter.LINEAR

    @property
    def shapes(self) -> tuple[Shape, ...] | None:
        """The concrete grids (and decode divisors) of its launches; None unless every launch is known.  For a
        tile loop, the tile spaces (T, 1, 1, n) instead: what its swizzle permutes."""
        if not self.launches:
            return None
        shapes = []
        decoded = self.tile_loop.decode if self.tile_loop is not None else self.decode
        for launch in self.launches:
            size = launch.grid if self.tile_loop is None else (launch.tiles, 1, 1) if launch.tiles is not None else None
            if size is None or (decoded is not None and launch.divisor is None):
                return None
            shapes.append((*size, launch.divisor or 0))
        return tuple(dict.fromkeys(shapes))


@dataclass(frozen=True)
class FileAnalysis:
    path: str
    dialect: str
    kernels: tuple[KernelInfo, ...]
    helpers: Mapping[str, Helper]
    callers: Mapping[str, tuple[str, ...]]  # helper -> kernels that reach it
    identifiers: frozenset[str] = field(default_factory=frozenset)
    newline: str = "\n"  # the file's line ending, for inserted lines
    notes: tuple[str, ...] = ()  # what the analysis could not follow in the file (headers, limits)
    # every macro name the file, the headers swzc reads from it and the command line define, on any path taken
    macros: frozenset[str] = field(default_factory=frozenset)
