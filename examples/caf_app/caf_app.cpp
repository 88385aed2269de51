// Troupe inside a CAF application: the stock of a shop is a typed actor, and that actor is the
// implementation of the task that reserves stock. One actor system holds everything: the
// worker node, the stock actor, a storage pool that publishes with an enqueue hook, a result
// waiter, and the application actor that drives them. No actor ever blocks: each step is a
// request whose answer starts the next one. At the end the node stops gracefully, the other
// actors are told to exit, and the actor system shuts down.
//
//   troupe --dsn "$DSN" --schema shop init
//   build/bin/caf-app "$DSN" shop [RESERVATIONS]
#include <troupe/caf.hpp>
#include <troupe/error.hpp>
#include <troupe/log.hpp>

#include <atomic>
#include <chrono>
#include <iostream>
#include <map>
#include <string>
#include <vector>

namespace shop {

// The task, as producers and workers both declare it: reserve `quantity` of `sku`, and get the
// quantity left.
inline const troupe::task_ref<int(std::string, int)> reserve{"shop.reserve", "stock"};

using stock_actor = troupe::task_actor<int(std::string, int)>;

using check_atom = caf::atom_constant<caf::atom("check")>;
using answer_atom = caf::atom_constant<caf::atom("answer")>;

// The warehouse, a plain actor standing for a remote service: it answers each check 20 ms
// later, through a response promise.
struct warehouse_state {
  static inline const char* name = "shop.warehouse";
  std::int64_t next = 0;
  std::map<std::int64_t, caf::response_promise> open;
};

// (A function with an argument: CAF 0.17 trips UBSan when it spawns one without.)
caf::behavior warehouse_impl(caf::stateful_actor<warehouse_state>* self,
                             std::chrono::milliseconds answer_after) {
  return {
    [=](check_atom, const std::string&, int) -> caf::response_promise {
      auto id = ++self->state.next;
      auto promise = self->make_response_promise();
      self->state.open.emplace(id, promise);
      self->delayed_send(self, answer_after, answer_atom::value, id);
      return promise;
    },
    [=](answer_atom, std::int64_t id) {
      auto i = self->state.open.find(id);
      if (i == self->state.open.end())
        return;
      i->second.deliver(true);
      self->state.open.erase(i);
    },
  };
}

// The stock: each reservation is checked with the warehouse first, so the stock actor answers
// later, through a response promise. Meanwhile it takes the next calls: the attempts of the
// node's executors run side by side, and the levels need no lock.
struct stock_state {
  static inline const char* name = "shop.stock";
  std::map<std::string, int> levels{{"tea", 40}, {"coffee", 25}, {"jam", 15}};
  // By message id and attempt: a retry may come while an earlier attempt still waits.
  std::map<std::pair<std::string, std::int32_t>, caf::typed_response_promise<int>> checking;
};

stock_actor::behavior_type stock_impl(stock_actor::stateful_pointer<stock_state> self,
                                      caf::actor warehouse) {
  return {
    [=](const troupe::task_call& call, const std::string& sku, int quantity) -> caf::result<int> {
      auto promise = self->make_response_promise<int>();
      auto id = std::make_pair(call.message_id, call.attempt);
      self->state.checking.emplace(id, promise);
      self->request(warehouse, std::chrono::seconds(5), check_atom::value, sku, quantity)
        .then(
          [=](bool available) {
            auto i = self->state.checking.find(id);
            if (i == self->state.checking.end())
              return; // stopped meanwhile
            auto& level = self->state.levels[sku];
            if (available && level >= quantity) {
              level -= quantity;
              i->second.deliver(level);
            } else {
              i->second.deliver(troupe::make_caf_error(troupe::errc::invalid_argument,
                                                       "not enough " + sku + " in stock"));
            }
            self->state.checking.erase(i);
          },
          [=](caf::error& err) {
            auto i = self->state.checking.find(id);
            if (i == self->state.checking.end())
              return;
            i->second.deliver(std::move(err));
            self->state.checking.erase(i);
          });
      return promise;
    },
    // The node asks an attempt to stop (its time limit, a cancel, the node's shutdown): answer
    // it at once.
    [=](troupe::stop_atom, const troupe::task_stop& stop) {
      // A stop may come for an attempt already answered: nothing to do then.
      auto i = self->state.checking.find(std::make_pair(stop.message_id, stop.attempt));
      if (i == self->state.checking.end())
        return;
      i->second.deliver(
        troupe::make_caf_error(troupe::errc::cancelled, "reservation stopped: " + stop.reason));
      self->state.checking.erase(i);
    },
  };
}

} // namespace shop

namespace {

// Counts what the storage pool published: an enqueue hook, run on the pool's thread.
struct audit_hook : troupe::middleware {
  std::atomic<int> published{0};
  std::string name() const override { return "shop.audit"; }
  void before_enqueue(troupe::message& m) override {
    // Reservations of the scarcest item go first.
    if (m.args_json.find("\"jam\"") != std::string::npos)
      m = m.with_priority(10);
  }
  void after_enqueue(const troupe::message&) override { ++published; }
};

struct app_parts {
  troupe::node_actor node;
  troupe::storage_pool_actor pool;
  troupe::result_waiter_actor waiter;
  std::vector<caf::actor> helpers; // told to exit at the end
  std::shared_ptr<audit_hook> audit;
  int reservations = 0;
  std::shared_ptr<int> exit_code;
};

struct app_state {
  static inline const char* name = "shop.app";
  int answered = 0;
  int reserved = 0;
  int refused = 0;
};

void finish(caf::stateful_actor<app_state>* self, const app_parts& parts, int code) {
  *parts.exit_code = code;
  self->request(parts.node, std::chrono::minutes(2), troupe::stop_atom_v)
    .then(
      [=](const troupe::node_report& r) {
        std::cout << "node stopped: executed=" << r.executed << " released=" << r.released
                  << " abandoned=" << r.abandoned << "\n";
        for (const auto& h : parts.helpers)
          self->send_exit(h, caf::exit_reason::user_shutdown);
        self->quit();
      },
      [=](caf::error& err) {
        std::cerr << "caf-app: the node did not stop: " << troupe::describe(err) << "\n";
        *parts.exit_code = 1;
        // Without its graceful stop the node is ended at once: the actor system must end.
        self->send_exit(parts.node, caf::exit_reason::kill);
        for (const auto& h : parts.helpers)
          self->send_exit(h, caf::exit_reason::user_shutdown);
        self->quit();
      });
}

void wait_for_results(caf::stateful_actor<app_state>* self, const app_parts& parts,
                      const std::vector<troupe::message>& published) {
  for (const auto& m : published) {
    self
      ->request(parts.waiter, std::chrono::seconds(70), caf::get_atom::value, m.id,
                std::int64_t{60000})
      .then(
        [=](const std::string& left_json) {
          ++self->state.reserved;
          std::cout << "reserved " << m.args_json << ", left " << left_json << "\n";
          if (++self->state.answered == parts.reservations)
            finish(self, parts, 0);
        },
        [=](caf::error& err) {
          ++self->state.refused;
          std::cout << "refused " << m.args_json << ": " << troupe::describe(err) << "\n";
          if (++self->state.answered == parts.reservations)
            finish(self, parts, 0);
        });
  }
}

caf::behavior app_impl(caf::stateful_actor<app_state>* self, app_parts parts) {
  // 1. The node is claiming.
  self->request(parts.node, std::chrono::seconds(30), troupe::ready_atom_v)
    .then(
      [=](const troupe::node_report& ready) {
        std::cout << "node ready: node_id=" << ready.node_id << "\n";
        // 2. Publish the reservations, all or nothing, through the storage pool.
        std::vector<troupe::message> batch;
        const char* skus[] = {"tea", "coffee", "jam"};
        for (int i = 0; i < parts.reservations; ++i)
          batch.push_back(shop::reserve(skus[i % 3], 1 + i % 4).with_store_results());
        self
          ->request(parts.pool, std::chrono::seconds(30), troupe::enqueue_atom_v, std::move(batch),
                    std::vector<troupe::enqueue_options>{})
          .then(
            [=](const std::vector<troupe::message>& published) {
              std::cout << "published " << published.size()
                        << " reservations (the enqueue hook saw " << parts.audit->published
                        << ")\n";
              // 3. Wait for each result without blocking.
              wait_for_results(self, parts, published);
            },
            [=](caf::error& err) {
              std::cerr << "caf-app: publish failed: " << troupe::describe(err) << "\n";
              finish(self, parts, 1);
            });
      },
      [=](caf::error& err) {
        std::cerr << "caf-app: the node is not ready: " << troupe::describe(err) << "\n";
        finish(self, parts, 1);
      });
  return {};
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: caf-app DSN SCHEMA [RESERVATIONS]\n";
    return 2;
  }
  std::string dsn = argv[1];
  troupe::area where{argv[2], ""};
  int reservations = argc > 3 ? std::atoi(argv[3]) : 12;
  if (reservations < 1 || reservations > 1000) {
    std::cerr << "caf-app: RESERVATIONS must be 1 to 1000\n";
    return 2;
  }
  auto exit_code = std::make_shared<int>(1);
  try {
    caf::actor_system_config cfg;
    caf::actor_system sys{cfg};
    auto warehouse = sys.spawn(shop::warehouse_impl, std::chrono::milliseconds(20));
    auto stock = sys.spawn(shop::stock_impl, warehouse);
    {
      auto tasks = std::make_shared<troupe::task_registry>();
      troupe::task_options stock_options;
      stock_options.time_limit = std::chrono::seconds(10);
      stock_options.max_retries = 0; // a refusal is final
      troupe::define_task_actor(*tasks, shop::reserve, stock, stock_options);

      troupe::node_options options;
      options.dsn = dsn;
      options.area = where;
      options.name = "caf-app";
      troupe::queue_options q;
      q.name = "stock";
      q.concurrency = 4;
      options.queues.push_back(q);

      app_parts parts;
      parts.helpers = {caf::actor_cast<caf::actor>(stock), warehouse};
      try {
        parts.audit = std::make_shared<audit_hook>();
        parts.pool = troupe::spawn_storage_pool(sys, dsn, where, 1, {parts.audit});
        parts.helpers.push_back(caf::actor_cast<caf::actor>(parts.pool));
        parts.waiter = troupe::spawn_result_waiter(sys, dsn, where);
        parts.helpers.push_back(caf::actor_cast<caf::actor>(parts.waiter));
        parts.node = troupe::spawn_worker_node(sys, options, tasks);
      } catch (...) {
        // A bad DSN or option: what runs already is told to exit, or the system never ends.
        for (const auto& h : parts.helpers)
          caf::anon_send_exit(h, caf::exit_reason::user_shutdown);
        throw;
      }
      parts.reservations = reservations;
      parts.exit_code = exit_code;
      sys.spawn(app_impl, std::move(parts));
    }
    stock = nullptr;
    warehouse = nullptr;
    // ~actor_system waits until every actor has ended: the app actor quits after the node's
    // stop, and has told the pool, the waiter and the stock actor to exit.
  } catch (const troupe::error& e) {
    std::cerr << "caf-app: " << e.what() << "\n";
    return 1;
  }
  return *exit_code;
}
