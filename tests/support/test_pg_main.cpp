// troupe-test-pg start|stop DIR: the test run's PostgreSQL cluster, as a CTest fixture.
// With TROUPE_TEST_DSN set, it does nothing: the tests use that database instead.
#include "local_postgres.hpp"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>

int main(int argc, char** argv) {
  if (argc != 3 || (std::strcmp(argv[1], "start") != 0 && std::strcmp(argv[1], "stop") != 0)) {
    std::cerr << "usage: troupe-test-pg start|stop DIR\n";
    return 2;
  }
  if (const char* dsn = std::getenv("TROUPE_TEST_DSN"); dsn && *dsn) {
    std::cout << "using TROUPE_TEST_DSN; no cluster started\n";
    return 0;
  }
  try {
    auto pg = troupe::testkit::local_postgres::start({argv[2], 5432, "-c fsync=off"});
    if (std::strcmp(argv[1], "stop") == 0) {
      pg.stop();
      std::cout << "stopped the test cluster in " << pg.dir() << "\n";
      return 0;
    }
    std::ofstream(pg.dir() + "/dsn") << pg.dsn() << "\n";
    std::cout << "test cluster ready: " << pg.dsn() << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "troupe-test-pg: " << e.what() << "\n";
    return 1;
  }
}
