// swzc harness, host part: fills, poisoning, the output comparison and the check's order of work.
//
// Plain C++ over byte buffers, with no GPU header, so that the same code the generated harness runs
// is compiled and tested on a CPU.  The harness supplies a Device (upload, launch, download); the
// check here decides what goes in, what comes out and whether the two variants agree.
//
// Element kinds are stored as raw bits.  Reduced-precision floats (half, bfloat16, fp8 e4m3/e5m2) are
// encoded here from a double, rounding to nearest even and saturating to the largest finite value, so
// every fill is finite whatever the format's range (fp8 e4m3 tops out at 448, e5m2 at 57344, half at
// 65504).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace swzc {

enum Kind { F32, F64, F16, BF16, E4M3, E5M2, I8, U8, I16, U16, I32, U32, I64, U64, BOOL };
enum Role { IN, OUT, INOUT };
enum Fill { UNIFORM, RANGE, ARANGE, CONST };

inline size_t kind_bytes(Kind k) {
  switch (k) {
    case F64: case I64: case U64: return 8;
    case F32: case I32: case U32: return 4;
    case F16: case BF16: case I16: case U16: return 2;
    default: return 1;
  }
}

// A binary float format: exponent and mantissa bits; `ieee_top`: the all-ones exponent holds only
// infinities and NaNs (half, bfloat16, e5m2).  e4m3 keeps finite values there except the all-ones
// mantissa, its only NaN.
struct Format { int ebits, mbits; bool ieee_top; };

inline bool float_format(Kind k, Format* f) {
  switch (k) {
    case F16: *f = Format{5, 10, true}; return true;
    case BF16: *f = Format{8, 7, true}; return true;
    case E4M3: *f = Format{4, 3, false}; return true;
    case E5M2: *f = Format{5, 2, true}; return true;
    default: return false;
  }
}

inline uint32_t encode(double v, Format f) {
  const uint32_t sign = std::signbit(v) ? 1u << (f.ebits + f.mbits) : 0u;
  const int bias = (1 << (f.ebits - 1)) - 1;
  const int top = (1 << f.ebits) - 1;                     // the all-ones exponent field
  const int max_field = f.ieee_top ? top - 1 : top;       // the largest exponent field of a finite value
  const uint32_t max_mant = f.ieee_top ? (1u << f.mbits) - 1 : (1u << f.mbits) - 2;
  const uint32_t max_bits = ((uint32_t)max_field << f.mbits) | max_mant;
  if (std::isnan(v)) return max_bits | sign;  // never produced by a fill; kept finite all the same
  const double a = std::fabs(v);
  if (a == 0.0) return sign;
  const int emin = 1 - bias;  // the exponent of the smallest normal value
  int e2;
  std::frexp(a, &e2);  // a = m * 2^e2, m in [0.5, 1)
  int e = e2 - 1;
  uint32_t bits;
  if (e < emin) {  // subnormal: the mantissa counts units of 2^(emin - mbits); rounding up may reach the smallest normal
    bits = (uint32_t)std::nearbyint(std::ldexp(a, f.mbits - emin));
  } else {
    double q = std::nearbyint(std::ldexp(a, f.mbits - e));  // in [2^mbits, 2^(mbits+1)], ties to even
    if (q >= std::ldexp(1.0, f.mbits + 1)) { q = std::ldexp(1.0, f.mbits); ++e; }
    if (e + bias > max_field) return max_bits | sign;
    bits = ((uint32_t)(e + bias) << f.mbits) | ((uint32_t)q - (1u << f.mbits));
  }
  return (bits > max_bits ? max_bits : bits) | sign;
}

inline double decode(uint32_t bits, Format f) {
  const int bias = (1 << (f.ebits - 1)) - 1;
  const int top = (1 << f.ebits) - 1;
  const bool negative = (bits >> (f.ebits + f.mbits)) & 1u;
  const int field = (int)((bits >> f.mbits) & (uint32_t)top);
  const uint32_t mant = bits & ((1u << f.mbits) - 1);
  double v;
  if (f.ieee_top && field == top) v = mant ? NAN : INFINITY;
  else if (!f.ieee_top && field == top && mant == (1u << f.mbits) - 1) v = NAN;
  else if (field == 0) v = std::ldexp((double)mant, 1 - bias - f.mbits);
  else v = std::ldexp((double)((1u << f.mbits) | mant), field - bias - f.mbits);
  return negative ? -v : v;
}

// Store `v` in the element at `out` (kind_bytes(k) bytes): floats rounded, integers clamped to the type.
inline void store(Kind k, double v, unsigned char* out) {
  Format f;
  if (float_format(k, &f)) {
    const uint32_t bits = encode(v, f);
    if (kind_bytes(k) == 2) { const uint16_t b = (uint16_t)bits; std::memcpy(out, &b, 2); }
    else out[0] = (unsigned char)bits;
    return;
  }
  auto clamp = [&](double lo, double hi) { return v != v ? 0.0 : (v < lo ? lo : (v > hi ? hi : v)); };
  switch (k) {
    case F32: { const float x = (float)v; std::memcpy(out, &x, 4); return; }
    case F64: std::memcpy(out, &v, 8); return;
    case I8: { const int8_t x = (int8_t)clamp(-128, 127); std::memcpy(out, &x, 1); return; }
    case U8: { const uint8_t x = (uint8_t)clamp(0, 255); std::memcpy(out, &x, 1); return; }
    case I16: { const int16_t x = (int16_t)clamp(-32768, 32767); std::memcpy(out, &x, 2); return; }
    case U16: { const uint16_t x = (uint16_t)clamp(0, 65535); std::memcpy(out, &x, 2); return; }
    case I32: { const int32_t x = (int32_t)clamp(-2147483648.0, 2147483647.0); std::memcpy(out, &x, 4); return; }
    case U32: { const uint32_t x = (uint32_t)clamp(0, 4294967295.0); std::memcpy(out, &x, 4); return; }
    case I64: { const int64_t x = (int64_t)clamp(-9.2233720368547748e18, 9.2233720368547748e18); std::memcpy(out, &x, 8); return; }
    case U64: { const uint64_t x = (uint64_t)clamp(0, 1.8446744073709550e19); std::memcpy(out, &x, 8); return; }
    case BOOL: out[0] = v != 0.0; return;
    default: return;
  }
}

// Store an integer exactly (scalars such as sizes): the low kind_bytes(k) bytes of its two's complement.
inline void store_int(Kind k, unsigned long long v, unsigned char* out) {
  Format f;
  if (k == F32 || k == F64 || float_format(k, &f)) { store(k, (double)(long long)v, out); return; }
  if (k == BOOL) { out[0] = v != 0; return; }
  for (size_t i = 0; i < kind_bytes(k); ++i) out[i] = (unsigned char)(v >> (8 * i));
}

// The value of the element at `in` (used by the tolerance comparison).
inline double load(Kind k, const unsigned char* in) {
  Format f;
  if (float_format(k, &f)) {
    uint32_t bits = in[0];
    if (kind_bytes(k) == 2) { uint16_t b; std::memcpy(&b, in, 2); bits = b; }
    return decode(bits, f);
  }
  switch (k) {
    case F32: { float x; std::memcpy(&x, in, 4); return x; }
    case F64: { double x; std::memcpy(&x, in, 8); return x; }
    default: return NAN;  // integers are compared byte for byte
  }
}

inline bool is_float(Kind k) { Format f; return k == F32 || k == F64 || float_format(k, &f); }

// xorshift64: small, and the same stream on every platform.
struct Rng {
  uint64_t state;
  explicit Rng(uint64_t seed) : state(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t next() { state ^= state << 13; state ^= state >> 7; state ^= state << 17; return state; }
  double unit() { return (next() >> 11) * (1.0 / 9007199254740992.0); }  // [0, 1)
};

struct Buffer {
  const char* name;
  Kind kind;
  size_t elements;  // scalar elements: a float4 buffer of n vectors has 4n
  Role role;
  Fill fill;
  double a, b;  // RANGE: [a, b); ARANGE: step a; CONST: value a
  size_t bytes() const { return elements * kind_bytes(kind); }
};

// The buffer's contents for `seed`: deterministic, different between seeds and between buffers.
// UNIFORM is [-1, 1) for floats, [0, 100) for 8-bit integers, [0, 1000) for wider ones, 0 or 1 for bool.
// Filled in chunks of FILL_CHUNK elements, each from its own stream, on up to FILL_THREADS threads: the
// same bytes whatever the number of threads (a large GEMM's inputs are hundreds of MB).
constexpr size_t FILL_CHUNK = (size_t)1 << 20;
constexpr unsigned FILL_THREADS = 16;

inline void fill_range(const Buffer& buf, unsigned seed, size_t index, size_t chunk, unsigned char* out) {
  Rng rng(((uint64_t)seed * 1000003ull + index) * 0x100000001B3ull + chunk);
  const size_t width = kind_bytes(buf.kind);
  const bool narrow = width == 1;
  const size_t first = chunk * FILL_CHUNK;
  const size_t last = first + FILL_CHUNK < buf.elements ? first + FILL_CHUNK : buf.elements;
  for (size_t i = first; i < last; ++i) {
    unsigned char* at = out + i * width;
    switch (buf.fill) {
      case RANGE: {
        const long long lo = (long long)buf.a, span = (long long)buf.b - lo;
        store(buf.kind, (double)(lo + (long long)(rng.next() % (unsigned long long)(span > 0 ? span : 1))), at);
        break;
      }
      case ARANGE: store(buf.kind, (double)i * buf.a, at); break;
      case CONST: store(buf.kind, buf.a, at); break;
      default:
        if (is_float(buf.kind)) store(buf.kind, rng.unit() * 2.0 - 1.0, at);
        else if (buf.kind == BOOL) store(buf.kind, (double)(rng.next() & 1u), at);
        else store(buf.kind, (double)(rng.next() % (narrow ? 100u : 1000u)), at);
    }
  }
}

inline std::vector<unsigned char> fill(const Buffer& buf, unsigned seed, size_t index) {
  std::vector<unsigned char> out(buf.bytes());
  const size_t chunks = (buf.elements + FILL_CHUNK - 1) / FILL_CHUNK;
  const unsigned cores = std::thread::hardware_concurrency();
  const size_t threads = std::min<size_t>(chunks, cores < 1 ? 1 : cores < FILL_THREADS ? cores : FILL_THREADS);
  std::atomic<size_t> next{0};
  auto work = [&]() {
    for (size_t c = next++; c < chunks; c = next++) fill_range(buf, seed, index, c, out.data());
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  return out;
}

// Outputs start as 0xff in every byte before each run, so that an element the rewritten kernel fails
// to write cannot pass for one the original wrote.
inline void poison(std::vector<unsigned char>& image) {
  for (size_t i = 0; i < image.size(); ++i) image[i] = 0xff;
}

// True when a and b hold the same bytes; else *at is the first differing byte.
inline bool same_bytes(const std::vector<unsigned char>& a, const std::vector<unsigned char>& b, size_t* at) {
  const size_t n = a.size() < b.size() ? a.size() : b.size();
  for (size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) { *at = i; return false; }
  if (a.size() != b.size()) { *at = n; return false; }
  return true;
}

// With a tolerance (a launch spec's `tolerance`, floats only): an element passes when its bytes are
// identical, or both values are finite and |a - b| <= tol * max(1, |a|).  NaN and infinity fail.
inline bool within(const std::vector<unsigned char>& a, const std::vector<unsigned char>& b, Kind kind, double tol, size_t* at) {
  if (tol <= 0.0 || !is_float(kind)) return same_bytes(a, b, at);
  if (a.size() != b.size()) { *at = a.size() < b.size() ? a.size() : b.size(); return false; }
  const size_t width = kind_bytes(kind);
  for (size_t i = 0; i + width <= a.size(); i += width) {
    if (std::memcmp(a.data() + i, b.data() + i, width) == 0) continue;
    const double x = load(kind, a.data() + i), y = load(kind, b.data() + i);
    const double scale = std::fabs(x) > 1.0 ? std::fabs(x) : 1.0;
    if (!(std::isfinite(x) && std::isfinite(y) && std::fabs(x - y) <= tol * scale)) { *at = i; return false; }
  }
  return true;
}

// The check: two seeds; per seed both variants run on the same inputs, outputs poisoned first, and
// every output buffer is compared.  One JSON line per mismatch, then {"correct": ...}.
//   device.upload(i, bytes), device.launch(variant 0 or 1), device.download(i, size) -> bytes
template <class Device>
bool check(const std::vector<Buffer>& buffers, Device& device, double tolerance, FILE* out) {
  bool ok = true;
  for (unsigned seed = 1; seed <= 2; ++seed) {
    std::vector<std::vector<unsigned char>> inputs(buffers.size());
    for (size_t i = 0; i < buffers.size(); ++i)
      if (buffers[i].role != OUT) inputs[i] = fill(buffers[i], seed, i);
    std::vector<std::vector<unsigned char>> results[2];
    for (int v = 0; v < 2; ++v) {
      for (size_t i = 0; i < buffers.size(); ++i) {
        if (buffers[i].role == OUT) {
          std::vector<unsigned char> image(buffers[i].bytes());
          poison(image);
          device.upload(i, image);
        } else {
          device.upload(i, inputs[i]);
        }
      }
      device.launch(v);
      for (size_t i = 0; i < buffers.size(); ++i)
        results[v].push_back(buffers[i].role == IN ? std::vector<unsigned char>() : device.download(i, buffers[i].bytes()));
    }
    for (size_t i = 0; i < buffers.size(); ++i) {
      if (buffers[i].role == IN) continue;
      size_t at = 0;
      if (!within(results[0][i], results[1][i], buffers[i].kind, tolerance, &at)) {
        const size_t width = kind_bytes(buffers[i].kind);
        std::fprintf(out, "{\"seed\": %u, \"match\": false, \"buffer\": \"%s\", \"byte\": %zu, \"element\": %zu}\n", seed,
                     buffers[i].name, at, at / width);
        ok = false;
      }
    }
  }
  std::fprintf(out, "{\"correct\": %s}\n", ok ? "true" : "false");
  std::fflush(out);
  return ok;
}

}  // namespace swzc
