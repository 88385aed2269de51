#include "troupe/task.hpp"

#include "troupe/area.hpp"
#include "troupe/error.hpp"

#include <algorithm>

namespace troupe {

void task_registry::add(task_entry entry) {
  if (entry.name.empty())
    throw error(errc::invalid_argument, "a task needs a name");
  validate_queue_name(entry.queue);
  for (const auto& q : entry.options.also_queues)
    validate_queue_name(q);
  if (by_name_.contains(entry.name))
    throw error(errc::invalid_argument, "task \"" + entry.name + "\" is already defined");
  auto name = entry.name;
  by_name_.emplace(std::move(name), std::make_shared<task_entry>(std::move(entry)));
}

void task_registry::use(middleware_ptr m) {
  if (!m)
    throw error(errc::invalid_argument, "task_registry::use: no middleware given");
  middleware_.push_back(std::move(m));
}

void task_registry::set_middleware(std::vector<middleware_ptr> stack) {
  middleware_ = std::move(stack);
}

const task_entry* task_registry::find(std::string_view name) const {
  auto i = by_name_.find(std::string(name));
  return i == by_name_.end() ? nullptr : i->second.get();
}

std::vector<std::string> task_registry::queues() const {
  std::vector<std::string> out;
  for (const auto& [name, entry] : by_name_) {
    out.push_back(entry->queue);
    out.insert(out.end(), entry->options.also_queues.begin(), entry->options.also_queues.end());
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<std::string> task_registry::names_on(std::string_view queue) const {
  std::vector<std::string> out;
  for (const auto& [name, entry] : by_name_) {
    const auto& also = entry->options.also_queues;
    if (entry->queue == queue || std::find(also.begin(), also.end(), queue) != also.end())
      out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> task_registry::names() const {
  std::vector<std::string> out;
  out.reserve(by_name_.size());
  for (const auto& entry : by_name_)
    out.push_back(entry.first);
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace troupe
