// The fixture the publishing suites share: a scratch area, a client with a middleware that
// counts its enqueue hooks, and reads of the queue and deduplication tables.
#pragma once

#include "scratch_area.hpp"
#include "storage/queries.hpp"
#include "troupe/client.hpp"
#include "troupe/error.hpp"
#include "troupe/task.hpp"

#include <caf/test/unit_test.hpp>
#include <fmt/format.h>

#include <atomic>
#include <string>
#include <utility>

namespace troupe::testkit {

using namespace std::chrono_literals;

inline const task_ref<void(int)> job{"job"};

// Counts the enqueue hooks that ran.
struct hook_counter : middleware {
  std::atomic<int> before{0};
  std::atomic<int> after{0};
  std::string name() const override { return "hook_counter"; }
  void before_enqueue(message&) override { ++before; }
  void after_enqueue(const message&) override { ++after; }
};

struct publishing_fixture {
  testkit::scratch_area area;
  std::shared_ptr<hook_counter> hooks = std::make_shared<hook_counter>();
  client producer{client_options{area.dsn(), area.where(), "troupe-test", {hooks}}};

  std::int64_t rows(const std::string& where = "true") {
    return area.scalar(fmt::format("SELECT count(*) FROM {} WHERE {}", area.queue_table(), where));
  }
  std::int64_t keys(const std::string& where = "true") {
    return area.scalar(fmt::format("SELECT count(*) FROM {}.deduplication WHERE {}",
                                   storage::quote_identifier(area.where().schema), where));
  }
  static enqueue_options key(const std::string& k, std::chrono::milliseconds ttl = 60s) {
    return enqueue_options::deduplicated(k, ttl);
  }
  // The code and text of the troupe::error `f` throws.
  template <class F>
  std::pair<errc, std::string> failure_of(F&& f) {
    try {
      f();
    } catch (const error& e) {
      return {e.code(), e.what()};
    }
    CAF_FAIL("expected a troupe::error");
    return {errc::bug, ""};
  }
};

inline bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

} // namespace troupe::testkit
