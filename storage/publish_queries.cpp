// The typed calls of publishing (storage/queries.hpp): the parameters of the enqueue and
// deduplication statements, the enqueue itself, and the binary COPY of new messages.
#include "storage/array_columns.hpp"
#include "storage/queries.hpp"

#include "storage/naming.hpp"
#include "troupe/error.hpp"
#include "troupe/message.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <span>
#include <string>

namespace troupe::storage {

using detail::column;
using detail::nullable;
using detail::nullable_column;

params enqueue_params(const area& where, const std::vector<message>& batch, bool revive) {
  return params{
    column(batch, [](const message& m) { return m.id; }),
    column(batch, [](const message& m) { return m.queue; }),
    column(batch, [](const message& m) { return m.task; }),
    column(batch, [](const message& m) { return m.args_json; }),
    column(batch, [](const message& m) { return m.options_json; }),
    column(batch, [](const message& m) { return std::to_string(m.priority); }),
    column(batch, [](const message& m) { return std::to_string(m.delay_ms); }),
    column(batch, [](const message& m) { return std::to_string(m.timestamp_ms); }),
    wake_channel(where),
    revive ? "true" : "false",
  };
}

params insert_params(params enqueue_values) {
  enqueue_values.pop_back(); // the revive flag, enqueue_params' last
  return enqueue_values;
}

params claim_keys_params(const std::vector<key_claim>& claims, std::int64_t token) {
  return params{
    column(claims, [](const key_claim& c) { return c.queue; }),
    column(claims, [](const key_claim& c) { return c.key; }),
    column(claims, [](const key_claim& c) { return c.message_id; }),
    column(claims, [](const key_claim& c) { return c.message_json; }),
    column(claims, [](const key_claim& c) { return std::to_string(c.ttl_ms); }),
    std::to_string(token),
  };
}

std::vector<key_claim_result> read_key_claims(const result& res) {
  std::vector<key_claim_result> out;
  out.reserve(res.rows());
  for (int r = 0; r < res.rows(); ++r) {
    key_claim_result k;
    k.queue = res.text(r, 0);
    k.key = res.text(r, 1);
    k.claimed = res.text(r, 2) == "t";
    k.holder.id = res.text(r, 3);
    k.holder.queue = res.text(r, 4);
    k.holder.task = res.text(r, 5);
    k.holder.args_json = res.text(r, 6);
    k.holder.options_json = res.text(r, 7);
    k.holder.priority = static_cast<std::int32_t>(res.int64(r, 8));
    k.holder.delay_ms = res.int64(r, 9);
    k.holder.timestamp_ms = res.int64(r, 10);
    out.push_back(std::move(k));
  }
  return out;
}

params store_keys_params(const std::vector<key_claim>& claims, std::int64_t token) {
  return params{
    column(claims, [](const key_claim& c) { return c.queue; }),
    column(claims, [](const key_claim& c) { return c.key; }),
    column(claims, [](const key_claim& c) { return c.message_id; }),
    column(claims, [](const key_claim& c) { return c.message_json; }),
    std::to_string(token),
  };
}

std::int64_t prune_deduplication_keys(connection& conn, const statement_set& stmts,
                                      std::int64_t limit) {
  return conn.run(stmts.get(sql::prune_deduplication_keys), {std::to_string(limit)}).affected();
}

std::int64_t enqueue_messages(connection& conn, const statement_set& stmts,
                              const std::vector<message>& batch, bool revive) {
  if (batch.empty())
    return 0;
  return conn.run(stmts.get(sql::enqueue_messages), enqueue_params(stmts.where(), batch, revive))
    .int64(0, 0);
}

namespace {

// PostgreSQL's binary COPY format: big-endian integers, each field as its length and its bytes.
void put_be(std::string& out, std::uint64_t v, int bytes) {
  char b[8];
  for (int i = 0; i < bytes; ++i)
    b[i] = static_cast<char>((v >> (8 * (bytes - 1 - i))) & 0xff);
  out.append(b, static_cast<std::size_t>(bytes));
}

void put_field(std::string& out, std::string_view bytes) {
  put_be(out, static_cast<std::uint32_t>(bytes.size()), 4);
  out.append(bytes);
}

// The id's 16 bytes, from the spellings PostgreSQL's uuid input accepts (parse_uuid), so a
// batch written with COPY takes exactly the ids an INSERT would.
void put_uuid(std::string& out, const std::string& id) {
  unsigned char bytes[16];
  if (!parse_uuid_bytes(id, bytes))
    throw error(errc::invalid_argument, "message id \"" + id + "\" is not a UUID");
  put_be(out, 16, 4);
  out.append(reinterpret_cast<const char*>(bytes), 16);
}

void put_jsonb(std::string& out, const std::string& json) {
  put_be(out, static_cast<std::uint32_t>(json.size() + 1), 4);
  out.push_back('\x01'); // jsonb's binary input: a version byte, then the JSON text
  out.append(json);
}

// Microseconds between the Unix epoch and PostgreSQL's (2000-01-01 UTC).
constexpr std::int64_t postgres_epoch_us = 946'684'800'000'000;

} // namespace

std::string copy_messages_data(std::span<const message> batch) {
  std::string out;
  std::size_t size = 21;
  for (const auto& m : batch)
    size += 70 + m.queue.size() + m.task.size() + m.args_json.size() + m.options_json.size();
  out.reserve(size);
  out.append("PGCOPY\n\xff\r\n\0", 11);
  put_be(out, 0, 4); // flags
  put_be(out, 0, 4); // header extension length
  for (const auto& m : batch) {
    // PostgreSQL's timestamp range, in round years; beyond it the microseconds would overflow.
    if (m.timestamp_ms < -62'135'596'800'000 || m.timestamp_ms > 253'402'300'799'999)
      throw error(
        errc::invalid_argument,
        fmt::format("message {} has a timestamp out of range: {} ms", m.id, m.timestamp_ms));
    if (m.delay_ms != 0)
      throw error(errc::bug, "a delayed message cannot be written with COPY (its eta is the "
                             "server's clock plus the delay)");
    put_be(out, 7, 2); // fields, in the statement's column order
    put_uuid(out, m.id);
    put_field(out, m.queue);
    put_field(out, m.task);
    put_jsonb(out, m.args_json);
    put_jsonb(out, m.options_json);
    put_be(out, 4, 4);
    put_be(out, static_cast<std::uint32_t>(m.priority), 4);
    put_be(out, 8, 4);
    put_be(out, static_cast<std::uint64_t>(m.timestamp_ms * 1000 - postgres_epoch_us), 8);
  }
  put_be(out, 0xffff, 2); // the trailer: a field count of -1
  return out;
}

namespace {

// The most rows one COPY statement of a batch takes. PostgreSQL 15 buffers up to 1,000 rows of a
// binary COPY before it writes them, and every buffered row's slot registers the table's tuple
// descriptor with the statement's resource owner, whose lookups probe past every earlier entry
// of that descriptor: the bookkeeping grows with the square of the rows buffered. A batch of
// 1,000 sent as four COPYs of 250 in one transaction was 9-13 % faster than one COPY.
constexpr std::size_t copy_part_rows = 250;

} // namespace

std::int64_t copy_new_messages(connection& conn, const statement_set& stmts,
                               const std::vector<message>& batch) {
  if (batch.empty())
    return 0;
  std::vector<std::string> parts;
  std::span<const message> rest(batch);
  while (!rest.empty()) {
    auto n = std::min(rest.size(), copy_part_rows);
    parts.push_back(copy_messages_data(rest.first(n)));
    rest = rest.subspan(n);
  }
  // One query holds BEGIN, the COPYs (one per part of at most copy_part_rows), the
  // notifications and the COMMIT; each COPY's data follows once the server asks for it: one
  // round trip more than the parts (two for a batch of up to 250).
  auto channel = conn.literal(wake_channel(stmts.where()));
  std::vector<std::string> queues;
  std::string finish = "; SELECT ";
  for (const auto& m : batch) {
    if (std::find(queues.begin(), queues.end(), m.queue) != queues.end())
      continue;
    finish += fmt::format("{}pg_notify({}, {})", queues.empty() ? "" : ", ", channel,
                          conn.literal(m.queue));
    queues.push_back(m.queue);
  }
  finish += "; COMMIT";
  try {
    return conn.copy_in_parts(stmts.get(sql::copy_messages), parts, "BEGIN; ", finish);
  } catch (...) {
    conn.rollback_quietly();
    throw;
  }
}

} // namespace troupe::storage
