#include "nn/sparse_attention.h"

#include <algorithm>
#include <string>
#include <unordered_map>

#include <torch/torch.h>

#include "core/config/model_config.h"
#include "core/error.h"
#include "nn/attention_scores.h"
#include "nn/masked_softmax.h"
#include "nn/self_attention_cache.h"

namespace parla::nn {

namespace {

// splitmix64 (Steele et al. 2014): a counter-based hash, so a draw is a pure function of its inputs; nothing is
// stored and nothing is redrawn per call.
uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

void require_positive(int64_t value, const char* key) {
  if (value < 1)
    throw ConfigError(std::string("key '") + key + "': must be a positive number of positions, got " +
                      std::to_string(value));
}

// Row i of the pattern over keys 0..L-1 (L = real length): row[j] = 1 where allowed.
void pattern_row(int64_t i, int64_t L, const SparsePattern& p, bool causal, uint8_t* row) {
  std::fill(row, row + L, uint8_t{0});
  auto set = [&](int64_t lo, int64_t hi) {  // positions lo..hi inclusive
    lo = std::max<int64_t>(lo, 0);
    hi = std::min<int64_t>(hi, L - 1);
    for (int64_t j = lo; j <= hi; ++j) row[j] = 1;
  };
  const int64_t b = p.block_size, I = i / b;
  if (p.band) set(i - p.window, i + p.window);
  if (p.global) {
    if (i < p.global_tokens) set(0, L - 1);
    else set(0, p.global_tokens - 1);
  }
  if (p.dilated)
    for (int64_t k = -p.dilated_window; k <= p.dilated_window; ++k) set(i + k * p.dilation, i + k * p.dilation);
  if (p.block_local) set(I * b, I * b + b - 1);
  if (p.random)
    for (int64_t J : random_key_blocks(p, I, L, causal)) set(J * b, J * b + b - 1);
  if (causal) std::fill(row + std::min(i + 1, L), row + L, uint8_t{0});
}

// The key blocks that query block I gathers, sorted and distinct (a key counted twice would get twice its softmax
// weight), each with a flag "one of I's random blocks" (all of its keys allowed, not only the positional ones).
// `t` is the padded batch length (blocks >= ceil(t / b) do not exist), `L` the row's real length for the random draw.
std::vector<std::pair<int64_t, bool>> key_blocks(const SparsePattern& p, int64_t I, int64_t t, int64_t L,
                                                  bool causal) {
  const int64_t b = p.block_size;
  const int64_t first = I * b, last = I * b + b - 1;           // the block's query positions
  const int64_t key_hi = causal ? std::min(last, t - 1) : t - 1;  // no key beyond the last query (causal)
  std::vector<int64_t> blocks;
  auto add = [&](int64_t lo, int64_t hi) {  // every block holding a position in lo..hi
    lo = std::max<int64_t>(lo, 0);
    hi = std::min(hi, key_hi);
    if (lo > hi) return;
    for (int64_t J = lo / b; J <= hi / b; ++J) blocks.push_back(J);
  };
  if (p.band) add(first - p.window, last + p.window);
  if (p.global) add(0, p.global_tokens - 1);
  if (p.dilated)
    for (int64_t k = -p.dilated_window; k <= p.dilated_window; ++k) add(first + k * p.dilation, last + k * p.dilation);
  if (p.block_local) add(first, last);
  std::vector<int64_t> random;
  if (p.random) random = random_key_blocks(p, I, L, causal);
  for (int64_t J : random)
    if (J * b <= key_hi) blocks.push_back(J);
  std::sort(blocks.begin(), blocks.end());
  blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
  std::vector<std::pair<int64_t, bool>> out;
  out.reserve(blocks.size());
  for (int64_t J : blocks) out.emplace_back(J, std::binary_search(random.begin(), random.end(), J));
  return out;
}

// The gather plan of a batch: rows x nb query blocks x K key-block slots; slot value nb is the sentinel (an all-zero,
// all-invalid padding block). rows is 1 when every batch row shares the plan.
struct BlockPlan {
  int64_t rows = 1, nb = 0, K = 0;
  std::vector<int64_t> block;  // [rows, nb, K]
  std::vector<uint8_t> random;  // [rows, nb, K]
};

BlockPlan plan_blocks(const SparsePattern& p, int64_t t, const std::vector<int64_t>& lengths, bool causal) {
  BlockPlan plan;
  plan.rows = static_cast<int64_t>(lengths.size());
  plan.nb = ceil_div(t, p.block_size);
  std::vector<std::vector<std::pair<int64_t, bool>>> lists;
  lists.reserve(plan.rows * plan.nb);
  for (int64_t r = 0; r < plan.rows; ++r)
    for (int64_t I = 0; I < plan.nb; ++I) {
      lists.push_back(key_blocks(p, I, t, lengths[r], causal));
      plan.K = std::max<int64_t>(plan.K, static_cast<int64_t>(lists.back().size()));
    }
  plan.K = std::max<int64_t>(plan.K, 1);
  plan.block.assign(plan.rows * plan.nb * plan.K, plan.nb);
  plan.random.assign(plan.rows * plan.nb * plan.K, 0);
  for (size_t n = 0; n < lists.size(); ++n)
    for (size_t s = 0; s < lists[n].size(); ++s) {
      plan.block[n * plan.K + s] = lists[n][s].first;
      plan.random[n * plan.K + s] = lists[n][s].second ? 1 : 0;
    }
  return plan;
}

}  // namespace

void validate(const SparsePattern& p) {
  require_positive(p.block_size, "model.sparse_block_size");
  if (p.band) require_positive(p.window, "model.local_window");
  if (p.global) require_positive(p.global_tokens, "model.sparse_global_tokens");
  if (p.dilated) {
    require_positive(p.dilation, "model.sparse_dilation");
    require_positive(p.dilated_window, "model.sparse_dilated_window");
  }
  if (p.random) require_positive(p.random_blocks, "model.sparse_random_blocks");
  if (!(p.band || p.global || p.dilated || p.random || p.block_local))
    throw ConfigError("key 'model.sparse_pattern': no pattern enabled (use one or more of: " +
                      config::names_joined<AtomicSparsePattern>() + ")");
}

std::vector<int64_t> random_key_blocks(const SparsePattern& p, int64_t query_block, int64_t real_length, bool causal) {
  require_positive(p.block_size, "model.sparse_block_size");
  const int64_t n = causal ? query_block + 1 : ceil_div(std::max<int64_t>(real_length, 0), p.block_size);
  const int64_t r = std::min(std::max<int64_t>(p.random_blocks, 0), n);
  if (r <= 0) return {};
  // Partial Fisher-Yates over 0..n-1 with the swaps kept in a map: O(r), whatever n is.
  const uint64_t key = splitmix64(splitmix64(splitmix64(p.seed) ^ static_cast<uint64_t>(query_block)) ^
                                  static_cast<uint64_t>(n));
  std::unordered_map<int64_t, int64_t> swapped;
  auto at = [&](int64_t x) {
    auto it = swapped.find(x);
    return it == swapped.end() ? x : it->second;
  };
  std::vector<int64_t> out;
  out.reserve(r);
  for (int64_t s = 0; s < r; ++s) {
    const int64_t u = s + static_cast<int64_t>(splitmix64(key ^ static_cast<uint64_t>(s)) %
                                               static_cast<uint64_t>(n - s));
    const int64_t a = at(s), c = at(u);
    out.push_back(c);
    swapped[u] = a;
    swapped[s] = c;
  }
  std::sort(out.begin(), out.end());
  return out;
}

torch::Tensor sparse_pattern_mask(int64_t length, const SparsePattern& p, bool causal) {
  validate(p);
  auto mask = torch::zeros({length, length}, torch::kUInt8);
  auto* data = mask.data_ptr<uint8_t>();
  for (int64_t i = 0; i < length; ++i) pattern_row(i, length, p, causal, data + i * length);
  return mask.to(torch::kBool);
}

torch::Tensor sparse_pattern_row(int64_t pos, int64_t len, const SparsePattern& p, bool causal) {
  validate(p);
  TORCH_CHECK(pos >= 0 && pos < len, "sparse_pattern_row: position ", pos, " outside 0..", len - 1);
  auto row = torch::zeros({len}, torch::kUInt8);
  pattern_row(pos, len, p, causal, row.data_ptr<uint8_t>());
  return row.to(torch::kBool);
}

int64_t sparse_computed_pairs(int64_t length, const SparsePattern& p, bool causal) {
  validate(p);
  if (length <= 0) return 0;
  const auto plan = plan_blocks(p, length, {length}, causal);
  const int64_t b = p.block_size;
  int64_t pairs = plan.nb * b * plan.K * b;
  if (p.global && !causal) pairs += std::min(p.global_tokens, length) * length;
  return pairs;
}

torch::Tensor sparse_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const torch::Tensor& key_valid, const SparsePattern& p, bool causal, double dropout,
                               bool training, torch::Tensor* weights) {
  validate(p);
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, "sparse_attention: q, k, v must be [B, H, T, Dh]");
  TORCH_CHECK(q.size(2) == k.size(2) && k.size(2) == v.size(2),
              "sparse_attention is self-attention: as many queries as keys");
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), Dv = v.size(3), Dk = k.size(3);
  const int64_t b = p.block_size;
  const auto dev = q.device();
  if (T == 0) {
    if (weights) *weights = torch::zeros({B, H, 0, 0}, q.options());
    return torch::zeros({B, H, 0, Dv}, v.options());
  }
  auto valid = key_valid.defined() ? key_valid.to(dev).to(torch::kBool)
                                    : torch::ones({B, T}, torch::dtype(torch::kBool).device(dev));
  TORCH_CHECK(valid.size(0) == B && valid.size(1) == T, "sparse_attention: key_valid must be [B, T]");

  // One plan for the whole batch unless the non-causal random draw depends on the rows' lengths.
  std::vector<int64_t> lengths{T};
  if (p.random && !causal && key_valid.defined()) {
    auto len = valid.sum(1).to(torch::kCPU).to(torch::kLong).contiguous();
    std::vector<int64_t> all(len.data_ptr<int64_t>(), len.data_ptr<int64_t>() + B);
    bool same = true;
    for (int64_t x : all) same = same && ceil_div(x, b) == ceil_div(all[0], b);
    lengths = same ? std::vector<int64_t>{all[0]} : all;
  }
  const auto plan = plan_blocks(p, T, lengths, causal);
  const int64_t R = plan.rows, nb = plan.nb, K = plan.K, Tp = nb * b, Text = Tp + b;  // Text: + sentinel block
  auto lidx = torch::kLong;
  auto blk = torch::from_blob(const_cast<int64_t*>(plan.block.data()), {R, nb, K}, lidx).clone().to(dev);
  auto rnd = torch::from_blob(const_cast<uint8_t*>(plan.random.data()), {R, nb, K}, torch::kUInt8)
                 .to(torch::kBool)
                 .to(dev);
  auto per_slot = [&](const torch::Tensor& s) {  // [R, nb, K] -> [R, nb, 1, K*b]: each slot's value for its b keys
    return s.unsqueeze(-1).expand({R, nb, K, b}).reshape({R, nb, 1, K * b});
  };
  auto kpos = (blk.unsqueeze(-1) * b + torch::arange(b, torch::dtype(lidx).device(dev))).reshape({R, nb, 1, K * b});
  auto qpos = torch::arange(Tp, torch::dtype(lidx).device(dev)).view({1, nb, b, 1});

  // Element mask [B, nb, b, K*b] from the actual positions.
  auto allowed = torch::zeros({R, nb, b, K * b}, torch::dtype(torch::kBool).device(dev));
  if (p.band) allowed = allowed.logical_or((qpos - kpos).abs().le(p.window));
  if (p.global) allowed = allowed.logical_or(kpos.lt(p.global_tokens)).logical_or(qpos.lt(p.global_tokens));
  if (p.dilated) {
    auto d = kpos - qpos;
    allowed = allowed.logical_or(d.remainder(p.dilation).eq(0).logical_and(d.abs().le(p.dilation * p.dilated_window)));
  }
  if (p.block_local)
    allowed = allowed.logical_or(per_slot(blk.eq(torch::arange(nb, torch::dtype(lidx).device(dev)).view({1, nb, 1}))));
  if (p.random) allowed = allowed.logical_or(per_slot(rnd));
  if (causal) allowed = allowed.logical_and(kpos.le(qpos));
  auto valid_ext = torch::cat({valid, torch::zeros({B, Text - T}, valid.options())}, 1);  // [B, Text]
  auto kvalid = valid_ext.gather(1, kpos.expand({B, nb, 1, K * b}).reshape({B, nb * K * b})).view({B, nb, 1, K * b});
  auto qvalid = valid_ext.narrow(1, 0, Tp).view({B, nb, b, 1});
  allowed = allowed.logical_and(kvalid).logical_and(qvalid).unsqueeze(1);  // [B, 1, nb, b, K*b]

  // Gather the keys and values of every slot: [B, H, nb, K*b, D]. Rows are flattened with the batch so that one
  // index_select serves per-row plans; its backward (index_add) sums the gradient of keys gathered several times.
  auto row_index = (kpos.expand({B, nb, 1, K * b}) +
                    torch::arange(B, torch::dtype(lidx).device(dev)).view({B, 1, 1, 1}) * Text)
                       .reshape({-1});
  auto gather = [&](const torch::Tensor& x) {
    const int64_t D = x.size(3);
    auto padded = torch::cat({x, torch::zeros({B, H, Text - T, D}, x.options())}, 2);
    auto flat = padded.permute({0, 2, 1, 3}).reshape({B * Text, H * D});
    return flat.index_select(0, row_index).view({B, nb, K * b, H, D}).permute({0, 3, 1, 2, 4});
  };
  auto kg = gather(k), vg = gather(v);
  auto qb = torch::cat({q, torch::zeros({B, H, Tp - T, Dk}, q.options())}, 2).view({B, H, nb, b, Dk});
  auto w = masked_softmax(scaled_dot_scores(qb, kg), allowed);  // [B, H, nb, b, K*b], Eq. 1 on the pattern
  auto wd = dropout > 0 && training ? torch::dropout(w, dropout, true) : w;
  auto out = torch::matmul(wd, vg).reshape({B, H, Tp, Dv}).narrow(2, 0, T);

  // Non-causal global queries see every key: g dense rows (BigBird's ITC), written in by concatenation.
  const int64_t g = p.global && !causal ? std::min(p.global_tokens, T) : 0;
  torch::Tensor wg;
  if (g > 0) {
    auto allowed_g = valid.view({B, 1, 1, T}).logical_and(valid.narrow(1, 0, g).view({B, 1, g, 1}));
    wg = masked_softmax(scaled_dot_scores(q.narrow(2, 0, g), k), allowed_g);  // [B, H, g, T]
    auto wgd = dropout > 0 && training ? torch::dropout(wg, dropout, true) : wg;
    out = torch::cat({torch::matmul(wgd, v), out.narrow(2, g, T - g)}, 2);
  }

  if (weights) {
    auto index = kpos.unsqueeze(1).expand({B, H, nb, b, K * b}).contiguous();
    auto dense = torch::zeros({B, H, nb, b, Text}, w.options()).scatter_add(-1, index, w);
    dense = dense.view({B, H, Tp, Text}).narrow(2, 0, T).narrow(3, 0, T);
    if (g > 0) dense = torch::cat({wg, dense.narrow(2, g, T - g)}, 2);
    *weights = dense;
  }
  return out;
}

SparseSelfAttentionImpl::SparseSelfAttentionImpl(const MultiHeadAttentionOptions& options, const SparsePattern& pattern)
    : SelfAttentionImpl(options), pattern_(pattern) {
  validate(pattern_);
}

torch::Tensor SparseSelfAttentionImpl::attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                              const torch::Tensor& key_valid, bool causal, torch::Tensor* weights) {
  return sparse_attention(q, k, v, key_valid, pattern_, causal, attention_dropout(), is_training(), weights);
}

torch::Tensor SparseSelfAttentionImpl::attend_step(const torch::Tensor& q, const torch::Tensor& k,
                                                   const torch::Tensor& v, SelfAttentionCache& cache,
                                                   torch::Tensor* weights) {
  cache.kv.append(step_heads(k), step_heads(v));
  auto query = step_heads(q);
  auto c = cached_positions(query, cache);
  const int64_t L = c.k.size(2);
  auto pattern = torch::zeros({c.rows, L}, torch::kBool);
  for (int64_t n = 0; n < c.rows; ++n) {
    const int64_t pos = c.length - 1 - c.start[n];
    pattern[n].narrow(0, c.start[n] - c.first, pos + 1).copy_(sparse_pattern_row(pos, pos + 1, pattern_, true));
  }
  auto allowed = pattern.view({c.rows, 1, 1, L}).to(query.device());
  return merge_heads(softmax_attention(query.unsqueeze(2), c.k, c.v, allowed, weights));  // [N, H, 1, Dh]
}

}  // namespace parla::nn
