#pragma once
// parla-convert to-hf: a parla Transformer as the Hugging Face folder of its architecture, MarianMT
// (convert/hf_marian_export.h) or M2M-100 / NLLB-200 (convert/hf_m2m100_export.h), chosen from the checkpoint.
#include <string>

namespace parla::convert {

// Writes the folder `out`; returns the architecture written ("MarianMT", "M2M-100" or "NLLB-200").
std::string export_hf(const std::string& checkpoint, const std::string& out);

}  // namespace parla::convert
