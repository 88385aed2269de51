// The config loader: troupe.ini, TROUPE_DSN and flags into troupe::config::settings, and every
// way a bad value is reported. No database.
#define CAF_SUITE config
#include <caf/test/unit_test.hpp>

#include "config_test_support.hpp"
#include "troupe/config.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <unistd.h>
#include <vector>

using troupe::config::load;
using troupe::config::load_from_string;
using namespace troupe::config_test;
namespace defaults = troupe::defaults;

namespace {

const troupe::queue_options* find_queue(const troupe::config::settings& s,
                                        const std::string& name) {
  for (const auto& q : s.node.queues)
    if (q.name == name)
      return &q;
  return nullptr;
}

/// Unsets TROUPE_DSN for one test and puts it back afterwards.
struct without_troupe_dsn {
  std::optional<std::string> saved;
  without_troupe_dsn() {
    if (auto v = std::getenv("TROUPE_DSN"))
      saved = v;
    unsetenv("TROUPE_DSN");
  }
  ~without_troupe_dsn() {
    if (saved)
      setenv("TROUPE_DSN", saved->c_str(), 1);
  }
};

/// A scratch directory with a troupe.ini in it, removed afterwards.
struct scratch_file {
  std::filesystem::path dir;
  std::filesystem::path path;
  explicit scratch_file(const std::string& text) {
    static int count = 0;
    dir = std::filesystem::temp_directory_path() /
          ("troupe_config_test_" + std::to_string(::getpid()) + "_" + std::to_string(++count));
    std::filesystem::create_directories(dir);
    path = dir / "custom.ini";
    std::ofstream{path} << text;
  }
  ~scratch_file() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

constexpr const char* full_ini = R"(
[database]
dsn="host=/tmp dbname=app"        ; libpq conninfo or URI
[area]
schema="jobs"
prefix="app_"
[node]
name="worker-1"
storage-connections=3
shutdown-grace=45s
janitor-interval=2500                ; plain integers are milliseconds
completion-flush-interval=5ms
completion-batch-size=250
[queues]
default={concurrency=4, prefetch=10, poll-interval=2s}
emails={concurrency=2}             ; omitted keys take defaults
[logging]
level="debug"
format="text"
[scheduler]
max-threads=2
)";

} // namespace

CAF_TEST(an empty file gives the defaults and one queue named default) {
  auto s = load_from_string("");
  CAF_CHECK_EQUAL(s.node.dsn, "");
  CAF_CHECK_EQUAL(s.node.area.schema, "troupe");
  CAF_CHECK_EQUAL(s.node.area.prefix, "");
  CAF_CHECK_EQUAL(s.node.name, "");
  CAF_CHECK_EQUAL(s.node.storage_connections, defaults::storage_connections);
  CAF_CHECK_EQUAL(s.node.scheduler_threads, defaults::scheduler_threads);
  CAF_CHECK_EQUAL(s.node.shutdown_grace.count(), defaults::shutdown_grace.count());
  CAF_CHECK_EQUAL(s.node.janitor_interval.count(), defaults::janitor_interval.count());
  CAF_CHECK_EQUAL(s.node.completion_flush_interval.count(),
                  defaults::completion_flush_interval.count());
  CAF_CHECK_EQUAL(s.node.completion_batch_size, defaults::completion_batch_size);
  CAF_REQUIRE_EQUAL(s.node.queues.size(), 1u);
  CAF_CHECK_EQUAL(s.node.queues[0].name, "default");
  CAF_CHECK_EQUAL(s.node.queues[0].concurrency, defaults::concurrency);
  CAF_CHECK_EQUAL(s.node.queues[0].prefetch, defaults::prefetch);
  CAF_CHECK_EQUAL(s.node.queues[0].poll_interval.count(), defaults::poll_interval.count());
  CAF_CHECK_EQUAL(s.logging.level, "info");
  CAF_CHECK_EQUAL(s.logging.format, "text");
  CAF_CHECK_EQUAL(s.config_file, "");
  CAF_CHECK(!s.help_printed);
}

CAF_TEST(a full file sets every option) {
  auto s = load_from_string(full_ini);
  CAF_CHECK_EQUAL(s.node.dsn, "host=/tmp dbname=app");
  CAF_CHECK_EQUAL(s.node.area.schema, "jobs");
  CAF_CHECK_EQUAL(s.node.area.prefix, "app_");
  CAF_CHECK_EQUAL(s.node.name, "worker-1");
  CAF_CHECK_EQUAL(s.node.storage_connections, 3);
  CAF_CHECK_EQUAL(s.node.shutdown_grace.count(), 45000);
  CAF_CHECK_EQUAL(s.node.janitor_interval.count(), 2500);
  CAF_CHECK_EQUAL(s.node.completion_flush_interval.count(), 5);
  CAF_CHECK_EQUAL(s.node.completion_batch_size, 250);
  CAF_CHECK_EQUAL(s.logging.level, "debug");
  CAF_REQUIRE_EQUAL(s.node.queues.size(), 2u);
  auto def = find_queue(s, "default");
  CAF_REQUIRE(def != nullptr);
  CAF_CHECK_EQUAL(def->concurrency, 4);
  CAF_CHECK_EQUAL(def->prefetch, 10);
  CAF_CHECK_EQUAL(def->poll_interval.count(), 2000);
  auto emails = find_queue(s, "emails");
  CAF_REQUIRE(emails != nullptr);
  CAF_CHECK_EQUAL(emails->concurrency, 2);
  CAF_CHECK_EQUAL(emails->prefetch, defaults::prefetch);
  CAF_CHECK_EQUAL(emails->poll_interval.count(), defaults::poll_interval.count());
}

CAF_TEST(the reference file loads to the defaults) {
  auto text = troupe::config::default_config_text();
  CAF_CHECK(contains(text, "[database]"));
  CAF_CHECK(contains(text, "[queues]"));
  CAF_CHECK(contains(text, "default={concurrency=8, prefetch=16, poll-interval=1s}"));
  CAF_CHECK(contains(text, "shutdown-grace=30s"));
  CAF_CHECK(contains(text, "[limits]"));
  auto s = load_from_string(text);
  auto d = load_from_string("");
  CAF_CHECK_EQUAL(s.node.storage_connections, d.node.storage_connections);
  CAF_CHECK_EQUAL(s.node.shutdown_grace.count(), d.node.shutdown_grace.count());
  CAF_CHECK_EQUAL(s.node.janitor_interval.count(), d.node.janitor_interval.count());
  CAF_CHECK_EQUAL(s.node.completion_flush_interval.count(),
                  d.node.completion_flush_interval.count());
  CAF_CHECK_EQUAL(s.node.completion_batch_size, d.node.completion_batch_size);
  CAF_REQUIRE_EQUAL(s.node.queues.size(), 1u);
  CAF_CHECK_EQUAL(s.node.queues[0].name, "default");
  CAF_CHECK_EQUAL(s.node.queues[0].concurrency, defaults::concurrency);
  CAF_CHECK_EQUAL(s.node.queues[0].poll_interval.count(), defaults::poll_interval.count());
  CAF_CHECK_EQUAL(s.logging.level, d.logging.level);
  CAF_CHECK(s.node.limits.empty());
}

CAF_TEST(TROUPE_DSN overrides the file and a flag overrides both) {
  auto ini = "[database]\ndsn=\"host=file\"\n";
  CAF_CHECK_EQUAL(load_from_string(ini, {}, "host=env").node.dsn, "host=env");
  CAF_CHECK_EQUAL(load_from_string("", {}, "host=env").node.dsn, "host=env");
  CAF_CHECK_EQUAL(load_from_string(ini, {}, "").node.dsn, "host=file"); // empty = unset
  CAF_CHECK_EQUAL(load_from_string(ini, {"--database.dsn=host=flag dbname=x"}, "host=env").node.dsn,
                  "host=flag dbname=x");
}

CAF_TEST(load reads TROUPE_DSN from the environment) {
  without_troupe_dsn guard;
  scratch_file file{"[database]\ndsn=\"host=file\"\n"};
  auto path = file.path.string();
  CAF_CHECK_EQUAL(load_args({"--config-file=" + path}).node.dsn, "host=file");
  setenv("TROUPE_DSN", "host=env", 1);
  auto s = load_args({"--config-file=" + path});
  CAF_CHECK_EQUAL(s.node.dsn, "host=env");
  CAF_CHECK_EQUAL(s.config_file, path);
}

CAF_TEST(flags override single values of the file) {
  auto s = load_from_string(full_ini, {"--node.storage-connections=5", "--node.scheduler-threads=3",
                                       "--node.shutdown-grace=10s", "--node.janitor-interval=500",
                                       "--area.schema=other", "--queues.emails.prefetch=7",
                                       "--logging.level=warn"});
  CAF_CHECK_EQUAL(s.node.storage_connections, 5);
  CAF_CHECK_EQUAL(s.node.scheduler_threads, 3);
  CAF_CHECK_EQUAL(s.node.shutdown_grace.count(), 10000);
  CAF_CHECK_EQUAL(s.node.janitor_interval.count(), 500);
  CAF_CHECK_EQUAL(s.node.area.schema, "other");
  CAF_CHECK_EQUAL(s.node.area.prefix, "app_"); // untouched
  CAF_CHECK_EQUAL(s.logging.level, "warn");
  auto emails = find_queue(s, "emails");
  CAF_REQUIRE(emails != nullptr);
  CAF_CHECK_EQUAL(emails->prefetch, 7);
  CAF_CHECK_EQUAL(emails->concurrency, 2); // from the file
}

CAF_TEST(the queues flag selects queues) {
  auto s = load_from_string(full_ini, {"--queues=emails,reports"});
  CAF_REQUIRE_EQUAL(s.node.queues.size(), 2u);
  CAF_CHECK_EQUAL(s.node.queues[0].name, "emails");
  CAF_CHECK_EQUAL(s.node.queues[0].concurrency, 2);
  CAF_CHECK_EQUAL(s.node.queues[1].name, "reports");
  CAF_CHECK_EQUAL(s.node.queues[1].concurrency, defaults::concurrency);
  auto t = load_from_string("", {"--queues.emails.concurrency=3", "--queues=emails"});
  CAF_REQUIRE_EQUAL(t.node.queues.size(), 1u);
  CAF_CHECK_EQUAL(t.node.queues[0].concurrency, 3);
  CHECK_ERROR_HAS(load_from_string("", {"--queues=emails,emails"}),
                  "queue \"emails\" is configured twice");
}

CAF_TEST(a dotted queue name is written as a nested section) {
  auto s = load_from_string("[queues.reports]\ndaily={concurrency=3}\n");
  CAF_REQUIRE_EQUAL(s.node.queues.size(), 1u);
  CAF_CHECK_EQUAL(s.node.queues[0].name, "reports.daily");
  CAF_CHECK_EQUAL(s.node.queues[0].concurrency, 3);
  auto t = load_from_string("", {"--queues.reports.daily.prefetch=0"});
  CAF_REQUIRE_EQUAL(t.node.queues.size(), 1u);
  CAF_CHECK_EQUAL(t.node.queues[0].name, "reports.daily");
  CAF_CHECK_EQUAL(t.node.queues[0].prefetch, 0);
}

CAF_TEST(durations take units or milliseconds) {
  auto s = load_from_string("[node]\nshutdown-grace=2min\njanitor-interval=1500\n");
  CAF_CHECK_EQUAL(s.node.shutdown_grace.count(), 120000);
  CAF_CHECK_EQUAL(s.node.janitor_interval.count(), 1500);
  CHECK_ERROR_HAS(load_from_string("[node]\ncompletion-flush-interval=500us\n"),
                  "node.completion-flush-interval: 500us is not a whole number of milliseconds");
  CHECK_ERROR_HAS(load_from_string("[node]\nshutdown-grace=\"30s\"\n"),
                  "node.shutdown-grace: expected a duration");
  CHECK_ERROR_HAS(load_from_string("", {"--node.shutdown-grace=10 s"}),
                  "node.shutdown-grace: expected a duration");
}

CAF_TEST(CAF sections pass through untouched) {
  auto s = load_from_string("[scheduler]\nmax-threads=2\npolicy='sharing'\n[logger]\n"
                            "console='colored'\n[middleman]\nworkers=1\n");
  CAF_CHECK_EQUAL(s.node.queues.size(), 1u);
  // [global] keys land at the top level: CAF's global options pass, others are unknown.
  CAF_CHECK_EQUAL(load_from_string("[global]\ndump-config=false\n").node.queues.size(), 1u);
  CHECK_ERROR_HAS(load_from_string("[global]\nfoo=1\n"), "unknown key \"foo\" in troupe.ini");
}

CAF_TEST(unknown keys and sections are rejected by name) {
  CHECK_ERROR_HAS(load_from_string("[node]\nconcurency=2\n"),
                  "unknown key \"node.concurency\" in troupe.ini");
  CHECK_ERROR_HAS(load_from_string("[queues]\nemails={concurency=2}\n"),
                  "unknown key \"queues.emails.concurency\" in troupe.ini");
  CHECK_ERROR_HAS(load_from_string("[databse]\ndsn=\"x\"\n"),
                  "unknown section \"[databse]\" in troupe.ini");
  CHECK_ERROR_HAS(load_from_string("stray=1\n"), "unknown key \"stray\" in troupe.ini");
  CHECK_ERROR_HAS(load_from_string("", {"--node.concurency=2"}),
                  "unknown flag \"--node.concurency\"");
  CHECK_ERROR_HAS(load_from_string("", {"--queues.emails.concurency=2"}),
                  "unknown flag \"--queues.emails.concurency\"");
  CHECK_ERROR_HAS(load_from_string("", {"stray"}), "unexpected argument \"stray\"");
}

CAF_TEST(values of the wrong type are rejected by key) {
  CHECK_ERROR_HAS(load_from_string("[queues]\nemails={concurrency=\"x\"}\n"),
                  "queues.emails.concurrency: expected an integer, got \"x\"");
  CHECK_ERROR_HAS(load_from_string("[node]\nname=42\n"),
                  "node.name: expected a string in double quotes, got 42");
  CHECK_ERROR_HAS(load_from_string("[queues]\nemails=2\n"), "queues.emails: expected a table");
  CHECK_ERROR_HAS(load_from_string("", {"--node.storage-connections=x"}),
                  "node.storage-connections: expected an integer, got \"x\"");
  CHECK_ERROR_HAS(load_from_string("[node]\nstorage-connections=9999999999\n"),
                  "node.storage-connections: 9999999999 is out of range");
  CHECK_ERROR_HAS(load_from_string("[logging]\nlevel=\"verbose\"\n"),
                  "logging.level: \"verbose\" is not one of trace, debug, info, warn, error, "
                  "critical, off");
  CHECK_ERROR_HAS(load_from_string("[logging]\nformat=\"json\"\n"), "logging.format: \"json\"");
}

CAF_TEST(an unclosed brace is an error that names its line and column) {
  CHECK_ERROR_HAS(load_from_string("[node]\nname=\"n\"\n[queues]\nemails={concurrency=2\n"),
                  "troupe.ini:4:8: invalid INI syntax (this '{' is never closed by a '}')");
  // Braces in strings and comments do not count.
  auto s = load_from_string("[node]\nname=\"a{b\" ; {\n[queues]\nq={concurrency=2}\n");
  CAF_CHECK_EQUAL(s.node.name, "a{b");
  CAF_REQUIRE_EQUAL(s.node.queues.size(), 1u);
  CAF_CHECK_EQUAL(s.node.queues[0].name, "q");
}

CAF_TEST(INI syntax errors name the line) {
  CHECK_ERROR_HAS(load_from_string("[node]\nname=unquoted\n"), "troupe.ini:2:");
  CHECK_ERROR_HAS(load_from_string("[node]\n# hash comment\n"), "invalid INI syntax");
}

CAF_TEST(a bad queue name is rejected with the rule) {
  CHECK_ERROR_HAS(load_from_string("[queues]\nEmails={}\n"), "invalid queue name \"Emails\"");
  CHECK_ERROR_HAS(load_from_string("[queues]\nEmails={}\n"),
                  "must start with a lower-case letter or underscore");
  CHECK_ERROR_HAS(load_from_string("", {"--queues=ok,Bad"}), "invalid queue name \"Bad\"");
  CHECK_ERROR_HAS(load_from_string("[area]\nschema=\"Bad-Schema\"\n"),
                  "area.schema: invalid schema name \"Bad-Schema\"");
}

CAF_TEST(out of range numbers name the key) {
  CHECK_ERROR_HAS(load_from_string("[queues]\nemails={concurrency=0}\n"),
                  "queues.emails.concurrency must be between 1 and 1024, got 0");
  CHECK_ERROR_HAS(load_from_string("", {"--queues.default.concurrency=0"}),
                  "queues.default.concurrency must be between 1 and 1024, got 0");
  CHECK_ERROR_HAS(load_from_string("[node]\nstorage-connections=0\n"),
                  "node.storage-connections must be between 1 and 64");
  CHECK_ERROR_HAS(load_from_string("[node]\nscheduler-threads=0\n"),
                  "node.scheduler-threads must be between 1 and 64, got 0");
  CHECK_ERROR_HAS(load_from_string("[queues]\n"), "at least one queue");
}

CAF_TEST(every duration has a range and too large ones are refused by key) {
  CHECK_ERROR_HAS(load_from_string("[node]\nshutdown-grace=9223372036854775807\n"),
                  "node.shutdown-grace must be between 0ms and 24h, got");
  CHECK_ERROR_HAS(load_from_string("[node]\nshutdown-grace=100000000h\n"),
                  "troupe.ini:2:16: 100000000h is too large for a duration");
  CHECK_ERROR_HAS(load_from_string("", {"--node.shutdown-grace=100000000h"}),
                  "node.shutdown-grace: 100000000h is too large for a duration");
  CHECK_ERROR_HAS(load_from_string("[node]\nshutdown-grace=25h\n"),
                  "node.shutdown-grace must be between 0ms and 24h, got 25h");
  CHECK_ERROR_HAS(load_from_string("[node]\nstatement-timeout=500ms\n"),
                  "node.statement-timeout must be 0 (the server's own) or between 1s and 25s");
  CHECK_ERROR_HAS(load_from_string("[node]\nstatement-timeout=1min\n"), "got 1min");
  CHECK_ERROR_HAS(load_from_string("[node]\njanitor-interval=2h\n"),
                  "node.janitor-interval must be between 100ms and 1h, got 2h");
  CHECK_ERROR_HAS(load_from_string("[node]\ntime-limit-grace=-1\n"),
                  "node.time-limit-grace must be between 0ms and 24h, got -1ms");
  CHECK_ERROR_HAS(load_from_string("[queues]\nq={poll-interval=2h}\n"),
                  "queues.q.poll-interval must be between 10ms and 1h, got 2h");
  auto s = load_from_string("[node]\nshutdown-grace=24h\nstatement-timeout=25s\n");
  CAF_CHECK_EQUAL(s.node.shutdown_grace, std::chrono::hours{24});
  CAF_CHECK_EQUAL(s.node.statement_timeout, std::chrono::seconds{25});
  CAF_CHECK_EQUAL(load_from_string("[node]\nstatement-timeout=0\n").node.statement_timeout,
                  std::chrono::milliseconds{0});
  // Digits in strings and comments are not durations.
  CAF_CHECK_EQUAL(load_from_string("[node]\nname=\"n-100000000h\" ; 99999999999999h\n").node.name,
                  "n-100000000h");
}

CAF_TEST(a DSN password never appears in an error) {
  const std::string secret = "hunter2";
  std::vector<std::string> texts = {
    error_text(
      [&] { load_from_string("", {"--database.dsn=\"host=x password=" + secret + "\"trailing"}); }),
    error_text([&] { load_from_string("[database]\ndsn={password=\"" + secret + "\"}\n"); }),
    error_text([&] {
      load_from_string("[database]\ndsn=\"host=x password=" + secret + "\"\n[node]\nbad=1\n");
    }),
    error_text([&] { load_from_string("", {"postgresql://u:" + secret + "@host/db"}); }),
    error_text([&] { load_from_string("", {"--database.dsn"}); }),
  };
  for (const auto& text : texts) {
    CAF_CHECK(!contains(text, "(no error)"));
    if (contains(text, secret))
      CAF_TEST_PRINT_ERROR("leaked: " << text);
    CAF_CHECK(!contains(text, secret));
  }
}

CAF_TEST(config file lookup) {
  without_troupe_dsn guard;
  CHECK_ERROR_HAS(load_args({"--config-file=/nonexistent/troupe.ini"}),
                  "cannot open config file \"/nonexistent/troupe.ini\"");
  scratch_file file{"[node]\nname=\"from-file\"\n"};
  auto s = load_args({"--config-file=" + file.path.string(), "--node.storage-connections=4"});
  CAF_CHECK_EQUAL(s.node.name, "from-file");
  CAF_CHECK_EQUAL(s.node.storage_connections, 4);
  CAF_CHECK_EQUAL(s.config_file, file.path.string());
  scratch_file bad{"[node]\nnmae=\"x\"\n"};
  CHECK_ERROR_HAS(load_args({"--config-file=" + bad.path.string()}),
                  "unknown key \"node.nmae\" in " + bad.path.string());
  CHECK_ERROR_HAS(load_from_string("", {"--config-file=x.ini"}), "--config-file cannot be used");
  auto dir = std::filesystem::temp_directory_path();
  CHECK_ERROR_HAS(load_args({"--config-file=" + dir.string()}),
                  "config file \"" + dir.string() +
                    "\" (given by --config-file) is a directory, not a file");
}

CAF_TEST(help flags are reported to the caller) {
  auto s = load_from_string("[node]\nbogus=1\n", {"-h"});
  CAF_CHECK(s.help_printed);
}
