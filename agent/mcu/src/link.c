/* SPDX-License-Identifier: BSD-3-Clause */
/* link.c - device side of the framed serial protocol (see mcu_link.h). */
#include "mcu_link.h"

#include <string.h>

#include "mcu_cobs.h"
#include "mcu_config.h"
#include "mcu_semihost.h"
#include "mcu_uart.h"

#define FRAME_HEADER 3u
#define HELLO_PAYLOAD_FIXED 20u
#define EXIT_PAYLOAD 4u
#define HELLO_REQUEST_PAYLOAD 4u
#define VERSION_TEXT MCU_FIRMWARE_VERSION "+" MCU_BUILD_ID

/* Receiving frames: encoded bytes up to the next 0x00. */
static uint8_t rx_encoded[MCU_MAX_ENCODED_FRAME];
static size_t rx_encoded_len;
static bool rx_encoded_overflow;
static uint8_t rx_frame[MCU_MAX_FRAME];

/* Reassembling the current request. */
static uint8_t message[MCU_MAX_MESSAGE];
static size_t message_len;
static bool in_message;
static bool message_overflow;
static uint8_t rx_expected;
static bool nak_sent; /* one NAK per gap, so a gap never multiplies retransmissions */

/* Sending the current report, frame by frame. */
static uint8_t report[MCU_REPORT_BUFFER];
static size_t report_len;
static uint8_t tx_seq0;     /* link seq of the report's first frame */
static uint8_t tx_seq_free; /* link seq the next report starts at */
static size_t tx_count;     /* frames of the report */
static size_t tx_base;      /* first frame not acknowledged */
static size_t tx_next;      /* next frame to send */
static bool tx_active;
static uint8_t tx_frame[MCU_MAX_FRAME];
static uint8_t tx_encoded[MCU_MAX_ENCODED_FRAME];

/* The last request answered: a resend of it gets `report` again. A request is told by
 * its seq, its length, its own CRC field and the CRC-32 of the bytes before that field:
 * never by the CRC-32 of the whole message, which is one residue for every valid one. */
static bool cache_valid;
static uint32_t cache_seq;
static size_t cache_len;
static uint32_t cache_crc_field;
static uint32_t cache_crc_computed;
static uint32_t session;

static const link_agent_t* agent;
static link_stats_t stats;

static uint32_t get_u32(const uint8_t* p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static void put_u32(uint8_t* p, uint32_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}

static void put_u16(uint8_t* p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}

static void send_frame(uint8_t kind, uint8_t seq, uint8_t flags, const uint8_t* payload, size_t len) {
  size_t n;
  tx_frame[0] = kind;
  tx_frame[1] = seq;
  tx_frame[2] = flags;
  if (len > 0u) {
    memcpy(&tx_frame[FRAME_HEADER], payload, len);
  }
  put_u32(&tx_frame[FRAME_HEADER + len], etb_crc32(0, tx_frame, FRAME_HEADER + len));
  n = cobs_encode(tx_frame, FRAME_HEADER + len + ETB_CRC_SIZE, tx_encoded);
  tx_encoded[n++] = 0u;
  uart_write(tx_encoded, n);
}

static void send_hello(void) {
  static const char version[] = VERSION_TEXT;
  uint8_t payload[MCU_FRAME_PAYLOAD];
  size_t version_len = sizeof version - 1u;
  if (version_len > sizeof payload - HELLO_PAYLOAD_FIXED - 1u) {
    version_len = sizeof payload - HELLO_PAYLOAD_FIXED - 1u; /* a very long BUILD_ID */
  }
  payload[0] = MCU_LINK_VERSION;
  payload[1] = ETB_WIRE_VERSION;
  put_u16(&payload[2], MCU_RX_RING_SIZE);
  put_u16(&payload[4], MCU_MAX_FRAME);
  payload[6] = MCU_RX_WINDOW;
  payload[7] = MCU_TX_WINDOW;
  put_u32(&payload[8], MCU_MAX_MESSAGE);
  put_u32(&payload[12], session);
  put_u32(&payload[16], agent->capabilities | LINK_CAP_EXIT);
  payload[20] = (uint8_t)version_len;
  memcpy(&payload[21], version, version_len);
  send_frame(LINK_KIND_HELLO, 0, 0, payload, HELLO_PAYLOAD_FIXED + 1u + version_len);
}

static void reset_link(void) {
  rx_expected = 0;
  nak_sent = false;
  in_message = false;
  tx_active = false;
  tx_seq_free = 0;
}

static void start_report(void) {
  tx_seq0 = tx_seq_free;
  tx_count = (report_len + MCU_FRAME_PAYLOAD - 1u) / MCU_FRAME_PAYLOAD;
  tx_base = 0;
  tx_next = 0;
  tx_active = tx_count > 0u;
  tx_seq_free = (uint8_t)(tx_seq0 + tx_count);
}

static void deliver_message(void) {
  uint32_t seq = message_len >= ETB_HEADER_SIZE ? get_u32(&message[12]) : 0u;
  uint32_t crc_field;
  uint32_t crc_computed;
  if (message_overflow) {
    report_len = agent->reject(seq, ETB_ERR_LENGTH, report, sizeof report);
    cache_valid = false;
    start_report();
    return;
  }
  if (message_len < ETB_MIN_MESSAGE) { /* never a request: refused afresh, nothing cached */
    report_len = agent->handle(message, message_len, report, sizeof report);
    cache_valid = false;
    start_report();
    return;
  }
  crc_field = get_u32(&message[message_len - ETB_CRC_SIZE]);
  crc_computed = etb_crc32(0, message, message_len - ETB_CRC_SIZE);
  if (cache_valid && cache_seq == seq && cache_len == message_len && cache_crc_field == crc_field &&
      cache_crc_computed == crc_computed) {
    stats.replays++;
  } else {
    report_len = agent->handle(message, message_len, report, sizeof report);
    cache_valid = true;
    cache_seq = seq;
    cache_len = message_len;
    cache_crc_field = crc_field;
    cache_crc_computed = crc_computed;
  }
  start_report();
}

static void on_data(uint8_t seq, uint8_t flags, const uint8_t* payload, size_t len) {
  uint8_t ahead = (uint8_t)(seq - rx_expected);
  if (ahead != 0u) {
    if (ahead >= 128u) {
      stats.duplicates++;
      send_frame(LINK_KIND_ACK, rx_expected, 0, NULL, 0);
    } else if (!nak_sent) {
      nak_sent = true;
      send_frame(LINK_KIND_NAK, rx_expected, 0, NULL, 0);
    }
    return;
  }
  rx_expected++;
  nak_sent = false;
  if (flags & LINK_FLAG_START) {
    in_message = true;
    message_len = 0;
    message_overflow = false;
  }
  if (in_message) {
    if (len > sizeof message - message_len) {
      message_overflow = true;
    } else {
      memcpy(&message[message_len], payload, len);
      message_len += len;
    }
  }
  send_frame(LINK_KIND_ACK, rx_expected, 0, NULL, 0);
  if ((flags & LINK_FLAG_END) && in_message) {
    in_message = false;
    deliver_message();
  }
}

/* ACK and NAK both acknowledge every frame before `expected`; a NAK also asks to go back. */
static void on_ack(uint8_t expected, bool go_back) {
  uint8_t acked;
  if (!tx_active) {
    return;
  }
  acked = (uint8_t)(expected - (uint8_t)(tx_seq0 + tx_base));
  if (acked > tx_next - tx_base) {
    return; /* stale: acknowledges nothing outstanding */
  }
  tx_base += acked;
  if (go_back) {
    tx_next = tx_base;
  }
  if (tx_base == tx_count) {
    tx_active = false;
  }
}

/* A damaged frame may have been the DATA frame expected next: ask for it at once. */
static void on_bad_frame(void) {
  stats.frames_bad++;
  if (!nak_sent) {
    nak_sent = true;
    send_frame(LINK_KIND_NAK, rx_expected, 0, NULL, 0);
  }
}

static void on_frame(const uint8_t* frame, size_t len) {
  size_t payload_len;
  if (len < FRAME_HEADER + ETB_CRC_SIZE ||
      get_u32(&frame[len - ETB_CRC_SIZE]) != etb_crc32(0, frame, len - ETB_CRC_SIZE)) {
    on_bad_frame();
    return;
  }
  payload_len = len - FRAME_HEADER - ETB_CRC_SIZE;
  switch (frame[0]) {
    case LINK_KIND_DATA:
      on_data(frame[1], frame[2], &frame[FRAME_HEADER], payload_len);
      break;
    case LINK_KIND_ACK:
      on_ack(frame[1], false);
      break;
    case LINK_KIND_NAK:
      on_ack(frame[1], true);
      break;
    case LINK_KIND_HELLO_REQUEST:
      if (payload_len != HELLO_REQUEST_PAYLOAD) {
        stats.frames_bad++;
        break;
      }
      if (get_u32(&frame[FRAME_HEADER]) != session) {
        session = get_u32(&frame[FRAME_HEADER]);
        cache_valid = false;
      }
      reset_link();
      send_hello();
      break;
    case LINK_KIND_EXIT:
      if (payload_len != EXIT_PAYLOAD) {
        stats.frames_bad++;
        break;
      }
      semihost_exit(get_u32(&frame[FRAME_HEADER]));
    default:
      stats.frames_bad++;
      break;
  }
}

static void on_encoded_frame(void) {
  size_t len = 0;
  if (rx_encoded_overflow || !cobs_decode(rx_encoded, rx_encoded_len, rx_frame, sizeof rx_frame, &len)) {
    on_bad_frame();
    return;
  }
  on_frame(rx_frame, len);
}

static void receive(void) {
  uint8_t chunk[64];
  size_t n;
  while ((n = uart_read(chunk, sizeof chunk)) > 0u) {
    size_t i;
    for (i = 0; i < n; i++) {
      if (chunk[i] != 0u) {
        if (rx_encoded_len < sizeof rx_encoded) {
          rx_encoded[rx_encoded_len++] = chunk[i];
        } else {
          rx_encoded_overflow = true;
        }
        continue;
      }
      if (rx_encoded_len > 0u || rx_encoded_overflow) {
        on_encoded_frame();
      }
      rx_encoded_len = 0;
      rx_encoded_overflow = false;
    }
  }
}

static void send_report_frames(void) {
  while (tx_active && tx_next < tx_count && tx_next - tx_base < MCU_TX_WINDOW) {
    size_t offset = tx_next * MCU_FRAME_PAYLOAD;
    size_t len = report_len - offset < MCU_FRAME_PAYLOAD ? report_len - offset : MCU_FRAME_PAYLOAD;
    uint8_t flags = 0;
    if (tx_next == 0u) {
      flags |= LINK_FLAG_START;
    }
    if (tx_next + 1u == tx_count) {
      flags |= LINK_FLAG_END;
    }
    send_frame(LINK_KIND_DATA, (uint8_t)(tx_seq0 + tx_next), flags, &report[offset], len);
    tx_next++;
    /* ACKs that arrived meanwhile may open the window further or ask to go back. */
    receive();
  }
}

void link_init(const link_agent_t* the_agent) {
  static const uint8_t flush = 0u;
  agent = the_agent;
  reset_link();
  uart_write(&flush, 1); /* ends whatever the host may have buffered before boot */
  send_hello();
}

void link_poll(void) {
  receive();
  send_report_frames();
}

bool link_has_work(void) {
  return uart_rx_pending() || (tx_active && tx_next < tx_count && tx_next - tx_base < MCU_TX_WINDOW);
}

bool link_report_acknowledged(void) { return !tx_active; }

link_stats_t link_stats(void) {
  link_stats_t out = stats;
  out.rx_overruns = uart_rx_overruns();
  return out;
}
