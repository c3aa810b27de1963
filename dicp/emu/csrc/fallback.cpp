// The CPU fallback: every ATen op without a device kernel runs on the host.
//
// Inputs are copied to the host a whole storage at a time, one host copy per device storage, so
// tensors that share memory on the device share it on the host: an in-place op through a view
// writes its base, and an op that returns a view of an input returns a view of the device
// storage. The op runs on the host; storages it wrote, and new results, are copied back to the
// device on the current stream (asynchronously: the host copies stay alive in the task).
// Under torch.profiler the copies and the host run are ranges of their own, named for the op
// ("dicp.emu fallback aten::cumsum: copy emu:0 -> cpu"), so a profile shows what a fallback
// moves, inside an eager call or a compiled graph's.
#include "ops.h"

#include <ATen/record_function.h>

#include <algorithm>

#include "device.h"

namespace dicp_emu {

namespace {

class HostMirror {
 public:
  // A host tensor over the host copy of `tensor`'s storage (copied on first use).
  at::Tensor to_host(const at::Tensor& tensor) {
    if (!tensor.is_privateuseone()) return tensor;
    if (tensor._is_zerotensor()) return zeros_on_host(tensor);
    const auto& storage = tensor.storage();
    auto it = host_of_.find(storage.unsafeGetStorageImpl());
    if (it == host_of_.end()) {
      auto host = new_host_storage(storage.nbytes());
      Stream& stream = current_stream(tensor.device().index());
      pending_.emplace_back(&stream, copy_to_host(storage, host, stream));
      device_of_[host.unsafeGetStorageImpl()] = storage;
      it = host_of_.emplace(storage.unsafeGetStorageImpl(), host).first;
    }
    return view_of(it->second, c10::DispatchKey::CPU, tensor);
  }

  void wait() {
    for (auto& [stream, ticket] : pending_) stream->wait(ticket);
    pending_.clear();
  }

  // After the op: a written device tensor takes its host copy's layout (an out= argument may
  // have been resized) and its storage is copied back.
  void write_back(const at::Tensor& device, const at::Tensor& host) {
    if (!device.is_privateuseone()) return;
    auto& storage = host_of_.at(device.storage().unsafeGetStorageImpl());
    if (host.storage().unsafeGetStorageImpl() != storage.unsafeGetStorageImpl()) {
      storage = host.storage();  // the op re-pointed it (set_): the device follows
    }
    if (device.sizes() != host.sizes() || device.strides() != host.strides() ||
        device.storage_offset() != host.storage_offset() ||
        storage.nbytes() > device.storage().nbytes()) {
      resize_storage_bytes(device.storage().unsafeGetStorageImpl(), storage.nbytes());
      set_layout(device, host.sizes(), host.strides(), host.storage_offset());
    }
    dirty_.push_back(device.storage());
  }

  void copy_back() {
    for (const auto& storage : dirty_) {
      const auto& host = host_of_.at(storage.unsafeGetStorageImpl());
      copy_to_device(host, storage, current_stream(storage.device().index()));
    }
    dirty_.clear();
  }

  // A result on the device: a view of the device storage its host storage mirrors, or new
  // device memory filled from the host (one per host storage, so results keep sharing).
  at::Tensor to_device(const at::Tensor& host, c10::DeviceIndex device) {
    auto key = host.storage().unsafeGetStorageImpl();
    auto it = device_of_.find(key);
    if (it == device_of_.end()) {
      auto storage = new_device_storage(host.storage().nbytes(), device);
      copy_to_device(host.storage(), storage, current_stream(device));
      it = device_of_.emplace(key, storage).first;
    }
    return view_of(it->second, c10::DispatchKey::PrivateUse1, host);
  }

 private:
  std::unordered_map<const c10::StorageImpl*, c10::Storage> host_of_;    // device -> host
  std::unordered_map<const c10::StorageImpl*, c10::Storage> device_of_;  // host -> device
  std::vector<std::pair<Stream*, uint64_t>> pending_;
  std::vector<c10::Storage> dirty_;
};

// A torch.profiler range around one stage of a fallback, named while a profiler records only.
class FallbackRange {
 public:
  enum Stage { kToHost, kOnHost, kToDevice };

  FallbackRange(const c10::OperatorHandle& op, Stage stage, c10::DeviceIndex device)
      : guard_(at::RecordScope::USER_SCOPE) {
    if (!guard_.isActive()) return;
    const std::string emu = "emu:" + std::to_string(device);
    const std::string what = stage == kToHost   ? "copy " + emu + " -> cpu"
                             : stage == kOnHost ? std::string("on the CPU")
                                                : "copy cpu -> " + emu;
    guard_.before("dicp.emu fallback " + op.schema().name() + ": " + what);
  }

 private:
  at::RecordFunction guard_;
};

// The op's arguments on the host: tensors mirrored, emu devices as the CPU, emu generators (or
// none, on an emu op) as CPU generators seeded from the device's generator.
torch::jit::Stack host_arguments(const c10::OperatorHandle& op, const Args& args,
                                 HostMirror& mirror, c10::DeviceIndex device) {
  const auto& arguments = op.schema().arguments();
  torch::jit::Stack stack;
  auto to_host = [&](const at::Tensor& tensor) { return mirror.to_host(tensor); };
  for (size_t i = 0; i < args.size(); ++i) {
    if (is_generator(arguments[i])) {
      stack.push_back(host_generator(args[i], device));
    } else {
      stack.push_back(moved_device(map_tensors(args[i], to_host), c10::kCPU));
    }
  }
  mirror.wait();
  return stack;
}

std::unordered_map<std::string, std::vector<std::string>>& hidden_writes() {
  static auto* writes = new std::unordered_map<std::string, std::vector<std::string>>();
  return *writes;
}

// The names of the arguments `schema` writes without saying so (none for almost every op).
const std::vector<std::string>& hidden_writes_of(const c10::FunctionSchema& schema) {
  static const std::vector<std::string> none;
  const auto& name = schema.operator_name();
  std::string qualified = name.name.substr(name.name.find("::") + 2);
  if (!name.overload_name.empty()) qualified += "." + name.overload_name;
  const auto it = hidden_writes().find(qualified);
  return it == hidden_writes().end() ? none : it->second;
}

void write_arguments_back(const c10::FunctionSchema& schema, const Args& args,
                          const torch::jit::Stack& host_args, HostMirror& mirror) {
  const auto& hidden = hidden_writes_of(schema);
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& argument = schema.arguments()[i];
    if (!writes(argument) &&
        std::find(hidden.begin(), hidden.end(), argument.name()) == hidden.end()) {
      continue;
    }
    std::vector<at::Tensor> device, host;
    for_each_tensor(args[i], [&](const at::Tensor& t) { device.push_back(t); });
    for_each_tensor(host_args[i], [&](const at::Tensor& t) { host.push_back(t); });
    for (size_t j = 0; j < device.size() && j < host.size(); ++j) {
      mirror.write_back(device[j], host[j]);
    }
  }
  mirror.copy_back();
}

Args device_results(const c10::FunctionSchema& schema, const Args& args,
                    const torch::jit::Stack& results, HostMirror& mirror,
                    c10::DeviceIndex device) {
  Args out;
  for (size_t i = 0; i < results.size(); ++i) {
    if (auto written = written_argument(schema, i)) {
      out.push_back(args[*written]);  // in-place and out=: the very argument, as on CUDA
    } else {
      out.push_back(map_tensors(results[i], [&](const at::Tensor& host) {
        return mirror.to_device(host, device);
      }));
    }
  }
  return out;
}

}  // namespace

void run_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                  const OpPolicy& policy) {
  const auto& schema = op.schema();
  Args args = pop_args(stack, schema.arguments().size());
  check_devices(op, args);
  const auto device = op_device(args);
  OnDevice on(device);
  dump_values(op, policy, "fallback", args);
  HostMirror mirror;
  torch::jit::Stack host;
  {
    FallbackRange range(op, FallbackRange::kToHost, device);
    host = host_arguments(op, args, mirror, device);
  }
  const torch::jit::Stack host_args = host;
  {
    FallbackRange range(op, FallbackRange::kOnHost, device);
    op.callBoxed(host);
  }
  Args results;
  {
    FallbackRange range(op, FallbackRange::kToDevice, device);
    write_arguments_back(schema, args, host_args, mirror);
    results = device_results(schema, args, host, mirror, device);
  }
  dump_values(op, policy, "out", results);
  push_all(stack, std::move(results));
}

void set_hidden_writes(std::unordered_map<std::string, std::vector<std::string>> writes) {
  hidden_writes() = std::move(writes);
}

void fallback_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  run_fallback(op, stack, query_policy(op, false));
}

std::vector<std::string>& fallback_registrations() {
  static auto* names = new std::vector<std::string>();
  return *names;
}

void register_fallback(torch::Library& library, const std::string& name) {
  library.impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&fallback_kernel>());
  fallback_registrations().push_back(name);
}

// An op with a CPU kernel of its own that torch would run on any other backend through a
// generic composite kernel falls back as itself, as an op without a device kernel should:
// - a structured op's functional and in-place variants (CompositeExplicitAutogradNonFunctional:
//   meta, then the out= variant into new outputs): its inputs are copied once, no
//   uninitialized output is, and the log names the op as written;
// - the few with a math version for other backends (CompositeExplicitAutograd: layer and
//   group norm through batch norm): the CPU's own kernel gives the CPU's numbers.
bool has_generic_kernel(const c10::OperatorHandle& op) {
  return op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional) ||
         op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd);
}

void register_own_fallbacks(torch::Library& library) {
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const auto& name : dispatcher.getAllOpNames()) {
    if (name.name.rfind("aten::", 0) != 0) continue;
    const auto op = dispatcher.findOp(name);
    if (!op || op->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1) ||
        !op->hasKernelForDispatchKey(c10::DispatchKey::CPU) || !has_generic_kernel(*op)) {
      continue;
    }
    std::string qualified = name.name.substr(6);
    if (!name.overload_name.empty()) qualified += "." + name.overload_name;
    register_fallback(library, qualified);
  }
}

Args host_reference(const c10::OperatorHandle& op, const Args& args) {
  HostMirror mirror;
  torch::jit::Stack host = host_arguments(op, args, mirror, op_device(args));
  op.callBoxed(host);
  return host;
}

}  // namespace dicp_emu
