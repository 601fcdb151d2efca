# SPDX-License-Identifier: BSD-3-Clause
# runtime.mk - the ExecuTorch runtime core compiled from a source tree (included by
# the Makefile when EXECUTORCH_SOURCE is set).
#
# The tree is used as upstream lays it out: <tree>/runtime, <tree>/schema,
# <tree>/extension/data_loader, <tree>/third-party/flatbuffers/include (the
# submodule ExecuTorch pins), <tree>/version.txt. Its schema headers are generated
# with FLATC (the wheel's own flatc, the version the pinned flatbuffers headers
# want) into $(BUILD)/gen; $(BUILD)/root/executorch is a link to the tree so that
# `#include <executorch/...>` finds it. Nothing is written into the tree.
#
# EXECUTORCH_COMMIT names the tree's commit (the harness reads it from the tree's
# git metadata or its vendoring note); it goes into HELLO's runtime fact.

ifeq ($(FLATC),)
$(error FLATC is not set: the flatc of the ExecuTorch wheel generates the schema headers \
(python -c 'from harness.runtime.wheel_sdk import ensure_sdk, host_abi; print(ensure_sdk(host_abi()).flatc)'))
endif
ET_TREE := $(abspath $(EXECUTORCH_SOURCE))
ifeq ($(wildcard $(ET_TREE)/runtime/executor/program.cpp),)
$(error EXECUTORCH_SOURCE=$(EXECUTORCH_SOURCE) is not an ExecuTorch source tree \
(no runtime/executor/program.cpp))
endif
ifeq ($(wildcard $(ET_TREE)/third-party/flatbuffers/include/flatbuffers/flatbuffers.h),)
$(error $(ET_TREE)/third-party/flatbuffers/include is missing: \
run git submodule update --init third-party/flatbuffers in the tree)
endif
EXECUTORCH_COMMIT ?= unknown
# Kernel slots of the operator registry: the probe programs call none (upstream's selective
# build sets the same MAX_KERNEL_NUM for the kernels it links).
MCU_MAX_KERNELS ?= 8
ET_VERSION_TEXT := $(strip $(file <$(ET_TREE)/version.txt))

ET_ROOT := $(BUILD)/root
ET_GEN := $(BUILD)/gen
RUNTIME_GENERATED := $(ET_GEN)/executorch/schema/program_generated.h \
	$(ET_GEN)/executorch/schema/scalar_type_generated.h $(ET_ROOT)/executorch

RUNTIME_INCLUDES := -isystem $(ET_ROOT) -isystem $(ET_GEN) \
	-isystem $(ET_ROOT)/executorch/third-party/flatbuffers/include \
	-isystem $(ET_ROOT)/executorch/runtime/core/portable_type/c10
RUNTIME_DEFINES := -DMCU_RUNTIME_FROM_SOURCE=1 \
	-DMCU_EXECUTORCH_VERSION='"$(ET_VERSION_TEXT)"' \
	-DMCU_EXECUTORCH_COMMIT='"$(EXECUTORCH_COMMIT)"'

# The runtime core: what a bare-metal ExecuTorch build links for a program of delegate calls.
RUNTIME_FILES := \
	runtime/executor/program.cpp runtime/executor/method.cpp runtime/executor/method_meta.cpp \
	runtime/executor/tensor_parser_portable.cpp runtime/executor/tensor_parser_exec_aten.cpp \
	runtime/executor/pte_data_map.cpp runtime/executor/program_validation.cpp \
	runtime/backend/interface.cpp \
	runtime/core/evalue.cpp runtime/core/tensor_layout.cpp runtime/core/tag.cpp \
	runtime/core/portable_type/tensor_impl.cpp \
	runtime/core/exec_aten/util/tensor_util_portable.cpp \
	runtime/platform/abort.cpp runtime/platform/log.cpp runtime/platform/platform.cpp \
	runtime/platform/runtime.cpp \
	runtime/kernel/operator_registry.cpp schema/extended_header.cpp
# sections.ld finds them by this directory's name (the runtime's share of flash and RAM).
RUNTIME_OBJECTS := $(patsubst %.cpp,$(BUILD)/executorch-runtime/%.o,$(RUNTIME_FILES))

# The stand-in is replaced by the runtime; src/real/ holds what only this mode needs.
EXCLUDED_SOURCES := $(HERE)src/standin_registry.cpp $(HERE)src/standin_method.cpp
EXTRA_SOURCES := $(wildcard $(HERE)src/real/*.cpp)

# The debug information names the tree's files /executorch/<path in the tree>, wherever the
# tree is (gdb: set substitute-path /executorch <tree>). Both spellings: the object cache
# hands the compiler the link's path relative to $(BUILD).
RUNTIME_DEBUG_PATHS := -fdebug-prefix-map=$(ET_ROOT)/=/ -fdebug-prefix-map=root/=/
# ExecuTorch's code is compiled as upstream writes it (its warnings are not ours).
RUNTIME_CXXFLAGS = $(ARCH_FLAGS) -Os -g1 -DNDEBUG -Wno-psabi -ffunction-sections -fdata-sections -std=c++17 \
	-fno-exceptions -fno-rtti -fno-threadsafe-statics -fno-use-cxa-atexit \
	-DC10_USING_CUSTOM_GENERATED_MACROS -DMAX_KERNEL_NUM=$(MCU_MAX_KERNELS) $(RUNTIME_INCLUDES) \
	$(RUNTIME_DEBUG_PATHS)

.SECONDARY: $(RUNTIME_GENERATED)

$(ET_ROOT)/executorch:
	mkdir -p $(ET_ROOT)
	ln -sfn $(ET_TREE) $@

$(ET_GEN)/executorch/schema/%_generated.h: $(ET_TREE)/schema/%.fbs
	mkdir -p $(dir $@)
	$(FLATC) --cpp --scoped-enums -o $(dir $@) $<

# The tree's files are compiled through that link: every path the compiler sees is under
# $(BUILD), which the object cache hashes relative to it, so a build of the same files from a
# tree elsewhere (a copy with one file changed, another checkout) takes their objects from
# the cache, and the image is the same.
$(BUILD)/executorch-runtime/%.o: $(ET_TREE)/%.cpp $(RUNTIME_GENERATED)
	@mkdir -p $(dir $@)
	$(CXX) $(RUNTIME_CXXFLAGS) -c $(ET_ROOT)/executorch/$*.cpp -o $@
