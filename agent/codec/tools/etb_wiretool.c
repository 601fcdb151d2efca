/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * etb_wiretool - decode or re-encode one wire-format v2 message read from stdin.
 *
 *   etb_wiretool decode request|report|upload   < msg.bin   prints the readable JSON form
 *   etb_wiretool reencode request|report|upload < msg.bin   writes decode+encode bytes
 *
 * "upload" reads a program upload request (actions 9 and 10, etb_decode_upload).
 *
 * A message that does not decode prints "error <NAME>" and exits 2. Used by the
 * tests to check the C codec against the golden vectors.
 */
#include <stdio.h>
#include <string.h>

#include "etb/wire.h"

#define EXIT_DECODE 2
#define EXIT_ENCODE 3
#define EXIT_USAGE 64
#define POOL_SIZE (ETB_MAX_FACTS + ETB_MAX_BACKENDS * ETB_MAX_OPTIONS)

static const char* const action_names[] = {"none",     "load",  "execute", "set",          "get",        "reset",
                                           "register", "hello", "reboot",  "program_data", "program_end"};
static const char* const outcome_names[] = {"ok", "rejected", "runtime_error", "unsupported"};
static const char* const type_names[] = {"?", "bool", "int", "string"};

static uint8_t input[ETB_MAX_MESSAGE + 1]; /* one more: a longer input is TRAILING */
static uint8_t output[ETB_MAX_MESSAGE];
static etb_option_t pool[POOL_SIZE];
static etb_request_t request;
static etb_report_t report;
static etb_upload_t upload;

static void print_str(etb_str_t s) {
  uint16_t i;
  putchar('"');
  for (i = 0; i < s.len; i++) {
    uint8_t c = s.ptr[i];
    if (c == '"' || c == '\\') {
      printf("\\%c", c);
    } else if (c < 0x20u || c == 0x7Fu) {
      printf("\\u%04x", c);
    } else {
      putchar(c); /* valid UTF-8: the decoder checked it */
    }
  }
  putchar('"');
}

static void print_options(const etb_option_t* options, uint8_t count) {
  uint8_t i;
  putchar('[');
  for (i = 0; i < count; i++) {
    const etb_option_t* o = &options[i];
    printf("%s{\"key\": ", i ? ", " : "");
    print_str(o->key);
    printf(", \"type\": \"%s\", \"value\": ", type_names[o->type]);
    if (o->type == ETB_TYPE_BOOL) {
      printf("%s", o->b ? "true" : "false");
    } else if (o->type == ETB_TYPE_INT) {
      printf("%ld", (long)o->i);
    } else {
      print_str(o->s);
    }
    putchar('}');
  }
  putchar(']');
}

static void print_backends(const etb_backend_t* backends, uint8_t count) {
  uint8_t i;
  putchar('[');
  for (i = 0; i < count; i++) {
    printf("%s{\"id\": ", i ? ", " : "");
    print_str(backends[i].id);
    printf(", \"options\": ");
    print_options(backends[i].options, backends[i].option_count);
    putchar('}');
  }
  putchar(']');
}

static const char* const path_names[] = {"program", "module", "module_method", "module_both"};

static void print_model(const etb_model_t* m) {
  uint8_t i;
  printf("{\"program\": ");
  print_str(m->program);
  printf(", \"delegates\": [");
  for (i = 0; i < m->delegate_count; i++) {
    printf("%s", i ? ", " : "");
    print_str(m->delegates[i]);
  }
  printf("], \"backends\": ");
  print_backends(m->backends, m->backend_count);
  printf(", \"path\": \"%s\", \"method\": ", path_names[m->load.path]);
  print_str(m->load.method);
  printf(", \"method_backends\": ");
  print_backends(m->load.method_backends, m->load.method_backend_count);
  putchar('}');
}

static void print_request(const etb_request_t* r) {
  uint8_t i;
  printf("{\"type\": \"request\", \"seq\": %lu, \"action\": \"%s\", \"program\": ", (unsigned long)r->seq,
         action_names[r->action]);
  print_str(r->program);
  printf(", \"delegates\": [");
  for (i = 0; i < r->delegate_count; i++) {
    printf("%s", i ? ", " : "");
    print_str(r->delegates[i]);
  }
  printf("], \"backends\": ");
  print_backends(r->backends, r->backend_count);
  if (r->action == ETB_ACTION_LOAD) {
    printf(", \"path\": \"%s\", \"keep\": %s, \"method\": ", path_names[r->load.path],
           (r->load.flags & ETB_LOAD_FLAG_KEEP) ? "true" : "false");
    print_str(r->load.method);
    printf(", \"method_backends\": ");
    print_backends(r->load.method_backends, r->load.method_backend_count);
    printf(", \"concurrent\": %s, \"models\": [", (r->load.flags & ETB_LOAD_FLAG_CONCURRENT) ? "true" : "false");
    for (i = 0; i < r->model_count; i++) {
      printf("%s", i ? ", " : "");
      print_model(&r->models[i]);
    }
    putchar(']');
  }
  printf("}\n");
}

static void print_report(const etb_report_t* r) {
  uint8_t i;
  printf(
      "{\"type\": \"report\", \"seq\": %lu, \"action\": \"%s\", \"outcome\": \"%s\", "
      "\"detail\": %lu, \"message\": ",
      (unsigned long)r->seq, action_names[r->action], outcome_names[r->outcome], (unsigned long)r->detail);
  print_str(r->message);
  printf(", \"facts\": ");
  print_options(r->facts, r->fact_count);
  printf(", \"entries\": [");
  for (i = 0; i < r->entry_count; i++) {
    const etb_entry_t* e = &r->entries[i];
    printf("%s{\"name\": ", i ? ", " : "");
    print_str(e->name);
    printf(
        ", \"status\": %lu, \"calls\": %u, \"executes\": %u, \"flags\": %u, "
        "\"model\": %u, \"options\": ",
        (unsigned long)e->status, (unsigned)e->calls, (unsigned)e->executes, (unsigned)e->flags, (unsigned)e->model);
    print_options(e->options, e->option_count);
    putchar('}');
  }
  printf("]}\n");
}

static void print_upload(const etb_upload_t* u) {
  uint16_t i;
  printf("{\"type\": \"request\", \"seq\": %lu, \"action\": \"%s\", ", (unsigned long)u->seq, action_names[u->action]);
  if (u->action == ETB_ACTION_PROGRAM_DATA) {
    printf("\"offset\": %lu, \"bytes\": \"", (unsigned long)u->offset);
    for (i = 0; i < u->chunk.len; i++) {
      printf("%02x", u->chunk.ptr[i]);
    }
    printf("\"}\n");
  } else {
    printf("\"size\": %lu, \"crc\": %lu}\n", (unsigned long)u->size, (unsigned long)u->crc);
  }
}

static int usage(void) {
  fprintf(stderr, "usage: etb_wiretool decode|reencode request|report|upload < message.bin\n");
  return EXIT_USAGE;
}

int main(int argc, char** argv) {
  size_t len = 0, out_len = 0, n;
  int reencode, is_request, is_upload;
  etb_status_t status;

  if (argc != 3) return usage();
  reencode = strcmp(argv[1], "reencode") == 0;
  is_request = strcmp(argv[2], "request") == 0;
  is_upload = strcmp(argv[2], "upload") == 0;
  if ((!reencode && strcmp(argv[1], "decode") != 0) || (!is_request && !is_upload && strcmp(argv[2], "report") != 0)) {
    return usage();
  }
  while (len < sizeof input && (n = fread(input + len, 1, sizeof input - len, stdin)) > 0) {
    len += n;
  }

  status = is_upload    ? etb_decode_upload(input, len, &upload)
           : is_request ? etb_decode_request(input, len, &request, pool, POOL_SIZE)
                        : etb_decode_report(input, len, &report, pool, POOL_SIZE);
  if (status != ETB_OK) {
    printf("error %s\n", etb_status_name(status));
    return EXIT_DECODE;
  }
  if (!reencode) {
    if (is_upload) {
      print_upload(&upload);
    } else if (is_request) {
      print_request(&request);
    } else {
      print_report(&report);
    }
    return 0;
  }
  status = is_upload    ? etb_encode_upload(&upload, output, sizeof output, &out_len)
           : is_request ? etb_encode_request(&request, output, sizeof output, &out_len)
                        : etb_encode_report(&report, output, sizeof output, &out_len);
  if (status != ETB_OK) {
    fprintf(stderr, "encoding failed: %s\n", etb_status_name(status));
    return EXIT_ENCODE;
  }
  fwrite(output, 1, out_len, stdout);
  return fflush(stdout) == 0 ? 0 : EXIT_ENCODE;
}
