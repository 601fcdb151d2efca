// SPDX-License-Identifier: BSD-3-Clause
// What the ExecuTorch API the agent is compiled against offers. Built from a source
// tree, harness/runtime/source_tree.py reads it from the tree's headers and writes
// these (0 or 1) into etb_source_facts.h; against the wheel (1.5.x) or an install
// prefix, all are there.
#pragma once

#ifdef ETB_SOURCE_FACTS
#include "etb_source_facts.h"
#endif

#ifndef ETB_HAS_LOAD_TIME_MAP  // Program::load_method(..., const LoadBackendOptionsMap*)
#define ETB_HAS_LOAD_TIME_MAP 1
#endif
#ifndef ETB_HAS_MODULE_LOAD_MAP  // Module::load(map), Module::load_method(..., &map)
#define ETB_HAS_MODULE_LOAD_MAP 1
#endif
#ifndef ETB_HAS_ENTRY_AT  // LoadBackendOptionsMap::entry_at(i)
#define ETB_HAS_ENTRY_AT 1
#endif
#ifndef ETB_HAS_LOAD_METHOD_KERNEL_REGISTRY  // Module::load_method(..., &map, kernel_registry)
#define ETB_HAS_LOAD_METHOD_KERNEL_REGISTRY 0
#endif
