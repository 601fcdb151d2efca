/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mcu_agent.h - serves wire-format v2 requests (docs/wire-format.md) with the
 * ExecuTorch's option types and map, the stand-in registry and dispatch, and
 * probe backends (mcu_probe.h).
 */
#ifndef MCU_AGENT_H
#define MCU_AGENT_H

#include "mcu_link.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Divides the RAM for options (mcu_capacity.h); once at boot, before link_init. */
void agent_init(void);

/* True once a REBOOT was answered: the caller resets the board when the link is idle. */
bool agent_reboot_due(void);

/* The agent as the link calls it. */
extern const link_agent_t mcu_agent;

#ifdef __cplusplus
}
#endif

#endif /* MCU_AGENT_H */
