#pragma once
// Section "model": Architecture and sizes of the model. Keys use the literature's names (Vaswani et al. 2017
// for the Transformer, Bahdanau et al. 2015 / Luong et al. 2015 for the RNN, Devlin et al. 2019 for BERT).
// Without a preset the defaults are the Transformer `base` sizes; a preset (tiny, base, big) fills every size
// key the user did not set (the `given` set of the section's finalize hook).
#include <string>
#include <vector>

#include "core/config/schema.h"

namespace parla {

enum class ModelType { kTransformer, kRnn, kBert };
enum class Activation { kRelu, kGelu, kSwish };              // of the feed-forward sublayer
enum class LayerNormPlacement { kPost, kPre };               // after the residual sum (the paper) or before
enum class PositionEncoding { kSinusoidal, kLearned };
// sin, cos, sin, ...; all sines then all cosines; or fairseq's (M2M-100, NLLB): see the key's help
enum class SinusoidalLayout { kInterleaved, kConcatenated, kFairseq };
enum class DecoderStart { kBos, kPad, kEos };                // the token the decoder starts from
// Self-attention variants (nn/self_attention_factory.h builds them; one file each under nn/). kInherit, the
// per-stack keys' default, means "as model.attention".
enum class AttentionKind { kInherit, kFull, kLocal, kLinear, kSparse, kRouting, kPerformer, kNystrom };
// Whether the variant can run causally (decoder self-attention): every one but nystrom.
inline bool attention_kind_is_causal(AttentionKind kind) { return kind != AttentionKind::kNystrom; }
// The atomic patterns whose union is sparse attention (seed 002, Fig. 4; model.sparse_pattern).
enum class AtomicSparsePattern { kBand, kGlobal, kDilated, kRandom, kBlock };
enum class RnnCell { kGru, kLstm };
enum class RnnAttention { kBahdanau, kLuong };               // additive, or general (multiplicative)

struct ModelConfig {
  ModelType type = ModelType::kTransformer;
  std::string preset = "";           // "", tiny, base or big: fills the size keys not given explicitly

  // Transformer (and BERT) sizes; defaults are the paper's base model.
  int d_model = 512;             // model (embedding) width
  int ffn_dim = 2048;            // inner width of the position-wise feed-forward network
  int heads = 8;                 // attention heads (d_model must be divisible by heads)
  int encoder_layers = 6;        // encoder (and BERT) layers
  int decoder_layers = 6;        // decoder layers
  double dropout = 0.1;          // residual and embedding dropout (P_drop)
  double attention_dropout = 0.0;   // dropout on attention weights
  double activation_dropout = 0.0;  // dropout after the feed-forward activation
  double source_word_dropout = 0.0;  // drop whole source tokens' embeddings in training (translation models)
  double target_word_dropout = 0.0;  // drop whole target (decoder input) tokens' embeddings in training
  Activation activation = Activation::kRelu;
  LayerNormPlacement norm = LayerNormPlacement::kPost;
  PositionEncoding positions = PositionEncoding::kSinusoidal;
  // Where the sines and cosines of each frequency go: interleaved (sin, cos, sin, ...: Vaswani et al.'s formula)
  // or concatenated (all sines, then all cosines: tensor2tensor, fairseq, Marian).
  SinusoidalLayout sinusoidal_layout = SinusoidalLayout::kInterleaved;
  bool scale_embeddings = true;  // token embeddings times sqrt(d_model) (Vaswani et al. 2017, Sec. 3.4)
  bool output_bias = false;      // a bias added to the output logits (Marian's, Hugging Face's final_logits_bias)
  // The token the decoder starts from: bos (parla's id 2), pad (id 0, as Marian and MarianMT do; id 2 is then
  // an ordinary token of an imported vocabulary) or eos (id 3, as fairseq's M2M-100 and NLLB do).
  DecoderStart decoder_start = DecoderStart::kBos;
  int max_positions = 1024;              // longest sequence for learned positions (and BERT)
  bool share_embeddings = false;  // one embedding table for source and target (needs a joint vocabulary)
  bool tie_output = true;         // decoder input embedding = output projection (Press & Wolf 2017)
  AttentionKind attention = AttentionKind::kFull;  // self-attention of both stacks (not nystrom)
  AttentionKind encoder_attention = AttentionKind::kInherit;  // encoder self-attention; also nystrom
  AttentionKind decoder_attention = AttentionKind::kInherit;  // decoder self-attention; causal variants only
  int local_window = 16;           // local attention and the sparse band: attend to positions at most this far away
  // sparse (position-based patterns, seed 002 Fig. 4): which atomic patterns, and their sizes.
  std::vector<AtomicSparsePattern> sparse_pattern = {AtomicSparsePattern::kBand, AtomicSparsePattern::kGlobal,
                                                    AtomicSparsePattern::kRandom};
  int sparse_block_size = 32;      // block of the blockwise computation, of block-local and of random connections
  int sparse_global_tokens = 1;    // the first g positions attend to and are attended by every position
  int sparse_random_blocks = 1;    // random key blocks per query block
  int sparse_dilation = 2;         // dilated band: keys i +- k * dilation ...
  int sparse_dilated_window = 8;   // ... for k = 1 .. dilated_window
  // routing (Roy et al. 2021).
  int routing_clusters = 4;        // K centroids per head
  double routing_decay = 0.999;    // lambda of the centroids' moving averages
  // performer (Choromanski et al. 2021).
  int performer_features = 64;     // m random features per head
  int performer_redraw_every = 1000;  // redraw the features every this many training forward passes (0 = never)
  // nystrom (Xiong et al. 2021).
  int nystrom_landmarks = 32;       // m landmarks (segment means)
  int nystrom_pinv_iterations = 6;  // iterations of the pseudo-inverse
  int nystrom_conv_kernel = 33;     // depthwise convolution skip over the values (0 = none)
  int attention_seed = 1;           // random connections, random features and initial centroids

  // RNN (Bahdanau et al. 2015 / Luong et al. 2015).
  RnnCell rnn_cell = RnnCell::kGru;
  RnnAttention rnn_attention = RnnAttention::kBahdanau;
  int rnn_hidden = 512;                    // hidden size of each encoder direction and of the decoder
  int rnn_layers = 1;                      // stacked layers in encoder and decoder
  int embed_dim = 512;                     // RNN word embedding size
  bool input_feeding = true;               // feed the previous attentional vector into the decoder input

  // BERT.
  int segments = 2;  // segment (token type) vocabulary size

  // The variant of the encoder's or the decoder's self-attention: its own key, else model.attention.
  AttentionKind self_attention(bool decoder) const {
    const AttentionKind own = decoder ? decoder_attention : encoder_attention;
    return own == AttentionKind::kInherit ? attention : own;
  }

  static const config::SectionSchema<ModelConfig>& schema();
};

}  // namespace parla

PARLA_CHOICES(parla::ModelType, {parla::ModelType::kTransformer, "transformer"}, {parla::ModelType::kRnn, "rnn"},
              {parla::ModelType::kBert, "bert"});
PARLA_CHOICES(parla::Activation, {parla::Activation::kRelu, "relu"}, {parla::Activation::kGelu, "gelu"},
              {parla::Activation::kSwish, "swish"});
PARLA_CHOICES(parla::LayerNormPlacement, {parla::LayerNormPlacement::kPost, "post"},
              {parla::LayerNormPlacement::kPre, "pre"});
PARLA_CHOICES(parla::PositionEncoding, {parla::PositionEncoding::kSinusoidal, "sinusoidal"},
              {parla::PositionEncoding::kLearned, "learned"});
PARLA_CHOICES(parla::SinusoidalLayout, {parla::SinusoidalLayout::kInterleaved, "interleaved"},
              {parla::SinusoidalLayout::kConcatenated, "concatenated"}, {parla::SinusoidalLayout::kFairseq, "fairseq"});
PARLA_CHOICES(parla::DecoderStart, {parla::DecoderStart::kBos, "bos"}, {parla::DecoderStart::kPad, "pad"},
              {parla::DecoderStart::kEos, "eos"});
PARLA_CHOICES(parla::AtomicSparsePattern, {parla::AtomicSparsePattern::kBand, "band"},
              {parla::AtomicSparsePattern::kGlobal, "global"}, {parla::AtomicSparsePattern::kDilated, "dilated"},
              {parla::AtomicSparsePattern::kRandom, "random"}, {parla::AtomicSparsePattern::kBlock, "block"});
PARLA_CHOICES(parla::AttentionKind, {parla::AttentionKind::kInherit, ""}, {parla::AttentionKind::kFull, "full"},
              {parla::AttentionKind::kLocal, "local"}, {parla::AttentionKind::kLinear, "linear"},
              {parla::AttentionKind::kSparse, "sparse"}, {parla::AttentionKind::kRouting, "routing"},
              {parla::AttentionKind::kPerformer, "performer"}, {parla::AttentionKind::kNystrom, "nystrom"});
PARLA_CHOICES(parla::RnnCell, {parla::RnnCell::kGru, "gru"}, {parla::RnnCell::kLstm, "lstm"});
PARLA_CHOICES(parla::RnnAttention, {parla::RnnAttention::kBahdanau, "bahdanau"},
              {parla::RnnAttention::kLuong, "luong"});
