// Publishes hello messages from plain C++ (no actor system, no worker node).
//
//   build/bin/hello-producer "host=/tmp dbname=app" 100 [SCHEMA]
#include "hello_tasks.hpp"

#include <troupe/client.hpp>
#include <troupe/error.hpp>

#include <iostream>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: hello-producer DSN [COUNT [SCHEMA]]\n";
    return 2;
  }
  int count = argc > 2 ? std::atoi(argv[2]) : 10;
  try {
    troupe::area where;
    if (argc > 3)
      where.schema = argv[3];
    troupe::client client({argv[1], where});
    for (int i = 0; i < count; ++i) {
      auto m = client.enqueue(hello::greet("visitor " + std::to_string(i)));
      std::cout << "published " << m.id << "\n";
    }
    // Delayed and prioritized: runs no sooner than 2 s from now, before priority-0 work.
    client.enqueue(hello::fibonacci(25).with_delay(std::chrono::seconds(2)).with_priority(-1));
    return 0;
  } catch (const troupe::error& e) {
    std::cerr << "hello-producer: " << e.what() << "\n";
    return 1;
  }
}
