/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mcu_link.h - device side of the framed serial protocol (docs/serial-protocol.md).
 *
 * Frames are COBS-encoded and end with 0x00. A decoded frame is
 *   kind (u8), seq (u8), flags (u8), payload, CRC-32 of the preceding bytes (u32 LE).
 * Wire-format messages travel as DATA frames (go-back-N, acknowledged per
 * frame); a complete request goes to the agent and its report comes back the
 * same way. The last request and its report are cached so that a resent
 * request (same seq, length and CRC field, and the same CRC-32 of the bytes
 * before that field) is answered from the cache instead of being executed twice.
 */
#ifndef MCU_LINK_H
#define MCU_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "etb/wire.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LINK_KIND_DATA 1u
#define LINK_KIND_ACK 2u
#define LINK_KIND_NAK 3u
#define LINK_KIND_HELLO 4u
#define LINK_KIND_HELLO_REQUEST 5u
#define LINK_KIND_EXIT 6u

#define LINK_FLAG_START 0x01u /* DATA: first frame of a message */
#define LINK_FLAG_END 0x02u   /* DATA: last frame of a message */

#define LINK_CAP_EXIT 0x100u /* HELLO capabilities: bit n serves action n; this bit EXIT */

/* The agent behind the link: turns a request into a report. */
typedef struct {
  /* Handles one whole message; writes its report to report[0..cap) and returns its size. */
  size_t (*handle)(const uint8_t* message, size_t len, uint8_t* report, size_t cap);
  /* A REJECTED report for a message the link could not take (it was too long). */
  size_t (*reject)(uint32_t seq, etb_status_t error, uint8_t* report, size_t cap);
  uint32_t capabilities; /* bit n set: serves action n */
} link_agent_t;

typedef struct {
  uint32_t frames_bad;  /* not COBS, bad CRC, bad size or unknown kind */
  uint32_t duplicates;  /* DATA frames received again (their ACK was lost) */
  uint32_t replays;     /* resent requests answered from the cache */
  uint32_t rx_overruns; /* bytes the UART ring had to drop */
} link_stats_t;

/* Starts the link and sends the boot HELLO (session 0). */
void link_init(const link_agent_t* agent);

/* Handles the bytes received so far and sends what the window allows. */
void link_poll(void);

/* True when link_poll has work without new input; otherwise the caller may sleep. */
bool link_has_work(void);

/* True when the last report was acknowledged whole (or none was sent). */
bool link_report_acknowledged(void);

link_stats_t link_stats(void);

#ifdef __cplusplus
}
#endif

#endif /* MCU_LINK_H */
