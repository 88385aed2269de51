#define CAF_SUITE publishing
#include <caf/test/unit_test.hpp>

#include "publishing_fixture.hpp"
#include "troupe/caf.hpp"

#include <cctype>

using namespace troupe;
using testkit::has;
using testkit::job;
using namespace std::chrono_literals;

namespace {

using fixture = testkit::publishing_fixture;

} // namespace

CAF_TEST_FIXTURE_SCOPE(publishing_tests, fixture)

CAF_TEST(bad options are refused before any database access) {
  // A client whose server does not exist: only a refusal that needs no connection can come back
  // as invalid_argument.
  client nowhere{client_options{"host=127.0.0.1 port=1 connect_timeout=2", area.where()}};
  auto [code1, text1] = failure_of([&] { nowhere.enqueue_many({job(1), job(2)}, {key("a")}); });
  CAF_CHECK(code1 == errc::invalid_argument);
  CAF_CHECK(has(text1, "options must match messages: 2 messages, 1 options entries"));
  auto [code2, text2] = failure_of([&] { nowhere.enqueue(job(1), key("a", 0ms)); });
  CAF_CHECK(code2 == errc::invalid_argument);
  CAF_CHECK(has(text2, "invalid enqueue options for message 0"));
  CAF_CHECK(has(text2, "deduplication_ttl must be a positive number"));
  enqueue_options ttl_only;
  ttl_only.deduplication_ttl = 5s;
  auto [code3, text3] = failure_of([&] { nowhere.enqueue_many({job(1), job(2)}, {{}, ttl_only}); });
  CAF_CHECK(has(text3, "invalid enqueue options for message 1: deduplication_ttl given without"));
  auto [code4, text4] =
    failure_of([&] { nowhere.enqueue(job(1), enqueue_options::delayed(-5ms)); });
  CAF_CHECK(has(text4, "delay must be between 0 and 315360000000 ms (ten years), got -5 ms"));
  std::vector<message> too_many(max_batch_size + 1, job(1));
  auto [code5, text5] = failure_of([&] { nowhere.enqueue_many(too_many); });
  CAF_CHECK(code5 == errc::invalid_argument);
  CAF_CHECK(has(text5, "batch limit is 1000 messages"));
  // An empty batch runs no SQL, so it succeeds even without a server.
  CAF_CHECK(nowhere.enqueue_many({}).empty());
  // And the reachable area holds nothing.
  CAF_CHECK_EQUAL(rows(), 0);
}

CAF_TEST(a batch of 1000 is accepted in input order) {
  std::vector<message> batch;
  for (int i = 0; i < 1000; ++i)
    batch.push_back(job(i));
  auto out = producer.enqueue_many(batch);
  CAF_REQUIRE_EQUAL(out.size(), 1000u);
  for (std::size_t i = 0; i < out.size(); ++i)
    CAF_CHECK_EQUAL(out[i].id, batch[i].id);
  CAF_CHECK_EQUAL(rows(), 1000);
}

CAF_TEST(a large batch stores every field as given) {
  // Batches from bulk_threshold messages up are written with a binary COPY: every field must
  // arrive as an INSERT would store it.
  const std::string args = R"(["tab\there", "line\nbreak", "quote \" and \\ backslash", "é✓", )"
                           R"(12345678901234567890, {"nested": [true, null, 1.5e3]}])";
  std::vector<message> batch;
  for (int i = 0; i < 40; ++i) {
    auto m = job(i).with_priority(i % 3 - 1).on_queue(i % 2 ? "bulk.odd" : "bulk-even");
    m.task = "tâche_" + std::to_string(i);
    m.args_json = args;
    m.options_json = R"({"max_retries": 3, "note": "a\tb"})";
    m.timestamp_ms = 1'700'000'000'123 + i;
    batch.push_back(m);
  }
  // An id spelled in upper case with braces is stored as the same UUID.
  std::string canonical;
  CAF_REQUIRE(parse_uuid(batch[5].id, canonical));
  for (auto& c : batch[5].id)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  batch[5].id = "{" + batch[5].id + "}";
  producer.enqueue_many(batch);
  CAF_CHECK_EQUAL(rows(), 40);
  for (int i = 0; i < 40; ++i) {
    const auto& m = batch[static_cast<std::size_t>(i)];
    std::string id;
    CAF_REQUIRE(parse_uuid(m.id, id));
    CAF_CHECK_EQUAL(
      rows(fmt::format("message_id = '{}' AND queue_name = '{}' AND task_name = $t${}$t$ "
                       "AND args = $j${}$j$::jsonb AND options = $j${}$j$::jsonb AND priority = {} "
                       "AND (extract(epoch FROM enqueued_at) * 1000)::bigint = {} "
                       "AND state = 'queued' AND attempts = 0 AND eta <= now()",
                       id, m.queue, m.task, m.args_json, m.options_json, m.priority,
                       m.timestamp_ms)),
      1);
  }
  CAF_CHECK_EQUAL(rows(fmt::format("message_id = '{}'", canonical)), 1);
  // Without options and priorities, the rows hold the column defaults, as an INSERT's do.
  std::vector<message> plain;
  for (int i = 0; i < 40; ++i) {
    auto m = job(i).on_queue("bulk-plain");
    m.args_json = args;
    m.timestamp_ms = 1'700'000'000'456 + i;
    plain.push_back(m);
  }
  producer.enqueue_many(plain);
  for (const auto& m : plain)
    CAF_CHECK_EQUAL(
      rows(fmt::format("message_id = '{}' AND queue_name = 'bulk-plain' AND task_name = 'job' "
                       "AND args = $j${}$j$::jsonb AND options = '{{}}'::jsonb AND priority = 0 "
                       "AND (extract(epoch FROM enqueued_at) * 1000)::bigint = {} "
                       "AND state = 'queued' AND attempts = 0 AND eta <= now()",
                       m.id, m.args_json, m.timestamp_ms)),
      1);
  CAF_CHECK_EQUAL(rows(), 80);
}

CAF_TEST(ids are accepted exactly when PostgreSQL accepts them) {
  // Large batches send ids as bytes (COPY), small ones as text (uuid input): both must take
  // the same spellings, so the client accepts exactly what uuid input does.
  for (const char* id :
       {"0190f1e2-aaaa-7bbb-8ccc-0123456789ab", "0190F1E2-AAAA-7BBB-8CCC-0123456789AB",
        "{0190f1e2-aaaa-7bbb-8ccc-0123456789ab}", "0190f1e2aaaa7bbb8ccc0123456789ab",
        "0190f1e2-aaaa7bbb-8ccc0123-456789ab", "0-190f1e2aaaa-7bbb-8ccc-0123456789ab",
        "0190f1e2--aaaa7bbb8ccc0123456789ab", "-0190f1e2aaaa7bbb8ccc0123456789ab",
        "0190f1e2aaaa7bbb8ccc0123456789ab-", "{0190f1e2aaaa7bbb8ccc0123456789ab",
        "0190f1e2aaaa7bbb8ccc0123456789ab}", "0190f1e2aaaa7bbb8ccc0123456789a",
        "0190f1e2aaaa7bbb8ccc0123456789abc", "0190f1e2 aaaa7bbb8ccc0123456789ab", ""}) {
    std::string canonical;
    bool ours = parse_uuid(id, canonical);
    bool postgres = true;
    try {
      area.sql().exec_params("SELECT $1::uuid", {std::string(id)}, "uuid input");
    } catch (const error&) {
      postgres = false;
    }
    CAF_CHECK_EQUAL(ours, postgres);
    if (ours != postgres)
      CAF_MESSAGE("differs on \"" << id << "\"");
  }
}

CAF_TEST(a publish returns the id as stored whatever spelling the caller gave) {
  auto spelled = [](std::string id) {
    auto m = job(1);
    m.id = std::move(id);
    return m;
  };
  auto canonical = "0190f1e2-aaaa-7bbb-8ccc-0123456789ab";
  auto one = producer.enqueue(spelled("{0190F1E2-AAAA-7BBB-8CCC-0123456789AB}"));
  CAF_CHECK_EQUAL(one.id, canonical);
  CAF_CHECK_EQUAL(area.scalar(fmt::format("SELECT count(*) FROM {} WHERE message_id::text = '{}'",
                                          area.queue_table(), one.id)),
                  1);
  // In a batch, with a key, and through COPY (32 messages or more): the same.
  std::vector<message> batch;
  for (int i = 0; i < 40; ++i)
    batch.push_back(spelled(fmt::format("{{0190F1E2-AAAA-7BBB-8CCC-0123456789{:02X}}}", i)));
  auto out = producer.enqueue_many(batch);
  CAF_REQUIRE_EQUAL(out.size(), batch.size());
  for (int i = 0; i < 40; ++i)
    CAF_CHECK_EQUAL(out[static_cast<std::size_t>(i)].id,
                    fmt::format("0190f1e2-aaaa-7bbb-8ccc-0123456789{:02x}", i));
  auto keyed = producer.enqueue(spelled("0190F1E2AAAA7BBB8CCC0123456789FF"), key("spelled"));
  CAF_CHECK_EQUAL(keyed.id, "0190f1e2-aaaa-7bbb-8ccc-0123456789ff");
  // A duplicate of it returns the stored spelling too.
  CAF_CHECK_EQUAL(producer.enqueue(job(2), key("spelled")).id, keyed.id);
}

CAF_TEST(a large batch puts back a message whose id is stored) {
  std::vector<message> first;
  for (int i = 0; i < 40; ++i)
    first.push_back(job(i));
  producer.enqueue_many(first);
  area.sql().exec(
    fmt::format("UPDATE {} SET state = 'done', finished_at = now() WHERE message_id = '{}'",
                area.queue_table(), first[7].id));
  // Sent again with new messages: the COPY meets the stored id and the upsert takes over.
  std::vector<message> again{first[7]};
  for (int i = 0; i < 39; ++i)
    again.push_back(job(100 + i));
  auto out = producer.enqueue_many(again);
  CAF_CHECK_EQUAL(out.size(), 40u);
  CAF_CHECK_EQUAL(rows(), 79);
  CAF_CHECK_EQUAL(rows(fmt::format("message_id = '{}' AND state = 'queued'", first[7].id)), 1);
  CAF_CHECK_EQUAL(rows("state = 'queued'"), 79);
}

CAF_TEST(a large batch the database refuses writes nothing and says why) {
  std::vector<message> batch;
  for (int i = 0; i < 40; ++i)
    batch.push_back(job(i));
  batch[31].args_json = "[1, 2"; // not JSON
  auto [code, text] = failure_of([&] { producer.enqueue_many(batch); });
  CAF_CHECK(code != errc::connection_lost);
  CAF_CHECK(has(text, "json"));
  CAF_CHECK_EQUAL(rows(), 0);
  // The client's connection is fine afterwards.
  batch[31].args_json = "[31]";
  producer.enqueue_many(batch);
  CAF_CHECK_EQUAL(rows(), 40);
}

CAF_TEST(a large batch with a delayed message keeps that delay only) {
  std::vector<message> batch;
  for (int i = 0; i < 40; ++i)
    batch.push_back(job(i));
  std::vector<enqueue_options> options(40);
  options[3] = enqueue_options::delayed(60s);
  producer.enqueue_many(batch, options);
  CAF_CHECK_EQUAL(
    rows(fmt::format("message_id = '{}' AND eta > now() + interval '50 seconds'", batch[3].id)), 1);
  CAF_CHECK_EQUAL(rows("eta <= now()"), 39);
}

CAF_TEST(a delay option sets the eta of its message only) {
  auto out = producer.enqueue_many({job(1), job(2)}, {enqueue_options::delayed(60s), {}});
  CAF_CHECK_EQUAL(out[0].delay_ms, 60000);
  CAF_CHECK_EQUAL(out[1].delay_ms, 0);
  CAF_CHECK_EQUAL(
    rows(fmt::format("message_id = '{}' AND eta > now() + interval '50 seconds'", out[0].id)), 1);
  CAF_CHECK_EQUAL(rows(fmt::format("message_id = '{}' AND eta <= now()", out[1].id)), 1);
}

CAF_TEST(actors publish batches with options through the storage pool) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto pool = spawn_storage_pool(sys, area.dsn(), area.where());
  caf::scoped_actor self{sys};
  std::vector<message> first;
  self
    ->request(pool, 10s, enqueue_atom_v, std::vector<message>{job(1), job(2)},
              std::vector<enqueue_options>{key("p"), enqueue_options::delayed(30s)})
    .receive([&](std::vector<message>& out) { first = std::move(out); },
             [&](caf::error& e) { CAF_FAIL("publish failed: " << describe(e)); });
  CAF_REQUIRE_EQUAL(first.size(), 2u);
  CAF_CHECK_EQUAL(first[1].delay_ms, 30000);
  std::vector<message> second;
  self
    ->request(pool, 10s, enqueue_atom_v, std::vector<message>{job(3)},
              std::vector<enqueue_options>{key("p")})
    .receive([&](std::vector<message>& out) { second = std::move(out); },
             [&](caf::error& e) { CAF_FAIL("publish failed: " << describe(e)); });
  CAF_CHECK_EQUAL(second.at(0).id, first[0].id);
  std::string refused;
  self
    ->request(pool, 10s, enqueue_atom_v, std::vector<message>{job(4)},
              std::vector<enqueue_options>{key("p", 0ms)})
    .receive([&](std::vector<message>&) { refused = "accepted"; },
             [&](caf::error& e) { refused = describe(e); });
  CAF_CHECK(has(refused, "invalid_argument: invalid enqueue options for message 0"));
  CAF_CHECK_EQUAL(rows(), 2);
  self->send_exit(pool, caf::exit_reason::user_shutdown);
}

CAF_TEST(the storage pool refuses a bad batch before any database access) {
  // A pool whose server does not exist: only answers that need no connection come back.
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto pool = spawn_storage_pool(sys, "host=127.0.0.1 port=1 connect_timeout=2", area.where());
  caf::scoped_actor self{sys};
  auto ask = [&](std::vector<message> batch, std::vector<enqueue_options> options) {
    std::string answer;
    self->request(pool, 10s, enqueue_atom_v, std::move(batch), std::move(options))
      .receive([&](std::vector<message>& out) { answer = fmt::format("{} published", out.size()); },
               [&](caf::error& e) { answer = describe(e); });
    return answer;
  };
  std::vector<message> too_many(max_batch_size + 1, job(1));
  CAF_CHECK(has(ask(too_many, {}), "invalid_argument: batch limit is 1000 messages"));
  CAF_CHECK(has(ask({job(1)}, {enqueue_options::delayed(-5ms)}),
                "invalid_argument: invalid enqueue options for message 0"));
  CAF_CHECK(has(ask({job(1), job(2)}, {key("a")}), "invalid_argument: options must match"));
  CAF_CHECK_EQUAL(ask({}, {}), "0 published");
  // What needs the database gets the lost connection.
  CAF_CHECK(has(ask({job(1)}, {}), "connection_lost"));
  self->send_exit(pool, caf::exit_reason::user_shutdown);
}

CAF_TEST_FIXTURE_SCOPE_END()
