// The producer of the pipelines example: one order as a pipeline whose first step is a group
// (its lines priced side by side, under the supplier's limit), then the total of the group's
// results, then the confirmation. Published in one transaction; prints the confirmation once
// the last step is done.
//
//   build/bin/orders-producer DSN [SCHEMA]
#include "orders.hpp"

#include <troupe/client.hpp>
#include <troupe/composition.hpp>
#include <troupe/error.hpp>

#include <chrono>
#include <iostream>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: orders-producer DSN [SCHEMA]\n";
    return 2;
  }
  try {
    troupe::client client({argv[1], troupe::area{argc > 2 ? argv[2] : "troupe", ""}});
    std::vector<troupe::member> lines;
    for (auto [sku, quantity] : std::vector<std::pair<std::string, std::int64_t>>{
           {"tea", 2}, {"coffee", 1}, {"biscuits", 3}, {"jam", 1}, {"honey", 2}, {"bread", 4}})
      lines.emplace_back(orders::price_line(sku, quantity));
    troupe::group priced(std::move(lines));
    troupe::pipeline order(
      {troupe::step(priced), troupe::step(troupe::then(orders::total)),
       troupe::step(troupe::then(orders::confirm, std::string("order-1001")))});
    order.run(client);
    std::cout << "published order-1001: " << priced.messages().size() << " lines, pipeline "
              << order.id() << "\n";
    std::cout << client.get_result<std::string>(order.last(), true, std::chrono::seconds(60))
              << "\n";
    auto results = order.get_results_json(client);
    std::cout << "steps done: " << order.completed_count(client) << " of " << results.size()
              << "\n";
    return 0;
  } catch (const troupe::error& e) {
    std::cerr << "orders-producer: " << e.what() << "\n";
    return 1;
  }
}
