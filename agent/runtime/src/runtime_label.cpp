// SPDX-License-Identifier: BSD-3-Clause
#include "runtime_label.h"

#ifdef ETB_SOURCE_FACTS
#include "etb_source_label.h"  // written by harness/runtime/source_tree.py
#endif
#ifndef ETB_SOURCE_PARTS
#define ETB_SOURCE_PARTS ""
#endif
#ifndef ETB_SOURCE_LACKS
#define ETB_SOURCE_LACKS ""
#endif

namespace etb {

const char* runtime_label() { return ETB_EXECUTORCH_VERSION; }

const char* source_parts() { return ETB_SOURCE_PARTS; }

const char* source_lacks() { return ETB_SOURCE_LACKS; }

}  // namespace etb
