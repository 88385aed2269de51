// Compositions of messages. A pipeline runs its steps one after the other, each step's result
// appended to the next step's arguments (unless that step says pipe_ignore):
//
//   auto p = troupe::pipeline({shop::fetch(order), shop::price(), shop::bill()});
//   p.run(client);
//   int cents = client.get_result<int>(p.last(), true);
//
// The next step is published in the transaction that writes its predecessor's completion, so it
// exists exactly once, whichever node ran the step; a failed step publishes nothing after it.
// docs/composition.md.
#pragma once

#include "troupe/client.hpp"
#include "troupe/message.hpp"
#include "troupe/transactional.hpp"

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace troupe {

/// The most steps a pipeline may have (each step carries the ones after it in its options).
inline constexpr std::size_t max_pipeline_steps = 100;

class pipeline {
public:
  /// The steps, in order, each with its own id, queue, delay and options. Every step gets the
  /// option `composition_id` (the pipeline's id, the first step's id). Throws
  /// troupe::error(invalid_argument) for no step, more than max_pipeline_steps, a step that is
  /// not a valid message, or two steps with one id.
  explicit pipeline(std::vector<message> steps);

  /// The pipeline's id: every step carries it as its `composition_id` option.
  const std::string& id() const noexcept { return id_; }
  /// The steps as built (their ids are the ids of the messages the pipeline publishes).
  const std::vector<message>& steps() const noexcept { return steps_; }
  const message& last() const { return steps_.back(); }
  /// The first step, carrying the others in its options (`pipe_target`): the one message that
  /// publishing the pipeline writes.
  const message& first() const noexcept { return first_; }

  /// Publishes the pipeline (its first step) through `c`; returns the first step as published.
  message run(client& c, const enqueue_options& options = {}) const;
  /// Publishes it inside the caller's transaction on `conn` (enqueue_in_transaction): it
  /// exists only if that transaction commits.
  message run_in_transaction(pg_conn* conn, const area& where,
                             const enqueue_options& options = {}) const;

  /// The last step's result JSON (client::get_result_json of last()).
  std::string get_result_json(client& c, bool block = false,
                              std::chrono::milliseconds timeout = default_result_timeout) const;
  /// Each step's result JSON, in order; blocking waits up to `timeout` for each in turn.
  std::vector<std::string>
  get_results_json(client& c, bool block = false,
                   std::chrono::milliseconds timeout = default_result_timeout) const;
  /// How many steps, from the first, have a result that can be read now (steps whose tasks do
  /// not store results never count).
  std::size_t completed_count(client& c) const;

private:
  std::string id_;
  std::vector<message> steps_;
  message first_;
};

/// `m` with option `pipe_ignore`: as a pipeline step, it does not receive its predecessor's
/// result.
message pipe_ignore(message m);

} // namespace troupe
