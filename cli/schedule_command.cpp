// `troupe schedule create|list|show|enable|disable|delete` and `troupe scheduler`: an area's
// schedules (docs/scheduler.md). Each verb prints JSON; `list` never shows arguments.
#include "cli/arguments.hpp"
#include "cli/commands.hpp"
#include "cli/output.hpp"

#include "troupe/json.hpp"
#include "troupe/scheduler.hpp"

#include <charconv>
#include <csignal>
#include <iostream>

namespace troupe::cli {

namespace {

std::string ms_or_null(const std::optional<std::int64_t>& ms) {
  return ms ? json_quote(iso_time(*ms)) : std::string("null");
}

std::string text_or_null(const std::string& s) {
  return s.empty() ? std::string("null") : json_quote(s);
}

} // namespace

std::string format_schedule_json(const schedule_record& s, const std::vector<std::int64_t>& runs) {
  std::string text = R"({"id":)" + json_quote(s.id) + R"(,"name":)" + json_quote(s.name) +
                     R"(,"task":)" + json_quote(s.task) + R"(,"queue":)" + json_quote(s.queue);
  if (s.args_json)
    text += R"(,"args":)" + *s.args_json;
  if (s.options_json)
    text += R"(,"options":)" + *s.options_json;
  text += R"(,"priority":)" + std::to_string(s.priority) + R"(,"interval_ms":)" +
          (s.interval_ms ? std::to_string(*s.interval_ms) : "null") + R"(,"cron":)" +
          text_or_null(s.cron) + R"(,"time_zone":)" + json_quote(s.time_zone) + R"(,"enabled":)" +
          (s.enabled ? "true" : "false") + R"(,"start_at":)" + json_quote(iso_time(s.start_at_ms)) +
          R"(,"next_run":)" + json_quote(iso_time(s.next_run_ms)) + R"(,"overlap":)" +
          json_quote(to_string(s.overlap)) + R"(,"catch_up":)" + json_quote(to_string(s.catch_up)) +
          R"(,"jitter_ms":)" + std::to_string(s.jitter_ms) + R"(,"last_occurrence":)" +
          ms_or_null(s.last_occurrence_ms) + R"(,"last_outcome":)" + text_or_null(s.last_outcome) +
          R"(,"last_error":)" + text_or_null(s.last_error) + R"(,"last_message_id":)" +
          text_or_null(s.last_message_id) + R"(,"last_message_state":)" +
          text_or_null(s.last_message_state) + R"(,"published":)" + std::to_string(s.published) +
          R"(,"created_at":)" + json_quote(iso_time(s.created_at_ms)) + R"(,"registered_by":[)";
  for (std::size_t i = 0; i < s.registered_by.size(); ++i)
    text += (i > 0 ? "," : "") + json_quote(s.registered_by[i]);
  text += "]";
  if (s.args_json) { // show: what a reader must know
    text += R"(,"next_runs":[)";
    for (std::size_t i = 0; i < runs.size(); ++i)
      text += (i > 0 ? "," : "") + json_quote(iso_time(runs[i]));
    text += "]";
    text += R"(,"warnings":[)";
    if (s.registered_by.empty())
      text += json_quote("no registered node runs task \"" + s.task +
                         "\": its messages stay queued until one does");
    text += "]";
  }
  return text + "}";
}

namespace {

std::string occurrence_json(const schedule_occurrence& o) {
  return R"({"schedule":)" + json_quote(o.schedule) + R"(,"occurrence":)" +
         json_quote(iso_time(o.occurrence_ms)) + R"(,"outcome":)" + json_quote(o.outcome) +
         R"(,"message_id":)" + text_or_null(o.message_id) +
         (o.error.empty() ? std::string() : R"(,"error":)" + json_quote(o.error)) +
         R"(,"next_run":)" + json_quote(iso_time(o.next_run_ms)) + "}";
}

std::atomic<bool> stop_requested{false};

extern "C" void on_stop_signal(int) {
  stop_requested.store(true);
}

} // namespace

int run_schedule(admin& a, const command_line& cl, std::ostream& out, std::ostream& err) {
  switch (cl.what) {
  case verb::schedule_create: {
    auto made = a.create_schedule(cl.schedule);
    out << format_schedule_json(made, a.upcoming_runs(made.name, 5)) << '\n';
    return 0;
  }
  case verb::schedule_list: {
    std::string text = R"({"items":[)";
    auto all = a.schedules();
    for (std::size_t i = 0; i < all.size(); ++i)
      text += (i > 0 ? "," : "") + format_schedule_json(all[i]);
    out << text << "]}\n";
    return 0;
  }
  case verb::schedule_show: {
    auto s = a.schedule(cl.target);
    if (!s) {
      err << "troupe: no schedule \"" << terminal_safe(cl.target) << "\"\n";
      return 1;
    }
    auto runs = a.upcoming_runs(cl.target, cl.runs);
    out << format_schedule_json(*s, runs) << '\n';
    return 0;
  }
  case verb::schedule_enable:
  case verb::schedule_disable: {
    bool on = cl.what == verb::schedule_enable;
    bool found = on ? a.enable_schedule(cl.target) : a.disable_schedule(cl.target);
    out << R"({"schedule":)" << json_quote(cl.target) << R"(,"found":)"
        << (found ? "true" : "false") << R"(,"enabled":)" << (on ? "true" : "false") << "}\n";
    if (!found)
      err << "troupe: no schedule \"" << terminal_safe(cl.target) << "\"\n";
    return found ? 0 : 1;
  }
  default: {
    bool found = a.delete_schedule(cl.target);
    out << R"({"schedule":)" << json_quote(cl.target) << R"(,"deleted":)"
        << (found ? "true" : "false") << "}\n";
    if (!found)
      err << "troupe: no schedule \"" << terminal_safe(cl.target) << "\"\n";
    return found ? 0 : 1;
  }
  }
}

int run_scheduler(const command_line& cl, std::ostream& out) {
  scheduler_options o;
  o.dsn = cl.dsn;
  o.area = cl.where;
  o.poll = cl.poll;
  o.batch = cl.batch;
  scheduler s(std::move(o));
  if (cl.once) {
    auto done = s.tick();
    std::int64_t published = 0;
    std::string items;
    for (const auto& x : done) {
      published += x.outcome == "published" ? 1 : 0;
      items += (items.empty() ? "" : ",") + occurrence_json(x);
    }
    out << R"({"published":)" << published << R"(,"occurrences":[)" << items << "]}\n";
    return 0;
  }
  // SIGTERM and SIGINT end the loop after the tick in progress.
  std::signal(SIGTERM, on_stop_signal);
  std::signal(SIGINT, on_stop_signal);
  auto published = s.run(stop_requested, [&](const std::vector<schedule_occurrence>& done) {
    for (const auto& x : done)
      out << occurrence_json(x) << '\n';
    out.flush();
  });
  out << R"({"published":)" << published << R"(,"stopped":true})" << '\n';
  return 0;
}

} // namespace troupe::cli
