/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mcu_options.h - between the wire and the runtime's option type.
 *
 * The codec (etb/wire.h) yields options as views into the request buffer; the
 * firmware turns each one into an executorch::runtime::BackendOption (key into
 * char[64], value into the variant: bool, int or std::array<char, 256>), and
 * reports what it read back as views into those BackendOptions. Wire keys,
 * ids and strings never hold NUL (the codec refuses one), so the runtime's
 * strcmp-based lookups see exactly the bytes that were sent.
 */
#ifndef MCU_OPTIONS_H
#define MCU_OPTIONS_H

#include <stddef.h>

#include <executorch/runtime/backend/options.h>

#include "etb/wire.h"

namespace mcu {

using executorch::runtime::BackendOption;

/* Copies a decoded wire option into `out` (key and string NUL-terminated). */
void option_from_wire(const etb_option_t& wire, BackendOption& out);

/* A wire view of `option`; it stays valid while `option` does. */
etb_option_t option_view(const BackendOption& option);

/* Copies an id of at most ETB_MAX_ID bytes into out[ETB_MAX_ID + 1], NUL-terminated. */
void copy_id(etb_str_t id, char (&out)[ETB_MAX_ID + 1u]);

/* A view of a NUL-terminated string held by the firmware. */
etb_str_t text_view(const char* text);

bool same_option(const etb_option_t& a, const etb_option_t& b);

}  // namespace mcu

#endif /* MCU_OPTIONS_H */
