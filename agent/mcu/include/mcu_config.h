/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mcu_config.h - sizes and versions of the MCU agent firmware.
 *
 * The link numbers are announced to the host in the HELLO frame
 * (docs/serial-protocol.md); the host adapts to them, so changing one here needs
 * no change on the host.
 */
#ifndef MCU_CONFIG_H
#define MCU_CONFIG_H

#define MCU_FIRMWARE_VERSION "0.1.0"
#ifndef MCU_BUILD_ID
#define MCU_BUILD_ID "dev"
#endif

/* Link layer (docs/serial-protocol.md). */
#define MCU_LINK_VERSION 1u
#define MCU_RX_RING_SIZE 1024u /* UART receive ring, bytes; a power of two */
#define MCU_FRAME_PAYLOAD 128u /* DATA payload bytes per frame */
#define MCU_FRAME_OVERHEAD 7u  /* kind, seq, flags, CRC-32 */
#define MCU_MAX_FRAME (MCU_FRAME_PAYLOAD + MCU_FRAME_OVERHEAD)
/* COBS adds one byte per 254 and the delimiter one more. */
#define MCU_MAX_ENCODED_FRAME (MCU_MAX_FRAME + (MCU_MAX_FRAME + 253u) / 254u + 1u)
/*
 * DATA frames the host may have unacknowledged. After a NAK the host resends up
 * to a window while up to a window of older frames may still wait in the ring,
 * so the ring holds twice the window plus room for control frames.
 */
#define MCU_RX_WINDOW 3u
#define MCU_TX_WINDOW 4u        /* report frames the device sends before an ACK */
#define MCU_CONTROL_RESERVE 64u /* ACK/NAK/HELLO_REQUEST frames from the host */

/* Messages (docs/wire-format.md). */
#define MCU_MAX_MESSAGE 4096u   /* largest request accepted, announced as max_message */
#define MCU_REPORT_BUFFER 6144u /* largest report sent */
/* Options: as many as the board's RAM holds (mcu_capacity.h), announced in HELLO. */

#if (2u * MCU_RX_WINDOW * MCU_MAX_ENCODED_FRAME + MCU_CONTROL_RESERVE) > MCU_RX_RING_SIZE
#error "the receive ring cannot hold two windows of frames"
#endif
#if (MCU_RX_RING_SIZE & (MCU_RX_RING_SIZE - 1u)) != 0u
#error "MCU_RX_RING_SIZE must be a power of two"
#endif

#endif /* MCU_CONFIG_H */
