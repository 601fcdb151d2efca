/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wire_decode.c - decoding of wire format v2, checks in the order of the
 * "Decoding" section of docs/wire-format.md: the first failure is the error.
 */
#include "wire_internal.h"

/* Reads the body bytes buf[pos..end); end is length - 4. */
typedef struct {
  const uint8_t* buf;
  size_t pos;
  size_t end;
} reader_t;

/* Hands out consecutive runs of the caller's option pool. */
typedef struct {
  etb_option_t* base;
  size_t cap;
  size_t used;
} pool_t;

static uint16_t get_u16(const uint8_t* p) { return (uint16_t)(p[0] | (p[1] << 8)); }

static uint32_t get_u32(const uint8_t* p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static etb_status_t take(reader_t* r, size_t n, const uint8_t** out) {
  if (r->end - r->pos < n) {
    return ETB_ERR_TRUNCATED;
  }
  *out = r->buf + r->pos;
  r->pos += n;
  return ETB_OK;
}

static etb_status_t read_u8(reader_t* r, uint8_t* out) {
  const uint8_t* p;
  ETBI_TRY(take(r, 1, &p));
  *out = p[0];
  return ETB_OK;
}

static etb_status_t read_u16(reader_t* r, uint16_t* out) {
  const uint8_t* p;
  ETBI_TRY(take(r, 2, &p));
  *out = get_u16(p);
  return ETB_OK;
}

static etb_status_t read_u32(reader_t* r, uint32_t* out) {
  const uint8_t* p;
  ETBI_TRY(take(r, 4, &p));
  *out = get_u32(p);
  return ETB_OK;
}

/* An i64 that must fit int32: its high word is the sign extension of the low word. */
static etb_status_t read_int(reader_t* r, int32_t* out) {
  const uint8_t* p;
  uint32_t low, high;
  ETBI_TRY(take(r, 8, &p));
  low = get_u32(p);
  high = get_u32(p + 4);
  if (high != ((low & 0x80000000u) ? 0xFFFFFFFFu : 0u)) {
    return ETB_ERR_INT_RANGE;
  }
  /* Two's complement without implementation-defined conversions. */
  *out = (low & 0x80000000u) ? -(int32_t)(~low) - 1 : (int32_t)low;
  return ETB_OK;
}

/* The length prefix and the bytes; the caller checks the limits. */
static etb_status_t read_str(reader_t* r, etb_str_t* out) {
  uint16_t len;
  ETBI_TRY(read_u16(r, &len));
  ETBI_TRY(take(r, len, &out->ptr));
  out->len = len;
  return ETB_OK;
}

static etb_status_t pool_take(pool_t* pool, uint8_t count, etb_option_t** out) {
  if (pool->cap - pool->used < count) {
    return ETB_ERR_CAPACITY;
  }
  *out = pool->base != NULL ? pool->base + pool->used : NULL;
  pool->used += count;
  return ETB_OK;
}

static etb_status_t read_option(reader_t* r, etb_option_t* opt) {
  uint8_t byte;
  opt->b = false;
  opt->i = 0;
  opt->s.ptr = NULL;
  opt->s.len = 0;
  ETBI_TRY(read_u8(r, &opt->type));
  switch (opt->type) {
    case ETB_TYPE_BOOL:
      ETBI_TRY(read_u8(r, &byte));
      if (byte > 1u) {
        return ETB_ERR_BOOL;
      }
      opt->b = byte == 1u;
      return ETB_OK;
    case ETB_TYPE_INT:
      return read_int(r, &opt->i);
    case ETB_TYPE_STRING:
      ETBI_TRY(read_str(r, &opt->s));
      return etbi_check_str(opt->s, 0u, (uint16_t)ETB_MAX_STRING, ETB_ERR_STRING_LENGTH);
    default:
      return ETB_ERR_TAG;
  }
}

/* count options into a fresh run of the pool; unique_keys for requests. */
static etb_status_t read_options(reader_t* r, pool_t* pool, uint8_t count, bool unique_keys, const etb_option_t** out) {
  etb_option_t* options;
  uint8_t i, j;
  ETBI_TRY(pool_take(pool, count, &options));
  *out = options;
  for (i = 0; i < count; i++) {
    ETBI_TRY(read_str(r, &options[i].key));
    ETBI_TRY(etbi_check_str(options[i].key, 1u, (uint16_t)ETB_MAX_KEY, ETB_ERR_KEY_LENGTH));
    for (j = 0; unique_keys && j < i; j++) {
      if (etbi_str_equal(options[j].key, options[i].key)) {
        return ETB_ERR_DUPLICATE_KEY;
      }
    }
    ETBI_TRY(read_option(r, &options[i]));
  }
  return ETB_OK;
}

static etb_status_t read_id(reader_t* r, etb_str_t* out) {
  ETBI_TRY(read_str(r, out));
  return etbi_check_str(*out, 1u, (uint16_t)ETB_MAX_ID, ETB_ERR_ID_LENGTH);
}

static etb_status_t read_count(reader_t* r, uint8_t max, etb_status_t over_error, uint8_t* out) {
  ETBI_TRY(read_u8(r, out));
  return etbi_check_count(*out, max, over_error);
}

/* Steps 1-3; expected_type 0 accepts both types. Fills *out once 16 bytes exist. */
static etb_status_t check_header(const uint8_t* buf, size_t len, size_t max_message, uint8_t expected_type,
                                 etb_header_t* out) {
  size_t i;
  if (len < ETB_HEADER_SIZE) {
    return ETB_ERR_TRUNCATED;
  }
  out->version = buf[4];
  out->type = buf[ETBI_TYPE_OFFSET];
  out->flags = get_u16(buf + 6);
  out->length = get_u32(buf + ETBI_LENGTH_OFFSET);
  out->seq = get_u32(buf + 12);
  for (i = 0; i < sizeof etbi_magic; i++) {
    if (buf[i] != etbi_magic[i]) {
      return ETB_ERR_BAD_MAGIC;
    }
  }
  if (out->version != ETB_WIRE_VERSION) {
    return ETB_ERR_VERSION;
  }
  if ((out->type != ETB_MSG_REQUEST && out->type != ETB_MSG_REPORT) ||
      (expected_type != 0u && out->type != expected_type)) {
    return ETB_ERR_MSG_TYPE;
  }
  if (out->flags != 0u) {
    return ETB_ERR_FLAGS;
  }
  if (max_message == 0u || max_message > ETB_MAX_MESSAGE) {
    max_message = ETB_MAX_MESSAGE;
  }
  if (out->length < ETB_MIN_MESSAGE || out->length > max_message) {
    return ETB_ERR_LENGTH;
  }
  return ETB_OK;
}

etb_status_t etb_peek_header(const uint8_t* buf, size_t len, size_t max_message, uint8_t expected_type,
                             etb_header_t* out) {
  return check_header(buf, len, max_message, expected_type, out);
}

/* Steps 1-5; on success *r reads the body. */
static etb_status_t open_message(const uint8_t* buf, size_t len, uint8_t type, uint32_t* seq, reader_t* r) {
  etb_header_t h;
  etb_status_t status = check_header(buf, len, 0u, type, &h);
  if (len >= ETB_HEADER_SIZE) {
    *seq = h.seq; /* echoed in the answer even when the message is refused */
  }
  ETBI_TRY(status);
  if (len < h.length) {
    return ETB_ERR_TRUNCATED;
  }
  if (len > h.length) {
    return ETB_ERR_TRAILING;
  }
  if (etb_crc32(0u, buf, len - ETB_CRC_SIZE) != get_u32(buf + len - ETB_CRC_SIZE)) {
    return ETB_ERR_CRC;
  }
  r->buf = buf;
  r->pos = ETB_HEADER_SIZE;
  r->end = len - ETB_CRC_SIZE;
  return ETB_OK;
}

/* count backends (ids unique within the list) and their options. */
static etb_status_t read_backends(reader_t* r, pool_t* pool, uint8_t count, uint8_t max_options,
                                  etb_backend_t* backends) {
  uint8_t i, j;
  for (i = 0; i < count; i++) {
    etb_backend_t* backend = &backends[i];
    ETBI_TRY(read_id(r, &backend->id));
    for (j = 0; j < i; j++) {
      if (etbi_str_equal(backends[j].id, backend->id)) {
        return ETB_ERR_DUPLICATE_BACKEND;
      }
    }
    ETBI_TRY(read_count(r, max_options, ETB_ERR_TOO_MANY_OPTIONS, &backend->option_count));
    ETBI_TRY(read_options(r, pool, backend->option_count, true, &backend->options));
  }
  return ETB_OK;
}

/* allowed_flags: the request's own load fields KEEP|CONCURRENT, a further model none. */
static etb_status_t read_load_fields(reader_t* r, etb_load_t* load, pool_t* pool, uint8_t allowed_flags) {
  ETBI_TRY(read_u8(r, &load->path));
  if (load->path > ETB_LOAD_MODULE_BOTH) {
    return ETB_ERR_LOAD_PATH;
  }
  ETBI_TRY(read_u8(r, &load->flags));
  if ((load->flags & (uint8_t)~allowed_flags) != 0u) {
    return ETB_ERR_FLAGS;
  }
  ETBI_TRY(read_str(r, &load->method));
  ETBI_TRY(etbi_check_str(load->method, 0u, (uint16_t)ETB_MAX_ID, ETB_ERR_ID_LENGTH));
  ETBI_TRY(read_count(r, etbi_max_method_backends(load->path), ETB_ERR_TOO_MANY_BACKENDS, &load->method_backend_count));
  return read_backends(r, pool, load->method_backend_count, (uint8_t)ETB_MAX_OPTIONS, load->method_backends);
}

static etb_status_t read_model(reader_t* r, etb_model_t* model, pool_t* pool) {
  uint8_t i;
  ETBI_TRY(read_str(r, &model->program));
  ETBI_TRY(etbi_check_program(ETB_ACTION_LOAD, model->program));
  ETBI_TRY(read_count(r, etbi_max_delegates(ETB_ACTION_LOAD), ETB_ERR_TOO_MANY_DELEGATES, &model->delegate_count));
  for (i = 0; i < model->delegate_count; i++) {
    ETBI_TRY(read_id(r, &model->delegates[i]));
  }
  ETBI_TRY(read_count(r, etbi_max_backends(ETB_ACTION_LOAD), ETB_ERR_TOO_MANY_BACKENDS, &model->backend_count));
  ETBI_TRY(read_backends(r, pool, model->backend_count, etbi_max_options(ETB_ACTION_LOAD), model->backends));
  model->load.method_backend_count = 0;
  return read_load_fields(r, &model->load, pool, 0u);
}

static etb_status_t read_request_body(reader_t* r, etb_request_t* out, pool_t* pool) {
  uint8_t i;
  ETBI_TRY(read_u8(r, &out->action));
  if (out->action < ETB_ACTION_LOAD || out->action > ETB_ACTION_REBOOT) {
    return ETB_ERR_ACTION;
  }
  ETBI_TRY(read_str(r, &out->program));
  ETBI_TRY(etbi_check_program(out->action, out->program));
  ETBI_TRY(read_count(r, etbi_max_delegates(out->action), ETB_ERR_TOO_MANY_DELEGATES, &out->delegate_count));
  for (i = 0; i < out->delegate_count; i++) {
    ETBI_TRY(read_id(r, &out->delegates[i]));
  }
  ETBI_TRY(read_count(r, etbi_max_backends(out->action), ETB_ERR_TOO_MANY_BACKENDS, &out->backend_count));
  ETBI_TRY(read_backends(r, pool, out->backend_count, etbi_max_options(out->action), out->backends));
  if (out->action != ETB_ACTION_LOAD) {
    return ETB_OK;
  }
  ETBI_TRY(read_load_fields(r, &out->load, pool, (uint8_t)(ETB_LOAD_FLAG_KEEP | ETB_LOAD_FLAG_CONCURRENT)));
  ETBI_TRY(read_count(r, (uint8_t)(ETB_MAX_MODELS - 1u), ETB_ERR_TOO_MANY_MODELS, &out->model_count));
  for (i = 0; i < out->model_count; i++) {
    ETBI_TRY(read_model(r, &out->models[i], pool));
  }
  return ETB_OK;
}

static etb_status_t read_report_body(reader_t* r, etb_report_t* out, pool_t* pool) {
  uint8_t i;
  ETBI_TRY(read_u8(r, &out->action));
  if (!etbi_report_action_known(out->action)) {
    return ETB_ERR_ACTION;
  }
  ETBI_TRY(read_u8(r, &out->outcome));
  if (out->outcome > ETB_OUTCOME_UNSUPPORTED) {
    return ETB_ERR_OUTCOME;
  }
  ETBI_TRY(read_u32(r, &out->detail));
  ETBI_TRY(read_str(r, &out->message));
  ETBI_TRY(etbi_check_str(out->message, 0u, (uint16_t)ETB_MAX_TEXT, ETB_ERR_TEXT_LENGTH));
  ETBI_TRY(read_count(r, (uint8_t)ETB_MAX_FACTS, ETB_ERR_TOO_MANY_OPTIONS, &out->fact_count));
  ETBI_TRY(read_options(r, pool, out->fact_count, false, &out->facts));
  ETBI_TRY(read_count(r, (uint8_t)ETB_MAX_BACKENDS, ETB_ERR_TOO_MANY_BACKENDS, &out->entry_count));
  for (i = 0; i < out->entry_count; i++) {
    etb_entry_t* entry = &out->entries[i];
    ETBI_TRY(read_id(r, &entry->name));
    ETBI_TRY(read_u32(r, &entry->status));
    ETBI_TRY(read_u16(r, &entry->calls));
    ETBI_TRY(read_u16(r, &entry->executes));
    ETBI_TRY(read_u8(r, &entry->flags));
    if ((entry->flags & (uint8_t)~ETB_ENTRY_FLAG_PROBE) != 0u) {
      return ETB_ERR_FLAGS;
    }
    ETBI_TRY(read_u8(r, &entry->model));
    if (entry->model >= ETB_MAX_MODELS) {
      return ETB_ERR_TOO_MANY_MODELS;
    }
    ETBI_TRY(read_count(r, (uint8_t)ETB_MAX_OPTIONS, ETB_ERR_TOO_MANY_OPTIONS, &entry->option_count));
    ETBI_TRY(read_options(r, pool, entry->option_count, false, &entry->options));
  }
  return ETB_OK;
}

etb_status_t etb_decode_request(const uint8_t* buf, size_t len, etb_request_t* out, etb_option_t* pool,
                                size_t pool_cap) {
  reader_t r;
  pool_t options = {NULL, 0, 0};
  options.base = pool;
  options.cap = pool != NULL ? pool_cap : 0u;
  out->seq = 0;
  out->delegate_count = 0;
  out->backend_count = 0;
  out->load.path = ETB_LOAD_PROGRAM;
  out->load.flags = 0;
  out->load.method.ptr = NULL;
  out->load.method.len = 0;
  out->load.method_backend_count = 0;
  out->model_count = 0;
  ETBI_TRY(open_message(buf, len, ETB_MSG_REQUEST, &out->seq, &r));
  ETBI_TRY(read_request_body(&r, out, &options));
  return r.pos == r.end ? ETB_OK : ETB_ERR_TRAILING;
}

etb_status_t etb_decode_upload(const uint8_t* buf, size_t len, etb_upload_t* out) {
  reader_t r;
  out->seq = 0;
  out->offset = 0;
  out->chunk.ptr = NULL;
  out->chunk.len = 0;
  out->size = 0;
  out->crc = 0;
  ETBI_TRY(open_message(buf, len, ETB_MSG_REQUEST, &out->seq, &r));
  ETBI_TRY(read_u8(&r, &out->action));
  if (out->action == ETB_ACTION_PROGRAM_DATA) {
    ETBI_TRY(read_u32(&r, &out->offset));
    ETBI_TRY(read_str(&r, &out->chunk)); /* a u16 length and its bytes, like a str */
  } else if (out->action == ETB_ACTION_PROGRAM_END) {
    ETBI_TRY(read_u32(&r, &out->size));
    ETBI_TRY(read_u32(&r, &out->crc));
  } else {
    return ETB_ERR_ACTION;
  }
  return r.pos == r.end ? ETB_OK : ETB_ERR_TRAILING;
}

etb_status_t etb_decode_report(const uint8_t* buf, size_t len, etb_report_t* out, etb_option_t* pool, size_t pool_cap) {
  reader_t r;
  pool_t options = {NULL, 0, 0};
  options.base = pool;
  options.cap = pool != NULL ? pool_cap : 0u;
  out->seq = 0;
  out->fact_count = 0;
  out->entry_count = 0;
  ETBI_TRY(open_message(buf, len, ETB_MSG_REPORT, &out->seq, &r));
  ETBI_TRY(read_report_body(&r, out, &options));
  return r.pos == r.end ? ETB_OK : ETB_ERR_TRAILING;
}
