/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * etb/wire.h - wire format v2 of the ExecuTorch backend-options harness.
 *
 * Portable C99. Never allocates: decoding fills caller-provided structs whose
 * strings are views into the caller's message buffer (not NUL-terminated), and
 * encoding writes into a caller-provided buffer. Every loop is bounded by the
 * limits below. The format is specified in docs/wire-format.md.
 */
#ifndef ETB_WIRE_H
#define ETB_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ETB_WIRE_VERSION 2u /* every change of an existing message's layout takes the next */
#define ETB_HEADER_SIZE 16u
#define ETB_CRC_SIZE 4u
#define ETB_MIN_MESSAGE 21u
#define ETB_MAX_MESSAGE 1048576u

#define ETB_MAX_KEY 63u          /* bytes, without NUL */
#define ETB_MAX_STRING 255u      /* bytes, without NUL */
#define ETB_MAX_ID 63u           /* backend id, entry name, delegate id */
#define ETB_MAX_TEXT 1024u       /* program path, report message */
#define ETB_MAX_LOAD_BACKENDS 8u /* LoadBackendOptionsMap capacity */
#define ETB_MAX_BACKENDS 16u     /* SET/GET/REGISTER; report entries */
#define ETB_MAX_DELEGATES 8u
#define ETB_MAX_OPTIONS 64u /* per backend or entry */
#define ETB_MAX_FACTS 32u
#define ETB_MAX_MODELS 8u /* load specifications in one LOAD: the request's own + 7 */
/* The most options one valid request carries: every model with 8 backends and 8 method
 * backends of 64 options. A decoder pool this large never answers a valid request CAPACITY. */
#define ETB_MAX_REQUEST_OPTIONS (ETB_MAX_MODELS * 2u * ETB_MAX_LOAD_BACKENDS * ETB_MAX_OPTIONS)

typedef enum {
  ETB_OK = 0,
  ETB_ERR_TRUNCATED = 1,
  ETB_ERR_BAD_MAGIC = 2,
  ETB_ERR_VERSION = 3,
  ETB_ERR_MSG_TYPE = 4,
  ETB_ERR_FLAGS = 5,
  ETB_ERR_LENGTH = 6,
  ETB_ERR_CRC = 7,
  ETB_ERR_TRAILING = 8,
  ETB_ERR_ACTION = 9,
  ETB_ERR_TAG = 10,
  ETB_ERR_BOOL = 11,
  ETB_ERR_INT_RANGE = 12,
  ETB_ERR_KEY_LENGTH = 13,
  ETB_ERR_STRING_LENGTH = 14,
  ETB_ERR_ID_LENGTH = 15,
  ETB_ERR_UTF8 = 16,
  ETB_ERR_NUL = 17,
  ETB_ERR_TOO_MANY_BACKENDS = 18,
  ETB_ERR_TOO_MANY_OPTIONS = 19,
  ETB_ERR_DUPLICATE_KEY = 20,
  ETB_ERR_DUPLICATE_BACKEND = 21,
  ETB_ERR_UNEXPECTED_FIELD = 22,
  ETB_ERR_TOO_MANY_DELEGATES = 23,
  ETB_ERR_TEXT_LENGTH = 24,
  ETB_ERR_OUTCOME = 25,
  ETB_ERR_CAPACITY = 26,
  ETB_ERR_LOAD_PATH = 27,
  ETB_ERR_TOO_MANY_MODELS = 28
} etb_status_t;

typedef enum { ETB_MSG_REQUEST = 1, ETB_MSG_REPORT = 2 } etb_msg_type_t;

typedef enum {
  ETB_ACTION_NONE = 0, /* reports only: the request could not be decoded */
  ETB_ACTION_LOAD = 1,
  ETB_ACTION_EXECUTE = 2,
  ETB_ACTION_SET = 3,
  ETB_ACTION_GET = 4,
  ETB_ACTION_RESET = 5,
  ETB_ACTION_REGISTER = 6,
  ETB_ACTION_HELLO = 7,
  ETB_ACTION_REBOOT = 8, /* a firmware soft reset (docs/serial-protocol.md) */
  /* Program upload (docs/wire-format.md, "Program upload"): actions of version 2 with
     bodies of their own, read by etb_decode_upload; etb_decode_request, the decoder of a
     device without uploads, answers them ACTION. Their reports are ordinary reports. */
  ETB_ACTION_PROGRAM_DATA = 9,
  ETB_ACTION_PROGRAM_END = 10
} etb_action_t;

typedef enum {
  ETB_OUTCOME_OK = 0,
  ETB_OUTCOME_REJECTED = 1,
  ETB_OUTCOME_RUNTIME_ERROR = 2,
  ETB_OUTCOME_UNSUPPORTED = 3
} etb_outcome_t;

typedef enum { ETB_TYPE_BOOL = 1, ETB_TYPE_INT = 2, ETB_TYPE_STRING = 3 } etb_type_t;

/* The runtime entry point a LOAD passes its map through. */
typedef enum {
  ETB_LOAD_PROGRAM = 0,       /* Program::load_method(method, ..., &map) */
  ETB_LOAD_MODULE = 1,        /* Module::load(map), method loaded lazily without a map */
  ETB_LOAD_MODULE_METHOD = 2, /* Module::load(), Module::load_method(method, ..., &map) */
  ETB_LOAD_MODULE_BOTH = 3    /* Module::load(map), load_method(method, ..., &method map) */
} etb_load_path_t;

#define ETB_ENTRY_FLAG_PROBE 0x01u
#define ETB_LOAD_FLAG_KEEP 0x01u       /* load into the program or module already loaded */
#define ETB_LOAD_FLAG_CONCURRENT 0x02u /* load every model in its own thread, started together */

/* A byte string inside a message buffer (or any caller storage). */
typedef struct {
  const uint8_t* ptr;
  uint16_t len;
} etb_str_t;

typedef struct {
  etb_str_t key;
  uint8_t type; /* etb_type_t */
  bool b;       /* ETB_TYPE_BOOL */
  int32_t i;    /* ETB_TYPE_INT */
  etb_str_t s;  /* ETB_TYPE_STRING */
} etb_option_t;

typedef struct {
  etb_str_t id;
  uint8_t option_count;
  const etb_option_t* options;
} etb_backend_t;

typedef struct {
  uint8_t version;
  uint8_t type;
  uint16_t flags;
  uint32_t length;
  uint32_t seq;
} etb_header_t;

/* The fields only a LOAD request carries, after its backends. */
typedef struct {
  uint8_t path;     /* etb_load_path_t */
  uint8_t flags;    /* ETB_LOAD_FLAG_KEEP */
  etb_str_t method; /* 0..63 bytes; empty means "forward" */
  /* ETB_LOAD_MODULE_BOTH: the explicit map of Module::load_method (0 entries: an
   * explicit empty map). Other paths: none. */
  uint8_t method_backend_count;
  etb_backend_t method_backends[ETB_MAX_LOAD_BACKENDS];
} etb_load_t;

/* A further model of a LOAD (model 1, 2, ...): its own program, delegates,
 * map and load fields; its load.flags are always 0. */
typedef struct {
  etb_str_t program;
  uint8_t delegate_count;
  etb_str_t delegates[ETB_MAX_DELEGATES];
  uint8_t backend_count;
  etb_backend_t backends[ETB_MAX_LOAD_BACKENDS];
  etb_load_t load;
} etb_model_t;

typedef struct {
  uint32_t seq;
  uint8_t action; /* etb_action_t */
  etb_str_t program;
  uint8_t delegate_count;
  etb_str_t delegates[ETB_MAX_DELEGATES];
  uint8_t backend_count;
  etb_backend_t backends[ETB_MAX_BACKENDS];
  etb_load_t load; /* ETB_ACTION_LOAD only */
  /* ETB_ACTION_LOAD only: the further models (the request's own fields are model 0). */
  uint8_t model_count; /* 0..ETB_MAX_MODELS-1 */
  etb_model_t models[ETB_MAX_MODELS - 1u];
} etb_request_t;

/* A program upload request: PROGRAM_DATA (offset, chunk) or PROGRAM_END (size, crc). */
typedef struct {
  uint32_t seq;
  uint8_t action;  /* ETB_ACTION_PROGRAM_DATA or ETB_ACTION_PROGRAM_END */
  uint32_t offset; /* PROGRAM_DATA: where the chunk goes in the program */
  etb_str_t chunk; /* PROGRAM_DATA: its bytes, any bytes (no text rules) */
  uint32_t size;   /* PROGRAM_END: the program's size in bytes */
  uint32_t crc;    /* PROGRAM_END: CRC-32/ISO-HDLC of the program's bytes */
} etb_upload_t;

typedef struct {
  etb_str_t name;
  uint32_t status; /* ExecuTorch Error code */
  uint16_t calls;
  uint16_t executes;
  uint8_t flags;
  uint8_t model; /* the LOAD model (0..ETB_MAX_MODELS-1) whose program instance it was in */
  uint8_t option_count;
  const etb_option_t* options;
} etb_entry_t;

typedef struct {
  uint32_t seq;
  uint8_t action;  /* etb_action_t */
  uint8_t outcome; /* etb_outcome_t */
  uint32_t detail;
  etb_str_t message;
  uint8_t fact_count;
  const etb_option_t* facts;
  uint8_t entry_count;
  etb_entry_t entries[ETB_MAX_BACKENDS];
} etb_report_t;

/* CRC-32/ISO-HDLC (zlib). Pass crc = 0 to start; feed the result back to continue. */
uint32_t etb_crc32(uint32_t crc, const uint8_t* data, size_t len);

/* Upper-case name of a status, e.g. "KEY_LENGTH"; "UNKNOWN" for other values. */
const char* etb_status_name(etb_status_t status);

/*
 * Checks the first 16 bytes of a message (decoding steps 1-3 of the spec) and
 * fills *out. max_message is the reader's own limit (<= ETB_MAX_MESSAGE, 0 for
 * ETB_MAX_MESSAGE); expected_type the type it reads (ETB_MSG_REQUEST on a
 * device, ETB_MSG_REPORT on a host; 0 accepts either), checked before the flags.
 * Stream readers call this on the 16 bytes that start each unit (spec, "Stream
 * reading") before reading the rest.
 */
etb_status_t etb_peek_header(const uint8_t* buf, size_t len, size_t max_message, uint8_t expected_type,
                             etb_header_t* out);

/*
 * Decodes one whole request of exactly len bytes. Options of all backends are
 * stored in pool[0..pool_cap); ETB_ERR_CAPACITY if it is too small. Strings in
 * *out point into buf, which must outlive *out.
 */
etb_status_t etb_decode_request(const uint8_t* buf, size_t len, etb_request_t* out, etb_option_t* pool,
                                size_t pool_cap);

/*
 * Decodes one whole program upload request (action 9 or 10; any other action is
 * ETB_ERR_ACTION): the header checks and CRC as etb_decode_request, then the
 * action's body. out->chunk points into buf.
 */
etb_status_t etb_decode_upload(const uint8_t* buf, size_t len, etb_upload_t* out);

/* Decodes one whole report; facts and entry options are stored in pool. */
etb_status_t etb_decode_report(const uint8_t* buf, size_t len, etb_report_t* out, etb_option_t* pool, size_t pool_cap);

/*
 * Encode a request or report into buf[0..cap). On ETB_OK *out_len is the
 * message length. The encoders enforce the same limits as the decoders, so
 * they never produce a message that a decoder refuses.
 */
etb_status_t etb_encode_request(const etb_request_t* req, uint8_t* buf, size_t cap, size_t* out_len);
etb_status_t etb_encode_report(const etb_report_t* rep, uint8_t* buf, size_t cap, size_t* out_len);
etb_status_t etb_encode_upload(const etb_upload_t* up, uint8_t* buf, size_t cap, size_t* out_len);

/* Convenience: a view of a NUL-terminated C string (length clamped to 65535). */
etb_str_t etb_cstr(const char* s);

#ifdef __cplusplus
}
#endif

#endif /* ETB_WIRE_H */
