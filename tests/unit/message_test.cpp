#define CAF_SUITE message
#include <caf/test/unit_test.hpp>

#include "troupe/error.hpp"
#include "troupe/limits.hpp"
#include "troupe/message.hpp"
#include "troupe/options.hpp"
#include "troupe/task.hpp"

#include <algorithm>
#include <chrono>
#include <set>
#include <string>

using namespace troupe;

CAF_TEST(message ids are canonical version 7 uuids in creation order) {
  std::string prev;
  std::set<std::string> seen;
  for (int i = 0; i < 5000; ++i) {
    auto id = new_message_id();
    CAF_REQUIRE_EQUAL(id.size(), 36u);
    CAF_CHECK_EQUAL(id[14], '7');
    CAF_CHECK(id[19] == '8' || id[19] == '9' || id[19] == 'a' || id[19] == 'b');
    CAF_CHECK(id > prev);
    prev = id;
    seen.insert(id);
  }
  CAF_CHECK_EQUAL(seen.size(), 5000u);
}

CAF_TEST(a uuid spelling gives its sixteen bytes) {
  unsigned char b[16];
  CAF_REQUIRE(parse_uuid_bytes("0190f1e2-aaaa-7bbb-8ccc-0123456789AB", b));
  const unsigned char want[16] = {0x01, 0x90, 0xf1, 0xe2, 0xaa, 0xaa, 0x7b, 0xbb,
                                  0x8c, 0xcc, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab};
  CAF_CHECK(std::equal(b, b + 16, want));
  CAF_REQUIRE(parse_uuid_bytes("{0190f1e2aaaa7bbb8ccc0123456789ab}", b));
  CAF_CHECK(std::equal(b, b + 16, want));
  CAF_CHECK(!parse_uuid_bytes("0190f1e2-aaaa-7bbb-8ccc-0123456789a", b));
}

CAF_TEST(any textual uuid form is accepted and canonicalized) {
  std::string c;
  CAF_CHECK(parse_uuid("{0190F1E2-AAAA-7BBB-8CCC-0123456789AB}", c));
  CAF_CHECK_EQUAL(c, "0190f1e2-aaaa-7bbb-8ccc-0123456789ab");
  CAF_CHECK(parse_uuid("0190f1e2aaaa7bbb8ccc0123456789ab", c));
  CAF_CHECK_EQUAL(c, "0190f1e2-aaaa-7bbb-8ccc-0123456789ab");
  CAF_CHECK(!parse_uuid("not-a-uuid", c));
  CAF_CHECK(!parse_uuid("0190f1e2-aaaa-7bbb-8ccc-0123456789", c));
  // 36 characters, but 33 digits and three hyphens; or 32 digits with a stray character.
  CAF_CHECK(!parse_uuid("0190f1e2a-aaaa-7bbb-8ccc0123456789ab", c));
  CAF_CHECK(!parse_uuid("0190f1e2-aaaa-7bbb-8ccc-0123456789a-", c));
  CAF_CHECK(!parse_uuid("0190f1e2-aaaa-7bbb-8ccc-0123456789ag", c));
  // The canonical shape in capitals, or with a character that is no digit.
  CAF_CHECK(parse_uuid("0190F1E2-AAAA-7BBB-8CCC-0123456789AB", c));
  CAF_CHECK_EQUAL(c, "0190f1e2-aaaa-7bbb-8ccc-0123456789ab");
  CAF_CHECK(!parse_uuid("0190f1e2-aaaa-7bbb-8ccc-0123456789a\xc1", c));
  CAF_CHECK(!parse_uuid("0190f1e2-aaaa-7bbb-8ccc-01234 6789ab", c));
  // PostgreSQL's spellings: a hyphen after any group of four digits, braces around it all.
  CAF_CHECK(parse_uuid("0190f1e2-aaaa7bbb-8ccc0123-456789ab", c));
  CAF_CHECK_EQUAL(c, "0190f1e2-aaaa-7bbb-8ccc-0123456789ab");
  CAF_CHECK(parse_uuid("{0190f1e2aaaa7bbb8ccc0123456789ab}", c));
  CAF_CHECK(!parse_uuid("0-190f1e2aaaa-7bbb-8ccc-0123456789ab", c)); // hyphen after one digit
  CAF_CHECK(!parse_uuid("0190-f1e2--aaaa7bbb8ccc0123456789ab", c));  // two hyphens
  CAF_CHECK(!parse_uuid("-0190f1e2aaaa7bbb8ccc0123456789ab", c));    // a leading hyphen
  CAF_CHECK(!parse_uuid("{0190f1e2aaaa7bbb8ccc0123456789ab", c));    // an unclosed brace
  CAF_CHECK(!parse_uuid("0190f1e2aaaa7bbb8ccc0123456789ab}", c));
  CAF_CHECK(!parse_uuid("", c));
}

CAF_TEST(a task reference builds a message for its queue) {
  task_ref<int(int, int)> add{"add", "math"};
  auto m = add(2, 3);
  CAF_CHECK_EQUAL(m.task, "add");
  CAF_CHECK_EQUAL(m.queue, "math");
  CAF_CHECK_EQUAL(m.args_json, "[2,3]");
  CAF_CHECK(m.timestamp_ms > 0);
  auto d = m.with_delay(std::chrono::milliseconds(1500)).with_priority(-2);
  CAF_CHECK_EQUAL(d.delay_ms, 1500);
  CAF_CHECK_EQUAL(d.priority, -2);
  CAF_CHECK_EQUAL(d.id, m.id);
}

CAF_TEST(a task on an invalid queue is refused when the message is built) {
  task_ref<void()> bad{"x", "Bad Queue"};
  try {
    bad();
    CAF_FAIL("built a message for an invalid queue");
  } catch (const error& e) {
    CAF_CHECK(e.code() == errc::invalid_argument);
  }
}

CAF_TEST(the registry refuses duplicate names and lists queues) {
  task_registry r;
  r.define(task_ref<int(int)>{"twice", "math"}, [](int x) { return 2 * x; });
  r.define(task_ref<void()>{"ping", "default"}, [] {});
  try {
    r.define(task_ref<void()>{"ping", "default"}, [] {});
    CAF_FAIL("registered a task twice");
  } catch (const error& e) {
    CAF_CHECK(e.code() == errc::invalid_argument);
  }
  CAF_CHECK_EQUAL(r.queues(), (std::vector<std::string>{"default", "math"}));
  task_context ctx;
  CAF_CHECK_EQUAL(r.find("twice")->invoke(ctx, "[21]"), "42");
  CAF_CHECK_EQUAL(r.find("ping")->invoke(ctx, "[]"), "null");
  CAF_CHECK(r.find("nope") == nullptr);
}

namespace {

// The invalid_argument text of `f()`, or "no error".
template <class F>
std::string refusal(F f) {
  try {
    f();
  } catch (const error& e) {
    if (e.code() == errc::invalid_argument)
      return e.what();
    return "another error: " + std::string(e.what());
  }
  return "no error";
}

bool mentions(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// An option as read back, "unset" when it is not set (or has another type).
std::string int_of(const std::string& options, std::string_view key) {
  auto v = option_int(options, key);
  return v ? std::to_string(*v) : "unset";
}
std::string string_of(const std::string& options, std::string_view key) {
  return option_string(options, key).value_or("unset");
}
std::string bool_of(const std::string& options, std::string_view key) {
  auto v = option_bool(options, key);
  return v ? (*v ? "true" : "false") : "unset";
}

message with_origin() {
  auto m = task_ref<void()>{"ping"}();
  m.options_json = with_option(m.options_json, "origin", "test");
  return m;
}

} // namespace

CAF_TEST(the option setters write the documented keys and keep the others) {
  using std::chrono::milliseconds;
  using namespace std::chrono_literals;
  auto m = with_origin();
  auto o = m.with_max_retries(3)
             .with_min_backoff(250ms)
             .with_max_backoff(2min)
             .with_max_age(1h)
             .with_time_limit(30s)
             .with_on_success("shop.receipt")
             .with_on_failure("shop.alert")
             .with_on_retry_exhausted("shop.refund")
             .with_store_results()
             .with_result_ttl(10min)
             .with_notify_shutdown()
             .options_json;
  CAF_CHECK_EQUAL(int_of(o, "max_retries"), "3");
  CAF_CHECK_EQUAL(int_of(o, "result_ttl"), "600000");
  CAF_CHECK_EQUAL(int_of(o, "min_backoff"), "250");
  CAF_CHECK_EQUAL(int_of(o, "max_backoff"), "120000");
  CAF_CHECK_EQUAL(int_of(o, "max_age"), "3600000");
  CAF_CHECK_EQUAL(int_of(o, "time_limit"), "30000");
  CAF_CHECK_EQUAL(string_of(o, "on_success"), "shop.receipt");
  CAF_CHECK_EQUAL(string_of(o, "on_failure"), "shop.alert");
  CAF_CHECK_EQUAL(string_of(o, "on_retry_exhausted"), "shop.refund");
  CAF_CHECK_EQUAL(bool_of(o, "store_results"), "true");
  CAF_CHECK_EQUAL(bool_of(o, "notify_shutdown"), "true");
  CAF_CHECK_EQUAL(string_of(o, "origin"), "test"); // a key of the caller's own, kept
  // The message itself is unchanged, and the copy is the same message otherwise.
  CAF_CHECK_EQUAL(m.options_json, R"({"origin":"test"})");
  auto copy = m.with_max_retries(0);
  CAF_CHECK_EQUAL(copy.id, m.id);
  CAF_CHECK_EQUAL(copy.task, m.task);
  CAF_CHECK_EQUAL(copy.timestamp_ms, m.timestamp_ms);
  CAF_CHECK_EQUAL(copy.options_json, R"({"origin":"test","max_retries":0})");
}

CAF_TEST(a setter called again replaces its option) {
  using namespace std::chrono_literals;
  auto o = with_origin()
             .with_max_retries(5)
             .with_max_retries(1)
             .with_store_results()
             .with_store_results(false)
             .with_notify_shutdown(false)
             .with_on_success("a")
             .with_on_success("")
             .with_time_limit(1s)
             .with_time_limit(1ms)
             .options_json;
  CAF_CHECK_EQUAL(
    o, R"({"origin":"test","max_retries":1,"store_results":false,"notify_shutdown":false,)"
       R"("on_success":"","time_limit":1})");
}

CAF_TEST(the setters refuse values the middleware would not take) {
  using namespace std::chrono_literals;
  auto m = with_origin();
  CAF_CHECK_EQUAL(refusal([&] { m.with_max_retries(-1); }),
                  "the message option max_retries must be between 0 and 1000000, got -1");
  CAF_CHECK_EQUAL(refusal([&] { m.with_max_retries(1'000'001); }),
                  "the message option max_retries must be between 0 and 1000000, got 1000001");
  CAF_CHECK_EQUAL(refusal([&] { m.with_max_retries(0); }), "no error");
  struct duration_setter {
    std::string key;
    message (message::*set)(std::chrono::milliseconds) const;
  };
  for (const auto& s : {duration_setter{"min_backoff", &message::with_min_backoff},
                        duration_setter{"max_backoff", &message::with_max_backoff},
                        duration_setter{"max_age", &message::with_max_age},
                        duration_setter{"time_limit", &message::with_time_limit},
                        duration_setter{"result_ttl", &message::with_result_ttl}}) {
    for (auto bad : {0ms, -5ms, 10'000'000'000'000ms})
      CAF_CHECK_EQUAL(refusal([&] { (m.*s.set)(bad); }),
                      "the message option " + s.key +
                        " must be a positive number of milliseconds up to 31536000000 (a year), "
                        "got " +
                        std::to_string(bad.count()) + "ms");
    CAF_CHECK_EQUAL(refusal([&] { (m.*s.set)(1ms); }), "no error");
  }
  // Options that are not a JSON object are refused too, by every setter.
  auto broken = m;
  broken.options_json = "[1]";
  CAF_CHECK(mentions(refusal([&] { broken.with_max_retries(1); }), "JSON object"));
  CAF_CHECK(mentions(refusal([&] { broken.with_on_failure("x"); }), "JSON object"));
  CAF_CHECK(mentions(refusal([&] { broken.with_store_results(); }), "JSON object"));
}

CAF_TEST(an empty callback name is accepted and switches the callback of the task off) {
  // docs/middleware.md: a message's "on_success": "" turns off the task's callback.
  auto o = with_origin().with_on_success("").with_on_failure("").with_on_retry_exhausted("");
  CAF_CHECK_EQUAL(string_of(o.options_json, "on_success"), "");
  CAF_CHECK_EQUAL(string_of(o.options_json, "on_failure"), "");
  CAF_CHECK_EQUAL(string_of(o.options_json, "on_retry_exhausted"), "");
}

CAF_TEST(a max_backoff longer than the longest backoff is accepted) {
  // The middleware counts it as 7 days (see the retries_middleware suite).
  auto o = with_origin().with_max_backoff(std::chrono::hours(24 * 30)).options_json;
  CAF_CHECK_EQUAL(int_of(o, "max_backoff"), "2592000000");
}

CAF_TEST(publishing refuses options sizes and delays out of range by name) {
  auto base = with_origin();
  auto fault = [&](message m) {
    try {
      normalize_message(m);
    } catch (const troupe::error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  auto with = [&](std::string options) {
    auto m = base;
    m.options_json = std::move(options);
    return m;
  };
  CAF_CHECK(
    mentions(fault(with(R"({"time_limit":10000000000000})")),
             "invalid options: time_limit: 10000000000000 is out of range (0 to 31536000000 ms)"));
  CAF_CHECK(mentions(fault(with(R"({"max_age":"soon"})")),
                     "invalid options: max_age: expected an integer of ms"));
  CAF_CHECK(mentions(fault(with(R"({"max_retries":2147483647})")),
                     "invalid options: max_retries: 2147483647 is out of range"));
  CAF_CHECK(mentions(fault(with(R"({"store_results":1})")), "store_results: expected true or"));
  CAF_CHECK(mentions(fault(with(R"({"result_ttl":-1})")),
                     "invalid options: result_ttl: -1 is out of range (0 to 31536000000 ms)"));
  CAF_CHECK_EQUAL(fault(with(R"({"result_ttl":0})")), "no error");
  CAF_CHECK(mentions(fault(with("[]")), "invalid options: they are not a JSON object"));
  CAF_CHECK_EQUAL(fault(with(R"({"time_limit":1000,"custom":{"any":"thing"}})")), "no error");
  auto m = base;
  m.delay_ms = troupe::limits::max_delay_ms + 1;
  CAF_CHECK(mentions(fault(m), "is out of range (0 to 315360000000ms, ten years)"));
  m = base;
  m.task = std::string(256, 't');
  CAF_CHECK(mentions(fault(m), "its task name is 256 bytes long, longer than the 255 allowed"));
  m = base;
  m.timestamp_ms = -1;
  CAF_CHECK(mentions(fault(m), "timestamp -1 is out of range"));
  m = base;
  m.args_json = "[\"" + std::string(troupe::limits::max_message_bytes, 'x') + "\"]";
  CAF_CHECK(mentions(fault(m), "more than the 67108864 a message may hold"));
}
