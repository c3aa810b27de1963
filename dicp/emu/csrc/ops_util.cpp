// Helpers of the device's kernels (ops.h) and the policy glue (policy.h).
#include "ops.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/EmptyTensor.h>
#include <ATen/ops/zeros.h>
#include <c10/core/CPUAllocator.h>

#include <cstring>

#include "device.h"

namespace dicp_emu {

// ---- storages and layouts ----

at::Tensor view_of(const c10::Storage& storage, c10::DispatchKey key, const at::Tensor& like) {
  auto tensor = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(storage),
                                                         c10::DispatchKeySet(key), like.dtype());
  tensor.unsafeGetTensorImpl()->set_sizes_and_strides(like.sizes(), like.strides(),
                                                      like.storage_offset());
  if (like.is_conj()) tensor._set_conj(true);
  if (like.is_neg()) tensor._set_neg(true);
  return tensor;
}

c10::Storage host_alias(const c10::Storage& device) {
  c10::DataPtr bytes(const_cast<void*>(device.data()), c10::Device(c10::kCPU));
  return c10::Storage(c10::Storage::use_byte_size_t(), device.nbytes(), std::move(bytes),
                      nullptr, false);
}

c10::Storage meta_like(const c10::Storage& storage) {
  return c10::Storage(c10::Storage::use_byte_size_t(), storage.nbytes(),
                      c10::DataPtr(nullptr, c10::Device(c10::kMeta)),
                      c10::GetAllocator(c10::kMeta), true);
}

c10::Storage new_host_storage(size_t nbytes) {
  return c10::Storage(c10::Storage::use_byte_size_t(), nbytes, c10::GetCPUAllocator(), true);
}

c10::Storage new_device_storage(size_t nbytes, c10::DeviceIndex device) {
  OnDevice on(device);
  return c10::Storage(c10::Storage::use_byte_size_t(), nbytes, device_allocator(), true);
}

at::Tensor empty_device(at::IntArrayRef sizes, at::IntArrayRef strides, at::ScalarType dtype,
                        c10::DeviceIndex device) {
  OnDevice on(device);
  return at::detail::empty_strided_generic(
      sizes, strides, device_allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
      dtype);
}

// Growing a storage is device work: the old bytes are copied on the device's current stream,
// after whatever was enqueued before, and the old block stays alive until the copy has run.
void resize_storage_bytes(c10::StorageImpl* storage, size_t nbytes) {
  if (nbytes <= storage->nbytes()) {
    storage->set_nbytes(nbytes);
    return;
  }
  TORCH_CHECK(storage->resizable(), "emu: trying to resize storage that is not resizable");
  const auto device = storage->device().index();
  c10::DataPtr fresh;
  {
    OnDevice on(device);
    fresh = device_allocator()->allocate(nbytes);
  }
  const size_t old_bytes = storage->nbytes();
  void* to = fresh.get();
  auto old = std::make_shared<c10::DataPtr>(storage->set_data_ptr(std::move(fresh)));
  storage->set_nbytes(nbytes);
  if (old->get() == nullptr || old_bytes == 0) return;
  Task task;
  task.blocks = {find_block(old->get()), find_block(to)};
  task.run = [old, to, old_bytes] { std::memcpy(to, old->get(), old_bytes); };
  current_stream(device).enqueue(std::move(task));
}

void set_layout(const at::Tensor& tensor, at::IntArrayRef sizes, at::IntArrayRef strides,
                int64_t offset) {
  const size_t needed =
      at::detail::computeStorageNbytes(sizes, strides, tensor.dtype().itemsize(), offset);
  auto* storage = tensor.storage().unsafeGetStorageImpl();
  if (needed > storage->nbytes()) resize_storage_bytes(storage, needed);
  tensor.unsafeGetTensorImpl()->set_sizes_and_strides(sizes, strides, offset);
}

at::Tensor DeviceMemoryViews::operator()(const at::Tensor& tensor) {
  if (!tensor.is_privateuseone()) return tensor;
  if (tensor._is_zerotensor()) return zeros_on_host(tensor);
  const auto& storage = tensor.storage();
  auto& alias = aliases_[storage.unsafeGetStorageImpl()];
  if (!alias) {
    task_.touch(storage);
    alias = host_alias(storage);
  }
  return view_of(alias, c10::DispatchKey::CPU, tensor);
}

at::Tensor zeros_on_host(const at::Tensor& zero_tensor) {
  return at::zeros(zero_tensor.sizes(), zero_tensor.options().device(c10::kCPU));
}

// ---- whole-storage byte copies (a storage without memory, a ZeroTensor's, has none) ----

uint64_t copy_to_host(const c10::Storage& device, const c10::Storage& host, Stream& stream) {
  Task task;
  task.touch(device);
  task.keep.push_back(host);
  const void* from = device.data();
  void* to = host.mutable_data();
  const size_t n = std::min(device.nbytes(), host.nbytes());
  task.run = [from, to, n] { if (n && from && to) std::memcpy(to, from, n); };
  return stream.enqueue(std::move(task));
}

uint64_t copy_to_device(const c10::Storage& host, const c10::Storage& device, Stream& stream) {
  Task task;
  task.touch(device);
  task.keep.push_back(host);
  const void* from = host.data();
  void* to = const_cast<void*>(device.data());
  const size_t n = std::min(device.nbytes(), host.nbytes());
  task.run = [from, to, n] { if (n && from && to) std::memcpy(to, from, n); };
  return stream.enqueue(std::move(task));
}

// ---- op arguments ----

Args pop_args(torch::jit::Stack* stack, size_t count) {
  Args args(stack->end() - static_cast<std::ptrdiff_t>(count), stack->end());
  torch::jit::drop(*stack, count);
  return args;
}

void push_all(torch::jit::Stack* stack, Args values) {
  for (auto& value : values) stack->push_back(std::move(value));
}

c10::IValue map_tensors(const c10::IValue& value,
                        const std::function<at::Tensor(const at::Tensor&)>& fn) {
  if (value.isTensor()) {
    const auto& tensor = value.toTensor();
    return tensor.defined() ? c10::IValue(fn(tensor)) : value;
  }
  if (value.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& tensor : value.toTensorList()) {
      out.push_back(tensor.defined() ? fn(tensor) : tensor);
    }
    return out;
  }
  if (value.isList()) {  // e.g. Tensor?[] of index ops
    auto list = value.toList();
    c10::impl::GenericList out(list.elementType());
    for (const c10::IValue& item : list) out.push_back(map_tensors(item, fn));
    return out;
  }
  return value;
}

void for_each_tensor(const c10::IValue& value, const std::function<void(const at::Tensor&)>& fn) {
  map_tensors(value, [&](const at::Tensor& tensor) {
    fn(tensor);
    return tensor;
  });
}

c10::DeviceIndex op_device(const Args& args) {
  std::optional<c10::DeviceIndex> found;
  for (const auto& arg : args) {
    for_each_tensor(arg, [&](const at::Tensor& tensor) {
      if (!found && tensor.is_privateuseone()) found = tensor.device().index();
    });
    if (!found && arg.isDevice() && arg.toDevice().type() == kEmu) {
      found = checked_index(arg.toDevice().index());
    }
  }
  return found ? *found : current_device();
}

namespace {
// Ops that accept host index tensors alongside device tensors, as CUDA's do.
bool takes_host_indices(const c10::OperatorHandle& op) {
  const auto& name = op.schema().name();
  return name == "aten::index" || name == "aten::index_put_" || name == "aten::index_put" ||
         name == "aten::_index_put_impl_";
}
}  // namespace

// A host tensor with dimensions among device tensors is a mistake (a CPU constant in device
// code): CUDA refuses it, and so does the emulated device, even for ops that fall back.
void check_devices(const c10::OperatorHandle& op, const Args& args) {
  std::optional<c10::Device> device, host;
  for (const auto& arg : args) {
    for_each_tensor(arg, [&](const at::Tensor& tensor) {
      if (tensor.is_privateuseone()) {
        TORCH_CHECK(!device || *device == tensor.device(),
                    "Expected all tensors to be on the same device, but found at least two "
                    "devices, ", *device, " and ", tensor.device(), "! (", op_name(op), ")");
        device = tensor.device();
      } else if (tensor.dim() > 0) {
        host = tensor.device();
      }
    });
  }
  TORCH_CHECK(!device || !host || takes_host_indices(op),
              "Expected all tensors to be on the same device, but found at least two devices, ",
              *device, " and ", *host, "! (", op_name(op), ")");
}

c10::IValue moved_device(const c10::IValue& value, c10::DeviceType to) {
  if (value.isDevice() && value.toDevice().type() == kEmu) return c10::IValue(c10::Device(to));
  return value;
}

bool is_generator(const c10::Argument& argument) {
  auto type = argument.type();
  if (auto optional = type->cast<c10::OptionalType>()) type = optional->getElementType();
  return type->kind() == c10::TypeKind::GeneratorType;
}

at::Generator host_generator(const c10::IValue& generator, c10::DeviceIndex device) {
  const at::Generator source =
      generator.isNone() ? default_generator(device) : generator.toGenerator();
  if (source.device().is_cpu()) return source;
  return at::make_generator<at::CPUGeneratorImpl>(draw_seed(source));
}

bool writes(const c10::Argument& argument) {
  const auto* alias = argument.alias_info();
  if (alias == nullptr) return false;
  if (alias->isWrite()) return true;
  for (const auto& contained : alias->containedTypes()) {
    if (contained.isWrite()) return true;
  }
  return false;
}

std::optional<size_t> written_argument(const c10::FunctionSchema& schema, size_t result) {
  const auto* alias = schema.returns()[result].alias_info();
  if (alias == nullptr || !alias->isWrite()) return std::nullopt;
  const auto& arguments = schema.arguments();
  for (size_t i = 0; i < arguments.size(); ++i) {
    const auto* argument = arguments[i].alias_info();
    if (argument != nullptr && argument->isWrite() &&
        argument->beforeSets() == alias->beforeSets()) {
      return i;
    }
  }
  return std::nullopt;
}

// ---- policy glue ----

PolicyHooks& policy_hooks() {
  static PolicyHooks hooks;
  return hooks;
}

std::string op_name(const c10::OperatorHandle& op) {
  const auto& name = op.schema().operator_name();
  std::string text = name.name;
  const auto colons = text.find("::");
  if (colons != std::string::npos) text.replace(colons, 2, ".");
  return text + "." + (name.overload_name.empty() ? "default" : name.overload_name);
}

OpPolicy query_policy(const c10::OperatorHandle& op, bool native) {
  const auto& hooks = policy_hooks();
  return hooks.policy ? hooks.policy(op_name(op), native) : OpPolicy{};
}

void dump_values(const c10::OperatorHandle& op, const OpPolicy& policy, const char* stage,
                 const std::vector<c10::IValue>& values) {
  const auto& hooks = policy_hooks();
  if (policy.dump > 0 && hooks.dump) hooks.dump(op_name(op), stage, values, policy.dump);
}

}  // namespace dicp_emu
