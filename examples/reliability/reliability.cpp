// troupe-reliability-example: retries, callbacks, a custom middleware and results, in one
// program. It runs a worker node inside its own CAF actor system, publishes a few messages and
// waits for their results, first from plain C++ (blocking), then from an actor (not blocking).
//
//   build/bin/troupe-reliability-example DSN
#include <troupe/caf.hpp>
#include <troupe/client.hpp>
#include <troupe/error.hpp>
#include <troupe/log.hpp>

#include <atomic>
#include <iostream>
#include <stdexcept>
#include <thread>

using namespace std::chrono_literals;

namespace shop {

// Declared once, shared by producers and workers.
inline const troupe::task_ref<int(int)> charge{"shop.charge", "payments"};
inline const troupe::task_ref<int(int)> reserve{"shop.reserve", "payments"};
inline const troupe::task_ref<void(troupe::message_summary, std::string)> receipt{"shop.receipt",
                                                                                  "payments"};
inline const troupe::task_ref<void(troupe::message_summary, troupe::retry_info)> refund{
  "shop.refund", "payments"};

/// Set once the receipt callback has run (the example waits for it before stopping).
inline std::atomic<bool> receipt_sent{false};

/// A payment provider that refuses every other call; an invalid amount is a caller's mistake.
struct declined : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct bad_amount : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

/// A middleware of our own: counts attempts per outcome and stamps every published message.
class audit final : public troupe::middleware {
public:
  std::atomic<int> succeeded{0}, failed{0};
  std::string name() const override { return "audit"; }
  void before_enqueue(troupe::message& m) override {
    m.options_json = troupe::with_option(m.options_json, "origin", std::string_view("example"));
  }
  void after_process(troupe::attempt& a) override {
    (a.status == troupe::attempt_status::done ? succeeded : failed)++;
  }
};

void define_tasks(troupe::task_registry& tasks, std::shared_ptr<audit> audit_log) {
  static std::atomic<int> calls{0};
  troupe::task_options payment;
  payment.store_results = true; // get_result can read the result
  payment.max_retries = 3;      // retried up to 3 times...
  payment.min_backoff = 100ms;  // ...after a draw of 100-200 ms, then 200-400 ms, 400-800 ms
  payment.max_backoff = 1s;
  payment.never_retry_on<bad_amount>(); // a caller's mistake is not retried
  payment.on_success = "shop.receipt";
  payment.on_retry_exhausted = "shop.refund";
  tasks.define(
    charge,
    [](troupe::task_context& ctx, int cents) {
      if (cents <= 0)
        throw bad_amount("amount must be positive");
      if (calls++ % 2 == 0)
        throw declined("the provider declined, try again");
      ctx.check(); // honours the time limit and shutdown notifications
      return cents;
    },
    payment);
  troupe::task_options quick;
  quick.store_results = true;
  quick.max_age = 60s; // a reservation older than a minute is skipped, not run
  tasks.define(
    reserve, [](int items) { return items; }, quick);
  tasks.define(receipt, [](const troupe::message_summary& m, const std::string& result) {
    // One write per line: the executors' threads print too.
    std::cout << ("receipt for " + m.task + " " + m.id + ": " + result + "\n") << std::flush;
    receipt_sent = true;
  });
  tasks.define(refund, [](const troupe::message_summary& m, const troupe::retry_info& r) {
    std::cout << ("refund after " + std::to_string(r.retries) + " retries: " + r.text + "\n")
              << std::flush;
  });
  tasks.use(std::move(audit_log));
}

} // namespace shop

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: troupe-reliability-example DSN\n";
    return 2;
  }
  try {
    troupe::area where{"troupe_reliability_example", ""};
    auto audit_log = std::make_shared<shop::audit>();
    auto tasks = std::make_shared<troupe::task_registry>();
    shop::define_tasks(*tasks, audit_log);

    troupe::client_options producer_options{argv[1], where};
    producer_options.middleware.push_back(audit_log);
    troupe::client producer{producer_options};

    caf::actor_system_config cfg;
    caf::actor_system sys{cfg};
    troupe::node_options node_options;
    node_options.dsn = argv[1];
    node_options.area = where;
    troupe::queue_options payments;
    payments.name = "payments";
    payments.poll_interval = 100ms;
    node_options.queues.push_back(payments);
    auto node = troupe::spawn_worker_node(sys, node_options, tasks);

    // Plain C++: publish, then block until the result is there (up to 10 s by default).
    auto paid = producer.enqueue(shop::charge(1250));
    auto cents = producer.get_result<int>(paid, true);
    std::cout << ("charged " + std::to_string(cents) + " cents\n") << std::flush;
    auto mistake = producer.enqueue(shop::charge(-5));
    try {
      producer.get_result<int>(mistake, true);
    } catch (const troupe::result_error& e) {
      std::cout << "refused without retries: " << e.failure_type() << ": " << e.failure_text()
                << std::endl;
    }

    // From an actor: the result waiter answers when the result arrives, without blocking.
    auto waiter = troupe::spawn_result_waiter(sys, argv[1], where);
    auto reserved = producer.enqueue(shop::reserve(3));
    caf::scoped_actor self{sys};
    self->request(waiter, 10s, caf::get_atom::value, reserved.id, std::int64_t{10000})
      .receive(
        [](const std::string& json) { std::cout << "reserved " << json << std::endl; },
        [](caf::error& e) { std::cout << "no reservation: " << troupe::describe(e) << "\n"; });

    // The receipt is a separate message published with the charge's outcome: give it time to
    // run before stopping the node.
    auto until = std::chrono::steady_clock::now() + 10s;
    while (!shop::receipt_sent && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(10ms);
    self->request(node, 30s, troupe::stop_atom_v)
      .receive([](const troupe::node_report&) {}, [](caf::error&) {});
    self->send_exit(waiter, caf::exit_reason::user_shutdown);
    std::cout << "attempts: " << audit_log->succeeded << " succeeded, " << audit_log->failed
              << " failed" << std::endl;
    return 0;
  } catch (const troupe::error& e) {
    std::cerr << "troupe-reliability-example: " << e.what() << std::endl;
    return 1;
  }
}
