// An LD_PRELOAD shim over the real ExecuTorch runtime (libexecutorch.so) that
// breaks option delivery the way a faulty runtime would, one fault at a time.
//
// It interposes the entry points the agent and the runtime itself call through
// the PLT: Program::load_method (every load path ends there), Module::load(map),
// Module::load_method and get_backend_class, which the runtime's method init and
// its global set_option / get_option call to find a backend: so every backend's
// init, execute, set_option and get_option go through a proxy.
// ETB_FAULT names the fault; unset (or "none") every call is forwarded as it is:
// the inert shim. The fault names are listed in kFaults. The agent loads several
// models at once on threads of its own (CONCURRENT): what the proxy and the
// interposers keep is guarded, and "a loading thread" is any thread but the main
// one. Used by
// tests/system/test_fault_injection.py, which measures whether the suites catch each.
#include <dlfcn.h>

#include <executorch/extension/module/module.h>
#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/executor/program.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <variant>
#include <vector>

namespace et = executorch::runtime;
using executorch::extension::module::Module;

namespace {

enum class Fault {
  None,
  DropBackend,              // Program::load_method: the first entry with options arrives empty
  SwapBackends,             // Program::load_method: the first two entries swap their lists
  ReorderOptions,           // Program::load_method: one entry's options arrive reversed
  TruncateString,           // init: string specs longer than 100 bytes cut to 100
  FlipBool,                 // init: bool specs false arrive true
  IntAsBool,                // init: int specs 0 and 1 arrive as bool
  SecondInitEmpty,          // init: a backend's second init in one load gets no specs
  DanglingCallerMap,        // Module::load keeps the caller's map, the lazy load reads it
  StaleMapAfterReload,      // Module::load(mapB) on a loaded module keeps serving mapA
  IgnoreExplicitEmptyMap,   // Module::load_method: an explicit empty map counts as none
  MergeExplicitWithStored,  // Module::load_method: the stored map fills in the explicit one
  LeakSpecsIntoGetOption,   // get_option: reads back the last init's runtime specs
  SetOptionDropsLast,       // set_option: the last option of a call is not delivered
  // Several models (the seam between loads, models and threads):
  StickySpecs,           // init: a backend's last specs reach a later init given none
  GlobalLeaksIntoSpecs,  // init: options set by set_option fill in keys the specs lack
  ThreadGetsOtherMap,    // Program::load_method on a loading thread: the previous thread's map
  RacingInitSpecs,       // init on a loading thread: the specs of the last other thread's init
  // Real backends (registered names ending in "Backend": XnnpackBackend, QnnBackend,
  // OpenvinoBackend), whose calls only the agent's records show:
  RealInitWithoutSpecs,  // init: a real backend gets no runtime specs
  // ... faults a real backend accepts silently (it loads and computes the same):
  RealValueChanged,        // init: an int spec 0..2 arrives as the next valid one ((v + 1) % 3)
  RealExtraKey,            // init: one more spec (num_threads = 1) after the real ones
  RealPartialList,         // init: of two or more specs, the last is not delivered
  RealReordered,           // init: two or more specs arrive reversed
  RealOtherModelsSpecs,    // init: the specs the backend's previous, different init got
  RealSetOptionSwallowed,  // set_option: a real backend is not called, Ok is returned
  RealGetOptionIgnored,    // get_option: a real backend is not called, values untouched
  RealGetValueChanged,     // get_option: every int OpenvinoBackend left arrives increased by 1
  // ... and one in what a delivered option does (an effect, not a delivery: see
  // tests/system/test_option_effects.py): the specs arrive exactly, the outputs change.
  RealOptionChangesOutput,  // execute: a real backend whose init got any spec writes -3.9e-32
  RealIgnoresCachePath,     // init: delivered exactly, the file at packed_cache_path is not kept
                            // into element 0 of its last float tensor argument (an output)
};

struct FaultName {
  const char* name;
  Fault fault;
};

constexpr FaultName kFaults[] = {
    {"none", Fault::None},
    {"drop_backend", Fault::DropBackend},
    {"swap_backends", Fault::SwapBackends},
    {"reorder_options", Fault::ReorderOptions},
    {"truncate_string", Fault::TruncateString},
    {"flip_bool", Fault::FlipBool},
    {"int_as_bool", Fault::IntAsBool},
    {"second_init_empty", Fault::SecondInitEmpty},
    {"dangling_caller_map", Fault::DanglingCallerMap},
    {"stale_map_after_reload", Fault::StaleMapAfterReload},
    {"ignore_explicit_empty_map", Fault::IgnoreExplicitEmptyMap},
    {"merge_explicit_with_stored", Fault::MergeExplicitWithStored},
    {"leak_specs_into_get_option", Fault::LeakSpecsIntoGetOption},
    {"set_option_drops_last", Fault::SetOptionDropsLast},
    {"sticky_specs", Fault::StickySpecs},
    {"global_leaks_into_specs", Fault::GlobalLeaksIntoSpecs},
    {"thread_gets_other_map", Fault::ThreadGetsOtherMap},
    {"racing_init_specs", Fault::RacingInitSpecs},
    {"real_init_without_specs", Fault::RealInitWithoutSpecs},
    {"real_value_changed", Fault::RealValueChanged},
    {"real_extra_key", Fault::RealExtraKey},
    {"real_partial_list", Fault::RealPartialList},
    {"real_reordered", Fault::RealReordered},
    {"real_other_models_specs", Fault::RealOtherModelsSpecs},
    {"real_set_option_swallowed", Fault::RealSetOptionSwallowed},
    {"real_get_option_ignored", Fault::RealGetOptionIgnored},
    {"real_get_value_changed", Fault::RealGetValueChanged},
    {"real_option_changes_output", Fault::RealOptionChangesOutput},
    {"real_ignores_cache_path", Fault::RealIgnoresCachePath},
};

Fault parse_fault() {
  const char* wanted = std::getenv("ETB_FAULT");
  if (wanted == nullptr || *wanted == '\0') {
    return Fault::None;
  }
  for (const FaultName& known : kFaults) {
    if (std::strcmp(known.name, wanted) == 0) {
      return known.fault;
    }
  }
  std::fprintf(stderr, "etb_fault_shim: unknown ETB_FAULT \"%s\"; known:", wanted);
  for (const FaultName& known : kFaults) {
    std::fprintf(stderr, " %s", known.name);
  }
  std::fprintf(stderr, "\n");
  std::abort();
}

Fault active() {
  static const Fault fault = parse_fault();
  return fault;
}

template <typename F>
F next_definition(const char* mangled) {
  void* symbol = dlsym(RTLD_NEXT, mangled);
  if (symbol == nullptr) {
    std::fprintf(stderr, "etb_fault_shim: %s not found after the shim: %s\n", mangled, dlerror());
    std::abort();
  }
  return reinterpret_cast<F>(symbol);
}

// A map and the option arrays it points to, owned together.
class MapCopy {
 public:
  MapCopy() = default;
  explicit MapCopy(const et::LoadBackendOptionsMap& from) {
    for (size_t i = 0; i < from.size(); ++i) {
      const auto entry = from.entry_at(i);
      add(entry.backend_id, std::vector<et::BackendOption>(entry.options.begin(), entry.options.end()));
    }
  }
  MapCopy(const MapCopy&) = delete;
  MapCopy& operator=(const MapCopy&) = delete;

  void add(const char* id, std::vector<et::BackendOption> options) {
    ids_.emplace_back(id);
    lists_.push_back(std::make_unique<std::vector<et::BackendOption>>(std::move(options)));
  }
  bool has(const char* id) const {
    for (const std::string& known : ids_) {
      if (known == id) {
        return true;
      }
    }
    return false;
  }
  std::vector<et::BackendOption>& list(size_t i) { return *lists_[i]; }
  size_t size() const { return ids_.size(); }

  // The runtime map over this copy's arrays (valid while the copy lives).
  const et::LoadBackendOptionsMap& map() {
    map_ = et::LoadBackendOptionsMap();
    for (size_t i = 0; i < ids_.size(); ++i) {
      (void)map_.set_options(ids_[i].c_str(), et::Span<et::BackendOption>(lists_[i]->data(), lists_[i]->size()));
    }
    return map_;
  }

 private:
  std::vector<std::string> ids_;
  std::vector<std::unique_ptr<std::vector<et::BackendOption>>> lists_;
  et::LoadBackendOptionsMap map_;
};

// Maps the shim hands the runtime must outlive the methods loaded with them.
// Models load on threads of their own (CONCURRENT), so keeping one is guarded.
MapCopy& keep(std::unique_ptr<MapCopy> copy) {
  static auto* maps = new std::vector<std::unique_ptr<MapCopy>>();
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  maps->push_back(std::move(copy));
  return *maps->back();
}

// The agent's main thread loads models in order; further threads load them concurrently.
// The shim is preloaded, so its static initialisers run on the main thread.
const std::thread::id g_main_thread = std::this_thread::get_id();

bool on_loading_thread() { return std::this_thread::get_id() != g_main_thread; }

// Specs handed to a backend in place of the ones the runtime gave: kept for the
// process's life, as a backend may hold on to them.
et::Span<const et::BackendOption> kept_specs(std::vector<et::BackendOption> specs) {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  auto* kept = new std::vector<et::BackendOption>(std::move(specs));
  return et::Span<const et::BackendOption>(kept->data(), kept->size());
}

bool same_key(const et::BackendOption& a, const et::BackendOption& b) {
  return std::strncmp(a.key, b.key, sizeof(a.key)) == 0;
}

// ---- specs rewritten at init ---------------------------------------------------

void rewrite(et::BackendOption& option, Fault fault) {
  if (fault == Fault::TruncateString) {
    if (auto* text = std::get_if<std::array<char, et::kMaxOptionValueLength>>(&option.value)) {
      if (strnlen(text->data(), text->size()) > 100) {
        (*text)[100] = '\0';
      }
    }
  } else if (fault == Fault::FlipBool) {
    if (auto* flag = std::get_if<bool>(&option.value); flag != nullptr && !*flag) {
      *flag = true;
    }
  } else if (fault == Fault::IntAsBool) {
    if (auto* number = std::get_if<int>(&option.value); number != nullptr && (*number == 0 || *number == 1)) {
      option.value = *number == 1;
    }
  }
}

bool same_options(const std::vector<et::BackendOption>& a, et::Span<const et::BackendOption> b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](const auto& x, const auto& y) {
           return same_key(x, y) && x.value == y.value;
         });
}

// Inits per backend name since the current Program::load_method began on this thread
// (a method's inits run on the thread that loads it).
std::map<std::string, int>& inits_in_this_load() {
  thread_local std::map<std::string, int> counts;
  return counts;
}

// ---- the backend proxy -----------------------------------------------------------

bool ends_with(const std::string& text, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return text.size() >= n && text.compare(text.size() - n, n, suffix) == 0;
}

class ProxyBackend final : public et::BackendInterface {
 public:
  ProxyBackend(std::string name, et::BackendInterface* real)
      : name_(std::move(name)), real_(real), is_real_(ends_with(name_, "Backend")) {}

  bool is_available() const override { return real_->is_available(); }

  et::Result<et::DelegateHandle*> init(et::BackendInitContext& context, et::FreeableBuffer* processed,
                                       et::ArrayRef<et::CompileSpec> compile_specs) const override {
    const Fault fault = active();
    const et::Span<const et::BackendOption> specs = context.runtime_specs();
    std::vector<et::BackendOption> handed(specs.begin(), specs.end());
    {
      std::lock_guard<std::mutex> lock(mutex_);
      last_specs_ = handed;
      if (fault == Fault::StickySpecs) {
        if (handed.empty()) {
          handed = sticky_;
        } else {
          sticky_ = handed;
        }
      } else if (fault == Fault::GlobalLeaksIntoSpecs) {
        for (const et::BackendOption& set : global_) {
          if (std::none_of(specs.begin(), specs.end(), [&](const et::BackendOption& o) { return same_key(o, set); })) {
            handed.push_back(set);
          }
        }
      } else if (fault == Fault::RacingInitSpecs && on_loading_thread()) {
        std::vector<et::BackendOption> own = handed;
        if (raced_by_ != std::thread::id() && raced_by_ != std::this_thread::get_id()) {
          handed = raced_;
        }
        raced_ = std::move(own);
        raced_by_ = std::this_thread::get_id();
      }
    }
    const int nth = ++inits_in_this_load()[name_];
    if ((fault == Fault::SecondInitEmpty && nth > 1) || (fault == Fault::RealInitWithoutSpecs && is_real_)) {
      handed.clear();
    }
    if (is_real_) {
      rewrite_real(handed, fault);
    }
    for (et::BackendOption& option : handed) {
      rewrite(option, fault);
    }
    if (fault == Fault::RealOptionChangesOutput && is_real_) {
      et::Result<et::DelegateHandle*> handle = real_->init(context, processed, compile_specs);
      if (handle.ok()) {  // a freed handle's address may come back: marked anew each time
        std::lock_guard<std::mutex> lock(mutex_);
        given_specs_.erase(std::remove(given_specs_.begin(), given_specs_.end(), *handle), given_specs_.end());
        if (!specs.empty()) {
          given_specs_.push_back(*handle);
        }
      }
      return handle;
    }
    if (fault == Fault::RealIgnoresCachePath && is_real_) {
      et::Result<et::DelegateHandle*> handle = real_->init(context, processed, compile_specs);
      for (const et::BackendOption& option : specs) {  // as if the backend never wrote it
        if (std::strcmp(option.key, "packed_cache_path") == 0) {
          if (const auto* path = std::get_if<std::array<char, et::kMaxOptionValueLength>>(&option.value)) {
            std::remove(path->data());
          }
        }
      }
      return handle;
    }
    if (same_options(handed, specs)) {
      return real_->init(context, processed, compile_specs);
    }
    et::BackendInitContext changed(context.get_runtime_allocator(), context.event_tracer(), context.get_method_name(),
                                   context.get_named_data_map(), kept_specs(std::move(handed)));
    return real_->init(changed, processed, compile_specs);
  }

  et::Error execute(et::BackendExecutionContext& context, et::DelegateHandle* handle,
                    et::Span<et::EValue*> args) const override {
    const et::Error error = real_->execute(context, handle, args);
    if (active() == Fault::RealOptionChangesOutput && error == et::Error::Ok && given_specs(handle)) {
      for (size_t i = args.size(); i-- > 0;) {
        if (args[i] != nullptr && args[i]->isTensor() &&
            args[i]->toTensor().scalar_type() == executorch::aten::ScalarType::Float &&
            args[i]->toTensor().numel() > 0) {
          args[i]->toTensor().mutable_data_ptr<float>()[0] = -3.9e-32f;
          break;
        }
      }
    }
    return error;
  }

  bool given_specs(et::DelegateHandle* handle) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return std::find(given_specs_.begin(), given_specs_.end(), handle) != given_specs_.end();
  }

  // The faults a real backend accepts silently, applied to what its init is handed.
  void rewrite_real(std::vector<et::BackendOption>& handed, Fault fault) const {
    if (fault == Fault::RealValueChanged) {
      for (et::BackendOption& option : handed) {
        if (auto* number = std::get_if<int>(&option.value); number != nullptr && *number >= 0 && *number <= 2) {
          *number = (*number + 1) % 3;
          break;
        }
      }
    } else if (fault == Fault::RealExtraKey) {
      et::BackendOption extra{};
      std::strncpy(extra.key, "num_threads", sizeof(extra.key) - 1);
      extra.value = 1;
      handed.push_back(extra);
    } else if (fault == Fault::RealPartialList && handed.size() > 1) {
      handed.pop_back();
    } else if (fault == Fault::RealReordered && handed.size() > 1) {
      std::reverse(handed.begin(), handed.end());
    } else if (fault == Fault::RealOtherModelsSpecs) {
      std::lock_guard<std::mutex> lock(mutex_);
      std::vector<et::BackendOption> own = handed;
      if (has_other_ && !same_options(other_, et::Span<const et::BackendOption>(own.data(), own.size()))) {
        handed = other_;
      }
      if (!has_other_ || !same_options(other_, et::Span<const et::BackendOption>(own.data(), own.size()))) {
        other_ = std::move(own);
        has_other_ = true;
      }
    }
  }

  et::Error set_option(et::BackendOptionContext& context, const et::Span<et::BackendOption>& options) override {
    if (active() == Fault::RealSetOptionSwallowed && is_real_) {
      return et::Error::Ok;
    }
    if (active() == Fault::SetOptionDropsLast && options.size() > 1) {
      const et::Span<et::BackendOption> fewer(options.data(), options.size() - 1);
      return real_->set_option(context, fewer);
    }
    const et::Error error = real_->set_option(context, options);
    if (active() == Fault::GlobalLeaksIntoSpecs && error == et::Error::Ok) {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const et::BackendOption& option : options) {
        auto held = std::find_if(global_.begin(), global_.end(),
                                 [&](const et::BackendOption& o) { return same_key(o, option); });
        if (held != global_.end()) {
          held->value = option.value;
        } else {
          global_.push_back(option);
        }
      }
    }
    return error;
  }

  et::Error get_option(et::BackendOptionContext& context, et::Span<et::BackendOption>& options) override {
    if (active() == Fault::RealGetOptionIgnored && is_real_) {
      return et::Error::Ok;
    }
    const et::Error error = real_->get_option(context, options);
    if (active() == Fault::RealGetValueChanged && name_ == "OpenvinoBackend") {
      // After the backend returned: on the way back to get_option's caller.
      for (et::BackendOption& option : options) {
        if (const int* value = std::get_if<int>(&option.value)) {
          option.value = *value + 1;
        }
      }
    }
    if (active() == Fault::LeakSpecsIntoGetOption) {
      std::lock_guard<std::mutex> lock(mutex_);
      for (et::BackendOption& wanted : options) {
        for (const et::BackendOption& spec : last_specs_) {
          if (std::strncmp(wanted.key, spec.key, sizeof(wanted.key)) == 0) {
            wanted.value = spec.value;
          }
        }
      }
    }
    return error;
  }

  void destroy(et::DelegateHandle* handle) const override { real_->destroy(handle); }

 private:
  const std::string name_;
  et::BackendInterface* const real_;
  const bool is_real_;
  // Loads run init on several threads at once: what a fault keeps is guarded.
  mutable std::mutex mutex_;
  mutable std::vector<et::DelegateHandle*> given_specs_;  // RealOptionChangesOutput
  mutable std::vector<et::BackendOption> last_specs_;     // LeakSpecsIntoGetOption
  mutable std::vector<et::BackendOption> sticky_;         // StickySpecs: the last non-empty specs
  std::vector<et::BackendOption> global_;                 // GlobalLeaksIntoSpecs: what set_option set
  mutable std::vector<et::BackendOption> raced_;          // RacingInitSpecs: the last loading thread's
  mutable std::thread::id raced_by_;                      // specs, and that thread
  mutable std::vector<et::BackendOption> other_;          // RealOtherModelsSpecs: the previous
  mutable bool has_other_ = false;                        // different specs
};

// ---- proof that the interposers ran -----------------------------------------------

// Calls per interposed entry point; written at exit to $ETB_FAULT_SHIM_LOG (one
// line per agent process) so a test can tell the shim really sat in the agent.
enum Counter { kProgramLoadMethod, kModuleLoad, kModuleLoadMethod, kGetBackendClass, kCounters };
std::atomic<unsigned> g_calls[kCounters];

void count(Counter which) { g_calls[which].fetch_add(1, std::memory_order_relaxed); }

__attribute__((destructor)) void write_counts() {
  const char* log = std::getenv("ETB_FAULT_SHIM_LOG");
  if (log == nullptr || *log == '\0') {
    return;
  }
  if (FILE* out = std::fopen(log, "a")) {
    std::fprintf(out, "fault=%s program_load_method=%u module_load=%u module_load_method=%u get_backend_class=%u\n",
                 std::getenv("ETB_FAULT") ? std::getenv("ETB_FAULT") : "none", g_calls[kProgramLoadMethod].load(),
                 g_calls[kModuleLoad].load(), g_calls[kModuleLoadMethod].load(), g_calls[kGetBackendClass].load());
    std::fclose(out);
  }
}

// ---- Module state the Module faults need -------------------------------------------

std::mutex g_mutex;
// DanglingCallerMap: the caller's map of the last Module::load(map), per module.
std::map<const Module*, const et::LoadBackendOptionsMap*> g_caller_maps;
// StaleMapAfterReload: the first map each module stored.
std::map<const Module*, MapCopy*> g_first_maps;

}  // namespace

// ---- the interposed definitions ------------------------------------------------------

namespace executorch {
namespace runtime {

BackendInterface* get_backend_class(const char* name) {
  using Real = BackendInterface* (*)(const char*);
  static const Real real = next_definition<Real>("_ZN10executorch7runtime17get_backend_classEPKc");
  count(kGetBackendClass);
  BackendInterface* backend = real(name);
  if (backend == nullptr) {
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  static auto* proxies = new std::map<BackendInterface*, std::unique_ptr<ProxyBackend>>();
  auto found = proxies->find(backend);
  if (found == proxies->end()) {
    found = proxies->emplace(backend, std::make_unique<ProxyBackend>(name, backend)).first;
  }
  return found->second.get();
}

Result<Method> Program::load_method(const char* method_name, MemoryManager* memory_manager, EventTracer* event_tracer,
                                    const NamedDataMap* named_data_map, const LoadBackendOptionsMap* backend_options,
                                    Span<const Kernel> kernels) const {
  using Real = Result<Method> (*)(const Program*, const char*, MemoryManager*, EventTracer*, const NamedDataMap*,
                                  const LoadBackendOptionsMap*, Span<const Kernel>);
  static const Real real = next_definition<Real>(
      "_ZNK10executorch7runtime7Program11load_methodEPKcPNS0_13MemoryManagerEPNS0_11EventTracerEPKNS0_"
      "12NamedDataMapEPKNS0_21LoadBackendOptionsMapENS0_4SpanIKNS0_6KernelEEE");
  count(kProgramLoadMethod);
  inits_in_this_load().clear();
  const Fault fault = active();
  if (fault == Fault::ThreadGetsOtherMap && on_loading_thread()) {
    // One slot for the whole process, as if the map were handed over through a global.
    static std::mutex mutex;
    static MapCopy* previous = nullptr;
    static std::thread::id previous_by;
    // The slot's copy is read only under the lock; the one handed on is a fresh copy.
    MapCopy& mine = backend_options != nullptr ? keep(std::make_unique<MapCopy>(*backend_options))
                                               : keep(std::make_unique<MapCopy>());
    MapCopy* handed = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (previous != nullptr && previous_by != std::this_thread::get_id()) {
        handed = &keep(std::make_unique<MapCopy>(previous->map()));
      }
      previous = &mine;
      previous_by = std::this_thread::get_id();
    }
    if (handed == nullptr) {
      return real(this, method_name, memory_manager, event_tracer, named_data_map, backend_options, kernels);
    }
    return real(this, method_name, memory_manager, event_tracer, named_data_map, &handed->map(), kernels);
  }
  if (backend_options == nullptr ||
      (fault != Fault::DropBackend && fault != Fault::SwapBackends && fault != Fault::ReorderOptions)) {
    return real(this, method_name, memory_manager, event_tracer, named_data_map, backend_options, kernels);
  }
  MapCopy& copy = keep(std::make_unique<MapCopy>(*backend_options));
  if (fault == Fault::DropBackend) {
    for (size_t i = 0; i < copy.size(); ++i) {
      if (!copy.list(i).empty()) {
        copy.list(i).clear();
        break;
      }
    }
  } else if (fault == Fault::SwapBackends && copy.size() >= 2) {
    std::swap(copy.list(0), copy.list(1));
  } else if (fault == Fault::ReorderOptions) {
    for (size_t i = 0; i < copy.size(); ++i) {
      if (copy.list(i).size() >= 2) {
        std::reverse(copy.list(i).begin(), copy.list(i).end());
        break;
      }
    }
  }
  return real(this, method_name, memory_manager, event_tracer, named_data_map, &copy.map(), kernels);
}

}  // namespace runtime

namespace extension {
namespace module {

runtime::Error Module::load(const LoadBackendOptionsMap& backend_options, const Program::Verification verification) {
  using Real = runtime::Error (*)(Module*, const LoadBackendOptionsMap&, Program::Verification);
  static const Real real = next_definition<Real>(
      "_ZN10executorch9extension6module6Module4loadERKNS_7runtime21LoadBackendOptionsMapENS3_7Program12VerificationE");
  count(kModuleLoad);
  const Fault fault = active();
  if (fault == Fault::DanglingCallerMap) {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_caller_maps[this] = &backend_options;  // the pre-fix Module kept this raw pointer
  }
  if (fault == Fault::StaleMapAfterReload) {
    MapCopy* first = nullptr;
    {
      std::lock_guard<std::mutex> lock(g_mutex);
      auto found = g_first_maps.find(this);
      if (found == g_first_maps.end()) {
        g_first_maps[this] = &keep(std::make_unique<MapCopy>(backend_options));
      } else {
        first = found->second;
      }
    }
    if (first != nullptr) {
      return real(this, first->map(), verification);
    }
  }
  return real(this, backend_options, verification);
}

runtime::Error Module::load_method(const std::string& method_name, runtime::HierarchicalAllocator* planned_memory,
                                   torch::executor::EventTracer* event_tracer,
                                   const LoadBackendOptionsMap* backend_options,
                                   std::vector<runtime::Kernel> kernel_registry) {
  using Real =
      runtime::Error (*)(Module*, const std::string&, runtime::HierarchicalAllocator*, torch::executor::EventTracer*,
                         const LoadBackendOptionsMap*, std::vector<runtime::Kernel>);
  static const Real real = next_definition<Real>(
      "_ZN10executorch9extension6module6Module11load_methodERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEEPNS_"
      "7runtime21HierarchicalAllocatorEPNSB_11EventTracerEPKNSB_21LoadBackendOptionsMapESt6vectorINSB_6KernelESaISK_"
      "EE");
  count(kModuleLoadMethod);
  const Fault fault = active();
  const LoadBackendOptionsMap* options = backend_options;
  if (fault == Fault::DanglingCallerMap && options == nullptr) {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto found = g_caller_maps.find(this);
    if (found != g_caller_maps.end()) {
      options = found->second;  // read once, right after Module::load, then forgotten
      g_caller_maps.erase(found);
    }
  } else if (fault == Fault::IgnoreExplicitEmptyMap && options != nullptr && options->size() == 0) {
    options = nullptr;
  } else if (fault == Fault::MergeExplicitWithStored && options != nullptr) {
    MapCopy& merged = keep(std::make_unique<MapCopy>(*options));
    const LoadBackendOptionsMap& stored = this->backend_options();
    for (size_t i = 0; i < stored.size(); ++i) {
      const auto entry = stored.entry_at(i);
      if (!merged.has(entry.backend_id)) {
        merged.add(entry.backend_id, std::vector<runtime::BackendOption>(entry.options.begin(), entry.options.end()));
      }
    }
    options = &merged.map();
  }
  return real(this, method_name, planned_memory, event_tracer, options, std::move(kernel_registry));
}

}  // namespace module
}  // namespace extension
}  // namespace executorch
