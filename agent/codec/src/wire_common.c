/* wire_common.c - CRC, status names and the limits shared by decoder and encoder. */
#include "wire_internal.h"

const uint8_t etbi_magic[4] = {0x45u, 0x54u, 0x42u, 0x4Fu};

/* CRC-32/ISO-HDLC, reflected polynomial 0xEDB88320. By default a byte at a time
 * from a 1 KiB table; define ETB_CRC_SMALL for a 64-byte table, a nibble at a time
 * (about half the speed), where flash is tight. */
#ifdef ETB_CRC_SMALL
static const uint32_t crc_nibble[16] = {
  0x00000000u, 0x1DB71064u, 0x3B6E20C8u, 0x26D930ACu,
  0x76DC4190u, 0x6B6B51F4u, 0x4DB26158u, 0x5005713Cu,
  0xEDB88320u, 0xF00F9344u, 0xD6D6A3E8u, 0xCB61B38Cu,
  0x9B64C2B0u, 0x86D3D2D4u, 0xA00AE278u, 0xBDBDF21Cu,
};

uint32_t etb_crc32(uint32_t crc, const uint8_t *data, size_t len) {
  size_t i;
  crc = ~crc;
  for (i = 0; i < len; ++i) {
    crc ^= data[i];
    crc = (crc >> 4) ^ crc_nibble[crc & 0x0Fu];
    crc = (crc >> 4) ^ crc_nibble[crc & 0x0Fu];
  }
  return ~crc;
}
#else
static const uint32_t crc_byte[256] = {
  0x00000000u, 0x77073096u, 0xEE0E612Cu, 0x990951BAu,
  0x076DC419u, 0x706AF48Fu, 0xE963A535u, 0x9E6495A3u,
  0x0EDB8832u, 0x79DCB8A4u, 0xE0D5E91Eu, 0x97D2D988u,
  0x09B64C2Bu, 0x7EB17CBDu, 0xE7B82D07u, 0x90BF1D91u,
  0x1DB71064u, 0x6AB020F2u, 0xF3B97148u, 0x84BE41DEu,
  0x1ADAD47Du, 0x6DDDE4EBu, 0xF4D4B551u, 0x83D385C7u,
  0x136C9856u, 0x646BA8C0u, 0xFD62F97Au, 0x8A65C9ECu,
  0x14015C4Fu, 0x63066CD9u, 0xFA0F3D63u, 0x8D080DF5u,
  0x3B6E20C8u, 0x4C69105Eu, 0xD56041E4u, 0xA2677172u,
  0x3C03E4D1u, 0x4B04D447u, 0xD20D85FDu, 0xA50AB56Bu,
  0x35B5A8FAu, 0x42B2986Cu, 0xDBBBC9D6u, 0xACBCF940u,
  0x32D86CE3u, 0x45DF5C75u, 0xDCD60DCFu, 0xABD13D59u,
  0x26D930ACu, 0x51DE003Au, 0xC8D75180u, 0xBFD06116u,
  0x21B4F4B5u, 0x56B3C423u, 0xCFBA9599u, 0xB8BDA50Fu,
  0x2802B89Eu, 0x5F058808u, 0xC60CD9B2u, 0xB10BE924u,
  0x2F6F7C87u, 0x58684C11u, 0xC1611DABu, 0xB6662D3Du,
  0x76DC4190u, 0x01DB7106u, 0x98D220BCu, 0xEFD5102Au,
  0x71B18589u, 0x06B6B51Fu, 0x9FBFE4A5u, 0xE8B8D433u,
  0x7807C9A2u, 0x0F00F934u, 0x9609A88Eu, 0xE10E9818u,
  0x7F6A0DBBu, 0x086D3D2Du, 0x91646C97u, 0xE6635C01u,
  0x6B6B51F4u, 0x1C6C6162u, 0x856530D8u, 0xF262004Eu,
  0x6C0695EDu, 0x1B01A57Bu, 0x8208F4C1u, 0xF50FC457u,
  0x65B0D9C6u, 0x12B7E950u, 0x8BBEB8EAu, 0xFCB9887Cu,
  0x62DD1DDFu, 0x15DA2D49u, 0x8CD37CF3u, 0xFBD44C65u,
  0x4DB26158u, 0x3AB551CEu, 0xA3BC0074u, 0xD4BB30E2u,
  0x4ADFA541u, 0x3DD895D7u, 0xA4D1C46Du, 0xD3D6F4FBu,
  0x4369E96Au, 0x346ED9FCu, 0xAD678846u, 0xDA60B8D0u,
  0x44042D73u, 0x33031DE5u, 0xAA0A4C5Fu, 0xDD0D7CC9u,
  0x5005713Cu, 0x270241AAu, 0xBE0B1010u, 0xC90C2086u,
  0x5768B525u, 0x206F85B3u, 0xB966D409u, 0xCE61E49Fu,
  0x5EDEF90Eu, 0x29D9C998u, 0xB0D09822u, 0xC7D7A8B4u,
  0x59B33D17u, 0x2EB40D81u, 0xB7BD5C3Bu, 0xC0BA6CADu,
  0xEDB88320u, 0x9ABFB3B6u, 0x03B6E20Cu, 0x74B1D29Au,
  0xEAD54739u, 0x9DD277AFu, 0x04DB2615u, 0x73DC1683u,
  0xE3630B12u, 0x94643B84u, 0x0D6D6A3Eu, 0x7A6A5AA8u,
  0xE40ECF0Bu, 0x9309FF9Du, 0x0A00AE27u, 0x7D079EB1u,
  0xF00F9344u, 0x8708A3D2u, 0x1E01F268u, 0x6906C2FEu,
  0xF762575Du, 0x806567CBu, 0x196C3671u, 0x6E6B06E7u,
  0xFED41B76u, 0x89D32BE0u, 0x10DA7A5Au, 0x67DD4ACCu,
  0xF9B9DF6Fu, 0x8EBEEFF9u, 0x17B7BE43u, 0x60B08ED5u,
  0xD6D6A3E8u, 0xA1D1937Eu, 0x38D8C2C4u, 0x4FDFF252u,
  0xD1BB67F1u, 0xA6BC5767u, 0x3FB506DDu, 0x48B2364Bu,
  0xD80D2BDAu, 0xAF0A1B4Cu, 0x36034AF6u, 0x41047A60u,
  0xDF60EFC3u, 0xA867DF55u, 0x316E8EEFu, 0x4669BE79u,
  0xCB61B38Cu, 0xBC66831Au, 0x256FD2A0u, 0x5268E236u,
  0xCC0C7795u, 0xBB0B4703u, 0x220216B9u, 0x5505262Fu,
  0xC5BA3BBEu, 0xB2BD0B28u, 0x2BB45A92u, 0x5CB36A04u,
  0xC2D7FFA7u, 0xB5D0CF31u, 0x2CD99E8Bu, 0x5BDEAE1Du,
  0x9B64C2B0u, 0xEC63F226u, 0x756AA39Cu, 0x026D930Au,
  0x9C0906A9u, 0xEB0E363Fu, 0x72076785u, 0x05005713u,
  0x95BF4A82u, 0xE2B87A14u, 0x7BB12BAEu, 0x0CB61B38u,
  0x92D28E9Bu, 0xE5D5BE0Du, 0x7CDCEFB7u, 0x0BDBDF21u,
  0x86D3D2D4u, 0xF1D4E242u, 0x68DDB3F8u, 0x1FDA836Eu,
  0x81BE16CDu, 0xF6B9265Bu, 0x6FB077E1u, 0x18B74777u,
  0x88085AE6u, 0xFF0F6A70u, 0x66063BCAu, 0x11010B5Cu,
  0x8F659EFFu, 0xF862AE69u, 0x616BFFD3u, 0x166CCF45u,
  0xA00AE278u, 0xD70DD2EEu, 0x4E048354u, 0x3903B3C2u,
  0xA7672661u, 0xD06016F7u, 0x4969474Du, 0x3E6E77DBu,
  0xAED16A4Au, 0xD9D65ADCu, 0x40DF0B66u, 0x37D83BF0u,
  0xA9BCAE53u, 0xDEBB9EC5u, 0x47B2CF7Fu, 0x30B5FFE9u,
  0xBDBDF21Cu, 0xCABAC28Au, 0x53B39330u, 0x24B4A3A6u,
  0xBAD03605u, 0xCDD70693u, 0x54DE5729u, 0x23D967BFu,
  0xB3667A2Eu, 0xC4614AB8u, 0x5D681B02u, 0x2A6F2B94u,
  0xB40BBE37u, 0xC30C8EA1u, 0x5A05DF1Bu, 0x2D02EF8Du,
};

uint32_t etb_crc32(uint32_t crc, const uint8_t *data, size_t len) {
  size_t i;
  crc = ~crc;
  for (i = 0; i < len; ++i) {
    crc = (crc >> 8) ^ crc_byte[(crc ^ data[i]) & 0xFFu];
  }
  return ~crc;
}
#endif

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
