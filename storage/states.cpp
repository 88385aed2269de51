#include "storage/states.hpp"

#include "storage/statements.hpp"
#include "troupe/error.hpp"
#include "troupe/message.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace troupe::storage {

namespace {

// The status of a row, as SQL over alias q (docs/operations.md, "The state record").
constexpr std::string_view status_sql =
  "CASE q.state WHEN 'queued' THEN 'pending' "
  "WHEN 'running' THEN CASE WHEN q.started_at IS NULL THEN 'pending' ELSE 'started' END "
  "WHEN 'done' THEN 'success' "
  "WHEN 'failed' THEN CASE WHEN coalesce(q.error->>'skipped', '') = 'true' THEN 'skipped' "
  "ELSE 'failure' END "
  "ELSE 'cancelled' END";

// Microseconds since the epoch of a timestamp, as text (exact: PostgreSQL keeps microseconds).
std::string micros_of(std::string_view column) {
  return fmt::format("(extract(epoch FROM {}) * 1000000)::bigint::text", column);
}

std::string timestamp_from_micros(std::string_view placeholder) {
  return fmt::format("('epoch'::timestamptz + {}::bigint * interval '1 microsecond')", placeholder);
}

struct sort_column {
  std::string_view name;
  std::string expr;      // over alias q
  std::string as_text;   // the cursor's value, as text
  std::string_view cast; // how a cursor's value reads back ("" for timestamps)
  bool nullable;
};

const std::vector<sort_column>& sort_columns() {
  static const std::vector<sort_column> columns = {
    {"message_id", "q.message_id", "q.message_id::text", "uuid", false},
    {"status", std::string(status_sql), std::string(status_sql), "text", false},
    {"queue", "q.queue_name", "q.queue_name", "text", false},
    {"task", "q.task_name", "q.task_name", "text", false},
    {"priority", "q.priority", "q.priority::text", "integer", false},
    {"attempts", "q.attempts", "q.attempts::text", "integer", false},
    {"progress", "q.progress", "q.progress::text", "jsonb", true},
    {"enqueued_at", "q.enqueued_at", micros_of("q.enqueued_at"), "", false},
    {"started_at", "q.started_at", micros_of("q.started_at"), "", true},
    {"finished_at", "q.finished_at", micros_of("q.finished_at"), "", true},
  };
  return columns;
}

const sort_column& find_column(std::string_view name) {
  for (const auto& c : sort_columns())
    if (c.name == name)
      return c;
  throw error(errc::invalid_argument, "cannot sort on \"" + std::string(name) + "\"");
}

// Which row states a status lives in, and the condition that picks it among them.
struct status_rule {
  std::string_view status;
  std::array<std::string_view, 2> states;
};

constexpr status_rule status_rules[] = {
  {"pending", {"queued", "running"}}, {"started", {"running", ""}},
  {"success", {"done", ""}},          {"failure", {"failed", ""}},
  {"skipped", {"failed", ""}},        {"cancelled", {"cancelled", ""}},
};

bool is_live(std::string_view state) {
  return state == "queued" || state == "running";
}

std::string hex_encode(std::string_view text) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size() * 2);
  for (unsigned char c : text) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::optional<std::string> hex_decode(std::string_view hex) {
  auto value = [](char c) -> int {
    if (c >= '0' && c <= '9')
      return c - '0';
    if (c >= 'a' && c <= 'f')
      return c - 'a' + 10;
    return -1;
  };
  if (hex.size() % 2 != 0)
    return std::nullopt;
  std::string out;
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    int hi = value(hex[i]), lo = value(hex[i + 1]);
    if (hi < 0 || lo < 0)
      return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
  }
  return out;
}

// A cursor: column.direction.value.id, the value in hex or "-" when it is missing.
struct cursor {
  std::optional<std::string> value;
  std::string id;
};

std::string make_cursor(const state_sort& s, const std::optional<std::string>& value,
                        const std::string& id) {
  return fmt::format("{}.{}.{}.{}", s.column, s.descending ? "desc" : "asc",
                     value ? hex_encode(*value) : std::string("-"), id);
}

cursor read_cursor(const state_sort& s, std::string_view text) {
  auto refuse = [&](const std::string& why) -> cursor {
    throw error(errc::invalid_argument,
                "cursor \"" + std::string(text.substr(0, 200)) + "\" " + why);
  };
  std::vector<std::string_view> parts;
  std::size_t from = 0;
  while (parts.size() < 3) {
    auto dot = text.find('.', from);
    if (dot == std::string_view::npos)
      return refuse("is not one a state query gave (column.direction.value.id)");
    parts.push_back(text.substr(from, dot - from));
    from = dot + 1;
  }
  parts.push_back(text.substr(from));
  std::string_view dir = s.descending ? "desc" : "asc";
  if (parts[0] != s.column || parts[1] != dir)
    return refuse(
      fmt::format("was made for the sort {} {}, not {} {}", parts[0], parts[1], s.column, dir));
  cursor c;
  if (parts[2] != "-") {
    c.value = hex_decode(parts[2]);
    if (!c.value)
      return refuse("has a value that does not decode");
  }
  if (!parse_uuid(parts[3], c.id))
    return refuse("does not end with a message id");
  // The value as its column reads it: digits for numbers and times, a UUID for an id.
  const auto& col = find_column(s.column);
  if (c.value && (col.cast == "integer" || col.cast.empty())) {
    auto& v = *c.value;
    bool digits = !v.empty() && v.size() <= 20 &&
                  std::all_of(v.begin() + (v[0] == '-' ? 1 : 0), v.end(),
                              [](char ch) { return ch >= '0' && ch <= '9'; }) &&
                  v != "-";
    if (!digits)
      return refuse("has a value that is not a number");
  }
  if (c.value && col.cast == "uuid") {
    std::string canonical;
    if (!parse_uuid(*c.value, canonical))
      return refuse("has a value that is not a message id");
  }
  return c;
}

// Builds one statement, numbering its parameters as they come.
class builder {
public:
  std::string param(std::string value) {
    values_.emplace_back(std::move(value));
    return "$" + std::to_string(values_.size());
  }
  params take() { return std::move(values_); }

private:
  params values_;
};

// The conditions every branch shares (all but the states), joined with AND.
std::string shared_conditions(builder& b, const state_filter& f) {
  std::vector<std::string> where;
  // The statuses as conditions on the columns the status comes from, only for the states that
  // hold more than one status of which some are left out (the planner estimates these far
  // better than the status expression).
  auto chosen = [&](std::string_view st) {
    return std::find(f.statuses.begin(), f.statuses.end(), st) != f.statuses.end();
  };
  if (!f.statuses.empty()) {
    if (chosen("pending") != chosen("started"))
      where.push_back(fmt::format("(q.state <> 'running' OR q.started_at IS {}NULL)",
                                  chosen("pending") ? "" : "NOT "));
    if (chosen("failure") != chosen("skipped"))
      where.push_back(fmt::format("(q.state <> 'failed' OR coalesce(q.error->>'skipped', '') {} "
                                  "'true')",
                                  chosen("skipped") ? "=" : "<>"));
  }
  if (!f.tasks.empty())
    where.push_back("q.task_name = ANY (" + b.param(array_literal(f.tasks)) + "::text[])");
  if (!f.queues.empty())
    where.push_back("q.queue_name = ANY (" + b.param(array_literal(f.queues)) + "::text[])");
  if (!f.message_ids.empty())
    where.push_back("q.message_id = ANY (" + b.param(array_literal(f.message_ids)) + "::uuid[])");
  // Both conditions, so that the planner can use the index of composition members.
  if (!f.composition_ids.empty())
    where.push_back("q.options ? 'composition_id' AND q.options->>'composition_id' = ANY (" +
                    b.param(array_literal(f.composition_ids)) + "::text[])");
  if (f.enqueued_from)
    where.push_back("q.enqueued_at >= " + b.param(*f.enqueued_from) + "::timestamptz");
  if (f.enqueued_to)
    where.push_back("q.enqueued_at <= " + b.param(*f.enqueued_to) + "::timestamptz");
  if (f.finished_from)
    where.push_back("q.finished_at >= " + b.param(*f.finished_from) + "::timestamptz");
  if (f.finished_to)
    where.push_back("q.finished_at <= " + b.param(*f.finished_to) + "::timestamptz");
  std::string out;
  for (const auto& w : where)
    out += " AND " + w;
  return out;
}

// The row states the filter can match, split into the live branch and the finished one. Each
// is a list of literals, so that the planner proves a finished branch's predicate implies the
// partial indexes' (a parameter would hide it).
std::pair<std::vector<std::string_view>, std::vector<std::string_view>>
branch_states(const state_filter& f) {
  std::vector<std::string_view> states;
  if (f.statuses.empty()) {
    states = {"queued", "running", "done", "failed", "cancelled"};
  } else {
    for (const auto& rule : status_rules)
      if (std::find(f.statuses.begin(), f.statuses.end(), rule.status) != f.statuses.end())
        for (auto s : rule.states)
          if (!s.empty() && std::find(states.begin(), states.end(), s) == states.end())
            states.push_back(s);
  }
  std::vector<std::string_view> live, finished;
  bool finished_bound = f.finished_from || f.finished_to;
  for (auto s : states) {
    if (is_live(s)) {
      if (!finished_bound) // a live row has not finished
        live.push_back(s);
    } else {
      finished.push_back(s);
    }
  }
  // A fixed order, so that one filter always makes one statement text.
  auto rank = [](std::string_view s) {
    constexpr std::string_view order[] = {"queued", "running", "done", "failed", "cancelled"};
    return std::find(std::begin(order), std::end(order), s) - std::begin(order);
  };
  auto by_rank = [&](std::string_view x, std::string_view y) { return rank(x) < rank(y); };
  std::sort(live.begin(), live.end(), by_rank);
  std::sort(finished.begin(), finished.end(), by_rank);
  return {live, finished};
}

// The branches of a query, each "SELECT <select> FROM queue q WHERE q.state = <one> <rest>",
// and `tail` (ORDER BY and LIMIT) after each, in parentheses.
std::string branches(const area& a, std::string_view select, const state_filter& f,
                     const std::string& rest, const std::string& tail = {}) {
  auto [live, finished] = branch_states(f);
  // One branch per state: a live state has a partial index of its own (which a query over
  // both could not use), and a finished one a range of the history index (state, enqueued_at,
  // message_id), which is in publication order. Each branch of a page is planned on its own
  // (its ORDER BY and LIMIT inside): only there does the planner know that the state is one
  // value, and read that range in order for a page in publication order.
  std::vector<std::string> parts;
  for (const auto* states : {&live, &finished})
    for (auto st : *states)
      parts.push_back(
        fmt::format("SELECT {} FROM {{{{t:queue}}}} q WHERE q.state = '{}'{}", select, st, rest));
  if (parts.empty()) // e.g. pending messages that finished: none (the conditions stay, so
                     // that every parameter has a place and a type)
    parts.push_back(fmt::format("SELECT {} FROM {{{{t:queue}}}} q WHERE false{}", select, rest));
  std::string out;
  for (const auto& p : parts)
    out += (out.empty() ? "" : " UNION ALL ") + (tail.empty() ? p : "(" + p + tail + ")");
  return render_sql(out, a);
}

std::string millis_of(std::string_view column) {
  return fmt::format("(extract(epoch FROM {}) * 1000)::bigint", column);
}

message_state read_state(const result& res, int r) {
  message_state m;
  m.message_id = std::string(res.text(r, 0));
  m.status = std::string(res.text(r, 1));
  m.state = std::string(res.text(r, 2));
  m.queue = std::string(res.text(r, 3));
  m.task = std::string(res.text(r, 4));
  m.priority = static_cast<std::int32_t>(res.int64(r, 5));
  m.attempts = static_cast<std::int32_t>(res.int64(r, 6));
  if (!res.is_null(r, 7))
    m.progress_json = std::string(res.text(r, 7));
  if (!res.is_null(r, 8))
    m.error_json = std::string(res.text(r, 8));
  m.cancel_requested = res.text(r, 9) == "t";
  m.enqueued_at_ms = res.int64(r, 10);
  if (!res.is_null(r, 11))
    m.started_at_ms = res.int64(r, 11);
  if (!res.is_null(r, 12))
    m.finished_at_ms = res.int64(r, 12);
  if (!res.is_null(r, 13))
    m.args_json = std::string(res.text(r, 13));
  if (!res.is_null(r, 14))
    m.options_json = std::string(res.text(r, 14));
  if (!res.is_null(r, 16))
    m.result_json = std::string(res.text(r, 16));
  return m;
}

// Runs `q` in a read-only transaction in UTC; a bound that is not a time is named.
template <class F>
auto in_utc(connection& conn, const state_filter& f, F&& run) {
  conn.begin("states");
  try {
    conn.exec("SET TRANSACTION READ ONLY", "states");
    conn.exec("SET LOCAL TIME ZONE 'UTC'", "states");
    const std::pair<const char*, const std::optional<std::string>*> bounds[] = {
      {"enqueued_from", &f.enqueued_from},
      {"enqueued_to", &f.enqueued_to},
      {"finished_from", &f.finished_from},
      {"finished_to", &f.finished_to}};
    for (const auto& [name, value] : bounds) {
      if (!*value)
        continue;
      try {
        conn.exec("SAVEPOINT bound", "states");
        conn.exec_params("SELECT $1::timestamptz", {**value}, "states");
        conn.exec("RELEASE SAVEPOINT bound", "states");
      } catch (const error& e) {
        if (e.sqlstate().rfind("22", 0) != 0)
          throw;
        throw error(errc::invalid_argument,
                    fmt::format("{} \"{}\" is not a time PostgreSQL reads: {}", name,
                                (*value)->substr(0, 100), e.what()));
      }
    }
    auto out = run();
    conn.commit("states");
    return out;
  } catch (...) {
    conn.rollback_quietly();
    throw;
  }
}

} // namespace

const std::vector<std::string_view>& state_statuses() {
  static const std::vector<std::string_view> all = {"pending", "started", "success",
                                                    "failure", "skipped", "cancelled"};
  return all;
}

const std::vector<std::string_view>& state_sort_columns() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> out;
    for (const auto& c : sort_columns())
      out.push_back(c.name);
    return out;
  }();
  return names;
}

built_query states_page_query(const area& a, const state_query& q) {
  const auto& col = find_column(q.sort.column);
  builder b;
  std::string rest = shared_conditions(b, q.filter);
  if (q.after) {
    auto c = read_cursor(q.sort, *q.after);
    std::string id = b.param(c.id) + "::uuid";
    std::string_view op = q.sort.descending ? "<" : ">";
    if (!c.value) {
      // Past the rows with a value: among those without one, by id.
      rest += fmt::format(" AND {} IS NULL AND q.message_id {} {}", col.expr, op, id);
    } else {
      std::string value = col.cast.empty() ? timestamp_from_micros(b.param(*c.value))
                                           : b.param(*c.value) + "::" + std::string(col.cast);
      rest += fmt::format(" AND (({}, q.message_id) {} ({}, {}){})", col.expr, op, value, id,
                          col.nullable ? " OR " + col.expr + " IS NULL" : "");
    }
  }
  std::string select = fmt::format(
    "q.message_id::text AS id_text, {} AS status, q.state::text AS state, q.queue_name, "
    "q.task_name, q.priority, q.attempts, q.progress::text AS progress, q.error::text AS error, "
    "q.cancel_requested, {} AS enqueued_ms, {} AS started_ms, {} AS finished_ms, {}, {}, "
    "{} AS sort_key, {} AS sort_text, q.message_id AS id, {} AS result",
    status_sql, millis_of("q.enqueued_at"), millis_of("q.started_at"), millis_of("q.finished_at"),
    q.payload ? "q.args::text AS args" : "NULL::text AS args",
    q.payload ? "q.options::text AS options" : "NULL::text AS options", col.expr, col.as_text,
    // A result past its lifetime reads as none, as get_result reports it (results.md).
    q.result ? "CASE WHEN q.result_expires_at IS NULL OR q.result_expires_at > now() "
               "THEN q.result::text END"
             : "NULL::text");
  std::string_view dir = q.sort.descending ? "DESC" : "ASC";
  std::string nulls = col.nullable ? " NULLS LAST" : "";
  // Each branch gives at most the rows the page can take from it.
  std::int64_t take = q.limit + 1 + (q.after ? 0 : q.offset);
  std::string inner = fmt::format(" ORDER BY {} {}{}, q.message_id {} LIMIT {}", col.expr, dir,
                                  nulls, dir, b.param(std::to_string(take)));
  std::string sql = fmt::format(
    "SELECT s.id_text, s.status, s.state, s.queue_name, s.task_name, s.priority, s.attempts, "
    "s.progress, s.error, s.cancel_requested, s.enqueued_ms, s.started_ms, s.finished_ms, "
    "s.args, s.options, s.sort_text, s.result FROM ({}) s ORDER BY s.sort_key {}{}, s.id {} LIMIT "
    "{}",
    branches(a, select, q.filter, rest, inner), dir, nulls, dir,
    b.param(std::to_string(q.limit + 1)));
  if (q.offset > 0 && !q.after)
    sql += " OFFSET " + b.param(std::to_string(q.offset));
  return {std::move(sql), b.take()};
}

built_query states_count_query(const area& a, const state_filter& f) {
  builder b;
  std::string rest = shared_conditions(b, f);
  return {"SELECT count(*) FROM (" + branches(a, "1", f, rest) + ") s", b.take()};
}

state_page read_states(connection& conn, const area& a, const state_query& q) {
  auto built = states_page_query(a, q);
  return in_utc(conn, q.filter, [&] {
    auto res = conn.exec_params(built.sql, built.values, "states");
    state_page page;
    for (int r = 0; r < res.rows() && r < q.limit; ++r)
      page.items.push_back(read_state(res, r));
    if (res.rows() > q.limit) {
      int last = q.limit - 1;
      std::optional<std::string> value;
      if (!res.is_null(last, 15))
        value = std::string(res.text(last, 15));
      page.next_after = make_cursor(q.sort, value, page.items.back().message_id);
    }
    return page;
  });
}

std::int64_t count_states(connection& conn, const area& a, const state_filter& f) {
  auto built = states_count_query(a, f);
  return in_utc(
    conn, f, [&] { return conn.exec_params(built.sql, built.values, "states_count").int64(0, 0); });
}

std::optional<message_state> state_by_id(connection& conn, const area& a, const std::string& id,
                                         bool payload) {
  state_query q;
  q.filter.message_ids = {id};
  q.limit = 1;
  q.payload = payload;
  q.result = true;
  auto page = read_states(conn, a, q);
  if (page.items.empty())
    return std::nullopt;
  return page.items.front();
}

} // namespace troupe::storage
