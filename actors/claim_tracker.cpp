#include "actors/claim_tracker.hpp"

#include <algorithm>
#include <utility>

namespace troupe::actors {

using namespace std::chrono;

namespace {

// A backoff after one more failure: 100 ms, doubling up to 5 s.
milliseconds grown(milliseconds backoff) {
  return std::min(milliseconds{5000}, backoff.count() == 0 ? milliseconds{100} : backoff * 2);
}

} // namespace

claim_tracker::claim_tracker(bool recover_first)
    : phase_(recover_first ? phase::must_recover : phase::idle) {}

std::int32_t claim_tracker::rows_to_claim(std::int32_t free, std::int32_t capacity,
                                          bool ready_waiting) const {
  if (phase_ != phase::idle || !maybe_more_ || free <= 0)
    return 0;
  if (free < std::max(1, capacity / 2) && ready_waiting)
    return 0;
  return free;
}

std::uint64_t claim_tracker::begin(std::int32_t rows) {
  phase_ = phase::claiming;
  rows_ = rows;
  asked_ = rows;
  early_ = 0;
  woken_ = false;
  return ++claims_;
}

bool claim_tracker::locked(std::uint64_t claim, std::size_t count) {
  if (!in_flight() || claim != claims_)
    return false;
  phase_ = phase::locked;
  rows_ = 0;
  early_ = count;
  return true;
}

claim_tracker::claim_end claim_tracker::succeeded(std::size_t in_reply) {
  claim_end end;
  end.got = early_ + in_reply;
  end.more = end.got == static_cast<std::size_t>(asked_) || woken_;
  maybe_more_ = end.more; // whatever set it during the claim also set woken_
  phase_ = phase::idle;
  rows_ = 0;
  early_ = 0;
  woken_ = false;
  backoff_ = milliseconds{0};
  return end;
}

std::size_t claim_tracker::failed(failure why) {
  bool was_locked = phase_ == phase::locked;
  phase_ = phase::must_recover;
  rows_ = 0;
  early_ = 0;
  woken_ = false; // the recovery ends with a claim anyway
  grow_backoff();
  if (was_locked && why == failure::unknown)
    uncertain_ = claims_; // its held outcomes wait for the recovery
  if (!was_locked || why != failure::rolled_back)
    return 0;
  rolled_back_.insert(claims_);
  auto dropped = held_.size();
  unsettled_ = std::max<std::int32_t>(0, unsettled_ - static_cast<std::int32_t>(dropped));
  held_.clear();
  return dropped;
}

std::vector<storage::outcome> claim_tracker::take_held() {
  if (uncertain_)
    return {};
  return std::exchange(held_, {});
}

std::vector<std::pair<std::string, std::int32_t>> claim_tracker::held_attempts() const {
  std::vector<std::pair<std::string, std::int32_t>> out;
  for (const auto& o : held_)
    out.emplace_back(o.id, o.attempt);
  return out;
}

std::vector<storage::outcome>
claim_tracker::resolve_uncertain(const std::vector<std::string>& committed,
                                 const std::vector<std::string>& running) {
  std::set<std::string> done(committed.begin(), committed.end());
  std::set<std::string> finished; // held: settled here, never void
  std::vector<storage::outcome> send;
  for (auto& o : held_) {
    finished.insert(o.id);
    if (done.contains(o.id))
      send.push_back(std::move(o));
    else
      unsettled_ = std::max<std::int32_t>(0, unsettled_ - 1);
  }
  held_.clear();
  for (const auto& id : running)
    if (!done.contains(id) && !finished.contains(id))
      void_.emplace(*uncertain_, id);
  uncertain_.reset();
  return send;
}

bool claim_tracker::take_void(std::uint64_t claim, const std::string& id) {
  return void_.erase({claim, id}) > 0;
}

void claim_tracker::forget_rolled_back(const std::function<bool(std::uint64_t)>& still_held) {
  std::erase_if(rolled_back_, [&](std::uint64_t claim) { return !still_held(claim); });
}

void claim_tracker::something_changed() {
  maybe_more_ = true;
  ++generation_;
  if (in_flight())
    woken_ = true;
}

void claim_tracker::eta_known(std::int64_t generation) {
  eta_known_for_ = std::max(eta_known_for_, generation);
}

bool claim_tracker::should_probe() const noexcept {
  return !probing_ && !maybe_more_ && eta_known_for_ < generation_;
}

std::int64_t claim_tracker::begin_probe() {
  probing_ = true;
  return generation_;
}

void claim_tracker::probe_failed(steady_clock::time_point now) noexcept {
  probe_backoff_ = grown(probe_backoff_);
  probe_resume_at_ = now + probe_backoff_;
}

milliseconds claim_tracker::probe_held_off_for(steady_clock::time_point now) const {
  if (now >= probe_resume_at_)
    return milliseconds{0};
  return ceil<milliseconds>(probe_resume_at_ - now);
}

void claim_tracker::begin_recovery() {
  phase_ = phase::recovering;
  completed_.clear();
}

void claim_tracker::settled_during_recovery(const std::string& id) {
  if (phase_ == phase::recovering)
    completed_.push_back(id);
}

void claim_tracker::recovery_done() {
  phase_ = phase::idle;
  completed_.clear();
}

void claim_tracker::recovery_failed() {
  phase_ = phase::must_recover;
  completed_.clear();
  grow_backoff();
}

milliseconds claim_tracker::held_off_for(steady_clock::time_point now) const noexcept {
  if (now >= resume_at_)
    return milliseconds{0};
  return ceil<milliseconds>(resume_at_ - now);
}

void claim_tracker::grow_backoff() noexcept {
  backoff_ = grown(backoff_);
}

void claim_tracker::outcome_sent(bool retry) {
  ++sent_;
  if (retry)
    retries_.push_back(sent_);
}

bool claim_tracker::outcomes_settled(std::int64_t count) {
  unsettled_ = std::max<std::int32_t>(0, unsettled_ - static_cast<std::int32_t>(count));
  settled_ += count;
  bool retry_written = false;
  while (!retries_.empty() && retries_.front() <= settled_) {
    retries_.pop_front();
    retry_written = true;
  }
  return retry_written;
}

} // namespace troupe::actors
