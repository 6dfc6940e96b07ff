// collx-bench allreduce.
#include <cstring>
#include <stdexcept>
#include <vector>

#include "bench_buffers.hpp"
#include "bench_collective.hpp"
#include "exact_data.hpp"
#include "mpi_reference.hpp"

namespace collx::bench {

namespace {

class AllreduceBench final : public CollectiveBench {
 public:
  explicit AllreduceBench(Communicator& comm) : comm_(comm) {}
  Collective collective() const override { return Collective::allreduce; }
  double bus_factor(int n) const override { return n > 1 ? 2.0 * (n - 1) / n : 0.0; }
  bool reduces() const override { return true; }
  bool rooted() const override { return false; }
  std::size_t count_for(std::size_t bytes, std::size_t elem, int) const override {
    return bytes / elem;
  }

  void prepare(const Params& params, std::size_t count) override {
    params_ = params;
    count_ = count;
    const std::size_t bytes = count * size_of(params.type);
    send_.resize(bytes);
    recv_.resize(bytes);
    expected_.resize(bytes);
    verify::fill_input(send_.data(), params.type, params.op, comm_.rank(), comm_.size(), count);
    std::memcpy(recv_.data(), send_.data(), bytes);
    verify::fill_expected(expected_.data(), params.type, params.op, comm_.size(), count);
  }

  void run(Algorithm algorithm) override {
    Options options;
    options.algorithm = algorithm;
    comm_.allreduce(params_.in_place ? recv_.data() : send_.data(), recv_.data(), count_,
                    params_.type, params_.op, options);
  }

  void run_mpi() override {
    const int count = checked_int(count_);
    MPI_Allreduce(params_.in_place ? MPI_IN_PLACE : send_.data(), recv_.data(), count,
                  mpi_type(params_.type), mpi_op(params_.type, params_.op), comm_.mpi_comm());
    if (params_.op == ReduceOp::avg) {
      mpi_finish_average(recv_.data(), params_.type, count_, comm_.size());
    }
  }

  std::size_t check(bool mpi, Algorithm algorithm) override {
    const std::size_t bytes = count_ * size_of(params_.type);
    if (params_.in_place) {
      verify::fill_input(recv_.data(), params_.type, params_.op, comm_.rank(), comm_.size(),
                         count_);
    } else {
      std::memset(recv_.data(), 0xA5, bytes);
    }
    if (mpi) {
      run_mpi();
    } else {
      run(algorithm);
    }
    return count_wrong(recv_.data(), expected_.data(), bytes, size_of(params_.type));
  }

 private:
  Communicator& comm_;
  Params params_;
  std::size_t count_ = 0;
  Buffer send_;
  Buffer recv_;
  Buffer expected_;
};

}  // namespace

std::unique_ptr<CollectiveBench> make_allreduce_bench(Communicator& comm) {
  return std::make_unique<AllreduceBench>(comm);
}

}  // namespace collx::bench
