#define CAF_SUITE area
#include <caf/test/unit_test.hpp>

#include "storage/naming.hpp"
#include "troupe/area.hpp"
#include "troupe/error.hpp"

#include <string>

using namespace troupe;

namespace {

std::string refusal(void (*check)(std::string_view), const std::string& value) {
  try {
    check(value);
  } catch (const error& e) {
    CAF_CHECK(e.code() == errc::invalid_argument);
    return e.what();
  }
  return {};
}

} // namespace

CAF_TEST(queue names follow the charset and the 47 character bound) {
  CAF_CHECK(is_valid_queue_name("default"));
  CAF_CHECK(is_valid_queue_name("_emails.high-prio_2"));
  CAF_CHECK(is_valid_queue_name(std::string(47, 'q')));
  CAF_CHECK(!is_valid_queue_name(std::string(48, 'q')));
  CAF_CHECK(!is_valid_queue_name(""));
  CAF_CHECK(!is_valid_queue_name("1queue"));
  CAF_CHECK(!is_valid_queue_name("-queue"));
  CAF_CHECK(!is_valid_queue_name("Emails"));
  CAF_CHECK(!is_valid_queue_name("a b"));
  CAF_CHECK(!is_valid_queue_name("jobs\"; drop table x; --"));
}

CAF_TEST(an invalid queue name is refused with the value and the rule) {
  auto text = refusal(validate_queue_name, "Bad Queue");
  CAF_CHECK(text.find("\"Bad Queue\"") != std::string::npos);
  CAF_CHECK(text.find("47") != std::string::npos);
  CAF_CHECK(text.find("lower-case letter") != std::string::npos);
}

CAF_TEST(schemas and prefixes are validated) {
  CAF_CHECK(refusal(validate_schema, "troupe").empty());
  CAF_CHECK(!refusal(validate_schema, "").empty());
  CAF_CHECK(!refusal(validate_schema, "my-schema").empty());
  CAF_CHECK(!refusal(validate_schema, std::string(64, 's')).empty());
  CAF_CHECK(refusal(validate_prefix, "").empty());
  CAF_CHECK(refusal(validate_prefix, "app_").empty());
  CAF_CHECK(!refusal(validate_prefix, std::string(33, 'p')).empty());
  CAF_CHECK(refusal(validate_prefix, "x\"y").find("\"x\"y\"") != std::string::npos);
}

CAF_TEST(identifiers are quoted with inner quotes doubled) {
  CAF_CHECK_EQUAL(storage::quote_identifier("queue"), "\"queue\"");
  CAF_CHECK_EQUAL(storage::quote_identifier("jobs\"_"), "\"jobs\"\"_\"");
}

CAF_TEST(the wake channel fits 63 bytes and is hashed when long) {
  CAF_CHECK_EQUAL(storage::wake_channel(area{}), "troupe.wake");
  CAF_CHECK_EQUAL(storage::wake_channel(area{"app", "jobs_"}), "app.jobs_wake");
  area long_area{std::string(63, 's'), std::string(32, 'p')};
  auto ch = storage::wake_channel(long_area);
  CAF_CHECK(ch.size() <= 63);
  CAF_CHECK(ch.starts_with("troupe."));
  area other{std::string(63, 's'), std::string(31, 'p')};
  CAF_CHECK_NOT_EQUAL(storage::wake_channel(other), ch);
  CAF_CHECK_EQUAL(storage::wake_channel(long_area), ch);
}

CAF_TEST(node lock classes are positive and differ per area) {
  auto a = storage::node_lock_class(area{});
  auto b = storage::node_lock_class(area{"troupe", "x_"});
  CAF_CHECK(a > 0);
  CAF_CHECK(b > 0);
  CAF_CHECK_NOT_EQUAL(a, b);
}
