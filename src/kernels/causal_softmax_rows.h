// The row loops of the fused causal softmax (causal_softmax.cpp), shared with the blocked causal
// attention (causal_attention.cpp): rows [row0, row0 + rows) of [t, cols] matrices stored with
// `cols` floats per row, where row r keeps columns 0 .. r % t (the causal mask) and gets zeros
// after them. In place is allowed (out == in, dx == dy).
#pragma once

#include <cstdint>

namespace deepshard::kernels::detail {

// out = softmax(scale · in) over each row's unmasked columns.
void causal_softmax_rows_f32(const float* in, float* out, int64_t row0, int64_t rows, int64_t cols,
                             int64_t t, float scale);

// dx = scale · y (dy - sum(dy · y)) over each row's unmasked columns (y: the softmax's output).
void causal_softmax_grad_rows_f32(const float* y, const float* dy, float* dx, int64_t row0,
                                  int64_t rows, int64_t cols, int64_t t, float scale);

}  // namespace deepshard::kernels::detail
