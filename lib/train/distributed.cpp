#include "train/distributed.h"

#include <cerrno>
#include <cstdlib>
#include <functional>
#include <map>
#include <utility>

#include <spdlog/spdlog.h>
#include <torch/nn/module.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

// NCCL: Debian's LibTorch is CPU-only and ships the header without <nccl.h>, so the path is compiled only in a
// CUDA build of LibTorch that defines USE_C10D_NCCL.
#if defined(USE_C10D_NCCL) && __has_include(<nccl.h>) && \
    __has_include(<torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>)
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#define PARLA_HAVE_NCCL 1
#else
#define PARLA_HAVE_NCCL 0
#endif

#include "core/error.h"
#include "runtime/runtime_device.h"
#include "runtime/torch_compat.h"

namespace parla::train {

struct DataParallel::Group {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<compat::CollectiveBackend> pg;
};

namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return (v && *v) ? v : nullptr;
}

// Parses an integer environment variable in [lo, hi]; ConfigError naming the variable otherwise.
long env_int(const char* name, const char* value, long lo, long hi) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(value, &end, 10);
  if (errno != 0 || end == value || *end != '\0' || v < lo || v > hi)
    throw ConfigError(std::string("environment variable ") + name + "='" + value + "' must be an integer in [" +
                      std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

// Runs a collective and waits for it; failures of the peer or the network become IoError.
void run(const char* what, const std::function<c10::intrusive_ptr<c10d::Work>()>& op) {
  try {
    op()->wait();
  } catch (const std::exception& e) {
    throw IoError(std::string("distributed ") + what + " failed: " + brief_reason(e));
  }
}

bool is_loopback(const std::string& addr) {
  return addr == "localhost" || addr == "::1" || addr.rfind("127.", 0) == 0;
}

// Parameters and buffers grouped by dtype and device, so each group flattens into one contiguous buffer.
using TensorGroups = std::map<std::pair<int, std::string>, std::vector<torch::Tensor>>;
std::pair<int, std::string> group_key(const torch::Tensor& t) {
  return {static_cast<int>(t.scalar_type()), t.device().str()};
}

}  // namespace

DataParallel::DataParallel(int rank, int world_size, int local_rank, std::string backend,
                           std::unique_ptr<Group> group)
    : rank_(rank),
      world_size_(world_size),
      local_rank_(local_rank),
      backend_(std::move(backend)),
      group_(std::move(group)) {}

DataParallel::~DataParallel() = default;

std::shared_ptr<DataParallel> DataParallel::from_env(const std::string& device) {
  const char* rank_s = env("RANK");
  const char* world_s = env("WORLD_SIZE");
  const char* local_s = env("LOCAL_RANK");
  const char* rank_name = "RANK";
  const char* world_name = "WORLD_SIZE";
  const char* local_name = "LOCAL_RANK";
  if (!rank_s && !world_s && env("SLURM_PROCID") && env("SLURM_NTASKS")) {
    rank_s = env("SLURM_PROCID"), rank_name = "SLURM_PROCID";
    world_s = env("SLURM_NTASKS"), world_name = "SLURM_NTASKS";
    local_s = env("SLURM_LOCALID"), local_name = "SLURM_LOCALID";
  }
  const int max_world = 1 << 20;
  const int world = world_s ? static_cast<int>(env_int(world_name, world_s, 1, max_world)) : 1;
  if (world == 1) {
    if (rank_s && env_int(rank_name, rank_s, 0, max_world) != 0)
      throw ConfigError(std::string(rank_name) + "=" + rank_s + " but " + world_name + " is 1 or unset");
    return create(0, 1, "", 0, device);
  }
  if (!rank_s) throw ConfigError(std::string(world_name) + "=" + world_s + " is set but " + rank_name + " is not");
  const int rank = static_cast<int>(env_int(rank_name, rank_s, 0, world - 1));
  const char* addr = env("MASTER_ADDR");
  const char* port_s = env("MASTER_PORT");
  if (!addr) throw ConfigError("distributed training (WORLD_SIZE > 1) needs MASTER_ADDR, the address of rank 0");
  if (!port_s) throw ConfigError("distributed training (WORLD_SIZE > 1) needs MASTER_PORT, a free port on rank 0");
  const int port = static_cast<int>(env_int("MASTER_PORT", port_s, 1, 65535));
  const int local_rank = local_s ? static_cast<int>(env_int(local_name, local_s, 0, max_world)) : 0;
  long timeout_s = 1800;
  if (const char* t = env("PARLA_DIST_TIMEOUT")) timeout_s = env_int("PARLA_DIST_TIMEOUT", t, 1, 7 * 24 * 3600);
  return create(rank, world, addr, port, device, std::chrono::seconds(timeout_s), local_rank);
}

std::shared_ptr<DataParallel> DataParallel::create(int rank, int world_size, const std::string& master_addr,
                                                   int master_port, const std::string& device,
                                                   std::chrono::milliseconds timeout, int local_rank) {
  if (!runtime::is_device_spec(device))
    throw ConfigError("runtime.device must be cpu, cuda, cuda:N or auto, not '" + device + "'");
  if (world_size < 1 || rank < 0 || rank >= world_size)
    throw ConfigError("distributed rank " + std::to_string(rank) + " is outside a world of size " +
                      std::to_string(world_size));
  if (world_size == 1)
    return std::shared_ptr<DataParallel>(new DataParallel(0, 1, local_rank, "none", nullptr));
  // resolve_device refuses what this machine cannot run (no GPU, LOCAL_RANK past the last GPU, cuda:N in a
  // world > 1) and makes cuda:LOCAL_RANK current, which is where NCCL puts this rank's communicator.
  bool cuda = runtime::resolve_device(runtime::DeviceRequest{device, "runtime.device", world_size, local_rank})
                  .is_cuda();
  if (cuda && !PARLA_HAVE_NCCL) {
    if (device != "auto")
      throw ConfigError("runtime.device is 'cuda' with WORLD_SIZE > 1 but parla was built without NCCL");
    cuda = false;  // auto: fall back to Gloo on CPU
  }
  if (master_port < 1 || master_port > 65535)
    throw ConfigError("MASTER_PORT " + std::to_string(master_port) + " is not a port number");

  auto group = std::make_unique<Group>();
  std::string backend = cuda ? "nccl" : "gloo";
  try {
    c10d::TCPStoreOptions so;
    so.port = static_cast<std::uint16_t>(master_port);
    so.isServer = rank == 0;
    so.numWorkers = static_cast<std::size_t>(world_size);
    so.waitWorkers = true;
    so.timeout = timeout;
    group->store = c10::make_intrusive<c10d::TCPStore>(master_addr, so);
#if PARLA_HAVE_NCCL
    if (cuda) {
      auto opts = c10d::ProcessGroupNCCL::Options::create();
      opts->timeout = timeout;
      group->pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(group->store, rank, world_size, opts);
    }
#endif
    if (!cuda) {
      auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
      // On one machine the loopback device keeps traffic local; across machines Gloo binds the interface named
      // by GLOO_SOCKET_IFNAME (as torch.distributed does), else the address this host's name resolves to.
      if (const char* ifname = env("GLOO_SOCKET_IFNAME"))
        opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
      else if (is_loopback(master_addr))
        opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
      else
        opts->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
      opts->threads = 2;
      group->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(group->store, rank, world_size, opts);
    }
  } catch (const std::exception& e) {
    throw IoError("distributed rendezvous at " + master_addr + ":" + std::to_string(master_port) + " (rank " +
                  std::to_string(rank) + " of " + std::to_string(world_size) + ") failed: " + brief_reason(e));
  }
  // Only rank 0 logs progress (its log is the run's log); the others keep warnings and errors.
  if (rank != 0) spdlog::set_level(spdlog::level::warn);
  spdlog::info("distributed: rank {} of {} joined via {}:{} ({})", rank, world_size, master_addr, master_port,
               backend);
  return std::shared_ptr<DataParallel>(new DataParallel(rank, world_size, local_rank, backend, std::move(group)));
}

void DataParallel::broadcast_parameters(torch::nn::Module& module) {
  if (!group_) return;
  torch::NoGradGuard no_grad;
  TensorGroups groups;
  for (auto& p : module.parameters()) groups[group_key(p)].push_back(p);
  for (auto& b : module.buffers())
    if (b.defined()) groups[group_key(b)].push_back(b);
  for (auto& [key, tensors] : groups) {
    std::vector<torch::Tensor> flat_parts;
    flat_parts.reserve(tensors.size());
    for (auto& t : tensors) flat_parts.push_back(t.reshape({-1}));
    std::vector<torch::Tensor> io{torch::cat(flat_parts)};
    c10d::BroadcastOptions opts;
    opts.rootRank = 0;
    run("broadcast of parameters", [&] { return group_->pg->broadcast(io, opts); });
    int64_t offset = 0;
    for (auto& t : tensors) {
      const int64_t n = t.numel();
      t.copy_(io[0].narrow(0, offset, n).view(t.sizes()));
      offset += n;
    }
  }
}

void DataParallel::all_reduce_gradients(torch::nn::Module& module) {
  if (!group_) return;
  torch::NoGradGuard no_grad;
  TensorGroups groups;
  for (auto& p : module.parameters())
    if (p.requires_grad()) groups[group_key(p)].push_back(p);
  for (auto& [key, params] : groups) {
    std::vector<torch::Tensor> flat_parts;
    flat_parts.reserve(params.size());
    for (auto& p : params) {
      const auto& g = p.grad();
      flat_parts.push_back(g.defined() ? g.reshape({-1}) : torch::zeros({p.numel()}, p.options()));
    }
    std::vector<torch::Tensor> io{torch::cat(flat_parts)};
    c10d::AllreduceOptions opts;
    opts.reduceOp = c10d::ReduceOp::SUM;
    run("all-reduce of gradients", [&] { return group_->pg->allreduce(io, opts); });
    int64_t offset = 0;
    for (auto& p : params) {
      const int64_t n = p.numel();
      auto summed = io[0].narrow(0, offset, n).view(p.sizes());
      if (p.grad().defined())
        p.mutable_grad().copy_(summed);
      else
        p.mutable_grad() = summed.clone();
      offset += n;
    }
  }
}

void DataParallel::average_running_statistics(torch::nn::Module& module) {
  if (!group_) return;
  torch::NoGradGuard no_grad;
  auto ends_with = [](const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  TensorGroups groups;
  std::map<std::string, torch::Tensor> buffers;
  for (auto& b : module.named_buffers(true)) {
    if (!b.value().defined()) continue;
    buffers[b.key()] = b.value();
    if (ends_with(b.key(), "routing_sums") || ends_with(b.key(), "routing_counts"))
      groups[group_key(b.value())].push_back(b.value());
  }
  if (groups.empty()) return;
  for (auto& [key, tensors] : groups) {
    std::vector<torch::Tensor> flat_parts;
    for (auto& t : tensors) flat_parts.push_back(t.reshape({-1}));
    std::vector<torch::Tensor> io{torch::cat(flat_parts)};
    c10d::AllreduceOptions opts;
    opts.reduceOp = c10d::ReduceOp::SUM;
    run("all-reduce of running statistics", [&] { return group_->pg->allreduce(io, opts); });
    io[0].div_(static_cast<double>(world_size_));
    int64_t offset = 0;
    for (auto& t : tensors) {
      const int64_t n = t.numel();
      t.copy_(io[0].narrow(0, offset, n).view(t.sizes()));
      offset += n;
    }
  }
  // Eq. 10 again on the averaged sums and counts (a dead cluster keeps its centroid, as in the layer).
  for (auto& [name, centroids] : buffers) {
    if (!ends_with(name, "routing_centroids")) continue;
    const std::string prefix = name.substr(0, name.size() - std::string("routing_centroids").size());
    auto sums = buffers.find(prefix + "routing_sums"), counts = buffers.find(prefix + "routing_counts");
    if (sums == buffers.end() || counts == buffers.end()) continue;
    auto c = counts->second.unsqueeze(-1);
    centroids.copy_(torch::where(c > 1e-12, sums->second / c.clamp_min(1e-12), centroids));
  }
}

std::vector<double> DataParallel::all_reduce_sum(const std::vector<double>& values) {
  if (!group_ || values.empty()) return values;
  auto t = torch::tensor(values, torch::dtype(torch::kFloat64));
  if (backend_ == "nccl") t = t.to(torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(local_rank_)));
  std::vector<torch::Tensor> io{t};
  c10d::AllreduceOptions opts;
  opts.reduceOp = c10d::ReduceOp::SUM;
  run("all-reduce of scalars", [&] { return group_->pg->allreduce(io, opts); });
  auto out = io[0].to(torch::kCPU).contiguous();
  return std::vector<double>(out.data_ptr<double>(), out.data_ptr<double>() + out.numel());
}

void DataParallel::all_reduce_sum_(at::Tensor& values) {
  if (!group_ || values.numel() == 0) return;
  // c10d reduces contiguous tensors in place; a non-contiguous view would be summed into a temporary.
  TORCH_CHECK(values.is_contiguous(), "all_reduce_sum_ needs a contiguous tensor");
  std::vector<torch::Tensor> io{values};
  c10d::AllreduceOptions opts;
  opts.reduceOp = c10d::ReduceOp::SUM;
  run("all-reduce of training statistics", [&] { return group_->pg->allreduce(io, opts); });
}

double DataParallel::all_reduce_sum(double value) { return all_reduce_sum(std::vector<double>{value})[0]; }

void DataParallel::barrier() {
  if (!group_) return;
  run("barrier", [&] { return group_->pg->barrier(); });
}

}  // namespace parla::train
