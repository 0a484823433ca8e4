"""Passes: each a pure function of (parsed file, analysis, proposal) returning edits or a refusal.

The registry `PASSES` holds every pass; each kernel is rewritten by the one pass that applies to it
(`for_kernel`), and `run` carries out a file's accepted proposals through the registry, then inserts the
swizzle functions they need once.  No pass writes files or prints.

- `block_index` (block_index.py): the kernel's block index, and its same-file helpers' reads, swizzled.
- `tile_loop` (tile_loop.py): a persistent kernel's tile loop swizzled inside the loop.

Which order each kernel gets, or why it gets none, is decided before any pass runs (block_swizzle.py).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

from swzc.analysis import tileloop
from swzc.analysis.records import FileAnalysis, KernelInfo
from swzc.formulas.swizzles import cxx_definitions
from swzc.frontend.source import SourceFile
from swzc.frontend.syntax import NAME_TYPES, _line, walk
from swzc.frontend.syntax import text as node_text
from swzc.passes.base import Decision, Names, Pass, Proposal, variable_name
from swzc.passes.block_index import BlockIndexPass
from swzc.passes.tile_loop import TileLoopPass
from swzc.rewrite.edits import Edit

PASSES: tuple[Pass, ...] = (TileLoopPass(), BlockIndexPass())

LIBRARY_HEADER = ("// swzc: block swizzles; each is a permutation (of the blocks, or of the tiles a tile loop walks), "
                  "proven before it was spliced in.\n")


def guarded(definition: str) -> str:
    """A definition inside an #ifndef of its own digest: headers swzc rewrote, each with the functions it needs,
    may be included into one file, which then compiles each function once."""
    macro = "SWZC_" + hashlib.sha256(definition.encode()).hexdigest()[:16].upper()
    return f"#ifndef {macro}\n#define {macro}\n{definition}#endif\n"


# Never set aside: what the swizzle functions take from the toolkit (CUDA and HIP define __device__ and
# __forceinline__ as macros), and the library's own guards, which a file swzc rewrote before defines (undefined,
# they would let that file's copy of a function and the new one both compile).
_KEPT = re.compile(r"__\w*|make_uint3|uint3|SWZC_[0-9A-F]{16}")


def shielded(library: str, macros: frozenset[str]) -> str:
    """The library, with any macro of the file's that would rename one of its words (a parameter `p` against
    `#define p 5`) set aside around it: `#pragma push_macro`, `#undef`, then `#pragma pop_macro` after it, so the
    file's macros mean what they meant before and after, and the library compiles as it was proven."""
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", re.sub(r"//[^\n]*", "", library)))
    names = sorted(name for name in words & macros if not _KEPT.fullmatch(name))
    if not names:
        return library
    return ("".join(f'#pragma push_macro("{name}")\n#undef {name}\n' for name in names) + library
            + "".join(f'#pragma pop_macro("{name}")\n' for name in reversed(names)))


# A function the library defines: its name, at the start of a definition's line.
_DEFINED = re.compile(r"^static __device__ __forceinline__ [^\n(]*?\b(swzc_\w+)\(", re.M)


def name_clash(analysis: FileAnalysis, src: SourceFile, proposal: Proposal) -> Decision | None:
    """A refusal where the file already declares, as something else, a name of a function the proposal's library
    would define (the rewritten file would not compile).  A file swzc rewrote before holds swzc's own guarded
    definitions; a name declared by the very definition the library would insert is not a clash (the guard
    compiles it once)."""
    text = src.data.replace(b"\r\n", b"\n")
    taken: list[str] = []
    for definition in cxx_definitions([(proposal.spec, proposal.adapter)]):
        names = [name for name in _DEFINED.findall(definition) if name in analysis.identifiers]
        if names and guarded(definition).encode() not in text:
            taken += [name for name in names if name not in taken]
    if not taken:
        return None
    first = {}  # each name's first place in the tree, as the analysis read its identifiers
    for node in walk(src.tree.root_node):
        if node.type in NAME_TYPES and node_text(node) in taken:
            first.setdefault(node_text(node), _line(node))
    where = ", ".join(f"{name} (line {first[name]})" if name in first else name for name in taken)
    named = "the name of a swizzle function" if len(taken) == 1 else "names of the swizzle functions"
    return Decision(proposal.kernel, "refused", f"the file already declares {where}: {named} "
                    f"{proposal.spec.name} needs, so the rewritten file would not compile")


def for_kernel(kernel: KernelInfo) -> Pass:
    """The registered pass that rewrites this kernel."""
    return next(p for p in PASSES if p.applies(kernel))


def run(analysis: FileAnalysis, accepted: Mapping[int, Proposal]) -> list[Edit]:
    """The edits for the accepted proposals (decisions already taken on the original tree), each kernel's from
    its pass; the last one inserts the swizzle functions they need (swzc.pipeline.driver reads a kernel's own
    fix that way)."""
    if not accepted:
        return []
    names = Names(variable_name(analysis), variable_name(analysis, tileloop.VARIABLE))
    edits: list[Edit] = []
    library_at: list[int] = []
    helpers_done: set[str] = set()
    for index, proposal in sorted(accepted.items()):
        kernel = analysis.kernels[index]
        own, helpers = for_kernel(kernel).edits(analysis, kernel, proposal, names)
        library_at.append(kernel.library_at)
        edits += own
        for name, helper_edits in helpers.items():
            if name in helpers_done:
                continue
            helpers_done.add(name)
            library_at.append(analysis.helpers[name].library_at)
            edits += helper_edits
    uses = [(p.spec, p.adapter) for p in accepted.values()]
    edits.append(Edit.insert(min(library_at), LIBRARY_HEADER + shielded("".join(map(guarded, cxx_definitions(uses))),
                                                                          analysis.macros) + "\n"))
    if analysis.newline != "\n":
        edits = [Edit(e.start, e.end, e.text.replace(b"\n", analysis.newline.encode())) for e in edits]
    return edits
