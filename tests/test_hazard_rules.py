"""Kernels whose blocks depend on each other are refused, wherever the dependence is written: in a helper the
kernel calls, in a wait on volatile memory, in a cooperative launch.  Each case has a control that differs
only in the hazard and is rewritten."""

import pytest

from swzc.analysis.kernels import analyze
from swzc.passes import block_swizzle
from swzc.frontend.source import load_bytes
from swzc.analysis.context import FileContext


def hazards(code: str, kernel: str = "k") -> list:
    analysis = analyze(FileContext(load_bytes("k.cu", code.encode())))
    return list(next(k for k in analysis.kernels if k.name == kernel).hazards)


def refusal(code: str, kernel: str = "k"):
    analysis = analyze(FileContext(load_bytes("k.cu", code.encode())))
    index = next(i for i, k in enumerate(analysis.kernels) if k.name == kernel)
    return block_swizzle.refusal(analysis, index)


TILE = "  c[(blockIdx.y * 16 + threadIdx.y) * 4096 + blockIdx.x * 16 + threadIdx.x] = v;\n"


def kernel(body: str, before: str = "") -> str:
    return f"{before}__global__ void k(float* c, float v) {{\n{body}{TILE}}}\n"


# ---- in a helper the kernel calls -----------------------------------------------------------------------

@pytest.mark.parametrize("helper_body, rule", [
    ("  cooperative_groups::this_grid().sync();\n", "grid-sync"),
    ("  while (atomicOr(counter, 0u) < 4) { }\n", "wait"),
    ("  if (atomicAdd(counter, 1) == 0) *counter = 0;\n", "ticket"),
])
def test_a_hazard_inside_a_helper_refuses_the_kernel(helper_body, rule):
    helper = f"__device__ unsigned int* counter;\nstatic __device__ void settle_up() {{\n{helper_body}}}\n"
    code = kernel("  settle_up();\n", helper)
    found = hazards(code)
    assert [h.rule for h in found] == [rule] and "(in settle_up)" in found[0].reason
    decision = refusal(code)
    assert decision is not None and decision.status == "refused" and "(in settle_up)" in decision.reason


def test_a_hazard_in_a_helper_of_a_helper_refuses_the_kernel():
    code = kernel("  outer();\n", "static __device__ void inner() { cooperative_groups::this_grid().sync(); }\n"
                                  "static __device__ void outer() { inner(); }\n")
    assert [(h.rule, "(in inner)" in h.reason) for h in hazards(code)] == [("grid-sync", True)]


def test_a_helper_without_a_hazard_is_no_hazard():
    code = kernel("  settle_up();\n", "static __device__ void settle_up() { __syncthreads(); }\n")
    assert hazards(code) == [] and refusal(code) is None


# ---- waits on memory other blocks write ---------------------------------------------------------------

VOLATILE_FLAGS = "__device__ volatile int ready[4096];\n__device__ int plain[4096];\n"


@pytest.mark.parametrize("wait", [
    # a volatile array named in the condition, with work in the loop's body (not an idle spin)
    "  int tries = 0;\n  while (ready[blockIdx.x] == 0) { tries++; }\n",
    # a volatile parameter
    "  int tries = 0;\n  for (; *flag == 0; ) { tries += 2; }\n",
    # volatile through a cast in the condition
    "  int tries = 0;\n  do { tries++; } while (*(volatile int*)&plain[blockIdx.x] == 0);\n",
])
def test_a_busy_wait_on_volatile_memory_is_a_hazard(wait):
    code = VOLATILE_FLAGS + f"__global__ void k(float* c, float v, volatile int* flag) {{\n{wait}{TILE}}}\n"
    found = hazards(code)
    assert [h.rule for h in found] == ["wait"] and "waits on memory other blocks write (line 5)" in found[0].reason
    assert refusal(code).status == "refused"


@pytest.mark.parametrize("loop", [
    "  int tries = 0;\n  while (plain[blockIdx.x] == 0 && tries < 8) { tries++; }\n",
    "  int tries = 0;\n  for (; *flag == 0 && tries < 8; ) { tries += 2; }\n",
])
def test_the_same_loop_over_plain_memory_is_no_hazard(loop):
    code = VOLATILE_FLAGS + f"__global__ void k(float* c, float v, int* flag) {{\n{loop}{TILE}}}\n"
    assert hazards(code) == [] and refusal(code) is None


def test_volatile_names_come_from_declarations_parameters_and_fields():
    code = ("struct Sync { volatile int go; int count; };\n__device__ Sync sync;\n"
            "__global__ void k(float* c, float v) {\n  int n = 0;\n  while (sync.go == 0) { n++; }\n" + TILE + "}\n"
            "__global__ void other(float* c, float v) {\n  int n = 0;\n  while (sync.count == 0 && n < 8) { n++; }\n"
            + TILE.replace("= v", "= v + n") + "}\n")
    assert [h.rule for h in hazards(code)] == ["wait"]
    assert hazards(code, "other") == []


def test_one_functions_volatile_parameter_is_not_another_functions_loop_counter():
    code = ("__device__ void touch(float* c, volatile int i) { c[i] += 1.f; }\n"
            "__global__ void k(float* c, float v, int n) {\n  for (int i = 0; i < n; ++i) touch(c, i);\n" + TILE + "}\n"
            "__global__ void spin(float* c, float v, volatile int* i) {\n  int n = 0;\n  while (*i == 0) { n++; }\n" + TILE + "}\n"
            "__device__ int wait_on(volatile int* i) { int n = 0; while (*i == 0) { n++; } return n; }\n"
            "__global__ void via(float* c, float v, int* f) {\n  wait_on(f);\n" + TILE + "}\n")
    assert hazards(code) == []
    assert [h.rule for h in hazards(code, "spin")] == ["wait"]  # its own volatile parameter
    assert [h.rule for h in hazards(code, "via")] == ["wait"]  # its helper's


# ---- launches -----------------------------------------------------------------------------------------

COOPERATIVE = """\
__global__ void k(float* c, float v) {
""" + TILE + """}
int main() {
  float* c = 0;
  float v = 1.0f;
  void* args[] = {&c, &v};
  LAUNCH;
}
"""


@pytest.mark.parametrize("launch", [
    "cudaLaunchCooperativeKernel((void*)k, dim3(256, 256), dim3(16, 16), args, 0, 0)",
    "cudaLaunchCooperativeKernel(k, dim3(256, 256), dim3(16, 16), args)",
])
def test_a_cooperative_launch_refuses_the_kernel(launch):
    code = COOPERATIVE.replace("LAUNCH", launch)
    found = hazards(code)
    assert [h.rule for h in found] == ["cooperative-launch"]
    assert "launched cooperatively (cudaLaunchCooperativeKernel, line 8): may sync the whole grid" in found[0].reason
    assert refusal(code).status == "refused"


def test_a_cooperative_hip_launch_refuses_the_kernel():
    code = COOPERATIVE.replace("LAUNCH", "hipLaunchCooperativeKernel((void*)k, dim3(256, 256), dim3(16, 16), args, 0, 0)")
    src = load_bytes("k.hip", code.replace("blockIdx", "hipBlockIdx").replace("threadIdx.", "hipThreadIdx_")
                     .replace("hipBlockIdx.", "hipBlockIdx_").encode())
    (k,) = analyze(FileContext(src)).kernels
    assert [h.rule for h in k.hazards] == ["cooperative-launch"]


def test_an_ordinary_launch_of_the_same_kernel_is_no_hazard():
    code = COOPERATIVE.replace("LAUNCH", "cudaLaunchKernel((void*)k, dim3(256, 256), dim3(16, 16), args, 0, 0)")
    assert hazards(code) == [] and refusal(code) is None


# ---- waits: which loops spin ------------------------------------------------------------------------------

@pytest.mark.parametrize("loop", [
    "  while (plain[blockIdx.x] == 0);\n",  # an empty statement
    "  while (plain[blockIdx.x] == 0) { }\n",
    "  while (plain[blockIdx.x] == 0) { __nanosleep(64); }\n",
    "  while (plain[blockIdx.x] == 0) { __threadfence(); __syncthreads(); }\n",
    "  while (plain[blockIdx.x] == 0) {\n    // wait for the block before\n  }\n",
    "  while (plain[blockIdx.x] == 0) { __nanosleep(64) /* back off */; }\n",  # a comment inside the statement
    "  do { } while (*flag == 0);\n",
    "  for (; sync_state.ready == 0; ) { }\n",
])
def test_an_idle_loop_over_memory_is_a_wait(loop):
    code = ("__device__ int plain[4096];\nstruct State { int ready; };\n__device__ State sync_state;\n"
            f"__global__ void k(float* c, float v, int* flag) {{\n{loop}{TILE}}}\n")
    assert [h.rule for h in hazards(code)] == ["wait"]


@pytest.mark.parametrize("loop", [
    "  while (plain[blockIdx.x] == 0) { plain[blockIdx.x] = 1; }\n",  # work in the body
    "  while (plain[blockIdx.x] == 0) { __nanosleep(64); plain[0] = 1; }\n",
    "  while (plain[blockIdx.x] == 0) { __nanosleep(64), plain[0] = 1; }\n",  # a comma: not only idle calls
    "  while (plain[blockIdx.x] == 0) { count(); }\n",  # a call that is not an idle one
    "  while (plain[blockIdx.x] == 0) { count() /* work */; }\n",
    "  while (plain[blockIdx.x] == 0) plain[blockIdx.x] = 1;\n",  # work, without braces
    "  for (int i = 0; i < 8; ++i) { }\n",  # no memory in the condition
    "  int n = 4;\n  while (n > 0) { }\n",
])
def test_a_loop_that_works_or_reads_no_memory_is_no_wait(loop):
    code = (f"__device__ int plain[4096];\n__device__ void count() {{}}\n"
            f"__global__ void k(float* c, float v) {{\n{loop}{TILE}}}\n")
    assert hazards(code) == []


@pytest.mark.parametrize("condition", [
    "!ready.load(cuda::memory_order_acquire)",
    "!bar.test_wait(token)",
    "!bar.try_wait(token)",
    "atomicCAS(lock, 0, 1) != 0",
    "__ldcv(flag) == 0",
])
def test_a_loop_on_an_atomic_or_a_barrier_wait_is_a_wait_even_with_work_in_it(condition):
    code = kernel(f"  int spins = 0;\n  while ({condition}) {{ spins++; }}\n",
                  "__device__ int* lock;\n__device__ int* flag;\n")
    assert [h.rule for h in hazards(code)] == ["wait"]


# ---- tickets ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("statement, ticket", [
    ("  unsigned t = atomicAdd(counter, 1u); c[t] = v;\n", True),
    ("  if (atomicInc(counter, 64u) == 63u) c[0] = v;\n", True),
    ("  c[(atomicAdd(counter, 1u))] = v;\n", True),
    ("  atomicAdd(counter, 1u);\n", False),  # the value is dropped: a count, not an order
    ("  (atomicAdd(counter, 1u));\n", False),
    ("  (void)atomicAdd(counter, 1u);\n", False),
    ("  atomicMax(counter, 1u) > 0 ? c[0] = v : 0;\n", False),  # not a ticket call
])
def test_a_ticket_is_an_atomic_whose_value_is_used(statement, ticket):
    found = hazards(kernel(statement, "__device__ unsigned* counter;\n"))
    assert [h.rule for h in found] == (["ticket"] if ticket else [])
    if ticket:
        assert found[0].reason.startswith("atomic ticket: the value atomic") and found[0].reason.endswith("returns orders blocks (line 3)")


@pytest.mark.parametrize("statement, ticket", [
    ("  __shared__ unsigned count;\n  unsigned t = atomicAdd(&count, 1u); c[t] = v;\n", False),  # the block's own
    ("  __shared__ unsigned hist[8];\n  c[atomicAdd(&hist[threadIdx.x % 8], 1u)] = v;\n", False),
    ("  __shared__ unsigned hist[8];\n  c[atomicAdd(hist + 1, 1u)] = v;\n", False),
    ("  __shared__ unsigned hist[8];\n  c[atomicInc((hist), 9u)] = v;\n", False),
    ("  __shared__ unsigned* shared_ptr;\n  shared_ptr = counter;\n  c[atomicAdd(shared_ptr, 1u)] = v;\n", True),  # global
    ("  __shared__ unsigned* shared_ptr;\n  c[atomicAdd(&shared_ptr[0], 1u)] = v;\n", True),
    ("  unsigned count = 0;\n  c[atomicAdd(&count, 1u) + atomicAdd(counter, 1u)] = v;\n", True),
])
def test_an_atomic_on_shared_memory_orders_no_blocks(statement, ticket):
    found = hazards(kernel(statement, "__device__ unsigned* counter;\n"))
    assert [h.rule for h in found] == (["ticket"] if ticket else []), found


# ---- the block index read where the rewrite cannot see it ------------------------------------------------

@pytest.mark.parametrize("read, rule", [
    ("  const unsigned b = __nvvm_read_ptx_sreg_ctaid_x();\n", "intrinsic-block-index"),
    ("  const unsigned b = __builtin_amdgcn_workgroup_id_x();\n", "intrinsic-block-index"),
    ("  unsigned b; asm(\"mov.u32 %0, %%ctaid.x;\" : \"=r\"(b));\n", "asm-block-index"),
    ("  unsigned b; asm volatile(\"mov.u32 %0, %%nctaid.y;\" : \"=r\"(b));\n", "asm-block-index"),
])
def test_a_block_index_read_the_rewrite_cannot_see_refuses_even_a_kernel_that_reads_no_blockidx(read, rule):
    code = f"__global__ void k(float* c) {{\n{read}  c[b * 256 + threadIdx.x] = 1.0f;\n}}\n"
    (found,) = hazards(code)
    assert found.rule == rule and found.reason.endswith("(line 2)")
    decision = refusal(code)
    assert decision.status == "refused" and decision.reason == found.reason


def test_asm_that_does_not_read_the_block_index_is_no_hazard():
    code = kernel('  unsigned lane; asm("mov.u32 %0, %%laneid;" : "=r"(lane));\n')
    assert hazards(code) == []


def test_a_macro_reading_the_block_index_is_one_hazard_however_often_it_is_used():
    code = ("#define ROW (blockIdx.y * 16 + threadIdx.y)\n#define AT(m) m[ROW * 4096 + threadIdx.x]\n"
            "__global__ void k(float* a, float* b) {\n  AT(a) = 1.0f;\n  AT(b) = AT(a);\n}\n")
    found = hazards(code)
    assert [h.rule for h in found] == ["macro-block-index"]
    assert found[0].reason.startswith("uses macro AT, whose body reads the block index")


def test_a_macro_reads_the_block_index_through_a_chain_of_macros():
    code = ("#define BX blockIdx.x\n#define COL (BX * 16)\n#define AT(m) m[COL + threadIdx.x]\n#define UNRELATED 4\n"
            "__global__ void k(float* a) {\n  AT(a) = UNRELATED;\n}\n")
    assert [h.reason.split(",")[0] for h in hazards(code)] == ["uses macro AT"]
    plain = "#define COL (threadIdx.x * 16)\n#define AT(m) m[COL]\n__global__ void k(float* a) { AT(a) = blockIdx.x; }\n"
    assert hazards(plain) == []


def test_a_hazard_in_the_kernel_body_names_no_helper():
    (found,) = hazards(kernel("  cooperative_groups::this_grid().sync();\n"))
    assert found.reason == "grid-wide synchronisation (cooperative groups) (line 2)"


@pytest.mark.parametrize("head", [
    "__global__ void __cluster_dims__(2, 1, 1) k",  # as CUDA documents it
    "__global__ void __cluster_dims__(4)\nk",
    "__cluster_dims__(2, 1, 1) __global__ void k",
    "__global__ __cluster_dims__(2, 1, 1) void k",
    "template <int N> __global__ void __cluster_dims__(N, 1, 1) k",
])
def test_thread_block_clusters_refuse_the_kernel(head):
    code = "int before;\n" + kernel("").replace("__global__ void k", head)
    analysis = analyze(FileContext(load_bytes("k.cu", code.encode())))
    assert not load_bytes("k.cu", code.encode()).errors
    (k,) = analysis.kernels
    assert [h.rule for h in k.hazards] == ["cluster"] and k.hazards[0].line == 2
    assert block_swizzle.refusal(analysis, 0).status == "refused"


def test_a_kernel_after_a_cluster_kernel_is_not_taken_for_one():
    code = kernel("").replace("__global__ void k", "__global__ void __cluster_dims__(2, 1, 1) c") + kernel("")
    analysis = analyze(FileContext(load_bytes("k.cu", code.encode())))
    assert {k.name: [h.rule for h in k.hazards] for k in analysis.kernels} == {"c": ["cluster"], "k": []}


def test_an_externally_visible_helper_that_reads_the_block_index_refuses_its_kernels():
    code = ("__device__ int row() { return blockIdx.y; }\n"
            "__global__ void k(float* c) { c[row() * 4096 + threadIdx.x] = 1.0f; }\n")
    (found,) = hazards(code)
    assert found.rule == "external-helper" and found.reason.startswith("helper row (line 1) reads the block index")
    assert hazards(code.replace("__device__ int row", "static __device__ int row")) == []


# ---- what tree-sitter cannot parse ----------------------------------------------------------------------

def test_several_parse_errors_in_a_kernel_are_one_hazard_that_counts_them():
    code = "__global__ void k(float* c) {\n  c[blockIdx.x] = (;\n  c[0] = );\n}\n"
    (found,) = hazards(code)
    assert found.rule == "syntax-error" and found.line == 2 and found.reason.endswith("(and 1 more)")
    (one,) = hazards("__global__ void k(float* c) {\n  c[blockIdx.x] = (;\n}\n")
    src = load_bytes("k.cu", b"__global__ void k(float* c) {\n  c[blockIdx.x] = (;\n}\n")
    assert one.reason == f"touches a part of the file swzc cannot parse: {src.error_message(src.errors[0])}"


def test_kernels_tree_sitter_cannot_parse_at_all_are_named_once_each_with_their_first_line():
    hidden = ("#ifdef WIDE\n__global__ void wide(float* a, int n) {\n#else\n__global__ void wide(float* a) {\n#endif\n"
              "  a[blockIdx.x] = 0.0f;\n}\n")
    code = "int x;\n" + hidden + hidden.replace("wide", "tall")
    kernels = analyze(FileContext(load_bytes("k.cu", code.encode()))).kernels
    assert [(k.name, k.line) for k in kernels] == [("wide", 3), ("tall", 10)]
    for k, at in zip(kernels, ("2:1", "9:1")):  # each at the part that holds it, not one error for the file
        (hazard,) = k.hazards
        assert hazard.rule == "syntax-error" and hazard.line == k.line
        assert hazard.reason.startswith(f"its definition cannot be parsed: k.cu:{at}: syntax error: cannot parse '#ifdef WIDE'")


def test_a_cluster_kernel_that_opens_the_file_is_refused():
    code = kernel("").replace("__global__ void k", "__cluster_dims__(2, 1, 1) __global__ void k")
    (k,) = analyze(FileContext(load_bytes("k.cu", code.encode()))).kernels
    assert [h.rule for h in k.hazards] == ["cluster"] and k.hazards[0].line == 1


@pytest.mark.parametrize("code, said", [
    ("__device__ unsigned pick() { return blockIdx.x; }\n"
     "__global__ void k(unsigned* o) {\n  auto f = pick;\n  o[threadIdx.x] = f();\n}\n", "calls through f (line 4)"),
    ("struct Reader { __device__ unsigned operator()() const { return blockIdx.x; } };\n"
     "__global__ void k(unsigned* o) {\n  Reader r;\n  o[threadIdx.x] = r();\n}\n", "calls the object r (line 4)"),
], ids=["through a pointer", "through an object"])
def test_a_call_the_rewrite_cannot_follow_is_refused_under_its_rule(code, said):
    """A call through a pointer to, or an object whose operator() is, a reader of the block index: the kernel is
    refused under SWZ113 (header-helper), the rule review reports it by."""
    (kernel,) = analyze(FileContext(load_bytes("k.cu", code.encode()))).kernels
    assert [(h.rule, h.rule_id) for h in kernel.hazards] == [("header-helper", "SWZ113")]
    assert said in kernel.hazards[0].reason
