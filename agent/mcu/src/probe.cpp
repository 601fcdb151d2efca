// SPDX-License-Identifier: BSD-3-Clause
/* probe.cpp - probe backends (see mcu_probe.h). */
#include "mcu_probe.h"

#include <string.h>

#include <new>
#include <variant>

#include "mcu_capacity.h"
#include "mcu_options.h"

namespace mcu {

namespace {

/* One spare beyond the registry's capacity: a registration the full registry
 * refuses is still attempted, so the registry gives its own answer. */
constexpr size_t kProbePool = 17;

struct ProbeSlot {
  bool in_use;
  alignas(Probe) unsigned char storage[sizeof(Probe)];
  Probe* probe() { return std::launder(reinterpret_cast<Probe*>(storage)); }
};

/* Labels of the lookups of repeated keys (etb.lookup:KEY), this request. */
constexpr size_t kLookupLabels = 8;
constexpr char kLookupOk[] = "etb.lookup:";
constexpr char kLookupError[] = "etb.lookup_error:";

ProbeSlot slots[kProbePool];
size_t records_used; /* of pools().received, this request */
uint32_t call_clock;
size_t current_model;
char lookup_labels[kLookupLabels][ETB_MAX_KEY + 1u];
size_t lookup_labels_used;

/* Appends views to the probe's record (at most ETB_MAX_OPTIONS kept); false if out of room. */
bool append_record(ProbeRecord& rec, const etb_option_t* options, size_t count) {
  etb_option_t* received = pools().received;
  size_t room_total = capacity().options_per_request;
  size_t room = ETB_MAX_OPTIONS - rec.received_count;
  size_t keep = count < room ? count : room;
  if (rec.received_count > 0u && rec.received + rec.received_count != &received[records_used]) {
    /* Not at the end of the pool: move this probe's options there first. */
    if (records_used + rec.received_count > room_total) {
      return false;
    }
    memmove(&received[records_used], rec.received, rec.received_count * sizeof received[0]);
    rec.received = &received[records_used];
    records_used += rec.received_count;
  }
  if (records_used + keep > room_total) {
    return false;
  }
  if (rec.received_count == 0u) {
    rec.received = &received[records_used];
  }
  memcpy(&received[records_used], options, keep * sizeof received[0]);
  records_used += keep;
  rec.received_count = static_cast<uint8_t>(rec.received_count + keep);
  return true;
}

/* What init reads for one spec: its key, its value through get_runtime_spec<T>. */
etb_option_t read_spec(const BackendInitContext& context, const BackendOption& spec) {
  etb_option_t view{};
  view.key = text_view(spec.key);
  auto as_bool = context.get_runtime_spec<bool>(spec.key);
  auto as_int = context.get_runtime_spec<int>(spec.key);
  auto as_text = context.get_runtime_spec<const char*>(spec.key);
  if (as_bool.ok()) {
    view.type = ETB_TYPE_BOOL;
    view.b = as_bool.get();
  } else if (as_int.ok()) {
    view.type = ETB_TYPE_INT;
    view.i = as_int.get();
  } else if (as_text.ok()) {
    view.type = ETB_TYPE_STRING;
    view.s = text_view(as_text.get());
  }
  return view;
}

/* Whether specs[k]'s key is held by an earlier spec too. */
bool repeated(Span<const BackendOption> specs, size_t k) {
  for (size_t j = 0; j < k; j++) {
    if (strcmp(specs[j].key, specs[k].key) == 0) {
      return true;
    }
  }
  return false;
}

/* "etb.lookup:KEY" (or _error), cut to a key's 63 bytes at a character boundary; or null. */
const char* lookup_label(const char* prefix, const char* key) {
  if (lookup_labels_used == kLookupLabels) {
    return nullptr;
  }
  char* label = lookup_labels[lookup_labels_used++];
  size_t len = 0;
  for (const char* part : {prefix, key}) {
    for (size_t k = 0; part[k] != '\0' && len < ETB_MAX_KEY; k++) {
      label[len++] = part[k];
    }
  }
  if (len == ETB_MAX_KEY) {
    while (len > 0u && (static_cast<uint8_t>(label[len]) & 0xC0u) == 0x80u) {
      len--;
    }
  }
  label[len] = '\0';
  return label;
}

uint8_t type_of(const BackendOption& option) {
  if (std::holds_alternative<bool>(option.value)) {
    return ETB_TYPE_BOOL;
  }
  return std::holds_alternative<int>(option.value) ? ETB_TYPE_INT : ETB_TYPE_STRING;
}

/* What get_runtime_spec<T>(key) returned, T named by `type`: the value under its label
   (ok_prefix KEY), or the Error as an int under error_prefix KEY. */
bool look_up(const BackendInitContext& context, const char* key, uint8_t type, const char* ok_prefix,
             const char* error_prefix, etb_option_t& out) {
  out = etb_option_t{};
  Error error = Error::Ok;
  if (type == ETB_TYPE_BOOL) {
    auto value = context.get_runtime_spec<bool>(key);
    error = value.ok() ? Error::Ok : value.error();
    out.type = ETB_TYPE_BOOL;
    out.b = value.ok() && value.get();
  } else if (type == ETB_TYPE_INT) {
    auto value = context.get_runtime_spec<int>(key);
    error = value.ok() ? Error::Ok : value.error();
    out.type = ETB_TYPE_INT;
    out.i = value.ok() ? value.get() : 0;
  } else {
    auto value = context.get_runtime_spec<const char*>(key);
    error = value.ok() ? Error::Ok : value.error();
    out.type = ETB_TYPE_STRING;
    out.s = value.ok() ? text_view(value.get()) : etb_str_t{};
  }
  if (error != Error::Ok) {
    out.type = ETB_TYPE_INT;
    out.i = static_cast<int32_t>(error);
  }
  const char* label = lookup_label(error == Error::Ok ? ok_prefix : error_prefix, key);
  out.key = text_view(label);
  return label != nullptr;
}

/* A type an etb.ask names, and the labels of what get_runtime_spec returned for it. */
struct AskedType {
  const char* name;
  uint8_t type;
  const char* ok_prefix;
  const char* error_prefix;
};
constexpr AskedType kAskedTypes[] = {
    {"bool", ETB_TYPE_BOOL, "etb.as_bool:", "etb.as_bool_error:"},
    {"int", ETB_TYPE_INT, "etb.as_int:", "etb.as_int_error:"},
    {"string", ETB_TYPE_STRING, "etb.as_string:", "etb.as_string_error:"},
};
constexpr char kAsk[] = "etb.ask:";

/* Whether `name` starts with the `len` bytes of `word` and `word` has no more. */
bool is_word(const char* word, const char* name, size_t len) {
  size_t k = 0;
  while (k < len && word[k] != '\0' && word[k] == name[k]) {
    k++;
  }
  return k == len && word[k] == '\0';
}

/* For each spec etb.ask:KEY = "TYPE,...": what get_runtime_spec<TYPE>(KEY) returned, in
   order, as etb.as_TYPE:KEY (or etb.as_TYPE_error:KEY) (docs/agent.md, probes). */
bool record_asks(ProbeRecord& rec, const BackendInitContext& context, Span<const BackendOption> specs) {
  for (size_t i = 0; i < specs.size(); i++) {
    const auto* list = std::get_if<std::array<char, executorch::runtime::kMaxOptionValueLength>>(&specs[i].value);
    if (list == nullptr || strncmp(specs[i].key, kAsk, sizeof kAsk - 1u) != 0) {
      continue;
    }
    const char* key = specs[i].key + (sizeof kAsk - 1u);
    const char* name = list->data();
    while (*name != '\0') {
      size_t len = 0;
      while (name[len] != '\0' && name[len] != ',') {
        len++;
      }
      for (const AskedType& asked : kAskedTypes) {
        etb_option_t found;
        if (is_word(asked.name, name, len) &&
            (!look_up(context, key, asked.type, asked.ok_prefix, asked.error_prefix, found) ||
             !append_record(rec, &found, 1u))) {
          return false;
        }
      }
      name += name[len] == ',' ? len + 1u : len;
    }
  }
  return true;
}

/* Appends the lookups of the keys `specs` hold more than once, at their first copy. */
bool record_lookups(ProbeRecord& rec, const BackendInitContext& context, Span<const BackendOption> specs) {
  for (size_t i = 0; i < specs.size(); i++) {
    size_t last = i;
    bool earlier = false;
    for (size_t j = 0; j < specs.size(); j++) {
      if (strcmp(specs[j].key, specs[i].key) == 0) {
        earlier = earlier || j < i;
        last = j;
      }
    }
    if (earlier || last == i) {
      continue;
    }
    etb_option_t found;
    if (!look_up(context, specs[i].key, type_of(specs[last]), kLookupOk, kLookupError, found) ||
        !append_record(rec, &found, 1u)) {
      return false;
    }
  }
  return true;
}

KeptOption* find_kept(const Probe* owner, const char* key) {
  KeptOption* kept = pools().kept;
  for (size_t k = 0; k < capacity().options_per_request; k++) {
    if (kept[k].owner == owner && strcmp(kept[k].option.key, key) == 0) {
      return &kept[k];
    }
  }
  return nullptr;
}

void forget_kept(const Probe* owner) {
  KeptOption* kept = pools().kept;
  for (size_t k = 0; k < capacity().options_per_request; k++) {
    if (owner == nullptr || kept[k].owner == owner) {
      kept[k].owner = nullptr;
    }
  }
}

}  // namespace

Probe::Probe(etb_str_t name) : records_{} { copy_id(name, name_); }

etb_str_t Probe::name_view() const { return text_view(name_); }

void Probe::forget_record() {
  for (ProbeRecord& rec : records_) {
    rec = ProbeRecord{};
  }
}

ProbeRecord& Probe::current() const { return records_[current_model]; }

void Probe::note_call() const {
  if (current().first_call == 0u) {
    current().first_call = ++call_clock;
  }
}

bool Probe::is_available() const { return true; }

Result<DelegateHandle*> Probe::init(BackendInitContext& context, FreeableBuffer* processed,
                                    ArrayRef<CompileSpec> compile_specs) const {
  (void)processed;
  (void)compile_specs;
  note_call();
  ProbeRecord& rec = current();
  Span<const BackendOption> specs = context.runtime_specs();
  if (rec.init_calls == 0u) {
    for (size_t k = 0; k < specs.size(); k++) {
      /* A later copy of a key is reported as it is (get_runtime_spec finds the first). */
      etb_option_t view = repeated(specs, k) ? option_view(specs[k]) : read_spec(context, specs[k]);
      if (!append_record(rec, &view, 1u)) {
        return Error::MemoryAllocationFailed;
      }
    }
    rec.spec_count = rec.received_count;
    if (!record_lookups(rec, context, specs) || !record_asks(rec, context, specs)) {
      return Error::MemoryAllocationFailed;
    }
  } else {
    bool same = specs.size() == rec.spec_count;
    for (size_t k = 0; same && k < specs.size(); k++) {
      etb_option_t view = repeated(specs, k) ? option_view(specs[k]) : read_spec(context, specs[k]);
      same = same_option(view, rec.received[k]);
    }
    rec.specs_diverged = rec.specs_diverged || !same;
  }
  rec.init_calls++;
  /* The handle is the probe: execute finds its record through it. */
  return static_cast<DelegateHandle*>(const_cast<Probe*>(this));
}

Error Probe::execute(BackendExecutionContext& context, DelegateHandle* handle, Span<EValue*> args) const {
  (void)context;
  (void)args;
  const Probe* self = static_cast<const Probe*>(handle);
  self->note_call();
  self->current().execute_calls++;
  return Error::Ok;
}

Error Probe::set_option(BackendOptionContext& context, const Span<BackendOption>& backend_options) {
  (void)context;
  note_call();
  current().set_calls++;
  for (size_t k = 0; k < backend_options.size(); k++) {
    etb_option_t view = option_view(backend_options[k]);
    if (!append_record(current(), &view, 1u)) {
      return Error::MemoryAllocationFailed;
    }
  }
  KeptOption* kept = pools().kept;
  for (size_t k = 0; k < backend_options.size(); k++) {
    KeptOption* slot = find_kept(this, backend_options[k].key);
    for (size_t i = 0; slot == nullptr && i < capacity().options_per_request; i++) {
      if (kept[i].owner == nullptr) {
        slot = &kept[i];
        slot->owner = this;
      }
    }
    if (slot == nullptr) {
      return Error::MemoryAllocationFailed;
    }
    slot->option = backend_options[k];
  }
  return Error::Ok;
}

/* Like real backends: fills the keys this probe holds, leaves the others as they are. */
Error Probe::get_option(BackendOptionContext& context, Span<BackendOption>& backend_options) {
  (void)context;
  note_call();
  current().get_calls++;
  for (size_t k = 0; k < backend_options.size(); k++) {
    const KeptOption* held = find_kept(this, backend_options[k].key);
    if (held != nullptr) {
      backend_options[k].value = held->option.value;
    }
  }
  return Error::Ok;
}

/* Delegate handles are the probe itself, so there is nothing to free. */
void Probe::destroy(DelegateHandle* handle) const { (void)handle; }

Probe* probe_create(etb_str_t name) {
  for (ProbeSlot& slot : slots) {
    if (!slot.in_use) {
      slot.in_use = true;
      return new (slot.storage) Probe(name);
    }
  }
  return nullptr;
}

void probe_release(Probe* probe) {
  for (ProbeSlot& slot : slots) {
    if (slot.in_use && slot.probe() == probe) {
      forget_kept(probe);
      probe->~Probe();
      slot.in_use = false;
    }
  }
}

Probe* probe_of(BackendInterface* backend) {
  for (ProbeSlot& slot : slots) {
    if (slot.in_use && static_cast<BackendInterface*>(slot.probe()) == backend) {
      return slot.probe();
    }
  }
  return nullptr;
}

void probes_begin_request() {
  for (ProbeSlot& slot : slots) {
    if (slot.in_use) {
      slot.probe()->forget_record();
    }
  }
  records_used = 0;
  call_clock = 0;
  current_model = 0;
  lookup_labels_used = 0;
}

void probes_set_model(size_t model) { current_model = model < MCU_MAX_MODELS ? model : 0u; }

void probes_reset() {
  probes_begin_request();
  forget_kept(nullptr);
}

size_t probes_called(size_t model, const Probe** out, size_t cap) {
  size_t n = 0;
  /* first_call values are 1..call_clock, each used by at most one (probe, model). */
  for (uint32_t order = 1; order <= call_clock && n < cap; order++) {
    for (ProbeSlot& slot : slots) {
      if (slot.in_use && slot.probe()->record(model).first_call == order) {
        out[n++] = slot.probe();
        break;
      }
    }
  }
  return n;
}

}  // namespace mcu
