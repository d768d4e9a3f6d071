#pragma once
// Position information added to token embeddings (Vaswani et al. 2017, Sec. 3.5):
//   sinusoidal  PE(pos, 2i) = sin(pos / 10000^(2i/d)),  PE(pos, 2i+1) = cos(pos / 10000^(2i/d)); unlimited length.
//               Laid out interleaved, as written, or concatenated: column i < d/2 the sine of frequency i, column
//               d/2 + i its cosine (tensor2tensor, fairseq, Marian), the same values in another order.
//   learned     one trained vector per position (Gehring et al. 2017; BERT), up to max_positions
#include <memory>
#include <mutex>
#include <string>

#include <torch/nn/module.h>
#include <torch/types.h>

#include "core/config/model_config.h"

namespace parla::nn {

// The sinusoidal table [length, dim] for positions offset .. offset+length-1 (dim may be odd; concatenated puts
// the extra sine of an odd dim at the end of the sines, as Hugging Face's MarianMT). fairseq's layout (M2M-100,
// NLLB): row p is fairseq's SinusoidalPositionalEmbedding of position p + 2 (its padding_idx 1 plus one), the
// frequencies 10000^(-i/(h-1)) for h = dim/2, the sines then the cosines, a zero column last for an odd dim.
torch::Tensor sinusoidal_table(int64_t length, int64_t dim, int64_t offset = 0,
                               SinusoidalLayout layout = SinusoidalLayout::kInterleaved);

class PositionalEncodingImpl : public torch::nn::Module {
 public:
  PositionalEncodingImpl(PositionEncoding kind, int64_t max_positions, int64_t dim,
                         SinusoidalLayout layout = SinusoidalLayout::kInterleaved);
  // Encodings [length, dim] of positions offset .. offset+length-1. Sinusoidal: on `like`'s device and dtype
  // (pass the embedding weight's options), so a model moved with ->to(cuda) gets its table there although the
  // table is no buffer (checkpoints written before devices existed have no entry for it). Learned: the weight's
  // rows, wherever the module lives. Throws DataError past max_positions (learned only).
  torch::Tensor forward(int64_t length, int64_t offset, const torch::TensorOptions& like);
  // One position per row: positions int64 [N] (each below `bound`) -> [N, dim], row n equal to
  // forward(1, positions[n])[0]. For batches whose rows are at different steps (continuous batching).
  torch::Tensor at(const torch::Tensor& positions, int64_t bound, const torch::TensorOptions& like);
  bool learned() const { return weight.defined(); }
  // Longest sequence: max_positions for learned, INT64_MAX for sinusoidal.
  int64_t max_positions() const;

  torch::Tensor weight;  // learned only: [max_positions, dim], normal(0, dim^-0.5)

 private:
  int64_t max_positions_, dim_;
  SinusoidalLayout layout_ = SinusoidalLayout::kInterleaved;
  torch::Tensor table_;  // sinusoidal cache on the last device/dtype asked for, grown on demand (not saved)
  std::shared_ptr<std::mutex> table_mutex_ = std::make_shared<std::mutex>();  // shared_ptr: modules are copied
};
TORCH_MODULE(PositionalEncoding);

}  // namespace parla::nn
