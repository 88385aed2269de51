#include "storage/queries.hpp"

#include "storage/array_columns.hpp"
#include "storage/coordination.hpp"
#include "storage/migrations.hpp"
#include "storage/naming.hpp"
#include "storage/operations.hpp"
#include "troupe/area.hpp"
#include "troupe/error.hpp"
#include "troupe/message.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <unordered_set>

namespace troupe::storage {

const char* to_sql(outcome_state s) noexcept {
  switch (s) {
  case outcome_state::done:
    return "done";
  case outcome_state::failed:
    return "failed";
  case outcome_state::retry:
    return "queued";
  case outcome_state::cancelled:
    return "cancelled";
  }
  return "failed";
}

using detail::column;
using detail::nullable_column;

std::int64_t vacuum_queue(connection& conn, const statement_set& stmts, std::int64_t min_dead) {
  auto counts = conn.run(stmts.get(sql::queue_dead_rows), {});
  if (counts.rows() == 0)
    return -1;
  if (counts.text(0, 2) != "t")
    return vacuum_not_allowed;
  auto dead = counts.int64(0, 0);
  auto live = counts.int64(0, 1);
  if (dead < min_dead + live / 50)
    return -1;
  // VACUUM cannot be prepared: its text comes from the statement set, run as it is. Around it
  // the session's statement_timeout is 30 s, and then what it was.
  auto before = std::string(conn.run(stmts.get(sql::vacuum_timeout), {}).text(0, 0));
  try {
    conn.exec(stmts.get(sql::vacuum_queue).text, "vacuum_queue");
  } catch (...) {
    try {
      if (conn.ok())
        conn.run(stmts.get(sql::vacuum_timeout_reset), {before});
    } catch (const error&) {
      // The vacuum's own error is the one to report.
    }
    throw;
  }
  conn.run(stmts.get(sql::vacuum_timeout_reset), {before});
  return dead;
}

namespace {

// The claimed message in row `r` of a claim's result, its ten columns from `col` on (id, task,
// args, options, attempt, priority, enqueue time and eta in ms, confirm_start, previous_lost).
claimed_message read_claimed(const result& res, int r, int col) {
  claimed_message m;
  m.id = res.text(r, col);
  m.task = res.text(r, col + 1);
  m.args_json = res.text(r, col + 2);
  m.options_json = res.text(r, col + 3);
  m.attempt = static_cast<std::int32_t>(res.int64(r, col + 4));
  m.priority = static_cast<std::int32_t>(res.int64(r, col + 5));
  m.enqueued_at_ms = res.int64(r, col + 6);
  m.eta_ms = res.int64(r, col + 7);
  m.confirm_start = res.text(r, col + 8) == "t";
  m.previous_lost = res.text(r, col + 9) == "t";
  return m;
}

} // namespace

std::int64_t next_eta(connection& conn, const statement_set& stmts, const std::string& queue) {
  auto eta = conn.run(stmts.get(sql::next_eta), {queue});
  if (eta.rows() > 0 && !eta.is_null(0, 0))
    return std::max<std::int64_t>(0, eta.int64(0, 0));
  return -1;
}

claim_result claim_batch(connection& conn, const statement_set& stmts, const std::string& queue,
                         std::int32_t node_id, std::int32_t limit, std::int32_t eta_below) {
  claim_result out;
  if (limit <= 0) {
    // Only the eta: a consumer that claimed everything ready asks it apart from its claim, so
    // the claim's reply (every message's start) does not wait for it.
    if (eta_below > 0)
      out.next_eta_ms = next_eta(conn, stmts, queue);
    return out;
  }
  auto res =
    conn.run(stmts.get(sql::claim_batch), {queue, std::to_string(node_id), std::to_string(limit)});
  out.messages.reserve(res.rows());
  for (int r = 0; r < res.rows(); ++r)
    out.messages.push_back(read_claimed(res, r, 0));
  // Asking after every short claim cost a third of a millisecond on each claim's reply; the
  // consumer asks only when the claim would leave an executor idle (see actors/consumer.cpp).
  if (res.rows() < eta_below)
    out.next_eta_ms = next_eta(conn, stmts, queue);
  return out;
}

claim_result claim_batch_early(connection& conn, const statement_set& stmts,
                               const std::string& queue, std::int32_t node_id, std::int32_t limit,
                               std::int32_t eta_below, std::int32_t starting,
                               const std::function<void(std::vector<claimed_message>)>& locked) {
  if (limit <= 0)
    return claim_batch(conn, stmts, queue, node_id, 0, eta_below);
  claim_result out;
  int claimed = 0;
  try {
    // BEGIN and the lock in one round trip, as the mark and the COMMIT below.
    // From migration 5 on, the pause gate comes first: its lock is taken before the claim's
    // snapshot, so the claim sees every pause that committed before it (operations.hpp).
    auto gate = stmts.version() >= 5 ? claim_pause_gate_sql(stmts.where(), queue) : std::string{};
    // From migration 7 on, the messages under limits come first (claim_limited_lock), in the
    // same transaction and round trip; claim_lock takes the others for the rest.
    std::vector<result> parts;
    if (stmts.version() >= coordination_version) {
      auto [limited, free] = conn.run_two_between(
        stmts.get(sql::claim_limited_lock),
        {queue, std::to_string(node_id), std::to_string(std::clamp(starting, 0, limit))},
        stmts.get(sql::claim_lock), {queue, std::to_string(limit)}, {"BEGIN", gate}, {});
      parts.push_back(std::move(limited));
      parts.push_back(std::move(free));
    } else {
      parts.push_back(conn.run_between(stmts.get(sql::claim_lock), {queue, std::to_string(limit)},
                                       {"BEGIN", gate}, {}));
    }
    for (const auto& part : parts)
      claimed += part.rows();
    if (claimed > 0) {
      std::vector<std::string> addresses;
      addresses.reserve(static_cast<std::size_t>(claimed));
      std::vector<claimed_message> messages;
      messages.reserve(static_cast<std::size_t>(claimed));
      for (const auto& part : parts)
        for (int r = 0; r < part.rows(); ++r) {
          addresses.emplace_back(part.text(r, 0));
          messages.push_back(read_claimed(part, r, 1));
        }
      if (parts.size() > 1 && parts[0].rows() > 0 && parts[1].rows() > 0) {
        // The consumer starts what it holds by priority, then eta, then id: so must the starts
        // written below (the first `starting`), whichever statement locked each row.
        std::vector<std::size_t> order(messages.size());
        for (std::size_t i = 0; i < order.size(); ++i)
          order[i] = i;
        std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
          return std::tie(messages[a].priority, messages[a].eta_ms, messages[a].id) <
                 std::tie(messages[b].priority, messages[b].eta_ms, messages[b].id);
        });
        std::vector<std::string> sorted_addresses;
        std::vector<claimed_message> sorted_messages;
        for (auto i : order) {
          sorted_addresses.push_back(std::move(addresses[i]));
          sorted_messages.push_back(std::move(messages[i]));
        }
        addresses = std::move(sorted_addresses);
        messages = std::move(sorted_messages);
      }
      locked(std::move(messages));
      // The first ones go to idle executors at once: their start is written with the claim.
      std::vector<std::string> started(addresses.begin(),
                                       addresses.begin() + std::clamp(starting, 0, claimed));
      auto marked =
        conn
          .run_between(stmts.get(sql::claim_mark),
                       {array_literal(addresses), std::to_string(node_id), array_literal(started)},
                       {}, "COMMIT")
          .affected();
      // Locked rows cannot change under the lock; anything else is a bug, and the messages
      // already handed out must not pass for claimed.
      if (marked != claimed)
        throw error(errc::bug, fmt::format("claim_mark marked {} of the {} rows claim_lock locked",
                                           marked, claimed));
    } else {
      conn.commit("claim_lock");
    }
  } catch (...) {
    conn.rollback_quietly(); // the claim's error is the one to report
    throw;
  }
  if (claimed < eta_below)
    out.next_eta_ms = next_eta(conn, stmts, queue);
  return out;
}

std::int64_t complete_batch(connection& conn, const statement_set& stmts, std::int32_t node_id,
                            const std::vector<outcome>& outcomes) {
  if (outcomes.empty())
    return 0;
  params p{
    std::to_string(node_id),
    column(outcomes, [](const outcome& o) { return o.id; }),
    column(outcomes, [](const outcome& o) { return std::to_string(o.attempt); }),
    column(outcomes, [](const outcome& o) { return std::string(to_sql(o.state)); }),
    nullable_column(outcomes, [](const outcome& o) { return o.result_json; }),
    nullable_column(outcomes, [](const outcome& o) { return o.error_json; }),
    column(outcomes, [](const outcome& o) { return std::to_string(o.retry_delay_ms); }),
    results_channel(stmts.where()),
    column(outcomes, [](const outcome& o) { return std::to_string(o.ran_ms); }),
  };
  // One version for the parameters and the statement: the listener may switch it meanwhile.
  auto version = stmts.version();
  if (version >= 5) { // the progress and result expiry columns
    p.push_back(nullable_column(outcomes, [](const outcome& o) { return o.progress_json; }));
    p.push_back(column(outcomes, [](const outcome& o) { return std::to_string(o.result_ttl_ms); }));
  }
  bool any_follow_ups = std::any_of(outcomes.begin(), outcomes.end(),
                                    [](const outcome& o) { return !o.follow_ups.empty(); });
  if (!any_follow_ups)
    return conn.run(stmts.get(sql::complete_batch, version), p).rows();
  // Follow-ups (callbacks) are published in the same transaction as the outcomes they follow,
  // and only for outcomes that were written.
  conn.begin("complete_batch");
  try {
    auto res = conn.run(stmts.get(sql::complete_batch, version), p);
    std::unordered_set<std::string> written;
    for (int r = 0; r < res.rows(); ++r)
      written.emplace(res.text(r, 0));
    std::vector<message> follow;
    for (const auto& o : outcomes)
      if (written.contains(o.id))
        follow.insert(follow.end(), o.follow_ups.begin(), o.follow_ups.end());
    enqueue_messages(conn, stmts, follow);
    conn.commit("complete_batch");
    return res.rows();
  } catch (...) {
    conn.rollback_quietly();
    throw;
  }
}

std::int64_t release_claimed(connection& conn, const statement_set& stmts, std::int32_t node_id,
                             const std::vector<claimed_message>& messages) {
  if (messages.empty())
    return 0;
  params p{
    std::to_string(node_id),
    column(messages, [](const claimed_message& m) { return m.id; }),
    column(messages, [](const claimed_message& m) { return std::to_string(m.attempt); }),
    wake_channel(stmts.where()),
    results_channel(stmts.where()),
  };
  return conn.run(stmts.get(sql::release_claimed), p).int64(0, 0);
}

recovery_result recover_unheld(connection& conn, const statement_set& stmts, std::int32_t node_id,
                               const std::string& queue, const std::vector<std::string>& held_ids,
                               const std::vector<claimed_message>& started) {
  recovery_result out;
  if (!started.empty()) {
    // A statement of its own, before the hand-back: its row locks wait for the claim's
    // transaction if it is still ending, and the hand-back's snapshot, taken after, sees it.
    std::vector<std::string> ids;
    std::vector<std::string> attempts;
    for (const auto& m : started) {
      ids.push_back(m.id);
      attempts.push_back(std::to_string(m.attempt));
    }
    auto res = conn.run(stmts.get(sql::committed_claims),
                        {std::to_string(node_id), array_literal(ids), array_literal(attempts)});
    for (int r = 0; r < res.rows(); ++r)
      out.committed.emplace_back(res.text(r, 0));
  }
  out.handed_back =
    conn
      .run(stmts.get(sql::recover_unheld),
           {std::to_string(node_id), queue, array_literal(held_ids), wake_channel(stmts.where())})
      .int64(0, 0);
  return out;
}

std::vector<finished_message> read_results(connection& conn, const statement_set& stmts,
                                           const std::vector<std::string>& ids) {
  std::vector<finished_message> out;
  if (ids.empty())
    return out;
  auto res = conn.run(stmts.get(sql::read_results), {array_literal(ids)});
  for (int r = 0; r < res.rows(); ++r)
    out.push_back(finished_message{std::string(res.text(r, 0)), std::string(res.text(r, 1)),
                                   res.is_null(r, 2) ? std::string() : std::string(res.text(r, 2)),
                                   res.is_null(r, 3) ? std::string() : std::string(res.text(r, 3)),
                                   res.text(r, 4) == "t"});
  return out;
}

bool message_exists(connection& conn, const statement_set& stmts, const std::string& id) {
  return conn.run(stmts.get(sql::message_exists), {id}).int64(0, 0) > 0;
}

} // namespace troupe::storage
