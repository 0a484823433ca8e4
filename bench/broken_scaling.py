"""Benchmark: how the cost of `swzc rewrite` grows with a file tree-sitter cannot parse whole: 1k, 10k and 50k
lines.

    taskset -c 0 python bench/broken_scaling.py   # prints a table, writes bench/results/broken_scaling.json

Four kinds of file, each run in its own child process through the library call `rewrite_file` (no compile
check), as bench/scaling.py does:
- `broken`: bench/scaling.py's generated file, with per 1,000 lines what real code brings that the grammar does
  not take: uses of a qualifier-only macro in declarations, statement macros without a semicolon (one of them
  with its arguments over two lines), a helper whose definition does not parse, and torch-extension glue at
  the end (which makes tree-sitter wrap the whole file in one ERROR node);
- `unclosed`: a hostile file: one kernel, then nothing but lines that open a statement macro's arguments and
  never close them, the case where looking for the closing parenthesis over several lines costs most;
- `macros`: a hostile file: half its lines define empty macros named like the words the other half uses,
  the case where looking for uses of macros that expand to nothing costs most;
- `heads`: a hostile file: one kernel, then nothing but kernel heads the grammar cannot take (a launch-bounds
  macro, a parameter list that never closes), the case where naming every `__global__` swzc did not find costs most.
Targets: those of bench/scaling.py (10k lines in 10 s, 50k in 60 s on one core), and time per line not growing
with the file.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from scaling import SIZES, generate, measure, record, show  # noqa: E402

MACROS = ("#define RESTRICT __restrict__\n#define TIC(name) { puts(name); }\n#define EXT(f) m.def(#f, &f);\n"
          "#define BIND(tag, T) void bind_##tag(T* x) { TIC(#tag) }\n")
BROKEN = """__device__ int where_{i}(int v) ATTRS(4) {{ return blockIdx.x * v; }}
void host_{i}(const float * RESTRICT a, float * RESTRICT b) {{
  const float * RESTRICT p = a;
  TIC("host_{i}")
  TIC("host_{i}, "
      "twice")
  b[0] = p[0];
}}
"""
KERNEL = """__global__ void k(const float* a, float* b, int n) {
  int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
  b[row * n + col] = a[col * n + row];
}
void run(const float* a, float* b) { k<<<dim3(256, 256), dim3(16, 16)>>>(a, b, 4096); }
"""


def broken(lines: int) -> str:
    clean = generate(lines)
    head, main = clean.rsplit("int main()", 1)
    parts = [BROKEN.format(i=i) for i in range(lines // 1000 * 8)]
    glue = "".join(f"BIND(f{i}, float)\n" for i in range(4)) + "PYBIND11_MODULE(ext, m) {\n  EXT(bind_f0)\n}\n"
    return "#include <algorithm>\n#define ATTRS(n)\n" + MACROS + head + "".join(parts) + "int main()" + main + glue


def unclosed(lines: int) -> str:
    return "#define M(x) ;\n" + KERNEL + "".join("M(" + "a" * 60 + "\n" for _ in range(lines - 6))


def many_macros(lines: int) -> str:
    """Half the lines define empty macros named like the code's own words (as include guards and feature
    flags are), the other half use those words; a statement-macro use without a semicolon makes the file one
    that swzc reads again."""
    words = ("const", "float", "int", "abc", "foo", "bar", "baz", "y")
    defines = "".join(f"#define {words[i % len(words)]}_{i}\n" for i in range(lines // 2))
    code = "const float * RESTRICT x = y; int abc = foo(bar) + baz;\n" * (lines // 2 - 8)
    return "#define RESTRICT __restrict__\n#define TIC { }\n" + defines + KERNEL + "void f() {\n  TIC\n" + code + "}\n"


def heads(lines: int) -> str:
    return "#define LB(n) __launch_bounds__(n)\n" + KERNEL + "".join(f"__global__ LB(a(1)) void k{i}(float* x\n"
                                                                   for i in range(lines - 8))


def main() -> None:
    rows = []
    with tempfile.TemporaryDirectory(prefix="swzc-broken-") as tmp:
        for kind, make in (("broken", broken), ("unclosed", unclosed), ("macros", many_macros), ("heads", heads)):
            for lines in SIZES:
                path = Path(tmp) / f"{kind}_{lines}.cu"
                path.write_text(make(lines))
                rows.append({"file": kind, **measure(path, lines)})
    show(rows, record("taskset -c 0 python bench/broken_scaling.py", rows, "broken_scaling.json"))


if __name__ == "__main__":
    main()
