/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_decode.c - libFuzzer target for the wire-format v2 decoders.
 *
 * Each input is decoded as a request and as a report, then again after its
 * length field and CRC are fixed up, so that mutations reach the body parser.
 * Whatever decodes must re-encode to exactly the same bytes, and report
 * CAPACITY with the size it needs in a buffer one byte too small. Build and
 * run: see agent/codec/README.md.
 */
#include <stdlib.h>
#include <string.h>

#include "etb/wire.h"

#define POOL_SIZE (ETB_MAX_FACTS + ETB_MAX_BACKENDS * ETB_MAX_OPTIONS)

static uint8_t fixed[ETB_MAX_MESSAGE];
static uint8_t encoded[ETB_MAX_MESSAGE];
static etb_option_t pool[POOL_SIZE];
static etb_request_t request;
static etb_report_t report;

static void require(int condition) {
  if (!condition) {
    abort();
  }
}

static void check(const uint8_t* data, size_t size) {
  size_t len = 0, short_len = 0;
  if (etb_decode_request(data, size, &request, pool, POOL_SIZE) == ETB_OK) {
    require(etb_encode_request(&request, encoded, sizeof encoded, &len) == ETB_OK);
    require(len == size && memcmp(encoded, data, size) == 0);
    require(etb_encode_request(&request, encoded, size - 1, &short_len) == ETB_ERR_CAPACITY);
    require(short_len == size);
  }
  if (etb_decode_report(data, size, &report, pool, POOL_SIZE) == ETB_OK) {
    require(etb_encode_report(&report, encoded, sizeof encoded, &len) == ETB_OK);
    require(len == size && memcmp(encoded, data, size) == 0);
    require(etb_encode_report(&report, encoded, size - 1, &short_len) == ETB_ERR_CAPACITY);
    require(short_len == size);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  uint32_t crc;
  check(data, size);
  if (size < ETB_MIN_MESSAGE || size > sizeof fixed) {
    return 0;
  }
  memcpy(fixed, data, size);
  fixed[8] = (uint8_t)size;
  fixed[9] = (uint8_t)(size >> 8);
  fixed[10] = (uint8_t)(size >> 16);
  fixed[11] = (uint8_t)(size >> 24);
  crc = etb_crc32(0u, fixed, size - ETB_CRC_SIZE);
  fixed[size - 4] = (uint8_t)crc;
  fixed[size - 3] = (uint8_t)(crc >> 8);
  fixed[size - 2] = (uint8_t)(crc >> 16);
  fixed[size - 1] = (uint8_t)(crc >> 24);
  check(fixed, size);
  return 0;
}
