// The masked-LM objective of the BERT encoder (bert.h): BERT's masking of each sample drawn from
// its key. The count of predicted positions per sample is fixed (round(p T), as BERT's
// create_pretraining_data), so the mean loss over a batch's masked positions is the mean of its
// samples' means: the same for any split of the global batch over ranks and micro-steps.
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "deepshard/models/bert.h"
#include "deepshard/util/error.h"

namespace deepshard::models {

int64_t BertConfig::masked_per_sample(int64_t seq) const {
  const auto k = static_cast<int64_t>(std::llround(mask_probability * double(seq)));
  return std::clamp<int64_t>(k, 1, seq);
}

MaskedBatch mask_tokens(const BertConfig& config, const at::Tensor& inputs,
                        const at::Tensor& keys) {
  DS_CHECK(inputs.dim() == 2 && inputs.scalar_type() == at::kLong, Error,
           "bert masked-LM: inputs must be [B, T] int64, got ", inputs.sizes(), " ",
           inputs.scalar_type());
  DS_CHECK(keys.defined() && keys.dim() == 1 && keys.size(0) == inputs.size(0) &&
               keys.scalar_type() == at::kLong,
           Error, "bert masked-LM: one int64 sample key per sequence is needed (got ",
           keys.defined() ? keys.sizes() : at::IntArrayRef{}, " for ", inputs.size(0),
           " sequences)");
  const int64_t mask_id = config.mask_token_id();
  const at::Tensor host = inputs.to(at::kCPU).contiguous();
  DS_CHECK(!host.eq(mask_id).any().item<bool>(), Error, "bert masked-LM: the data holds token ",
           mask_id,
           ", the mask token (the vocabulary's last id, vocab_size - 1): set "
           "model.vocab_size one larger than the data's vocabulary");
  const at::Tensor host_keys = keys.to(at::kCPU).contiguous();
  const int64_t batch = host.size(0), seq = host.size(1);
  const int64_t k = config.masked_per_sample(seq);
  at::Tensor masked = host.clone();
  at::Tensor labels = at::full({batch, seq}, -100, at::kLong);
  const int64_t* in = host.data_ptr<int64_t>();
  int64_t* out = masked.data_ptr<int64_t>();
  int64_t* label = labels.data_ptr<int64_t>();
  for (int64_t b = 0; b < batch; ++b) {
    at::Generator gen =
        at::make_generator<at::CPUGeneratorImpl>(uint64_t(host_keys.data_ptr<int64_t>()[b]));
    // The k positions, then per position a uniform draw (the 80/10/10 choice) and a random token
    // in [0, vocab_size - 1), which never is the mask token.
    const at::Tensor positions = at::randperm(seq, gen, at::kLong).narrow(0, 0, k).contiguous();
    const at::Tensor choice = at::rand({k}, gen, at::kDouble);
    const at::Tensor random = at::randint(config.vocab_size - 1, {k}, gen, at::kLong);
    for (int64_t j = 0; j < k; ++j) {
      const int64_t pos = b * seq + positions.data_ptr<int64_t>()[j];
      const double u = choice.data_ptr<double>()[j];
      label[pos] = in[pos];
      if (u < 0.8) {
        out[pos] = mask_id;
      } else if (u < 0.9) {
        out[pos] = random.data_ptr<int64_t>()[j];
      }  // else: kept as it is
    }
  }
  return {masked.to(inputs.device()), labels.to(inputs.device())};
}

}  // namespace deepshard::models
