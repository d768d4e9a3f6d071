#pragma once
// `parla-convert hf DIR`: a Hugging Face translation model folder imported by the architecture its config.json
// names (model_type): "marian" (hf_marian_import.h: OPUS-MT) or "m2m_100" (hf_m2m100_import.h: M2M-100, NLLB-200).
#include <string>

#include "convert/imported_model.h"

namespace parla::convert {

// DataError naming config.json and its model_type for an architecture parla does not import.
ImportedModel read_hf_model(const std::string& dir);

}  // namespace parla::convert
