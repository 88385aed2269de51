// One connection for the threads of a client or an admin object: opened on first use,
// reopened after a loss, used by one caller at a time (a mutex). For code that runs without an
// actor system; inside a node, the storage actors own the connections.
#pragma once

#include "storage/connection.hpp"
#include "troupe/error.hpp"

#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

namespace troupe::storage {

class shared_connection {
public:
  /// `on_open` runs on every connection just opened (to set it up).
  shared_connection(std::string dsn, std::string application_name,
                    std::function<void(connection&)> on_open = {})
      : dsn_(std::move(dsn)), application_name_(std::move(application_name)),
        on_open_(std::move(on_open)) {}

  /// Runs `f(connection, first_try)` under the lock. A connection lost before or during `f` is
  /// reopened once and `f` run again; `first_try` is false only when `f` had run before: `f`
  /// must be one statement or one transaction that either took effect or did not, and say on
  /// its second run how not to apply twice what may have taken effect (a publish that did
  /// commit). A connection whose setup (`on_open`) failed is not kept.
  template <class F>
  auto with(F&& f) -> decltype(f(std::declval<connection&>(), true)) {
    std::lock_guard guard{mutex_};
    bool ran = false;
    for (bool retried = false;; retried = true) {
      try {
        if (!conn_ || !conn_->ok()) {
          conn_.reset();
          auto fresh = connection::open(dsn_, application_name_);
          if (on_open_)
            on_open_(fresh);
          conn_.emplace(std::move(fresh));
        }
        bool first = !ran;
        ran = true;
        return f(*conn_, first);
      } catch (const error& e) {
        if (e.code() == errc::connection_lost)
          conn_.reset();
        if (e.code() != errc::connection_lost || retried)
          throw;
      }
    }
  }

private:
  std::string dsn_;
  std::string application_name_;
  std::function<void(connection&)> on_open_;
  std::mutex mutex_;
  std::optional<connection> conn_;
};

} // namespace troupe::storage
