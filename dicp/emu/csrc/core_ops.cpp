// The ops that make emu tensors what they are: allocation, views, resizing, copies between
// host and device, reading a value. They must be native: a view that fell back would alias a
// host copy, not the device memory. dicp's knobs do not apply to them (they compute nothing).
#include "ops.h"

#include <ATen/EmptyTensor.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/copy.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>

namespace dicp_emu {

namespace {

const c10::DispatchKeySet kEmuKeys(c10::DispatchKey::PrivateUse1);

void check_options(std::optional<c10::Layout> layout, std::optional<bool> pin_memory) {
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided,
              "emu: only strided tensors are supported");
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "emu: only host memory can be pinned");
}

at::Tensor empty_memory_format(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<c10::Layout> layout,
                               std::optional<c10::Device> device, std::optional<bool> pin_memory,
                               std::optional<c10::MemoryFormat> memory_format) {
  check_options(layout, pin_memory);
  OnDevice on(checked_index(c10::device_or_default(device).index()));
  return at::detail::empty_generic(size, device_allocator(), kEmuKeys,
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride,
                         std::optional<at::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  check_options(layout, pin_memory);
  return empty_device(size, stride, c10::dtype_or_default(dtype),
                      checked_index(c10::device_or_default(device).index()));
}

// A ZeroTensor: no memory at all (a null storage the size of the tensor), read as zeros by
// torch's ZeroTensor kernels. Autograd makes them for gradients known to be zero.
at::Tensor efficient_zero_tensor(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                                 std::optional<c10::Layout> layout,
                                 std::optional<c10::Device> device,
                                 std::optional<bool> pin_memory) {
  check_options(layout, pin_memory);
  at::native::ZeroTensorAllocator allocator(
      c10::Device(kEmu, checked_index(c10::device_or_default(device).index())));
  const auto keys = kEmuKeys | c10::DispatchKeySet(c10::DispatchKey::ZeroTensor);
  return at::detail::empty_generic(size, &allocator, keys, c10::dtype_or_default(dtype),
                                   std::nullopt);
}

// ---- views: new metadata over the same storage; no memory is touched ----

at::Tensor as_strided(const at::Tensor& self, at::IntArrayRef size, at::IntArrayRef stride,
                      std::optional<int64_t> storage_offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, storage_offset);
}

at::Tensor view(const at::Tensor& self, at::IntArrayRef size) {
  return at::native::view(self, size);
}

at::Tensor reshape_alias(const at::Tensor& self, at::IntArrayRef size, at::IntArrayRef stride) {
  return at::native::_reshape_alias(self, size, stride);
}

at::Tensor unfold(const at::Tensor& self, int64_t dimension, int64_t size, int64_t step) {
  return at::native::unfold(self, dimension, size, step);
}

at::Tensor view_as_real(const at::Tensor& self) {
  return at::native::view_as_real(self);
}

at::Tensor view_as_complex(const at::Tensor& self) {
  return at::native::view_as_complex(self);
}

// ---- resizing and re-pointing: the storage grows by a device copy (resize_storage_bytes) ----

const at::Tensor& resize_tensor(const at::Tensor& self, at::IntArrayRef size,
                         std::optional<c10::MemoryFormat> memory_format) {
  auto* impl = self.unsafeGetTensorImpl();
  if (self.sizes() != size) impl->set_sizes_contiguous(size);
  if (memory_format) impl->empty_tensor_restride(*memory_format);
  set_layout(self, impl->sizes(), impl->strides(), impl->storage_offset());
  return self;
}

std::vector<int64_t> dense_strides(at::IntArrayRef size) {
  std::vector<int64_t> strides(size.size());
  int64_t stride = 1;
  for (size_t i = size.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= std::max<int64_t>(size[i], 1);
  }
  return strides;
}

at::Tensor& set_storage(at::Tensor& self, at::Storage source, int64_t offset,
                        at::IntArrayRef size, at::IntArrayRef stride) {
  TORCH_CHECK(source.device().type() == kEmu, "emu: set_ needs emu storage, got ",
              source.device());
  self.unsafeGetTensorImpl()->set_storage_keep_dtype(std::move(source));
  const auto strides = stride.empty() ? dense_strides(size) : stride.vec();
  set_layout(self, size, strides, offset);
  return self;
}

at::Tensor& set_whole_storage(at::Tensor& self, at::Storage source) {
  const int64_t numel = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return set_storage(self, std::move(source), 0, {numel}, {1});
}

at::Tensor& set_tensor(at::Tensor& self, const at::Tensor& source) {
  if (self.unsafeGetTensorImpl() == source.unsafeGetTensorImpl()) return self;
  return set_storage(self, source.storage(), source.storage_offset(), source.sizes(),
                     source.strides());
}

at::Tensor& set_empty(at::Tensor& self) {
  self.unsafeGetTensorImpl()->set_storage_keep_dtype(
      new_device_storage(0, self.device().index()));
  self.unsafeGetTensorImpl()->set_sizes_contiguous({0});
  return self;
}

// ---- copies: device work on a stream; a copy to host memory that is not pinned waits ----

void copy_between_devices(const at::Tensor& src, const at::Tensor& dst) {
  Stream& stream = current_stream(dst.device().index());
  if (src.device() != dst.device()) {  // the source's writers run on its own device's stream
    auto written = make_event(false);
    record_event(written, current_stream(src.device().index()));
    block_on_event(written, stream);
  }
  Task task;
  DeviceMemoryViews views(task);
  auto to = views(dst), from = views(src);
  task.run = [to, from]() mutable { to.copy_(from); };
  stream.enqueue(std::move(task));
}

void copy_host_device(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
  const at::Tensor& device = src.is_privateuseone() ? src : dst;
  const at::Tensor& host = src.is_privateuseone() ? dst : src;
  Stream& stream = current_stream(device.device().index());
  Task task;
  DeviceMemoryViews views(task);
  // the host side too gets its own TensorImpl: the caller may change its metadata meanwhile
  auto host_view = view_of(host.storage(), c10::DispatchKey::CPU, host);
  auto to = dst.is_privateuseone() ? views(dst) : host_view;
  auto from = src.is_privateuseone() ? views(src) : host_view;
  task.run = [to, from]() mutable { to.copy_(from); };
  const uint64_t ticket = stream.enqueue(std::move(task));
  if (!(non_blocking && is_pinned(host.storage().data()))) stream.wait(ticket);
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  TORCH_CHECK(self.defined() && dst.defined(), "emu: copy of an undefined tensor");
  if (self._is_zerotensor()) {  // it has no memory to copy from
    dst.zero_();
    return dst;
  }
  if (self.is_privateuseone() && dst.is_privateuseone()) {
    copy_between_devices(self, dst);
  } else {
    TORCH_CHECK(self.is_cpu() || dst.is_cpu(), "emu: cannot copy between ", self.device(),
                " and ", dst.device());
    copy_host_device(self, dst, non_blocking);
  }
  return dst;
}

// copy_ itself, not only the _copy_from torch's generic copy_ ends in: a source with a conj or
// neg bit would otherwise meet the Conjugate/Negative fallbacks at _copy_from, which clone it,
// which copies it, endlessly. The views carry the bits and the CPU copy resolves them.
at::Tensor& copy(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  copy_from(src, self, non_blocking);
  return self;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.is_privateuseone()) {
    resize_tensor(dst, self.sizes(), std::nullopt);
  } else {
    dst.resize_(self.sizes());
  }
  return copy_from(self, dst, false);
}

// `.item()`: a copy of one element to the host, which waits for the work before it.
at::Scalar local_scalar_dense(const at::Tensor& self) {
  auto host = at::empty(self.sizes(), self.options().device(c10::kCPU));
  copy_host_device(self, host, false);
  return host.item();
}

// Tasks hold the storages they use until they have run, so there is nothing to record.
void record_stream(at::Tensor& /*self*/, c10::Stream stream) {
  TORCH_CHECK(stream.device_type() == kEmu, "emu: record_stream needs an emu stream");
}

}  // namespace

void register_core_ops(torch::Library& library) {
  library.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  library.impl("empty_strided", TORCH_FN(empty_strided));
  library.impl("_efficientzerotensor", TORCH_FN(efficient_zero_tensor));
  library.impl("as_strided", TORCH_FN(as_strided));
  library.impl("view", TORCH_FN(view));
  library.impl("_reshape_alias", TORCH_FN(reshape_alias));
  library.impl("unfold", TORCH_FN(unfold));
  library.impl("view_as_real", TORCH_FN(view_as_real));
  library.impl("view_as_complex", TORCH_FN(view_as_complex));
  library.impl("resize_", TORCH_FN(resize_tensor));
  library.impl("set_.source_Storage_storage_offset", TORCH_FN(set_storage));
  library.impl("set_.source_Storage", TORCH_FN(set_whole_storage));
  library.impl("set_.source_Tensor", TORCH_FN(set_tensor));
  library.impl("set_", TORCH_FN(set_empty));
  library.impl("copy_", TORCH_FN(copy));
  library.impl("_copy_from", TORCH_FN(copy_from));
  library.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
  library.impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));
  library.impl("record_stream", TORCH_FN(record_stream));
}

}  // namespace dicp_emu
