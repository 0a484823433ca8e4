"""One file as the analysis sees it: built once per file and passed by argument to every stage that reads it.

A FileContext holds the parsed source and the build's include folders and defines, and keeps what is derived
from them, each computed the first time it is asked for: the preprocessor's run and the names in scope (per
set of --set bindings), the index of the file's function definitions, the footprint evaluator's facts about
the file, its kernels' footprints and rankings (kernels of the same shape share them), the file analysed again
at each size a sweep binds (swzc.model.sweep), and the compiler's resource report (per target and flags).  Nothing is kept between files: a result depends only on the file,
its build and the arguments asked with, never on which file or call came first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from swzc.frontend.build_context import CompileContext
from swzc.frontend import queries
from swzc.frontend.evaluate import Budget
from swzc.frontend.scope import prepare
from swzc.frontend.source import SourceFile
from swzc.frontend.syntax import function_name, functions

if TYPE_CHECKING:
    from tree_sitter import Node

    from swzc.frontend.evaluate import Scope, Value
    from swzc.frontend.preprocess import Preprocessed


def bindings_key(user: Mapping[str, Value | str] | None) -> tuple[tuple[str, str], ...]:
    """--set bindings as a key: the same names bound to the same values give the same key."""
    return tuple(sorted((k, repr(v)) for k, v in (user or {}).items()))


@dataclass(eq=False)
class FileContext:
    src: SourceFile
    build: CompileContext = field(default_factory=CompileContext)  # include folders and defines of the build
    _prepared: dict[tuple, tuple[Preprocessed, Scope]] = field(default_factory=dict, init=False, repr=False)
    _definitions: dict[tuple[str, int], Node] | None = field(default=None, init=False, repr=False)
    footprint_facts: Any = field(default=None, init=False, repr=False)  # swzc.model.footprint: the file's helpers and arrays
    footprints: dict[tuple, Any] = field(default_factory=dict, init=False, repr=False)  # swzc.model.rank: shared footprints
    rankings: dict[tuple, Any] = field(default_factory=dict, init=False, repr=False)  # swzc.model.rank: per kernel shape
    usage: dict[tuple, Any] = field(default_factory=dict, init=False, repr=False)  # swzc.model.residency: per target, flags
    sized: dict[tuple, Any] = field(default_factory=dict, init=False, repr=False)  # swzc.model.sweep: analyses per size
    staged: dict[int, bool] = field(default_factory=dict, init=False, repr=False)  # swzc.model.footprint: by kernel definition
    _matches: dict[str, list] = field(default_factory=dict, init=False, repr=False)

    def prepared(self, user: Mapping[str, Value | str] | None = None) -> tuple[Preprocessed, Scope]:
        """The file's directives run with the build's folders and defines, and the names the evaluator may
        resolve with `user`'s --set bindings (swzc.frontend.scope.prepare), made once per set of bindings."""
        key = bindings_key(user)
        found = self._prepared.get(key)
        if found is None:
            # the directives and the file's names do not depend on the bindings: run once, bound anew (with an
            # evaluation budget of its own) for each set
            base = self._prepared.get(())
            if base is None:
                base = self._prepared[()] = prepare(self.src, {}, self.build)
            pre, scope = base
            found = self._prepared[key] = (pre, replace(scope, user=dict(user or {}), budget=Budget()))
        return found

    def matches(self, name: str) -> list[dict[str, list[Node]]]:
        """Every match of query `name` over the whole file (swzc.frontend.queries), found once: the tree does not
        depend on the bindings, only what is evaluated of it."""
        found = self._matches.get(name)
        if found is None:
            found = self._matches[name] = queries.matches(self.src.dialect, name, self.src.tree.root_node)
        return found

    def scope(self, user: Mapping[str, Value | str] | None = None) -> Scope:
        return self.prepared(user)[1]

    def definitions(self) -> dict[tuple[str, int], Node]:
        """The file's function definitions by (name, line), indexed once."""
        if self._definitions is None:
            index: dict[tuple[str, int], Node] = {}
            for f, _ in functions(self.src.tree.root_node):
                index.setdefault((function_name(f), f.start_point.row + 1), f)
            self._definitions = index
        return self._definitions

    def reparsed(self, src: SourceFile) -> FileContext:
        """The same build's context for another text of the file (read again as the compiler would)."""
        return FileContext(src, self.build)
