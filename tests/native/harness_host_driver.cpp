// Drives swzc/native/harness_host.h on the CPU for tests/test_harness_host.py.
//
//   fill KIND ELEMENTS SEED FILL A B [INDEX]   the bytes of one filled buffer, raw, on stdout
//   poison BYTES                       the bytes of a poisoned image, raw, on stdout
//   check SCENARIO TOLERANCE           swzc::check against a stand-in device; its JSON lines on stdout
//
// The stand-in device keeps buffers in host memory and runs two host "kernels" over them: variant A
// writes y[i] = x[i] + 1 and z[i] += 1; variant B does the same, except where SCENARIO says otherwise.
// Both variants use the same memory, as the GPU harness does, so only poisoning tells an element that
// B left unwritten from one A wrote (as zero bytes, in "skip-last": neither a leftover nor a zeroed buffer
// would show the difference).
#include "harness_host.h"

#include <cstdlib>
#include <cstring>
#include <string>

static swzc::Kind kind_named(const std::string& name) {
  const char* names[] = {"F32", "F64", "F16", "BF16", "E4M3", "E5M2", "I8", "U8", "I16", "U16", "I32", "U32", "I64", "U64", "BOOL"};
  for (int k = 0; k <= swzc::BOOL; ++k)
    if (name == names[k]) return (swzc::Kind)k;
  std::fprintf(stderr, "unknown kind %s\n", name.c_str());
  std::exit(2);
}

static swzc::Fill fill_named(const std::string& name) {
  if (name == "RANGE") return swzc::RANGE;
  if (name == "ARANGE") return swzc::ARANGE;
  if (name == "CONST") return swzc::CONST;
  return swzc::UNIFORM;
}

static const size_t N = 1000;

struct HostDevice {
  std::vector<std::vector<unsigned char>> memory;
  std::string scenario;
  int last = 0;  // the variant launched last

  void upload(size_t i, const std::vector<unsigned char>& image) { memory[i] = image; }
  std::vector<unsigned char> download(size_t i, size_t bytes) {
    if (scenario == "short" && last == 1 && i == 1) --bytes;  // B's y comes back one byte short
    return std::vector<unsigned char>(memory[i].begin(), memory[i].begin() + bytes);
  }
  float get(size_t buffer, size_t i) { float v; std::memcpy(&v, memory[buffer].data() + 4 * i, 4); return v; }
  void put(size_t buffer, size_t i, float v) { std::memcpy(memory[buffer].data() + 4 * i, &v, 4); }

  void launch(int variant) {
    const bool b = variant == 1;
    last = variant;
    for (size_t i = 0; i < N; ++i) {
      float y = get(0, i) + 1.0f;
      if (scenario == "skip-last" && i == N - 1) y = 0.0f;  // A writes zero bytes there, B nothing
      if (b && scenario == "close") y *= 1.0f + 1e-6f;
      if (b && scenario == "far") y += 0.5f;
      if (b && scenario == "far-last" && i == N - 1) y += 0.5f;
      if (scenario == "close-big") y *= b ? 1000.0f * (1.0f + 1e-6f) : 1000.0f;  // relatively close, absolutely not
      if (b && scenario == "nan" && i == 7) y = NAN;
      if (scenario == "inf" && i == 9) y = b ? 1.0f : INFINITY;  // A overflows, B does not
      if (b && scenario == "scaled") y = 2.0f * get(0, i) + 1.0f;  // equal to A's only where x is 0
      if (!(b && scenario == "skip-last" && i == N - 1)) put(1, i, y);
      int32_t z;
      std::memcpy(&z, memory[2].data() + 4 * i, 4);
      z += (b && scenario == "inout" && i == 500) ? 2 : (b && scenario == "inout-256" && i == 500) ? 257 : 1;
      std::memcpy(memory[2].data() + 4 * i, &z, 4);
    }
    const size_t flip = scenario == "first" ? 0 : scenario == "middle" ? 4 * N / 2 + 1 : scenario == "last" ? 4 * N - 1 : ~(size_t)0;
    if (b && flip != ~(size_t)0) memory[1][flip] ^= 0x01;
  }
};

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::string mode = argv[1];
  if (mode == "fill" && (argc == 8 || argc == 9)) {  // the last argument: the buffer's index (0 if not given)
    const swzc::Buffer buf = {"t", kind_named(argv[2]), (size_t)std::strtoull(argv[3], 0, 10), swzc::IN,
                              fill_named(argv[5]), std::atof(argv[6]), std::atof(argv[7])};
    const size_t index = argc == 9 ? (size_t)std::strtoull(argv[8], 0, 10) : 0;
    const std::vector<unsigned char> bytes = swzc::fill(buf, (unsigned)std::atoi(argv[4]), index);
    std::fwrite(bytes.data(), 1, bytes.size(), stdout);
    return 0;
  }
  if (mode == "poison" && argc == 3) {
    std::vector<unsigned char> image(std::strtoull(argv[2], 0, 10), 0x00);
    swzc::poison(image);
    std::fwrite(image.data(), 1, image.size(), stdout);
    return 0;
  }
  if (mode == "check" && argc == 4) {
    const std::vector<swzc::Buffer> buffers = {
        {"x", swzc::F32, N, swzc::IN, swzc::UNIFORM, 0, 0},
        {"y", swzc::F32, N, swzc::OUT, swzc::UNIFORM, 0, 0},
        {"z", swzc::I32, N, swzc::INOUT, swzc::UNIFORM, 0, 0},
    };
    HostDevice device{std::vector<std::vector<unsigned char>>(buffers.size()), argv[2]};
    swzc::check(buffers, device, std::atof(argv[3]), stdout);
    return 0;
  }
  return 2;
}
