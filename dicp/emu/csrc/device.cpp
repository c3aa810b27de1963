// What PyTorch asks of a PrivateUse1 device: a device guard (current device and stream,
// events), the hooks (availability, generators, pinned memory), the allocator.
// Registered by register_runtime(), called from Python after the PrivateUse1 check, never by
// loading this library: a process whose PrivateUse1 belongs to another runtime is untouched.
#include "device.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <array>
#include <mutex>

#include "ops.h"

namespace dicp_emu {

namespace {

EventHandle& handle(void* event) {
  return *static_cast<EventHandle*>(event);
}

struct GuardImpl final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kEmu; }

  c10::Device exchangeDevice(c10::Device device) const override {
    const auto previous = current_device();
    set_device(device.index());
    return c10::Device(kEmu, previous);
  }
  c10::Device getDevice() const override { return c10::Device(kEmu, current_device()); }
  void setDevice(c10::Device device) const override { set_device(device.index()); }
  void uncheckedSetDevice(c10::Device device) const noexcept override {
    if (device.index() >= 0 && device.index() < kDeviceCount) set_device(device.index());
  }
  c10::DeviceIndex deviceCount() const noexcept override { return kDeviceCount; }

  c10::Stream getStream(c10::Device device) const override {
    return current_c10_stream(device.index());
  }
  c10::Stream getDefaultStream(c10::Device device) const override {
    return default_stream(device.index());
  }
  c10::Stream getNewStream(c10::Device device, int /*priority*/) const override {
    return new_stream(device.index());
  }
  c10::Stream getStreamFromGlobalPool(c10::Device device, bool /*high*/) const override {
    return pool_stream(device.index());
  }
  c10::Stream exchangeStream(c10::Stream stream) const override {
    return exchange_stream(stream);
  }
  bool queryStream(const c10::Stream& stream) const override {
    return stream_of(stream).query();
  }
  void synchronizeStream(const c10::Stream& stream) const override {
    stream_of(stream).synchronize();
  }
  void synchronizeDevice(const c10::DeviceIndex device) const override {
    synchronize_device(device);
  }

  // Events: the opaque handle is a heap-held shared pointer to the event's state, so tasks
  // that record or wait keep the state alive after the Python object is gone.
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device == -1 || device == stream.device_index(), "emu: event of emu:",
                static_cast<int>(device), " recorded on a stream of ", stream.device());
    if (*event == nullptr) {
      *event = new EventHandle(make_event(flag == c10::EventFlag::BACKEND_DEFAULT));
    }
    record_event(handle(*event), stream_of(stream));
  }
  void block(void* event, const c10::Stream& stream) const override {
    if (event != nullptr) block_on_event(handle(event), stream_of(stream));
  }
  bool queryEvent(void* event) const override {
    return event == nullptr || query_event(handle(event));
  }
  void synchronizeEvent(void* event) const override {
    if (event != nullptr) synchronize_event(handle(event));
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex /*device*/) const override {
    TORCH_CHECK(start != nullptr && end != nullptr,
                "emu: elapsed_time needs both events recorded");
    return elapsed_ms(handle(start), handle(end));
  }
  void destroyEvent(void* event, const c10::DeviceIndex /*device*/) const noexcept override {
    delete static_cast<EventHandle*>(event);
  }
  // Tasks count their uses of blocks and the streams they run on (memory.cpp): a freed block
  // goes to another stream only after them, so there is nothing to record.
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {}
};

// A generator per device. Device kernels draw a seed from it on the host, in call order, and
// run the CPU's random kernels with a CPU generator of that seed: the sequence depends on the
// seed and the calls, never on when the stream's thread runs them.
struct EmuGenerator final : c10::GeneratorImpl {
  explicit EmuGenerator(c10::DeviceIndex index)
      : c10::GeneratorImpl(c10::Device(kEmu, index),
                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
        engine_(at::make_generator<at::CPUGeneratorImpl>(c10::default_rng_seed_val)) {}

  uint64_t draw_seed() { return cpu()->random64(); }

  void set_current_seed(uint64_t seed) override { cpu()->set_current_seed(seed); }
  void set_offset(uint64_t offset) override { cpu()->set_offset(offset); }
  uint64_t get_offset() const override { return cpu()->get_offset(); }
  uint64_t current_seed() const override { return cpu()->current_seed(); }
  uint64_t seed() override { return cpu()->seed(); }
  void set_state(const c10::TensorImpl& state) override { cpu()->set_state(state); }
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override { return cpu()->get_state(); }

 private:
  EmuGenerator* clone_impl() const override {
    auto* copy = new EmuGenerator(device().index());
    copy->engine_ = engine_.clone();
    return copy;
  }
  at::CPUGeneratorImpl* cpu() const { return engine_.get<at::CPUGeneratorImpl>(); }

  at::Generator engine_;
};

struct Hooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return true; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  void init() const override {}
  c10::DeviceIndex deviceCount() const override { return kDeviceCount; }
  void setCurrentDevice(c10::DeviceIndex device) const override { set_device(device); }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    const auto previous = current_device();
    set_device(device);
    return previous;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return exchangeDevice(device);
  }
  bool isPinnedPtr(const void* data) const override { return is_pinned(data); }
  at::Allocator* getPinnedMemoryAllocator() const override { return pinned_allocator(); }
  at::Device getDeviceFromPtr(void* data) const override {
    Block* block = find_block(data);
    TORCH_CHECK(block != nullptr, "emu: ", data, " is not emu device memory");
    return c10::Device(kEmu, device_of_block(block));
  }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device) const override {
    return default_generator(device);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device) const override {
    return at::make_generator<EmuGenerator>(checked_index(device));
  }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t nbytes) const override {
    resize_storage_bytes(storage.unsafeGetStorageImpl(), nbytes);
  }
};

}  // namespace

const at::Generator& default_generator(c10::DeviceIndex device) {
  static std::array<std::once_flag, kDeviceCount> once;
  static std::array<at::Generator, kDeviceCount> generators;
  device = checked_index(device);
  std::call_once(once[device], [device] {
    generators[device] = at::make_generator<EmuGenerator>(device);
  });
  return generators[device];
}

uint64_t draw_seed(at::Generator generator) {
  auto* emu = dynamic_cast<EmuGenerator*>(generator.unsafeGetGeneratorImpl());
  TORCH_CHECK(emu != nullptr, "emu: expected an emu generator, got one of ",
              generator.device());
  std::lock_guard<std::mutex> lock(generator.mutex());
  return emu->draw_seed();
}

void register_runtime() {
  TORCH_CHECK(!c10::impl::hasDeviceGuardImpl(kEmu) && !at::isPrivateUse1HooksRegistered(),
              "emu: PrivateUse1 already has a device runtime registered from C++ (another "
              "vendor's extension); dicp.emu cannot take it");
  install_fork_guard();
  static c10::impl::DeviceGuardImplRegistrar guard(kEmu, new GuardImpl());
  c10::SetAllocator(kEmu, device_allocator());
  at::RegisterPrivateUse1HooksInterface(new Hooks());
}

}  // namespace dicp_emu
