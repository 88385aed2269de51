#include "actors/metrics_endpoint.hpp"

#include "troupe/error.hpp"
#include "troupe/log.hpp"

#include <vector>

namespace troupe::actors {

metrics_endpoint start_metrics_endpoint(const node_options& options, const task_registry* tasks,
                                        const std::string& node_name) {
  metrics_endpoint out;
  if (!options.metrics.enabled)
    return out;
  std::vector<std::string> queues;
  for (const auto& q : options.queues)
    queues.push_back(q.name);
  out.metrics = std::make_shared<node_metrics>(node_name, queues,
                                               tasks ? tasks->names() : std::vector<std::string>{});
  out.server = std::make_shared<http::server>(1);
  auto metrics = out.metrics;
  out.server->get("/metrics", [metrics](const http::request&) {
    return http::response{200, "text/plain; version=0.0.4; charset=utf-8", metrics->render(), {}};
  });
  try {
    out.server->start(http::listen_address{options.metrics.bind, options.metrics.port});
  } catch (const error& e) {
    throw error(errc::invalid_argument, std::string("metrics: ") + e.what());
  }
  const auto& bind = options.metrics.bind;
  log().info("node metrics on http://{}:{}/metrics name={}",
             bind.find(':') != std::string::npos ? "[" + bind + "]" : bind, out.server->port(),
             node_name);
  return out;
}

} // namespace troupe::actors
