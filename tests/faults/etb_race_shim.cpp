// A deliberately racy LD_PRELOAD shim: a data race a race detector must report.
//
// In every Program::load_method (etb_load_method_hook.h), before the real runtime's, it
// starts a thread that bumps a plain counter while the calling thread bumps it too, then
// joins it: two unsynchronised writes to one int, on every LOAD and only there.
// tests/system/test_race_detector.py preloads it into the host agent under each race
// detector (built with -fsanitize=thread for tsan, plainly for helgrind and
// drd) and checks that the tests that LOAD fail with the detector's report while
// the others pass, and that without the shim nothing is reported.
#include "etb_load_method_hook.h"

#include <thread>

namespace {

int loads_seen = 0;  // written by two threads at once: the race

__attribute__((noinline)) void bump_loads_seen() { loads_seen = loads_seen + 1; }

}  // namespace

void etb_on_load_method(const char* /*method_name*/) {
  std::thread other(bump_loads_seen);
  bump_loads_seen();
  other.join();
}
