// `troupe dashboard` as a user runs it (its own process), seen through its JSON API: what it
// shows matches SQL, actions need the token and are refused without it with a clear status,
// read-only refuses them all, the page's input is refused as the CLI refuses it, requests for
// another host are refused, and no answer shows the DSN's password.
#define CAF_SUITE dashboard_api
#include <caf/test/unit_test.hpp>

#include "cli_runner.hpp"
#include "node_harness.hpp"
#include "served_process.hpp"
#include "storage/naming.hpp"
#include "troupe/admin.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <regex>

using namespace troupe;
using namespace std::chrono_literals;

namespace {

task_ref<int(int)> twice{"dashboard.twice"};
task_ref<void()> broken{"dashboard.broken"};

const std::string token = "a-dashboard-token-0123456789";

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

struct fixture : testkit::node_harness {
  fixture() {
    tasks->define(twice, [](int x) { return 2 * x; });
    task_options no_retries;
    no_retries.max_retries = 0;
    tasks->define(
      broken, [] { throw std::runtime_error("broken on purpose"); }, no_retries);
  }

  std::string global(const std::string& dsn) const {
    return "--dsn " + testkit::shell_quote(dsn) + " --schema " + area.where().schema;
  }
  std::string global() const { return global(area.dsn()); }

  testkit::served_process dashboard(const std::string& args = "",
                                    const std::string& with_token = token) {
    auto env = with_token.empty() ? std::string("-u TROUPE_DASHBOARD_TOKEN")
                                  : "TROUPE_DASHBOARD_TOKEN=" + testkit::shell_quote(with_token);
    return testkit::served_process(global(), "dashboard", args, env);
  }

  static std::map<std::string, std::string> bearer(const std::string& t = token) {
    return {{"Authorization", "Bearer " + t}};
  }

  bool in_state(const std::string& id, const std::string& state) {
    return count(fmt::format("message_id = '{}' AND state = '{}'", id, state)) == 1;
  }

  std::int64_t nodes_in_sql() {
    return area.scalar(fmt::format("SELECT count(*) FROM {}.{}",
                                   storage::quote_identifier(area.where().schema),
                                   storage::quote_identifier(area.where().prefix + "nodes")));
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(dashboard_api_tests, fixture)

CAF_TEST(the queues and nodes it shows are what SQL says) {
  for (int i = 0; i < 4; ++i)
    producer.enqueue(twice(i));
  producer.enqueue(broken());
  for (int i = 0; i < 3; ++i)
    producer.enqueue(twice(i).on_queue("later").with_delay(1h));
  start_node();
  CAF_REQUIRE(testkit::wait_until([&] { return count("state IN ('done', 'failed')") == 5; }, 30s));
  auto d = dashboard();
  auto q = d.get("/api/queues");
  CAF_REQUIRE_EQUAL(q.status, 200);
  CAF_CHECK(has(q.content_type, "application/json"));
  CAF_CHECK(has(q.body, R"({"queue":"default","counts":{"queued":0,"running":0,"done":4,)"
                        R"("failed":1,"cancelled":0},"ready":0,"scheduled":0,)"));
  CAF_CHECK(has(q.body, R"({"queue":"later","counts":{"queued":3,)"));
  CAF_CHECK(has(q.body, R"("scheduled":3)"));
  CAF_CHECK(has(q.body, R"("failed_last_hour":1)"));
  auto n = d.get("/api/nodes");
  CAF_REQUIRE_EQUAL(n.status, 200);
  CAF_CHECK_EQUAL(nodes_in_sql(), 1);
  CAF_CHECK(has(n.body, R"("queues":["default"])"));
  CAF_CHECK(has(n.body, R"("alive":true,"running":0,"prefetched":0)"));
  stop();
  CAF_CHECK(
    testkit::wait_until([&] { return !has(d.get("/api/nodes").body, R"("alive":true)"); }, 20s));
}

CAF_TEST(the message list and detail are the state record with its failure and result) {
  auto ok = producer.enqueue(twice(21).with_store_results());
  auto bad = producer.enqueue(broken());
  start_node();
  CAF_REQUIRE(testkit::wait_until([&] { return count("state IN ('done', 'failed')") == 2; }, 30s));
  auto d = dashboard();
  auto page = d.get("/api/messages?status=failure");
  CAF_REQUIRE_EQUAL(page.status, 200);
  CAF_CHECK(has(page.body, bad.id));
  CAF_CHECK(!has(page.body, ok.id));
  CAF_CHECK(has(d.get("/api/messages?count=&status=success").body, R"({"count":1})"));
  auto detail = d.get("/api/message?id=" + ok.id);
  CAF_REQUIRE_EQUAL(detail.status, 200);
  CAF_CHECK(has(detail.body, R"("result":42)"));
  CAF_CHECK(!has(detail.body, R"("args")"));
  auto with_args = d.get("/api/message?id=" + ok.id + "&payload=");
  CAF_CHECK(has(with_args.body, R"("args":[21])"));
  auto failed = d.get("/api/message?id=" + bad.id);
  CAF_CHECK(has(failed.body, "broken on purpose"));
  auto missing = d.get("/api/message?id=00000000-0000-4000-8000-000000000000");
  CAF_CHECK_EQUAL(missing.status, 404);
  CAF_CHECK(has(missing.body, "no message has id"));
}

CAF_TEST(actions need the token and are refused without it with a clear status) {
  producer.enqueue(twice(1));
  // No token configured: actions are off.
  {
    auto d = dashboard("", "");
    CAF_CHECK(has(d.output(), R"("actions":"off")"));
    auto r = d.post("/api/pause?queue=default", bearer());
    CAF_CHECK_EQUAL(r.status, 403);
    CAF_CHECK(has(r.body, "actions are off"));
  }
  auto d = dashboard();
  auto none = d.post("/api/pause?queue=default");
  CAF_CHECK_EQUAL(none.status, 401);
  CAF_CHECK(has(none.body, "needs the dashboard's token"));
  auto wrong = d.post("/api/pause?queue=default", bearer("a-wrong-token-0123456789abc"));
  CAF_CHECK_EQUAL(wrong.status, 401);
  CAF_CHECK(has(wrong.body, "not the dashboard's"));
  admin ops{admin_options{area.dsn(), area.where()}};
  CAF_CHECK(!ops.queue_status("default").at(0).paused);
  auto right = d.post("/api/pause?queue=default", bearer());
  CAF_CHECK_EQUAL(right.status, 200);
  CAF_CHECK(ops.queue_status("default").at(0).paused);
  CAF_CHECK(has(d.get("/api/queues").body, R"("paused":true)"));
  CAF_CHECK_EQUAL(d.post("/api/resume?queue=default", bearer()).status, 200);
  CAF_CHECK(!ops.queue_status("default").at(0).paused);
  // A GET cannot act: the action routes take POST only.
  CAF_CHECK_EQUAL(d.get("/api/pause?queue=default").status, 404);
  CAF_CHECK(!ops.queue_status("default").at(0).paused);
}

CAF_TEST(read only refuses every action even with the token) {
  auto m = producer.enqueue(twice(1));
  auto d = dashboard("--read-only");
  CAF_CHECK(has(d.output(), R"("actions":"read-only")"));
  CAF_CHECK(has(d.get("/api/session").body, R"("actions":"read-only")"));
  for (const auto& path :
       std::vector<std::string>{"/api/pause?queue=default", "/api/cancel?id=" + m.id,
                                "/api/retry?queue=default", "/api/schedule/disable?name=x"}) {
    auto r = d.post(path, bearer());
    CAF_CHECK_EQUAL(r.status, 403);
    CAF_CHECK(has(r.body, "read-only"));
  }
  CAF_CHECK(in_state(m.id, "queued"));
  CAF_CHECK_EQUAL(d.get("/api/queues").status, 200);
}

CAF_TEST(input from the page is refused as the CLI refuses it) {
  auto d = dashboard();
  auto cases = std::vector<std::pair<std::string, std::string>>{
    {"/api/messages?status=bogus", "states --status bogus"},
    {"/api/messages?sort=nope", "states --sort nope"},
    {"/api/messages?limit=0", "states --limit 0"},
    {"/api/messages?queue=Bad%20Queue", "states --queue 'Bad Queue'"},
    {"/api/failed?limit=5000", "failed list --limit 5000"},
    {"/api/message?id=not-a-uuid", "states not-a-uuid"},
  };
  for (const auto& [path, cli_args] : cases) {
    auto r = d.get(path);
    CAF_CHECK_EQUAL(r.status, 400);
    auto cli = testkit::troupe_cli(global() + " " + cli_args);
    CAF_CHECK_EQUAL(cli.status, 2);
    // The CLI's line is "troupe: REASON"; the page gets {"error":"REASON"}.
    auto reason = cli.out.substr(8, cli.out.find('\n') - 8);
    auto quoted = json_quote(reason.substr(0, 40));
    CAF_CHECK(has(r.body, quoted.substr(1, quoted.size() - 2)));
  }
  auto unknown = d.get("/api/messages?drop=table");
  CAF_CHECK_EQUAL(unknown.status, 400);
  CAF_CHECK(has(unknown.body, R"(unknown parameter \"drop\")"));
  // An id that would read as an option is refused, not passed on.
  auto dashed = d.post("/api/retry?id=--queue=default", bearer());
  CAF_CHECK_EQUAL(dashed.status, 400);
  auto bad_queue = d.post("/api/pause?queue=Robert%27);DROP", bearer());
  CAF_CHECK_EQUAL(bad_queue.status, 400);
  CAF_CHECK(has(bad_queue.body, "invalid queue name"));
  auto missing = d.post("/api/retry?id=00000000-0000-4000-8000-000000000000", bearer());
  CAF_CHECK_EQUAL(missing.status, 404);
  auto no_schedule = d.post("/api/schedule/enable?name=nothing", bearer());
  CAF_CHECK_EQUAL(no_schedule.status, 404);
  // A parameter that needs a value and has none is refused by name, not read as a flag that
  // takes the next parameter as its value.
  auto empty = d.get("/api/messages?enqueued-from=&enqueued-to=now");
  CAF_CHECK_EQUAL(empty.status, 400);
  CAF_CHECK(has(empty.body, "parameter enqueued-from needs a value"));
  CAF_CHECK_EQUAL(d.get("/api/messages?asc").status, 200);
  CAF_CHECK_EQUAL(d.get("/api/messages?count").status, 200);
  // Unknown routes answer JSON too.
  auto nowhere = d.get("/api/nowhere");
  CAF_CHECK_EQUAL(nowhere.status, 404);
  CAF_CHECK(has(nowhere.body, R"({"error":"no such API path: /api/nowhere"})"));
  auto no_action = d.post("/api/drop", bearer());
  CAF_CHECK_EQUAL(no_action.status, 404);
  CAF_CHECK(has(no_action.body, R"("error":"no such action)"));
}

CAF_TEST(requests for another host are refused and no answer shows the password) {
  // libpq takes the password and ignores it on the test cluster (trust): it must never show.
  const std::string secret = "pw-that-must-never-show";
  auto dsn = area.dsn() + " password=" + secret;
  auto env = "TROUPE_DASHBOARD_TOKEN=" + testkit::shell_quote(token);
  testkit::served_process d(global(dsn), "dashboard", "", env);
  auto rebound = d.get("/api/queues", {{"Host", "attacker.example:80"}});
  CAF_CHECK_EQUAL(rebound.status, 403);
  CAF_CHECK(has(rebound.body, "loopback"));
  // Names that only look like loopback ones are another site's names.
  for (const auto* host : {"127.attacker.example", "127.0.0.1.nip.io:9481", "[::2]:80",
                           "localhost.attacker.example", "localhost:x", "[::1]x", "127.1"}) {
    CAF_CHECK_EQUAL(d.get("/api/session", {{"Host", host}}).status, 403);
    CAF_CHECK_EQUAL(
      d.post("/api/pause?queue=default", {{"Host", host}, {"Authorization", "Bearer " + token}})
        .status,
      403);
  }
  for (const auto* host :
       {"localhost:1", "LOCALHOST", "127.0.0.1", "127.8.9.10:80", "[::1]:9481", "[::1]"})
    CAF_CHECK_EQUAL(d.get("/api/session", {{"Host", host}}).status, 200);
  CAF_CHECK_EQUAL(d.get("/api/queues", {{"Host", "localhost:1"}}).status, 200);
  std::string everything = d.output();
  for (const auto* path : {"/", "/app.js", "/style.css", "/api/session", "/api/queues",
                           "/api/nodes", "/api/messages", "/api/failed", "/api/schedules"}) {
    auto r = d.get(path);
    CAF_CHECK_EQUAL(r.status, 200);
    everything += r.body;
  }
  CAF_CHECK(!has(everything, secret));
  // A database that cannot be reached: the page is told so, without any part of the DSN; the
  // log has the reason, with libpq's secrets masked.
  testkit::served_process down(
    "--dsn " + testkit::shell_quote("host=127.0.0.1 port=1 dbname=nowhere_db connect_timeout=2 "
                                    "user=someone_user password=" +
                                    secret + " sslpassword=" + secret + "-ssl"),
    "dashboard", "", env);
  auto r = down.get("/api/queues");
  CAF_CHECK_EQUAL(r.status, 503);
  const std::string told =
    "{\"error\":\"the area's database could not be read (the dashboard's log says why)\"}";
  CAF_CHECK_EQUAL(r.body, told);
  for (const auto* part : {"nowhere_db", "someone_user", "port=1", "127.0.0.1"})
    CAF_CHECK(!has(r.body, part));
  CAF_CHECK(!has(r.body + down.output(), secret));
  CAF_CHECK(testkit::wait_until([&] { return has(down.output(), "nowhere_db"); }, 10s));
}

CAF_TEST(every action is logged with its status and the scheme is read without regard to case) {
  auto d = dashboard();
  CAF_CHECK_EQUAL(d.post("/api/pause?queue=default").status, 401);
  CAF_CHECK_EQUAL(d.post("/api/pause?queue=default", {{"Authorization", "bearer " + token}}).status,
                  200);
  CAF_CHECK_EQUAL(
    d.post("/api/resume?queue=default", {{"Authorization", "BEARER " + token}}).status, 200);
  CAF_CHECK_EQUAL(d.post("/api/resume?queue=default", {{"Authorization", "Basic " + token}}).status,
                  401);
  CAF_CHECK(testkit::wait_until(
    [&] {
      auto log = d.output();
      return has(log, "POST /api/pause from 127.0.0.1: 401") &&
             has(log, "POST /api/pause from 127.0.0.1: 200") &&
             has(log, "POST /api/resume from 127.0.0.1: 401");
    },
    10s));
  CAF_CHECK(!has(d.output(), token));
}

CAF_TEST(a weak token or an unreadable token file stops it at start) {
  // Bounded: a dashboard that started instead of refusing would otherwise serve for good.
  auto weak = testkit::troupe_cli(global() + " dashboard --listen 127.0.0.1:0",
                                  "TROUPE_DASHBOARD_TOKEN=short timeout 20 ");
  CAF_CHECK_EQUAL(weak.status, 1);
  CAF_CHECK(has(weak.out, "needs at least 16"));
  auto missing = testkit::troupe_cli(
    global() + " dashboard --listen 127.0.0.1:0 --token-file /nonexistent/t", "timeout 20 ");
  CAF_CHECK_EQUAL(missing.status, 1);
  CAF_CHECK(has(missing.out, "option --token-file: cannot read"));
  // A token from a file: the file's first line.
  char path[] = "/tmp/troupe-token-XXXXXX";
  int fd = ::mkstemp(path);
  ::close(fd);
  std::ofstream(path) << token << "\n";
  testkit::served_process d(global(), "dashboard", std::string("--token-file ") + path,
                            "-u TROUPE_DASHBOARD_TOKEN");
  CAF_CHECK_EQUAL(d.post("/api/pause?queue=default", bearer()).status, 200);
  std::remove(path);
  auto bad_listen = testkit::troupe_cli(global() + " dashboard --listen nowhere", "timeout 20 ");
  CAF_CHECK_EQUAL(bad_listen.status, 2);
  CAF_CHECK(has(bad_listen.out, "option --listen"));
}

CAF_TEST(the throughput chart counts finished messages per second between samples) {
  auto d = dashboard("--sample 1s");
  CAF_CHECK(has(d.get("/api/session").body, R"("sample_ms":1000)"));
  for (int i = 0; i < 30; ++i)
    producer.enqueue(twice(i));
  // The node starts once the chart has an interval of "default" with nothing finished: every
  // message then finishes after the first sample that counted the queue.
  CAF_REQUIRE(testkit::wait_until(
    [&] { return has(d.get("/api/queues").body, R"("finished":{"default":0})"); }, 20s));
  start_node();
  CAF_REQUIRE(testkit::wait_until([&] { return count("state = 'done'") == 30; }, 30s));
  // The counts of "default" over the chart's intervals add up to the 30 finished messages
  // (dashboard_throughput checks each interval's rate).
  auto total_of = [](const std::string& body) {
    static const std::regex finished(R"re("finished":\{"default":([0-9]+)\})re");
    std::int64_t sum = 0;
    for (auto i = std::sregex_iterator(body.begin(), body.end(), finished);
         i != std::sregex_iterator(); ++i)
      sum += std::stoll((*i)[1]);
    return sum;
  };
  std::int64_t seen = 0;
  CAF_CHECK(testkit::wait_until(
    [&] {
      seen = total_of(d.get("/api/queues").body);
      return seen >= 30;
    },
    20s));
  CAF_CHECK_EQUAL(seen, 30);
}

CAF_TEST_FIXTURE_SCOPE_END()
