/* wire_common.c - CRC, status names and the limits shared by decoder and encoder. */
#include "wire_internal.h"

const uint8_t etbi_magic[4] = {0x45u, 0x54u, 0x42u, 0x4Fu};

/* CRC-32/ISO-HDLC, reflected polynomial 0xEDB88320, one nibble at a time. */
static const uint32_t crc_nibble[16] = {
    0x00000000u, 0x1DB71064u, 0x3B6E20C8u, 0x26D930ACu,
    0x76DC4190u, 0x6B6B51F4u, 0x4DB26158u, 0x5005713Cu,
    0xEDB88320u, 0xF00F9344u, 0xD6D6A3E8u, 0xCB61B38Cu,
    0x9B64C2B0u, 0x86D3D2D4u, 0xA00AE278u, 0xBDBDF21Cu};

uint32_t etb_crc32(uint32_t crc, const uint8_t *data, size_t len) {
  size_t i;
  crc = ~crc;
  for (i = 0; i < len; i++) {
    crc ^= data[i];
    crc = (crc >> 4) ^ crc_nibble[crc & 0x0Fu];
    crc = (crc >> 4) ^ crc_nibble[crc & 0x0Fu];
  }
  return ~crc;
}

static const char *const status_names[] = {
    "OK",         "TRUNCATED",         "BAD_MAGIC",         "VERSION",
    "MSG_TYPE",   "FLAGS",             "LENGTH",            "CRC",
    "TRAILING",   "ACTION",            "TAG",               "BOOL",
    "INT_RANGE",  "KEY_LENGTH",        "STRING_LENGTH",     "ID_LENGTH",
    "UTF8",       "NUL",               "TOO_MANY_BACKENDS", "TOO_MANY_OPTIONS",
    "DUPLICATE_KEY", "DUPLICATE_BACKEND", "UNEXPECTED_FIELD", "TOO_MANY_DELEGATES",
    "TEXT_LENGTH", "OUTCOME",          "CAPACITY"};

const char *etb_status_name(etb_status_t status) {
  unsigned index = (unsigned)status;
  if (index >= sizeof status_names / sizeof status_names[0]) {
    return "UNKNOWN";
  }
  return status_names[index];
}

etb_str_t etb_cstr(const char *s) {
  etb_str_t out = {NULL, 0};
  if (s != NULL) {
    while (out.len < UINT16_MAX && s[out.len] != '\0') {
      out.len++;
    }
    out.ptr = (const uint8_t *)s;
  }
  return out;
}

/* Strict UTF-8 (RFC 3629, Unicode table 3-7): no overlong forms, no surrogates, <= U+10FFFF. */
static bool utf8_valid(const uint8_t *p, size_t n) {
  size_t i = 0;
  while (i < n) {
    uint8_t c = p[i];
    uint8_t lo = 0x80u, hi = 0xBFu;
    size_t more, k;
    if (c < 0x80u) {
      i++;
      continue;
    }
    if (c >= 0xC2u && c <= 0xDFu) {
      more = 1;
    } else if (c >= 0xE0u && c <= 0xEFu) {
      more = 2;
      if (c == 0xE0u) lo = 0xA0u; /* overlong */
      if (c == 0xEDu) hi = 0x9Fu; /* surrogates */
    } else if (c >= 0xF0u && c <= 0xF4u) {
      more = 3;
      if (c == 0xF0u) lo = 0x90u; /* overlong */
      if (c == 0xF4u) hi = 0x8Fu; /* above U+10FFFF */
    } else {
      return false;
    }
    if (n - i - 1u < more) {
      return false;
    }
    for (k = 1; k <= more; k++) {
      if (p[i + k] < lo || p[i + k] > hi) {
        return false;
      }
      lo = 0x80u;
      hi = 0xBFu;
    }
    i += more + 1u;
  }
  return true;
}

etb_status_t etbi_check_str(etb_str_t s, uint16_t min, uint16_t max,
                            etb_status_t length_error) {
  uint16_t i;
  if (s.len < min || s.len > max) {
    return length_error;
  }
  for (i = 0; i < s.len; i++) {
    if (s.ptr[i] == 0u) {
      return ETB_ERR_NUL;
    }
  }
  return utf8_valid(s.ptr, s.len) ? ETB_OK : ETB_ERR_UTF8;
}

bool etbi_str_equal(etb_str_t a, etb_str_t b) {
  uint16_t i;
  if (a.len != b.len) {
    return false;
  }
  for (i = 0; i < a.len; i++) {
    if (a.ptr[i] != b.ptr[i]) {
      return false;
    }
  }
  return true;
}

etb_status_t etbi_check_count(uint8_t count, uint8_t max, etb_status_t over_error) {
  if (max == 0u && count != 0u) {
    return ETB_ERR_UNEXPECTED_FIELD;
  }
  return count > max ? over_error : ETB_OK;
}

uint8_t etbi_max_delegates(uint8_t action) {
  return action == ETB_ACTION_LOAD ? (uint8_t)ETB_MAX_DELEGATES : 0u;
}

uint8_t etbi_max_backends(uint8_t action) {
  switch (action) {
    case ETB_ACTION_LOAD:
      return (uint8_t)ETB_MAX_LOAD_BACKENDS;
    case ETB_ACTION_SET:
    case ETB_ACTION_GET:
    case ETB_ACTION_REGISTER:
      return (uint8_t)ETB_MAX_BACKENDS;
    default:
      return 0u;
  }
}

uint8_t etbi_max_options(uint8_t action) {
  return action == ETB_ACTION_REGISTER ? 0u : (uint8_t)ETB_MAX_OPTIONS;
}

etb_status_t etbi_check_program(uint8_t action, etb_str_t program) {
  if (action != ETB_ACTION_LOAD) {
    return program.len != 0u ? ETB_ERR_UNEXPECTED_FIELD : ETB_OK;
  }
  return etbi_check_str(program, 0u, (uint16_t)ETB_MAX_TEXT, ETB_ERR_TEXT_LENGTH);
}
