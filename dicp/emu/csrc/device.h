// The device's registration with PyTorch and its generators (device.cpp).
#pragma once

#include <ATen/core/Generator.h>

#include "runtime.h"

namespace dicp_emu {

void register_runtime();  // guard, allocator, hooks; fails if PrivateUse1 has a C++ runtime
const at::Generator& default_generator(c10::DeviceIndex device);
uint64_t draw_seed(at::Generator generator);  // an emu generator's next kernel seed

}  // namespace dicp_emu
