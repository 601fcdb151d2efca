/*
 * mcu_agent.h - serves wire-format v1 requests (docs/wire-format.md) with the
 * runtime behind etb_backend_seam.h and probe backends (mcu_probe.h).
 */
#ifndef MCU_AGENT_H
#define MCU_AGENT_H

#include "mcu_link.h"

/* The agent as the link calls it. */
extern const link_agent_t mcu_agent;

#endif /* MCU_AGENT_H */
