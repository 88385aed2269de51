// Compiled by the pipeline_types tests (tests/CMakeLists.txt), never run: as it is, it must
// compile; with one of the macros below, it must not, with the pipeline's own message.
#include "troupe/composition.hpp"

#include <string>

namespace {

troupe::task_ref<int(int, int)> add{"add"};
troupe::task_ref<int(int)> twice{"twice"};
troupe::task_ref<std::string(std::string)> shout{"shout"};
troupe::task_ref<int()> seven{"seven"};

} // namespace

int main() {
  troupe::pipeline fits(troupe::start(add, 1, 2), troupe::then(twice), troupe::then_ignore(seven),
                        troupe::then(twice));
#ifdef TROUPE_MISMATCH_RESULT
  // shout takes a string; add returns an int.
  troupe::pipeline wrong(troupe::start(add, 1, 2), troupe::then(shout));
#endif
#ifdef TROUPE_START_IN_THE_MIDDLE
  // A step after the first must say what it takes from the one before it.
  troupe::pipeline wrong(troupe::start(add, 1, 2), troupe::start(twice, 3));
#endif
  return fits.steps().size() == 4 ? 0 : 1;
}
