#include "publish_plan.hpp"

#include "storage/queries.hpp"
#include "troupe/error.hpp"
#include "troupe/json.hpp"
#include "troupe/limits.hpp"
#include "troupe/log.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <random>

namespace troupe {

void validate_enqueue_input(const std::vector<message>& batch,
                            const std::vector<enqueue_options>& options) {
  if (batch.size() > max_batch_size)
    throw error(errc::invalid_argument,
                fmt::format("batch limit is {} messages, got {}", max_batch_size, batch.size()));
  if (!options.empty() && options.size() != batch.size())
    throw error(errc::invalid_argument,
                fmt::format("options must match messages: {} messages, {} options entries",
                            batch.size(), options.size()));
  for (std::size_t i = 0; i < options.size(); ++i) {
    const auto& o = options[i];
    auto invalid = [&](const std::string& why) {
      return error(errc::invalid_argument,
                   fmt::format("invalid enqueue options for message {}: {}", i, why));
    };
    if (o.delay && (o.delay->count() < 0 || o.delay->count() > limits::max_delay_ms))
      throw invalid(fmt::format("delay must be between 0 and {} ms (ten years), got {} ms",
                                limits::max_delay_ms, o.delay->count()));
    if (o.deduplication_ttl.count() > limits::max_delay_ms)
      throw invalid(fmt::format("deduplication_ttl must be at most {} ms (ten years), got {}",
                                limits::max_delay_ms, o.deduplication_ttl.count()));
    if (o.deduplication_key.empty() && o.deduplication_ttl.count() != 0)
      throw invalid("deduplication_ttl given without a deduplication_key");
    if (!o.deduplication_key.empty() && o.deduplication_ttl.count() <= 0)
      throw invalid(fmt::format("deduplication_ttl must be a positive number of milliseconds "
                                "with a deduplication_key, got {}",
                                o.deduplication_ttl.count()));
  }
}

namespace detail {

std::string message_json(const message& m) {
  return fmt::format(R"({{"id":{},"queue":{},"task":{},"args":{},"options":{},"priority":{},)"
                     R"("delay_ms":{},"timestamp_ms":{}}})",
                     json_quote(m.id), json_quote(m.queue), json_quote(m.task), m.args_json,
                     m.options_json, m.priority, m.delay_ms, m.timestamp_ms);
}

namespace {

std::int64_t fresh_token() {
  thread_local std::mt19937_64 gen{std::random_device{}()};
  return static_cast<std::int64_t>(gen());
}

} // namespace

publish_plan::publish_plan(storage::statement_set_ptr stmts, std::vector<message> batch,
                           std::vector<enqueue_options> options,
                           const std::vector<middleware_ptr>& hooks, bool revive)
    : stmts_(std::move(stmts)), batch_(std::move(batch)), options_(std::move(options)),
      hooks_(hooks), revive_(revive) {
  validate_enqueue_input(batch_, options_);
  auto n = batch_.size();
  publish_.assign(n, true);
  hooked_.assign(n, false);
  same_as_.assign(n, std::nullopt);
  holder_.assign(n, std::nullopt);
  for (std::size_t i = 0; i < options_.size(); ++i) {
    if (options_[i].delay)
      batch_[i].delay_ms = options_[i].delay->count();
    deduplicating_ = deduplicating_ || !options_[i].deduplication_key.empty();
  }
  if (!deduplicating_) {
    run_before_hooks();
    phase_ = batch_.empty() ? phase::done : phase::enqueue;
    return;
  }
  for (auto& m : batch_)
    normalize_message(m);
  // One claim per distinct (queue, key): the first entry that names it.
  std::map<std::pair<std::string, std::string>, std::size_t> first;
  for (std::size_t i = 0; i < n; ++i) {
    const auto& key = options_[i].deduplication_key;
    if (key.empty())
      continue;
    auto [it, fresh] = first.try_emplace({batch_[i].queue, key}, i);
    if (!fresh) {
      same_as_[i] = it->second;
      publish_[i] = false;
      continue;
    }
    claims_.push_back(storage::key_claim{batch_[i].queue, key, batch_[i].id,
                                         message_json(batch_[i]),
                                         options_[i].deduplication_ttl.count()});
    claim_entry_.push_back(i);
  }
  token_ = fresh_token();
  phase_ = phase::claim;
}

void publish_plan::run_before_hooks() {
  for (std::size_t i = 0; i < batch_.size(); ++i) {
    if (!publish_[i] || hooked_[i])
      continue;
    for (const auto& h : hooks_)
      h->before_enqueue(batch_[i]);
    hooked_[i] = true;
    normalize_message(batch_[i]);
  }
}

std::optional<publish_step> publish_plan::next() {
  switch (phase_) {
  case phase::claim:
    return publish_step{&stmts_->get(storage::sql::claim_deduplication_keys),
                        storage::claim_keys_params(claims_, token_)};
  case phase::enqueue: {
    const auto& enqueue = stmts_->get(storage::sql::enqueue_messages);
    if (std::find(publish_.begin(), publish_.end(), false) == publish_.end())
      return publish_step{&enqueue, storage::enqueue_params(stmts_->where(), batch_, revive_)};
    std::vector<message> rows;
    for (std::size_t i = 0; i < batch_.size(); ++i)
      if (publish_[i])
        rows.push_back(batch_[i]);
    return publish_step{&enqueue, storage::enqueue_params(stmts_->where(), rows, revive_)};
  }
  case phase::store:
    return publish_step{&stmts_->get(storage::sql::store_deduplicated_messages),
                        storage::store_keys_params(restored_, token_)};
  case phase::done:
    return std::nullopt;
  }
  return std::nullopt;
}

void publish_plan::accept(const storage::result& res) {
  switch (phase_) {
  case phase::claim: {
    std::map<std::pair<std::string, std::string>, storage::key_claim_result> found;
    for (auto& k : storage::read_key_claims(res))
      found.emplace(std::make_pair(k.queue, k.key), std::move(k));
    for (std::size_t c = 0; c < claims_.size(); ++c) {
      auto i = claim_entry_[c];
      auto it = found.find({claims_[c].queue, claims_[c].key});
      if (it == found.end())
        throw error(errc::bug, fmt::format("deduplication key {} was neither claimed nor found",
                                           claims_[c].key));
      if (it->second.claimed) {
        publish_[i] = true;
      } else {
        publish_[i] = false;
        holder_[i] = std::move(it->second.holder);
      }
    }
    run_before_hooks();
    // Claimed keys whose message a before_enqueue hook changed get the published one stored.
    restored_.clear();
    for (std::size_t c = 0; c < claims_.size(); ++c) {
      auto i = claim_entry_[c];
      if (!publish_[i])
        continue;
      auto now = message_json(batch_[i]);
      if (now != claims_[c].message_json) {
        restored_.push_back(claims_[c]);
        restored_.back().message_id = batch_[i].id;
        restored_.back().message_json = std::move(now);
      }
    }
    bool any = std::find(publish_.begin(), publish_.end(), true) != publish_.end();
    phase_ = any ? phase::enqueue : phase::done;
    return;
  }
  case phase::enqueue:
    phase_ = restored_.empty() ? phase::done : phase::store;
    return;
  case phase::store:
  case phase::done:
    phase_ = phase::done;
    return;
  }
}

const std::vector<message>* publish_plan::bulk_rows() const {
  if (deduplicating_ || phase_ != phase::enqueue || batch_.size() < bulk_threshold)
    return nullptr;
  for (const auto& m : batch_)
    if (m.delay_ms != 0)
      return nullptr; // the eta is the server's clock plus the delay
  return &batch_;
}

void publish_plan::accept_bulk() {
  phase_ = phase::done;
}

void publish_plan::restart(bool revive) {
  revive_ = revive;
  if (deduplicating_) {
    for (std::size_t c = 0; c < claims_.size(); ++c) {
      auto i = claim_entry_[c];
      publish_[i] = true;
      holder_[i].reset();
      claims_[c].message_id = batch_[i].id;
      claims_[c].message_json = message_json(batch_[i]);
    }
    token_ = fresh_token();
    phase_ = phase::claim;
  } else {
    phase_ = batch_.empty() ? phase::done : phase::enqueue;
  }
}

std::vector<message> publish_plan::finish(bool rethrow_hooks) {
  for (std::size_t i = 0; i < batch_.size(); ++i) {
    if (!publish_[i])
      continue;
    for (auto h = hooks_.rbegin(); h != hooks_.rend(); ++h) {
      try {
        (*h)->after_enqueue(batch_[i]);
      } catch (const std::exception& e) {
        if (rethrow_hooks)
          throw;
        log().error("middleware {} failed in after_enqueue message={}: {}", (*h)->name(),
                    batch_[i].id, e.what());
      } catch (...) {
        if (rethrow_hooks)
          throw;
        log().error("middleware {} failed in after_enqueue message={}", (*h)->name(), batch_[i].id);
      }
    }
  }
  std::vector<message> out;
  out.reserve(batch_.size());
  for (std::size_t i = 0; i < batch_.size(); ++i) {
    if (publish_[i])
      out.push_back(batch_[i]);
    else if (holder_[i])
      out.push_back(*holder_[i]);
    else if (same_as_[i]) {
      // A repeat of a key claimed earlier in this batch: the first entry's message, as
      // published or as found.
      auto first = *same_as_[i];
      out.push_back(publish_[first] ? batch_[first] : *holder_[first]);
    }
  }
  return out;
}

void run_on_own_connection(storage::connection& conn, publish_plan& plan) {
  if (!plan.multi_step()) {
    // New ids are the rule: a plain insert first (a binary COPY for a large batch), the upsert
    // only when an id exists.
    bool exists = false;
    if (const auto* rows = plan.bulk_rows()) {
      try {
        storage::copy_new_messages(conn, plan.statements(), *rows);
        plan.accept_bulk();
        return;
      } catch (const error& e) {
        if (e.sqlstate() != "23505")
          throw;
        exists = true;
      }
    }
    // Without keys the plan's one step is enqueue_messages.
    while (auto step = plan.next()) {
      if (!exists) {
        try {
          plan.accept(conn.run(plan.statements().get(storage::sql::insert_messages),
                               storage::insert_params(step->values)));
          continue;
        } catch (const error& e) {
          if (e.sqlstate() != "23505")
            throw;
        }
      }
      plan.accept(conn.run(*step->statement, step->values));
    }
    return;
  }
  conn.begin("publish");
  try {
    while (auto step = plan.next())
      plan.accept(conn.run(*step->statement, step->values));
    conn.commit("publish");
  } catch (...) {
    conn.rollback_quietly();
    throw;
  }
}

void require_transaction(const storage::borrowed_connection& conn, std::string_view what) {
  if (conn.native() == nullptr)
    throw error(errc::invalid_argument, std::string(what) + ": no connection given");
  if (!conn.in_transaction())
    throw error(errc::not_in_transaction,
                std::string(what) + " requires an active transaction on the caller's connection "
                                    "(BEGIN first); nothing was written");
}

storage::statement_set_ptr statements_for(const area& where) {
  thread_local std::string key;
  thread_local storage::statement_set_ptr stmts;
  auto wanted = where.schema + '\0' + where.prefix;
  if (!stmts || key != wanted) {
    validate_area(where);
    stmts = storage::make_statement_set(where);
    key = wanted;
  }
  return stmts;
}

} // namespace detail
} // namespace troupe
