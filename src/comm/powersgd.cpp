// Implementation of PowerSGD (see powersgd.h): the layout (which gradients are compressed, where
// their P and Q live) is fixed at construction; a step issues three collectives in a fixed order
// on every rank (uncompressed mean all-reduce, P sum all-reduce, Q mean all-reduce) and blocks.
#include "comm/powersgd.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>

#include "deepshard/util/error.h"

namespace deepshard::comm {

PowerSgd::PowerSgd(Group& group, PowerSgdOptions options, std::vector<GradientTensor> tensors,
                   int64_t flat_numel)
    : group_(group), options_(options), flat_numel_(flat_numel) {
  DS_CHECK(options_.matrix_approximation_rank >= 1, Error,
           "compression.params.matrix_approximation_rank must be >= 1, got ",
           options_.matrix_approximation_rank);
  DS_CHECK(options_.start_compressing_after_step >= 0, Error,
           "compression.params.start_compressing_after_step must be >= 0, got ",
           options_.start_compressing_after_step);
  DS_CHECK(options_.min_compression_rate >= 0, Error,
           "compression.params.min_compression_rate must be >= 0, got ",
           options_.min_compression_rate);
  std::sort(tensors.begin(), tensors.end(),
            [](const auto& a, const auto& b) { return a.offset < b.offset; });
  int64_t covered = 0;  // everything before it is assigned
  auto add_uncompressed = [&](int64_t offset, int64_t numel) {
    if (numel <= 0) return;
    if (!uncompressed_.empty() &&
        uncompressed_.back().offset + uncompressed_.back().numel == offset) {
      uncompressed_.back().numel += numel;
    } else {
      uncompressed_.push_back({offset, numel});
    }
    uncompressed_numel_ += numel;
  };
  for (const auto& t : tensors) {
    int64_t numel = 1;
    for (int64_t d : t.shape) numel *= d;
    DS_CHECK(t.offset >= covered && t.offset + numel <= flat_numel, Error,
             "PowerSgd: gradient at offset ", t.offset, " of ", numel,
             " elements overlaps another or leaves the flat buffer of ", flat_numel);
    add_uncompressed(covered, t.offset - covered);
    covered = t.offset + numel;
    const int64_t rows = t.shape.empty() ? 1 : t.shape[0];
    const int64_t cols = rows == 0 ? 0 : numel / rows;
    const int64_t rank = std::min({options_.matrix_approximation_rank, rows, cols});
    const bool compress =
        rank > 0 && static_cast<double>((rows + cols) * rank) * options_.min_compression_rate <
                        static_cast<double>(rows * cols);
    if (!compress) {
      add_uncompressed(t.offset, numel);
      continue;
    }
    matrices_.push_back({t.offset, rows, cols, rank, p_numel_, q_numel_});
    p_numel_ += rows * rank;
    q_numel_ += cols * rank;
  }
  add_uncompressed(covered, flat_numel - covered);
}

int64_t PowerSgd::compressed_numel() const { return uncompressed_numel_ + p_numel_ + q_numel_; }

int64_t PowerSgd::buffer_bytes(int64_t element_size) const {
  const int64_t feedback = options_.use_error_feedback ? 2 * flat_numel_ : 0;
  return (feedback + compressed_numel()) * element_size;
}

// Gram-Schmidt over the columns of `m` (rows x r), in place; a zero column stays zero.
void PowerSgd::orthogonalize(const at::Tensor& m) const {
  const int64_t r = m.size(1);
  for (int64_t i = 0; i < r; ++i) {
    at::Tensor col = m.select(1, i);
    const double norm = col.norm().item<double>() + options_.orthogonalization_epsilon;
    if (norm > 0) {
      col.div_(norm);
    } else {
      col.zero_();
    }
    if (i + 1 < r) {
      at::Tensor rest = m.narrow(1, i + 1, r - i - 1);
      rest.sub_(at::outer(col, at::mv(rest.t(), col)));
    }
  }
}

void PowerSgd::all_reduce_mean(const at::Tensor& grads, int64_t step) {
  DS_CHECK(grads.numel() == flat_numel_ && grads.is_contiguous(), Error, "PowerSgd: expected ",
           flat_numel_, " contiguous gradient elements, got ", grads.numel());
  if (!compressing(step)) {
    group_.all_reduce(grads, ReduceOp::kAvg);
    return;
  }
  at::NoGradGuard no_grad;
  const at::Tensor flat = grads.view({-1});
  if (options_.use_error_feedback) {
    if (!error_.defined()) error_ = at::zeros_like(flat);
    flat.add_(error_);
  }
  const at::Tensor input = options_.use_error_feedback ? flat.clone() : at::Tensor();

  // Uncompressed part: one buffer, mean all-reduce (in flight while the Ps are computed).
  at::Tensor uncompressed = at::empty({uncompressed_numel_}, flat.options());
  int64_t next = 0;
  for (const auto& r : uncompressed_) {
    uncompressed.narrow(0, next, r.numel).copy_(flat.narrow(0, r.offset, r.numel));
    next += r.numel;
  }
  Work uncompressed_work = group_.all_reduce_async(uncompressed, ReduceOp::kAvg);

  if (!p_memory_.defined() || p_memory_.scalar_type() != flat.scalar_type()) {
    p_memory_ = at::empty({p_numel_}, flat.options());
  }
  if (!q_memory_.defined() || q_memory_.scalar_type() != flat.scalar_type()) {
    q_memory_ = at::empty({q_numel_}, flat.options());
    q_ready_ = false;
  }
  auto m_of = [&](const Matrix& m) {
    return flat.narrow(0, m.offset, m.rows * m.cols).view({m.rows, m.cols});
  };
  auto p_of = [&](const Matrix& m) {
    return p_memory_.narrow(0, m.p_offset, m.rows * m.rank).view({m.rows, m.rank});
  };
  auto q_of = [&](const Matrix& m) {
    return q_memory_.narrow(0, m.q_offset, m.cols * m.rank).view({m.cols, m.rank});
  };
  if (!options_.warm_start || !q_ready_) {  // same seed on every rank, a new one every step
    auto generator = at::make_generator<at::CPUGeneratorImpl>(
        static_cast<uint64_t>(options_.random_seed) * 1000003u + static_cast<uint64_t>(step));
    for (const auto& m : matrices_) {
      q_of(m).copy_(at::randn({m.cols, m.rank}, generator, at::TensorOptions().dtype(at::kFloat)));
    }
  }
  for (const auto& m : matrices_) {
    orthogonalize(q_of(m));
    at::Tensor p = p_of(m);
    at::mm_out(p, m_of(m), q_of(m));
  }
  uncompressed_work.wait();
  next = 0;
  for (const auto& r : uncompressed_) {
    flat.narrow(0, r.offset, r.numel).copy_(uncompressed.narrow(0, next, r.numel));
    next += r.numel;
  }

  group_.all_reduce(p_memory_, ReduceOp::kSum);  // no division: P is orthogonalised next
  for (const auto& m : matrices_) {
    at::Tensor p = p_of(m);
    orthogonalize(p);
    at::Tensor q = q_of(m);
    at::mm_out(q, m_of(m).t(), p);
  }
  group_.all_reduce(q_memory_, ReduceOp::kAvg);
  for (const auto& m : matrices_) {
    at::Tensor out = m_of(m);
    at::mm_out(out, p_of(m), q_of(m).t());
  }
  if (options_.use_error_feedback) at::sub_out(error_, input, flat);
  q_ready_ = options_.warm_start;
}

std::map<std::string, at::Tensor> PowerSgd::state() const {
  std::map<std::string, at::Tensor> s;
  s["error"] = error_.defined() ? error_ : at::zeros({flat_numel_}, at::kFloat);
  s["q"] = q_memory_.defined() ? q_memory_ : at::zeros({q_numel_}, at::kFloat);
  s["q_ready"] = at::full({1}, q_ready_ ? 1 : 0, at::kLong);
  return s;
}

void PowerSgd::load_state(const std::map<std::string, at::Tensor>& state) {
  for (const char* key : {"error", "q", "q_ready"}) {
    DS_CHECK(state.count(key) == 1, Error, "PowerSGD state: missing \"", key, "\"");
  }
  DS_CHECK(state.at("error").numel() == flat_numel_ && state.at("q").numel() == q_numel_, Error,
           "PowerSGD state: sizes (error ", state.at("error").numel(), ", q ",
           state.at("q").numel(), ") do not match this model (", flat_numel_, ", ", q_numel_, ")");
  error_ = state.at("error").clone();
  q_memory_ = state.at("q").clone();
  q_ready_ = state.at("q_ready").item<int64_t>() != 0;
  p_memory_ = at::empty({p_numel_}, q_memory_.options());
}

}  // namespace deepshard::comm
