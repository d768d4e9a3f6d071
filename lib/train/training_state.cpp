#include "train/training_state.h"

#include <ATen/CPUGeneratorImpl.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "core/bounded_json.h"
#include "core/error.h"
#include "runtime/torch_compat.h"

namespace parla::train {

namespace {

torch::Tensor state_of(at::Generator gen) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

// set_state wants a CPU byte tensor; an archive mapped onto a GPU hands its tensors back there.
void set_state_of(at::Generator gen, const torch::Tensor& state) {
  auto cpu = state.to(torch::kCPU).contiguous();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(cpu);
}

}  // namespace

GeneratorStates GeneratorStates::capture(const c10::Device& device) {
  GeneratorStates s;
  s.cpu = state_of(at::detail::getDefaultCPUGenerator());
  if (device.is_cuda()) s.cuda = state_of(compat::default_generator(device));
  return s;
}

void GeneratorStates::restore(const c10::Device& device) const {
  if (cpu.defined()) set_state_of(at::detail::getDefaultCPUGenerator(), cpu);
  if (device.is_cuda() && cuda.defined()) set_state_of(compat::default_generator(device), cuda);
}

nlohmann::json TrainingState::to_json() const {
  return {{"step", step},
          {"epoch", epoch},
          {"batch_in_epoch", batch_in_epoch},
          {"bad_steps", bad_steps},
          {"skipped_steps", skipped_steps},
          {"tokens", tokens},
          {"elapsed", elapsed},
          {"has_best", has_best},
          {"best", best},
          {"best_step", best_step},
          {"stale_validations", stale_validations},
          {"last_valid_step", last_valid_step},
          {"valid_history", valid_history}};
}

TrainingState TrainingState::from_json(const nlohmann::json& j) {
  TrainingState s;
  s.step = j.at("step");
  s.epoch = j.at("epoch");
  s.batch_in_epoch = j.at("batch_in_epoch");
  s.bad_steps = j.at("bad_steps");
  s.skipped_steps = j.at("skipped_steps");
  s.tokens = j.at("tokens");
  s.elapsed = j.at("elapsed");
  s.has_best = j.at("has_best");
  s.best = j.at("best");
  s.best_step = j.at("best_step");
  s.stale_validations = j.at("stale_validations");
  s.last_valid_step = j.at("last_valid_step");
  s.valid_history = j.at("valid_history");
  return s;
}

void TrainingState::save(models::TensorArchive& archive, const c10::Device& device) const {
  archive.write("training_state", to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  const auto rng = GeneratorStates::capture(device);
  archive.write("torch_rng", rng.cpu);
  if (rng.cuda.defined()) archive.write("torch_cuda_rng", rng.cuda);
}

void TrainingState::load(const models::TensorArchive& archive, const std::string& path,
                         const c10::Device& device) {
  const std::string* v = archive.read_string("training_state");
  torch::Tensor rng;
  if (!v || !archive.try_read("torch_rng", rng))
    throw DataError("'" + path + "' is not a training checkpoint (no training state); resume from "
                    "checkpoint_last.pt or a checkpoint_<step>.pt written by parla-train");
  try {
    *this = from_json(parse_bounded_json(*v, JsonLimits{}, "'" + path + "': training_state"));
  } catch (const nlohmann::json::exception& e) {
    throw DataError("'" + path + "': corrupt training state: " + e.what());
  }
  if (rng.scalar_type() != torch::kByte || rng.dim() != 1)
    throw DataError("'" + path + "': corrupt training state: torch_rng is not a byte vector");
  GeneratorStates states;
  states.cpu = rng;
  if (device.is_cuda() && !archive.try_read("torch_cuda_rng", states.cuda))
    spdlog::warn("'{}' holds no CUDA generator state (written on a CPU or by an older parla): training resumes on {} "
                 "with fresh dropout masks, so it will not repeat an uninterrupted run exactly",
                 path, device.str());
  states.restore(device);
}

}  // namespace parla::train
