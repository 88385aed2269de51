// The state record and its queries (admin::get_state, get_states, get_states_count): each
// status from the path that makes it, and filters, sorts and both kinds of paging against a
// reference the test computes itself from the rows.
#define CAF_SUITE states
#include <caf/test/unit_test.hpp>

#include "scratch_area.hpp"
#include "storage/operations.hpp"
#include "storage/queries.hpp"
#include "storage/states.hpp"
#include "troupe/admin.hpp"
#include "troupe/client.hpp"
#include "troupe/error.hpp"
#include "troupe/task.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>

using namespace troupe;

namespace {

task_ref<void(int)> job{"job"};

// One row as the reference sees it, read straight from the table.
struct row {
  std::string id, status, task, queue;
  int priority = 0, attempts = 0;
  std::optional<double> progress;
  std::int64_t enqueued_us = 0;
  std::optional<std::int64_t> started_us, finished_us;
};

struct fixture {
  testkit::scratch_area area;
  admin ops{admin_options{area.dsn(), area.where()}};

  // 240 rows over every state, three tasks and two queues, with priorities, attempts, progress
  // (or none), starts (or none) and publication times shared by groups of four (ties).
  void fill() {
    area.sql().exec(fmt::format(
      "INSERT INTO {} (message_id, queue_name, task_name, state, priority, attempts, progress, "
      "enqueued_at, started_at, finished_at, error) "
      "SELECT gen_random_uuid(), (ARRAY['mail', 'report'])[1 + i % 2], "
      "       (ARRAY['alpha', 'beta', 'gamma'])[1 + i % 3], "
      "       (ARRAY['queued', 'running', 'done', 'failed', 'cancelled'])[1 + i % 5]::{}, "
      "       i % 4, i % 3, CASE WHEN i % 6 = 0 THEN NULL ELSE to_jsonb((i % 11) / 10.0) END, "
      "       timestamptz '2026-11-30 12:00:00+00' + (i / 4) * interval '1 minute', "
      "       CASE WHEN i % 5 IN (1, 2, 3) AND i % 7 <> 0 "
      "            THEN timestamptz '2026-11-30 12:00:00+00' + i * interval '17 seconds' END, "
      "       CASE WHEN i % 5 >= 2 "
      "            THEN timestamptz '2026-11-30 13:00:00+00' + (i % 50) * interval '1 minute' END, "
      "       CASE WHEN i % 5 = 3 THEN jsonb_build_object('type', 'x', 'skipped', i % 2 = 0) END "
      "  FROM generate_series(1, 240) i",
      area.queue_table(), area.where().schema + "." + area.where().prefix + "state"));
  }

  std::vector<row> rows() {
    auto res = area.sql().exec(
      fmt::format("SELECT message_id::text, state::text, started_at IS NOT NULL, "
                  "coalesce(error->>'skipped', ''), task_name, queue_name, priority, attempts, "
                  "progress::text, (extract(epoch FROM enqueued_at) * 1000000)::bigint, "
                  "(extract(epoch FROM started_at) * 1000000)::bigint, "
                  "(extract(epoch FROM finished_at) * 1000000)::bigint FROM {}",
                  area.queue_table()));
    std::vector<row> out;
    for (int r = 0; r < res.rows(); ++r) {
      row x;
      x.id = std::string(res.text(r, 0));
      std::string state(res.text(r, 1));
      bool started = res.text(r, 2) == "t";
      if (state == "queued")
        x.status = "pending";
      else if (state == "running")
        x.status = started ? "started" : "pending";
      else if (state == "done")
        x.status = "success";
      else if (state == "failed")
        x.status = res.text(r, 3) == "true" ? "skipped" : "failure";
      else
        x.status = "cancelled";
      x.task = std::string(res.text(r, 4));
      x.queue = std::string(res.text(r, 5));
      x.priority = static_cast<int>(res.int64(r, 6));
      x.attempts = static_cast<int>(res.int64(r, 7));
      if (!res.is_null(r, 8))
        x.progress = std::stod(std::string(res.text(r, 8)));
      x.enqueued_us = res.int64(r, 9);
      if (!res.is_null(r, 10))
        x.started_us = res.int64(r, 10);
      if (!res.is_null(r, 11))
        x.finished_us = res.int64(r, 11);
      out.push_back(std::move(x));
    }
    return out;
  }

  // Every page of `q` by cursor, or by offset, as one list of ids.
  std::vector<std::string> all_pages(state_query q, bool by_offset) {
    std::vector<std::string> ids;
    for (int pages = 0; pages < 1000; ++pages) {
      auto page = ops.get_states(q);
      for (const auto& m : page.items)
        ids.push_back(m.message_id);
      if (!page.next_after)
        return ids;
      if (by_offset)
        q.offset += static_cast<std::int64_t>(page.items.size());
      else
        q.after = page.next_after;
    }
    CAF_FAIL("paging did not end");
    return ids;
  }
};

// A three-way comparison of optional values with missing ones last in both directions.
template <class T>
int compare_last(const std::optional<T>& a, const std::optional<T>& b, bool descending) {
  if (!a && !b)
    return 0;
  if (!a)
    return 1;
  if (!b)
    return -1;
  int c = *a < *b ? -1 : (*b < *a ? 1 : 0);
  return descending ? -c : c;
}

template <class T>
int compare(const T& a, const T& b, bool descending) {
  int c = a < b ? -1 : (b < a ? 1 : 0);
  return descending ? -c : c;
}

// The reference order: the column, then the id, both in the sort's direction; missing last.
std::vector<std::string>
reference(std::vector<row> rows, const std::function<bool(const row&)>& keep, const state_sort& s) {
  rows.erase(std::remove_if(rows.begin(), rows.end(), [&](const row& r) { return !keep(r); }),
             rows.end());
  bool d = s.descending;
  auto by = [&](const row& a, const row& b) {
    int c = 0;
    if (s.column == "message_id")
      c = 0;
    else if (s.column == "status")
      c = compare(a.status, b.status, d);
    else if (s.column == "queue")
      c = compare(a.queue, b.queue, d);
    else if (s.column == "task")
      c = compare(a.task, b.task, d);
    else if (s.column == "priority")
      c = compare(a.priority, b.priority, d);
    else if (s.column == "attempts")
      c = compare(a.attempts, b.attempts, d);
    else if (s.column == "progress")
      c = compare_last(a.progress, b.progress, d);
    else if (s.column == "enqueued_at")
      c = compare(a.enqueued_us, b.enqueued_us, d);
    else if (s.column == "started_at")
      c = compare_last(a.started_us, b.started_us, d);
    else if (s.column == "finished_at")
      c = compare_last(a.finished_us, b.finished_us, d);
    if (c != 0)
      return c < 0;
    return compare(a.id, b.id, d) < 0;
  };
  std::sort(rows.begin(), rows.end(), by);
  std::vector<std::string> ids;
  for (const auto& r : rows)
    ids.push_back(r.id);
  return ids;
}

bool has(const std::vector<std::string>& list, const std::string& value) {
  return list.empty() || std::find(list.begin(), list.end(), value) != list.end();
}

std::int64_t micros(const std::string& utc) {
  // "2026-11-30 12:30:00" in UTC, to microseconds since the epoch.
  std::tm tm{};
  strptime(utc.c_str(), "%Y-%m-%d %H:%M:%S", &tm);
  return static_cast<std::int64_t>(timegm(&tm)) * 1000000;
}

} // namespace

CAF_TEST_FIXTURE_SCOPE(states_tests, fixture)

CAF_TEST(each status comes from the path that makes it) {
  client producer{client_options{area.dsn(), area.where()}};
  std::vector<std::string> ids;
  for (auto& m : producer.enqueue_many({job(1), job(2), job(3), job(4), job(5), job(6)}))
    ids.push_back(m.id);
  storage::node_identity who{"test", "host", 1, {"default"}};
  auto n = storage::register_node(area.sql(), area.statements(), who);
  auto status = [&](const std::string& id) {
    auto s = ops.get_state(id);
    CAF_REQUIRE(s.has_value());
    return s->status;
  };
  CAF_CHECK_EQUAL(status(ids[0]), "pending");
  // Claimed and not started: still pending; started: started.
  std::vector<storage::claimed_message> got;
  storage::claim_batch_early(area.sql(), area.statements(), "default", n, 5, 0, 0,
                             [&](std::vector<storage::claimed_message> m) {
                               for (auto& x : m)
                                 got.push_back(std::move(x));
                             });
  CAF_REQUIRE_EQUAL(got.size(), 5u);
  std::map<std::string, storage::claimed_message> claimed;
  for (auto& m : got)
    claimed.emplace(m.id, m);
  CAF_CHECK_EQUAL(status(ids[1]), "pending");
  std::vector<storage::started_attempt> starts = {{ids[1], claimed.at(ids[1]).attempt, 0}};
  storage::mark_started(area.sql(), area.statements(), n, starts);
  auto started = ops.get_state(ids[1]);
  CAF_CHECK_EQUAL(started->status, "started");
  CAF_CHECK(started->started_at_ms.has_value());
  CAF_CHECK_EQUAL(started->attempts, 1);
  // Outcomes: done, failed, skipped (a failure a middleware marks as a skip).
  auto finish = [&](const std::string& id, storage::outcome_state st, const std::string& error) {
    storage::outcome o;
    o.id = id;
    o.attempt = claimed.at(id).attempt;
    o.state = st;
    o.error_json = error;
    o.ran_ms = st == storage::outcome_state::done ? 3 : -1;
    storage::complete_batch(area.sql(), area.statements(), n, {o});
  };
  finish(ids[1], storage::outcome_state::done, "");
  finish(ids[2], storage::outcome_state::failed, R"({"type":"boom","text":"broke","attempt":1})");
  finish(ids[3], storage::outcome_state::failed,
         R"({"type":"troupe::age_limit","text":"too old","attempt":1,"skipped":true})");
  auto done = ops.get_state(ids[1]);
  CAF_CHECK_EQUAL(done->status, "success");
  CAF_CHECK(done->finished_at_ms.has_value());
  CAF_CHECK_EQUAL(done->state, "done");
  auto failed = ops.get_state(ids[2]);
  CAF_CHECK_EQUAL(failed->status, "failure");
  CAF_CHECK(failed->error_json.find("broke") != std::string::npos);
  CAF_CHECK_EQUAL(status(ids[3]), "skipped");
  ops.cancel(ids[5]); // queued (the claim took five of six)
  CAF_CHECK_EQUAL(status(ids[5]), "cancelled");
  // Arguments only when asked for; a missing id is none.
  CAF_CHECK(!ops.get_state(ids[0])->args_json);
  auto with = ops.get_state(ids[0], true);
  CAF_REQUIRE(with->args_json.has_value());
  CAF_CHECK_EQUAL(*with->args_json, "[1]");
  CAF_CHECK(!ops.get_state("6f1c3c7e-0000-4000-8000-000000000000").has_value());
}

CAF_TEST(filters sorts and cursor paging match a reference computed in the test) {
  fill();
  auto all = rows();
  CAF_REQUIRE_EQUAL(all.size(), 240u);
  struct scenario {
    state_filter filter;
    std::function<bool(const row&)> keep;
  };
  auto noon_half = micros("2026-11-30 12:20:00"), one = micros("2026-11-30 12:45:00");
  auto finished_from = micros("2026-11-30 13:10:00");
  std::vector<std::string> some_ids = {all[3].id, all[17].id, all[100].id, all[230].id};
  std::vector<scenario> scenarios = {
    {{}, [](const row&) { return true; }},
    {{{"failure", "skipped"}, {}, {}, {}},
     [](const row& r) { return r.status == "failure" || r.status == "skipped"; }},
    {{{"pending"}, {"beta"}, {}, {}},
     [](const row& r) { return r.status == "pending" && r.task == "beta"; }},
    {{{}, {"alpha", "gamma"}, {"report"}, {}},
     [](const row& r) { return (r.task == "alpha" || r.task == "gamma") && r.queue == "report"; }},
    {{{}, {}, {}, some_ids}, [&](const row& r) { return has(some_ids, r.id); }},
    {{{"success", "started"}, {}, {}, {}, "2026-11-30 12:20:00", "2026-11-30T12:45:00Z"},
     [&](const row& r) {
       return (r.status == "success" || r.status == "started") && r.enqueued_us >= noon_half &&
              r.enqueued_us <= one;
     }},
    {{{}, {}, {}, {}, {}, {}, "2026-11-30 13:10:00+00"},
     [&](const row& r) { return r.finished_us && *r.finished_us >= finished_from; }},
    // Live statuses with a finish bound: nothing, and no branch left to read.
    {{{"pending", "started"}, {}, {}, {}, {}, {}, "2026-11-30 13:10:00+00"},
     [](const row&) { return false; }},
  };
  const std::vector<std::string> columns = {"message_id", "status",     "queue",    "task",
                                            "priority",   "attempts",   "progress", "enqueued_at",
                                            "started_at", "finished_at"};
  int checked = 0;
  for (std::size_t i = 0; i < scenarios.size(); ++i) {
    const auto& sc = scenarios[i];
    CAF_MESSAGE("scenario " << i);
    auto expected_count = static_cast<std::int64_t>(
      std::count_if(all.begin(), all.end(), [&](const row& r) { return sc.keep(r); }));
    CAF_CHECK_EQUAL(ops.get_states_count(sc.filter), expected_count);
    for (const auto& col : columns) {
      for (bool desc : {false, true}) {
        state_query q;
        q.filter = sc.filter;
        q.sort = {col, desc};
        q.limit = 11;
        auto want = reference(all, sc.keep, q.sort);
        auto by_cursor = all_pages(q, false);
        if (by_cursor != want)
          CAF_FAIL("cursor paging of scenario " << i << " sorted " << col
                                                << (desc ? " desc" : " asc")
                                                << " differs from the reference");
        auto by_offset = all_pages(q, true);
        if (by_offset != want)
          CAF_FAIL("offset paging of scenario " << i << " sorted " << col
                                                << (desc ? " desc" : " asc")
                                                << " differs from the reference");
        ++checked;
      }
    }
  }
  CAF_CHECK_EQUAL(checked, 160);
  // The default: newest first, 50 a page.
  auto first = ops.get_states();
  CAF_CHECK_EQUAL(first.items.size(), 50u);
  auto want = reference(
    all, [](const row&) { return true; }, state_sort{});
  CAF_CHECK_EQUAL(first.items.front().message_id, want.front());
  CAF_CHECK(first.next_after.has_value());
}

CAF_TEST(a state query refuses what it cannot read and names it) {
  fill();
  auto refused = [&](const std::function<void()>& f, const std::string& says) {
    try {
      f();
    } catch (const error& e) {
      CAF_CHECK_EQUAL(e.code(), errc::invalid_argument);
      if (std::string(e.what()).find(says) == std::string::npos)
        CAF_FAIL("error \"" << e.what() << "\" does not say \"" << says << "\"");
      return;
    }
    CAF_FAIL("nothing refused; expected \"" << says << "\"");
  };
  state_query q;
  q.filter.statuses = {"finished"};
  refused([&] { ops.get_states(q); }, "status \"finished\"");
  q = {};
  q.sort.column = "args";
  refused([&] { ops.get_states(q); }, "cannot sort on \"args\"");
  q = {};
  q.limit = 0;
  refused([&] { ops.get_states(q); }, "limit 0");
  q = {};
  q.limit = 5;
  auto page = ops.get_states(q);
  CAF_REQUIRE(page.next_after.has_value());
  q.after = page.next_after;
  q.sort = {"priority", false};
  refused([&] { ops.get_states(q); }, "was made for the sort enqueued_at desc");
  q = {};
  q.after = "garbage";
  refused([&] { ops.get_states(q); }, "cursor \"garbage\"");
  q = {};
  q.offset = 3;
  q.after = page.next_after;
  refused([&] { ops.get_states(q); }, "not both");
  state_filter f;
  f.enqueued_from = "yesterday-ish";
  refused([&] { ops.get_states_count(f); }, "enqueued_from \"yesterday-ish\"");
  f = {};
  f.queues = {"no spaces"};
  refused([&] { ops.get_states_count(f); }, "no spaces");
  f = {};
  f.message_ids = {"12"};
  refused([&] { ops.get_states_count(f); }, "\"12\" is not a UUID");
}

CAF_TEST(the statement of a finished page can read through the history index) {
  fill();
  // Its states are literals, so the planner can prove that the partial index covers them:
  // with the other plans off, it is the index read backwards (a plan the statement allows).
  state_query q;
  q.filter.statuses = {"success", "failure"};
  auto built = storage::states_page_query(area.where(), q);
  area.sql().exec("SET enable_seqscan = off; SET enable_bitmapscan = off; SET enable_sort = off");
  auto res = area.sql().exec_params("EXPLAIN " + built.sql, built.values, "explain");
  std::string plan;
  for (int r = 0; r < res.rows(); ++r)
    plan += std::string(res.text(r, 0)) + "\n";
  area.sql().exec("RESET enable_seqscan; RESET enable_bitmapscan; RESET enable_sort");
  CAF_MESSAGE(plan);
  CAF_CHECK(plan.find("Index Scan Backward using " + area.where().prefix + "queue_history_idx") !=
            std::string::npos);
  CAF_CHECK_EQUAL(ops.get_states(q).items.size(), 50u);
}

CAF_TEST_FIXTURE_SCOPE_END()
