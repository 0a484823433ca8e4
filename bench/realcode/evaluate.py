#!/usr/bin/env python3
"""Run the installed `swzc` over public CUDA/HIP code and count what it does with it.

    python3 bench/realcode/evaluate.py --out bench/results/realcode_baseline      # writes .json and .md

The corpus is bench/realcode/corpus.toml: repositories, the files to run on, and the include folders and
macros their own builds pass.  The files are copied out of a local git copy of each repository into a
scratch folder (--work, default under /tmp) and swzc runs there; the copies are hashed before and after,
and swzc writes only with -o into a separate folder, so no source is ever modified.

For every file: `swzc analyze FILE --json`, then `swzc rewrite FILE -o OUT --json --no-bench` (the
default choice, no --swizzle; with the compile check unless --no-compile), each bounded by --timeout and
each given the repository's include folders and macros as -I and -D, as its build would.
What is counted:
  1. files analysed without a whole-file syntax error;
  2. Python tracebacks and "internal error" messages (there must be none);
  3. rewritten outputs that do not compile where the original does, cross-checked on a sample by
     compiling original and output here with the same flags;
  4. rewrites the default rule chose without the L2 model (blind rewrites), and rewrites whose order the model
     predicts to move more bytes from DRAM than the kernel's own (there must be none of either);
  5. kernels refused only for grid-stride or persistent loops, by pattern, and those striding over
     blockIdx.z only;
  6. kernel statuses, and the wall time of analyze + rewrite per file;
  7. for each file rejected as a syntax error, the construct at the first ERROR/MISSING node (found here
     with tree-sitter directly, not from swzc's message), grouped, and where it is: in a kernel, a device
     helper, a launch site, or host code near or far from any kernel.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import fnmatch
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
NVCC_ARCH = "sm_90"  # what swzc's compile check passes for the default hardware model (h200)
FAR_LINES = 20  # host code at least this many lines from every kernel counts as "far from any kernel"
SOURCE_SUFFIXES = (".cu", ".cuh", ".hip")


# ---- the corpus ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Repo:
    name: str  # owner/name
    commit: str
    files: tuple[str, ...]
    exclude: tuple[str, ...]
    include: tuple[str, ...]
    defines: tuple[str, ...]

    @property
    def folder(self) -> str:
        return self.name.replace("/", "+")


@dataclass(frozen=True)
class Corpus:
    support: tuple[str, ...]
    max_support_bytes: int
    repos: tuple[Repo, ...]


@dataclass(frozen=True)
class CorpusFile:
    repo: str
    path: str  # inside the repository
    local: Path  # the scratch copy swzc runs on
    root: Path  # the scratch copy of the repository
    flags: tuple[str, ...]  # -I / -D, for the analysis and the compile check

    @property
    def name(self) -> str:
        return f"{self.repo}:{self.path}"


def load_corpus(path: Path) -> Corpus:
    doc = tomllib.loads(path.read_text())
    repos = tuple(Repo(r["name"], r.get("commit", ""), tuple(r["files"]), tuple(r.get("exclude", ())),
                       tuple(r.get("include", ())), tuple(r.get("defines", ()))) for r in doc["repo"])
    return Corpus(tuple(doc.get("support", ())), int(doc.get("max_support_bytes", 2_000_000)), repos)


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A path glob where `**/` spans folders and `*` stays inside one."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def matches(path: str, patterns: Iterable[str]) -> bool:
    return any(glob_regex(p).match(path) for p in patterns)


def git_dir(mirrors: Path, name: str) -> Path | None:
    owner_name = name.replace("/", "+")
    for candidate in (mirrors / owner_name / "repo", mirrors / owner_name, mirrors / name / ".git", mirrors / name):
        if (candidate / "HEAD").is_file() and (candidate / "objects").is_dir():
            return candidate
    return None


def _git(gdir: Path, *args: str, data: bytes | None = None) -> bytes:
    return subprocess.run(["git", "--git-dir", str(gdir), *args], input=data, capture_output=True, check=True).stdout


def extract(corpus: Corpus, mirrors: Path, dest: Path, log: list[str]) -> tuple[list[CorpusFile], list[dict]]:
    """Copy each repository's corpus files and their support files into dest/<owner+name>/."""
    files: list[CorpusFile] = []
    repos = []
    for repo in corpus.repos:
        gdir = git_dir(mirrors, repo.name)
        if gdir is None:
            log.append(f"{repo.name}: no local copy under {mirrors}; skipped")
            continue
        commit = repo.commit
        if not commit or subprocess.run(["git", "--git-dir", str(gdir), "cat-file", "-e", f"{commit}^{{commit}}"],
                                        capture_output=True).returncode != 0:
            head = _git(gdir, "rev-parse", "HEAD").decode().strip()
            if commit:
                log.append(f"{repo.name}: commit {commit} not in the local copy; using HEAD {head}")
            commit = head
        listing = _git(gdir, "ls-tree", "-r", "-l", "-z", commit).split(b"\0")
        chosen, support = [], []
        for entry in listing:
            if not entry:
                continue
            meta, _, name_b = entry.partition(b"\t")
            mode, kind, sha, size = meta.split()
            name = name_b.decode("utf-8", "surrogateescape")
            if kind != b"blob" or mode == b"120000":
                continue
            if matches(name, repo.files) and not matches(name, repo.exclude):
                chosen.append((name, sha.decode()))
            elif any(fnmatch.fnmatch(name.rsplit("/", 1)[-1], p) for p in corpus.support) and size != b"-" and int(size) <= corpus.max_support_bytes:
                support.append((name, sha.decode()))
        root = dest / repo.folder
        missing = _write_blobs(gdir, root, chosen + support)
        for name in sorted(missing):
            log.append(f"{repo.name}: {name} is not in the local copy (a large or absent object); skipped")
        flags = tuple([f"-I{root / inc}" for inc in repo.include] + [f"-D{d}" for d in repo.defines])
        kept = [CorpusFile(repo.name, name, root / name, root, flags) for name, _ in sorted(chosen) if name not in missing]
        files += kept
        repos.append({"name": repo.name, "commit": commit, "files": len(kept), "include": list(repo.include),
                      "defines": list(repo.defines)})
    return files, repos


def copy_local(folder: Path, dest: Path) -> tuple[list[CorpusFile], list[dict]]:
    """A local folder as the corpus: copied whole, every .cu/.cuh/.hip file in it run on."""
    root = dest / folder.resolve().name
    shutil.copytree(folder, root)
    files = [CorpusFile(folder.name, str(p.relative_to(root)), p, root, ()) for p in sorted(root.rglob("*"))
             if p.suffix in SOURCE_SUFFIXES and p.is_file()]
    return files, [{"name": folder.name, "commit": "local", "files": len(files), "include": [], "defines": []}]


def _write_blobs(gdir: Path, root: Path, entries: list[tuple[str, str]]) -> set[str]:
    """`git cat-file --batch` for all entries; the names whose object is missing."""
    if not entries:
        return set()
    out = _git(gdir, "cat-file", "--batch", data="".join(f"{sha}\n" for _, sha in entries).encode())
    missing, at = set(), 0
    for name, sha in entries:
        end = out.index(b"\n", at)
        header = out[at:end].split()
        at = end + 1
        if len(header) < 3 or header[1] == b"missing":
            missing.add(name)
            continue
        size = int(header[2])
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(out[at:at + size])
        at += size + 1
    return missing


# ---- running swzc ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    code: int | None  # None: timed out
    stdout: str
    stderr: str
    seconds: float

    @property
    def timed_out(self) -> bool:
        return self.code is None

    def json(self) -> dict | None:
        try:
            doc = json.loads(self.stdout)
        except ValueError:
            return None
        return doc if isinstance(doc, dict) else None


def run(argv: list[str], timeout: float, cwd: Path | None = None) -> Run:
    """Run a command in its own process group, so that a timeout also ends what it started (nvcc, the prover)."""
    env = dict(os.environ, SWZC_NO_GPU="1")
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=env, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        code = None
    return Run(code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), time.perf_counter() - start)


def crash_text(*runs: Run) -> str:
    """A Python traceback or swzc's "internal error" line, if any run printed one."""
    for r in runs:
        for stream in (r.stderr, r.stdout):
            if "Traceback (most recent call last)" in stream:
                return stream[stream.index("Traceback"):][-1500:]
            m = re.search(r"^.*internal error.*$", stream, re.M)
            if m:
                return m.group(0)[:1500]
        if r.code is not None and r.code not in (0, 1, 2, 3):
            return f"exit code {r.code}: {r.stderr[-500:]}"
    return ""


def is_syntax_rejection(r: Run) -> bool:
    return r.code == 2 and "syntax error" in r.stderr


# ---- where a syntax error is, and what construct it is ----------------------------------------------------


_PARSER = None


def _parser():
    global _PARSER
    if _PARSER is None:
        import tree_sitter_cuda
        from tree_sitter import Language, Parser
        _PARSER = Parser(Language(tree_sitter_cuda.language()))
    return _PARSER


@dataclass(frozen=True)
class ErrorSite:
    line: int  # 1-based
    col: int
    start: int  # byte offsets of the node
    end: int
    kind: str  # "ERROR", or "MISSING <token>"
    node_type: str  # the node's type; for a hidden MISSING token, the node that holds it


def first_error(data: bytes) -> ErrorSite | None:
    """The first ERROR or MISSING node in document order.  A MISSING token the grammar hides (the newline
    that ends a preprocessor line) is not among its parent's children; then the parent is returned with
    the token named from the tree's text, at the parent's end."""
    tree = _parser().parse(data)
    node = tree.root_node
    if not node.has_error:
        return None
    while True:
        if node.is_error or node.is_missing:
            kind = f"MISSING {node.type}" if node.is_missing else "ERROR"
            return ErrorSite(node.start_point[0] + 1, node.start_point[1] + 1, node.start_byte, node.end_byte, kind, node.type)
        bad = [c for c in node.children if c.has_error or c.is_missing or c.is_error]
        if not bad:
            hidden = re.search(r'\(MISSING "?([^")]*)"?\)', str(node))
            token = hidden.group(1) if hidden else "?"
            return ErrorSite(node.end_point[0] + 1, node.end_point[1] + 1, node.start_byte, node.end_byte,
                             f"MISSING {token}", node.type)
        node = bad[0]


def reported_location(stderr: str) -> tuple[int, int] | None:
    m = re.search(r":(\d+):(\d+): syntax error", stderr)
    return (int(m.group(1)), int(m.group(2))) if m else None


_CONDITIONAL = re.compile(rb"^[ \t]*#[ \t]*(if|ifdef|ifndef|elif|else|endif)\b", re.M)


def keep_branch(data: bytes, which: str) -> bytes:
    """The file with every #if chain that has an #else reduced to its "first" or "last" branch, and every
    conditional directive blanked (lines keep their numbers).  A lone #if keeps its body either way, so
    that include guards do not empty the file."""
    lines = data.split(b"\n")
    chains: list[list[int]] = []  # line numbers of #if, each #elif/#else, and #endif
    opened: list[list[int]] = []
    for i, line in enumerate(lines):
        m = _CONDITIONAL.match(line)
        if not m:
            continue
        word = m.group(1)
        if word in (b"if", b"ifdef", b"ifndef"):
            opened.append([i])
        elif word in (b"elif", b"else") and opened:
            opened[-1].append(i)
        elif word == b"endif" and opened:
            chains.append(opened.pop() + [i])
    drop: set[int] = set()
    for chain in chains:
        branches = list(zip(chain[:-1], chain[1:]))
        kept = branches[0] if which == "first" else branches[-1]
        drop.update(chain)
        for lo, hi in branches:
            if (lo, hi) != kept:
                drop.update(range(lo + 1, hi))
    return b"\n".join(b"" if i in drop else line for i, line in enumerate(lines))


def _conditional_cause(data: bytes, site: ErrorSite) -> str | None:
    """Whether preprocessor conditionals cause the error: reduce every #if chain to one branch and parse again."""
    fixed = []
    for which in ("first", "last"):
        again = first_error(keep_branch(data, which))
        fixed.append(again is None or again.line > site.line + 2)
    if all(fixed):
        return "#if/#else splitting a construct (each branch parses alone)"
    if any(fixed):
        return "#if branch that does not parse (one branch alone parses)"
    return None


_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("__align__(n)", re.compile(r"__align__\s*\(")),
    ("CUDART_CB", re.compile(r"\bCUDART_CB\b")),
    ("typeid", re.compile(r"\btypeid\s*\(")),
    ("asm operand lists", re.compile(r"\basm\b[^;]*:")),
    ("new T*[n]", re.compile(r"\bnew\s+[\w:<>, ]*\*+\s*\[")),
    ("explicit template instantiation", re.compile(r"^\s*(extern\s+)?template\s+(?!<)", re.M)),
    ("extended __device__ lambda", re.compile(r"\]\s*(\([^)]*\)\s*)?(__host__\s*)?__device__")),
    ("template arguments before <<<", re.compile(r"\w\s*<[^<>;()]*>\s*<<<")),
)


# A line that is one upper-case name (PERF_BEGIN) or one call (check("...")) with no ';' after it; not a
# keyword or an attribute that a statement or declaration follows.
_STATEMENT_MACRO = re.compile(
    r"\s*(?:[A-Z_][A-Z0-9_]*|(?!(?:if|for|while|switch|return|sizeof|defined|__launch_bounds__|__attribute__|alignas|"
    r"__align__|__declspec)\b)[A-Za-z_]\w*\s*\(.*\))\s*(//.*)?")


def _chain_start(lines: list[str], line_no: int) -> int:
    """The #if that opens the chain a directive line belongs to (the line itself for an #if)."""
    depth = 0
    for i in range(line_no - 1, -1, -1):
        m = _CONDITIONAL.match(lines[i].encode())
        if not m:
            continue
        word = m.group(1)
        if word == b"endif" and i != line_no - 1:
            depth += 1
        elif word in (b"if", b"ifdef", b"ifndef"):
            if depth == 0:
                return i + 1
            depth -= 1
    return line_no


def categorise(data: bytes, site: ErrorSite) -> tuple[str, int]:
    """A name for the construct at the first ERROR/MISSING node, and the line it is on.  An ERROR node can
    span a whole function; when #if branches cause it, the construct's line is the first conditional
    directive inside the node (or the nearest one before a MISSING node)."""
    text = data.decode("utf-8", "replace")
    lines = text.split("\n")
    line = lines[site.line - 1] if site.line - 1 < len(lines) else ""
    if site.kind.startswith("MISSING") and site.node_type == "preproc_include":
        if data[site.end:].strip(b" \t") == b"" or site.end >= len(data):
            return "no final newline after #include", site.line
        if data[site.end:site.end + 1] in (b" ", b"\t"):
            return "blank after an #include path", site.line
        return "#include line", site.line
    previous = next((i + 1 for i in range(site.line - 2, -1, -1) if lines[i].strip()), 0)
    for at in (previous, site.line):
        if at and _STATEMENT_MACRO.fullmatch(lines[at - 1]) and not _CONDITIONAL.match(lines[at - 1].encode()) and (
                at == previous or site.kind == "MISSING ;"):
            return "macro used as a statement without ';'", at
    node_text = data[site.start:min(site.end, site.start + 600)].decode("utf-8", "replace")
    for name, rx in _RULES:
        if rx.search(line) or rx.search(node_text.split("\n", 1)[0]):
            return name, site.line
        for offset in (-1, 1):
            if 0 <= site.line - 1 + offset < len(lines) and rx.search(lines[site.line - 1 + offset]):
                return name, site.line + offset
    cause = _conditional_cause(data, site)
    if cause:
        last = data.count(b"\n", 0, site.end) + 1 if site.kind == "ERROR" else site.line
        directives = [i + 1 for i, text_line in enumerate(lines) if _CONDITIONAL.match(text_line.encode())]
        inside = [d for d in directives if site.line <= d <= last]
        nearest = min(directives, key=lambda d: (abs(d - site.line), d < site.line), default=site.line)
        return cause, _chain_start(lines, inside[0] if inside else nearest)
    if re.fullmatch(r"\s*[A-Z_][A-Z0-9_]*\s*\(.*\)\s*;?\s*", line):
        return "macro invocation at file scope", site.line
    return f"other: {line.strip()[:60]}", site.line


@dataclass(frozen=True)
class Item:
    kind: str  # "kernel", "device", "host", "type", "scope" (namespace, extern "C") or "data" (an initialiser)
    header_start: int
    open: int
    close: int
    first_line: int
    last_line: int


def _blank(text: str) -> str:
    """Comments, string and character literals and preprocessor lines replaced by spaces (newlines kept);
    #if chains reduced to their first branch."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
        elif c == "#" and text[text.rfind("\n", 0, i) + 1:i].strip() == "":
            j = i
            while j < n:
                k = text.find("\n", j)
                k = n if k < 0 else k
                if text[j:k].rstrip().endswith("\\"):
                    j = k + 1
                    continue
                j = k
                break
        else:
            i += 1
            continue
        for k in range(i, j):
            if out[k] != "\n":
                out[k] = " "
        i = j
    cleaned = "".join(out)
    reduced = keep_branch(text.encode("utf-8", "surrogateescape"), "first").decode("utf-8", "surrogateescape")
    # blank the lines the reduction dropped (their line count is the same)
    dropped = [a.strip() != "" and b.strip() == "" for a, b in zip(text.split("\n"), reduced.split("\n"))]
    result = cleaned.split("\n")
    return "\n".join(" " * len(line) if drop else line for line, drop in zip(result, dropped))


_TYPE_HEAD = re.compile(r"\b(struct|class|union|enum)\b")
_ALIGN = re.compile(r"\b(__align__|alignas|__declspec|__attribute__)\s*\(\(?[^()]*\)?\)")
_SCOPE_HEAD = re.compile(r"^\s*(namespace\b|extern\s+\"C\"|extern\s*$)")
_CONTROL = re.compile(r"^\s*(if|for|while|switch|do|else|try|catch)\b")


def items(text: str) -> list[Item]:
    """Functions (by kind), types and namespaces of the file, found by braces in the blanked text."""
    clean = _blank(text)
    found: list[Item] = []
    stack: list[tuple[int, int, str]] = []  # (header start, open brace, kind)
    boundary = 0
    for i, c in enumerate(clean):
        if c == "{":
            header = clean[boundary:i]
            inside_function = any(k in ("kernel", "device", "host", "block") for _, _, k in stack)
            squashed = _ALIGN.sub(" ", " ".join(header.split()))
            if inside_function:
                kind = "block"
            elif _SCOPE_HEAD.match(squashed) or squashed.startswith('extern "C"'):
                kind = "scope"
            elif _TYPE_HEAD.search(squashed) and "(" not in squashed:
                kind = "type"
            elif "(" in squashed and not _CONTROL.match(squashed) and "=" not in squashed.split("(")[0]:
                kind = "kernel" if "__global__" in squashed else ("device" if "__device__" in squashed else "host")
            else:
                kind = "data"  # an initialiser or an unrecognised brace at file scope
            start = boundary + (len(header) - len(header.lstrip()))
            stack.append((start, i, kind))
            boundary = i + 1
        elif c == "}":
            if stack:
                start, opened, kind = stack.pop()
                if kind != "block":
                    found.append(Item(kind, start, opened, i, text.count("\n", 0, start) + 1, text.count("\n", 0, i) + 1))
            boundary = i + 1
        elif c == ";":
            boundary = i + 1
    return found


def where(data: bytes, line_no: int) -> tuple[str, int | None]:
    """Where a line is (kernel, device helper, launch site, host code, file scope) and how many lines it is
    from the nearest __global__ kernel (None: the file has none)."""
    text = data.decode("utf-8", "surrogateescape")
    lines = text.split("\n")
    while line_no < len(lines) and (_CONDITIONAL.match(lines[line_no - 1].encode()) or not lines[line_no - 1].strip()):
        line_no += 1  # a directive belongs where the code it guards is
    line = lines[line_no - 1] if line_no - 1 < len(lines) else ""
    at = sum(len(x) + 1 for x in lines[:line_no - 1]) + len(line) - len(line.lstrip())  # first non-blank
    found = items(text)
    kernels = [it for it in found if it.kind == "kernel"]
    distance = min((0 if k.first_line <= line_no <= k.last_line else min(abs(line_no - k.first_line), abs(line_no - k.last_line))
                    for k in kernels), default=None)
    functions = [it for it in found if it.kind in ("kernel", "device", "host") and it.header_start <= at <= it.close]
    if functions:
        inner = max(functions, key=lambda it: it.header_start)
        part = "header" if at < inner.open else "body"
        if inner.kind == "kernel":
            return f"in a __global__ kernel ({part})", distance
        if inner.kind == "device":
            return f"in a __device__ helper ({part})", distance
        statement = re.split(r"[;{}]", "\n".join(lines[max(line_no - 12, 0):line_no]))[-1]
        if re.search(r"<<<|LaunchKernel|hipLaunchKernelGGL", statement):
            return "at a launch site", distance
        if distance is None:
            return "in host code (no kernel in the file)", distance
        if distance < FAR_LINES:
            return "in host code near a kernel", distance
        return "in host code far from any kernel", distance
    if any(it.kind == "type" and it.header_start <= at <= it.close for it in found):
        return "at file scope (a type declaration)", distance
    return "at file scope", distance


# ---- grid-stride refusals ---------------------------------------------------------------------------------


_GRID = re.compile(r"\bgridDim\s*\.\s*([xyz])\b|\bhipGridDim_([xyz])\b")


def is_grid_stride(reason: str) -> bool:
    return bool(re.search(r"grid-stride|persistent", reason))


def _for_increment(line: str) -> str:
    """The increment of a `for (init; cond; increment)` header on this line, or ''."""
    m = re.search(r"\bfor\s*\(", line)
    if not m:
        return ""
    depth, parts, start = 1, [], m.end()
    for i in range(m.end(), len(line)):
        c = line[i]
        depth += (c == "(") - (c == ")")
        if c == ";" and depth == 1:
            parts.append(line[start:i])
            start = i + 1
        if depth == 0:
            parts.append(line[start:i])
            break
    return parts[2] if len(parts) == 3 else ""


def stride_pattern(lines: list[str], hazard_line: int) -> tuple[str, set[str]]:
    """How a grid-stride hazard line steps, and along which grid axes.  A stride kept in a local
    (`gridSize = blockSize * 2 * gridDim.x`) is followed back to its definition (the hazard may sit in a
    helper above the kernel, so the search looks back through the file).  A line whose target is not a loop
    variable (no loop nearby tests it) is no loop step at all: an accumulation through a value swzc
    derived from gridDim."""
    line = lines[hazard_line - 1] if hazard_line - 1 < len(lines) else ""
    step = re.search(r"([A-Za-z_][\w.\[\]>-]*)\s*(\+=|-=|=)\s*([^;]*)", _for_increment(line) or line)
    target, stride = (step.group(1), step.group(3)) if step else ("", line)
    expr = stride
    for earlier in reversed(lines[max(hazard_line - 120, 0):hazard_line - 1]):
        if _GRID.search(expr):
            break
        for name in set(re.findall(r"[A-Za-z_]\w*", expr)):
            m = re.search(rf"\b{re.escape(name)}\s*=(?!=)\s*([^;]*)", earlier)
            if m:  # the nearest definition above; a chain of locals is followed one line at a time
                expr = re.sub(rf"\b{re.escape(name)}\b", lambda _: f"({m.group(1)})", expr)
    axes = {a or b for a, b in _GRID.findall(expr)}
    window = "\n".join(lines[max(hazard_line - 40, 0):hazard_line])
    loop_var = re.fullmatch(r"[A-Za-z_]\w*", target) is not None and (
        re.search(r"\bfor\b", line) is not None
        or re.search(rf"\b(while|for)\s*\([^)]*\b{re.escape(target)}\b", window) is not None)
    if not loop_var:
        return "no loop step: an accumulation through a value derived from gridDim (a false grid-stride)", set()
    bare = re.sub(r"[\s()]", "", re.sub(r"\(\s*(unsigned|int|size_t|long|unsigned\s+int)\s*\)", "", expr))
    if re.fullmatch(r"gridDim\.[xyz]|hipGridDim_[xyz]", bare):
        kind = "block stride, t += gridDim (persistent)"
    else:
        kind = "grid stride, i += gridDim * size"
    return f"{kind} over {'+'.join(sorted(axes)) or '?'}", axes


# ---- one file ---------------------------------------------------------------------------------------------


def sha256(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def reason_hash(reason: str, root: Path) -> str:
    """The SHA-256 of a kernel's reason with the scratch folder's path taken out: the reason quotes the file,
    so the published results carry its hash only, which still tells a changed reason from the same one."""
    return hashlib.sha256(reason.replace(str(root.parent) + "/", "").encode("utf-8", "surrogateescape")).hexdigest()


def evaluate_file(f: CorpusFile, swzc: str, out_root: Path, timeout: float, compile_check: bool) -> dict:
    """Both swzc calls run in the scratch copy of the file's repository, so that neither a configuration
    found from the working folder ([tool.swzc] in a pyproject.toml) nor where --work is changes what swzc
    does, and the patch names the file by its path in its repository."""
    data = f.local.read_bytes()
    out = out_root / f.repo.replace("/", "+") / f.path
    patch = out.with_name(out.name + ".patch")
    out.parent.mkdir(parents=True, exist_ok=True)
    no_compile = [] if compile_check else ["--no-compile"]
    analyze = run([swzc, "analyze", str(f.local), "--json", *f.flags, *no_compile], timeout, cwd=f.root)
    args = [swzc, "rewrite", str(f.local), "-o", str(out), "--patch", str(patch), "--json", "--no-bench", *f.flags]
    rewrite = run(args + no_compile, timeout, cwd=f.root)
    record: dict = {
        "file": f.name,
        "bytes": len(data),
        "lines": data.count(b"\n") + 1,
        "analyze": {"exit": analyze.code, "seconds": round(analyze.seconds, 3)},
        "rewrite": {"exit": rewrite.code, "seconds": round(rewrite.seconds, 3)},
        "seconds": round(analyze.seconds + rewrite.seconds, 3),
        "timed_out": analyze.timed_out or rewrite.timed_out,
        "crash": crash_text(analyze, rewrite),
        "syntax_error": None,
        "error": "",
        "kernels": [],
        "compile": None,
        "changed": False,
        "output": str(out) if out.exists() else "",
        "output_sha256": sha256(out),  # the file -o wrote (None: none written)
        "patch_sha256": sha256(patch),  # the patch --patch wrote (None: none written)
    }
    if is_syntax_rejection(analyze):
        site = first_error(data)
        reported = reported_location(analyze.stderr)
        entry = {"reported": list(reported) if reported else None, "message": analyze.stderr.strip()[:300]}
        if site is not None:
            category, construct_line = categorise(data, site)
            place, distance = where(data, construct_line)
            lines = data.decode("utf-8", "replace").split("\n")
            entry.update({"line": site.line, "col": site.col, "node": site.kind, "category": category,
                          "construct_line": construct_line, "where": place, "lines_from_kernel": distance,
                          "text": (lines[construct_line - 1] if construct_line - 1 < len(lines) else "").strip()[:120],
                          "reported_elsewhere": reported is not None and reported[0] != site.line})
        record["syntax_error"] = entry
        return record
    if analyze.code not in (0, 1) and not record["crash"] and not record["timed_out"]:
        record["error"] = (analyze.stderr or rewrite.stderr).strip()[:500]
    doc_a = analyze.json() or {}
    doc_r = rewrite.json() or {}
    if rewrite.code == 3 and "does not compile" in rewrite.stderr:
        command = re.search(r"command: (.*)", rewrite.stderr)
        record["compile"] = {"status": "failed", "command": command.group(1) if command else "",
                             "detail": rewrite.stderr.strip()[-800:]}
    elif doc_r.get("compile"):
        c = doc_r["compile"]
        record["compile"] = {"status": c["status"], "command": c.get("command", ""), "detail": c.get("detail", "")[-400:]}
    elif rewrite.code not in (0, 1) and not record["crash"] and not record["error"] and not record["timed_out"]:
        record["error"] = rewrite.stderr.strip()[:500]
    record["changed"] = bool(doc_r.get("changed"))
    lines = data.decode("utf-8", "replace").split("\n")
    by_name = {(k["name"], k["line"]): k for k in doc_r.get("kernels", [])}
    seen = {(k["name"], k["line"]) for k in doc_a.get("kernels", [])}
    only_rewritten = [{"name": k["name"], "line": k["line"], "status": "not in analyze"} for k in doc_r.get("kernels", [])
                      if (k["name"], k["line"]) not in seen]  # none expected; kept so that no kernel goes uncounted
    for k in doc_a.get("kernels", []) + only_rewritten:
        r = by_name.get((k["name"], k["line"]), {})
        hazards = k.get("hazards", [])
        stride_only = k["status"] == "refused" and bool(hazards) and all(is_grid_stride(h["reason"]) for h in hazards)
        patterns = [stride_pattern(lines, h["line"]) for h in hazards] if stride_only else []
        record["kernels"].append({
            "name": k["name"], "line": k["line"],
            "analyze_status": k["status"], "status": r.get("status", "not written" if rewrite.code == 3 else "?"),
            "reason": r.get("reason", k.get("reason", "")),
            "reason_sha256": reason_hash(r.get("reason", k.get("reason", "")), f.root),
            "swizzle": r.get("swizzle"), "adapter": k.get("adapter", r.get("adapter")), "rewrite_adapter": r.get("adapter"),
            "chosen_by": r.get("chosen_by", ""),
            "ranked": bool(r.get("candidates") or k.get("candidates")), "model": k.get("model", ""),
            "launches": len(k.get("launches", [])),
            "grid_known": any(la.get("grid_value") for la in k.get("launches", [])),
            "blind": is_blind(r),
            "dram_raised": raises_dram(r),
            "why": "",
            "grid_stride_only": stride_only,
            "stride_patterns": sorted({p for p, _ in patterns}),
            "z_only": stride_only and all(axes == {"z"} for _, axes in patterns),
            "hazards": [h["reason"] for h in hazards],
        })
        record["kernels"][-1]["why"] = reason_kind(record["kernels"][-1])
    return record


def raises_dram(kernel: dict) -> bool:
    """A rewrite whose order the model predicts to move more bytes from DRAM than the kernel's own (at the
    largest size, for a kernel ranked over sizes): there must be none."""
    if kernel.get("status") != "rewritten" or not kernel.get("swizzle"):
        return False
    dram = {c["name"]: c.get("predicted_dram_bytes") for c in kernel.get("candidates") or []}
    chosen, own = dram.get(str(kernel["swizzle"]).split("@")[0].removesuffix("/int")), dram.get("identity")
    return chosen is not None and own is not None and chosen > own


def is_blind(kernel: dict) -> bool:
    """A rewrite the default rule chose without the L2 model: said so in `chosen_by`, or no ranking at all."""
    if kernel.get("status") != "rewritten":
        return False
    chosen_by = kernel.get("chosen_by", "")
    return chosen_by.startswith("not ranked") or "default rule" in chosen_by or not kernel.get("candidates")


# ---- the compile cross-check ------------------------------------------------------------------------------


_HIP_HINT = re.compile(rb"#\s*include\s*[<\"]hip/|\bhipLaunchKernelGGL\b|\bhipBlockIdx_[xyz]\b|\bhipMalloc\b")


def hip_compat_dir() -> str | None:
    """swzc's HIP-to-CUDA header folder, as its compile check passes it to nvcc for a HIP file."""
    import importlib.util
    spec = importlib.util.find_spec("swzc")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(list(spec.submodule_search_locations)[0]) / "compat"
    return str(folder) if folder.is_dir() else None


def nvcc(path: Path, include_dir: Path, flags: Iterable[str], timeout: float, hip: bool = False) -> tuple[int | None, str]:
    """Compile as swzc's check does: nvcc -std=c++17 -arch=sm_90 -I <the original's folder> [-x cu -I <compat>]
    FLAGS -c; a HIP file goes through swzc's compatibility header."""
    with tempfile.TemporaryDirectory(prefix="realcode-cc-") as tmp:
        cmd = ["nvcc", "-std=c++17", f"-arch={NVCC_ARCH}", "-I", str(include_dir)]
        compat = hip_compat_dir() if hip else None
        if compat:
            cmd += ["-x", "cu", "-I", compat]
        elif path.suffix != ".cu":
            cmd += ["-x", "cu"]
        cmd += list(flags)
        cmd += ["-c", str(path), "-o", str(Path(tmp) / "out.o")]
        r = run(cmd, timeout, cwd=include_dir)
    return r.code, shlex.join(cmd)


def cross_check(records: list[dict], files: dict[str, CorpusFile], count: int, timeout: float, jobs: int) -> list[dict]:
    """Compile original and output here for every failure swzc reported and a sample of the other verdicts."""
    changed = [r for r in records if r["compile"]]
    order = sorted(changed, key=lambda r: hashlib.sha1(r["file"].encode()).hexdigest())
    failed = [r for r in order if r["compile"]["status"] == "failed"]
    by_status: dict[str, list[dict]] = {}
    for r in order:
        if r["compile"]["status"] != "failed":
            by_status.setdefault(r["compile"]["status"], []).append(r)
    sample = list(failed)
    while len(sample) < count and any(by_status.values()):
        for status in sorted(by_status):
            if by_status[status] and len(sample) < count:
                sample.append(by_status[status].pop(0))

    def check(r: dict) -> dict:
        f = files[r["file"]]
        status = r["compile"]["status"]
        hip = f.local.suffix == ".hip" or bool(_HIP_HINT.search(f.local.read_bytes()))
        original, command = nvcc(f.local, f.local.parent, f.flags, timeout, hip)
        output_path = Path(r["output"]) if r["output"] else None
        if status == "failed":  # nothing written: swzc keeps the failing file next to its command
            kept = shlex.split(r["compile"]["command"]) if r["compile"]["command"] else []
            output_path = Path(kept[kept.index("-c") + 1]) if "-c" in kept else None
        output = nvcc(output_path, f.local.parent, f.flags, timeout, hip)[0] if output_path and output_path.exists() else None
        agrees = {
            "ok": output == 0,
            "skipped": original not in (0,),
            "failed": original == 0 and output not in (0, None),
        }.get(status, False)
        return {"file": r["file"], "swzc": status, "original_compiles": original == 0,
                "output_compiles": None if output is None else output == 0, "agrees": agrees, "command": command}

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(check, sample))


# ---- the summary ------------------------------------------------------------------------------------------


def _refusal_rule(reason: str) -> str:
    """The hazard kinds in a refusal reason (one name per kind, joined), for counting."""
    rules = (("grid-stride or persistent loop", r"grid-stride|persistent loop"), ("atomic ticket", r"atomic ticket"),
             ("waits on memory other blocks write", r"waits on memory"),
             ("grid-wide sync / cooperative launch", r"grid-wide|multi-grid|launched cooperatively|grid synchronisation"),
             ("thread-block clusters", r"cluster"), ("block index read in a macro", r"uses macro"),
             ("block index through cooperative groups / intrinsic / asm", r"block index through|assembly reads"),
             ("shares a helper", r"shares helper"), ("decode divisor not visible", r"tile count|divisor"))
    names = sorted({name for name, rx in rules for part in reason.split("; ") if re.search(rx, part)})
    return " + ".join(names) or "other"


def _decline_reason(reason: str) -> str:
    for name, rx in (("1D grid, nothing to regroup", r"1D grid with no tile decode"),
                     ("no candidate gains 5 points", r"no candidate raises"),
                     ("identity on the grid", r"leaves every block in place|identity: nothing"),
                     ("needs a tile grid", r"needs a tile grid"), ("not selected", r"not selected")):
        if re.search(rx, reason):
            return name
    return "other"


def _model_reason(kernel: dict) -> str:
    reason = kernel["model"]
    if reason.startswith("no launch in this file fixes the grid"):
        if not kernel["launches"]:
            return "no launch in the file fixes the grid: not launched in this file"
        return "no launch in the file fixes the grid: launched here, grid not evaluated"
    if reason.startswith("no read the model can follow"):
        return "no read the model can follow"
    return "other"


def reason_kind(kernel: dict) -> str:
    """Why the kernel has its status, as a category (the full reason quotes the file's source)."""
    status, reason = kernel["status"], kernel["reason"]
    if status == "rewritten":
        return f"not ranked: {_model_reason(kernel)}" if kernel["blind"] and kernel["model"] else \
            ("default rule" if kernel["blind"] else "ranked by the L2 model")
    if status == "refused":
        return _refusal_rule(reason)
    if status == "declined":
        return _decline_reason(reason)
    if status == "untouched":
        return "already swizzled" if "already swizzled" in reason else "does not read the block index"
    return status


def summarise(records: list[dict], checks: list[dict], meta: dict) -> dict:
    n = len(records)
    rejected = [r for r in records if r["syntax_error"]]
    parsed = n - len(rejected)
    kernels = [dict(k, file=r["file"]) for r in records for k in r["kernels"]]
    statuses = Counter(k["status"] for k in kernels)
    not_ranked = [k for k in kernels if k["model"]]
    blind = [k for k in kernels if k["blind"]]
    stride = [k for k in kernels if k["grid_stride_only"]]
    compiled = [r for r in records if r["compile"]]
    times = sorted(r["seconds"] for r in records)
    sites = [r["syntax_error"] for r in rejected]

    def pct(a: int, b: int) -> float:
        return round(100.0 * a / b, 1) if b else 0.0

    return {
        "meta": meta,
        "files": n,
        "parsed": parsed,
        "parsed_pct": pct(parsed, n),
        "syntax_rejected": len(rejected),
        "crashes": [{"file": r["file"], "text": r["crash"]} for r in records if r["crash"]],
        "timeouts": [r["file"] for r in records if r["timed_out"]],
        "other_errors": [{"file": r["file"], "error": r["error"]} for r in records if r["error"]],
        "compile": {
            "checked": bool(meta.get("compile_check")),
            "changed_files": sum(r["changed"] for r in records),
            "status": dict(Counter(r["compile"]["status"] for r in compiled)),
            "failed": [{"file": r["file"], "command": r["compile"]["command"]} for r in compiled if r["compile"]["status"] == "failed"],
            "cross_check": checks,
            "cross_check_disagreements": sum(not c["agrees"] for c in checks),
        },
        "kernels": {
            "total": len(kernels),
            "status": dict(statuses),
            "rewritten_ranked": sum(k["status"] == "rewritten" and not k["blind"] for k in kernels),
            "not_ranked": len(not_ranked),
            "not_ranked_by_reason": dict(Counter(_model_reason(k) for k in not_ranked).most_common()),
            "not_ranked_by_status": dict(Counter(k["status"] for k in not_ranked)),
            "refused_by_rule": dict(Counter(_refusal_rule(k["reason"]) for k in kernels if k["status"] == "refused")),
            "declined_by_reason": dict(Counter(_decline_reason(k["reason"]) for k in kernels if k["status"] == "declined")),
        },
        "blind_rewrites": [{"file": k["file"], "kernel": k["name"], "line": k["line"], "swizzle": k["swizzle"],
                            "why": k["why"]} for k in blind],
        "dram_raised": [{"file": k["file"], "kernel": k["name"], "line": k["line"], "swizzle": k["swizzle"]}
                        for k in kernels if k.get("dram_raised")],
        "grid_stride_only": {
            "count": len(stride),
            "z_only": sum(k["z_only"] for k in stride),
            "no_loop_step": sum(all(p.startswith("no loop step") for p in k["stride_patterns"]) for k in stride),
            "by_pattern": dict(Counter(" + ".join(k["stride_patterns"]) for k in stride)),
            "kernels": [{"file": k["file"], "kernel": k["name"], "line": k["line"], "patterns": k["stride_patterns"],
                         "z_only": k["z_only"]} for k in stride],
        },
        "time": {
            "total_s": round(sum(times), 1),
            "median_s": round(statistics.median(times), 2) if times else 0,
            "p90_s": round(times[int(0.9 * (len(times) - 1))], 2) if times else 0,
            "max_s": round(times[-1], 2) if times else 0,
            "slowest": [{"file": r["file"], "seconds": r["seconds"], "analyze_s": r["analyze"]["seconds"],
                         "rewrite_s": r["rewrite"]["seconds"], "bytes": r["bytes"], "lines": r["lines"]}
                        for r in sorted(records, key=lambda r: -r["seconds"])[:8]],
        },
        "syntax_errors": {
            "by_category": dict(Counter(s.get("category", "not located") for s in sites).most_common()),
            "by_location": dict(Counter(s.get("where", "not located") for s in sites).most_common()),
            "reported_elsewhere": sum(bool(s.get("reported_elsewhere")) for s in sites),
            "files": [dict(s, file=r["file"]) for r, s in zip(rejected, sites)],
        },
        "records": records,
    }


_PUBLIC_KERNEL = ("name", "line", "analyze_status", "status", "why", "reason_sha256", "swizzle", "adapter", "rewrite_adapter",
                  "blind", "dram_raised", "ranked", "launches", "grid_known", "grid_stride_only", "stride_patterns", "z_only")


def public(summary: dict) -> dict:
    """The summary without text taken from the files: messages, reasons and compiler output quote their
    source, so only names, lines, counts and categories stay (the full summary stays in the work folder)."""
    s = json.loads(json.dumps(summary))
    s["crashes"] = [{"file": c["file"], "text": _exception_name(c["text"])} for c in s["crashes"]]
    s["other_errors"] = [{"file": e["file"], "error": "see the full results"} for e in s["other_errors"]]
    for site in s["syntax_errors"]["files"]:
        site.pop("text", None)
        site.pop("message", None)
    for record in s["records"]:
        record["crash"] = _exception_name(record["crash"]) if record["crash"] else ""
        record["error"] = bool(record["error"])
        record["output"] = bool(record["output"])
        if record["syntax_error"]:
            record["syntax_error"] = next(f for f in s["syntax_errors"]["files"] if f["file"] == record["file"])
        if record["compile"]:
            record["compile"] = {"status": record["compile"]["status"], "command": record["compile"]["command"]}
        record["kernels"] = [{key: k[key] for key in _PUBLIC_KERNEL} for k in record["kernels"]]
    return s


def dump(summary: dict) -> str:
    """JSON with the summary indented and one line per file record, so that a new run diffs file by file."""
    head = json.dumps({k: v for k, v in summary.items() if k != "records"}, indent=1)
    body = ",\n".join("  " + json.dumps(r, separators=(",", ":")) for r in summary["records"])
    return head[:-2] + ',\n "records": [\n' + body + "\n ]\n}\n"


def _exception_name(text: str) -> str:
    """The exception's type from a traceback or an "internal error: Type: ..." line; nothing of its message."""
    found = re.findall(r"\b([A-Z]\w*(?:Error|Exception|Interrupt))\b", text)
    return found[-1] if found else text.split(":")[0][:40]


def _table(rows: list[list[object]], head: list[str]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in rows]
    return out


def markdown(s: dict) -> str:
    m = s["meta"]
    lines = [f"# swzc on public CUDA code ({m['date']}, swzc commit {m['swzc_commit']})", "",
             f"Command: `{m['command']}`", "",
             f"{m['swzc_version']} (`{m.get('swzc_module', '?')}`); nvcc: {m['nvcc']}; {m['jobs']} jobs, "
             f"{m['timeout']:g} s per swzc call"
             + ("" if m["compile_check"] else ", no compile check")
             + f"; {m['wall_s']} s in all. Load average {m['load_average'][0]} at the start and {m['load_average'][1]} at "
             f"the end, on {m['cpus']} CPUs (the times below include any other work on the machine).", "",
             "## Corpus", ""]
    lines += _table([[r["name"], r["commit"][:12], r["files"], " ".join(r["include"]) or "–", " ".join(r["defines"]) or "–"]
                     for r in m["repos"]], ["repository", "commit", "files", "-I", "-D"])
    c, k = s["compile"], s["kernels"]
    lines += ["", "## Results", ""]
    rows = [
        ["1. files analysed (no whole-file syntax error)", f"{s['parsed']} / {s['files']} ({s['parsed_pct']} %)"],
        ["2. Python tracebacks or internal errors", len(s["crashes"])],
        ["3. outputs that do not compile where the original does",
         (f"{c['status'].get('failed', 0)} of {c['changed_files']} changed files" if c["checked"] else "not checked (--no-compile)")],
        ["   compile check status of changed files", ", ".join(f"{a} {b}" for a, b in sorted(c["status"].items())) or "–"],
        ["   cross-check here (nvcc on original and output)", f"{len(c['cross_check'])} files, {c['cross_check_disagreements']} disagreeing"],
        ["4. blind rewrites (default rule, no L2 ranking)", len(s["blind_rewrites"])],
        ["   rewrites predicted to move more DRAM bytes than the kernel's own order", len(s.get("dram_raised", []))],
        ["5. kernels refused only for grid-stride / persistent loops", s["grid_stride_only"]["count"]],
        ["   of those, striding over blockIdx.z only", s["grid_stride_only"]["z_only"]],
        ["   of those, with no loop step at the reported line (a false grid-stride)", s["grid_stride_only"]["no_loop_step"]],
        ["6. kernels", f"{k['total']}: " + ", ".join(f"{a} {b}" for a, b in sorted(k["status"].items()))],
        ["   not ranked by the L2 model", k["not_ranked"]],
        ["   wall time per file, analyze + rewrite", f"median {s['time']['median_s']} s, p90 {s['time']['p90_s']} s, "
                                                     f"max {s['time']['max_s']} s, total {s['time']['total_s']} s"],
        ["7. whole-file syntax errors", f"{s['syntax_rejected']} ({s['syntax_errors']['reported_elsewhere']} reported by swzc "
                                        "at another line than the first ERROR/MISSING node)"],
        ["   timeouts", len(s["timeouts"])],
        ["   other errors", len(s["other_errors"])],
    ]
    lines += _table(rows, ["metric", "value"])
    lines += ["", "### Kernel statuses", ""]
    lines += _table([[a, b] for a, b in sorted(k["status"].items(), key=lambda x: -x[1])], ["status (rewrite)", "kernels"])
    lines += ["", f"Rewritten with the L2 model's ranking: {k['rewritten_ranked']}. Not ranked by the model: {k['not_ranked']} "
              "(" + ", ".join(f"{a} {b}" for a, b in k["not_ranked_by_status"].items()) + "), because:", ""]
    lines += _table([[a, b] for a, b in k["not_ranked_by_reason"].items()], ["not ranked because", "kernels"])
    lines += [""]
    lines += _table([[a, b] for a, b in sorted(k["refused_by_rule"].items(), key=lambda x: -x[1])], ["refused for", "kernels"])
    lines += [""]
    lines += _table([[a, b] for a, b in sorted(k["declined_by_reason"].items(), key=lambda x: -x[1])], ["declined for", "kernels"])
    if s["blind_rewrites"]:
        lines += ["", "### Blind rewrites", ""]
        lines += _table([[b["file"], b["kernel"], b["swizzle"], b["why"]] for b in s["blind_rewrites"]],
                        ["file", "kernel", "swizzle", "why"])
    if s.get("dram_raised"):
        lines += ["", "### Rewrites predicted to move more DRAM bytes", ""]
        lines += _table([[b["file"], b["kernel"], b["swizzle"]] for b in s["dram_raised"]], ["file", "kernel", "swizzle"])
    g = s["grid_stride_only"]
    lines += ["", "### Kernels refused only for grid-stride or persistent loops", ""]
    lines += _table([[a, b] for a, b in sorted(g["by_pattern"].items(), key=lambda x: -x[1])], ["pattern", "kernels"])
    lines += [""]
    lines += _table([[x["file"], x["kernel"], x["line"], "; ".join(x["patterns"])] for x in g["kernels"]],
                    ["file", "kernel", "line", "pattern"])
    e = s["syntax_errors"]
    lines += ["", "### Whole-file syntax errors", "",
              "The construct at the first ERROR/MISSING node tree-sitter-cuda reports (located here, not from swzc's "
              "message), and where it is.", ""]
    lines += _table([[a, b] for a, b in e["by_category"].items()], ["construct", "files"])
    lines += [""]
    lines += _table([[a, b] for a, b in e["by_location"].items()], ["where", "files"])
    lines += [""]
    lines += _table([[f["file"], f"{f.get('line')}:{f.get('col')}", f.get("construct_line", "?"), ":".join(map(str, f["reported"] or [])) or "–",
                      f.get("category", "?"), f.get("where", "?"),
                      f.get("lines_from_kernel") if f.get("lines_from_kernel") is not None else "–"] for f in e["files"]],
                    ["file", "first ERROR/MISSING", "construct line", "swzc says", "construct", "where", "lines from a kernel"])
    if c["cross_check"]:
        lines += ["", "### Compile cross-check", ""]
        lines += _table([[x["file"], x["swzc"], x["original_compiles"], x["output_compiles"], x["agrees"]] for x in c["cross_check"]],
                        ["file", "swzc says", "original compiles here", "output compiles here", "agrees"])
    if c["failed"]:
        lines += ["", "### Outputs that do not compile", ""] + [f"- {x['file']}: `{x['command']}`" for x in c["failed"]]
    t = s["time"]
    lines += ["", "### Slowest files", ""]
    lines += _table([[x["file"], x["seconds"], x["analyze_s"], x["rewrite_s"], x["lines"], x["bytes"]] for x in t["slowest"]],
                    ["file", "total s", "analyze s", "rewrite s", "lines", "bytes"])
    for title, entries in (("Crashes", [f"- {x['file']}: {x['text']}" for x in s["crashes"]]),
                           ("Timeouts", [f"- {x}" for x in s["timeouts"]]),
                           ("Other errors", [f"- {x['file']}: {x['error']}" for x in s["other_errors"]])):
        if entries:
            lines += ["", f"### {title}", ""] + entries
    if m.get("log"):
        lines += ["", "### Notes from extraction", ""] + [f"- {x}" for x in m["log"]]
    return "\n".join(lines) + "\n"


# ---- main -------------------------------------------------------------------------------------------------


def digest(paths: Iterable[Path]) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


def _version(cmd: list[str], pick: str = "") -> str:
    """The last line of a version command's output (the last line containing `pick`, when given)."""
    try:
        lines = subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout.strip().splitlines()
        return [line for line in lines if pick in line][-1].strip()
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown"


def _shown(path: str) -> str:
    """A path as the command line would give it: relative to the working directory when inside it."""
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def swzc_module(swzc: str, cwd: Path) -> str:
    """The swzc package the executable imports (its __file__): the Python of a script's #! line, in this
    environment (PYTHONPATH included), asked where `import swzc` leads from where swzc runs.  A script has
    its own folder first on sys.path, where `python -c` would have the working folder."""
    path = shutil.which(swzc) or swzc
    try:
        with open(path, "rb") as script:
            first = script.readline(4096)
    except OSError:
        return "unknown"
    if not first.startswith(b"#!") or b"python" not in first:
        return "unknown (not a Python script)"
    python = shlex.split(first[2:].decode("utf-8", "replace"))
    ask = f"import sys; sys.path[0] = {str(Path(path).resolve().parent)!r}; import swzc; print(swzc.__file__)"
    try:
        r = subprocess.run([*python, "-c", ask], capture_output=True, text=True, timeout=60, cwd=cwd)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return r.stdout.strip() or "unknown"


def find_swzc(given: str | None) -> str:
    if given:
        return given
    beside = Path(sys.executable).parent / "swzc"
    found = str(beside) if beside.exists() else shutil.which("swzc")
    if not found:
        sys.exit("evaluate.py: no swzc found next to this Python or on PATH; give --swzc")
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=HERE / "corpus.toml")
    ap.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"),
                    help="folder with a git copy of each repository: <owner>+<name>/repo (bare), <owner>+<name> or <owner>/<name>")
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "swzc-realcode",
                    help="scratch folder for the copies and outputs (emptied first)")
    ap.add_argument("--out", type=Path, help="write OUT.json and OUT.md (default: in --work)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per swzc call")
    ap.add_argument("--no-compile", action="store_true", help="skip swzc's nvcc compile check and the cross-check")
    ap.add_argument("--cross-check", type=int, default=16, metavar="N", help="files compiled here to check swzc's verdict")
    ap.add_argument("--swzc", help="the swzc executable (default: next to this Python, else on PATH)")
    ap.add_argument("--swzc-commit", metavar="REV",
                    help="the commit the swzc that runs was installed from, for the record (default: this repository's HEAD)")
    ap.add_argument("--only", metavar="REGEX", help="only files whose repo:path matches")
    ap.add_argument("--local", type=Path, metavar="DIR",
                    help="run on the .cu/.cuh/.hip files under DIR (copied to the scratch folder) instead of the corpus")
    args = ap.parse_args(argv)
    swzc = find_swzc(args.swzc)
    args.work = args.work.resolve()  # swzc runs in each repository's copy: every path it is given is absolute
    if args.work.exists():
        shutil.rmtree(args.work)
    src_root, out_root = args.work / "src", args.work / "out"
    src_root.mkdir(parents=True)
    out_root.mkdir()
    log: list[str] = []
    if args.local:
        files, repos = copy_local(args.local, src_root)
    else:
        files, repos = extract(load_corpus(args.corpus), args.mirrors, src_root, log)
    if args.only:
        files = [f for f in files if re.search(args.only, f.name)]
        for repo in repos:
            repo["files"] = sum(f.repo == repo["name"] for f in files)
    before = digest(p for p in src_root.rglob("*") if p.is_file())
    compile_check = not args.no_compile and shutil.which("nvcc") is not None
    if not args.no_compile and not compile_check:
        log.append("nvcc is not on PATH: no compile check")
    started, load_before = time.perf_counter(), os.getloadavg()[0]
    records: list[dict] = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(evaluate_file, f, swzc, out_root, args.timeout, compile_check): f for f in files}
        for done, fut in enumerate(concurrent.futures.as_completed(futures), 1):
            rec = fut.result()
            records.append(rec)
            mark = "SYNTAX" if rec["syntax_error"] else ("CRASH" if rec["crash"] else ("TIMEOUT" if rec["timed_out"] else "ok"))
            print(f"[{done}/{len(files)}] {rec['seconds']:7.2f} s  {mark:7} {rec['file']}", file=sys.stderr, flush=True)
    records.sort(key=lambda r: r["file"])
    by_name = {f.name: f for f in files}
    checks = cross_check(records, by_name, args.cross_check, args.timeout, args.jobs) if compile_check else []
    after = digest(Path(p) for p in before)
    if after != before:
        changed = sorted(p for p in before if after.get(p) != before[p])
        log.append(f"SOURCES MODIFIED during the run: {changed[:10]}")
    meta = {
        "date": datetime.date.today().isoformat(),
        "command": " ".join(shlex.quote(a) for a in [_shown(sys.executable), _shown(sys.argv[0]),
                                                     *(argv if argv is not None else sys.argv[1:])]),
        "swzc": _shown(swzc),
        "swzc_version": _version([swzc, "--version"]),
        "swzc_commit": args.swzc_commit or _version(["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"]),
        "swzc_module": swzc_module(swzc, src_root),
        "nvcc": _version(["nvcc", "--version"], "release") if shutil.which("nvcc") else "no nvcc",
        "load_average": [round(load_before, 1), round(os.getloadavg()[0], 1)],
        "cpus": os.cpu_count(),
        "jobs": args.jobs,
        "timeout": args.timeout,
        "compile_check": compile_check,
        "wall_s": round(time.perf_counter() - started, 1),
        "repos": repos,
        "sources_unchanged": after == before,
        "log": log,
    }
    summary = summarise(records, checks, meta)
    out = args.out or args.work / "realcode"
    out.parent.mkdir(parents=True, exist_ok=True)
    scrub = lambda text: text.replace(str(src_root) + "/", "").replace(str(args.work) + "/", "$WORK/")  # noqa: E731
    full = args.work / "realcode_full.json"
    full.write_text(json.dumps(summary, indent=1) + "\n")
    meta["log"].append(f"messages and reasons in full: {scrub(str(full))} (not for committing: they quote the files)")
    shown = public(summary)
    Path(f"{out}.json").write_text(scrub(dump(shown)))
    Path(f"{out}.md").write_text(scrub(markdown(shown)))
    print(scrub(markdown(shown)))
    return 0 if not summary["crashes"] and after == before else 1


if __name__ == "__main__":
    sys.exit(main())
