// SPDX-License-Identifier: BSD-3-Clause
// Where the runtime the agent runs came from, as HELLO says it. Its own translation
// unit (runtime_label.cpp, outside the unity build): built from a source tree, only it
// changes from commit to commit when the tree's sources do not.
#pragma once

namespace etb {

// HELLO "runtime" without the "executorch " prefix, e.g. "1.5.1" or
// "1.5.0 from source /src/executorch @ 0c60dd49ec".
const char* runtime_label();
// HELLO "from_source": the parts compiled from a source tree ("" for none).
const char* source_parts();
// HELLO "lacks": what the tree's API lacks, " | " between the lines ("" for nothing).
const char* source_lacks();

}  // namespace etb
