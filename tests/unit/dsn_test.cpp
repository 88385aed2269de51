#define CAF_SUITE dsn
#include <caf/test/unit_test.hpp>

#include "storage/connection.hpp"
#include "troupe/config.hpp"
#include "troupe/dsn.hpp"
#include "troupe/error.hpp"
#include "troupe/node_options.hpp"

#include <string>

using namespace troupe;

namespace {

// The error text validate_dsn gives for `dsn`, or "" when it accepts it.
std::string refusal(const std::string& dsn) {
  try {
    validate_dsn(dsn);
    return "";
  } catch (const error& e) {
    CAF_CHECK(e.code() == errc::invalid_argument);
    return e.what();
  }
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

} // namespace

CAF_TEST(every spelling libpq takes is accepted) {
  for (const char* ok :
       {"", "app", "host=/run/postgresql dbname=app", "host=db port=5432 password='s 3'",
        "postgresql://app@db:5432/x", "postgres://db/x?sslmode=disable"})
    CAF_CHECK_EQUAL(refusal(ok), "");
}

CAF_TEST(a malformed connection string is refused with the reason libpq gives) {
  auto text = refusal("host=db port");
  CAF_CHECK(has(text, "invalid PostgreSQL connection string"));
  CAF_CHECK(has(text, "port"));
  CAF_CHECK(has(refusal("host=db nosuchkey=1"), "nosuchkey"));
}

CAF_TEST(a malformed string that may hold a password is refused without quoting it) {
  for (const char* bad : {"postgresql://app:s3cr%zzet@db/x", "host=db password=s3cret port"}) {
    auto text = refusal(bad);
    CAF_CHECK(has(text, "invalid PostgreSQL connection string"));
    CAF_CHECK(!has(text, "s3cr"));
  }
}

CAF_TEST(the config loader storage and node options apply the same rule) {
  // troupe.ini
  try {
    config::load_from_string("[database]\ndsn=\"host=db port\"\n");
    CAF_FAIL("a malformed database.dsn was accepted");
  } catch (const error& e) {
    CAF_CHECK(has(e.what(), "database.dsn"));
    CAF_CHECK(has(e.what(), "invalid PostgreSQL connection string"));
  }
  CAF_CHECK_EQUAL(config::load_from_string("[database]\ndsn=\"app\"\n").node.dsn, "app");
  // A node's options.
  node_options o;
  o.dsn = "host=db port";
  o.queues.push_back({});
  try {
    validate(o);
    CAF_FAIL("a malformed DSN passed validate(node_options)");
  } catch (const error& e) {
    CAF_CHECK(has(e.what(), "database.dsn"));
  }
  // A mistyped password setting is a token libpq quotes in its reason: withheld (found by
  // fuzz_config).
  for (const char* typo : {"host=db password:s3cret", "host=db passwordXs3cret dbname=app",
                           "host=db PASSWORD s3cret"}) {
    try {
      validate_dsn(typo);
      CAF_FAIL("accepted " << typo);
    } catch (const error& e) {
      CAF_CHECK(!has(e.what(), "s3cret"));
      CAF_CHECK(has(e.what(), "withheld"));
    }
  }
  // Storage refuses it before connecting (and so does every client and node).
  try {
    storage::connection::open("postgresql://app:s3cr%zzet@db/x", "test");
    CAF_FAIL("connected with a broken DSN");
  } catch (const error& e) {
    CAF_CHECK(e.code() == errc::invalid_argument);
    CAF_CHECK(!has(e.what(), "s3cr"));
  }
}

CAF_TEST(passwords never survive redaction) {
  for (const char* dsn : {"host=db password=s3cret user=app", "host=db password = 's3 \\'cret'",
                          "host=db password=s3\\ cret", "postgresql://app:s3cret@db:5432/x",
                          "postgresql://db/x?user=a&password=s3cret&sslmode=disable",
                          "postgresql://app:s3%63ret@db/x"}) {
    auto shown = redact_dsn(dsn);
    CAF_CHECK(!has(shown, "s3"));
    CAF_CHECK(has(shown, "password=***"));
    CAF_CHECK(has(shown, "host=db"));
  }
  // Every secret libpq knows, not just the password: the client key's passphrase too.
  auto ssl = redact_dsn("host=db sslpassword=s3cret sslkey=/k.pem");
  CAF_CHECK(!has(ssl, "s3"));
  CAF_CHECK(has(ssl, "sslpassword=***"));
  CAF_CHECK(!has(redact_secrets("host=db sslpassword=s3cret"), "s3"));
  CAF_CHECK_EQUAL(redact_dsn("host=db"), "host=db");
  CAF_CHECK_EQUAL(redact_dsn("app"), "dbname=app");
  CAF_CHECK_EQUAL(redact_dsn(""), "");
  CAF_CHECK_EQUAL(redact_dsn("password='unterminated s3cret"), "<unparsable connection string>");
}

CAF_TEST(secrets in arbitrary text are hidden and other text is kept) {
  CAF_CHECK_EQUAL(redact_secrets("unknown option --frob"), "unknown option --frob");
  CAF_CHECK_EQUAL(redact_secrets("x password=s3cret y"), "x password=*** y");
  CAF_CHECK_EQUAL(redact_secrets("postgresql://app:s3cret@db/x"), "postgresql://app:***@db/x");
}
