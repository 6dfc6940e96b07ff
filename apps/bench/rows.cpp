#include "rows.hpp"

namespace collx::bench {

std::vector<Row> make_table(const std::vector<Column>& columns, std::vector<Runner>& runners) {
  std::vector<Row> table;
  for (const auto& c : columns) {
    if (!c.collx()) {
      table.push_back({c.name, c, &runners.front()});
      continue;
    }
    for (auto& r : runners) {
      table.push_back({r.transport.empty() ? c.name : c.name + "@" + r.transport, c, &r});
    }
  }
  return table;
}

std::vector<Runner> make_runners(collx::Communicator& comm, const Plan& plan) {
  std::vector<Runner> runners;
  if (plan.transports.empty()) {
    runners.push_back({"", nullptr, collx::bench::make_bench(plan.collective, comm)});
    return runners;
  }
  for (const std::string& t : plan.transports) {
    auto c = std::make_unique<collx::Communicator>(
        comm.dup(t == "ucx" ? collx::TransportChoice::ucx : collx::TransportChoice::mpi));
    auto b = collx::bench::make_bench(plan.collective, *c);
    runners.push_back({t, std::move(c), std::move(b)});
  }
  return runners;
}

std::string describe_transports(const collx::Communicator& comm,
                                const std::vector<Runner>& runners) {
  std::string line;
  for (const auto& r : runners) {
    line += (line.empty() ? "" : ",") +
            std::string(r.transport.empty() ? comm.transport_name() : r.transport);
  }
  return line;
}

}  // namespace collx::bench
