// A worker node of the pipelines example, configured from troupe.ini (and flags): run two of
// them with different --node.name values and the steps of one order spread over both.
//
//   build/bin/orders-worker --config-file=examples/pipelines/troupe.ini --node.name=a
#include "orders.hpp"

#include <troupe/config.hpp>
#include <troupe/error.hpp>
#include <troupe/log.hpp>
#include <troupe/worker_node.hpp>

#include <chrono>
#include <iostream>
#include <numeric>
#include <thread>

namespace orders {

void define_tasks(troupe::task_registry& tasks, const std::string& node_name) {
  troupe::task_options keep;
  keep.store_results = true;
  // Each task says which node ran it in its log line; the lookup takes a while, as a remote
  // call would.
  tasks.define(
    price_line,
    [node_name](const std::string& sku, std::int64_t quantity) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      std::int64_t unit = 100 + static_cast<std::int64_t>(sku.size()) * 25;
      troupe::log().info("priced {} x{} on node {}", sku, quantity, node_name);
      return unit * quantity;
    },
    keep);
  tasks.define(
    total,
    [node_name](const std::vector<std::int64_t>& prices) {
      troupe::log().info("total of {} lines on node {}", prices.size(), node_name);
      return std::accumulate(prices.begin(), prices.end(), std::int64_t{0});
    },
    keep);
  tasks.define(
    confirm,
    [node_name](const std::string& order, std::int64_t cents) {
      troupe::log().info("confirmed {} on node {}", order, node_name);
      return order + " confirmed: " + std::to_string(cents) + " cents";
    },
    keep);
}

} // namespace orders

int main(int argc, char** argv) {
  try {
    auto settings = troupe::config::load(argc, argv);
    if (settings.help_printed)
      return 0;
    troupe::configure_logging(settings.logging.level, settings.logging.format);
    troupe::task_registry tasks;
    orders::define_tasks(tasks, settings.node.name);
    troupe::worker_node node(settings.node, std::move(tasks));
    return node.run().exit_code;
  } catch (const troupe::error& e) {
    std::cerr << "orders-worker: " << e.what() << "\n";
    return 2;
  }
}
