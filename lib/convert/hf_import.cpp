#include "convert/hf_import.h"

#include <filesystem>

#include "convert/hf_m2m100_import.h"
#include "convert/hf_marian_import.h"
#include "core/error.h"
#include "formats/json_file.h"

namespace parla::convert {

ImportedModel read_hf_model(const std::string& dir) {
  const std::string config_path = (std::filesystem::path(dir) / "config.json").string();
  const formats::JsonFields c(config_path, formats::read_json_file(config_path, 1u << 20));
  const std::string type = c.string("model_type");
  if (type == "marian") return read_hf_marian(dir);
  if (type == "m2m_100") return read_hf_m2m100(dir);
  throw DataError(config_path + ": model_type '" + type.substr(0, 60) +
                  "' is not one parla imports: 'marian' (OPUS-MT's MarianMT) or 'm2m_100' (M2M-100, NLLB-200)");
}

}  // namespace parla::convert
