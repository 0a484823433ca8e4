"""How the built-in formulas and adapters divide by a value known only at run time (the grid, a group's rows):
with ``/`` and ``%`` (the default), or in integer instructions only, through ``swzc_divide`` (an order's
*integer division* form, written ``ORDER/int``: swzc.formulas.swizzles.SwizzleSpec.integer).  Both forms put every
block in the same place; they differ in the code nvcc makes of the kernel around them.

Why two forms: a division by a run-time value compiles to the GPU's floating-point reciprocal unit (I2F,
MUFU.RCP, F2I on NVIDIA; v_rcp_f32 on AMD), which has no warp-uniform form.  A swizzle's operands are the same in
every thread of a block (the block index, the grid, constants), and with ``/`` their quotient leaves the uniform
datapath (NVIDIA) or the scalar unit (AMD).  On a tensor-core GEMM that moved the kernel's own main-loop counter with
it (5-8 % slower at every size, even under a gate); the integer form keeps a uniform quotient uniform, and that
kernel's main loop is the original's.  On CUDA-core GEMMs it is the other way round: with the index uniform, nvcc
kept their loop counters uniform too and recomputed every address from them (up to 4 % slower).  So neither form is
the better one for every kernel: the acceptance loop measures its first candidate in both and goes on with the
faster (swzc.search.proposers.BuiltinProposer); bench/results/divide_h100.md has the timings and the SASS.

The formulas' text marks each run-time division ``DIV(a, d)`` and each remainder ``MOD(a, d)`` (`spelled` writes
them in one form); a division by a step's parameter or a literal is written ``/``: a constant where it is called.

How ``swzc_divide`` is exact, for every 32-bit ``a`` and every ``d >= 1`` (the formulas never divide by 0):

- ``d`` is scaled into [2^31, 2^32) (``dn = d << s``).  ``x``, an estimate of ``2^63 / dn``, starts from the
  line 48/17 - 32/17 t (t = dn / 2^32 in [1/2, 1)), within 1/17 of 1/t, and three Newton steps
  ``x (2 - t x)`` take it to 32 bits.  Less 4, it is below ``2^63 / dn`` by at most 7 units (``swzc_reciprocal``):
  checked for all 2^31 values of ``dn`` (tests/test_divide.py::test_every_scaled_divisor).
- So ``q = floor(a x / 2^(63 - s))`` is below ``a / d`` by less than ``7 a 2^s / 2^63 < 7``: at most 8 short,
  never over, and ``r = a - q d`` is below ``9 d``.
- ``c = floor(r x / 2^(63 - s))`` is ``floor(r / d)`` or one less (``r`` is small, so the estimate's error is
  under one), never more: after it the remainder is below ``2 d``, and one last step makes it exact.
"""

from __future__ import annotations

import re

NAME = "swzc_divide"
SUFFIX = "_int"  # what an integer-form function's name ends with, before its adapter

# The definitions the integer form calls, in the order they must come: (its function's name, its text).  A file gets
# those its formulas call, with what they call (`helpers`): an unused static function draws a compiler warning.
_HELPERS = (
    ("swzc_reciprocal", (), """\
// swzc_divide(a, d): a / d for d >= 1, in integer instructions only, so that a quotient of warp-uniform values
// stays on the uniform (NVIDIA) or scalar (AMD) datapath; `/` by a run-time value takes the floating-point
// reciprocal unit, which has no uniform form.  Exact for every a and d >= 1 (swzc/formulas/divide.py says why).
// swzc_reciprocal(dn), dn in [2^31, 2^32): under 2^63 / dn, by 7 at most.
static __device__ __forceinline__ unsigned swzc_reciprocal(unsigned dn) {
  unsigned x = 1768515945u - __umulhi(dn, 4042322161u);  // the line 48/17 - 32/17 t, t = dn / 2^32, times 2^31
  x = __umulhi(x, 0u - __umulhi(dn, x)) << 1;  // three Newton steps x (2 - t x): 4 bits, 8, 16, 32
  x = __umulhi(x, 0u - __umulhi(dn, x)) << 1;
  x = __umulhi(x, 0u - __umulhi(dn, x)) << 1;
  return x - 4u;  // now below 2^63 / dn: no quotient from it passes the true one
}
"""),
    ("swzc_divide", ("swzc_reciprocal",), """\
static __device__ __forceinline__ unsigned swzc_divide(unsigned a, unsigned d) {
  const unsigned s = (unsigned)__clz((int)d);
  const unsigned x = swzc_reciprocal(d << s);  // d scaled into [2^31, 2^32)
  unsigned q = __umulhi(a, x) >> (31u - s);  // a / d, or up to 8 less
  unsigned r = a - q * d;
  const unsigned c = __umulhi(r, x) >> (31u - s);  // r / d, or one less
  q += c;
  r -= c * d;
  return r >= d ? q + 1u : q;
}
"""),
    ("swzc_remainder", ("swzc_divide",), """\
static __device__ __forceinline__ unsigned swzc_remainder(unsigned a, unsigned d) {
  return a - swzc_divide(a, d) * d;  // the same inlined quotient as a swzc_divide(a, d) beside it: computed once
}
"""),
)


def helpers(text: str) -> list[str]:
    """The definitions that `text` (formulas, in either form) calls, with those they call, in order: none where
    it is all in the ``/`` form."""
    needed = {name for name, _, _ in _HELPERS if name + "(" in text}
    for name, calls, _ in reversed(_HELPERS):
        if name in needed:
            needed.update(calls)
    return [cxx for name, _, cxx in _HELPERS if name in needed]


# The two intrinsics the helpers use, for a host compiler (the prover): what CUDA and HIP define on the device.
HOST_INTRINSICS = """\
static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
static inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
"""

# DIV(a, d) and MOD(a, d): `a` a name, `d` a name or a parenthesized expression
_MARKED = re.compile(r"\b(DIV|MOD)\((\w+), (\w+|\([^()]*\))\)")


def spelled(text: str, integer: bool) -> str:
    """A formula's marked text in one form: ``a / d`` and ``a % d``, or ``swzc_divide(a, d)`` and
    ``swzc_remainder(a, d)``."""
    def one(found: re.Match[str]) -> str:
        op, a, d = found.groups()
        if integer:
            return f"{NAME if op == 'DIV' else 'swzc_remainder'}({a}, {d})"
        return f"{a} {'/' if op == 'DIV' else '%'} {d}"

    return _MARKED.sub(one, text)
