#define CAF_SUITE message
#include <caf/test/unit_test.hpp>

#include "troupe/error.hpp"
#include "troupe/message.hpp"
#include "troupe/task.hpp"

#include <algorithm>
#include <set>

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
