#pragma once
// Dynamic loss scaling for fp16 training (Micikevicius et al. 2018, "Mixed Precision Training", Sec. 3.2; the
// behaviour of fairseq's DynamicLossScaler and torch.cuda.amp.GradScaler). Small gradients underflow to zero in
// fp16, so the loss is multiplied by a scale S before the backward pass and the gradients are divided by S
// before clipping and the optimizer step. S starts large; an update whose gradients overflow (inf/NaN) is
// skipped and halves S; after `window` consecutive finite updates S doubles, probing for the largest scale that
// does not overflow. S is a power of two, so scaling and unscaling are exact in binary floating point.
#include <cstdint>
#include <string>

#include "core/config.h"
#include "models/tensor_archive.h"

namespace parla::train {

// Made from the training section (loss_scale_init, loss_scale_window, min_loss_scale), whose defaults are the
// only ones.
struct LossScalerOptions {
  double init_scale;  // the starting scale
  int64_t window;     // consecutive finite updates before the scale doubles
  double min_scale;   // below this the run stops: fp16 cannot represent its gradients
  static LossScalerOptions from_config(const TrainingConfig& t);
};

class DynamicLossScaler {
 public:
  explicit DynamicLossScaler(LossScalerOptions options);

  double scale() const { return scale_; }
  // Overflowing updates skipped so far (not counted as bad steps: the model is fine, the scale was too high).
  int64_t overflows() const { return overflows_; }
  // Finite updates since the last overflow or growth.
  int64_t good_updates() const { return good_updates_; }

  // Call once per update with whether all of its (unscaled) gradients are finite. Returns true when the
  // optimizer step may be taken; false means the update must be skipped (the scale has been halved).
  // Throws DataError naming training.precision when the halved scale falls below the minimum.
  bool update(bool gradients_finite);

  // The archive entry "loss_scaler" (JSON). load returns false, leaving a fresh scaler, when the entry is absent
  // (a checkpoint of an fp32 or bf16 run, or of a version without loss scaling).
  void save(models::TensorArchive& archive) const;
  bool load(const models::TensorArchive& archive, const std::string& path);

 private:
  LossScalerOptions options_;
  double scale_;
  int64_t good_updates_ = 0;
  int64_t overflows_ = 0;
};

}  // namespace parla::train
