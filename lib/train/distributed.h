#pragma once
// Synchronous data-parallel training across processes and machines with PyTorch's own c10d engine
// (Li et al. 2020, "PyTorch Distributed: Experiences on Accelerating Data Parallel Training"): every rank holds a
// full replica, reads its own shard of batches, and the gradients are summed across ranks before each optimizer
// step, so all replicas take the same step. CPU worlds use ProcessGroupGloo; NCCL is compiled in only where
// LibTorch has CUDA (USE_C10D_NCCL and <nccl.h> present, which Debian's CPU-only torch does not have).
//
// Rendezvous follows torch.distributed's env:// convention, so torchrun-style launchers work unchanged:
//   RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (LOCAL_RANK picks the GPU).
// Under SLURM (srun) without RANK/WORLD_SIZE, SLURM_PROCID/SLURM_NTASKS (SLURM_LOCALID) are used instead;
// MASTER_ADDR/MASTER_PORT must still be exported by the job script. Rank 0 hosts the TCPStore.
// PARLA_DIST_TIMEOUT (seconds, default 1800) bounds rendezvous and every collective, so a dead peer ends the
// run with an error instead of hanging forever.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace at {
class Tensor;
}
namespace torch::nn {
class Module;
}

namespace parla::train {

class DataParallel {
 public:
  // A world of 1 (no process group; every collective is a no-op) when WORLD_SIZE is unset or 1.
  // device: runtime.device: "cpu" (Gloo), "cuda" (NCCL, each rank on cuda:LOCAL_RANK as
  // runtime::resolve_device decides; ConfigError when this build has no NCCL/CUDA) or "auto".
  // Throws ConfigError naming the variable for malformed or inconsistent environment variables, IoError when
  // the rendezvous fails or times out.
  static std::shared_ptr<DataParallel> from_env(const std::string& device);

  // Explicit rendezvous (what from_env calls), for launchers and tests that know the world already.
  static std::shared_ptr<DataParallel> create(int rank, int world_size, const std::string& master_addr,
                                              int master_port, const std::string& device,
                                              std::chrono::milliseconds timeout = std::chrono::minutes(30),
                                              int local_rank = 0);

  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;
  ~DataParallel();

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  // LOCAL_RANK (SLURM_LOCALID under srun): this process's index on its machine, 0 in a world of 1. It picks the
  // GPU (runtime::DeviceRequest::local_rank).
  int local_rank() const { return local_rank_; }
  bool is_master() const { return rank_ == 0; }
  // "gloo", "nccl" or "none" (world of 1).
  const std::string& backend() const { return backend_; }

  // Each rank reads every world_size-th batch, starting at its rank: batch i belongs to rank i % world_size.
  bool owns_batch(int64_t batch_index) const { return batch_index % world_size_ == rank_; }

  // Copies rank 0's parameters and buffers to every rank, so all replicas start identical regardless of their
  // random initialisation. One flattened broadcast per dtype.
  void broadcast_parameters(torch::nn::Module& module);

  // Replaces every parameter's gradient by the SUM of that gradient over all ranks (not the mean, unlike
  // DistributedDataParallel): parla's trainer divides the summed token loss by the GLOBAL token count
  // (all_reduce_sum of the per-rank counts), so a world of N on shards gives exactly the gradient one process
  // computes on the union of the shards. Gradients are flattened into one buffer per dtype, so a step costs one
  // all-reduce rather than one per parameter. A parameter without a gradient on this rank contributes zeros
  // (and receives the others' sum), so ranks never disagree on the buffer layout.
  void all_reduce_gradients(torch::nn::Module& module);

  // Replaces the running statistics that layers update from their own batch in the forward pass (routing
  // attention's centroid sums and counts, seed 002 eqs. 8-9) by their mean over all ranks and recomputes the
  // centroids from them (eq. 10), so the replicas keep one set of centroids: the mean of the ranks' moving
  // averages, each of which saw its own shard. Nothing to do for models without routing attention.
  void average_running_statistics(torch::nn::Module& module);

  // Sum of a scalar (token counts, losses) over all ranks; exact for integers below 2^53.
  double all_reduce_sum(double value);
  // Element-wise sum of several scalars in one collective.
  std::vector<double> all_reduce_sum(const std::vector<double>& values);
  // In-place element-wise sum over all ranks of a tensor that stays on this rank's device (the trainer's loss
  // sums and gradient figures), so that reducing them costs no host read: Gloo sums CPU tensors, NCCL CUDA ones.
  void all_reduce_sum_(at::Tensor& values);

  // Waits until every rank has arrived.
  void barrier();

 private:
  struct Group;  // the c10d process group; absent for a world of 1
  DataParallel(int rank, int world_size, int local_rank, std::string backend, std::unique_ptr<Group> group);

  int rank_ = 0;
  int world_size_ = 1;
  int local_rank_ = 0;
  std::string backend_ = "none";
  std::unique_ptr<Group> group_;
};

}  // namespace parla::train
