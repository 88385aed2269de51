#define CAF_SUITE node_options
#include <caf/test/unit_test.hpp>

#include "troupe/error.hpp"
#include "troupe/node_options.hpp"
#include "troupe/task.hpp"
#include "troupe/worker_node.hpp"

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

namespace {

std::string unserved(const node_options& o, const task_registry& tasks) {
  try {
    check_queues_served(o, tasks);
  } catch (const error& e) {
    CAF_CHECK(e.code() == errc::invalid_argument);
    return e.what();
  }
  return {};
}

} // namespace

CAF_TEST(a queue that no registered task runs on is refused naming the queue) {
  auto o = one_queue(); // "default"
  queue_options bulk;
  bulk.name = "bulk";
  o.queues.push_back(bulk);
  task_registry tasks;
  tasks.define(task_ref<void()>{"ping", "default"}, [] {});
  CAF_CHECK_EQUAL(unserved(o, tasks),
                  "queues.bulk: no registered task runs on queue \"bulk\" (the tasks registered "
                  "run on: default); register one, or name the queue in a task's "
                  "task_options::also_queues");
  // A task sent to "bulk" with message::on_queue names it in also_queues.
  task_options routed;
  routed.also_queues = {"bulk"};
  tasks.define(
    task_ref<void()>{"pong", "default"}, [] {}, routed);
  CAF_CHECK_EQUAL(unserved(o, tasks), "");
  CAF_CHECK_EQUAL(tasks.names_on("bulk"), (std::vector<std::string>{"pong"}));
  CAF_CHECK_EQUAL(tasks.names_on("default"), (std::vector<std::string>{"ping", "pong"}));
  CAF_CHECK_EQUAL(tasks.queues(), (std::vector<std::string>{"bulk", "default"}));
  // No task at all.
  CAF_CHECK(unserved(one_queue(), task_registry{}).find("none, no task is registered") !=
            std::string::npos);
  // An invalid name in also_queues is refused when the task is registered.
  task_options bad;
  bad.also_queues = {"Bulk"};
  try {
    tasks.define(
      task_ref<void()>{"bad", "default"}, [] {}, bad);
    CAF_FAIL("an invalid queue name in also_queues was accepted");
  } catch (const error& e) {
    CAF_CHECK(std::string(e.what()).find("Bulk") != std::string::npos);
  }
}
