#include "hello_tasks.hpp"

#include <numeric>

namespace hello {

namespace {

std::int64_t fib(int n) {
  return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

} // namespace

void define_tasks(troupe::task_registry& tasks) {
  troupe::task_options keep;
  keep.store_results = true; // greetings can be read back with get_result
  tasks.define(
    greet, [](const std::string& name) { return "hello, " + name; }, keep);
  tasks.define(fibonacci, [](int n) { return fib(n); });
  tasks.define(sum, [](const std::vector<std::int64_t>& xs) {
    return std::accumulate(xs.begin(), xs.end(), std::int64_t{0});
  });
}

} // namespace hello
