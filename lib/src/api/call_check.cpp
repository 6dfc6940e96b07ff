// A call's signature (what every rank's call must share) and what runs around a call's
// schedule: COLLX_DEBUG's line per call, COLLX_CHECK's comparison of the ranks' signatures.
#include <cinttypes>
#include <cstdio>
#include <string>

#include "collx/error.hpp"
#include "comm_state.hpp"
#include "config.hpp"
#include "registry.hpp"

namespace collx::detail {

std::uint64_t CallSignature::hash() const {
  // FNV-1a over the fields: equal calls give equal hashes on every rank.
  std::uint64_t h = 1469598103934665603ull;
  for (const std::uint64_t v :
       {static_cast<std::uint64_t>(collective), count, static_cast<std::uint64_t>(type + 1),
        static_cast<std::uint64_t>(op + 1), static_cast<std::uint64_t>(root + 1)}) {
    for (int i = 0; i < 8; ++i)
      h = (h ^ ((v >> (8 * i)) & 0xff)) * 1099511628211ull;
  }
  return h;
}

std::string CallSignature::describe() const {
  std::string out = std::string(to_string(collective)) + "(count=" + std::to_string(count);
  if (type >= 0) out += ", " + std::string(to_string(static_cast<DataType>(type)));
  if (op >= 0) out += ", " + std::string(to_string(static_cast<ReduceOp>(op)));
  if (root >= 0) out += ", root=" + std::to_string(root);
  return out + ")";
}

namespace {

Task checked(Operation& op, CallSignature signature, Task body) {
  // Max over (h, ~h) gives (max h, ~min h): all ranks agree exactly when the two match.
  const std::uint64_t h = signature.hash();
  std::uint64_t mine[2] = {h, ~h};
  std::uint64_t all[2] = {0, 0};
  // These two words are host memory, whatever the call's buffers are.
  op.use_host_path(true);
  const AllreduceArgs words{
      reinterpret_cast<const std::byte*>(mine), reinterpret_cast<std::byte*>(all), 2,
      Reduction::make(DataType::uint64, ReduceOp::max, op.size()), Phases::check()};
  co_await allreduce_task(op, words, Algorithm::recursive_doubling);
  op.use_host_path(false);
  if (all[0] != ~all[1]) {
    // The schedule does not run on any rank (every rank sees the mismatch); one that took a
    // turn of the shared arena still takes it and ends it, in this rank's order.
    if (op.holds_turn() && !op.ends_turn()) {
      op.skip_schedule();
      co_await std::move(body);
    }
    throw Error(ErrorCode::mismatch, to_string(signature.collective), op.rank(),
                "COLLX_CHECK: the ranks did not all make the same call (this rank: " +
                    signature.describe() + ", sequence #" + std::to_string(op.info().sequence) +
                    ")");
  }
  co_await std::move(body);
}

}  // namespace

Task prepare(Operation& op, const CallSignature& signature, Task body) {
  const Config& c = config();
  if (c.debug >= DebugLevel::info) {
    std::fprintf(stderr,
                 "collx INFO rank %d: %s #%" PRIu64 " algo=%s segment=%zu depth=%d mem=%s\n",
                 op.rank(), signature.describe().c_str(), op.info().sequence,
                 std::string(to_string(op.info().algorithm)).c_str(), op.segment_bytes(),
                 op.pipeline_depth(), std::string(op.memory_mode()).c_str());
  }
  if (!c.check) return body;
  return checked(op, signature, std::move(body));
}

}  // namespace collx::detail
