#define CAF_SUITE json
#include <caf/test/unit_test.hpp>

#include "troupe/json.hpp"

#include <map>
#include <string>
#include <vector>

using namespace troupe;

CAF_TEST(arguments are one plain JSON array) {
  CAF_CHECK_EQUAL(encode_args(), "[]");
  CAF_CHECK_EQUAL(encode_args(2, std::string("x"), std::vector<int>{1, 2}), "[2,\"x\",[1,2]]");
}

CAF_TEST(arguments written by another language decode) {
  auto [n, s, v] = decode_args<int, std::string, std::vector<int>>(R"([7, "from python", [4,5]])");
  CAF_CHECK_EQUAL(n, 7);
  CAF_CHECK_EQUAL(s, "from python");
  CAF_CHECK_EQUAL(v.size(), 2u);
}

CAF_TEST(a wrong argument count is a decode error naming the counts) {
  try {
    decode_args<int, int, int>("[1, 2]");
    CAF_FAIL("decoded two values into three parameters");
  } catch (const error& e) {
    CAF_CHECK(e.code() == errc::decode_failed);
    CAF_CHECK(std::string(e.what()).find("expected 3 values, got 2") != std::string::npos);
  }
}

CAF_TEST(a wrong argument type or malformed JSON is a decode error) {
  for (const char* bad : {R"(["x"])", "not json", "{}", "[1", "null"}) {
    try {
      decode_args<int>(bad);
      CAF_FAIL("decoded " << bad);
    } catch (const error& e) {
      CAF_CHECK(e.code() == errc::decode_failed);
    }
  }
}

CAF_TEST(results are single JSON values) {
  CAF_CHECK_EQUAL(encode_value(5), "5");
  CAF_CHECK_EQUAL(encode_value(std::string("ok")), "\"ok\"");
  CAF_CHECK_EQUAL(decode_value<int>("42"), 42);
}

CAF_TEST(json_quote escapes quotes and control characters) {
  CAF_CHECK_EQUAL(json_quote("a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\n\\u0001\"");
}

CAF_TEST(json_quote turns invalid UTF - 8 and NUL into the replacement character) {
  CAF_CHECK_EQUAL(json_quote(std::string("ok \xff x\0y", 8)), "\"ok \xef\xbf\xbd x\xef\xbf\xbdy\"");
  CAF_CHECK_EQUAL(json_quote("caf\xc3\xa9 \xe2\x82\xac"), "\"caf\xc3\xa9 \xe2\x82\xac\"");
  CAF_CHECK_EQUAL(json_quote("\xc0\xaf"), "\"\xef\xbf\xbd\xef\xbf\xbd\""); // overlong
}

CAF_TEST(only text PostgreSQL accepts as jsonb is storable) {
  CAF_CHECK(is_storable_json_text(R"({"a":"caf\u00e9"})"));
  CAF_CHECK(is_storable_json_text("\"caf\xc3\xa9\""));
  CAF_CHECK(!is_storable_json_text("\"\\u0000\""));
  CAF_CHECK(!is_storable_json_text("\"\xff\""));
  CAF_CHECK(!is_storable_json_text(std::string("\"\0\"", 3)));
}
