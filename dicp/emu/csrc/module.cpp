// The Python module of the emulated device (dicp.emu._C): registration, the runtime calls that
// torch.emu exposes, and the bridge from the kernels to dicp's knobs (policy.h). This is the
// only file that includes Python headers.
#include <torch/csrc/utils/pybind.h>

#include <sstream>

#include "device.h"
#include "ops.h"

namespace py = pybind11;

namespace dicp_emu {

namespace {

// Registrations live as long as the process: PrivateUse1 cannot be handed back.
std::vector<std::unique_ptr<torch::Library>>& libraries() {
  static auto* kept = new std::vector<std::unique_ptr<torch::Library>>();
  return *kept;
}

torch::Library& new_library(const char* ns) {
  libraries().push_back(std::make_unique<torch::Library>(
      torch::Library::IMPL, ns, c10::DispatchKey::PrivateUse1, __FILE__, __LINE__));
  return *libraries().back();
}

// Ops of `names` that exist and have a meta kernel (native kernels compute their results'
// layouts on meta tensors); returns the names registered.
std::vector<std::string> register_native_ops(const std::vector<std::string>& names) {
  auto& library = new_library("aten");
  std::vector<std::string> registered;
  for (const auto& name : names) {
    const auto dot = name.find('.');
    const auto op = c10::Dispatcher::singleton().findOp(
        {"aten::" + name.substr(0, dot), dot == std::string::npos ? "" : name.substr(dot + 1)});
    if (!op || !op->hasComputedKernelForDispatchKey(c10::DispatchKey::Meta)) continue;
    register_native_op(library, name);
    registered.push_back(name);
  }
  return registered;
}

// `host` names ops that torch implements for any backend by a composite ending in a kernel
// this device lacks (convolution reaches convolution_overrideable): they fall back whole.
// `hidden` names the arguments ops write without their schema saying so (eager.HIDDEN_WRITES).
std::vector<std::string> register_device(
    const std::vector<std::string>& native, const std::vector<std::string>& host,
    std::unordered_map<std::string, std::vector<std::string>> hidden, bool isolated) {
  set_isolation(isolated);
  set_hidden_writes(std::move(hidden));
  register_runtime();
  auto& aten = new_library("aten");
  register_core_ops(aten);
  register_device_compositions(aten);
  register_rnn_cells(aten);
  for (const auto& name : host) register_fallback(aten, name);
  new_library("_").fallback(torch::CppFunction::makeFromBoxedFunction<&fallback_kernel>());
  auto registered = register_native_ops(native);
  register_own_fallbacks(new_library("aten"));
  return registered;
}

// ---- the bridge to Python's policy, dumps and comparisons ----

py::object* g_policy = nullptr;  // leaked on purpose: kernels may run during interpreter exit
py::object* g_dump = nullptr;
py::object* g_compare = nullptr;

py::object to_python(const c10::IValue& value) {
  if (value.isNone()) return py::none();
  if (value.isTensor()) return py::cast(value.toTensor());
  if (value.isBool()) return py::bool_(value.toBool());
  if (value.isInt()) return py::int_(value.toInt());
  if (value.isDouble()) return py::float_(value.toDouble());
  if (value.isString()) return py::str(value.toStringRef());
  if (value.isList()) {
    py::list out;
    for (const auto& item : value.toListRef()) out.append(to_python(item));
    return std::move(out);
  }
  std::ostringstream text;
  text << value;
  return py::str(text.str());
}

py::list to_python(const std::vector<c10::IValue>& values) {
  py::list out;
  for (const auto& value : values) out.append(to_python(value));
  return out;
}

bool python_alive() {
  return Py_IsInitialized() && g_policy != nullptr;
}

OpPolicy ask_policy(const std::string& op, bool native) {
  if (!python_alive()) return {};
  py::gil_scoped_acquire gil;
  auto answer = (*g_policy)(op, native).cast<py::tuple>();
  return OpPolicy{answer[0].cast<bool>(), answer[1].cast<int>(), answer[2].cast<bool>(),
                  static_cast<Fault>(answer[3].cast<int>())};
}

void dump(const std::string& op, const std::string& stage, const std::vector<c10::IValue>& values,
          int level) {
  if (!python_alive()) return;
  py::gil_scoped_acquire gil;
  (*g_dump)(op, stage, to_python(values), level);
}

void compare(const std::string& op, const std::vector<c10::IValue>& actual,
             const std::vector<c10::IValue>& expected) {
  if (!python_alive()) return;
  py::gil_scoped_acquire gil;
  (*g_compare)(op, to_python(actual), to_python(expected));
}

void set_policy(py::object policy, py::object dump_fn, py::object compare_fn) {
  auto& hooks = policy_hooks();
  if (policy.is_none()) {  // at exit: kernels run silently from now on
    hooks = PolicyHooks{};
    g_policy = nullptr;
    return;
  }
  g_policy = new py::object(std::move(policy));
  g_dump = new py::object(std::move(dump_fn));
  g_compare = new py::object(std::move(compare_fn));
  hooks.policy = ask_policy;
  hooks.dump = dump;
  hooks.compare = compare;
}

py::dict stats_of(c10::DeviceIndex device) {
  const auto stats = memory_stats(device);
  py::dict out;
  out["allocated_bytes"] = stats.allocated;
  out["peak_allocated_bytes"] = stats.peak;
  out["reserved_bytes"] = stats.reserved;
  out["allocations"] = stats.allocations;
  return out;
}

bool is_device_memory(uintptr_t address) {
  return find_block(reinterpret_cast<const void*>(address)) != nullptr;
}

}  // namespace

// A stream's worker frees each finished task's storages, and freeing one that Python has seen
// takes the GIL (StorageImpl::decref_pyobject). A host thread blocked with the GIL held (an op
// called from a Python dispatch mode, as FakeTensorMode copying a constant to the device,
// holds it) waited for a worker waiting for it: released here while blocked.
void host_wait(const std::function<void()>& wait) {
  if (!(Py_IsInitialized() && PyGILState_Check())) return wait();
  py::gil_scoped_release no_gil;
  wait();
}

}  // namespace dicp_emu

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  using namespace dicp_emu;
  using release = py::call_guard<py::gil_scoped_release>;
  m.def("register_device", &register_device, "claim PrivateUse1; returns the native ops");
  m.def("fallback_registrations", [] { return fallback_registrations(); },
        "the ops registered with the CPU fallback as their own kernel");
  m.def("set_policy", &set_policy);
  m.def("device_count", [] { return static_cast<int>(kDeviceCount); });
  m.def("current_device", [] { return static_cast<int>(current_device()); });
  m.def("set_device", [](int index) { set_device(checked_index(index)); });
  m.def("current_stream", [](int device) { return current_c10_stream(device); });
  m.def("default_stream", [](int device) { return default_stream(device); });
  m.def("set_stream", [](c10::Stream stream) { exchange_stream(stream); });
  m.def("synchronize", [](int device) { synchronize_device(device); }, release());
  m.def("default_generator", [](int device) { return default_generator(device); });
  m.def("memory_stats", &stats_of);
  m.def("reset_peak", [](int device) { reset_peak(device); });
  m.def("empty_cache", &empty_cache);
  m.def("isolation", &isolation);
  m.def("in_forked_child", &in_forked_child);
  m.def("is_device_memory", &is_device_memory);
  m.def("launch", &launch_kernel, "enqueue a packed kernel on the current stream");
  py::class_<Stall, std::shared_ptr<Stall>>(m, "Stall")
      .def("release", [](const std::shared_ptr<Stall>& stall) { release_stall(stall); });
  m.def("stall", [](int device, double timeout) {
    return stall_stream(current_stream(device), timeout);
  });
  m.def("sleep", [](int device, double ms) { sleep_on_stream(current_stream(device), ms); });
}
