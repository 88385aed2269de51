// The operations' verbs of the `troupe` command: pausing queues, cancelling messages, failed
// messages and their retry. Each prints one JSON object on one line.
#include "cli/commands.hpp"
#include "cli/output.hpp"

#include "troupe/json.hpp"

#include <unistd.h>

#include <iostream>

namespace troupe::cli {

namespace {

constexpr int ok = 0;
constexpr int refused = 1;

} // namespace

int run_operation(admin& a, const command_line& cl, std::ostream& out, std::ostream& err) {
  switch (cl.what) {
  case verb::pause:
    out << format_queue_control_json(a.pause(cl.target)) << '\n';
    return ok;
  case verb::resume:
    out << format_queue_control_json(a.resume(cl.target)) << '\n';
    return ok;
  case verb::queue_status: {
    if (cl.target.empty()) {
      out << format_queue_controls_json(a.queue_status()) << '\n';
      return ok;
    }
    auto all = a.queue_status(cl.target);
    out << format_queue_control_json(all.at(0)) << '\n';
    return ok;
  }
  case verb::cancel: {
    if (cl.target.empty()) {
      out << format_cancel_counts_json(a.cancel_matching(cl.filter)) << '\n';
      return ok;
    }
    auto r = a.cancel(cl.target);
    out << format_cancel_json(r) << '\n';
    if (r.outcome == cancel_outcome::missing) {
      err << "troupe: no message has id " << cl.target << '\n';
      return refused;
    }
    return ok;
  }
  case verb::cancel_status: {
    auto s = a.cancel_status(cl.target);
    out << format_cancel_state_json(s) << '\n';
    if (s.state.empty()) {
      err << "troupe: no message has id " << cl.target << '\n';
      return refused;
    }
    return ok;
  }
  case verb::failed_list: {
    failed_query q;
    q.queue = cl.filter.queue;
    q.task = cl.filter.task;
    q.limit = cl.limit;
    q.after = cl.after;
    out << format_failed_page_json(a.failed(q)) << '\n';
    return ok;
  }
  case verb::failed_show: {
    auto m = a.show_failed(cl.target);
    if (!cl.payload) {
      m.args_json.reset();
      m.options_json.reset();
    }
    out << format_failed_json(m) << '\n';
    return ok;
  }
  case verb::retry: {
    if (cl.target.empty()) {
      auto n = a.retry_matching(cl.filter); // before any output: it may throw
      out << R"({"retried":)" << n << "}\n";
      return ok;
    }
    auto r = a.retry(cl.target);
    out << format_retry_json(r) << '\n';
    if (r.outcome == retry_outcome::missing) {
      err << "troupe: no message has id " << cl.target << '\n';
      return refused;
    }
    if (r.outcome == retry_outcome::not_failed) {
      err << "troupe: message " << cl.target << " is " << r.state
          << ", not failed: only a failed message is retried\n";
      return refused;
    }
    return ok;
  }
  case verb::purge: {
    // On a terminal, a running count on stderr (overwritten in place); never on a pipe.
    bool tty = ::isatty(STDERR_FILENO) == 1;
    auto gone = a.purge(cl.older_than, cl.filter.states, [&](std::int64_t total) {
      if (tty)
        err << "\rpurged " << total << " rows" << std::flush;
    });
    if (tty && gone > 0)
      err << '\n';
    out << R"({"purged":)" << gone << R"(,"older_than":)" << json_quote(cl.older_than) << "}\n";
    return ok;
  }
  case verb::recover: {
    auto r = a.recover();
    out << R"({"dead_nodes":)" << r.dead_nodes << R"(,"recovered":)" << r.recovered << "}\n";
    return ok;
  }
  case verb::flush: {
    auto n = a.flush(*cl.filter.queue); // before any output: it may throw
    out << R"({"queue":)" << json_quote(*cl.filter.queue) << R"(,"deleted":)" << n << "}\n";
    return ok;
  }
  default:
    return refused;
  }
}

} // namespace troupe::cli
