// The tasks of the pipelines example, declared once for the worker and the producer: an order's
// lines are priced side by side (a group), then the prices are added up and the order is
// confirmed (the pipeline's last steps). Pricing goes through a rate-limited supplier: at most 2
// price lookups run at once across every worker node.
#pragma once

#include <troupe/coordination.hpp>
#include <troupe/task.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace orders {

/// The price of one order line, in cents; at most 2 at once across the fleet.
inline const troupe::task_ref<std::int64_t(std::string, std::int64_t)> price_line{
  "orders.price_line", "orders", {troupe::concurrency("supplier-api", 2)}};
/// The order's total: the group's results, in the order of its lines.
inline const troupe::task_ref<std::int64_t(std::vector<std::int64_t>)> total{"orders.total",
                                                                             "orders"};
/// The confirmation of order `id` for the total before it.
inline const troupe::task_ref<std::string(std::string, std::int64_t)> confirm{"orders.confirm",
                                                                              "orders"};

void define_tasks(troupe::task_registry& tasks, const std::string& node_name);

} // namespace orders
