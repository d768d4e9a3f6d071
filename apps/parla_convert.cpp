// parla-convert: models in and out of parla. Imports the public OPUS-MT models, as Hugging Face hosts them
// (MarianMT folders; CTranslate2's ct2-transformers-converter takes the same) or as Marian saves them (.npz, as
// ct2-opus-mt-converter and marian-conv take), into ordinary parla checkpoints, and exports a parla Transformer
// as a MarianMT folder. The work is lib/convert; the CTranslate2 export is tools/export-ctranslate2.py, since
// that format belongs to CTranslate2's Python package.
#include <string>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "convert/hf_export.h"
#include "convert/hf_import.h"
#include "convert/imported_model.h"
#include "convert/marian_import.h"
#include "core/app.h"
#include "runtime/runtime.h"

int parla_convert_main(int argc, char** argv) {
  parla::runtime::tune_process(argc, argv);
  parla::app::CommonFlags flags;
  flags.program = "parla-convert";
  CLI::App cli(
      "Converts translation models into and out of parla checkpoints.\n"
      "  parla-convert hf DIR -o model.pt       a Hugging Face MarianMT folder (config.json, model.safetensors,\n"
      "                                         source.spm, target.spm, vocab.json)\n"
      "  parla-convert marian DIR -o model.pt   a Marian model as OPUS-MT distributes it (decoder.yml, *.npz,\n"
      "                                         *.vocab.yml, source.spm, target.spm)\n"
      "  parla-convert to-hf model.pt -o DIR    a post-norm parla Transformer as a MarianMT folder, an imported\n"
      "                                         M2M-100 / NLLB-200 model (fine-tuned or not) as its own kind of\n"
      "                                         folder (transformers, ct2-transformers-converter)\n"
      "CTranslate2 (pre- and post-norm): python tools/export-ctranslate2.py model.pt DIR\n"
      "Imported checkpoints translate, serve and quantize (parla-train quantize) like any other.",
      "parla-convert");
  parla::app::add_logging_flags(cli, flags);
  cli.require_subcommand(1);

  std::string hf_dir, hf_out;
  auto* hf = cli.add_subcommand("hf", "Import a Hugging Face translation model folder as a parla checkpoint: "
                                      "MarianMT (OPUS-MT's models on the Hub, or one saved by transformers), "
                                      "M2M-100 or NLLB-200 (config.json's model_type: marian or m2m_100)");
  hf->add_option("model", hf_dir, "The folder")->required();
  hf->add_option("-o,--output", hf_out, "Output checkpoint (written atomically)")->required();

  std::string marian_dir, marian_out;
  auto* marian = cli.add_subcommand("marian", "Import a Marian model as OPUS-MT distributes it (the folder with "
                                              "decoder.yml) as a parla checkpoint");
  marian->add_option("model", marian_dir, "The folder")->required();
  marian->add_option("-o,--output", marian_out, "Output checkpoint (written atomically)")->required();

  std::string to_hf_in, to_hf_out;
  auto* to_hf = cli.add_subcommand("to-hf", "Export a parla Transformer checkpoint as a Hugging Face folder: "
                                            "MarianMT for post-norm models, M2M-100 or NLLB-200 for models imported "
                                            "from those (other pre-norm models go to CTranslate2)");
  to_hf->add_option("checkpoint", to_hf_in, "The checkpoint")->required();
  to_hf->add_option("-o,--output", to_hf_out, "Output folder, which must not exist (written whole or not at all)")
      ->required();

  return parla::app::run(cli, flags, argc, argv, [&]() -> int {
    if (to_hf->parsed()) {
      const std::string kind = parla::convert::export_hf(to_hf_in, to_hf_out);
      spdlog::info("wrote the {} folder '{}' from '{}'", kind, to_hf_out, to_hf_in);
    }
    if (marian->parsed()) {
      parla::convert::write_checkpoint(parla::convert::read_marian(marian_dir), marian_dir, marian_out);
      spdlog::info("wrote '{}' from the Marian model in '{}'", marian_out, marian_dir);
    }
    if (hf->parsed()) {
      parla::convert::write_checkpoint(parla::convert::read_hf_model(hf_dir), hf_dir, hf_out);
      spdlog::info("wrote '{}' from the Hugging Face folder '{}'", hf_out, hf_dir);
    }
    return 0;
  });
}
