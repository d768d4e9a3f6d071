// Data-parallel training over c10d Gloo on 127.0.0.1. Multi-process cases re-execute this test binary with a
// hidden "[.dist-child]" test selected by name and the rank in the environment; each child checks its own
// results with REQUIRE (its exit code carries them back) or writes tensors for the parent to compare.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <random>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>
#include <torch/serialize.h>

#include "core/error.h"
#include "support/temp_dir.h"
#include "toy_dataset.h"
#include "core/config/model_config.h"
#include "models/factory.h"
#include "models/seq2seq.h"
#include "nn/routing_attention.h"
#include "train/distributed.h"

using parla::train::DataParallel;

namespace {

// A port that was free a moment ago. Chosen at random below the kernel's ephemeral range (32768-60999 on Linux):
// a port the kernel handed out for bind(0) could be handed again to any client socket of a test running beside this
// one before rank 0 listens on it (CI saw EADDRINUSE that way); ports below the range are only ever taken by name.
int free_port() {
  static std::mt19937 pick(static_cast<unsigned>(::getpid()) ^
                           static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count()));
  std::uniform_int_distribution<int> port_in(20000, 32000);
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int port = port_in(pick);
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    ::close(fd);
    if (bound) return port;
  }
  FAIL("no free port between 20000 and 32000 after 200 tries");
  return 0;
}

// Starts one process per rank running argv_of(rank) with the torchrun variables set (stdout and stderr to
// log_of(rank) when given), and waits for all of them, killing them after `timeout`. Returns their exit codes.
std::vector<int> spawn_world(const std::function<std::vector<std::string>(int)>& argv_of, int world,
                             const std::map<std::string, std::string>& extra,
                             const std::function<std::string(int)>& log_of = {},
                             std::chrono::seconds timeout = std::chrono::seconds(60)) {
  const int port = free_port();
  std::vector<pid_t> pids;
  for (int rank = 0; rank < world; ++rank) {
    std::map<std::string, std::string> vars = extra;
    vars["RANK"] = std::to_string(rank);
    vars["WORLD_SIZE"] = std::to_string(world);
    vars["MASTER_ADDR"] = "127.0.0.1";
    vars["MASTER_PORT"] = std::to_string(port);
    vars["PARLA_DIST_TIMEOUT"] = "30";
    vars["OMP_NUM_THREADS"] = "1";
    std::vector<std::string> env_strings;
    for (char** e = environ; *e; ++e) {
      std::string s(*e);
      if (!vars.count(s.substr(0, s.find('=')))) env_strings.push_back(s);
    }
    for (auto& [k, v] : vars)
      if (!v.empty()) env_strings.push_back(k + "=" + v);  // an empty value unsets the variable
    std::vector<char*> envp;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> args = argv_of(rank);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const std::string log = log_of ? log_of(rank) : "";
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      if (!log.empty()) {
        int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) ::dup2(fd, 1), ::dup2(fd, 2);
      }
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
    pids.push_back(pid);
  }
  std::vector<int> codes(pids.size(), -1);
  std::vector<bool> done(pids.size(), false);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  size_t remaining = pids.size();
  while (remaining > 0) {
    for (size_t r = 0; r < pids.size(); ++r) {
      if (done[r]) continue;
      int status = 0;
      if (::waitpid(pids[r], &status, WNOHANG) == pids[r]) {
        done[r] = true;
        --remaining;
        codes[r] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
    }
    if (remaining > 0 && std::chrono::steady_clock::now() > deadline) {
      for (size_t r = 0; r < pids.size(); ++r)
        if (!done[r]) {
          ::kill(pids[r], SIGKILL);
          ::waitpid(pids[r], nullptr, 0);
          done[r] = true;
        }
      FAIL("distributed processes did not finish within " << timeout.count() << " s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return codes;
}

// Runs `world` copies of this test binary, each running the hidden test `child_test`.
std::vector<int> run_world(const std::string& child_test, int world, const std::map<std::string, std::string>& extra) {
  auto vars = extra;
  vars["OMP_WAIT_POLICY"] = "PASSIVE";
  return spawn_world([&](int) { return std::vector<std::string>{"/proc/self/exe", child_test}; }, world, vars);
}

// Environment of a child; absent when a hidden child test is run by hand, which then does nothing.
const char* child_env(const char* name) { return std::getenv(name); }

// Sets (or unsets, value == nullptr) an environment variable for the scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_)
      ::setenv(name_.c_str(), old_.c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

// The tiny model of the equivalence test: a two-layer perceptron, initialised from a seed.
torch::nn::Sequential make_mlp(uint64_t seed) {
  torch::manual_seed(seed);
  return torch::nn::Sequential(torch::nn::Linear(6, 12), torch::nn::Tanh(), torch::nn::Linear(12, 3));
}

// The tiny Transformer of the equivalence test (dropout off, so every replica computes the same function).
std::shared_ptr<parla::models::Seq2SeqModel> make_transformer(uint64_t seed) {
  parla::ModelConfig cfg;
  cfg.d_model = 16;
  cfg.ffn_dim = 32;
  cfg.heads = 2;
  cfg.encoder_layers = 1;
  cfg.decoder_layers = 1;
  cfg.dropout = 0.0;
  torch::manual_seed(seed);
  return parla::models::build_seq2seq(cfg, /*src_vocab=*/20, /*tgt_vocab=*/24);
}

struct Batch {
  torch::Tensor src, tgt_in, tgt_out;
};

// A batch of 8 sentence pairs of different lengths, padded with kPadId; the same for every process. The first
// half holds longer targets than the second, so the two ranks' token counts differ and only normalising by the
// global count (not averaging per-rank means) reproduces the single-process gradient.
Batch full_batch() {
  using parla::kBosId;
  using parla::kEosId;
  using parla::kPadId;
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(1234);
  const int64_t rows = 8, S = 7, T = 8;
  auto src = torch::randint(4, 20, {rows, S}, gen, torch::kInt64);
  auto tgt = torch::randint(4, 24, {rows, T + 1}, gen, torch::kInt64);
  const int64_t src_len[rows] = {7, 5, 6, 4, 3, 6, 2, 5};
  const int64_t tgt_len[rows] = {8, 7, 8, 6, 3, 2, 4, 2};  // tokens of tgt_out incl. EOS
  for (int64_t r = 0; r < rows; ++r) {
    src[r][src_len[r] - 1] = kEosId;
    src[r].narrow(0, src_len[r], S - src_len[r]).fill_(kPadId);
    tgt[r][0] = kBosId;
    tgt[r][tgt_len[r]] = kEosId;
    tgt[r].narrow(0, tgt_len[r] + 1, T - tgt_len[r]).fill_(kPadId);
  }
  return {src, tgt.narrow(1, 0, T), tgt.narrow(1, 1, T)};
}

Batch rows_of(const Batch& b, int64_t start, int64_t n) {
  return {b.src.narrow(0, start, n), b.tgt_in.narrow(0, start, n), b.tgt_out.narrow(0, start, n)};
}

constexpr int kSteps = 4;

// kSteps SGD steps where the loss is the cross-entropy SUMMED over this process's target tokens and divided by
// the global token count (all_reduce_sum), the normalisation parla's trainer uses. SGD rather than Adam: Adam
// divides each gradient by its own magnitude, so a gradient that is zero in exact arithmetic (the attention
// key bias, which softmax ignores) turns float rounding noise into full-size steps of random sign and the two
// runs would differ by lr however exact the all-reduce is. SGD keeps the comparison a comparison of gradients.
void train_steps(parla::models::Seq2SeqModel& model, const Batch& b, DataParallel& dp) {
  torch::optim::SGD opt(model.parameters(), torch::optim::SGDOptions(0.5).momentum(0.9));
  const auto tokens = static_cast<double>(b.tgt_out.ne(parla::kPadId).sum().item<int64_t>());
  for (int step = 0; step < kSteps; ++step) {
    opt.zero_grad();
    const double global_tokens = dp.all_reduce_sum(tokens);
    auto logits = model.forward(b.src, b.tgt_in);
    auto loss = torch::nn::functional::cross_entropy(
                    logits.reshape({-1, logits.size(-1)}), b.tgt_out.reshape({-1}),
                    torch::nn::functional::CrossEntropyFuncOptions().ignore_index(parla::kPadId).reduction(
                        torch::kSum)) /
                global_tokens;
    loss.backward();
    dp.all_reduce_gradients(model);
    opt.step();
  }
}

}  // namespace

TEST_CASE("a world without WORLD_SIZE is one process whose collectives change nothing", "[distributed]") {
  ScopedEnv w("WORLD_SIZE", nullptr), r("RANK", nullptr), s1("SLURM_PROCID", nullptr), s2("SLURM_NTASKS", nullptr);
  auto dp = DataParallel::from_env("cpu");
  CHECK(dp->rank() == 0);
  CHECK(dp->world_size() == 1);
  CHECK(dp->is_master());
  CHECK(dp->backend() == "none");
  CHECK(dp->all_reduce_sum(2.5) == 2.5);
  auto model = make_mlp(3);
  auto before = model->parameters()[0].clone();
  model->parameters()[0].mutable_grad() = torch::full_like(before, 0.25);
  dp->all_reduce_gradients(*model);
  dp->broadcast_parameters(*model);
  dp->barrier();
  CHECK(torch::equal(model->parameters()[0], before));
  CHECK(torch::equal(model->parameters()[0].grad(), torch::full_like(before, 0.25)));
  CHECK(dp->owns_batch(0));
  CHECK(dp->owns_batch(7));
}

TEST_CASE("malformed distributed environment variables are config errors naming the variable", "[distributed]") {
  ScopedEnv s1("SLURM_PROCID", nullptr), s2("SLURM_NTASKS", nullptr);
  {
    ScopedEnv w("WORLD_SIZE", "2"), r("RANK", "0"), a("MASTER_ADDR", nullptr), p("MASTER_PORT", "29500");
    REQUIRE_THROWS_AS(DataParallel::from_env("cpu"), parla::ConfigError);
    REQUIRE_THROWS_WITH(DataParallel::from_env("cpu"), Catch::Contains("MASTER_ADDR"));
  }
  {
    ScopedEnv w("WORLD_SIZE", "two"), r("RANK", "0");
    REQUIRE_THROWS_WITH(DataParallel::from_env("cpu"), Catch::Contains("WORLD_SIZE"));
  }
  {
    ScopedEnv w("WORLD_SIZE", "2"), r("RANK", "2"), a("MASTER_ADDR", "127.0.0.1"), p("MASTER_PORT", "29500");
    REQUIRE_THROWS_AS(DataParallel::from_env("cpu"), parla::ConfigError);
    REQUIRE_THROWS_WITH(DataParallel::from_env("cpu"), Catch::Contains("RANK"));
  }
  {
    ScopedEnv w("WORLD_SIZE", "2"), r("RANK", "1"), a("MASTER_ADDR", "127.0.0.1"), p("MASTER_PORT", "70000");
    REQUIRE_THROWS_WITH(DataParallel::from_env("cpu"), Catch::Contains("MASTER_PORT"));
  }
  {
    ScopedEnv w("WORLD_SIZE", nullptr), r("RANK", nullptr);
    REQUIRE_THROWS_AS(DataParallel::from_env("tpu"), parla::ConfigError);
  }
}

TEST_CASE("a rank whose peers never arrive fails with an error after the timeout instead of hanging",
          "[distributed]") {
  const auto start = std::chrono::steady_clock::now();
  REQUIRE_THROWS_AS(DataParallel::create(0, 2, "127.0.0.1", free_port(), "cpu", std::chrono::seconds(1)),
                    parla::IoError);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));
}

TEST_CASE("distributed child: collectives on known tensors", "[.dist-child]") {
  if (!child_env("PARLA_TEST_DIST_CHILD")) return;
  torch::set_num_threads(1);
  auto dp = DataParallel::from_env("cpu");
  const int r = dp->rank();
  REQUIRE(dp->world_size() == 2);
  REQUIRE(dp->backend() == "gloo");
  REQUIRE(dp->is_master() == (r == 0));
  REQUIRE(dp->owns_batch(r));
  REQUIRE_FALSE(dp->owns_batch(1 - r));

  // Scalars: rank r contributes r + 1.5 and {r, 10 r, 2^40}; the sums are exact in double.
  REQUIRE(dp->all_reduce_sum(r + 1.5) == 4.0);
  auto v = dp->all_reduce_sum(std::vector<double>{double(r), 10.0 * r, 1099511627776.0});
  REQUIRE(v == std::vector<double>{1.0, 10.0, 2199023255552.0});

  // Gradients: rank r sets every weight's gradient to (r + 1) * arange, so the sum is 3 * arange; the second
  // layer's bias has a gradient only on rank 0 and must receive rank 0's values on both ranks.
  auto model = make_mlp(100 + r);
  auto params = model->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    auto base = torch::arange(params[i].numel(), torch::kFloat32).view(params[i].sizes()) + float(i);
    if (i == params.size() - 1 && r == 1) continue;
    params[i].mutable_grad() = base * float(r + 1);
  }
  dp->all_reduce_gradients(*model);
  for (size_t i = 0; i < params.size(); ++i) {
    auto base = torch::arange(params[i].numel(), torch::kFloat32).view(params[i].sizes()) + float(i);
    auto expected = (i == params.size() - 1) ? base : base * 3.0f;
    REQUIRE(params[i].grad().defined());
    REQUIRE(torch::equal(params[i].grad(), expected));
  }

  // Broadcast: every rank ends with rank 0's parameters (rank 0 fills them with 7 + index, rank 1 with -1).
  {
    torch::NoGradGuard g;
    for (size_t i = 0; i < params.size(); ++i) params[i].fill_(r == 0 ? 7.0f + float(i) : -1.0f);
  }
  dp->broadcast_parameters(*model);
  for (size_t i = 0; i < params.size(); ++i)
    REQUIRE(torch::equal(params[i], torch::full_like(params[i], 7.0f + float(i))));

  // Running statistics (routing attention's centroid sums and counts): rank r holds sums (r + 1) * s0 and counts
  // (r + 1) * c0 (plus r on one count); both ranks end with the means and with centroids = sums / counts (eq. 10).
  {
    parla::nn::MultiHeadAttentionOptions o;
    o.d_model = 8;
    o.heads = 2;
    parla::nn::RoutingSelfAttention routed(o, parla::nn::RoutingAttentionOptions{3});
    torch::NoGradGuard g;
    auto s0 = torch::arange(2 * 3 * 4, torch::kFloat32).view({2, 3, 4}) - 5.0f;
    auto c0 = torch::arange(1, 7, torch::kFloat32).view({2, 3});
    routed->routing_sums.copy_(s0 * float(r + 1));
    routed->routing_counts.copy_(c0 * float(r + 1));
    routed->routing_counts[1][2] += float(r);
    routed->routing_centroids.fill_(100.0f + r);
    dp->average_running_statistics(*routed);
    auto counts = c0 * 1.5f;
    counts[1][2] += 0.5f;
    REQUIRE(torch::allclose(routed->routing_sums, s0 * 1.5f));
    REQUIRE(torch::allclose(routed->routing_counts, counts));
    REQUIRE(torch::allclose(routed->routing_centroids, s0 * 1.5f / counts.unsqueeze(-1)));
  }
  dp->barrier();
}

TEST_CASE("two processes all-reduce known tensors to their exact sums", "[distributed]") {
  auto codes = run_world("distributed child: collectives on known tensors", 2, {{"PARLA_TEST_DIST_CHILD", "1"}});
  CHECK(codes[0] == 0);
  CHECK(codes[1] == 0);
}

TEST_CASE("distributed child: train on half of the batch", "[.dist-child]") {
  const char* out = child_env("PARLA_TEST_DIST_OUT");
  if (!out) return;
  torch::set_num_threads(1);
  auto dp = DataParallel::from_env("cpu");
  // Different seeds per rank: only broadcast_parameters makes the replicas start equal.
  auto model = make_transformer(dp->rank() == 0 ? 42 : 4242);
  dp->broadcast_parameters(*model);
  auto shard = rows_of(full_batch(), dp->rank() * 4, 4);
  train_steps(*model, shard, *dp);
  torch::save(model->parameters(), std::string(out) + "/rank" + std::to_string(dp->rank()) + ".pt");
}

TEST_CASE("two processes on half-batches train the same Transformer as one process on the full batch",
          "[distributed]") {
  parla::testing::TempDir tmp("distributed-train");
  auto codes = run_world("distributed child: train on half of the batch", 2, {{"PARLA_TEST_DIST_OUT", tmp.file("")}});
  REQUIRE(codes[0] == 0);
  REQUIRE(codes[1] == 0);

  // Reference: one process, the whole batch, same initialisation as rank 0, no communication.
  torch::set_num_threads(1);
  auto model = make_transformer(42);
  auto init = make_transformer(42)->parameters();
  auto single = DataParallel::create(0, 1, "", 0, "cpu");
  train_steps(*model, full_batch(), *single);
  auto expected = model->parameters();

  for (int rank = 0; rank < 2; ++rank) {
    std::vector<torch::Tensor> got;
    torch::load(got, tmp.file("rank" + std::to_string(rank) + ".pt"));
    REQUIRE(got.size() == expected.size());
    double worst = 0, moved = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("rank " << rank << " parameter " << i);
      worst = std::max(worst, (got[i] - expected[i]).abs().max().item<double>());
      moved = std::max(moved, (got[i] - init[i]).abs().max().item<double>());
      CHECK(torch::allclose(got[i], expected[i], /*rtol=*/0, /*atol=*/1e-5));
    }
    INFO("rank " << rank << ": largest difference " << worst << ", largest change from init " << moved);
    // The run must have moved the weights, or the comparison would prove nothing.
    CHECK(moved > 1e-2);
  }
}

namespace {

// The "train" records of a metrics.jsonl: step -> loss.
std::map<int64_t, double> train_losses(const std::string& path) {
  std::map<int64_t, double> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line);
    if (j.value("type", "") == "train") out[j["step"].get<int64_t>()] = j["loss"].get<double>();
  }
  return out;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("parla-train on two ranks follows the losses of one process with the same total batch, and only "
          "rank 0 writes",
          "[distributed]") {
  const std::string exe = std::string(PARLA_BIN_DIR) + "/parla-train";
  if (!std::filesystem::exists(exe)) {
    WARN("parla-train is not built; skipping");
    return;
  }
  parla::testing::TempDir tmp("distributed-parla-train");
  const std::string data = parla::test::toy_dataset("distributed-parla-train", 24, 200, 20);
  // Dropout off: the ranks and the single process would draw different masks.
  const std::string config = tmp.write("config.json", R"({
    "model": {"d_model": 32, "ffn_dim": 64, "heads": 2, "encoder_layers": 1, "decoder_layers": 1, "dropout": 0.0},
    "training": {"lr": 0.003, "warmup_steps": 4, "batch_tokens": 128, "log_every": 1, "valid_every": 3,
                 "valid_bleu": false, "keep_last": 2},
    "runtime": {"threads": 1, "seed": 7}
  })");
  auto args = [&](const std::string& save, const std::vector<std::string>& more) {
    std::vector<std::string> a{exe, "-c", config, "--data", data, "-o", save, "--max-steps", "6"};
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  // World of 2, update_freq 1: an update takes batches {2k, 2k+1} of the epoch plan, one per rank ...
  auto codes = spawn_world([&](int rank) { return args(tmp.file("rank" + std::to_string(rank)), {}); }, 2, {},
                           [&](int rank) { return tmp.file("rank" + std::to_string(rank) + ".log"); },
                           std::chrono::seconds(90));
  INFO("rank 0 log:\n" << slurp(tmp.file("rank0.log")) << "\nrank 1 log:\n" << slurp(tmp.file("rank1.log")));
  REQUIRE(codes[0] == 0);
  REQUIRE(codes[1] == 0);
  // ... the same batches one process accumulates with update_freq 2.
  auto single = spawn_world([&](int) { return args(tmp.file("single"), {"--update-freq", "2"}); }, 1, {},
                            [&](int) { return tmp.file("single.log"); }, std::chrono::seconds(90));
  INFO("single log:\n" << slurp(tmp.file("single.log")));
  REQUIRE(single[0] == 0);

  auto two = train_losses(tmp.file("rank0") + "/metrics.jsonl");
  auto one = train_losses(tmp.file("single") + "/metrics.jsonl");
  REQUIRE(two.size() == 6);
  REQUIRE(one.size() == 6);
  for (auto& [step, loss] : one) {
    INFO("step " << step);
    CHECK(two[step] == Approx(loss).margin(1e-4));
  }
  CHECK(two.rbegin()->second < two.begin()->second);  // it trained

  // Rank 0 writes the checkpoints and the metrics; rank 1 writes nothing there.
  CHECK(std::filesystem::exists(tmp.file("rank0") + "/checkpoint_last.pt"));
  CHECK_FALSE(std::filesystem::exists(tmp.file("rank1") + "/checkpoint_last.pt"));
  CHECK_FALSE(std::filesystem::exists(tmp.file("rank1") + "/metrics.jsonl"));

  // The run's last two numbered checkpoints average into a usable model (parla-train average).
  auto avg = spawn_world([&](int) {
                           return std::vector<std::string>{exe, "average", "--last", "2", "--dir", tmp.file("rank0"),
                                                           "-o", tmp.file("avg.pt")};
                         },
                         1, {}, [&](int) { return tmp.file("avg.log"); });
  INFO("average log:\n" << slurp(tmp.file("avg.log")));
  CHECK(avg[0] == 0);
  CHECK(std::filesystem::exists(tmp.file("avg.pt")));
}
