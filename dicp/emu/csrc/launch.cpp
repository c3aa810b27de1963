// Kernel launch: a compiled kernel of a graph (a function in a library the host loaded) run on
// a stream, the way a driver's launch call (cuLaunchKernel) runs one. The kernel takes its
// arguments packed, as cuLaunchKernel's kernelParams: an array of device pointers and an array
// of 64-bit integers (sizes). The host never reads the memory: the pointers are computed from
// the tensors' metadata, and the stream's worker opens their blocks while the kernel runs.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "ops.h"

namespace dicp_emu {

using PackedKernel = void (*)(void* const* pointers, const int64_t* integers);

// Enqueue `kernel` on the current stream of the device of `tensors` (the current device when
// there are none); the call returns at once. Each tensor must be on that device.
void launch_kernel(uintptr_t kernel, const std::vector<at::Tensor>& tensors,
                   std::vector<int64_t> integers) {
  TORCH_CHECK(kernel != 0, "emu: launch of a null kernel");
  c10::DeviceIndex device = tensors.empty() ? current_device() : tensors[0].device().index();
  Task task;
  std::vector<void*> pointers;
  pointers.reserve(tensors.size());
  for (const auto& tensor : tensors) {
    TORCH_CHECK(tensor.device().type() == kEmu && tensor.device().index() == device,
                "emu: a kernel launched on emu:", static_cast<int>(device),
                " was given a tensor on ", tensor.device(),
                ": a device kernel reads device memory only (copy it to the device first)");
    task.touch(tensor.storage());
    pointers.push_back(tensor.numel() == 0 ? nullptr : tensor.data_ptr());
  }
  auto fn = reinterpret_cast<PackedKernel>(kernel);
  task.run = [fn, pointers = std::move(pointers), integers = std::move(integers)] {
    fn(pointers.data(), integers.data());
  };
  current_stream(device).enqueue(std::move(task));
}

}  // namespace dicp_emu
