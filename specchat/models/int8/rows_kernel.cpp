// The int8 forward's row-wise operations, one call each where torch makes several: an
// RMS norm, rope with the new keys and values written into the cache and causal attention,
// and the feed-forward's silu(gate) * up. Built and loaded by rows.py; called from
// scripted.py's decoder layer.
//
// Every result here is computed by one thread, for one row (and one head), in one fixed
// order that does not depend on how many rows came in the call, where they lie in memory
// or how many threads run: plain C++ arithmetic (no reassociation is allowed without
// -ffast-math, which is not used), sums kept in LANES partial sums then added in a fixed
// tree. A verify row therefore equals the single step at its position bit for bit, which
// is what the int8 backend's flat verify stands on (model.py's docstring).
//
// Portable: no intrinsics, so it builds on any CPU the compiler targets (-march=native
// vectorizes the loops where it can; AVX-512 and AVX2 builds give the same bits, which
// tests/test_rows.py checks). A product added to a sum is one fused multiply-add: the
// compiler contracts the vector loops' a * b + c, and the scalar tails say std::fma, since
// whether a build vectorized a tail would otherwise decide its rounding.

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#ifndef SPECCHAT_OPS
#define SPECCHAT_OPS specchat  // the operations' namespace (native.py's OPERATORS)
#endif

namespace {

constexpr int LANES = 16;  // a sum's partial sums: element i goes into partial sum i % LANES
// The partial sums are held in registers of WIDTH floats, GCC's and Clang's vector extension
// (element-wise IEEE arithmetic, nothing reassociated): one register where the CPU has
// AVX-512, two of AVX2's 8 elsewhere. (A vector wider than the CPU's registers is lowered
// through memory: AVX2's attention took 7 times as long with one 16-float vector.) The same
// partial sums add up in the same tree either way, so both give the same bits.
#if defined(__AVX512F__)
constexpr int WIDTH = 16;
#else
constexpr int WIDTH = 8;
#endif
constexpr int PARTS = LANES / WIDTH;
typedef float vec __attribute__((vector_size(WIDTH * sizeof(float))));

inline vec load(const float* p) {
  vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline void store(float* p, vec v) { std::memcpy(p, &v, sizeof v); }

// The total of LANES partial sums (PARTS registers): lane l + 8 into lane l, then l + 4,
// l + 2, l + 1 (a fixed tree).
inline float lanes_total(const vec* parts) {
#if defined(__AVX512F__)
  vec t = parts[0];
  t += __builtin_shufflevector(t, t, 8, 9, 10, 11, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15);
  t += __builtin_shufflevector(t, t, 4, 5, 6, 7, 4, 5, 6, 7, 4, 5, 6, 7, 4, 5, 6, 7);
  t += __builtin_shufflevector(t, t, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
  t += __builtin_shufflevector(t, t, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1);
#else
  vec t = parts[0] + parts[1];
  t += __builtin_shufflevector(t, t, 4, 5, 6, 7, 4, 5, 6, 7);
  t += __builtin_shufflevector(t, t, 2, 3, 2, 3, 2, 3, 2, 3);
  t += __builtin_shufflevector(t, t, 1, 1, 1, 1, 1, 1, 1, 1);
#endif
  return t[0];
}

// The partial sums plus a[i] * b[i], i < n: element i into partial sum i % LANES, in order of i.
inline void add_products(vec* __restrict acc, const float* __restrict a, const float* __restrict b,
                         int64_t n) {
  int64_t i = 0;
  for (; i + LANES <= n; i += LANES)
    for (int p = 0; p < PARTS; ++p) acc[p] += load(a + i + p * WIDTH) * load(b + i + p * WIDTH);
  for (int l = 0; i < n; ++i, ++l) {
    float& partial = acc[l / WIDTH][l % WIDTH];
    partial = std::fma(a[i], b[i], partial);
  }
}

// add_products for a head_dim's last n % LANES elements (its own function, so the hot loops
// that call it keep their partial sums in registers).
__attribute__((noinline)) void add_tail(vec* __restrict acc, const float* __restrict a,
                                        const float* __restrict b, int64_t n) {
  add_products(acc, a, b, n);
}

// sum of a[i] * b[i], i < n: add_products from zero, then lanes_total.
inline float dot(const float* __restrict a, const float* __restrict b, int64_t n) {
  vec acc[PARTS] = {};
  add_products(acc, a, b, n);
  return lanes_total(acc);
}

// e^x, x clamped to [-87, 88] (beyond, float's normal numbers end): x = k ln 2 + r with k
// the integer nearest x / ln 2, e^r by its degree-7 Taylor polynomial (|r| <= ln 2 / 2:
// relative error below 2e-7), 2^k built in the exponent bits. k is rounded by adding
// 1.5 * 2^23 (the sum's low bits are then k) rather than by floor or a conversion, which
// may trap and so keep the compiler from vectorizing the loops that call this.
inline float exp_clamped(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
  const float shifted = x * 1.44269504088896341f + 12582912.0f;
  const float k = shifted - 12582912.0f;
  const float r = (x - k * 0.693145751953125f) - k * 1.428606765330187045e-06f;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t whole = __builtin_bit_cast(int32_t, shifted) - 0x4B400000;
  return p * __builtin_bit_cast(float, (whole + 127) << 23);
}

void check_rows(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.dtype() == at::kFloat && t.is_contiguous() && t.dim() >= 2,
              name, " must be contiguous float32 rows");
}

// One row: y = x / sqrt(mean(x^2) + eps) * weight.
__attribute__((noinline)) void rms_norm_row(const float* __restrict x, const float* __restrict weight,
                                            float* __restrict y, int64_t width, double eps) {
  const float mean = dot(x, x, width) / static_cast<float>(width);
  const float inverse = 1.0f / std::sqrt(mean + static_cast<float>(eps));
  for (int64_t i = 0; i < width; ++i) y[i] = x[i] * inverse * weight[i];
}

// x [n, hidden] -> x / sqrt(mean(x^2) + eps) * weight, row by row.
at::Tensor rms_norm(const at::Tensor& x_in, const at::Tensor& weight, double eps) {
  const at::Tensor x = x_in.contiguous();
  check_rows(x, "rms_norm's x");
  const int64_t n = x.size(0), width = x.size(1);
  TORCH_CHECK(weight.numel() == width && weight.is_contiguous() && weight.dtype() == at::kFloat,
              "rms_norm's weight must be float32, one per column");
  at::Tensor out = at::empty({n, width}, x.options());
  const float* xs = x.data_ptr<float>();
  const float* w = weight.data_ptr<float>();
  float* ys = out.data_ptr<float>();
  at::parallel_for(0, n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) rms_norm_row(xs + r * width, w, ys + r * width, width, eps);
  });
  return out;
}

// One row: y = silu(gate) * up, gate its first `half` values and up the rest. Its own
// function with restrict pointers, so the loops vectorize in OpenMP's outlined copy too.
// Two loops, e^-gate and then the quotient: in one, the compiler turns the clamp's far end
// into gate / (1 + e^88) for every lane, whose results are subnormal and slow (4 times the
// activation's time on AVX2). The values are the same.
__attribute__((noinline)) void silu_mul_row(const float* __restrict gate_up,
                                            float* __restrict y, int64_t half) {
  for (int64_t c = 0; c < half; ++c) y[c] = exp_clamped(-gate_up[c]);
  for (int64_t c = 0; c < half; ++c) y[c] = gate_up[c] / (1.0f + y[c]) * gate_up[half + c];
}

// gate_up [n, 2m] -> silu(gate) * up [n, m]: gate the first half of each row, up the second.
at::Tensor silu_mul(const at::Tensor& gate_up_in) {
  const at::Tensor gate_up = gate_up_in.contiguous();
  check_rows(gate_up, "silu_mul's gate_up");
  const int64_t n = gate_up.size(0), half = gate_up.size(1) / 2;
  at::Tensor out = at::empty({n, half}, gate_up.options());
  const float* gu = gate_up.data_ptr<float>();
  float* ys = out.data_ptr<float>();
  at::parallel_for(0, n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) silu_mul_row(gu + r * 2 * half, ys + r * half, half);
  });
  return out;
}

// Rotates head_dim / 2 adjacent pairs (a, b) of `in` by the turns (cos, sin) into `out`:
// (a cos - b sin, a sin + b cos).
inline void rotate(const float* in, const float* turns, float* out, int64_t pairs) {
  for (int64_t i = 0; i < pairs; ++i) {
    const float a = in[2 * i], b = in[2 * i + 1], c = turns[2 * i], s = turns[2 * i + 1];
    out[2 * i] = a * c - b * s;
    out[2 * i + 1] = a * s + b * c;
  }
}

// Positions ahead whose key or value row is fetched while this one is used: the cache rows
// come from memory (a step's matrices have streamed through every cache since the last
// layer read them), and a row's d floats are too few for the hardware to run ahead alone.
constexpr int64_t AHEAD = 8;

// A hint to fetch the cache lines of `row` (d floats); past the cache's end it is ignored.
inline void prefetch_row(const float* row, int64_t d) {
  for (int64_t i = 0; i < d; i += 64 / sizeof(float)) __builtin_prefetch(row + i);
}

// Query heads that share a key head are taken CHUNK at a time (G = 1..CHUNK in the
// templates): one read of a key or value row then serves G heads, whose sums run side by
// side. A head's arithmetic is the same whatever G is.
constexpr int CHUNK = 4;

// scores[h * end + j] = (q_h . key_j) * scale for G query heads q (rows of d) and
// positions j < end; each dot as `dot` sums it. The value rows are fetched meanwhile, for
// weighted_values.
template <int G>
void key_scores(const float* __restrict q, const float* __restrict keys,
                const float* values, int64_t stride, int64_t end, int64_t d, float scale,
                float* __restrict scores) {
  for (int64_t j = 0; j < end; ++j) {
    const float* k = keys + j * stride;
    prefetch_row(k + AHEAD * stride, d);
    prefetch_row(values + (j + AHEAD) * stride, d);
    vec acc[G][PARTS] = {};
    const int64_t whole = d - d % LANES;
    for (int64_t i = 0; i < whole; i += LANES)
      for (int p = 0; p < PARTS; ++p) {
        const vec key = load(k + i + p * WIDTH);
        for (int h = 0; h < G; ++h) acc[h][p] += load(q + h * d + i + p * WIDTH) * key;
      }
    if (whole < d)
      for (int h = 0; h < G; ++h) add_tail(acc[h], q + h * d + whole, k + whole, d - whole);
    for (int h = 0; h < G; ++h) scores[h * end + j] = lanes_total(acc[h]) * scale;
  }
}

// scores [end] -> their softmax: e^(score - the largest), over their sum (position j in
// lane j % LANES, then lanes_total).
inline void softmax(float* __restrict scores, int64_t end) {
  float largest = -INFINITY;
  for (int64_t j = 0; j < end; ++j) largest = std::max(largest, scores[j]);
  for (int64_t j = 0; j < end; ++j) scores[j] = exp_clamped(scores[j] - largest);
  vec acc[PARTS] = {};
  int64_t j = 0;
  for (; j + LANES <= end; j += LANES)
    for (int p = 0; p < PARTS; ++p) acc[p] += load(scores + j + p * WIDTH);
  for (int l = 0; j < end; ++j, ++l) acc[l / WIDTH][l % WIDTH] += scores[j];
  const float inverse = 1.0f / lanes_total(acc);
  for (j = 0; j < end; ++j) scores[j] *= inverse;
}

// out[h * d + i] = sum over j < end of weights[h * end + j] * value_j[i], in order of j.
template <int G>
void weighted_values(const float* __restrict weights, const float* __restrict values,
                     int64_t stride, int64_t end, int64_t d, float* __restrict out) {
  const int64_t whole = d - d % LANES;
  for (int64_t i = 0; i < whole; i += LANES) {  // LANES columns at a time, in registers
    vec acc[G][PARTS] = {};
    for (int64_t j = 0; j < end; ++j)
      for (int p = 0; p < PARTS; ++p) {
        const vec value = load(values + j * stride + i + p * WIDTH);
        for (int h = 0; h < G; ++h) acc[h][p] += weights[h * end + j] * value;
      }
    for (int h = 0; h < G; ++h)
      for (int p = 0; p < PARTS; ++p) store(out + h * d + i + p * WIDTH, acc[h][p]);
  }
  for (int h = 0; h < G; ++h)
    for (int64_t i = whole; i < d; ++i) {
      float sum = 0.0f;
      for (int64_t j = 0; j < end; ++j)
        sum = std::fma(weights[h * end + j], values[j * stride + i], sum);
      out[h * d + i] = sum;
    }
}

// G query heads (rows of d at q) attending over positions 0..end-1 of their key head's
// cache rows (`keys`, `values` at position 0 of that head) -> out [G, d].
template <int G>
void attend_heads(const float* q, const float* keys, const float* values, int64_t stride,
                  int64_t end, int64_t d, float* scores, float* out) {
  key_scores<G>(q, keys, values, stride, end, d, 1.0f / std::sqrt(static_cast<float>(d)),
                scores);
  for (int h = 0; h < G; ++h) softmax(scores + h * end, end);
  weighted_values<G>(scores, values, stride, end, d, out);
}

// Heads [first, first + count) of a row, CHUNK at a time.
void attend_chunks(const float* q, const float* keys, const float* values, int64_t stride,
                   int64_t end, int64_t d, int64_t count, float* scores, float* out) {
  for (int64_t h = 0; h < count; h += CHUNK) {
    const float* qh = q + h * d;
    float* oh = out + h * d;
    switch (std::min<int64_t>(CHUNK, count - h)) {
      case 1: attend_heads<1>(qh, keys, values, stride, end, d, scores, oh); break;
      case 2: attend_heads<2>(qh, keys, values, stride, end, d, scores, oh); break;
      case 3: attend_heads<3>(qh, keys, values, stride, end, d, scores, oh); break;
      default: attend_heads<4>(qh, keys, values, stride, end, d, scores, oh); break;
    }
  }
}

// qkv [n, (heads + 2 kv_heads) * d] at positions start.. -> [n, heads * d]: q and k rotated
// by `turns` [n, d / 2, 2] (cos, sin), the new keys and values written into the cache rows
// `key_rows`, `value_rows` [capacity, kv_heads, d] at start.., then each row's query heads
// attending over positions 0..start + row, query head h on key head h / (heads / kv_heads).
at::Tensor rope_attend(const at::Tensor& qkv_in, const at::Tensor& turns_in, at::Tensor key_rows,
                       at::Tensor value_rows, int64_t start, int64_t heads, int64_t kv_heads,
                       int64_t d) {
  const at::Tensor qkv = qkv_in.contiguous(), turns = turns_in.contiguous();
  check_rows(qkv, "rope_attend's qkv");
  check_rows(key_rows, "the key cache");
  check_rows(value_rows, "the value cache");
  const int64_t n = qkv.size(0), width = (heads + 2 * kv_heads) * d, pairs = d / 2;
  TORCH_CHECK(d % 2 == 0 && heads % kv_heads == 0,
              "rope_attend: head_dim even, heads a multiple of kv_heads");
  TORCH_CHECK(qkv.size(1) == width && turns.numel() == n * d && turns.dtype() == at::kFloat,
              "rope_attend's qkv or turns have the wrong shape");
  TORCH_CHECK(start + n <= key_rows.size(0) && key_rows.size(1) == kv_heads
              && key_rows.size(2) == d && value_rows.sizes() == key_rows.sizes(),
              "rope_attend's cache is too small or of the wrong shape");
  const float* rows = qkv.data_ptr<float>();
  const float* turn = turns.data_ptr<float>();
  float* keys = key_rows.data_ptr<float>();
  float* values = value_rows.data_ptr<float>();
  const int64_t stride = kv_heads * d;
  at::Tensor queries = at::empty({n, heads * d}, qkv.options());
  float* q = queries.data_ptr<float>();
  at::parallel_for(0, n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* row = rows + r * width;
      for (int64_t h = 0; h < heads; ++h)
        rotate(row + h * d, turn + r * d, q + (r * heads + h) * d, pairs);
      for (int64_t g = 0; g < kv_heads; ++g) {
        rotate(row + (heads + g) * d, turn + r * d, keys + (start + r) * stride + g * d, pairs);
        std::memcpy(values + (start + r) * stride + g * d, row + (heads + kv_heads + g) * d,
                    d * sizeof(float));
      }
    }
  });
  at::Tensor out = at::empty({n, heads * d}, qkv.options());
  float* ys = out.data_ptr<float>();
  const int64_t group = heads / kv_heads;
  at::parallel_for(0, n * kv_heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scores(CHUNK * (start + n));
    for (int64_t item = begin; item < end; ++item) {
      const int64_t r = item / kv_heads, g = item % kv_heads, first = (r * heads + g * group) * d;
      attend_chunks(q + first, keys + g * d, values + g * d, stride, start + r + 1, d, group,
                    scores.data(), ys + first);
    }
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(SPECCHAT_OPS, CPU, m) {
  m.impl("rms_norm", rms_norm);
  m.impl("silu_mul", silu_mul);
  m.impl("rope_attend", rope_attend);
}
