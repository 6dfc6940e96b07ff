// Every collective and algorithm on simulated ranks (p = 1..33 for the cheap cases, a spread of
// sizes for the rest), with rendezvous sends: exact results, roots first/middle/last, counts 0,
// 1, odd and large, in-place forms, small segments so the pipelines' windows are exercised.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "collectives.hpp"
#include "config.hpp"
#include "exact_data.hpp"
#include "registry.hpp"
#include "shm_arena.hpp"
#include "sim_world.hpp"

namespace {

using collx::Algorithm;
using collx::Collective;
using collx::DataType;
using collx::ReduceOp;
using namespace collx::detail;
using collx::testing::SimWorld;
using Bytes = std::vector<std::byte>;

struct Pipeline {
  std::size_t segment_bytes;
  int depth;
};
const Pipeline kPipelines[] = {{256 << 10, 4}, {64, 3}};

OpInfo info_for(Collective c, Algorithm a, Pipeline pl) {
  OpInfo info;
  info.collective = c;
  info.algorithm = a;
  info.tag_base = 1;
  info.segment_bytes = pl.segment_bytes;
  info.pipeline_depth = pl.depth;
  return info;
}

Bytes pattern(DataType type, int rank, std::size_t count, std::size_t first = 0) {
  Bytes b(count * collx::size_of(type));
  collx::verify::fill_pattern(b.data(), type, rank, count, first);
  return b;
}

std::string what(Collective c, Algorithm a, int p, DataType t, std::size_t count, int root,
                 bool in_place, Pipeline pl) {
  return std::string(collx::to_string(c)) + "/" + std::string(collx::to_string(a)) +
         " p=" + std::to_string(p) + " " + std::string(collx::to_string(t)) +
         " count=" + std::to_string(count) + " root=" + std::to_string(root) +
         (in_place ? " in-place" : "") + " segment=" + std::to_string(pl.segment_bytes);
}

std::vector<int> roots_for(int p) {
  std::vector<int> roots{0};
  if (p > 2) roots.push_back(p / 2);
  if (p > 1) roots.push_back(p - 1);
  return roots;
}

std::vector<std::size_t> counts_for(int p) {
  return {0, 1, static_cast<std::size_t>(2 * p + 1), 1001};
}

class SimCollectives : public ::testing::TestWithParam<int> {};

TEST_P(SimCollectives, Broadcast) {
  const int p = GetParam();
  for (Algorithm a : collx::algorithms_of(Collective::broadcast)) {
    for (Pipeline pl : kPipelines) {
      for (std::size_t count : counts_for(p)) {
        for (int root : roots_for(p)) {
          const DataType type = DataType::int8;
          std::vector<Bytes> buf(p, Bytes(count, std::byte{0x77}));
          buf[root] = pattern(type, root, count);
          SimWorld world(p);
          world.run(info_for(Collective::broadcast, a, pl), [&](Operation& op, int r) {
            return broadcast_task(op, {buf[r].data(), count, 1, root, {}}, a);
          });
          const Bytes expected = pattern(type, root, count);
          for (int r = 0; r < p; ++r) {
            ASSERT_EQ(buf[r], expected)
                << what(Collective::broadcast, a, p, type, count, root, false, pl) << " rank " << r;
          }
        }
      }
    }
  }
}

TEST_P(SimCollectives, Reduce) {
  const int p = GetParam();
  for (Algorithm a : collx::algorithms_of(Collective::reduce)) {
    for (Pipeline pl : kPipelines) {
      for (std::size_t count : counts_for(p)) {
        for (int root : roots_for(p)) {
          for (auto [type, rop] : {std::pair{DataType::int32, ReduceOp::sum},
                                   std::pair{DataType::float32, ReduceOp::avg},
                                   std::pair{DataType::bfloat16, ReduceOp::max}}) {
            for (bool in_place : {false, true}) {
              const std::size_t bytes = count * collx::size_of(type);
              std::vector<Bytes> send(p, Bytes(bytes)), recv(p, Bytes(bytes, std::byte{0x55}));
              for (int r = 0; r < p; ++r) {
                collx::verify::fill_input(send[r].data(), type, rop, r, p, count);
              }
              if (in_place) recv[root] = send[root];
              SimWorld world(p);
              world.run(info_for(Collective::reduce, a, pl), [&](Operation& op, int r) {
                const std::byte* s = in_place && r == root ? recv[r].data() : send[r].data();
                return reduce_task(op,
                                   {s,
                                    recv[r].data(),
                                    count,
                                    Reduction::make(type, rop, p),
                                    root,
                                    {},
                                    Algorithm::ring},
                                   a);
              });
              Bytes expected(bytes);
              collx::verify::fill_expected(expected.data(), type, rop, p, count);
              ASSERT_EQ(recv[root], expected)
                  << what(Collective::reduce, a, p, type, count, root, in_place, pl);
            }
          }
        }
      }
    }
  }
}

TEST_P(SimCollectives, Allgather) {
  const int p = GetParam();
  for (Algorithm a : collx::algorithms_of(Collective::allgather)) {
    for (Pipeline pl : kPipelines) {
      for (std::size_t count : counts_for(p)) {
        for (bool in_place : {false, true}) {
          const DataType type = DataType::float64;
          const std::size_t block = count * 8;
          std::vector<Bytes> send(p), recv(p, Bytes(block * p, std::byte{0x33}));
          for (int r = 0; r < p; ++r) {
            send[r] = pattern(type, r, count);
            if (in_place && block > 0)
              if (block) std::memcpy(recv[r].data() + r * block, send[r].data(), block);
          }
          SimWorld world(p);
          world.run(info_for(Collective::allgather, a, pl), [&](Operation& op, int r) {
            return allgather_task(op,
                                  {in_place ? nullptr : send[r].data(),
                                   recv[r].data(),
                                   equal_offsets(count, p),
                                   8,
                                   {}},
                                  a);
          });
          Bytes expected;
          for (int r = 0; r < p; ++r) {
            const Bytes b = pattern(type, r, count);
            expected.insert(expected.end(), b.begin(), b.end());
          }
          for (int r = 0; r < p; ++r) {
            ASSERT_EQ(recv[r], expected)
                << what(Collective::allgather, a, p, type, count, -1, in_place, pl) << " rank "
                << r;
          }
        }
      }
    }
  }
}

// Equal blocks and per-rank lengths (some zero), in place and not.
TEST_P(SimCollectives, ReduceScatter) {
  const int p = GetParam();
  std::mt19937 rng(static_cast<unsigned>(p));
  for (Algorithm a : collx::algorithms_of(Collective::reduce_scatter)) {
    for (Pipeline pl : kPipelines) {
      for (std::size_t count : counts_for(p)) {
        for (bool uneven : {false, true}) {
          std::vector<std::size_t> offsets = equal_offsets(count, p);
          if (uneven) {
            for (int r = 0; r < p; ++r) {
              offsets[r + 1] = offsets[r] + (rng() % 3 == 0 ? 0 : rng() % (count + 2));
            }
          }
          for (auto [type, rop] : {std::pair{DataType::int64, ReduceOp::sum},
                                   std::pair{DataType::float16, ReduceOp::avg},
                                   std::pair{DataType::uint8, ReduceOp::prod}}) {
            for (bool in_place : {false, true}) {
              const std::size_t elem = collx::size_of(type);
              const std::size_t total = offsets.back();
              std::vector<Bytes> send(p, Bytes(total * elem)), recv(p);
              for (int r = 0; r < p; ++r) {
                collx::verify::fill_input(send[r].data(), type, rop, r, p, total);
                recv[r].assign((offsets[r + 1] - offsets[r]) * elem, std::byte{0x11});
              }
              SimWorld world(p);
              world.run(info_for(Collective::reduce_scatter, a, pl), [&](Operation& op, int r) {
                std::byte* out = in_place ? send[r].data() : recv[r].data();
                return reduce_scatter_task(
                    op, {send[r].data(), out, offsets, Reduction::make(type, rop, p), {}}, a);
              });
              for (int r = 0; r < p; ++r) {
                const std::size_t n = offsets[r + 1] - offsets[r];
                Bytes expected(n * elem);
                collx::verify::fill_expected(expected.data(), type, rop, p, n, offsets[r]);
                Bytes got(send[r].begin(), send[r].begin() + static_cast<std::ptrdiff_t>(n * elem));
                if (!in_place) got = recv[r];
                ASSERT_EQ(got, expected)
                    << what(Collective::reduce_scatter, a, p, type, count, -1, in_place, pl)
                    << (uneven ? " uneven" : "") << " rank " << r;
              }
            }
          }
        }
      }
    }
  }
}

TEST_P(SimCollectives, GatherAndScatter) {
  const int p = GetParam();
  const DataType type = DataType::int32;
  for (Algorithm a : collx::algorithms_of(Collective::gather)) {
    for (std::size_t count : counts_for(p)) {
      for (int root : roots_for(p)) {
        for (bool in_place : {false, true}) {
          const std::size_t block = count * 4;
          // gather: block r from rank r
          std::vector<Bytes> send(p), recv(p, Bytes(block * p, std::byte{0x44}));
          for (int r = 0; r < p; ++r)
            send[r] = pattern(type, r, count);
          if (in_place && block > 0)
            if (block) std::memcpy(recv[root].data() + root * block, send[root].data(), block);
          SimWorld gather_world(p);
          gather_world.run(info_for(Collective::gather, a, kPipelines[0]), [&](Operation& op,
                                                                               int r) {
            const std::byte* s = in_place && r == root ? nullptr : send[r].data();
            return gather_task(op, {s, recv[r].data(), equal_offsets(count, p), 4, root, {}}, a);
          });
          Bytes expected;
          for (int r = 0; r < p; ++r) {
            const Bytes b = pattern(type, r, count);
            expected.insert(expected.end(), b.begin(), b.end());
          }
          ASSERT_EQ(recv[root], expected)
              << what(Collective::gather, a, p, type, count, root, in_place, kPipelines[0]);

          // scatter: block r of the root's buffer to rank r
          const Bytes all = pattern(type, root, count * p);
          std::vector<Bytes> out(p, Bytes(block, std::byte{0x22}));
          SimWorld scatter_world(p);
          scatter_world.run(
              info_for(Collective::scatter, a, kPipelines[0]), [&](Operation& op, int r) {
                std::byte* o = in_place && r == root ? nullptr : out[r].data();
                return scatter_task(op, {all.data(), o, equal_offsets(count, p), 4, root, {}}, a);
              });
          for (int r = 0; r < p; ++r) {
            if (in_place && r == root) continue;  // the root's block stays in its send buffer
            ASSERT_EQ(out[r], pattern(type, root, count, r * count))
                << what(Collective::scatter, a, p, type, count, root, in_place, kPipelines[0])
                << " rank " << r;
          }
        }
      }
    }
  }
}

TEST_P(SimCollectives, Alltoall) {
  const int p = GetParam();
  const DataType type = DataType::uint32;
  for (Algorithm a : collx::algorithms_of(Collective::alltoall)) {
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{13}}) {
      for (bool in_place : {false, true}) {
        const std::size_t block = count * 4;
        std::vector<Bytes> send(p), recv(p, Bytes(block * p, std::byte{0x66}));
        for (int r = 0; r < p; ++r)
          send[r] = pattern(type, r, count * p);  // block j: first j*count
        if (in_place) recv = send;
        SimWorld world(p);
        world.run(info_for(Collective::alltoall, a, kPipelines[1]), [&](Operation& op, int r) {
          const std::byte* s = in_place ? recv[r].data() : send[r].data();
          return alltoall_task(op, {s, recv[r].data(), count, 4, {}}, a);
        });
        for (int j = 0; j < p; ++j) {
          for (int i = 0; i < p; ++i) {
            const Bytes expected = pattern(type, i, count, j * count);
            const Bytes got(recv[j].begin() + static_cast<std::ptrdiff_t>(i * block),
                            recv[j].begin() + static_cast<std::ptrdiff_t>((i + 1) * block));
            ASSERT_EQ(got, expected)
                << what(Collective::alltoall, a, p, type, count, -1, in_place, kPipelines[1])
                << " block from " << i << " at " << j;
          }
        }
      }
    }
  }
}

// Every allreduce row of the registry (allreduce_sim_test covers ring, recursive doubling and
// Rabenseifner across types and ops in depth; a row added to the registry is run here).
TEST_P(SimCollectives, AllreduceEveryRegistryRow) {
  const int p = GetParam();
  for (Algorithm a : collx::algorithms_of(Collective::allreduce)) {
    for (Pipeline pl : kPipelines) {
      for (std::size_t count : counts_for(p)) {
        for (bool in_place : {false, true}) {
          const DataType type = DataType::float32;
          const ReduceOp rop = ReduceOp::avg;
          std::vector<Bytes> send(p, Bytes(count * 4)), recv(p, Bytes(count * 4, std::byte{0x12}));
          for (int r = 0; r < p; ++r)
            collx::verify::fill_input(send[r].data(), type, rop, r, p, count);
          if (in_place) recv = send;
          SimWorld world(p);
          world.run(info_for(Collective::allreduce, a, pl), [&](Operation& op, int r) {
            const std::byte* s = in_place ? recv[r].data() : send[r].data();
            return allreduce_task(op, {s, recv[r].data(), count, Reduction::make(type, rop, p), {}},
                                  a);
          });
          Bytes expected(count * 4);
          collx::verify::fill_expected(expected.data(), type, rop, p, count);
          for (int r = 0; r < p; ++r) {
            ASSERT_EQ(recv[r], expected)
                << what(Collective::allreduce, a, p, type, count, -1, in_place, pl) << " rank "
                << r;
          }
        }
      }
    }
  }
}

// Two ranks' floating-point values are combined once, as rank 0's op rank 1's, by every
// algorithm: allreduce, reduce and reduce_scatter give the same bits whichever algorithm runs
// (auto's trials rely on it: at two ranks the default COLLX_AUTOTUNE=1 tries floating-point
// reductions too). Random values with signed zeros, infinities, NaNs of distinct
// payloads and subnormals, every floating type, sum, prod and avg, both pipelines.
Bytes random_floats(DataType type, std::size_t count, std::mt19937& rng) {
  std::uniform_real_distribution<double> mantissa(-2.0, 2.0);
  std::uniform_int_distribution<int> exponent(-30, 30), special(0, 15);
  const std::size_t size = collx::size_of(type);
  Bytes out(count * size);
  for (std::size_t i = 0; i < count; ++i) {
    double v = std::ldexp(mantissa(rng), exponent(rng));
    switch (special(rng)) {
      case 0:
        v = -0.0;
        break;
      case 1:
        v = 0.0;
        break;
      case 2:
        v = -std::numeric_limits<double>::infinity();
        break;
      case 3:
        v = std::numeric_limits<double>::denorm_min() * 3;
        break;
      default:
        break;
    }
    std::byte* at = out.data() + i * size;
    switch (type) {
      case DataType::float64:
        std::memcpy(at, &v, 8);
        break;
      case DataType::float32: {
        float f = static_cast<float>(v);
        if (special(rng) == 0) {
          const std::uint32_t nan = 0x7fc00000u | static_cast<std::uint32_t>(rng() & 0x3fffffu);
          std::memcpy(&f, &nan, 4);
        }
        std::memcpy(at, &f, 4);
        break;
      }
      case DataType::float16: {
        const collx::float16 h(static_cast<float>(v));
        std::memcpy(at, &h, 2);
        break;
      }
      default: {
        const collx::bfloat16 h(static_cast<float>(v));
        std::memcpy(at, &h, 2);
        break;
      }
    }
  }
  return out;
}

// A floating-point element's value (as a double) and its bits.
std::pair<double, std::uint64_t> element_at(DataType type, const std::byte* at) {
  switch (type) {
    case DataType::float64: {
      double value;
      std::uint64_t bits;
      std::memcpy(&value, at, 8);
      std::memcpy(&bits, at, 8);
      return {value, bits};
    }
    case DataType::float32: {
      float value;
      std::uint32_t bits;
      std::memcpy(&value, at, 4);
      std::memcpy(&bits, at, 4);
      return {value, bits};
    }
    case DataType::float16: {
      collx::float16 value;
      std::uint16_t bits;
      std::memcpy(&value, at, 2);
      std::memcpy(&bits, at, 2);
      return {static_cast<float>(value), bits};
    }
    default: {
      collx::bfloat16 value;
      std::uint16_t bits;
      std::memcpy(&value, at, 2);
      std::memcpy(&bits, at, 2);
      return {static_cast<float>(value), bits};
    }
  }
}

std::string describe_element(DataType type, const std::byte* at) {
  const auto [value, bits] = element_at(type, at);
  char hex[24];
  std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(bits));
  return std::to_string(value) + " (" + hex + ")";
}

bool is_nan(DataType type, const std::byte* at) {
  return std::isnan(element_at(type, at).first);
}

TEST(SimTwoRanks, FloatingPointResultsAreTheSameBitsWithEveryAlgorithm) {
  const int p = 2;
  const std::size_t count = 2 * 1001;  // reduce_scatter: 1001 elements a rank
  std::mt19937 rng(2);
  for (DataType type :
       {DataType::float32, DataType::float64, DataType::float16, DataType::bfloat16}) {
    const std::size_t elem = collx::size_of(type);
    const std::vector<Bytes> send{random_floats(type, count, rng), random_floats(type, count, rng)};
    for (ReduceOp rop : {ReduceOp::sum, ReduceOp::prod, ReduceOp::avg}) {
      const Reduction reduction = Reduction::make(type, rop, p);
      // Each collective's result (every rank's output, concatenated) from its first algorithm.
      std::optional<Bytes> first[3];
      const auto check = [&](int which, Collective c, Algorithm a, Pipeline pl, const Bytes& got) {
        if (!first[which]) {
          first[which] = got;
          return;
        }
        ASSERT_EQ(got.size(), first[which]->size());
        for (std::size_t i = 0; i < got.size(); i += elem) {
          // Where both inputs are NaNs, IEEE 754 leaves open whose payload the result carries,
          // and compilers swap the operands of a commutative add: any NaN is the same result.
          if (is_nan(type, got.data() + i) && is_nan(type, first[which]->data() + i)) continue;
          ASSERT_EQ(std::memcmp(got.data() + i, first[which]->data() + i, elem), 0)
              << what(c, a, p, type, count, 0, false, pl) << " " << collx::to_string(rop)
              << ": element " << i / elem << " of the output differs from "
              << collx::to_string(collx::algorithms_of(c)[0])
              << "'s: " << describe_element(type, got.data() + i) << " against "
              << describe_element(type, first[which]->data() + i) << " (inputs "
              << describe_element(type, send[0].data() + (i % (count * elem))) << ", "
              << describe_element(type, send[1].data() + (i % (count * elem))) << ")";
        }
      };
      for (Pipeline pl : kPipelines) {
        for (Algorithm a : collx::algorithms_of(Collective::allreduce)) {
          std::vector<Bytes> recv(p, Bytes(count * elem));
          SimWorld world(p);
          world.run(info_for(Collective::allreduce, a, pl), [&](Operation& op, int r) {
            return allreduce_task(op, {send[r].data(), recv[r].data(), count, reduction, {}}, a);
          });
          ASSERT_EQ(recv[0], recv[1]);
          check(0, Collective::allreduce, a, pl, recv[0]);
        }
        for (Algorithm a : collx::algorithms_of(Collective::reduce)) {
          Bytes got;
          for (int root = 0; root < p; ++root) {
            std::vector<Bytes> recv(p, Bytes(count * elem));
            SimWorld world(p);
            world.run(info_for(Collective::reduce, a, pl), [&](Operation& op, int r) {
              return reduce_task(
                  op, {send[r].data(), recv[r].data(), count, reduction, root, {}, Algorithm::ring},
                  a);
            });
            got.insert(got.end(), recv[root].begin(), recv[root].end());
          }
          check(1, Collective::reduce, a, pl, got);
        }
        for (Algorithm a : collx::algorithms_of(Collective::reduce_scatter)) {
          const std::vector<std::size_t> offsets = equal_offsets(count / p, p);
          std::vector<Bytes> recv(p);
          for (int r = 0; r < p; ++r)
            recv[r].resize((offsets[r + 1] - offsets[r]) * elem);
          SimWorld world(p);
          world.run(info_for(Collective::reduce_scatter, a, pl), [&](Operation& op, int r) {
            return reduce_scatter_task(op, {send[r].data(), recv[r].data(), offsets, reduction, {}},
                                       a);
          });
          Bytes got = recv[0];
          got.insert(got.end(), recv[1].begin(), recv[1].end());
          check(2, Collective::reduce_scatter, a, pl, got);
        }
      }
    }
  }
}

// The rows marked segments_keep_bits give the same bits whatever their segment size: auto times
// their segment sizes on order-sensitive calls (CommState::segment_tuner_for), and that must not
// change a result. Finite random floats of mixed magnitudes (their sums depend on the order), at
// 3 to 16 ranks, segments from 64 B to the whole call, every rank's output (a reduce's at two
// roots).
TEST(SimSegments, RowsThatKeepBitsAcrossSegmentsDo) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> mantissa(-2.0, 2.0);
  std::uniform_int_distribution<int> exponent(-12, 12);
  const DataType type = DataType::float32;
  const std::size_t count = 4099;
  const std::size_t elem = collx::size_of(type);
  std::vector<Algorithm> marked;
  for (const AlgorithmRow& row : registry())
    if (row.segments_keep_bits) marked.push_back(row.algorithm);
  EXPECT_GE(marked.size(), 4u);
  for (int p : {3, 5, 8, 16}) {
    std::vector<Bytes> send(p, Bytes(count * elem));
    for (Bytes& b : send) {
      for (std::size_t i = 0; i < count; ++i) {
        const auto v = static_cast<float>(std::ldexp(mantissa(rng), exponent(rng)));
        std::memcpy(b.data() + i * elem, &v, elem);
      }
    }
    const Reduction reduction = Reduction::make(type, ReduceOp::sum, p);
    for (const AlgorithmRow& row : registry()) {
      if (!row.segments_keep_bits) continue;
      std::optional<Bytes> first;
      for (Pipeline pl : {Pipeline{64, 2}, Pipeline{1 << 10, 3}, Pipeline{count * elem, 4}}) {
        Bytes got;
        if (row.collective == Collective::allreduce) {
          std::vector<Bytes> recv(p, Bytes(count * elem));
          SimWorld world(p);
          world.run(info_for(row.collective, row.algorithm, pl), [&](Operation& op, int r) {
            return allreduce_task(op, {send[r].data(), recv[r].data(), count, reduction, {}},
                                  row.algorithm);
          });
          for (const Bytes& b : recv)
            got.insert(got.end(), b.begin(), b.end());
        } else {
          ASSERT_EQ(row.collective, Collective::reduce) << "no check for this collective";
          for (int root : {0, p - 1}) {
            std::vector<Bytes> recv(p, Bytes(count * elem));
            SimWorld world(p);
            world.run(info_for(row.collective, row.algorithm, pl), [&](Operation& op, int r) {
              return reduce_task(
                  op, {send[r].data(), recv[r].data(), count, reduction, root, {}, Algorithm::ring},
                  row.algorithm);
            });
            got.insert(got.end(), recv[root].begin(), recv[root].end());
          }
        }
        if (!first) {
          first = std::move(got);
          continue;
        }
        ASSERT_EQ(got.size(), first->size());
        for (std::size_t i = 0; i < got.size(); i += elem) {
          ASSERT_EQ(std::memcmp(got.data() + i, first->data() + i, elem), 0)
              << what(row.collective, row.algorithm, p, type, count, 0, false, pl) << ": element "
              << i / elem << " differs from the first segment size's: "
              << describe_element(type, got.data() + i) << " against "
              << describe_element(type, first->data() + i);
        }
      }
    }
  }
}

TEST_P(SimCollectives, BarrierAndPointToPoint) {
  const int p = GetParam();
  SimWorld world(p);
  world.run(info_for(Collective::barrier, Algorithm::dissemination, kPipelines[0]),
            [&](Operation& op, int) { return barrier_task(op, {}, Algorithm::dissemination); });
  // A ring shift with sendrecv: rank r sends to r+1 and receives from r-1.
  std::vector<Bytes> out(p), in(p, Bytes(24, std::byte{0}));
  for (int r = 0; r < p; ++r)
    out[r] = pattern(DataType::float64, r, 3);
  SimWorld ring(p);
  ring.run(info_for(Collective::sendrecv, Algorithm::direct, kPipelines[0]),
           [&](Operation& op, int r) {
             return point_to_point_task(
                 op, {out[r].data(), 24, (r + 1) % p, in[r].data(), 24, (r + p - 1) % p, 42});
           });
  for (int r = 0; r < p; ++r)
    ASSERT_EQ(in[r], out[(r + p - 1) % p]) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(P1to33, SimCollectives, ::testing::Range(1, 34));

// Large counts on a few sizes: segment counts well above the windows.
TEST(SimCollectivesLarge, LargeCountsOnSomeSizes) {
  for (int p : {2, 3, 5, 8}) {
    const std::size_t count = 100003;
    for (Algorithm a : collx::algorithms_of(Collective::broadcast)) {
      std::vector<Bytes> buf(p, Bytes(count * 4));
      buf[1 % p] = pattern(DataType::float32, 1, count);
      SimWorld world(p);
      world.run(info_for(Collective::broadcast, a, {64 << 10, 4}), [&](Operation& op, int r) {
        return broadcast_task(op, {buf[r].data(), count, 4, 1 % p, {}}, a);
      });
      for (int r = 0; r < p; ++r)
        ASSERT_EQ(buf[r], buf[1 % p]) << collx::to_string(a) << " p=" << p;
    }
    for (Algorithm a : collx::algorithms_of(Collective::reduce_scatter)) {
      std::vector<Bytes> send(p, Bytes(count * p * 4)), recv(p, Bytes(count * 4));
      for (int r = 0; r < p; ++r)
        collx::verify::fill_input(send[r].data(), DataType::float32, ReduceOp::sum, r, p,
                                  count * p);
      SimWorld world(p);
      world.run(info_for(Collective::reduce_scatter, a, {64 << 10, 4}), [&](Operation& op, int r) {
        return reduce_scatter_task(op,
                                   {send[r].data(),
                                    recv[r].data(),
                                    equal_offsets(count, p),
                                    Reduction::make(DataType::float32, ReduceOp::sum, p),
                                    {}},
                                   a);
      });
      for (int r = 0; r < p; ++r) {
        EXPECT_EQ(collx::verify::count_wrong(recv[r].data(), DataType::float32, ReduceOp::sum, p,
                                             count, r * count),
                  0u)
            << collx::to_string(a) << " p=" << p << " rank " << r;
      }
    }
    for (Algorithm a : collx::algorithms_of(Collective::allgather)) {
      std::vector<Bytes> recv(p, Bytes(count * p * 4));
      for (int r = 0; r < p; ++r)
        collx::verify::fill_pattern(recv[r].data() + r * count * 4, DataType::float32, r, count);
      SimWorld world(p);
      world.run(info_for(Collective::allgather, a, {64 << 10, 4}), [&](Operation& op, int r) {
        return allgather_task(op, {nullptr, recv[r].data(), equal_offsets(count, p), 4, {}}, a);
      });
      for (int r = 0; r < p; ++r) {
        for (int b = 0; b < p; ++b) {
          ASSERT_EQ(collx::verify::count_pattern_wrong(recv[r].data() + b * count * 4,
                                                       DataType::float32, b, count),
                    0u)
              << collx::to_string(a) << " p=" << p;
        }
      }
    }
  }
}

}  // namespace

// The shared-memory algorithms keep their rings' counters across calls: broadcasts, allgathers,
// alltoalls and reduces in turn on one world (roots, sizes and block lengths changing, zero-length
// blocks, more pieces than ring entries), with and without an arena (without one they
// run point-to-point).
namespace {
// Runs an alltoall through the arena of `world` with `per_block` int32 elements per block
// (patterns seeded by `seed`; the ranks r with in_place(r) call in place) and checks that every
// block arrived where it belongs.
void check_arena_alltoall(SimWorld& world, int seed, std::size_t per_block,
                          const std::function<bool(int)>& in_place, const std::string& where) {
  const int p = world.size();
  const std::size_t block_bytes = per_block * 4;
  std::vector<Bytes> blocks(p), out(p, Bytes(block_bytes * p, std::byte{0x44}));
  for (int r = 0; r < p; ++r) {
    blocks[r] = pattern(DataType::int32, r + seed, per_block * p);
    if (in_place(r)) out[r] = blocks[r];
  }
  world.run(
      info_for(Collective::alltoall, Algorithm::shared_memory, kPipelines[0]),
      [&](Operation& op, int r) {
        const std::byte* from = in_place(r) ? out[r].data() : blocks[r].data();
        return alltoall_task(op, {from, out[r].data(), per_block, 4, {}}, Algorithm::shared_memory);
      });
  for (int r = 0; r < p; ++r) {
    for (int i = 0; i < p; ++i) {
      const auto from = blocks[i].begin() + static_cast<std::ptrdiff_t>(r * block_bytes);
      ASSERT_TRUE(std::equal(from, from + static_cast<std::ptrdiff_t>(block_bytes),
                             out[r].begin() + static_cast<std::ptrdiff_t>(i * block_bytes)))
          << where << " alltoall block from " << i << " at " << r;
    }
  }
}

// A broadcast of `bytes` through the arena from `root` (int8 data of `seed`), checked on every
// rank; returns the address of the root's buffer (the slot of a broadcast as pointers holds it).
std::uint64_t check_arena_broadcast(SimWorld& world, int root, int seed, std::size_t bytes,
                                    const std::string& where) {
  const int p = world.size();
  std::vector<Bytes> buf(p, Bytes(bytes, std::byte{0x5a}));
  buf[root] = pattern(DataType::int8, seed, bytes);
  world.run(
      info_for(Collective::broadcast, Algorithm::shared_memory, kPipelines[0]),
      [&](Operation& op, int r) {
        return broadcast_task(op, {buf[r].data(), bytes, 1, root, {}}, Algorithm::shared_memory);
      });
  for (int r = 0; r < p; ++r)
    EXPECT_EQ(buf[r], buf[root]) << where << " broadcast rank " << r;
  return reinterpret_cast<std::uint64_t>(buf[root].data());
}

void calls_in_sequence_on_one_segment() {
  for (int p : {2, 3, 4, 7}) {
    for (int slots : {0, 1, 3}) {
      SimWorld world(p, 256, slots);
      std::mt19937 rng(static_cast<unsigned>(p * 10 + slots));
      for (int call = 0; call < 18; ++call) {
        const std::size_t count = std::uniform_int_distribution<std::size_t>(0, 3000)(rng);
        const std::string where = "p=" + std::to_string(p) + " slots=" + std::to_string(slots) +
                                  " call " + std::to_string(call) + " count " +
                                  std::to_string(count);
        if (call % 3 == 2) {
          // Reduce, int32 sum of small values (exact); every fourth in place at the root.
          const int root = (call / 3) % p;
          const bool in_place = call % 4 == 3;
          std::vector<std::vector<std::int32_t>> send(p, std::vector<std::int32_t>(count));
          std::vector<std::int32_t> expected(count, 0);
          for (int r = 0; r < p; ++r) {
            for (std::size_t i = 0; i < count; ++i) {
              send[r][i] = (r + 1) * static_cast<std::int32_t>(i % 7 + call);
              expected[i] += send[r][i];
            }
          }
          std::vector<std::int32_t> recv(count, -1);
          if (in_place) recv = send[root];
          world.run(info_for(Collective::reduce, Algorithm::shared_memory, kPipelines[0]),
                    [&](Operation& op, int r) {
                      const auto* s = reinterpret_cast<const std::byte*>(
                          r == root && in_place ? recv.data() : send[r].data());
                      return reduce_task(op,
                                         {s,
                                          reinterpret_cast<std::byte*>(recv.data()),
                                          count,
                                          Reduction::make(DataType::int32, ReduceOp::sum, p),
                                          root,
                                          {},
                                          Algorithm::ring},
                                         Algorithm::shared_memory);
                    });
          ASSERT_EQ(recv, expected) << where << " reduce root " << root;
          continue;
        }
        if (call % 3 == 0) {
          const int root = call % p;
          check_arena_broadcast(world, root, root + call, count, where);
          if (::testing::Test::HasFailure()) return;
          continue;
        }
        // Allgather with uneven blocks, one of them empty.
        std::vector<std::size_t> offsets(p + 1, 0);
        for (int r = 0; r < p; ++r) {
          const std::size_t len =
              r == call % p ? 0 : std::uniform_int_distribution<std::size_t>(0, count)(rng);
          offsets[r + 1] = offsets[r] + len;
        }
        const bool in_place = call % 4 == 1;
        std::vector<Bytes> send(p), recv(p, Bytes(offsets[p] * 4, std::byte{0x33}));
        Bytes expected;
        for (int r = 0; r < p; ++r) {
          send[r] = pattern(DataType::int32, r + call, offsets[r + 1] - offsets[r]);
          expected.insert(expected.end(), send[r].begin(), send[r].end());
        }
        if (in_place) {
          for (int r = 0; r < p; ++r)
            if (!send[r].empty())
              std::memcpy(recv[r].data() + offsets[r] * 4, send[r].data(), send[r].size());
        }
        world.run(info_for(Collective::allgather, Algorithm::shared_memory, kPipelines[0]),
                  [&](Operation& op, int r) {
                    return allgather_task(
                        op, {in_place ? nullptr : send[r].data(), recv[r].data(), offsets, 4, {}},
                        Algorithm::shared_memory);
                  });
        for (int r = 0; r < p; ++r)
          ASSERT_EQ(recv[r], expected) << where << " allgather rank " << r;
        // Then an alltoall of count / p elements per block (several ring slots each), in
        // place every other call.
        check_arena_alltoall(
            world, call, count / static_cast<std::size_t>(p), [&](int) { return in_place; }, where);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}
}  // namespace

TEST(SimSharedMemory, CallsInSequenceOnOneSegment) {
  calls_in_sequence_on_one_segment();
}

// A slot of at most SharedArena::kInlineBytes published by fill_slot travels in its descriptor
// line too (its length tagged there), and a reader of that length copies it from there; a slot
// published otherwise at the same ring position later (an allreduce's reduced piece of the same
// length, publish_filled) clears the tag, so no reader takes the earlier bytes for it. Broadcasts
// of 8p and 40 B alternate with allreduces of p int64, over the 3 slots of each ring many times.
TEST(SimSharedMemory, SmallSlotsTravelInTheirDescriptorLines) {
  for (int p : {2, 3}) {
    SimWorld world(p, 256, 3);
    SharedArena& arena = *world.shared_arena();
    for (int call = 0; call < 24; ++call) {
      const std::string where = "p=" + std::to_string(p) + " call " + std::to_string(call);
      const int root = call % p;
      // The allreduce's blocks start on cache lines: its p int64 are rank 0's block, whose
      // reduced piece the others take with this length.
      const std::size_t bytes = call % 4 == 1 ? SharedArena::kInlineBytes : 8 * p;
      check_arena_broadcast(world, root, 7 * call + 1, bytes, where);
      if (::testing::Test::HasFatalFailure()) return;
      const std::uint64_t last = arena.published(root).load() - 1;
      EXPECT_EQ(arena.descriptor(root, last).bytes.load(), SharedArena::kInlineTag | bytes)
          << where;
      EXPECT_EQ(arena.descriptor(root, last).stamp.load(), last + 1) << where;
      // One int64 a rank: each rank reduces its own 8 B and publishes it for the others.
      const auto count = static_cast<std::size_t>(p);
      std::vector<std::vector<std::int64_t>> send(p, std::vector<std::int64_t>(count));
      std::vector<std::vector<std::int64_t>> recv(p, std::vector<std::int64_t>(count, -1));
      std::vector<std::int64_t> expected(count, 0);
      for (int r = 0; r < p; ++r) {
        for (std::size_t i = 0; i < count; ++i) {
          send[r][i] = (r + 1) * 1000 + static_cast<std::int64_t>(i) + call;
          expected[i] += send[r][i];
        }
      }
      world.run(info_for(Collective::allreduce, Algorithm::shared_memory, kPipelines[0]),
                [&](Operation& op, int r) {
                  return allreduce_task(op,
                                        {reinterpret_cast<const std::byte*>(send[r].data()),
                                         reinterpret_cast<std::byte*>(recv[r].data()),
                                         count,
                                         Reduction::make(DataType::int64, ReduceOp::sum, p),
                                         {}},
                                        Algorithm::shared_memory);
                });
      for (int r = 0; r < p; ++r)
        ASSERT_EQ(recv[r], expected) << where << " allreduce rank " << r;
      for (int r = 0; r < p; ++r) {
        const std::uint64_t reduced = arena.published(r).load() - 1;
        EXPECT_EQ(arena.descriptor(r, reduced).bytes.load(), 0u) << where << " rank " << r;
      }
    }
  }
}

namespace {
// Sets COLLX_SHM_DIRECT to `setting` (the configuration stays so) and says whether a two-rank
// world's segment then allows direct reads.
bool direct_reads_with(std::optional<bool> setting) {
  Config c;
  c.shm_direct = setting;
  set_config(c);
  SimWorld world(2, 256, 3);
  return world.shared_arena() != nullptr && world.shared_arena()->direct_reads();
}
}  // namespace

namespace {
// Runs body(setting) with COLLX_SHM_DIRECT unset and =1 in turn, and the default configuration
// again however it ends (a body's assertions return early).
template <class Body>
void with_direct_unset_and_forced(Body body) {
  struct DefaultConfigAtExit {
    ~DefaultConfigAtExit() { set_config(Config{}); }
  } restore;
  for (std::optional<bool> setting : {std::optional<bool>{}, std::optional<bool>{true}}) {
    Config c;
    c.shm_direct = setting;
    set_config(c);
    body(setting);
    if (::testing::Test::HasFatalFailure()) return;
  }
}
}  // namespace

// Alltoall through the arena where the even ranks call in place and the odd ones not: the
// ranks agree whether blocks go as pointers (at two ranks, blocks of 48 KiB are in the direct
// window; COLLX_SHM_DIRECT=1 makes every block go so) whatever each rank's call, and every
// block arrives. Blocks of 8 KiB go through the 512-byte ring slots.
TEST(SimSharedMemory, AlltoallInPlaceOnSomeRanks) {
  with_direct_unset_and_forced([](std::optional<bool> setting) {
    for (int p : {2, 3}) {
      for (std::size_t block_bytes : {std::size_t{8} << 10, std::size_t{48} << 10}) {
        SimWorld world(p);
        ASSERT_NE(world.shared_arena(), nullptr);
        check_arena_alltoall(
            world, 1, block_bytes / 4, [](int r) { return r % 2 == 0; },
            "p=" + std::to_string(p) + " block " + std::to_string(block_bytes) + " direct " +
                (setting.has_value() ? "forced" : "unset"));
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  });
}

// The same with every allgather block handed over as a pointer (readers copy it straight from
// the producer's buffer, here with process_vm_readv on this process), between pieces that
// broadcasts and reduces put through the rings.
TEST(SimSharedMemory, DirectReadsBetweenRingPieces) {
  EXPECT_TRUE(direct_reads_with(true));
  calls_in_sequence_on_one_segment();
  EXPECT_FALSE(direct_reads_with(false));
  set_config(Config{});
}

// Broadcasts, gathers and scatters through the arena as pointers (a broadcast's root writes each
// rank's piece into its buffer and every other rank reads the rest from the root's; a gather's
// ranks write their blocks into the root's buffer, a scatter's read theirs from it; here with
// process_vm_writev and _readv on this process) and through the rings, in turn on one world: by
// default a broadcast at two ranks from 32 KiB, a gather or scatter from a largest block of 32
// KiB at two ranks and 64 KiB above; with COLLX_SHM_DIRECT=1 at every rank count and size. Sizes
// that leave pieces empty or short of a page, uneven blocks (one empty), every root, in place at
// the root every other call. The root's slot says how each call went: a pointer to its buffer, or
// none.
TEST(SimSharedMemory, RootedCallsAsPointers) {
  with_direct_unset_and_forced([](std::optional<bool> setting) {
    for (int p : {2, 3, 4, 7}) {
      SimWorld world(p, 4096, 3);
      ASSERT_NE(world.shared_arena(), nullptr);
      SharedArena& arena = *world.shared_arena();
      ASSERT_TRUE(arena.direct_reads());
      const std::size_t sizes[] = {1,        4095,   (32 << 10) - 1, 32 << 10,     5 << 10,
                                   4096 * 7, 100001, 3 * (64 << 10), (1 << 20) + 3};
      int call = 0;
      for (std::size_t bytes : sizes) {
        const int root = call % p;
        const std::string where = "p=" + std::to_string(p) + " bytes " + std::to_string(bytes) +
                                  " root " + std::to_string(root) + " direct " +
                                  (setting.has_value() ? "forced" : "unset");
        const std::uint64_t root_buffer =
            check_arena_broadcast(world, root, root + call, bytes, where);
        if (::testing::Test::HasFailure()) return;
        const bool direct = setting.value_or(p == 2 && bytes >= (32 << 10));
        const std::uint64_t last = arena.published(root).load() - 1;
        EXPECT_EQ(arena.descriptor(root, last).address.load(), direct ? root_buffer : 0) << where;
        // Every slot published is consumed by every other rank.
        for (int reader = 0; reader < p; ++reader) {
          for (int producer = 0; producer < p; ++producer) {
            if (reader != producer) {
              EXPECT_EQ(arena.consumed(reader, producer).load(), arena.published(producer).load())
                  << where << " reader " << reader << " producer " << producer;
            }
          }
        }
        // Gather, then scatter, blocks of about bytes / p, uneven, one empty where p > 2.
        std::vector<std::size_t> offsets(p + 1, 0);
        for (int r = 0; r < p; ++r) {
          const std::size_t length =
              p > 2 && r == (root + 1) % p ? 0 : bytes / p + static_cast<std::size_t>(r) * 7;
          offsets[r + 1] = offsets[r] + length;
        }
        const std::size_t total = offsets[p];
        const std::size_t largest = offsets[p] == 0 ? 0 : [&] {
          std::size_t m = 0;
          for (int r = 0; r < p; ++r)
            m = std::max(m, offsets[r + 1] - offsets[r]);
          return m;
        }();
        const bool rooted_direct =
            largest > 0 && setting.value_or(largest >= (p == 2 ? 32u << 10 : 64u << 10));
        const bool in_place = call % 2 == 1;
        std::vector<Bytes> send(p);
        Bytes expected;
        for (int r = 0; r < p; ++r) {
          send[r] = pattern(DataType::int8, r + 3 * call, offsets[r + 1] - offsets[r]);
          expected.insert(expected.end(), send[r].begin(), send[r].end());
        }
        Bytes gathered(total, std::byte{0x44});
        if (in_place)
          std::copy(send[root].begin(), send[root].end(), gathered.begin() + offsets[root]);
        world.run(info_for(Collective::gather, Algorithm::shared_memory, kPipelines[0]),
                  [&](Operation& op, int r) {
                    const std::byte* s = in_place && r == root ? nullptr : send[r].data();
                    return gather_task(op, {s, gathered.data(), offsets, 1, root, {}},
                                       Algorithm::shared_memory);
                  });
        ASSERT_EQ(gathered, expected) << where << " gather";
        // (Through the rings the root publishes nothing in a gather.)
        if (rooted_direct) {
          EXPECT_EQ(arena.descriptor(root, arena.published(root).load() - 1).address.load(),
                    reinterpret_cast<std::uint64_t>(gathered.data()))
              << where << " gather";
        }
        std::vector<Bytes> scattered(p);
        for (int r = 0; r < p; ++r)
          scattered[r] = Bytes(offsets[r + 1] - offsets[r], std::byte{0x22});
        world.run(info_for(Collective::scatter, Algorithm::shared_memory, kPipelines[0]),
                  [&](Operation& op, int r) {
                    std::byte* o = in_place && r == root ? nullptr : scattered[r].data();
                    return scatter_task(op, {expected.data(), o, offsets, 1, root, {}},
                                        Algorithm::shared_memory);
                  });
        for (int r = 0; r < p; ++r) {
          if (in_place && r == root) continue;
          ASSERT_EQ(scattered[r], send[r]) << where << " scatter rank " << r;
        }
        if (rooted_direct) {
          EXPECT_EQ(arena.descriptor(root, arena.published(root).load() - 1).address.load(),
                    reinterpret_cast<std::uint64_t>(expected.data()))
              << where << " scatter";
        }
        for (int reader = 0; reader < p; ++reader) {
          for (int producer = 0; producer < p; ++producer) {
            if (reader != producer) {
              EXPECT_EQ(arena.consumed(reader, producer).load(), arena.published(producer).load())
                  << where << " after gather and scatter, reader " << reader << " producer "
                  << producer;
            }
          }
        }
        ++call;
      }
    }
  });
}

// The piece-by-piece reductions (allreduce, reduce_scatter through the arena) in turn on one world,
// with broadcasts between them putting bytes through the rings: in and out of place, counts that
// leave some ranks' pieces empty, more rounds than ring entries. Run with every piece handed
// over as a pointer (COLLX_SHM_DIRECT=1: readers copy inputs and reduced pieces straight from
// the producer's buffers) and with none (=0).
namespace {
void sliced_reductions_on_one_segment() {
  for (int p : {2, 3, 4, 7}) {
    for (std::size_t slot_bytes : {std::size_t{256}, std::size_t{4096}}) {
      SimWorld world(p, slot_bytes, 3);
      ASSERT_NE(world.shared_arena(), nullptr);
      std::mt19937 rng(static_cast<unsigned>(p * 100 + static_cast<int>(slot_bytes)));
      for (int call = 0; call < 12; ++call) {
        const std::size_t count = std::uniform_int_distribution<std::size_t>(0, 2500)(rng);
        const bool in_place = call % 2 == 1;
        const std::string where = "p=" + std::to_string(p) + " slot " + std::to_string(slot_bytes) +
                                  " call " + std::to_string(call) + " count " +
                                  std::to_string(count) + (in_place ? " in place" : "");
        std::vector<std::vector<std::int32_t>> send(p, std::vector<std::int32_t>(count * p));
        std::vector<std::int32_t> expected(count * p, 0);
        for (int r = 0; r < p; ++r) {
          for (std::size_t i = 0; i < count * p; ++i) {
            send[r][i] = (r + 1) * static_cast<std::int32_t>(i % 11 + call) - 7;
            expected[i] += send[r][i];
          }
        }
        if (call % 3 == 2) {
          // reduce_scatter: rank r keeps block r (count elements).
          std::vector<std::vector<std::int32_t>> recv(p, std::vector<std::int32_t>(count, -1));
          world.run(info_for(Collective::reduce_scatter, Algorithm::shared_memory, kPipelines[0]),
                    [&](Operation& op, int r) {
                      return reduce_scatter_task(
                          op,
                          {reinterpret_cast<const std::byte*>(send[r].data()),
                           reinterpret_cast<std::byte*>(recv[r].data()),
                           equal_offsets(count, p),
                           Reduction::make(DataType::int32, ReduceOp::sum, p),
                           {}},
                          Algorithm::shared_memory);
                    });
          for (int r = 0; r < p; ++r) {
            const std::vector<std::int32_t> block(expected.begin() + r * count,
                                                  expected.begin() + (r + 1) * count);
            ASSERT_EQ(recv[r], block) << where << " reduce_scatter rank " << r;
          }
        } else {
          std::vector<std::vector<std::int32_t>> recv(p, std::vector<std::int32_t>(count * p, -1));
          if (in_place) recv = send;
          world.run(info_for(Collective::allreduce, Algorithm::shared_memory, kPipelines[0]),
                    [&](Operation& op, int r) {
                      const auto* s = reinterpret_cast<const std::byte*>(in_place ? recv[r].data()
                                                                                  : send[r].data());
                      return allreduce_task(op,
                                            {s,
                                             reinterpret_cast<std::byte*>(recv[r].data()),
                                             count * p,
                                             Reduction::make(DataType::int32, ReduceOp::sum, p),
                                             {}},
                                            Algorithm::shared_memory);
                    });
          for (int r = 0; r < p; ++r)
            ASSERT_EQ(recv[r], expected) << where << " allreduce rank " << r;
        }
        // A broadcast through the rings between the reductions.
        const int root = call % p;
        std::vector<Bytes> buf(p, Bytes(count + 1, std::byte{0x11}));
        buf[root] = pattern(DataType::int8, root + call, count + 1);
        world.run(info_for(Collective::broadcast, Algorithm::shared_memory, kPipelines[0]),
                  [&](Operation& op, int r) {
                    return broadcast_task(op, {buf[r].data(), count + 1, 1, root, {}},
                                          Algorithm::shared_memory);
                  });
        for (int r = 0; r < p; ++r)
          ASSERT_EQ(buf[r], buf[root]) << where << " broadcast rank " << r;
      }
    }
  }
}
}  // namespace

TEST(SimSharedMemory, SlicedReductionsThroughTheRings) {
  EXPECT_FALSE(direct_reads_with(false));
  sliced_reductions_on_one_segment();
  set_config(Config{});
}

TEST(SimSharedMemory, SlicedReductionsWithDirectReads) {
  EXPECT_TRUE(direct_reads_with(true));
  sliced_reductions_on_one_segment();
  set_config(Config{});
}
