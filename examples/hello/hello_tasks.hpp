// The hello example's tasks, declared once: producers include this to publish, the worker
// includes it to define the implementations. Only names, queues and types live here.
#pragma once

#include <troupe/task.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace hello {

/// Greets someone; returns the greeting.
inline const troupe::task_ref<std::string(std::string)> greet{"hello.greet", "hello"};
/// The n-th Fibonacci number, computed the slow way (a little CPU work).
inline const troupe::task_ref<std::int64_t(int)> fibonacci{"hello.fibonacci", "hello"};
/// Adds up a list.
inline const troupe::task_ref<std::int64_t(std::vector<std::int64_t>)> sum{"hello.sum", "hello"};

/// Registers the implementations of every hello task.
void define_tasks(troupe::task_registry& tasks);

} // namespace hello
