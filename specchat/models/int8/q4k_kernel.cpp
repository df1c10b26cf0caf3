// specchat's Q4_K and Q6_K linears for the CPU (AVX-512 with VNNI): x [M, K] float32 times a
// matrix whose weights stay in llama.cpp's Q4_K or Q6_K form, each row's result independent
// of the other rows. q4k.py compiles this file once per machine and says why it exists; the layout is
// q4k.py's `repack`. Nothing here knows about models or files.
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
// integer arithmetic: sum_j sc_j * (sum_i q_i a_i) over its 8 sub-blocks (VNNI's dpbusd:
// unsigned weights times signed activations) and sum_j mn_j * (sum_i a_i) (dpwssd on 16-bit
// pairs; each sub-block's sum of a is counted once per row). Then s * (d * main - dmin * min)
// goes into the output in float, super-block by super-block in one fixed order (s: the
// run's scale), one lane one output: nothing depends on how many rows came together.

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace {

constexpr int TILE = 16, SUPER = 256, SUB = 32, SUBS = SUPER / SUB, HALF = 16;
constexpr int QS_BYTES = SUPER * TILE / 2, SCALE_BYTES = SUBS * TILE;
constexpr int BLOCK_BYTES = QS_BYTES + 2 * SCALE_BYTES + 2 * 4 * TILE;
constexpr int MOST_ROWS = 8;     // rows whose accumulators stay in registers at once
constexpr int PREFETCH_AHEAD = 16;  // super-blocks read ahead into L2 while one computes
// PREFETCH_AHEAD: without it, a verify of 8 rows on 2 cores of an AMD EPYC (Zen 4) took 3.5
// single steps, the memory and the arithmetic taking turns; with it, 1.5 (q4k.py).

// acc + dpbusd(w, the 4 int8 at `a` in every lane): the activations broadcast from memory
// inside the instruction ({1to16}), one operation where a separate broadcast would be two or
// three (compilers load the 4 bytes into a general register first).
inline __m512i dot_broadcast(__m512i acc, __m512i w, const int8_t *a) {
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*(const int32_t *)a));
  return acc;
}

// acc + dpwssd(w, the two int16 at `a` in every lane): lane i gets w_i.lo * a[0] + w_i.hi * a[1].
inline __m512i pairs_broadcast(__m512i acc, __m512i w, const int16_t *a) {
  asm("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*(const int32_t *)a));
  return acc;
}

// 16 lanes of 16-bit pairs (first[i], second[i]) from two rows of 16 bytes: unsigned (mins)
// or signed (Q6_K's scales).
inline __m512i byte_pairs(const uint8_t *first, const uint8_t *second, bool is_signed) {
  const __m128i a = _mm_loadu_si128((const __m128i *)first), b = _mm_loadu_si128((const __m128i *)second);
  const __m256i bytes = _mm256_set_m128i(_mm_unpackhi_epi8(a, b), _mm_unpacklo_epi8(a, b));
  return is_signed ? _mm512_cvtepi8_epi16(bytes) : _mm512_cvtepu8_epi16(bytes);
}

struct Rows {
  const int8_t *a;      // [M, K] int8
  const int16_t *a16;   // [M, K / HALF] each 16 inputs' sum of a
  const int16_t *a32;   // [M, K / SUB] each 32 inputs' sum of a
  const float *scale;   // [M, K / SUPER] each run's magnitude / 127
  int K;
};

template <int R>
void tile_rows(const uint8_t *tile, int blocks, const Rows &rows, int m0, float *out, int N,
               int n0) {
  __m512 acc[R];
  for (int m = 0; m < R; m++) acc[m] = _mm512_setzero_ps();
  const __m512i low = _mm512_set1_epi8(0x0F);
  const int K = rows.K;
  for (int b = 0; b < blocks; b++) {
    const uint8_t *block = tile + (long)b * BLOCK_BYTES;
    for (int p = 0; p < BLOCK_BYTES; p += 64)
      _mm_prefetch((const char *)(block + PREFETCH_AHEAD * BLOCK_BYTES + p), _MM_HINT_T1);
    const uint8_t *sc = block + QS_BYTES, *mn = sc + SCALE_BYTES;
    const float *d = (const float *)(mn + SCALE_BYTES);
    const __m512 dv = _mm512_loadu_ps(d), dminv = _mm512_loadu_ps(d + TILE);
    __m512 run[R];
    for (int m = 0; m < R; m++) {  // the mins' part first: - s * dmin * sum_j mn_j sum(a)_j
      run[m] = _mm512_set1_ps(rows.scale[(long)(m0 + m) * (K / SUPER) + b]);
      const int16_t *sums = rows.a32 + (long)(m0 + m) * (K / SUB) + b * SUBS;
      __m512i mins = _mm512_setzero_si512();
      for (int p = 0; p < SUBS / 2; p++)
        mins = pairs_broadcast(mins, byte_pairs(mn + 2 * p * TILE, mn + (2 * p + 1) * TILE, false),
                               sums + 2 * p);
      acc[m] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mins), _mm512_mul_ps(dminv, run[m]), acc[m]);
    }
    __m512i main[R];
    for (int m = 0; m < R; m++) main[m] = _mm512_setzero_si512();
    for (int j = 0; j < SUBS; j++) {
      const __m512i scale = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(sc + j * TILE)));
      __m512i w[8];
      for (int g = 0; g < 4; g++) {
        const __m512i v = _mm512_loadu_si512((const void *)(block + (j * 4 + g) * 64));
        w[2 * g] = _mm512_and_si512(v, low);
        w[2 * g + 1] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
      }
      const long k0 = (long)b * SUPER + j * SUB;
#pragma GCC unroll 8
      for (int m = 0; m < R; m++) {
        const int8_t *a = rows.a + (long)(m0 + m) * K + k0;
        __m512i even = _mm512_setzero_si512(), odd = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int g = 0; g < 8; g += 2) {
          even = dot_broadcast(even, w[g], a + 4 * g);
          odd = dot_broadcast(odd, w[g + 1], a + 4 * g + 4);
        }
        main[m] = _mm512_add_epi32(main[m], _mm512_mullo_epi32(_mm512_add_epi32(even, odd), scale));
      }
    }
    for (int m = 0; m < R; m++)  // + s * d * sum_j sc_j dot_j
      acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(main[m]), _mm512_mul_ps(dv, run[m]), acc[m]);
  }
  for (int m = 0; m < R; m++)
    _mm512_storeu_ps(out + (long)(m0 + m) * N + n0, acc[m]);
}

using TileRows = void (*)(const uint8_t *, int, const Rows &, int, float *, int, int);
const TileRows BY_ROWS[MOST_ROWS + 1] = {nullptr,        tile_rows<1>, tile_rows<2>,
                                         tile_rows<3>,   tile_rows<4>, tile_rows<5>,
                                         tile_rows<6>,   tile_rows<7>, tile_rows<8>};

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
  __m512 acc[R];
  for (int m = 0; m < R; m++) acc[m] = _mm512_setzero_ps();
  const __m512i low = _mm512_set1_epi8(0x0F), high = _mm512_set1_epi8(0x30);
  const int K = rows.K;
  for (int b = 0; b < blocks; b++) {
    const uint8_t *block = tile + (long)b * Q6_BLOCK_BYTES;
    for (int p = 0; p < Q6_BLOCK_BYTES; p += 64)
      _mm_prefetch((const char *)(block + PREFETCH_AHEAD * Q6_BLOCK_BYTES + p), _MM_HINT_T1);
    const uint8_t *hb = block + QS_BYTES;
    const int8_t *sc = (const int8_t *)(hb + Q6_HIGH_BYTES);
    const __m512 dv = _mm512_loadu_ps((const float *)(sc + Q6_SCALE_BYTES));
    __m512 run[R];
    for (int m = 0; m < R; m++) {  // the offset's part first: - s * d * 32 * sum_h sc_h sum(a)_h
      run[m] = _mm512_set1_ps(rows.scale[(long)(m0 + m) * (K / SUPER) + b]);
      const int16_t *sums = rows.a16 + (long)(m0 + m) * (K / HALF) + b * (SUPER / HALF);
      __m512i offset = _mm512_setzero_si512();
      for (int p = 0; p < SUPER / HALF / 2; p++)
        offset = pairs_broadcast(offset, byte_pairs((const uint8_t *)sc + 2 * p * TILE,
                                                    (const uint8_t *)sc + (2 * p + 1) * TILE, true),
                                 sums + 2 * p);
      acc[m] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(_mm512_slli_epi32(offset, 5)),
                                _mm512_mul_ps(dv, run[m]), acc[m]);
    }
    __m512i main[R];
    for (int m = 0; m < R; m++) main[m] = _mm512_setzero_si512();
    for (int h = 0; h < SUPER / HALF; h++) {
      const __m512i scale = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(sc + h * TILE)));
      const __m512i H = _mm512_loadu_si512((const void *)(hb + h * 64));
      const __m512i v0 = _mm512_loadu_si512((const void *)(block + (2 * h) * 64));
      const __m512i v1 = _mm512_loadu_si512((const void *)(block + (2 * h + 1) * 64));
      __m512i w[4];
      w[0] = _mm512_or_si512(_mm512_and_si512(v0, low), _mm512_and_si512(_mm512_slli_epi16(H, 4), high));
      w[1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v0, 4), low),
                             _mm512_and_si512(_mm512_slli_epi16(H, 2), high));
      w[2] = _mm512_or_si512(_mm512_and_si512(v1, low), _mm512_and_si512(H, high));
      w[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v1, 4), low),
                             _mm512_and_si512(_mm512_srli_epi16(H, 2), high));
      const long k0 = (long)b * SUPER + h * HALF;
#pragma GCC unroll 8
      for (int m = 0; m < R; m++) {
        const int8_t *a = rows.a + (long)(m0 + m) * K + k0;
        __m512i even = dot_broadcast(_mm512_setzero_si512(), w[0], a);
        __m512i odd = dot_broadcast(_mm512_setzero_si512(), w[1], a + 4);
        even = dot_broadcast(even, w[2], a + 8);
        odd = dot_broadcast(odd, w[3], a + 12);
        main[m] = _mm512_add_epi32(main[m], _mm512_mullo_epi32(_mm512_add_epi32(even, odd), scale));
      }
    }
    for (int m = 0; m < R; m++)  // + s * d * sum_h sc_h dot_h
      acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(main[m]), _mm512_mul_ps(dv, run[m]), acc[m]);
  }
  for (int m = 0; m < R; m++) _mm512_storeu_ps(out + (long)(m0 + m) * N + n0, acc[m]);
}

const TileRows Q6_BY_ROWS[MOST_ROWS + 1] = {nullptr,           q6_tile_rows<1>, q6_tile_rows<2>,
                                            q6_tile_rows<3>,   q6_tile_rows<4>, q6_tile_rows<5>,
                                            q6_tile_rows<6>,   q6_tile_rows<7>, q6_tile_rows<8>};

// One row of x as int8, each run of 256 over its own magnitude, and each 16 and 32 inputs'
// sum of a (exact: at most 32 * 127 in magnitude).
void quantize_row(const float *x, int K, int8_t *a, int16_t *a16, int16_t *a32, float *scale) {
  for (int r = 0; r < K / SUPER; r++) {
    const float *xr = x + r * SUPER;
    __m512 most = _mm512_setzero_ps();
    for (int i = 0; i < SUPER; i += 16) most = _mm512_max_ps(most, _mm512_abs_ps(_mm512_loadu_ps(xr + i)));
    const float magnitude = std::fmax(_mm512_reduce_max_ps(most), 1.1754943508222875e-38f);
    scale[r] = magnitude / 127.f;
    const __m512 inverse = _mm512_set1_ps(127.f / magnitude);
    for (int i = 0; i < SUPER; i += SUB) {
      const __m512i lo = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xr + i), inverse));
      const __m512i hi = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xr + i + 16), inverse));
      _mm_storeu_si128((__m128i *)(a + r * SUPER + i), _mm512_cvtsepi32_epi8(lo));
      _mm_storeu_si128((__m128i *)(a + r * SUPER + i + 16), _mm512_cvtsepi32_epi8(hi));
      const int low_sum = _mm512_reduce_add_epi32(lo), high_sum = _mm512_reduce_add_epi32(hi);
      a16[(r * SUPER + i) / HALF] = (int16_t)low_sum;
      a16[(r * SUPER + i) / HALF + 1] = (int16_t)high_sum;
      a32[(r * SUPER + i) / SUB] = (int16_t)(low_sum + high_sum);
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
  return tiled_linear(input, tiles, outputs, BLOCK_BYTES, BY_ROWS, "q4k_linear");
}

at::Tensor q6k_linear(const at::Tensor &input, const at::Tensor &tiles, int64_t outputs) {
  return tiled_linear(input, tiles, outputs, Q6_BLOCK_BYTES, Q6_BY_ROWS, "q6k_linear");
}

}  // namespace

TORCH_LIBRARY_IMPL(specchat, CPU, m) {
  m.impl("q4k_linear", q4k_linear);
  m.impl("q6k_linear", q6k_linear);
}
