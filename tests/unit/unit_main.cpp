// The one translation unit that holds CAF's test engine and main() for the unit suites.
#define CAF_SUITE unit
#include <caf/test/unit_test_impl.hpp>
