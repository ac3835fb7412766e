// Every op direction of the manifest (opreg/op_manifest.h) as a Python function, derived from its
// X-macros: a new op adds no line here. Each function takes the op's tensors in the manifest's
// order (inputs, then the caller's outputs; None for an absent optional one) as any DLPack-capable
// object, imported without a copy on its own device, then the op's scalars as keywords with the
// manifest's defaults, then `device` (run there through host copies, as `opreg run` does) and
// `stream` (the CUDA stream or queue handle to run on; 0: the device's default).
#include <Python.h>
#include <fmt/format.h>
#include <nanobind/stl/string.h>

#include <chrono>
#include <deque>
#include <cstdint>
#include <optional>
#include <span>
#include <array>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "module.h"
#include "opreg/dlpack.h"
#include "opreg/ops.h"

namespace opreg::py {
namespace {

// What one call returns: which variant ran, and how the data got there.
struct CallResult {
  const VariantInfo* variant = nullptr;
  bool fell_back = false;  // the registry ran a cpu variant through host copies (fallback policy)
  bool copied = false;     // `device=` moved the tensors to that device and the outputs back
  Device device;
  std::string variant_name() const { return variant != nullptr ? variant->name : std::string(); }
};

// Bumped when a plugin loads (registry.cpp), so that cached DLPack device lookups are redone.
}  // namespace
std::uint64_t g_registry_generation = 0;
namespace {

// torch's tensor types and dtypes, found once torch is imported (opreg never imports it).
struct TorchTypes {
  PyTypeObject* tensor = nullptr;
  PyTypeObject* parameter = nullptr;
  std::array<std::pair<PyObject*, DType>, 3> dtypes{};
  PyObject* s_dtype = PyUnicode_InternFromString("dtype");
  PyObject* s_is_cpu = PyUnicode_InternFromString("is_cpu");
  PyObject* s_is_cuda = PyUnicode_InternFromString("is_cuda");
  PyObject* s_get_device = PyUnicode_InternFromString("get_device");
  PyObject* s_shape = PyUnicode_InternFromString("shape");
  PyObject* s_is_contiguous = PyUnicode_InternFromString("is_contiguous");
  PyObject* s_stride = PyUnicode_InternFromString("stride");
  PyObject* s_data_ptr = PyUnicode_InternFromString("data_ptr");

  bool ready() {
    if (tensor != nullptr) return true;
    PyObject* module = PyImport_GetModule(nb::str("torch").ptr());  // new reference or null, no import
    if (module == nullptr) {
      PyErr_Clear();
      return false;
    }
    nb::object torch = nb::steal(module);
    if (!nb::hasattr(torch, "Tensor") || !nb::hasattr(torch, "nn") || !nb::hasattr(torch, "bfloat16")) return false;
    dtypes = {{{torch.attr("float32").inc_ref().ptr(), DType::f32},
               {torch.attr("float16").inc_ref().ptr(), DType::f16},
               {torch.attr("bfloat16").inc_ref().ptr(), DType::bf16}}};
    parameter = reinterpret_cast<PyTypeObject*>(torch.attr("nn").attr("Parameter").inc_ref().ptr());
    tensor = reinterpret_cast<PyTypeObject*>(torch.attr("Tensor").inc_ref().ptr());
    return true;
  }
  bool dtype_of(PyObject* dt, DType& out) const {
    for (const auto& [object, dtype] : dtypes) {
      if (object == dt) {
        out = dtype;
        return true;
      }
    }
    return false;  // another dtype: DLPack's path says what it is and what is accepted
  }
};

// torch's caching allocator as the scratch allocator of calls on torch's CUDA tensors
// (ExecContext::scratch): their kernels' scratch (dW/dB partials) then counts in
// torch.cuda.memory_stats and, under CUDA graph capture, comes from the graph's pool. Through
// torch.cuda.caching_allocator_alloc / _delete, looked up once (the module does not link torch);
// the GIL is held, as the op call never releases it. The block goes back right after the launch,
// which torch's stream-ordered allocator makes safe: only later work on that stream reuses it.
class TorchScratch {
 public:
  // Set up on the first call that imported a torch CUDA tensor, so torch is imported by then.
  static const ScratchAllocator* get() {
    static TorchScratch* scratch = nullptr;  // never freed: it outlives the interpreter's objects
    if (scratch == nullptr) {
      nb::object cuda = nb::module_::import_("torch.cuda");
      auto* made = new TorchScratch();
      made->alloc_ = cuda.attr("caching_allocator_alloc").inc_ref().ptr();
      made->free_ = cuda.attr("caching_allocator_delete").inc_ref().ptr();
      scratch = made;
    }
    return &scratch->allocator_;
  }

 private:
  // A Python error (torch's OutOfMemoryError) propagates: the op call raises it.
  static void* allocate(void* self, std::size_t bytes, int device, void* stream) {
    auto& s = *static_cast<TorchScratch*>(self);
    nb::object ptr = nb::steal(PyObject_CallFunction(s.alloc_, "nin", static_cast<Py_ssize_t>(bytes), device,
                                                     static_cast<Py_ssize_t>(reinterpret_cast<std::intptr_t>(stream))));
    if (!ptr.is_valid()) throw nb::python_error();
    void* data = PyLong_AsVoidPtr(ptr.ptr());
    if (PyErr_Occurred() != nullptr) throw nb::python_error();
    return data;
  }
  // Must not throw (a lease's destructor): a failure is reported as unraisable.
  static void deallocate(void* self, void* ptr, std::size_t /*bytes*/, int /*device*/, void* /*stream*/) {
    auto& s = *static_cast<TorchScratch*>(self);
    PyObject* address = PyLong_FromVoidPtr(ptr);
    PyObject* done = address != nullptr ? PyObject_CallOneArg(s.free_, address) : nullptr;
    Py_XDECREF(address);
    if (done == nullptr) {
      PyErr_WriteUnraisable(s.free_);
      return;
    }
    Py_DECREF(done);
  }

  PyObject* alloc_ = nullptr;
  PyObject* free_ = nullptr;
  ScratchAllocator allocator_{&allocate, &deallocate, this};
};

// The tensors and scalars of one call as they are gathered, in manifest order.
class CallState {
 public:
  CallState(const char* op, nb::handle device) : op_(op), registry_(default_registry()) {
    if (!device.is_none()) {
      if (!nb::isinstance<nb::str>(device)) {
        throw Error(ErrorKind::invalid_argument,
                    fmt::format("{}: device must be a string such as 'npu' or 'cuda:1', got {}", op,
                                nb::type_name(device.type()).c_str()));
      }
      target_ = registry_.parse_device(text_argument(device, fmt::format("{}: device", op)));
      registry_.check_device(*target_);
    }
  }

  void tensor(Tensor& slot, nb::handle object, const char* name, Role role) {
    if (object.is_none()) return;  // an absent optional tensor; the op's check says if it may be
    slot = import(object, name, torch_cuda_);
    if (!target_ || slot.device() == *target_) return;
    if (slot.device() != Device{}) {
      throw Error(ErrorKind::invalid_argument,
                  fmt::format("{}: {} is on {}; device='{}' copies from host tensors only", op_, name,
                              registry_.device_name(slot.device()), registry_.device_name(*target_)));
    }
    to_move_.push_back({&slot, name, role});
  }

  // With `device=`: every check of the caller's own tensors (the op's: shapes, dtypes, outputs
  // that overlap other tensors, read-only outputs; and the contiguity of the outputs the copies
  // come back into) runs on them before anything is copied or run, so a refused call changes
  // nothing. Only then are the inputs copied to the device and the outputs made there.
  template <class Args>
  void prepare(const Op<Args>& op, Args& args) {
    if (to_move_.empty()) return;
    op.def().check(op.def(), &args);
    for (const Pending& p : to_move_) {
      if (p.role == Role::out && !p.slot->is_contiguous()) {
        throw Error(ErrorKind::invalid_argument,
                    fmt::format("{}: output {} is not contiguous (strides [{}]); device='{}' copies results back "
                                "into contiguous tensors only: pass a contiguous one",
                                op_, p.name, strides_text(*p.slot), registry_.device_name(*target_)));
      }
    }
    for (const Pending& p : to_move_) {
      Tensor moved;
      if (p.role == Role::in) {
        moved = p.slot->to(*target_, registry_);
      } else {
        moved = Tensor::empty(p.slot->shape(), p.slot->dtype(), *target_, registry_);
        written_back_.push_back({p.slot, *p.slot});
      }
      *p.slot = std::move(moved);
      copied_ = true;
    }
    to_move_.clear();
  }

  Rounding rounding(nb::handle value) {
    return parse_rounding(text_argument(value, fmt::format("{}: rounding", op_)), op_);
  }

  RopeStyle rope_style(nb::handle value) {
    return parse_rope_style(text_argument(value, fmt::format("{}: style", op_)), op_);
  }

  Casting casting(nb::handle value) {
    const std::string text = text_argument(value, fmt::format("{}: casting", op_));
    try {
      return parse_casting(text);
    } catch (const Error& e) {
      throw Error(e.kind(), fmt::format("{}: {}", op_, e.what()));
    }
  }

  template <class Args>
  CallResult run(const Op<Args>& op, const Args& args, std::uintptr_t stream) {
    if (stream > 2) check_stream(op, args, stream);
    ExecContext ctx{reinterpret_cast<void*>(stream)};
    // torch's CUDA tensors, run where they are: scratch from torch's allocator (copied_: the
    // call runs elsewhere, on copies opreg made).
    if (torch_cuda_ && !copied_) ctx.scratch = TorchScratch::get();
    const DispatchResult r = registry_.call(op, args, stream != 0 || ctx.scratch != nullptr ? &ctx : nullptr);
    for (auto& [slot, host] : written_back_) host.copy_from(*slot, registry_);
    const Device device = call_device(op, args);
    return {r.variant, r.fell_back, copied_, device};
  }

  template <class Args>
  nb::dict explain(const Op<Args>& op, const Args& args) {
    std::string why;
    const VariantInfo* chosen = registry_.choose(op, args, &why);
    const Device device = call_device(op, args);
    // choose() says "<how>; rejected <variant>: <reason>; ..." (the OPREG_VERBOSE=2 lines).
    std::vector<std::string> parts;
    for (std::size_t at = 0;;) {
      const std::size_t next = why.find("; rejected ", at);
      parts.push_back(why.substr(at, next == std::string::npos ? std::string::npos : next - at));
      if (next == std::string::npos) break;
      at = next + 2;
    }
    nb::list rejected;
    std::string how;
    for (const std::string& part : parts) {
      if (part.rfind("rejected ", 0) == 0) {
        const std::string rest = part.substr(9);
        const std::size_t colon = rest.find(": ");
        nb::dict r;
        r["variant"] = rest.substr(0, colon);
        r["reason"] = colon == std::string::npos ? std::string() : rest.substr(colon + 2);
        rejected.append(r);
      } else {
        how += (how.empty() ? "" : "; ") + part;
      }
    }
    const std::string label = registry_.device_label(device);
    nb::list lines;
    if (chosen != nullptr) {
      lines.append(fmt::format("opreg: dispatch {} on {} -> {} ({})", op.name(), label, chosen->name, how));
    } else {
      lines.append(fmt::format("opreg: {} on {}: no variant would run ({})", op.name(), label, how));
    }
    for (auto r : rejected) {
      lines.append(fmt::format("opreg:   rejected {}: {}", nb::cast<std::string>(r["variant"]),
                               nb::cast<std::string>(r["reason"])));
    }
    nb::dict out;
    out["op"] = std::string(op.name());
    out["device"] = registry_.device_name(device);
    out["emulated"] = registry_.device_props(device).emulated;
    out["variant"] = chosen != nullptr ? nb::cast(chosen->name) : nb::none();
    out["how"] = how;
    out["rejected"] = rejected;
    out["copied"] = copied_;
    out["text"] = nb::str("\n").attr("join")(lines);
    return out;
  }

 private:
  Tensor import(nb::handle object, const char* name, bool& torch_cuda) {
    if (Tensor t; import_torch(object.ptr(), t)) {
      if (t.device() != Device{}) torch_cuda = true;  // import_torch takes cpu and cuda tensors only
      return t;
    }
    return import_dlpack(object, name);
  }

  // torch.Tensor (and nn.Parameter), read directly: the facts DLPack would carry (pointer, shape,
  // strides, dtype, device) at a third of torch's __dlpack__ cost, which is most of a call's.
  // Anything else of torch's (other devices, dtypes, subclasses) takes the DLPack path.
  static bool import_torch(PyObject* object, Tensor& out) {
    static TorchTypes torch;
    if (!torch.ready() || (Py_TYPE(object) != torch.tensor && Py_TYPE(object) != torch.parameter)) return false;
    DType dtype{};
    {
      nb::object dt = nb::steal(PyObject_GetAttr(object, torch.s_dtype));
      if (!dt.is_valid()) throw nb::python_error();
      if (!torch.dtype_of(dt.ptr(), dtype)) return false;
    }
    Device device{};
    nb::object is_cpu = nb::steal(PyObject_GetAttr(object, torch.s_is_cpu));
    if (!is_cpu.is_valid()) throw nb::python_error();
    if (is_cpu.ptr() != Py_True) {
      nb::object is_cuda = nb::steal(PyObject_GetAttr(object, torch.s_is_cuda));
      if (!is_cuda.is_valid()) throw nb::python_error();
      if (is_cuda.ptr() != Py_True) return false;
      nb::object index = nb::steal(PyObject_CallMethodNoArgs(object, torch.s_get_device));
      if (!index.is_valid()) throw nb::python_error();
      device = device_of(DLDevice{kDLCUDA, static_cast<std::int32_t>(PyLong_AsLong(index.ptr()))});
    }
    nb::object shape = nb::steal(PyObject_GetAttr(object, torch.s_shape));
    if (!shape.is_valid() || !PyTuple_Check(shape.ptr())) return false;
    const Py_ssize_t ndim = PyTuple_GET_SIZE(shape.ptr());
    if (ndim > kMaxDims) return false;
    std::array<std::int64_t, kMaxDims> dims{};
    for (Py_ssize_t d = 0; d < ndim; ++d) dims[static_cast<std::size_t>(d)] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape.ptr(), d));
    std::array<std::int64_t, kMaxDims> strides{};
    std::span<const std::int64_t> stride_span;
    nb::object contiguous = nb::steal(PyObject_CallMethodNoArgs(object, torch.s_is_contiguous));
    if (!contiguous.is_valid()) throw nb::python_error();
    if (contiguous.ptr() != Py_True) {
      nb::object st = nb::steal(PyObject_CallMethodNoArgs(object, torch.s_stride));
      if (!st.is_valid() || !PyTuple_Check(st.ptr()) || PyTuple_GET_SIZE(st.ptr()) != ndim) return false;
      for (Py_ssize_t d = 0; d < ndim; ++d) strides[static_cast<std::size_t>(d)] = PyLong_AsLongLong(PyTuple_GET_ITEM(st.ptr(), d));
      stride_span = {strides.data(), static_cast<std::size_t>(ndim)};
    }
    nb::object ptr = nb::steal(PyObject_CallMethodNoArgs(object, torch.s_data_ptr));
    if (!ptr.is_valid()) throw nb::python_error();
    void* data = PyLong_AsVoidPtr(ptr.ptr());
    if (PyErr_Occurred() != nullptr) throw nb::python_error();
    out = Tensor::wrap(data, Shape(std::span<const std::int64_t>(dims.data(), static_cast<std::size_t>(ndim))), dtype,
                       device, stride_span);
    return true;
  }

  // The device of a DLPack device: the registry's answer (Registry::backends() and a check that
  // one backend claims the type, costly per tensor) cached per device type and registry
  // generation (a plugin loaded later may add a backend).
  static Device device_of(DLDevice dl) {
    static std::array<int, 32> backend_of{};  // device type -> backend id + 1; 0: not looked up
    static std::uint64_t generation = 0;
    if (generation != g_registry_generation) {
      backend_of.fill(0);
      generation = g_registry_generation;
    }
    const auto type = static_cast<std::size_t>(dl.device_type);
    if (type >= backend_of.size() || backend_of[type] == 0) {
      const Device found = from_dlpack_device(dl, default_registry());
      if (type < backend_of.size()) backend_of[type] = found.backend + 1;
      return found;
    }
    if (dl.device_id < 0 || dl.device_id > INT16_MAX) return from_dlpack_device(dl, default_registry());  // its error
    return Device{static_cast<BackendId>(backend_of[type] - 1), static_cast<std::int16_t>(dl.device_id)};
  }

  // The DLPack exchange (legacy capsule: every producer since DLPack 0.x gives one). The opreg
  // tensor takes the capsule's DLManagedTensor (its deleter runs when the last view is gone).
  Tensor import_dlpack(nb::handle object, const char* name) {
    static PyObject* method = PyUnicode_InternFromString("__dlpack__");
    PyObject* capsule = PyObject_CallMethodNoArgs(object.ptr(), method);
    if (capsule == nullptr) {
      const bool missing = PyErr_ExceptionMatches(PyExc_AttributeError) != 0;
      if (!missing) throw nb::python_error();
      PyErr_Clear();
      throw Error(ErrorKind::invalid_argument,
                  fmt::format("{}: {} is a {}, not a tensor; accepted: a DLPack-capable tensor (torch.Tensor, "
                              "numpy.ndarray, ...) or None for an absent optional one",
                              op_, name, nb::type_name(object.type()).c_str()));
    }
    nb::object owner = nb::steal(capsule);
    auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
    if (managed == nullptr) {
      PyErr_Clear();
      throw Error(ErrorKind::invalid_argument,
                  fmt::format("{}: {}: __dlpack__ did not return an unused 'dltensor' capsule", op_, name));
    }
    Tensor t;
    try {
      t = from_dlpack(managed, device_of(managed->dl_tensor.device), registry_);
    } catch (const Error& e) {
      throw Error(e.kind(), fmt::format("{}: {}: {}", op_, name, e.what()));
    }
    PyCapsule_SetName(capsule, "used_dltensor");  // ours now: the capsule must not delete it
    return t;
  }

  // A caller's stream on a cuda device goes to the CUDA driver, which reads through it: a made-up,
  // destroyed or garbage handle kills the process (seen on an H200: cudaStreamQuery, a launch or
  // cudaStreamGetFlags on 3, 0x1234, a destroyed stream or heap bytes: SIGSEGV). No CUDA call
  // checks a handle without that read, so one is taken only where it can be checked otherwise:
  // 0 (the default stream), 1 (cudaStreamLegacy), 2 (cudaStreamPerThread), or the current stream
  // on that device of the framework the tensors come from (torch, CuPy): what opreg.torch passes,
  // and what `with torch.cuda.stream(s):` makes current. Other devices' backends check their own
  // handles (xpu: only queues it made) or have none (cpu, npu).
  template <class Args>
  void check_stream(const Op<Args>& op, const Args& args, std::uintptr_t stream) {
    const Device device = call_device(op, args);
    if (registry_.backend(device.backend).name() != "cuda") return;
    for (const char* framework : {"torch", "cupy"}) {
      if (current_stream_of(framework, device.index) == stream) return;
    }
    throw Error(ErrorKind::invalid_argument,
                fmt::format("{}: stream {:#x} on {} cannot be checked without the CUDA driver reading through it (a "
                            "stale or made-up handle would crash the process); accepted: 0 (the default stream), 1 "
                            "(cudaStreamLegacy), 2 (cudaStreamPerThread), or the current stream of the tensors' "
                            "framework on that device (torch.cuda.current_stream().cuda_stream; `with "
                            "torch.cuda.stream(s):` makes s current)",
                            op_, stream, registry_.device_name(device)));
  }

  // The framework's current raw stream on CUDA device `index`; 0 when it is not imported or does
  // not say.
  static std::uintptr_t current_stream_of(const char* framework, int index) {
    PyObject* module = PyImport_GetModule(nb::str(framework).ptr());  // no import
    if (module == nullptr) {
      PyErr_Clear();
      return 0;
    }
    nb::object m = nb::steal(module);
    try {
      nb::object raw;
      if (std::string_view(framework) == "torch") {
        raw = m.attr("_C").attr("_cuda_getCurrentRawStream")(index);
      } else {
        nb::object device = m.attr("cuda").attr("Device")(index);
        device.attr("__enter__")();
        raw = m.attr("cuda").attr("get_current_stream")().attr("ptr");
        device.attr("__exit__")(nb::none(), nb::none(), nb::none());
      }
      const unsigned long long value = PyLong_AsUnsignedLongLong(raw.ptr());
      if (PyErr_Occurred() != nullptr) {
        PyErr_Clear();
        return 0;
      }
      return static_cast<std::uintptr_t>(value);
    } catch (const nb::python_error&) {
      return 0;  // a torch without CUDA, an older CuPy: not verified by it
    }
  }

  // The device the call ran (or would run) on: its first defined tensor's, else device='s.
  template <class Args>
  Device call_device(const Op<Args>& op, const Args& args) const {
    for (int i = 0; i < op.def().field_count; ++i) {
      if (const Tensor& t = op.def().tensor(&args, i); t.defined()) return t.device();
    }
    return target_.value_or(Device{});
  }

  static std::string strides_text(const Tensor& t) {
    std::string out;
    for (int d = 0; d < t.ndim(); ++d) out += fmt::format("{}{}", d == 0 ? "" : ", ", t.stride(d));
    return out;
  }

  struct Pending {
    Tensor* slot;
    const char* name;
    Role role;
  };
  const char* op_;
  Registry& registry_;
  std::optional<Device> target_;
  std::vector<Pending> to_move_;  // device=: the caller's host tensors to copy there (prepare())
  bool copied_ = false;
  bool torch_cuda_ = false;  // a torch.Tensor on a CUDA device was among the call's tensors
  std::vector<std::pair<Tensor*, Tensor>> written_back_;  // device output slot, the caller's host tensor
};

// ---- The manifest, expanded per argument struct: the parameter types, how each is stored into
// the struct, and the Python parameter list.
struct Skip {};
template <class... T>
struct TypeList {};

#define OPREG_PY_T_TYPE_(name, role, kind, when, partner) , nb::handle
#define OPREG_PY_S_TYPE_f64 , double
#define OPREG_PY_S_TYPE_i64 , std::int64_t
#define OPREG_PY_S_TYPE_casting , nb::handle
#define OPREG_PY_S_TYPE_rounding , nb::handle
#define OPREG_PY_S_TYPE_rope_style , nb::handle
#define OPREG_PY_S_TYPE_pad32
#define OPREG_PY_S_TYPE_(type, name, value, key) OPREG_PY_S_TYPE_##type

#define OPREG_PY_T_SET_(name, role, kind, when, partner) \
  , [](Args& a, nb::handle h, CallState& s) { s.tensor(a.name, h, #name, Role::role); }
#define OPREG_PY_S_SET_f64(name) , [](Args& a, double v, CallState&) { a.name = v; }
#define OPREG_PY_S_SET_i64(name) , [](Args& a, std::int64_t v, CallState&) { a.name = v; }
#define OPREG_PY_S_SET_casting(name) , [](Args& a, nb::handle v, CallState& s) { a.name = s.casting(v); }
#define OPREG_PY_S_SET_rounding(name) \
  , [](Args& a, nb::handle v, CallState& s) { a.name = s.rounding(v); }
#define OPREG_PY_S_SET_rope_style(name) \
  , [](Args& a, nb::handle v, CallState& s) { a.name = s.rope_style(v); }
#define OPREG_PY_S_SET_pad32(name)
#define OPREG_PY_S_SET_(type, name, value, key) OPREG_PY_S_SET_##type(name)

#define OPREG_PY_T_ARG_(name, role, kind, when, partner) , nb::arg(#name).none()
#define OPREG_PY_S_ARG_f64(name, value) , nb::arg(#name) = double{value}
#define OPREG_PY_S_ARG_i64(name, value) , nb::arg(#name) = std::int64_t{value}
#define OPREG_PY_S_ARG_casting(name, value) , nb::arg(#name) = #value
#define OPREG_PY_S_ARG_rounding(name, value) , nb::arg(#name) = #value
#define OPREG_PY_S_ARG_rope_style(name, value) , nb::arg(#name) = #value
#define OPREG_PY_S_ARG_pad32(name, value)
#define OPREG_PY_S_ARG_(type, name, value, key) OPREG_PY_S_ARG_##type(name, value)

#define OPREG_PY_T_NAME_(name, role, kind, when, partner) , std::tuple{#name, #role, #kind, #when, #partner}
#define OPREG_PY_S_NAME_f64(name, value) , std::tuple{#name, "f64", #value}
#define OPREG_PY_S_NAME_i64(name, value) , std::tuple{#name, "i64", #value}
#define OPREG_PY_S_NAME_casting(name, value) , std::tuple{#name, "casting", #value}
#define OPREG_PY_S_NAME_rounding(name, value) , std::tuple{#name, "rounding", #value}
#define OPREG_PY_S_NAME_rope_style(name, value) , std::tuple{#name, "rope_style", #value}
#define OPREG_PY_S_NAME_pad32(name, value)
#define OPREG_PY_S_NAME_(type, name, value, key) OPREG_PY_S_NAME_##type(name, value)
#define OPREG_PY_NONE_(...)

template <class Args>
struct Fields;
#define OPREG_PY_FIELDS_(Name, c_name, family_, FIELDS)                                                        \
  template <>                                                                                                  \
  struct Fields<Name> {                                                                                        \
    using Args = Name;                                                                                         \
    using Params = TypeList<Skip FIELDS(OPREG_PY_T_TYPE_, OPREG_PY_S_TYPE_)>;                                  \
    static constexpr const char* family = #family_;                                                            \
    static auto setters() { return std::make_tuple(Skip{} FIELDS(OPREG_PY_T_SET_, OPREG_PY_S_SET_)); }         \
    template <class F>                                                                                         \
    static void def(nb::module_& m, const char* name, F f, const char* doc) {                                  \
      m.def(name, std::move(f) FIELDS(OPREG_PY_T_ARG_, OPREG_PY_S_ARG_), nb::arg("device").none() = nb::none(), \
            nb::arg("stream") = std::uintptr_t{0}, doc);                                                       \
    }                                                                                                          \
    template <class F>                                                                                         \
    static void def_timer(nb::module_& m, const char* name, F f, const char* doc) {                            \
      m.def(name, std::move(f), nb::arg("repeat") FIELDS(OPREG_PY_T_ARG_, OPREG_PY_S_ARG_), doc);               \
    }                                                                                                          \
    static nb::dict describe() {                                                                               \
      nb::list tensors;                                                                                        \
      std::apply([&](Skip, auto... t) { (tensors.append(field(t)), ...); },                                    \
                 std::make_tuple(Skip{} FIELDS(OPREG_PY_T_NAME_, OPREG_PY_NONE_)));                            \
      nb::list scalars;                                                                                        \
      std::apply([&](Skip, auto... s) { (scalars.append(scalar(s)), ...); },                                   \
                 std::make_tuple(Skip{} FIELDS(OPREG_PY_NONE_, OPREG_PY_S_NAME_)));                            \
      nb::dict d;                                                                                              \
      d["family"] = family;                                                                                    \
      d["tensors"] = tensors;                                                                                  \
      d["scalars"] = scalars;                                                                                  \
      return d;                                                                                                \
    }                                                                                                          \
  };

nb::dict field(std::tuple<const char*, const char*, const char*, const char*, const char*> t) {
  nb::dict d;
  d["name"] = std::get<0>(t);
  d["role"] = std::get<1>(t);
  d["kind"] = std::get<2>(t);
  d["when"] = std::get<3>(t);
  d["partner"] = std::string_view(std::get<4>(t)) == "none" ? nb::none() : nb::cast(std::get<4>(t));
  return d;
}
nb::dict scalar(std::tuple<const char*, const char*, const char*> s) {
  nb::dict d;
  d["name"] = std::get<0>(s);
  d["type"] = std::get<1>(s);
  d["default"] = std::get<2>(s);
  return d;
}

OPREG_ARG_STRUCTS(OPREG_PY_FIELDS_)

enum class Mode { run, explain };

template <Mode M, class Args, class List>
struct OpFunction;
template <Mode M, class Args, class... P>
struct OpFunction<M, Args, TypeList<Skip, P...>> {
  const Op<Args>* op;
  const char* name;  // "rms_norm.fwd"
  auto operator()(P... p, nb::handle device, std::uintptr_t stream) const {
    Args args{};
    CallState state(name, device);
    auto setters = Fields<Args>::setters();
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (std::get<I + 1>(setters)(args, p, state), ...);
    }(std::index_sequence_for<P...>{});
    state.prepare(*op, args);
    if constexpr (M == Mode::run) {
      return state.run(*op, args, stream);
    } else {
      (void)stream;
      return state.explain(*op, args);
    }
  }
};

// The C++ entry point's own time for the same call, for the binding's overhead figure
// (bench/python_overhead.py): the tensors imported once, then `repeat` calls of Registry::call.
template <class Args, class List>
struct EntryPointTimer;
template <class Args, class... P>
struct EntryPointTimer<Args, TypeList<Skip, P...>> {
  const Op<Args>* op;
  const char* name;
  double operator()(std::int64_t repeat, P... p) const {
    Args args{};
    CallState state(name, nb::none());
    auto setters = Fields<Args>::setters();
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (std::get<I + 1>(setters)(args, p, state), ...);
    }(std::index_sequence_for<P...>{});
    Registry& registry = default_registry();
    registry.call(*op, args);  // the first call chooses and caches the variant
    const auto start = std::chrono::steady_clock::now();
    for (std::int64_t i = 0; i < repeat; ++i) registry.call(*op, args);
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    return took.count() / static_cast<double>(repeat > 0 ? repeat : 1);
  }
};

template <class Args>
void def_op(nb::module_& m, nb::dict& table, const char* ident, const char* full, const Op<Args>& op) {
  using Params = typename Fields<Args>::Params;
  const std::string doc = fmt::format(
      "{}(tensors..., scalars..., device=None, stream=0): runs {} on the tensors' device (outputs are "
      "the caller's); opreg.signature('{}') lists the parameters.",
      ident, full, full);
  static std::deque<std::string> docs;  // nanobind keeps the pointers: a deque never moves them
  docs.push_back(doc);
  Fields<Args>::def(m, ident, OpFunction<Mode::run, Args, Params>{&op, full}, docs.back().c_str());
  static std::deque<std::string> names;
  const std::string& explain = names.emplace_back(std::string(ident) + "_explain");
  Fields<Args>::def(m, explain.c_str(), OpFunction<Mode::explain, Args, Params>{&op, full},
                    "the same parameters: which variant would run and why (nothing runs)");
  const std::string& timer = names.emplace_back(std::string("_time_") + ident);
  Fields<Args>::def_timer(m, timer.c_str(), EntryPointTimer<Args, Params>{&op, full},
                          "seconds per call of the C++ entry point on these tensors (repeat calls; for bench/)");
  nb::dict entry = Fields<Args>::describe();
  entry["function"] = m.attr(ident);
  entry["explain"] = m.attr(explain.c_str());
  table[full] = entry;
}

}  // namespace

void bind_ops(nb::module_& m) {
  nb::class_<CallResult>(m, "CallResult", "What one op call did")
      .def_prop_ro("variant", &CallResult::variant_name, "the variant that ran")
      .def_ro("fell_back", &CallResult::fell_back, "a cpu variant ran through host copies (fallback policy)")
      .def_ro("copied", &CallResult::copied, "device= copied the inputs there and the outputs back")
      .def_prop_ro("device", [](const CallResult& r) { return default_registry().device_name(r.device); })
      .def("__repr__", [](const CallResult& r) {
        return fmt::format("CallResult(variant='{}', device='{}', fell_back={}, copied={})", r.variant_name(),
                           default_registry().device_name(r.device), r.fell_back ? "True" : "False",
                           r.copied ? "True" : "False");
      });
  nb::dict table;
#define OPREG_PY_DEF_OP_(ident, base, direction, Args, c_args) \
  def_op<Args>(m, table, #ident, #base "." #direction, ident##_op());
  OPREG_OPS(OPREG_PY_DEF_OP_)
#undef OPREG_PY_DEF_OP_
  m.attr("OPS") = table;
}

}  // namespace opreg::py
