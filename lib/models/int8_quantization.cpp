#include "models/int8_quantization.h"

#include <memory>
#include <set>

#include <torch/torch.h>

#include "core/error.h"
#include "models/transformer.h"
#include "nn/embedding.h"
#include "nn/linear.h"

namespace parla::models {

namespace {

std::string weight_name(const std::string& module) { return module.empty() ? "weight" : module + ".weight"; }

// Calls f(parameter name, linear or null, embedding or null) once per quantizable module (a shared embedding
// table is one module, visited once).
template <class F>
void for_each_quantizable(Seq2SeqModel& model, F&& f) {
  std::set<const torch::nn::Module*> seen;
  for (const auto& item : model.named_modules()) {
    if (!seen.insert(item.value().get()).second) continue;
    if (auto linear = std::dynamic_pointer_cast<nn::LinearImpl>(item.value()))
      f(weight_name(item.key()), linear.get(), static_cast<nn::EmbeddingImpl*>(nullptr));
    else if (auto embedding = std::dynamic_pointer_cast<nn::EmbeddingImpl>(item.value()))
      f(weight_name(item.key()), static_cast<nn::LinearImpl*>(nullptr), embedding.get());
  }
}

}  // namespace

void quantize_int8(Seq2SeqModel& model) {
  for_each_quantizable(model, [](const std::string&, nn::LinearImpl* l, nn::EmbeddingImpl* e) {
    if (l && !l->int8()) l->use_int8(nn::Int8Matrix::quantize(l->weight));
    if (e && !e->int8()) e->use_int8(nn::Int8Matrix::quantize(e->weight));
  });
  if (auto* t = dynamic_cast<TransformerModel*>(&model); t && t->output_weight.defined() && !t->output_int8) {
    torch::NoGradGuard no_grad;
    t->output_int8 = std::make_shared<const nn::Int8Matrix>(nn::Int8Matrix::quantize(t->output_weight));
    t->output_weight.set_data(nn::released_like(t->output_weight));
  }
}

std::vector<std::pair<std::string, const nn::Int8Matrix*>> int8_weights(Seq2SeqModel& model) {
  std::vector<std::pair<std::string, const nn::Int8Matrix*>> out;
  for_each_quantizable(model, [&](const std::string& name, nn::LinearImpl* l, nn::EmbeddingImpl* e) {
    const nn::Int8Matrix* m = l ? l->int8() : e->int8();
    if (m) out.emplace_back(name, m);
  });
  if (auto* t = dynamic_cast<TransformerModel*>(&model); t && t->output_int8)
    out.emplace_back("output_weight", t->output_int8.get());
  return out;
}

std::vector<std::string> int8_weight_names(Seq2SeqModel& model) {
  std::vector<std::string> out;
  for_each_quantizable(model,
                       [&](const std::string& name, nn::LinearImpl*, nn::EmbeddingImpl*) { out.push_back(name); });
  if (auto* t = dynamic_cast<TransformerModel*>(&model); t && t->output_weight.defined())
    out.push_back("output_weight");
  return out;
}

std::vector<int64_t> int8_weight_shape(Seq2SeqModel& model, const std::string& name) {
  if (name == "output_weight") {
    auto* t = dynamic_cast<TransformerModel*>(&model);
    if (!t || !t->output_weight.defined()) return {};
    return t->output_weight.sizes().vec();
  }
  std::vector<int64_t> shape;
  for_each_quantizable(model, [&](const std::string& n, nn::LinearImpl* l, nn::EmbeddingImpl* e) {
    if (shape.empty() && n == name) shape = (l ? l->weight : e->weight).sizes().vec();
  });
  return shape;
}

bool use_int8_weight(Seq2SeqModel& model, const std::string& name, nn::Int8Matrix m) {
  if (m.values.dim() != 2 || m.scales.dim() != 1 || m.scales.size(0) != m.values.size(0)) return false;
  if (name == "output_weight") {
    auto* t = dynamic_cast<TransformerModel*>(&model);
    if (!t || !t->output_weight.defined() || t->output_weight.sizes() != m.values.sizes()) return false;
    torch::NoGradGuard no_grad;
    t->output_int8 = std::make_shared<const nn::Int8Matrix>(std::move(m));
    t->output_weight.set_data(nn::released_like(t->output_weight));
    return true;
  }
  bool done = false;
  for_each_quantizable(model, [&](const std::string& n, nn::LinearImpl* l, nn::EmbeddingImpl* e) {
    if (done || n != name) return;
    const auto& w = l ? l->weight : e->weight;
    if (w.sizes() != m.values.sizes()) return;
    if (l) l->use_int8(std::move(m));
    else e->use_int8(std::move(m));
    done = true;
  });
  return done;
}

}  // namespace parla::models
