// Helpers shared by the device's ATen kernels: the structural ops (core_ops.cpp), the native
// compute ops (native_ops.cpp) and the CPU fallback (fallback.cpp).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>
#include <ATen/core/stack.h>
#include <torch/library.h>

#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "policy.h"
#include "runtime.h"

namespace dicp_emu {

using Args = std::vector<c10::IValue>;

// ---- storages and layouts ----
// A tensor over `storage` with the sizes, strides, offset, dtype and conj/neg bits of `like`.
at::Tensor view_of(const c10::Storage& storage, c10::DispatchKey key, const at::Tensor& like);
c10::Storage host_alias(const c10::Storage& device);  // CPU storage over the same bytes:
                                                      // for device work only
c10::Storage meta_like(const c10::Storage& storage);  // no bytes, same size
c10::Storage new_host_storage(size_t nbytes);
c10::Storage new_device_storage(size_t nbytes, c10::DeviceIndex device);
at::Tensor empty_device(at::IntArrayRef sizes, at::IntArrayRef strides, at::ScalarType dtype,
                        c10::DeviceIndex device);
void resize_storage_bytes(c10::StorageImpl* storage, size_t nbytes);  // keeps the contents
at::Tensor zeros_on_host(const at::Tensor& zero_tensor);  // a ZeroTensor's value, on the host
void set_layout(const at::Tensor& tensor, at::IntArrayRef sizes, at::IntArrayRef strides,
                int64_t offset);  // grows the storage if it is too small

// CPU tensors over the device memory of emu tensors, for device work: built on the host when the
// work is enqueued (so they hold the layout of that moment), used by the stream's thread. Each
// device storage gets one host alias, so tensors that share memory keep sharing it. Host tensors
// pass unchanged.
class DeviceMemoryViews {
 public:
  explicit DeviceMemoryViews(Task& task) : task_(task) {}
  at::Tensor operator()(const at::Tensor& tensor);

 private:
  Task& task_;
  std::unordered_map<const c10::StorageImpl*, c10::Storage> aliases_;
};

// Sets the current device of this host thread for a scope.
struct OnDevice {
  explicit OnDevice(c10::DeviceIndex device) : previous(current_device()) { set_device(device); }
  ~OnDevice() { set_device(previous); }
  c10::DeviceIndex previous;
};

// ---- whole-storage byte copies, as device work on `stream` ----
uint64_t copy_to_host(const c10::Storage& device, const c10::Storage& host, Stream& stream);
uint64_t copy_to_device(const c10::Storage& host, const c10::Storage& device, Stream& stream);

// ---- op arguments ----
Args pop_args(torch::jit::Stack* stack, size_t count);
void push_all(torch::jit::Stack* stack, Args values);
c10::IValue map_tensors(const c10::IValue& value,
                        const std::function<at::Tensor(const at::Tensor&)>& fn);
void for_each_tensor(const c10::IValue& value, const std::function<void(const at::Tensor&)>& fn);
c10::DeviceIndex op_device(const Args& args);  // of its emu tensors or device argument
void check_devices(const c10::OperatorHandle& op, const Args& args);
c10::IValue moved_device(const c10::IValue& value, c10::DeviceType to);  // emu device -> `to`
bool is_generator(const c10::Argument& argument);
at::Generator host_generator(const c10::IValue& generator, c10::DeviceIndex device);
bool writes(const c10::Argument& argument);
std::optional<size_t> written_argument(const c10::FunctionSchema& schema, size_t result);

// ---- the layouts of a native op's results (layouts.cpp) ----
struct Layout {
  std::vector<int64_t> sizes, strides;
  at::ScalarType dtype;
};
std::vector<Layout> result_layouts(const c10::OperatorHandle& op, const Args& args);

// ---- kernels ----
void register_core_ops(torch::Library& library);
void register_native_op(torch::Library& library, const std::string& name);
void register_device_compositions(torch::Library& library);
void register_rnn_cells(torch::Library& library);  // rnn_cells.cpp
void fallback_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack);
void register_own_fallbacks(torch::Library& library);  // after every other registration
// An op whose own kernel is the fallback (`name` as the dispatcher spells it: "cumsum.out");
// fallback_registrations() names them all (the backend fallback serves unregistered ops).
void register_fallback(torch::Library& library, const std::string& name);
std::vector<std::string>& fallback_registrations();
// Arguments ops write without their schema saying so (eager.HIDDEN_WRITES): op as the
// dispatcher spells it ("native_batch_norm") -> argument names. The fallback copies them back.
void set_hidden_writes(std::unordered_map<std::string, std::vector<std::string>> writes);
void run_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack, const OpPolicy& policy);
Args host_reference(const c10::OperatorHandle& op, const Args& args);  // op run on host copies

// ---- kernel launch (launch.cpp): a compiled kernel taking (pointers, integers) enqueued on
// the current stream of its tensors' device
void launch_kernel(uintptr_t kernel, const std::vector<at::Tensor>& tensors,
                   std::vector<int64_t> integers);

}  // namespace dicp_emu
