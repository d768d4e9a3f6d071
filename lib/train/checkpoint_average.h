#pragma once
// Checkpoint averaging: the element-wise mean of the weights of the last N checkpoints of one run, which
// Vaswani et al. (2017, sec. 6.1: "averaging the last 5 checkpoints") use for their results and fairseq
// (scripts/average_checkpoints.py) and Marian (scripts/checkpoints/average.py) offer as a tool. It smooths the
// noise of the last updates at no training cost.
#include <string>
#include <vector>

namespace parla::train {

// Averages the parameters and buffers of several checkpoints (same architecture) into out_path.
//
// Each checkpoint's model is rebuilt through the factory from its stored config and vocabulary sizes
// (models/checkpoint.h) and its weights loaded; floating-point tensors are averaged in double precision and
// stored in their own dtype, other tensors (integer counters) are taken from the newest checkpoint. The output
// keeps the newest checkpoint's metadata (config, SentencePiece models, info), with info["averaged_from"]
// listing the inputs and info["averaged_steps"] their steps; the newest is the one with the largest info.step,
// or the last given when steps are missing. The optimizer and trainer state is dropped, as in fairseq: the
// average is a model to translate with, not a run to resume. The write is atomic (temp file, then rename).
//
// DataError naming the file when a checkpoint is missing, not a parla checkpoint, or its architecture (model
// config other than dropout rates, vocabulary sizes, tensor names and shapes) differs from the first one's;
// UsageError for an empty list.
void average_checkpoints(const std::vector<std::string>& paths, const std::string& out_path);

// The last n numbered checkpoints (checkpoint_<step>.pt, written by the trainer when training.keep_last > 0)
// in `dir`, by step, oldest first. DataError when the folder does not exist or holds fewer than n.
std::vector<std::string> last_checkpoints(const std::string& dir, int n);

}  // namespace parla::train
