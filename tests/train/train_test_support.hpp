// Shared by the trainer's mpirun tests (CPU and CUDA): a small synthetic data set, a small
// model configuration, and training a few steps on a communicator.
#pragma once

#include <mpi.h>

#include <cstring>
#include <vector>

#include "collx/collx.hpp"
#include "trainer.hpp"

namespace collx::train::testing {

inline int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}
inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

// Small enough for seconds at np = 4 on two cores; 101 test samples divide by none of 2, 3, 4.
inline const DataSplit& small_data() {
  static const DataSplit data = make_synthetic_dataset(480, 101);
  return data;
}

inline TrainConfig small_config(collx::DataType dtype = collx::DataType::float64,
                                collx::mlp::Device device = collx::mlp::Device::cpu) {
  TrainConfig c;
  c.hidden = {24, 16};
  c.dtype = dtype;
  c.device = device;
  c.epochs = 2;
  c.batch = 48;  // 10 steps per epoch over 480 samples
  c.lr = 0.01;
  c.lr_reference_batch = 48;
  c.warmup_epochs = 0.3;
  c.optimizer.weight_decay = 0.01;
  c.seed = 5;
  c.eval_rows = 40;
  return c;
}

struct TrainRun {
  std::vector<double> losses;
  std::vector<double> params;
  EvalResult test;
};

// `steps` optimizer steps of `config` over `comm`, then the test set evaluated.
inline TrainRun train_steps(const TrainConfig& config, collx::Communicator& comm, int steps) {
  auto trainer = make_trainer(config, comm, small_data());
  trainer->initialize();
  TrainRun run;
  for (int s = 0; s < steps; ++s) {
    run.losses.push_back(trainer->train_step().loss);
    if (trainer->step_in_epoch() == trainer->steps_per_epoch()) trainer->next_epoch();
  }
  run.params = trainer->parameters();
  run.test = trainer->evaluate(small_data().test);
  return run;
}

inline bool bitwise_equal(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

}  // namespace collx::train::testing
