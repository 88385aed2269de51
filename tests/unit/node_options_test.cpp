#define CAF_SUITE node_options
#include <caf/test/unit_test.hpp>

#include "troupe/error.hpp"
#include "troupe/node_options.hpp"

using namespace troupe;

namespace {

std::string refusal(const node_options& o) {
  try {
    validate(o);
  } catch (const error& e) {
    CAF_CHECK(e.code() == errc::invalid_argument);
    return e.what();
  }
  return {};
}

node_options one_queue() {
  node_options o;
  o.queues.push_back(queue_options{});
  return o;
}

} // namespace

CAF_TEST(defaults are valid) {
  CAF_CHECK(refusal(one_queue()).empty());
}

CAF_TEST(each invalid setting is named in the error) {
  auto o = one_queue();
  o.queues[0].concurrency = 0;
  CAF_CHECK(refusal(o).find("queues.default.concurrency") != std::string::npos);
  o = one_queue();
  o.queues[0].prefetch = -1;
  CAF_CHECK(refusal(o).find("queues.default.prefetch") != std::string::npos);
  o = one_queue();
  o.queues[0].poll_interval = std::chrono::milliseconds(1);
  CAF_CHECK(refusal(o).find("queues.default.poll-interval") != std::string::npos);
  o = one_queue();
  o.storage_connections = 0;
  CAF_CHECK(refusal(o).find("node.storage-connections") != std::string::npos);
  o = one_queue();
  o.queues.push_back(queue_options{});
  CAF_CHECK(refusal(o).find("configured twice") != std::string::npos);
  o = one_queue();
  o.queues[0].name = "Nope!";
  CAF_CHECK(refusal(o).find("\"Nope!\"") != std::string::npos);
  CAF_CHECK(refusal(node_options{}).find("at least one queue") != std::string::npos);
}
