#pragma once
// `parla-train upgrade`: rewrites a checkpoint of format 1 (a TorchScript archive, read by the strict reader that
// runs none of its code) as format 2 (safetensors), with everything it holds: weights, config, vocabularies,
// int8 weights, and a training checkpoint's optimizer state (from LibTorch's layout to parla's, by parameter
// name), training state, generators and weight average, so that `--resume` from the copy continues exactly as
// from the original. A format-2 file is rewritten unchanged. Every loader reads both formats; upgrading saves
// the strict reader's work at each load and gives a file that any safetensors reader opens.
#include <string>

namespace parla::train {

// Returns the format the input had (1 or 2). DataError naming the input, IoError naming the output.
int upgrade_checkpoint(const std::string& in, const std::string& out);

}  // namespace parla::train
