// The config loader's sections of coordination and observation: [limits], [schedules] and
// [metrics], their defaults, flags, and the errors that name a bad value. No database.
#define CAF_SUITE config_sections
#include <caf/test/unit_test.hpp>

#include "config_test_support.hpp"

#include <string>

using troupe::config::load_from_string;
using namespace troupe::config_test;
namespace defaults = troupe::defaults;

namespace {

const troupe::limit* find_limit(const troupe::config::settings& s, const std::string& key) {
  for (const auto& l : s.node.limits)
    if (l.key == key)
      return &l;
  return nullptr;
}

} // namespace

CAF_TEST(limiters are declared by key in the limits section) {
  auto s = load_from_string("[limits]\n"
                            "payments={kind=\"concurrent\", limit=5}\n"
                            "mutex={limit=1}                ; concurrent by default\n"
                            "partner-api={kind=\"window\", limit=100, window=1min}\n"
                            "mail={kind=\"bucket\", limit=10, window=1000}\n");
  CAF_REQUIRE_EQUAL(s.node.limits.size(), 4u);
  CAF_CHECK(*find_limit(s, "payments") == troupe::concurrency("payments", 5));
  CAF_CHECK(*find_limit(s, "mutex") == troupe::concurrency("mutex", 1));
  CAF_CHECK(*find_limit(s, "partner-api") ==
            troupe::window("partner-api", 100, std::chrono::minutes(1)));
  CAF_CHECK(*find_limit(s, "mail") == troupe::bucket("mail", 10, std::chrono::seconds(1)));
  CAF_CHECK(load_from_string("").node.limits.empty());
  // A dotted key nests, as a dotted queue name does; a flag sets one value and keeps the rest.
  auto t = load_from_string("[limits.stripe]\ncharges={limit=3}\n",
                            {"--limits.stripe.charges.limit=4", "--limits.fresh.limit=2",
                             "--limits.fresh.kind=bucket", "--limits.fresh.window=2s"});
  CAF_REQUIRE_EQUAL(t.node.limits.size(), 2u);
  CAF_CHECK(*find_limit(t, "stripe.charges") == troupe::concurrency("stripe.charges", 4));
  CAF_CHECK(*find_limit(t, "fresh") == troupe::bucket("fresh", 2, std::chrono::seconds(2)));
}

CAF_TEST(a limiter in config is refused with an error that names its key) {
  CHECK_ERROR_HAS(load_from_string("[limits]\npayments={kind=\"conc\", limit=5}\n"),
                  "limits.payments.kind: limiter \"payments\": unknown kind \"conc\" "
                  "(concurrent, bucket or window)");
  CHECK_ERROR_HAS(load_from_string("[limits]\npayments={kind=\"concurrent\"}\n"),
                  "limits.payments.limit is required");
  CHECK_ERROR_HAS(load_from_string("[limits]\npayments={limit=0}\n"),
                  "limits.payments: limiter \"payments\": limit 0 is out of range");
  CHECK_ERROR_HAS(load_from_string("[limits]\npayments={limit=2, window=1s}\n"),
                  "limits.payments.window: a concurrent limiter has no window");
  CHECK_ERROR_HAS(load_from_string("[limits]\napi={kind=\"window\", limit=2}\n"),
                  "limits.api.window is required for a window limiter");
  CHECK_ERROR_HAS(load_from_string("[limits]\napi={kind=\"bucket\", limit=2, window=0}\n"),
                  "limiter \"api\": window 0 ms is out of range");
  CHECK_ERROR_HAS(load_from_string("[limits]\napi={limit=2, size=3}\n"),
                  "unknown key \"limits.api.size\"");
  CHECK_ERROR_HAS(load_from_string("[limits]\napi=3\n"), "limits.api: expected a table");
  CHECK_ERROR_HAS(load_from_string("[limits]\napi={limit=\"x\"}\n"),
                  "limits.api.limit: expected an integer");
  CHECK_ERROR_HAS(load_from_string("", {"--limits.api.limit=x"}), "limits.api.limit");
  CHECK_ERROR_HAS(load_from_string("", {"--limits.api.size=3"}), "unknown flag");
}

CAF_TEST(the schedules section turns the scheduler of a node on and is checked) {
  auto off = load_from_string("");
  CAF_CHECK(!off.node.scheduler.enabled);
  CAF_CHECK_EQUAL(off.node.scheduler.poll, std::chrono::seconds(1));
  auto on = load_from_string("[schedules]\nenabled=true\npoll=250ms\nbatch=20\n");
  CAF_CHECK(on.node.scheduler.enabled);
  CAF_CHECK_EQUAL(on.node.scheduler.poll, std::chrono::milliseconds(250));
  CAF_CHECK_EQUAL(on.node.scheduler.batch, 20);
  auto flagged = load_from_string("", {"--schedules.enabled=true", "--schedules.poll=2s"});
  CAF_CHECK(flagged.node.scheduler.enabled);
  CAF_CHECK_EQUAL(flagged.node.scheduler.poll, std::chrono::seconds(2));
  CHECK_ERROR_HAS(load_from_string("[schedules]\nenabled=\"yes\"\n"),
                  "schedules.enabled: expected true or false");
  CHECK_ERROR_HAS(load_from_string("[schedules]\npoll=1ms\n"),
                  "schedules.poll must be from 10ms to 1h");
  CHECK_ERROR_HAS(load_from_string("[schedules]\nbatch=0\n"),
                  "schedules.batch must be from 1 to 1000");
  CHECK_ERROR_HAS(load_from_string("[schedules]\nenable=true\n"),
                  "unknown key \"schedules.enable\"");
  CAF_CHECK(troupe::config::default_config_text().find("[schedules]") != std::string::npos);
}

CAF_TEST(the metrics section turns the endpoint of a node on and is checked) {
  auto off = load_from_string("");
  CAF_CHECK(!off.node.metrics.enabled);
  CAF_CHECK_EQUAL(off.node.metrics.bind, "127.0.0.1");
  CAF_CHECK_EQUAL(off.node.metrics.port, 9479);
  auto on = load_from_string("[metrics]\nenabled=true\nbind=\"0.0.0.0\"\nport=9100\n");
  CAF_CHECK(on.node.metrics.enabled);
  CAF_CHECK_EQUAL(on.node.metrics.bind, "0.0.0.0");
  CAF_CHECK_EQUAL(on.node.metrics.port, 9100);
  auto flagged = load_from_string("", {"--metrics.enabled=true", "--metrics.port=0"});
  CAF_CHECK(flagged.node.metrics.enabled);
  CAF_CHECK_EQUAL(flagged.node.metrics.port, 0);
  CHECK_ERROR_HAS(load_from_string("[metrics]\nport=70000\n"),
                  "metrics.port must be from 0 to 65535, got 70000");
  CHECK_ERROR_HAS(load_from_string("[metrics]\nbind=\"\"\n"),
                  "metrics.bind must be an IP address or a host name");
  CHECK_ERROR_HAS(load_from_string("[metrics]\nbind=\"http://x\"\n"),
                  "metrics.bind must be an IP address or a host name, got \"http://x\"");
  CHECK_ERROR_HAS(load_from_string("[metrics]\nenabled=1\n"),
                  "metrics.enabled: expected true or false");
  CAF_CHECK(troupe::config::default_config_text().find("[metrics]") != std::string::npos);
}
