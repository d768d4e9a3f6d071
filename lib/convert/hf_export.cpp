#include "convert/hf_export.h"

#include "convert/hf_m2m100_export.h"
#include "convert/hf_marian_export.h"
#include "models/checkpoint.h"

namespace parla::convert {

std::string export_hf(const std::string& checkpoint, const std::string& out) {
  const auto meta = models::read_meta(checkpoint);
  if (!is_m2m100_architecture(meta)) {
    export_hf_marian(checkpoint, out);
    return "MarianMT";
  }
  export_hf_m2m100(checkpoint, out);
  for (const auto& [code, token] : meta.languages["codes"].items())
    return code == token ? "NLLB-200" : "M2M-100";
  return "M2M-100";
}

}  // namespace parla::convert
