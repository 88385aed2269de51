// The logger's bounds: loggable() and the lines the shared logger writes to stderr.
#define CAF_SUITE log
#include <caf/test/unit_test.hpp>

#include "troupe/log.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>

using troupe::loggable;

CAF_TEST(loggable escapes control characters and cuts long text) {
  CAF_CHECK_EQUAL(loggable("plain text, ünïcödé"), "plain text, ünïcödé");
  CAF_CHECK_EQUAL(loggable("a\nb\tc\rd\\e"), "a\\nb\\tc\\rd\\\\e");
  CAF_CHECK_EQUAL(loggable(std::string("nul\0esc\x1b[2J del\x7f", 16)),
                  "nul\\x00esc\\x1b[2J del\\x7f");
  CAF_CHECK_EQUAL(loggable("csi \xc2\x9b"
                           "31m"),
                  "csi \\xc2\\x9b31m"); // a C1 control
  CAF_CHECK_EQUAL(loggable("bad \xff\xfe byte"), "bad \\xff\\xfe byte");
  CAF_CHECK_EQUAL(loggable(std::string(300, 'x'), 10), "xxxxxxxxxx... (300 bytes in all)");
  // A character the bound would cut is left out whole.
  CAF_CHECK_EQUAL(loggable("abcdé", 5), "abcd... (6 bytes in all)");
}

CAF_TEST(a log line holds one bounded message however long the value) {
  // The logger writes to stderr: point it at a file for the test.
  char path[] = "/tmp/troupe-log-test-XXXXXX";
  int fd = ::mkstemp(path);
  CAF_REQUIRE(fd >= 0);
  std::fflush(stderr);
  int saved = ::dup(2);
  ::dup2(fd, 2);
  troupe::log().warn("task={} done", std::string(100'000, 't') + "\nforged line");
  troupe::log().flush();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  ::close(fd);
  std::ifstream in{path};
  std::stringstream all;
  all << in.rdbuf();
  ::unlink(path);
  auto text = all.str();
  CAF_CHECK_EQUAL(std::count(text.begin(), text.end(), '\n'), 1);
  CAF_CHECK(text.size() < troupe::max_log_message + 100);
  CAF_CHECK(text.find(" bytes in all)") != std::string::npos);
  CAF_CHECK(text.find("forged line") == std::string::npos);
}
