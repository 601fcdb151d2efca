/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wire_encode.c - encoding of wire format v2. Every field is checked against
 * the decoder's limit, in the decoder's order, before it is written; bytes
 * beyond cap are counted but not written, so a too-small buffer still yields
 * the needed size in *out_len together with ETB_ERR_CAPACITY.
 */
#include "wire_internal.h"

#if __STDC_HOSTED__
#include <string.h>
#endif

typedef struct {
  uint8_t* buf;
  size_t cap;
  size_t pos; /* may run past cap: then nothing more is stored */
} writer_t;

static void put_u8(writer_t* w, uint8_t v) {
  if (w->pos < w->cap) {
    w->buf[w->pos] = v;
  }
  w->pos++;
}

static void put_u16(writer_t* w, uint16_t v) {
  put_u8(w, (uint8_t)v);
  put_u8(w, (uint8_t)(v >> 8));
}

static void put_u32(writer_t* w, uint32_t v) {
  put_u16(w, (uint16_t)v);
  put_u16(w, (uint16_t)(v >> 16));
}

static void put_bytes(writer_t* w, const uint8_t* p, uint16_t n) {
  uint16_t i;
#if __STDC_HOSTED__
  /* Hosted builds copy with memcpy; freestanding ones need no library function. */
  if (n != 0u && w->pos < w->cap && w->cap - w->pos >= n) {
    memcpy(w->buf + w->pos, p, n);
    w->pos += n;
    return;
  }
#endif
  for (i = 0; i < n; i++) {
    put_u8(w, p[i]);
  }
}

/* A NULL pointer with a nonzero count is an array too small for its count. */
static etb_status_t check_view(const void* ptr, size_t count) {
  return (ptr == NULL && count != 0u) ? ETB_ERR_CAPACITY : ETB_OK;
}

static etb_status_t put_str(writer_t* w, etb_str_t s, uint16_t min, uint16_t max, etb_status_t length_error) {
  ETBI_TRY(check_view(s.ptr, s.len));
  ETBI_TRY(etbi_check_str(s, min, max, length_error));
  put_u16(w, s.len);
  put_bytes(w, s.ptr, s.len);
  return ETB_OK;
}

static etb_status_t put_id(writer_t* w, etb_str_t id) {
  return put_str(w, id, 1u, (uint16_t)ETB_MAX_ID, ETB_ERR_ID_LENGTH);
}

static etb_status_t put_count(writer_t* w, uint8_t count, uint8_t max, etb_status_t over_error) {
  ETBI_TRY(etbi_check_count(count, max, over_error));
  put_u8(w, count);
  return ETB_OK;
}

/* The tag and the value; the key is written by put_options. */
static etb_status_t put_value(writer_t* w, const etb_option_t* opt) {
  uint32_t low;
  switch (opt->type) {
    case ETB_TYPE_BOOL:
      put_u8(w, opt->type);
      put_u8(w, opt->b ? 1u : 0u);
      return ETB_OK;
    case ETB_TYPE_INT:
      put_u8(w, opt->type);
      low = (uint32_t)opt->i; /* modulo 2^32: two's complement */
      put_u32(w, low);
      put_u32(w, (low & 0x80000000u) ? 0xFFFFFFFFu : 0u);
      return ETB_OK;
    case ETB_TYPE_STRING:
      put_u8(w, opt->type);
      return put_str(w, opt->s, 0u, (uint16_t)ETB_MAX_STRING, ETB_ERR_STRING_LENGTH);
    default:
      return ETB_ERR_TAG;
  }
}

static etb_status_t put_options(writer_t* w, const etb_option_t* options, uint8_t count, uint8_t max,
                                bool unique_keys) {
  uint8_t i, j;
  ETBI_TRY(put_count(w, count, max, ETB_ERR_TOO_MANY_OPTIONS));
  ETBI_TRY(check_view(options, count));
  for (i = 0; i < count; i++) {
    ETBI_TRY(put_str(w, options[i].key, 1u, (uint16_t)ETB_MAX_KEY, ETB_ERR_KEY_LENGTH));
    for (j = 0; unique_keys && j < i; j++) {
      if (etbi_str_equal(options[j].key, options[i].key)) {
        return ETB_ERR_DUPLICATE_KEY;
      }
    }
    ETBI_TRY(put_value(w, &options[i]));
  }
  return ETB_OK;
}

static void put_header(writer_t* w, uint8_t type, uint32_t seq) {
  put_bytes(w, etbi_magic, (uint16_t)sizeof etbi_magic);
  put_u8(w, (uint8_t)ETB_WIRE_VERSION);
  put_u8(w, type);
  put_u16(w, 0u); /* flags */
  put_u32(w, 0u); /* length, patched by finish() */
  put_u32(w, seq);
}

/* Patches the length and appends the CRC, or reports the size needed. */
static etb_status_t finish(writer_t* w, size_t* out_len) {
  size_t body_end = w->pos;
  *out_len = body_end + ETB_CRC_SIZE;
  if (*out_len > w->cap) {
    return ETB_ERR_CAPACITY;
  }
  w->pos = ETBI_LENGTH_OFFSET;
  put_u32(w, (uint32_t)*out_len);
  w->pos = body_end;
  put_u32(w, etb_crc32(0u, w->buf, body_end));
  return ETB_OK;
}

static etb_status_t put_backends(writer_t* w, const etb_backend_t* backends, uint8_t count, uint8_t max_count,
                                 uint8_t max_options) {
  uint8_t i, j;
  ETBI_TRY(put_count(w, count, max_count, ETB_ERR_TOO_MANY_BACKENDS));
  for (i = 0; i < count; i++) {
    const etb_backend_t* backend = &backends[i];
    ETBI_TRY(put_id(w, backend->id));
    for (j = 0; j < i; j++) {
      if (etbi_str_equal(backends[j].id, backend->id)) {
        return ETB_ERR_DUPLICATE_BACKEND;
      }
    }
    ETBI_TRY(put_options(w, backend->options, backend->option_count, max_options, true));
  }
  return ETB_OK;
}

static etb_status_t put_load_fields(writer_t* w, const etb_load_t* load, uint8_t allowed_flags) {
  if (load->path > ETB_LOAD_MODULE_BOTH) {
    return ETB_ERR_LOAD_PATH;
  }
  put_u8(w, load->path);
  if ((load->flags & (uint8_t)~allowed_flags) != 0u) {
    return ETB_ERR_FLAGS;
  }
  put_u8(w, load->flags);
  ETBI_TRY(put_str(w, load->method, 0u, (uint16_t)ETB_MAX_ID, ETB_ERR_ID_LENGTH));
  return put_backends(w, load->method_backends, load->method_backend_count, etbi_max_method_backends(load->path),
                      (uint8_t)ETB_MAX_OPTIONS);
}

static etb_status_t put_model(writer_t* w, const etb_model_t* model) {
  uint8_t i;
  ETBI_TRY(check_view(model->program.ptr, model->program.len));
  ETBI_TRY(etbi_check_program(ETB_ACTION_LOAD, model->program));
  put_u16(w, model->program.len);
  put_bytes(w, model->program.ptr, model->program.len);
  ETBI_TRY(put_count(w, model->delegate_count, etbi_max_delegates(ETB_ACTION_LOAD), ETB_ERR_TOO_MANY_DELEGATES));
  for (i = 0; i < model->delegate_count; i++) {
    ETBI_TRY(put_id(w, model->delegates[i]));
  }
  ETBI_TRY(put_backends(w, model->backends, model->backend_count, etbi_max_backends(ETB_ACTION_LOAD),
                        etbi_max_options(ETB_ACTION_LOAD)));
  return put_load_fields(w, &model->load, 0u);
}

static etb_status_t put_request_body(writer_t* w, const etb_request_t* req) {
  uint8_t i;
  if (req->action < ETB_ACTION_LOAD || req->action > ETB_ACTION_REBOOT) {
    return ETB_ERR_ACTION;
  }
  put_u8(w, req->action);
  ETBI_TRY(check_view(req->program.ptr, req->program.len));
  ETBI_TRY(etbi_check_program(req->action, req->program));
  put_u16(w, req->program.len);
  put_bytes(w, req->program.ptr, req->program.len);
  ETBI_TRY(put_count(w, req->delegate_count, etbi_max_delegates(req->action), ETB_ERR_TOO_MANY_DELEGATES));
  for (i = 0; i < req->delegate_count; i++) {
    ETBI_TRY(put_id(w, req->delegates[i]));
  }
  ETBI_TRY(put_backends(w, req->backends, req->backend_count, etbi_max_backends(req->action),
                        etbi_max_options(req->action)));
  if (req->action != ETB_ACTION_LOAD) {
    return ETB_OK;
  }
  ETBI_TRY(put_load_fields(w, &req->load, (uint8_t)(ETB_LOAD_FLAG_KEEP | ETB_LOAD_FLAG_CONCURRENT)));
  ETBI_TRY(put_count(w, req->model_count, (uint8_t)(ETB_MAX_MODELS - 1u), ETB_ERR_TOO_MANY_MODELS));
  for (i = 0; i < req->model_count; i++) {
    ETBI_TRY(put_model(w, &req->models[i]));
  }
  return ETB_OK;
}

static etb_status_t put_report_body(writer_t* w, const etb_report_t* rep) {
  uint8_t i;
  if (!etbi_report_action_known(rep->action)) {
    return ETB_ERR_ACTION;
  }
  put_u8(w, rep->action);
  if (rep->outcome > ETB_OUTCOME_UNSUPPORTED) {
    return ETB_ERR_OUTCOME;
  }
  put_u8(w, rep->outcome);
  put_u32(w, rep->detail);
  ETBI_TRY(put_str(w, rep->message, 0u, (uint16_t)ETB_MAX_TEXT, ETB_ERR_TEXT_LENGTH));
  ETBI_TRY(put_options(w, rep->facts, rep->fact_count, (uint8_t)ETB_MAX_FACTS, false));
  ETBI_TRY(put_count(w, rep->entry_count, (uint8_t)ETB_MAX_BACKENDS, ETB_ERR_TOO_MANY_BACKENDS));
  for (i = 0; i < rep->entry_count; i++) {
    const etb_entry_t* entry = &rep->entries[i];
    ETBI_TRY(put_id(w, entry->name));
    put_u32(w, entry->status);
    put_u16(w, entry->calls);
    put_u16(w, entry->executes);
    if ((entry->flags & (uint8_t)~ETB_ENTRY_FLAG_PROBE) != 0u) {
      return ETB_ERR_FLAGS;
    }
    put_u8(w, entry->flags);
    if (entry->model >= ETB_MAX_MODELS) {
      return ETB_ERR_TOO_MANY_MODELS;
    }
    put_u8(w, entry->model);
    ETBI_TRY(put_options(w, entry->options, entry->option_count, (uint8_t)ETB_MAX_OPTIONS, false));
  }
  return ETB_OK;
}

/* A writer into buf[0..cap) that has written the header of a message of `type`. */
static writer_t start_message(uint8_t* buf, size_t cap, uint8_t type, uint32_t seq) {
  writer_t w;
  w.buf = buf;
  w.cap = buf != NULL ? cap : 0u;
  w.pos = 0;
  put_header(&w, type, seq);
  return w;
}

etb_status_t etb_encode_request(const etb_request_t* req, uint8_t* buf, size_t cap, size_t* out_len) {
  writer_t w = start_message(buf, cap, ETB_MSG_REQUEST, req->seq);
  ETBI_TRY(put_request_body(&w, req));
  return finish(&w, out_len);
}

etb_status_t etb_encode_report(const etb_report_t* rep, uint8_t* buf, size_t cap, size_t* out_len) {
  writer_t w = start_message(buf, cap, ETB_MSG_REPORT, rep->seq);
  ETBI_TRY(put_report_body(&w, rep));
  return finish(&w, out_len);
}

etb_status_t etb_encode_upload(const etb_upload_t* up, uint8_t* buf, size_t cap, size_t* out_len) {
  writer_t w = start_message(buf, cap, ETB_MSG_REQUEST, up->seq);
  put_u8(&w, up->action);
  if (up->action == ETB_ACTION_PROGRAM_DATA) {
    ETBI_TRY(check_view(up->chunk.ptr, up->chunk.len));
    put_u32(&w, up->offset);
    put_u16(&w, up->chunk.len);
    put_bytes(&w, up->chunk.ptr, up->chunk.len);
  } else if (up->action == ETB_ACTION_PROGRAM_END) {
    put_u32(&w, up->size);
    put_u32(&w, up->crc);
  } else {
    return ETB_ERR_ACTION;
  }
  return finish(&w, out_len);
}
