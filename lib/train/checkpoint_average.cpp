#include "train/checkpoint_average.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <regex>
#include <utility>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <torch/nn/module.h>

#include "core/config.h"
#include "core/error.h"
#include "models/bert.h"
#include "models/checkpoint.h"
#include "models/factory.h"

namespace parla::train {

namespace {

using nlohmann::json;

// The first model key whose value differs, ignoring dropout rates (they do not change the weights' meaning);
// empty when the architectures agree.
std::string architecture_difference(const json& a, const json& b) {
  const json& ma = a.contains("model") ? a["model"] : json::object();
  const json& mb = b.contains("model") ? b["model"] : json::object();
  std::map<std::string, std::pair<json, json>> keys;
  for (auto it = ma.begin(); it != ma.end(); ++it) keys[it.key()].first = it.value();
  for (auto it = mb.begin(); it != mb.end(); ++it) keys[it.key()].second = it.value();
  for (const auto& [key, values] : keys) {
    if (key.find("dropout") != std::string::npos) continue;
    if (values.first != values.second)
      return "model." + key + " is " + values.second.dump() + ", not " + values.first.dump();
  }
  return "";
}

int64_t step_of(const models::ModelMeta& meta) {
  if (meta.info.is_object() && meta.info.contains("step") && meta.info["step"].is_number_integer())
    return meta.info["step"].get<int64_t>();
  return -1;
}

// Every parameter and buffer by its dotted name.
std::vector<std::pair<std::string, torch::Tensor>> named_tensors(torch::nn::Module& m) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (auto& p : m.named_parameters(true)) out.emplace_back(p.key(), p.value());
  for (auto& b : m.named_buffers(true)) out.emplace_back(b.key(), b.value());
  return out;
}

}  // namespace

void average_checkpoints(const std::vector<std::string>& paths, const std::string& out_path) {
  if (paths.empty()) throw UsageError("checkpoint averaging needs at least one checkpoint");
  torch::NoGradGuard no_grad;

  std::vector<models::ModelMeta> metas;
  metas.reserve(paths.size());
  for (const auto& p : paths) {
    metas.push_back(models::read_meta(p));
    models::require_float_checkpoint(metas.back(), p, "averaging");
  }
  for (size_t i = 1; i < paths.size(); ++i) {
    std::string diff = architecture_difference(metas[0].config, metas[i].config);
    if (diff.empty() && (metas[i].src_vocab_size != metas[0].src_vocab_size ||
                         metas[i].tgt_vocab_size != metas[0].tgt_vocab_size))
      diff = "vocabulary sizes are " + std::to_string(metas[i].src_vocab_size) + "/" +
             std::to_string(metas[i].tgt_vocab_size) + ", not " + std::to_string(metas[0].src_vocab_size) + "/" +
             std::to_string(metas[0].tgt_vocab_size);
    if (!diff.empty())
      throw DataError(paths[i] + ": cannot average with " + paths[0] + ": different architecture (" + diff + ")");
  }

  // Newest = largest info.step; the last given wins ties and missing steps.
  size_t newest = paths.size() - 1;
  for (size_t i = 0; i < paths.size(); ++i)
    if (step_of(metas[i]) > step_of(metas[newest])) newest = i;

  // Sum in double, one checkpoint in memory at a time.
  std::vector<std::pair<std::string, torch::Tensor>> sums;
  for (size_t i = 0; i < paths.size(); ++i) {
    auto model = models::build_saved_model(paths[i], metas[i]);
    models::load_weights(paths[i], *model);
    auto tensors = named_tensors(*model);
    if (i == 0) {
      for (auto& [name, t] : tensors) sums.emplace_back(name, t.to(torch::kFloat64));
      continue;
    }
    if (tensors.size() != sums.size())
      throw DataError(paths[i] + ": cannot average with " + paths[0] + ": it has " + std::to_string(tensors.size()) +
                      " tensors, not " + std::to_string(sums.size()));
    for (size_t k = 0; k < tensors.size(); ++k) {
      const auto& [name, t] = tensors[k];
      if (name != sums[k].first || t.sizes() != sums[k].second.sizes())
        throw DataError(paths[i] + ": cannot average with " + paths[0] + ": tensor '" + name + "' " +
                        c10::str(t.sizes()) + " does not match '" + sums[k].first + "' " +
                        c10::str(sums[k].second.sizes()));
      sums[k].second.add_(t.to(torch::kFloat64));
    }
  }

  // The output model starts as the newest checkpoint (its integer buffers are kept) and takes the means.
  // Performer's random features are a draw, not a weight: the mean of orthogonal draws is not one (its rows
  // shrink, biasing the kernel estimate), so the newest checkpoint's draw is kept.
  auto model = models::build_saved_model(paths[newest], metas[newest]);
  models::load_weights(paths[newest], *model);
  auto targets = named_tensors(*model);
  const double n = static_cast<double>(paths.size());
  auto is_draw = [](const std::string& name) {
    static const std::string suffix = "performer_features";
    return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  for (size_t k = 0; k < targets.size(); ++k) {
    auto& t = targets[k].second;
    if (t.is_floating_point() && !is_draw(targets[k].first)) t.copy_((sums[k].second / n).to(t.scalar_type()));
  }

  models::ModelMeta meta = metas[newest];
  if (!meta.info.is_object()) meta.info = json::object();
  json steps = json::array();
  for (const auto& m : metas) steps.push_back(step_of(m) >= 0 ? json(step_of(m)) : json(nullptr));
  meta.info["averaged_from"] = paths;
  meta.info["averaged_steps"] = steps;
  models::save_checkpoint(out_path, *model, meta);
  spdlog::info("averaged {} checkpoints into '{}' (metadata of '{}')", paths.size(), out_path, paths[newest]);
}

std::vector<std::string> last_checkpoints(const std::string& dir, int n) {
  namespace fs = std::filesystem;
  if (n < 1) throw UsageError("the number of checkpoints to average must be at least 1, not " + std::to_string(n));
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw DataError(dir + ": not a folder of checkpoints");
  static const std::regex numbered("checkpoint_([0-9]{1,18})\\.pt");
  std::vector<std::pair<int64_t, std::string>> found;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && std::regex_match(name, m, numbered))
      found.emplace_back(std::stoll(m[1].str()), entry.path().string());
  }
  if (ec) throw DataError(dir + ": cannot list the folder: " + ec.message());
  if (static_cast<int>(found.size()) < n)
    throw DataError(dir + ": holds " + std::to_string(found.size()) + " numbered checkpoints (checkpoint_<step>.pt), " +
                    "fewer than the " + std::to_string(n) + " to average; set training.keep_last >= " +
                    std::to_string(n));
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (size_t i = found.size() - static_cast<size_t>(n); i < found.size(); ++i) out.push_back(found[i].second);
  return out;
}

}  // namespace parla::train
