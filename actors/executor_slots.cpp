#include "actors/executor_slots.hpp"

#include <algorithm>
#include <tuple>

namespace troupe::actors {

// ---------------------------------------------------------------- ready_queue

bool ready_queue::before(const storage::claimed_message& a, const storage::claimed_message& b) {
  // Ids are canonical UUID text of one spelling: their text order is their order.
  return std::tie(a.priority, a.eta_ms, a.id) < std::tie(b.priority, b.eta_ms, b.id);
}

storage::claimed_message ready_queue::pop() {
  auto node = by_start_.extract(by_start_.begin());
  return std::move(node.value());
}

void ready_queue::drop_claim(std::uint64_t claim) {
  std::erase_if(by_start_, [&](const storage::claimed_message& m) { return m.claim == claim; });
}

std::vector<storage::claimed_message> ready_queue::take_claim(std::uint64_t claim) {
  std::vector<storage::claimed_message> out;
  for (auto i = by_start_.begin(); i != by_start_.end();) {
    if (i->claim == claim) {
      out.push_back(*i);
      i = by_start_.erase(i);
    } else {
      ++i;
    }
  }
  return out;
}

std::vector<storage::claimed_message> ready_queue::take_all() {
  std::vector<storage::claimed_message> out;
  out.reserve(by_start_.size());
  while (!by_start_.empty())
    out.push_back(pop());
  return out;
}

std::optional<storage::claimed_message> ready_queue::take(const std::string& id) {
  for (auto i = by_start_.begin(); i != by_start_.end(); ++i)
    if (i->id == id) {
      auto m = *i;
      by_start_.erase(i);
      return m;
    }
  return std::nullopt;
}

void ready_queue::ids(std::vector<std::string>& out) const {
  for (const auto& m : by_start_)
    out.push_back(m.id);
}

// ---------------------------------------------------------------- executor_slots

executor_slots::executor_slots(std::size_t count, make_executor make)
    : slots_(count), make_(std::move(make)) {
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    auto& s = slots_[i];
    s.gate = std::make_shared<std::atomic<std::uint64_t>>(0);
    s.runner = make_(s.gate, i, s.serial);
  }
}

executor_slots::~executor_slots() {
  for (auto& s : slots_)
    if (s.runner)
      s.runner->abandon();
}

std::int32_t executor_slots::queued() const noexcept {
  std::size_t n = 0;
  for (const auto& s : slots_)
    n += s.queued.size();
  return static_cast<std::int32_t>(n);
}

// Gives `m` the slot's next ticket and puts it in the slot's outbox; returns the ticket.
std::uint64_t executor_slots::put_in_outbox(slot& s, const storage::claimed_message& m) {
  ++s.last_ticket;
  if (s.outbox.empty())
    s.outbox_first = s.last_ticket;
  s.outbox.push_back(m);
  return s.last_ticket;
}

void executor_slots::start_running(slot& s, storage::claimed_message m, std::uint64_t ticket) {
  s.running = std::move(m);
  s.running_ticket = ticket;
  ++running_;
}

void executor_slots::flush() {
  for (auto& s : slots_) {
    if (s.outbox.empty())
      continue;
    s.runner->run(std::move(s.outbox), s.outbox_first);
    s.outbox.clear();
  }
}

void executor_slots::take_back(std::size_t i, ready_queue& ready) {
  auto& s = slots_[i];
  // Every ticket up to the gate's old value was started; none sent can match the new one.
  auto started = s.gate->exchange(++s.last_ticket);
  s.outbox.clear(); // not sent yet: what it holds is in the slot, and comes back below
  // Tickets grow from the running message to the back of the queue, so what was not started
  // is a tail.
  while (!s.queued.empty() && s.queued.back().ticket > started) {
    ready.push(std::move(s.queued.back().message));
    s.queued.pop_back();
  }
  if (s.running && s.running_ticket > started) {
    ready.push(std::move(*s.running));
    s.running.reset();
    --running_;
  }
}

void executor_slots::take_back_all(ready_queue& ready) {
  for (std::size_t i = 0; i < slots_.size(); ++i)
    take_back(i, ready);
}

storage::claimed_message executor_slots::finish_running(std::size_t i) {
  auto& s = slots_[i];
  auto m = std::move(*s.running);
  s.running.reset();
  --running_;
  return m;
}

bool executor_slots::promote(std::size_t i) {
  auto& s = slots_[i];
  if (s.running || s.queued.empty())
    return static_cast<bool>(s.running);
  auto next = std::move(s.queued.front());
  s.queued.pop_front();
  start_running(s, std::move(next.message), next.ticket);
  return true;
}

void executor_slots::fill_idle(ready_queue& ready, std::vector<std::size_t>& started) {
  for (std::size_t i = 0; i < slots_.size() && !ready.empty(); ++i) {
    auto& s = slots_[i];
    if (s.running)
      continue;
    auto m = ready.pop();
    auto ticket = put_in_outbox(s, m);
    start_running(s, std::move(m), ticket);
    started.push_back(i);
  }
}

std::vector<std::size_t> executor_slots::assign(ready_queue& ready, bool pipelining) {
  std::vector<std::size_t> started;
  // A message queued behind a busy executor that a ready one should start before comes back,
  // so that what starts next is always the first in start order that any executor holds.
  if (!ready.empty()) {
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      auto& s = slots_[i];
      if (!s.queued.empty() && s.queued.back().ticket > s.gate->load() &&
          ready_queue::before(ready.front(), s.queued.back().message))
        take_back(i, ready);
    }
  }
  fill_idle(ready, started);
  for (std::size_t depth = 1; pipelining && depth <= pipeline_depth && !ready.empty(); ++depth) {
    for (std::size_t i = 0; i < slots_.size() && !ready.empty(); ++i) {
      auto& s = slots_[i];
      if (!s.running || s.queued.size() >= depth)
        continue;
      auto m = ready.pop();
      auto ticket = put_in_outbox(s, m);
      s.queued.push_back({std::move(m), ticket});
    }
  }
  // An executor left idle with nothing ready takes over what is queued behind another's
  // running task (which may be a long one). What it does not take waits in `ready` for the
  // next dispatch.
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    if (!ready.empty() || !pipelining || running_ == static_cast<std::int32_t>(slots_.size()))
      break;
    auto& busy = slots_[i];
    if (busy.queued.empty() || busy.queued.back().ticket <= busy.gate->load())
      continue; // nothing queued, or all of it already started
    take_back(i, ready);
    fill_idle(ready, started);
  }
  return started;
}

std::unique_ptr<executor> executor_slots::replace(std::size_t i) {
  auto& s = slots_[i];
  auto old = std::move(s.runner);
  old->abandon();
  s.gate = std::make_shared<std::atomic<std::uint64_t>>(0);
  s.last_ticket = 0;
  ++s.serial;
  s.runner = make_(s.gate, i, s.serial);
  return old;
}

void executor_slots::ids(std::vector<std::string>& out) const {
  for (const auto& s : slots_) {
    if (s.running)
      out.push_back(s.running->id);
    for (const auto& q : s.queued)
      out.push_back(q.message.id);
  }
}

bool executor_slots::holds_claim(std::uint64_t claim) const {
  for (const auto& s : slots_) {
    if (s.running && s.running->claim == claim)
      return true;
    for (const auto& q : s.queued)
      if (q.message.claim == claim)
        return true;
  }
  return false;
}

} // namespace troupe::actors

namespace troupe::actors {

std::vector<storage::claimed_message> executor_slots::of_claim(std::uint64_t claim) const {
  std::vector<storage::claimed_message> out;
  for (const auto& s : slots_) {
    if (s.running && s.running->claim == claim)
      out.push_back(*s.running);
    for (const auto& q : s.queued)
      if (q.message.claim == claim)
        out.push_back(q.message);
  }
  return out;
}

} // namespace troupe::actors
