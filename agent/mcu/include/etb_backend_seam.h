/*
 * etb_backend_seam.h - the C seam between the MCU agent and a backend runtime.
 *
 * Every call the agent makes into "the runtime" goes through these functions.
 * Each one mirrors an ExecuTorch call (executorch 1.5, runtime/backend/ headers) and
 * has its semantics, error codes included:
 *
 *   seam                               ExecuTorch
 *   etb_seam_register_backend          register_backend(Backend{name, interface})
 *   etb_seam_backend_count / _name     get_num_registered_backends / get_backend_name
 *   etb_seam_get_backend_class         get_backend_class(name)
 *   etb_seam_set_option / _get_option  set_option / get_option (interface.h)
 *   etb_map_*                          LoadBackendOptionsMap (backend_options_map.h)
 *   etb_seam_load_method               Program::load_method("forward", ..., &map)
 *   etb_seam_execute                   Method::execute()
 *   etb_seam_unload                    ~Method() (destroys each delegate)
 *
 * This firmware implements the seam with a small stand-in (registry.c); on a
 * board with an ExecuTorch build the same functions forward to the runtime
 * (docs/mcu.md). Options are etb_option_t: a key and a bool, int32 or string
 * value, as executorch::runtime::BackendOption; strings are views that stay
 * valid for the call (the runtime's BackendOption copies them into arrays).
 */
#ifndef ETB_BACKEND_SEAM_H
#define ETB_BACKEND_SEAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "etb/wire.h"

/* executorch::runtime::Error values the seam returns (runtime/core/error.h). */
typedef uint32_t etb_rt_error_t;
#define ETB_RT_OK 0x00u
#define ETB_RT_INTERNAL 0x01u
#define ETB_RT_INVALID_STATE 0x02u
#define ETB_RT_INVALID_ARGUMENT 0x12u
#define ETB_RT_NOT_FOUND 0x20u
#define ETB_RT_MEMORY_ALLOCATION_FAILED 0x21u

#define ETB_SEAM_MAX_BACKENDS 16u  /* kMaxRegisteredBackends */
#define ETB_SEAM_MAX_MAP_ENTRIES 8u /* LoadBackendOptionsMap capacity */
#define ETB_SEAM_MAX_DELEGATES 8u  /* delegates of one method */

/* BackendInterface: the hooks of one backend. `self` is the backend object. */
typedef struct {
  bool (*is_available)(void *self);
  /* init(context, ...): runtime_specs is this delegate's entry of the load-time map. */
  etb_rt_error_t (*init)(void *self, const etb_option_t *runtime_specs, size_t count);
  etb_rt_error_t (*execute)(void *self);
  etb_rt_error_t (*set_option)(void *self, const etb_option_t *options, size_t count);
  /* Reads into options: keys and types name what to read, the values are overwritten. */
  etb_rt_error_t (*get_option)(void *self, etb_option_t *options, size_t count);
  void (*destroy)(void *self);
} etb_backend_interface_t;

/* Backend{name, interface}. The registry keeps the name view: it must outlive the registry. */
typedef struct {
  etb_str_t name;
  const etb_backend_interface_t *interface;
  void *self;
} etb_seam_backend_t;

/*
 * Registers a backend. Ok; InvalidArgument if the name is already registered;
 * Internal if all ETB_SEAM_MAX_BACKENDS slots are taken. There is no unregister.
 */
etb_rt_error_t etb_seam_register_backend(etb_seam_backend_t backend);

size_t etb_seam_backend_count(void);

/* Name of the index-th registered backend, in registration order (empty past the end). */
etb_str_t etb_seam_backend_name(size_t index);

/* The registered backend called `name`, or NULL. */
const etb_seam_backend_t *etb_seam_get_backend_class(etb_str_t name);

/* set_option(name, options): NotFound for an unknown name, else the backend's answer. */
etb_rt_error_t etb_seam_set_option(etb_str_t backend_name, const etb_option_t *options,
                                   size_t count);

/* get_option(name, options): NotFound for an unknown name, else the backend's answer. */
etb_rt_error_t etb_seam_get_option(etb_str_t backend_name, etb_option_t *options, size_t count);

/* LoadBackendOptionsMap: backend id -> options. Holds views; the caller keeps them alive. */
typedef struct {
  etb_str_t backend_id;
  const etb_option_t *options;
  size_t count;
} etb_map_entry_t;

typedef struct {
  etb_map_entry_t entries[ETB_SEAM_MAX_MAP_ENTRIES];
  size_t size;
} etb_load_options_map_t;

void etb_map_init(etb_load_options_map_t *map);

/*
 * set_options(backend_id, options): InvalidArgument for an empty id, an id over
 * 63 bytes or a ninth backend. Setting an id again replaces its options.
 */
etb_rt_error_t etb_map_set_options(etb_load_options_map_t *map, etb_str_t backend_id,
                                   const etb_option_t *options, size_t count);

/* get_options(backend_id): its options, or an empty span (count 0) when absent. */
size_t etb_map_get_options(const etb_load_options_map_t *map, etb_str_t backend_id,
                           const etb_option_t **options);

/* A loaded method: its delegates, resolved to registered backends and initialised. */
typedef struct {
  const etb_seam_backend_t *delegates[ETB_SEAM_MAX_DELEGATES];
  size_t initialized;
  size_t delegate_count;
  bool loaded;
} etb_method_t;

/*
 * Loads a method whose program is the list of delegate ids, in program order
 * (an MCU has no .pte file; on a board with ExecuTorch the program comes from
 * flash). For each delegate: its backend must be registered and available
 * (else NotFound), and its init receives map's entry for that id (an empty
 * span when the map has none); map entries naming no delegate are ignored. The
 * first failing init ends the load with its error; delegates initialised before
 * it are destroyed and the method is left unloaded.
 */
etb_rt_error_t etb_seam_load_method(etb_method_t *method, const etb_str_t *delegate_ids,
                                    size_t delegate_count, const etb_load_options_map_t *map);

/* Calls each delegate's execute in program order; InvalidState if not loaded. */
etb_rt_error_t etb_seam_execute(etb_method_t *method);

/* Destroys the delegates of a loaded method; an unloaded method is left as is. */
void etb_seam_unload(etb_method_t *method);

#endif /* ETB_BACKEND_SEAM_H */
