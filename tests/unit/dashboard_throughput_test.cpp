// The throughput chart's arithmetic (dashboard/throughput.hpp): finished messages per interval
// from samples of the area's counts, a purge that lowers a count leaves a gap, the ring stays
// bounded.
#define CAF_SUITE dashboard_throughput
#include <caf/test/unit_test.hpp>

#include "dashboard/throughput.hpp"

using troupe::dashboard::throughput_history;

CAF_TEST(counts between samples become finished messages and rates) {
  throughput_history h(10);
  h.record(1'000, {{"a", 10}});
  h.record(3'000, {{"a", 30}, {"b", 4}});
  auto points = h.points();
  CAF_REQUIRE_EQUAL(points.size(), 1u);
  CAF_CHECK_EQUAL(points[0].at_ms, 3'000);
  CAF_CHECK_EQUAL(points[0].length_ms, 2'000);
  CAF_CHECK_EQUAL(*points[0].finished.at("a"), 20);
  // A queue new in the later sample counts from zero.
  CAF_CHECK_EQUAL(*points[0].finished.at("b"), 4);
  auto json = h.json(2'000);
  CAF_CHECK_EQUAL(json, R"({"interval_ms":2000,"points":[{"at":"1970-01-01T00:00:03.000Z",)"
                        R"("finished":{"a":20,"b":4},"per_second":{"a":10.000,"b":2.000}}]})");
}

CAF_TEST(a count that went down or a queue that went away has no rate) {
  throughput_history h(10);
  h.record(1'000, {{"a", 10}, {"b", 5}});
  h.record(2'000, {{"a", 3}});
  auto points = h.points();
  CAF_REQUIRE_EQUAL(points.size(), 1u);
  CAF_CHECK(!points[0].finished.at("a").has_value());
  CAF_CHECK(!points[0].finished.at("b").has_value());
  CAF_CHECK_NOT_EQUAL(h.json(1'000).find(R"("a":null)"), std::string::npos);
}

CAF_TEST(the ring keeps its capacity and ignores samples out of order) {
  throughput_history h(3);
  for (std::int64_t t = 1; t <= 10; ++t)
    h.record(t * 1'000, {{"a", t}});
  h.record(5'000, {{"a", 100}}); // older than the last: ignored
  auto points = h.points();
  CAF_REQUIRE_EQUAL(points.size(), 2u);
  CAF_CHECK_EQUAL(points.front().at_ms, 9'000);
  CAF_CHECK_EQUAL(points.back().at_ms, 10'000);
  CAF_CHECK_EQUAL(*points.back().finished.at("a"), 1);
}
