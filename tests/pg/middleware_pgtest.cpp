#define CAF_SUITE middleware
#include <caf/test/unit_test.hpp>

#include "scratch_area.hpp"
#include "troupe/caf.hpp"
#include "troupe/client.hpp"

#include <fmt/format.h>

#include <mutex>

using namespace troupe;
using namespace std::chrono_literals;

namespace {

task_ref<void()> noop{"noop"};

// Notes every hook it sees; tags published messages with an option.
struct tracer final : middleware {
  std::mutex mutex;
  std::vector<std::string> seen;
  void note(std::string s) {
    std::lock_guard g{mutex};
    seen.push_back(std::move(s));
  }
  std::vector<std::string> get() {
    std::lock_guard g{mutex};
    return seen;
  }
  std::string name() const override { return "tracer"; }
  void before_enqueue(message& m) override {
    m.options_json = with_option(m.options_json, "traced", true);
    note("before_enqueue");
  }
  void after_enqueue(const message&) override { note("after_enqueue"); }
  void before_process(attempt& a) override {
    note("before_process " +
         std::string(option_bool(a.context.options_json, "traced").value_or(false) ? "traced"
                                                                                   : "untraced"));
  }
  void after_process(attempt&) override { note("after_process"); }
  void node_start(const node_info& n) override { note(fmt::format("node_start {}", n.name)); }
  void node_stop(const node_info& n) override { note(fmt::format("node_stop {}", n.name)); }
};

} // namespace

CAF_TEST(every hook runs around publishing and processing and the life of the node) {
  testkit::scratch_area area;
  auto trace = std::make_shared<tracer>();
  client_options co{area.dsn(), area.where()};
  co.middleware.push_back(trace);
  client producer{co};
  auto m = producer.enqueue(noop());
  CAF_CHECK(option_bool(m.options_json, "traced").value_or(false));
  CAF_CHECK_EQUAL(trace->get(), (std::vector<std::string>{"before_enqueue", "after_enqueue"}));

  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto tasks = std::make_shared<task_registry>();
  tasks->define(noop, [] {});
  tasks->use(trace);
  node_options o;
  o.dsn = area.dsn();
  o.area = area.where();
  o.name = "traced-node";
  o.queues.push_back(queue_options{});
  auto node = spawn_worker_node(sys, o, tasks);
  CAF_CHECK(testkit::wait_until(
    [&] {
      return area.scalar(fmt::format("SELECT count(*) FROM {} WHERE state = 'done'",
                                     area.queue_table())) == 1;
    },
    10s));
  caf::scoped_actor self{sys};
  self->request(node, 30s, stop_atom_v).receive([](const node_report&) {}, [](caf::error&) {});
  CAF_CHECK_EQUAL(
    trace->get(),
    (std::vector<std::string>{"before_enqueue", "after_enqueue", "node_start traced-node",
                              "before_process traced", "after_process", "node_stop traced-node"}));
}
