// The async publisher: troupe::async_publish driven by one detached actor for every caller of
// an actor system. While publishes are in flight it waits on all their sockets at once, in
// slices short enough that new requests and cancellations are read within milliseconds; with
// nothing in flight it waits on its mailbox only.
#include "actors/protocol.hpp"
#include "troupe/async_transactional.hpp"
#include "troupe/log.hpp"

#include <poll.h>

#include <map>
#include <variant>

namespace troupe::actors {

namespace {

constexpr int poll_slice_ms = 2;

using many_promise = caf::typed_response_promise<std::vector<message>>;
using single_promise = caf::typed_response_promise<message>;

struct in_flight {
  async_publish publish;
  std::variant<many_promise, single_promise> promise;
};

struct publisher_state {
  static inline const char* name = "troupe.async_publisher";
  area where;
  std::vector<middleware_ptr> middleware;
  std::map<pg_conn*, in_flight> running;
  bool polling = false;
};

using publisher_pointer = async_publisher_impl_actor::stateful_pointer<publisher_state>;

caf::error to_caf(std::exception_ptr ep) {
  try {
    std::rethrow_exception(ep);
  } catch (const error& e) {
    return make_caf_error(e.code(), e.what());
  } catch (const std::exception& e) {
    return make_caf_error(errc::bug, e.what());
  } catch (...) {
    return make_caf_error(errc::bug, "unknown exception in an asynchronous publish");
  }
}

void deliver(in_flight& f) {
  try {
    auto out = f.publish.result();
    if (auto* rp = std::get_if<single_promise>(&f.promise))
      rp->deliver(std::move(out.front()));
    else
      std::get<many_promise>(f.promise).deliver(std::move(out));
  } catch (...) {
    auto err = to_caf(std::current_exception());
    std::visit([&](auto& rp) { rp.deliver(err); }, f.promise);
  }
}

// Replies to the publishes that finished, and keeps the loop going while any remain.
void settle(publisher_pointer self) {
  auto& running = self->state.running;
  for (auto i = running.begin(); i != running.end();) {
    if (i->second.publish.finished()) {
      deliver(i->second);
      i = running.erase(i);
    } else {
      ++i;
    }
  }
  if (!running.empty() && !self->state.polling) {
    self->state.polling = true;
    self->send(self, poll_atom_v);
  }
}

// Starts a publish on `conn` made by `make`, or refuses it through `rp`.
template <class Promise, class Make>
void start(publisher_pointer self, caller_connection conn, Promise rp, Make make) {
  auto& running = self->state.running;
  if (conn.native == nullptr) {
    rp.deliver(make_caf_error(errc::invalid_argument, "asynchronous publish: no connection"));
    return;
  }
  if (running.count(conn.native) != 0) {
    rp.deliver(make_caf_error(errc::invalid_argument,
                              "asynchronous publish: that connection already has a publish in "
                              "flight; wait for its reply"));
    return;
  }
  try {
    running.emplace(conn.native, in_flight{make(), rp});
  } catch (...) {
    rp.deliver(to_caf(std::current_exception()));
    return;
  }
  settle(self);
}

async_publisher_impl_actor::behavior_type
async_publisher_impl(publisher_pointer self, area where, std::vector<middleware_ptr> middleware) {
  self->state.where = std::move(where);
  self->state.middleware = std::move(middleware);
  self->set_default_handler(
    [](caf::scheduled_actor*, caf::message_view& x) -> caf::result<caf::message> {
      log().warn("async publisher: unexpected message {}", caf::to_string(x.content()));
      return caf::sec::unexpected_message;
    });
  // Stopping the publisher cancels what is in flight; each caller gets its reply.
  self->set_exit_handler([=](caf::exit_msg& em) {
    for (auto& [conn, f] : self->state.running) {
      f.publish.cancel();
      while (!f.publish.poll()) {
        pollfd pfd{f.publish.socket(), POLLIN, 0};
        ::poll(&pfd, 1, 100);
      }
      deliver(f);
    }
    self->state.running.clear();
    self->quit(em.reason);
  });
  return {
    [=](enqueue_atom, caller_connection conn, std::vector<message>& batch,
        std::vector<enqueue_options>& options) -> caf::result<std::vector<message>> {
      auto rp = self->make_response_promise<std::vector<message>>();
      start(self, conn, rp, [&] {
        return async_publish::many(conn.native, self->state.where, std::move(batch),
                                   std::move(options), self->state.middleware);
      });
      return rp;
    },
    [=](enqueue_atom, caller_connection conn, message& m,
        enqueue_options& options) -> caf::result<message> {
      auto rp = self->make_response_promise<message>();
      start(self, conn, rp, [&] {
        return async_publish::single(conn.native, self->state.where, std::move(m), options,
                                     self->state.middleware);
      });
      return rp;
    },
    [=](cancel_atom, caller_connection conn) {
      auto i = self->state.running.find(conn.native);
      if (i != self->state.running.end())
        i->second.publish.cancel();
    },
    [=](poll_atom) {
      auto& st = self->state;
      st.polling = false;
      std::vector<pollfd> fds;
      fds.reserve(st.running.size());
      for (auto& [conn, f] : st.running)
        fds.push_back(pollfd{f.publish.socket(),
                             static_cast<short>(POLLIN | (f.publish.wants_write() ? POLLOUT : 0)),
                             0});
      // A detached actor: waiting here blocks no scheduler thread, only this actor's mailbox,
      // and only for a slice.
      ::poll(fds.data(), fds.size(), poll_slice_ms);
      std::size_t k = 0;
      for (auto& [conn, f] : st.running) {
        if (fds[k++].revents != 0)
          f.publish.poll();
      }
      settle(self);
    },
  };
}

} // namespace

} // namespace troupe::actors

namespace troupe {

async_publisher_actor spawn_async_publisher(caf::actor_system& sys, const area& where,
                                            std::vector<middleware_ptr> middleware) {
  validate_area(where);
  return sys.spawn<caf::detached>(actors::async_publisher_impl, where, std::move(middleware));
}

} // namespace troupe
