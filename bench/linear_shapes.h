// The Linear layers the linear benchmarks time (linear_bench, bf16_linear_bench,
// sgemm_backends_bench): one block of the peers' GPT (8 x 128 tokens, width 256) and of the `small`
// preset (8 x 256 tokens, width 384), plus the head tied to the 256-token vocabulary. A benchmark's
// arg 0 picks the model, arg 1 the layer (0 = attention qkv, 1 = attention proj, 2 = MLP fc,
// 3 = MLP proj, 4 = head).
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>

namespace deepshard::bench {

struct LinearShape {
  int64_t rows, in, out;
  bool bias;  // the tied head has none
};

inline LinearShape linear_shape(const benchmark::State& state) {
  struct Model {
    int64_t rows, c, vocab;
  };
  constexpr Model kModels[] = {{8 * 128, 256, 256}, {8 * 256, 384, 256}};
  const Model m = kModels[state.range(0)];
  const int64_t in_out[][2] = {
      {m.c, 3 * m.c}, {m.c, m.c}, {m.c, 4 * m.c}, {4 * m.c, m.c}, {m.c, m.vocab}};
  const int64_t layer = state.range(1);
  return {m.rows, in_out[layer][0], in_out[layer][1], layer != 4};
}

}  // namespace deepshard::bench
