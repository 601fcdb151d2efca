/*
 * registry.c - the stand-in runtime behind etb_backend_seam.h: a backend
 * registry, the load-time options map and a method made of delegate calls,
 * with the semantics (and Error codes) of ExecuTorch 1.5.
 */
#include "etb_backend_seam.h"

#include <string.h>

static etb_seam_backend_t registry[ETB_SEAM_MAX_BACKENDS];
static size_t registry_size;

static bool str_equal(etb_str_t a, etb_str_t b) {
  return a.len == b.len && (a.len == 0u || memcmp(a.ptr, b.ptr, a.len) == 0);
}

/* As ExecuTorch's register_backend: a full table is checked before a
 * duplicate name, so a duplicate gives Internal once all slots are used. */
etb_rt_error_t etb_seam_register_backend(etb_seam_backend_t backend) {
  if (registry_size >= ETB_SEAM_MAX_BACKENDS) {
    return ETB_RT_INTERNAL;
  }
  if (etb_seam_get_backend_class(backend.name) != NULL) {
    return ETB_RT_INVALID_ARGUMENT;
  }
  registry[registry_size++] = backend;
  return ETB_RT_OK;
}

size_t etb_seam_backend_count(void) { return registry_size; }

etb_str_t etb_seam_backend_name(size_t index) {
  etb_str_t none = {NULL, 0};
  return index < registry_size ? registry[index].name : none;
}

const etb_seam_backend_t *etb_seam_get_backend_class(etb_str_t name) {
  size_t i;
  for (i = 0; i < registry_size; i++) {
    if (str_equal(registry[i].name, name)) {
      return &registry[i];
    }
  }
  return NULL;
}

etb_rt_error_t etb_seam_set_option(etb_str_t backend_name, const etb_option_t *options,
                                   size_t count) {
  const etb_seam_backend_t *backend = etb_seam_get_backend_class(backend_name);
  if (backend == NULL) {
    return ETB_RT_NOT_FOUND;
  }
  return backend->interface->set_option(backend->self, options, count);
}

etb_rt_error_t etb_seam_get_option(etb_str_t backend_name, etb_option_t *options, size_t count) {
  const etb_seam_backend_t *backend = etb_seam_get_backend_class(backend_name);
  if (backend == NULL) {
    return ETB_RT_NOT_FOUND;
  }
  return backend->interface->get_option(backend->self, options, count);
}

void etb_map_init(etb_load_options_map_t *map) { map->size = 0; }

etb_rt_error_t etb_map_set_options(etb_load_options_map_t *map, etb_str_t backend_id,
                                   const etb_option_t *options, size_t count) {
  size_t i;
  if (backend_id.ptr == NULL || backend_id.len == 0u || backend_id.len > ETB_MAX_ID) {
    return ETB_RT_INVALID_ARGUMENT;
  }
  for (i = 0; i < map->size; i++) {
    if (str_equal(map->entries[i].backend_id, backend_id)) {
      map->entries[i].options = options;
      map->entries[i].count = count;
      return ETB_RT_OK;
    }
  }
  if (map->size >= ETB_SEAM_MAX_MAP_ENTRIES) {
    return ETB_RT_INVALID_ARGUMENT;
  }
  map->entries[map->size].backend_id = backend_id;
  map->entries[map->size].options = options;
  map->entries[map->size].count = count;
  map->size++;
  return ETB_RT_OK;
}

size_t etb_map_get_options(const etb_load_options_map_t *map, etb_str_t backend_id,
                           const etb_option_t **options) {
  size_t i;
  for (i = 0; i < map->size; i++) {
    if (str_equal(map->entries[i].backend_id, backend_id)) {
      *options = map->entries[i].options;
      return map->entries[i].count;
    }
  }
  *options = NULL;
  return 0;
}

etb_rt_error_t etb_seam_load_method(etb_method_t *method, const etb_str_t *delegate_ids,
                                    size_t delegate_count, const etb_load_options_map_t *map) {
  size_t i;
  method->loaded = false;
  method->initialized = 0;
  method->delegate_count = 0;
  if (delegate_count > ETB_SEAM_MAX_DELEGATES) {
    return ETB_RT_INVALID_ARGUMENT;
  }
  for (i = 0; i < delegate_count; i++) {
    const etb_seam_backend_t *backend = etb_seam_get_backend_class(delegate_ids[i]);
    const etb_option_t *specs;
    size_t spec_count;
    etb_rt_error_t error;
    if (backend == NULL || !backend->interface->is_available(backend->self)) {
      error = ETB_RT_NOT_FOUND;
    } else {
      spec_count = etb_map_get_options(map, delegate_ids[i], &specs);
      error = backend->interface->init(backend->self, specs, spec_count);
    }
    if (error != ETB_RT_OK) {
      etb_seam_unload(method);
      return error;
    }
    method->delegates[i] = backend;
    method->initialized = i + 1u;
  }
  method->delegate_count = delegate_count;
  method->loaded = true;
  return ETB_RT_OK;
}

etb_rt_error_t etb_seam_execute(etb_method_t *method) {
  size_t i;
  if (!method->loaded) {
    return ETB_RT_INVALID_STATE;
  }
  for (i = 0; i < method->delegate_count; i++) {
    const etb_seam_backend_t *backend = method->delegates[i];
    etb_rt_error_t error = backend->interface->execute(backend->self);
    if (error != ETB_RT_OK) {
      return error;
    }
  }
  return ETB_RT_OK;
}

void etb_seam_unload(etb_method_t *method) {
  size_t i;
  for (i = 0; i < method->initialized; i++) {
    const etb_seam_backend_t *backend = method->delegates[i];
    backend->interface->destroy(backend->self);
  }
  method->initialized = 0;
  method->delegate_count = 0;
  method->loaded = false;
}
