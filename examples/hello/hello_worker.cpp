// A worker binary with your own tasks compiled in: define the tasks, load troupe.ini (and the
// environment and flags), run the node until SIGTERM/SIGINT.
//
//   build/bin/hello-worker --config-file=examples/hello/troupe.ini
#include "hello_tasks.hpp"
#include <troupe/config.hpp>

#include <troupe/error.hpp>
#include <troupe/log.hpp>
#include <troupe/worker_node.hpp>

#include <cstdlib>
#include <iostream>
#include <string_view>

int main(int argc, char** argv) {
  if (argc == 2 && std::string_view(argv[1]) == "--dump-default-config") {
    std::cout << troupe::config::default_config_text();
    return 0;
  }
  try {
    auto settings = troupe::config::load(argc, argv);
    if (settings.help_printed)
      return 0;
    troupe::configure_logging(settings.logging.level, settings.logging.format);
    troupe::task_registry tasks;
    hello::define_tasks(tasks);
    troupe::worker_node node(settings.node, std::move(tasks));
    auto summary = node.run();
    if (summary.abandoned > 0)
      std::_Exit(summary.exit_code); // tasks still run on their threads: no static destructors
    return summary.exit_code;
  } catch (const troupe::error& e) {
    std::cerr << "hello-worker: " << e.what() << "\n";
    return 2;
  }
}
