// The web dashboard of an area (docs/dashboard.md): a page of Troupe's own HTML, CSS and
// JavaScript served from the binary, and the JSON API it reads and acts through. Every input
// from the page is parsed by the `troupe` command's own parsers and every action runs the
// command's own verb, so the page and the CLI refuse the same things with the same words.
// Plain C++ over the admin API (no CAF), served by troupe::http::server.
#pragma once

#include "troupe/area.hpp"

#include <chrono>
#include <memory>
#include <string>

namespace troupe::http {
class server;
}

namespace troupe::dashboard {

struct settings {
  /// The area's database (never shown on a page) and the area.
  std::string dsn;
  troupe::area where;
  /// The token actions need (Authorization: Bearer TOKEN); empty: every action is refused.
  std::string token;
  /// Refuse every action, token or not.
  bool read_only = false;
  /// Listening on a loopback address: requests must then name a loopback host (Host header),
  /// so that a web page elsewhere cannot reach it through DNS rebinding.
  bool loopback = true;
  /// How often queue counts are sampled for the throughput chart, and how many samples are kept.
  std::chrono::milliseconds sample_every{std::chrono::seconds(5)};
  std::size_t samples_kept = 121;
};

/// Owns the dashboard's admin connection and its sampler thread.
class service {
public:
  explicit service(settings s);
  ~service(); ///< stops the sampler
  service(const service&) = delete;
  service& operator=(const service&) = delete;

  /// Adds the page's and the API's routes to `s` (before s.start()).
  void mount(http::server& s);
  /// Starts sampling queue counts (the first sample at once); stop() joins it.
  void start();
  void stop();

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace troupe::dashboard
