#pragma once
// Post-training int8 quantization of a translation model for CPU decoding (decoding.precision = int8; CTranslate2's
// int8 compute type, Marian's intgemm): the weight of every fully connected layer, the embedding tables and the
// output projection become Int8Matrix (nn/int8_matrix.h), symmetric per output channel; activations are quantized
// per row at run time. Layer norms, biases, positional encodings and LSTM cells stay in float.
#include <string>
#include <utility>
#include <vector>

#include "models/seq2seq.h"
#include "nn/int8_matrix.h"

namespace parla::models {

// Quantizes every such weight of `model` (on the CPU) in place and releases its float memory. Idempotent.
void quantize_int8(Seq2SeqModel& model);

// The model's int8 weights by parameter name ("decoder.layers.0.ffn.fc1.weight", "tgt_embed.weight", ...), in
// the order of named_modules; empty for a float model.
std::vector<std::pair<std::string, const nn::Int8Matrix*>> int8_weights(Seq2SeqModel& model);

// The parameter names quantize_int8 quantizes, in its order ("output_weight" last where the model has one).
std::vector<std::string> int8_weight_names(Seq2SeqModel& model);

// The shape of the model's quantizable weight `name` (as int8_weight_names names it); empty when it has none.
std::vector<int64_t> int8_weight_shape(Seq2SeqModel& model, const std::string& name);

// Installs a stored matrix as the parameter `name` (an int8 checkpoint). False when the model has no such
// quantizable weight or the shape differs.
bool use_int8_weight(Seq2SeqModel& model, const std::string& name, nn::Int8Matrix m);

}  // namespace parla::models
