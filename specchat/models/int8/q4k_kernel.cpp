// specchat's Q4_K and Q6_K linears for the CPU (AVX-512 with VNNI, or AVX2 with FMA): x [M, K]
// float32 times a matrix whose weights stay in llama.cpp's Q4_K or Q6_K form, each row's result
// independent of the other rows. q4k.py compiles this file once per machine and says why it
// exists; the layout is q4k.py's `repack`. Nothing here knows about models or files.
//
// A tile holds 16 output rows. Per 256 inputs (a Q4_K super-block) it stores:
//   qs    32 groups of 8 inputs x 64 bytes: lane i's 4 bytes hold output i's inputs k..k+3
//         in their low nibbles and k+4..k+7 in their high nibbles;
//   sc    8 sub-blocks x 16 lanes: each sub-block's 6-bit scale (uint8);
//   mn    8 sub-blocks x 16 lanes: each sub-block's 6-bit min (uint8);
//   d     16 float32: the super-block's scale;  dmin  16 float32: its min's scale.
// A weight is d * sc * q - dmin * mn (q in 0..15), exactly Q4_K's value.
//
// Each row x is rounded to int8 (a[i]) 256 inputs at a time, each run scaled to [-127, 127]
// by its own largest magnitude (llama.cpp's Q8_K granularity; one scale for a whole row of
// 8,960 lets a few large values flatten the rest). Per super-block everything is exact
// integer arithmetic: sum_j sc_j * (sum_i q_i a_i) over its 8 sub-blocks (unsigned weights
// times signed activations) and sum_j mn_j * (sum_i a_i) (on 16-bit pairs; each sub-block's
// sum of a is counted once per row). Then s * (d * main - dmin * min) goes into the output in
// float, super-block by super-block in one fixed order (s: the run's scale), one lane one
// output: nothing depends on how many rows came together.
//
// Two instruction sets, chosen by what the compiler targets (-march=native): AVX-512 VNNI
// (a tile's 16 lanes in one register; dpbusd) and AVX2 with FMA (8 lanes a register, a
// tile in two passes, outputs 0-7 then 8-15; maddubs into 16-bit sums that cannot overflow,
// then madd by the scales; or AVX-VNNI's dpbusd where the CPU has it). One pass of 16 in register pairs spilled its 8 rows' sums to
// memory: the two passes' product of 8 rows takes 0.86 of its time (2 cores of an AMD EPYC,
// Zen 5, built for AVX2). Their integer sums are exact and their float operations the
// same, lane by lane and in the same order, so for finite rows both give the same bits
// (tests/test_q4k.py builds both and compares).

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <utility>

#ifndef SPECCHAT_OPS
#define SPECCHAT_OPS specchat  // the operations' namespace (native.py's OPERATORS)
#endif

namespace {

constexpr int TILE = 16, SUPER = 256, SUB = 32, SUBS = SUPER / SUB, HALF = 16;
constexpr int QS_BYTES = SUPER * TILE / 2, SCALE_BYTES = SUBS * TILE;
constexpr int BLOCK_BYTES = QS_BYTES + 2 * SCALE_BYTES + 2 * 4 * TILE;
constexpr int MOST_ROWS = 8;     // rows a pass over a tile takes at once
constexpr int PREFETCH_AHEAD = 16;  // super-blocks read ahead into L2 while one computes
// PREFETCH_AHEAD: without it, a verify of 8 rows on 2 cores of an AMD EPYC (Zen 4) took 3.5
// single steps, the memory and the arithmetic taking turns; with it, 1.5 (q4k.py).

// --- the instructions: LANES lanes of int32 (Ints) or float32 (Floats), a lane an output ---

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)

constexpr int LANES = 16;  // a tile's outputs in one register
using Ints = __m512i;
using Floats = __m512;
using Scales = __m512i;  // a lane's scale as int32

inline Ints zero_ints() { return _mm512_setzero_si512(); }
inline Ints bytes_of(uint8_t byte) { return _mm512_set1_epi8((char)byte); }
inline Ints load_ints(const uint8_t *p) { return _mm512_loadu_si512((const void *)p); }
inline Ints and_ints(Ints a, Ints b) { return _mm512_and_si512(a, b); }
inline Ints or_ints(Ints a, Ints b) { return _mm512_or_si512(a, b); }
inline Ints add_ints(Ints a, Ints b) { return _mm512_add_epi32(a, b); }
template <int N> inline Ints right16(Ints a) { return _mm512_srli_epi16(a, N); }
template <int N> inline Ints left16(Ints a) { return _mm512_slli_epi16(a, N); }
template <int N> inline Ints left32(Ints a) { return _mm512_slli_epi32(a, N); }

// acc + dpbusd(w, the 4 int8 at `a` in every lane): the activations broadcast from memory
// inside the instruction ({1to16}), one operation where a separate broadcast would be two or
// three (compilers load the 4 bytes into a general register first).
inline Ints dot_broadcast(Ints acc, Ints w, const int8_t *a) {
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*(const int32_t *)a));
  return acc;
}

// acc + dpwssd(w, the two int16 at `a` in every lane): lane i gets w_i.lo * a[0] + w_i.hi * a[1].
inline Ints pairs_broadcast(Ints acc, Ints w, const int16_t *a) {
  asm("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*(const int32_t *)a));
  return acc;
}

// 16 lanes of 16-bit pairs (first[i], second[i]) from two rows of 16 bytes: unsigned (mins)
// or signed (Q6_K's scales).
inline Ints byte_pairs(const uint8_t *first, const uint8_t *second, bool is_signed) {
  const __m128i a = _mm_loadu_si128((const __m128i *)first), b = _mm_loadu_si128((const __m128i *)second);
  const __m256i bytes = _mm256_set_m128i(_mm_unpackhi_epi8(a, b), _mm_unpacklo_epi8(a, b));
  return is_signed ? _mm512_cvtepi8_epi16(bytes) : _mm512_cvtepu8_epi16(bytes);
}

// 16 scales, a byte a lane, as `scaled_dots` takes them.
inline Scales scales_of(const uint8_t *p, bool is_signed) {
  const __m128i bytes = _mm_loadu_si128((const __m128i *)p);
  return is_signed ? _mm512_cvtepi8_epi32(bytes) : _mm512_cvtepu8_epi32(bytes);
}

// scale * sum_g dot(w[g], the 4 activations at a + 4 g) over G groups (unsigned weights).
template <int G>
inline Ints scaled_dots(const Ints *w, const int8_t *a, Scales scale) {
  Ints even = zero_ints(), odd = zero_ints();
#pragma GCC unroll 4
  for (int g = 0; g < G; g += 2) {
    even = dot_broadcast(even, w[g], a + 4 * g);
    odd = dot_broadcast(odd, w[g + 1], a + 4 * g + 4);
  }
  return _mm512_mullo_epi32(_mm512_add_epi32(even, odd), scale);
}

inline Floats zero_floats() { return _mm512_setzero_ps(); }
inline Floats floats_of(float value) { return _mm512_set1_ps(value); }
inline Floats load_floats(const float *p) { return _mm512_loadu_ps(p); }
inline Floats to_floats(Ints a) { return _mm512_cvtepi32_ps(a); }
inline Floats mul(Floats a, Floats b) { return _mm512_mul_ps(a, b); }
inline Floats fmadd(Floats a, Floats b, Floats c) { return _mm512_fmadd_ps(a, b, c); }
inline Floats fnmadd(Floats a, Floats b, Floats c) { return _mm512_fnmadd_ps(a, b, c); }
inline void store_floats(float *p, Floats a) { _mm512_storeu_ps(p, a); }

// 32 inputs times `inverse` as int8 (rounded to nearest even, then saturated), and the sums
// of their first and last 16 (before saturation, which a finite row never reaches).
inline void round_32(const float *x, float inverse, int8_t *a, int &first, int &last) {
  const __m512 v = _mm512_set1_ps(inverse);
  const __m512i lo = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x), v));
  const __m512i hi = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 16), v));
  _mm_storeu_si128((__m128i *)a, _mm512_cvtsepi32_epi8(lo));
  _mm_storeu_si128((__m128i *)(a + 16), _mm512_cvtsepi32_epi8(hi));
  first = _mm512_reduce_add_epi32(lo);
  last = _mm512_reduce_add_epi32(hi);
}

#elif defined(__AVX2__) && defined(__FMA__)

constexpr int LANES = 8;  // outputs 0-7 of a tile, then 8-15: two passes over its bytes
using Ints = __m256i;
using Floats = __m256;
using Scales = __m256i;  // a lane's scale: as int32 with AVX-VNNI, else in both 16-bit halves

inline Ints zero_ints() { return _mm256_setzero_si256(); }
inline Ints bytes_of(uint8_t byte) { return _mm256_set1_epi8((char)byte); }
inline Ints load_ints(const uint8_t *p) { return _mm256_loadu_si256((const __m256i *)p); }
inline Ints and_ints(Ints a, Ints b) { return _mm256_and_si256(a, b); }
inline Ints or_ints(Ints a, Ints b) { return _mm256_or_si256(a, b); }
inline Ints add_ints(Ints a, Ints b) { return _mm256_add_epi32(a, b); }
template <int N> inline Ints right16(Ints a) { return _mm256_srli_epi16(a, N); }
template <int N> inline Ints left16(Ints a) { return _mm256_slli_epi16(a, N); }
template <int N> inline Ints left32(Ints a) { return _mm256_slli_epi32(a, N); }

// acc + madd(w, the two int16 at `a` in every lane): dpwssd's sum (no pair is -32768 twice).
inline Ints pairs_broadcast(Ints acc, Ints w, const int16_t *a) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(w, _mm256_set1_epi32(*(const int32_t *)a)));
}

inline Ints byte_pairs(const uint8_t *first, const uint8_t *second, bool is_signed) {
  const __m128i pairs = _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)first),
                                          _mm_loadl_epi64((const __m128i *)second));
  return is_signed ? _mm256_cvtepi8_epi16(pairs) : _mm256_cvtepu8_epi16(pairs);
}

inline Scales scales_of(const uint8_t *p, bool is_signed) {
  const __m128i bytes = _mm_loadl_epi64((const __m128i *)p);
  const __m256i s = is_signed ? _mm256_cvtepi8_epi32(bytes) : _mm256_cvtepu8_epi32(bytes);
#if defined(__AVXVNNI__)
  return s;
#else
  return _mm256_or_si256(_mm256_and_si256(s, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(s, 16));
#endif
}

#if defined(__AVXVNNI__)

// With AVX-VNNI (Intel's cores since Alder Lake, most of them without AVX-512): the AVX-512
// path's dpbusd on 8 lanes, scale * sum_g dot(w[g], the 4 activations at a + 4 g).
template <int G>
inline Ints scaled_dots(const Ints *w, const int8_t *a, Scales scale) {
  Ints even = zero_ints(), odd = zero_ints();
#pragma GCC unroll 4
  for (int g = 0; g < G; g += 2) {
    const __m256i x = _mm256_set1_epi32(*(const int32_t *)(a + 4 * g));
    const __m256i y = _mm256_set1_epi32(*(const int32_t *)(a + 4 * g + 4));
    even = _mm256_dpbusd_avx_epi32(even, w[g], x);
    odd = _mm256_dpbusd_avx_epi32(odd, w[g + 1], y);
  }
  return _mm256_mullo_epi32(_mm256_add_epi32(even, odd), scale);
}

#else

// The same without VNNI: maddubs gives a lane's two 16-bit pair sums of a group, and these add
// up in 16 bits over `PER_SUM` groups without overflow (a pair sum is at most 2 x 15 x 128 for
// Q4_K's 4-bit weights, 2 x 63 x 128 for Q6_K's 6-bit ones); madd by the scale then adds a
// lane's two halves, each times its scale, in 32 bits.
template <int G>
inline Ints scaled_dots(const Ints *w, const int8_t *a, Scales scale) {
  constexpr int PER_SUM = G == 8 ? 8 : 2;  // 8 x 3840 and 2 x 16128 stay under 32768
  static_assert(G % PER_SUM == 0, "whole 16-bit sums");
  Ints total = zero_ints();
  for (int first = 0; first < G; first += PER_SUM) {
    __m256i sum = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int g = first; g < first + PER_SUM; g++) {
      const __m256i x = _mm256_set1_epi32(*(const int32_t *)(a + 4 * g));
      sum = _mm256_add_epi16(sum, _mm256_maddubs_epi16(w[g], x));
    }
    total = _mm256_add_epi32(total, _mm256_madd_epi16(sum, scale));
  }
  return total;
}

#endif

inline Floats zero_floats() { return _mm256_setzero_ps(); }
inline Floats floats_of(float value) { return _mm256_set1_ps(value); }
inline Floats load_floats(const float *p) { return _mm256_loadu_ps(p); }
inline Floats to_floats(Ints a) { return _mm256_cvtepi32_ps(a); }
inline Floats mul(Floats a, Floats b) { return _mm256_mul_ps(a, b); }
inline Floats fmadd(Floats a, Floats b, Floats c) { return _mm256_fmadd_ps(a, b, c); }
inline Floats fnmadd(Floats a, Floats b, Floats c) { return _mm256_fnmadd_ps(a, b, c); }
inline void store_floats(float *p, Floats a) { _mm256_storeu_ps(p, a); }

inline void round_32(const float *x, float inverse, int8_t *a, int &first, int &last) {
  const __m256 v = _mm256_set1_ps(inverse);
  int sums[2] = {0, 0};
  for (int i = 0; i < 32; i += 8) {
    alignas(32) int32_t q[8];
    _mm256_store_si256((__m256i *)q, _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i), v)));
    for (int t = 0; t < 8; t++) {
      a[i + t] = (int8_t)std::min(127, std::max(-128, q[t]));
      sums[i / 16] += q[t];
    }
  }
  first = sums[0];
  last = sums[1];
}

#else
#error "the Q4_K kernel needs AVX-512 VNNI, or AVX2 with FMA"
#endif

// The largest magnitude of n values (in any order: a maximum does not depend on it).
inline float largest(const float *x, int n) {
  float most = 0.f;
  for (int i = 0; i < n; i++) most = std::max(most, std::fabs(x[i]));
  return most;
}

struct Rows {
  const int8_t *a;      // [M, K] int8
  const int16_t *a16;   // [M, K / HALF] each 16 inputs' sum of a
  const int16_t *a32;   // [M, K / SUB] each 32 inputs' sum of a
  const float *scale;   // [M, K / SUPER] each run's magnitude / 127
  int K;
};

constexpr int PASSES = TILE / LANES;  // a tile's lane groups, one pass over its bytes each

// A tile's float sums, R rows by PASSES lane groups: zeroed, then stored once at the end.
template <int R> inline void zero_tile(Floats (&acc)[R][PASSES]) {
  for (int m = 0; m < R; m++)
    for (int pass = 0; pass < PASSES; pass++) acc[m][pass] = zero_floats();
}

template <int R>
inline void store_tile(const Floats (&acc)[R][PASSES], float *out, int m0, int N, int n0) {
  for (int m = 0; m < R; m++)
    for (int pass = 0; pass < PASSES; pass++)
      store_floats(out + (long)(m0 + m) * N + n0 + pass * LANES, acc[m][pass]);
}

// The super-blocks PREFETCH_AHEAD blocks on, read into L2 while this one computes.
inline void prefetch_ahead(const uint8_t *block, int block_bytes) {
  for (int p = 0; p < block_bytes; p += 64)
    _mm_prefetch((const char *)(block + PREFETCH_AHEAD * block_bytes + p), _MM_HINT_T1);
}

template <int R>
void tile_rows(const uint8_t *tile, int blocks, const Rows &rows, int m0, float *out, int N,
               int n0) {
  Floats acc[R][PASSES];
  zero_tile<R>(acc);
  const Ints low = bytes_of(0x0F);
  const int K = rows.K;
  for (int b = 0; b < blocks; b++) {
    const uint8_t *block = tile + (long)b * BLOCK_BYTES;
    prefetch_ahead(block, BLOCK_BYTES);
    for (int pass = 0; pass < PASSES; pass++) {
      const int lane0 = pass * LANES;  // this pass's first output in the tile
      const uint8_t *sc = block + QS_BYTES + lane0, *mn = sc + SCALE_BYTES;
      const float *d = (const float *)(block + QS_BYTES + 2 * SCALE_BYTES) + lane0;
      const Floats dv = load_floats(d), dminv = load_floats(d + TILE);
      Floats run[R];
      for (int m = 0; m < R; m++) {  // the mins' part first: - s * dmin * sum_j mn_j sum(a)_j
        run[m] = floats_of(rows.scale[(long)(m0 + m) * (K / SUPER) + b]);
        const int16_t *sums = rows.a32 + (long)(m0 + m) * (K / SUB) + b * SUBS;
        Ints mins = zero_ints();
        for (int p = 0; p < SUBS / 2; p++)
          mins = pairs_broadcast(
              mins, byte_pairs(mn + 2 * p * TILE, mn + (2 * p + 1) * TILE, false), sums + 2 * p);
        acc[m][pass] = fnmadd(to_floats(mins), mul(dminv, run[m]), acc[m][pass]);
      }
      Ints main[R];
      for (int m = 0; m < R; m++) main[m] = zero_ints();
      for (int j = 0; j < SUBS; j++) {
        const Scales scale = scales_of(sc + j * TILE, false);
        Ints w[8];  // w[g]: the weights of inputs k + 4 g .. k + 4 g + 3
        for (int g = 0; g < 4; g++) {
          const Ints v = load_ints(block + (j * 4 + g) * 64 + 4 * lane0);
          w[2 * g] = and_ints(v, low);
          w[2 * g + 1] = and_ints(right16<4>(v), low);
        }
        const long k0 = (long)b * SUPER + j * SUB;
#pragma GCC unroll 8
        for (int m = 0; m < R; m++)
          main[m] = add_ints(main[m], scaled_dots<8>(w, rows.a + (long)(m0 + m) * K + k0, scale));
      }
      for (int m = 0; m < R; m++)  // + s * d * sum_j sc_j dot_j
        acc[m][pass] = fmadd(to_floats(main[m]), mul(dv, run[m]), acc[m][pass]);
    }
  }
  store_tile<R>(acc, out, m0, N, n0);
}

using TileRows = void (*)(const uint8_t *, int, const Rows &, int, float *, int, int);

// by_rows<Body>()[r]: Body<r>, for 1 to MOST_ROWS rows at once.
template <template <int> class Body, int... R>
constexpr std::array<TileRows, MOST_ROWS + 1> table(std::integer_sequence<int, R...>) {
  return {nullptr, Body<R + 1>::run...};
}
template <int R> struct Q4Rows { static constexpr TileRows run = tile_rows<R>; };
const auto BY_ROWS = table<Q4Rows>(std::make_integer_sequence<int, MOST_ROWS>());

// Q6_K (6-bit weights, a signed 8-bit scale per 16 inputs): w = d * sc * (q - 32), q in 0..63.
// A tile's super-block: the low 4 bits as Q4_K's (32 groups of 8 inputs x 64 bytes), then the
// high 2 bits, 64 bytes per 16 inputs (two groups g, g + 1): in lane i's byte t, bits 0-1 for
// input k + t of group g, 2-3 for k + 4 + t, 4-5 and 6-7 the same of group g + 1; then the
// scales (16 x 16 lanes, int8), then d (16 float32).
constexpr int Q6_HIGH_BYTES = SUPER * TILE / 4, Q6_SCALE_BYTES = (SUPER / HALF) * TILE;
constexpr int Q6_BLOCK_BYTES = QS_BYTES + Q6_HIGH_BYTES + Q6_SCALE_BYTES + 4 * TILE;

template <int R>
void q6_tile_rows(const uint8_t *tile, int blocks, const Rows &rows, int m0, float *out, int N,
                  int n0) {
  Floats acc[R][PASSES];
  zero_tile<R>(acc);
  const Ints low = bytes_of(0x0F), high = bytes_of(0x30);
  const int K = rows.K;
  for (int b = 0; b < blocks; b++) {
    const uint8_t *block = tile + (long)b * Q6_BLOCK_BYTES;
    prefetch_ahead(block, Q6_BLOCK_BYTES);
    for (int pass = 0; pass < PASSES; pass++) {
      const int lane0 = pass * LANES;
      const uint8_t *scales = block + QS_BYTES + Q6_HIGH_BYTES;
      const uint8_t *hb = block + QS_BYTES + 4 * lane0, *sc = scales + lane0;
      const Floats dv = load_floats((const float *)(scales + Q6_SCALE_BYTES) + lane0);
      Floats run[R];
      for (int m = 0; m < R; m++) {  // the offset's part first: - s * d * 32 * sum_h sc_h sum(a)_h
        run[m] = floats_of(rows.scale[(long)(m0 + m) * (K / SUPER) + b]);
        const int16_t *sums = rows.a16 + (long)(m0 + m) * (K / HALF) + b * (SUPER / HALF);
        Ints offset = zero_ints();
        for (int p = 0; p < SUPER / HALF / 2; p++)
          offset = pairs_broadcast(
              offset, byte_pairs(sc + 2 * p * TILE, sc + (2 * p + 1) * TILE, true), sums + 2 * p);
        acc[m][pass] = fnmadd(to_floats(left32<5>(offset)), mul(dv, run[m]), acc[m][pass]);
      }
      Ints main[R];
      for (int m = 0; m < R; m++) main[m] = zero_ints();
      for (int h = 0; h < SUPER / HALF; h++) {
        const Scales scale = scales_of(sc + h * TILE, true);
        const Ints H = load_ints(hb + h * 64);
        const Ints v0 = load_ints(block + (2 * h) * 64 + 4 * lane0);
        const Ints v1 = load_ints(block + (2 * h + 1) * 64 + 4 * lane0);
        Ints w[4];
        w[0] = or_ints(and_ints(v0, low), and_ints(left16<4>(H), high));
        w[1] = or_ints(and_ints(right16<4>(v0), low), and_ints(left16<2>(H), high));
        w[2] = or_ints(and_ints(v1, low), and_ints(H, high));
        w[3] = or_ints(and_ints(right16<4>(v1), low), and_ints(right16<2>(H), high));
        const long k0 = (long)b * SUPER + h * HALF;
#pragma GCC unroll 8
        for (int m = 0; m < R; m++)
          main[m] = add_ints(main[m], scaled_dots<4>(w, rows.a + (long)(m0 + m) * K + k0, scale));
      }
      for (int m = 0; m < R; m++)  // + s * d * sum_h sc_h dot_h
        acc[m][pass] = fmadd(to_floats(main[m]), mul(dv, run[m]), acc[m][pass]);
    }
  }
  store_tile<R>(acc, out, m0, N, n0);
}

template <int R> struct Q6Rows { static constexpr TileRows run = q6_tile_rows<R>; };
const auto Q6_BY_ROWS = table<Q6Rows>(std::make_integer_sequence<int, MOST_ROWS>());

// One row of x as int8, each run of 256 over its own magnitude, and each 16 and 32 inputs'
// sum of a (exact: at most 32 * 127 in magnitude).
void quantize_row(const float *x, int K, int8_t *a, int16_t *a16, int16_t *a32, float *scale) {
  for (int r = 0; r < K / SUPER; r++) {
    const float *xr = x + r * SUPER;
    const float magnitude = std::fmax(largest(xr, SUPER), 1.1754943508222875e-38f);
    scale[r] = magnitude / 127.f;
    const float inverse = 127.f / magnitude;
    for (int i = 0; i < SUPER; i += SUB) {
      int first = 0, last = 0;
      round_32(xr + i, inverse, a + r * SUPER + i, first, last);
      a16[(r * SUPER + i) / HALF] = (int16_t)first;
      a16[(r * SUPER + i) / HALF + 1] = (int16_t)last;
      a32[(r * SUPER + i) / SUB] = (int16_t)(first + last);
    }
  }
}

// x [M, K] float32 times a matrix of tiles (16 outputs each, `block_bytes` per super-block)
// through `by_rows`; `name` for the checks' messages.
at::Tensor tiled_linear(const at::Tensor &input, const at::Tensor &tiles, int64_t outputs,
                        int block_bytes, const TileRows *by_rows, const char *name) {
  TORCH_CHECK(input.dim() == 2 && input.scalar_type() == at::kFloat, name, ": x is [M, K] float32");
  TORCH_CHECK(tiles.scalar_type() == at::kByte && tiles.is_contiguous(), name, ": tiles are uint8");
  const at::Tensor x = input.contiguous();
  const int M = x.size(0), K = x.size(1), N = outputs, per_tile = K / SUPER;
  TORCH_CHECK(K % SUPER == 0 && N % TILE == 0, name, ": K a multiple of 256, N of 16");
  TORCH_CHECK(tiles.numel() == (int64_t)(N / TILE) * per_tile * block_bytes, name, ": the tiles' size");
  at::Tensor a = at::empty({M, K}, x.options().dtype(at::kChar));
  at::Tensor a16 = at::empty({M, K / HALF}, x.options().dtype(at::kShort));
  at::Tensor a32 = at::empty({M, K / SUB}, x.options().dtype(at::kShort));
  at::Tensor scale = at::empty({M, K / SUPER}, x.options());
  const float *xp = x.data_ptr<float>();
  const Rows rows{a.data_ptr<int8_t>(), a16.data_ptr<int16_t>(), a32.data_ptr<int16_t>(),
                  scale.data_ptr<float>(), K};
  at::parallel_for(0, M, 1, [&](int64_t begin, int64_t end) {
    for (int64_t m = begin; m < end; m++)
      quantize_row(xp + m * K, K, a.data_ptr<int8_t>() + m * K, a16.data_ptr<int16_t>() + m * (K / HALF),
                   a32.data_ptr<int16_t>() + m * (K / SUB), scale.data_ptr<float>() + m * (K / SUPER));
  });
  at::Tensor out = at::empty({M, N}, x.options());
  const uint8_t *w = tiles.data_ptr<uint8_t>();
  float *y = out.data_ptr<float>();
  at::parallel_for(0, N / TILE, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; t++)
      for (int m0 = 0; m0 < M; m0 += MOST_ROWS)
        by_rows[std::min(MOST_ROWS, M - m0)](w + t * (long)per_tile * block_bytes, per_tile, rows,
                                             m0, y, N, (int)t * TILE);
  });
  return out;
}

at::Tensor q4k_linear(const at::Tensor &input, const at::Tensor &tiles, int64_t outputs) {
  return tiled_linear(input, tiles, outputs, BLOCK_BYTES, BY_ROWS.data(), "q4k_linear");
}

at::Tensor q6k_linear(const at::Tensor &input, const at::Tensor &tiles, int64_t outputs) {
  return tiled_linear(input, tiles, outputs, Q6_BLOCK_BYTES, Q6_BY_ROWS.data(), "q6k_linear");
}

}  // namespace

TORCH_LIBRARY_IMPL(SPECCHAT_OPS, CPU, m) {
  m.impl("q4k_linear", q4k_linear);
  m.impl("q6k_linear", q6k_linear);
}
