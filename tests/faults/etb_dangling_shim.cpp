// A deliberately wrong LD_PRELOAD shim: a read of freed memory, and a branch on a value
// never written, that memcheck must report.
//
// In every Program::load_method (etb_load_method_hook.h), before the real runtime's, it
// copies the method's name into a heap block, frees the block and then reads its first
// byte: a dangling read, on every LOAD and only there. Then it branches on a heap byte
// it never wrote: an uninitialised value where it matters. What the read returns depends on
// the allocator (the block may still hold the name, or the allocator's bookkeeping), and
// the shim only writes it to a volatile sink, so without a memory checker nothing is
// seen. tests/system/test_memcheck.py preloads it into the host agent under memcheck and checks
// that the tests that LOAD fail with memcheck's report (the read, where the block was
// freed) while the others pass.
#include "etb_load_method_hook.h"

#include <cstring>

namespace {

volatile char last_seen = 0;

__attribute__((noinline)) void read_after_free(const char* name) {
  size_t size = std::strlen(name) + 1;
  char* copy = static_cast<char*>(std::malloc(size));
  if (copy == nullptr) {
    return;
  }
  std::memcpy(copy, name, size);
  char* volatile stale = copy;  // the compiler cannot follow it (it would warn)
  std::free(copy);
  last_seen = stale[0];  // the dangling read
}

__attribute__((noinline)) void branch_on_uninitialised() {
  char* fresh = static_cast<char*>(std::malloc(1));
  if (fresh == nullptr) {
    return;
  }
  char* volatile unseen = fresh;  // the compiler cannot follow it (it would warn)
  if (*unseen == 'x') {           // never written: the branch
    last_seen = 'x';
  }
  std::free(fresh);
}

}  // namespace

void etb_on_load_method(const char* method_name) {
  read_after_free(method_name);
  branch_on_uninitialised();
}
