// The emulated device's runtime: devices, memory and streams. This is the part a vendor's own
// driver replaces (DIPU's "device runtime" layer): nothing here knows about ATen ops.
//
// Memory: every device allocation is its own anonymous mapping, kept PROT_NONE while no device
// work touches it, so host code that dereferences a device pointer crashes at once. A stream's
// worker thread opens the blocks a task names, runs the task, and closes them again.
// Streams: one worker thread per stream runs its tasks in order; the host only enqueues.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Device.h>
#include <c10/core/Storage.h>
#include <c10/core/Stream.h>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace dicp_emu {

constexpr c10::DeviceType kEmu = c10::DeviceType::PrivateUse1;
constexpr c10::DeviceIndex kDeviceCount = 2;

// ---- devices (the current device is per host thread, as in CUDA) ----
c10::DeviceIndex current_device();
void set_device(c10::DeviceIndex index);
c10::DeviceIndex checked_index(c10::DeviceIndex index);  // -1 -> current; throws if invalid

// ---- memory ----
struct Block;  // one mapping of device memory

struct MemoryStats {
  int64_t allocated = 0;  // bytes in blocks handed out (page-rounded)
  int64_t peak = 0;       // highest `allocated` since the last reset
  int64_t reserved = 0;   // allocated + cached
  int64_t allocations = 0;  // blocks handed out now
};

c10::Allocator* device_allocator();
c10::Allocator* pinned_allocator();
bool is_pinned(const void* ptr);
Block* find_block(const void* ptr);  // the device block holding ptr, or nullptr
c10::DeviceIndex device_of_block(const Block* block);
MemoryStats memory_stats(c10::DeviceIndex device);
void reset_peak(c10::DeviceIndex device);
void empty_cache();
void set_isolation(bool on);  // before the first allocation
bool isolation();
void open_blocks(const std::vector<Block*>& blocks);   // worker side: make readable
void close_blocks(const std::vector<Block*>& blocks);  // and unreadable again
class Stream;
using BlockUse = std::shared_ptr<Block>;  // a queued task's use of a block (see Task::touch)
BlockUse use_block(Block* block);
void claim_uses(const std::vector<BlockUse>& uses, const Stream* stream);  // at enqueue

// ---- fork: stream threads do not survive it, so a forked child must not use the device ----
void install_fork_guard();
bool in_forked_child();

// ---- streams ----
struct Task {
  std::function<void()> run;
  std::vector<Block*> blocks;        // device memory the task touches
  std::vector<c10::Storage> keep;    // (host) storages kept alive until the task has run
  std::vector<BlockUse> uses;        // device blocks in use until the task has run
  void touch(const c10::Storage& storage);  // open its block; keep it mapped (or alive)
};

class Stream {
 public:
  Stream(c10::DeviceIndex device, c10::StreamId id);
  uint64_t enqueue(Task task);  // returns a ticket to wait for
  void wait(uint64_t ticket);   // blocks the host; raises a failed task's error
  void synchronize();
  bool query();
  c10::Stream unwrap() const;
  c10::DeviceIndex device() const { return device_; }

 private:
  struct State;
  void loop();
  c10::DeviceIndex device_;
  c10::StreamId id_;
  std::shared_ptr<State> state_;
};

Stream& stream_of(const c10::Stream& stream);
Stream& current_stream(c10::DeviceIndex device);
c10::Stream current_c10_stream(c10::DeviceIndex device);
c10::Stream exchange_stream(const c10::Stream& stream);  // sets current, returns previous
c10::Stream default_stream(c10::DeviceIndex device);
c10::Stream new_stream(c10::DeviceIndex device);
c10::Stream pool_stream(c10::DeviceIndex device);
void synchronize_device(c10::DeviceIndex device);
// Runs `wait`, a host thread blocking until device work is done, without the GIL if it holds
// it (module.cpp): a worker freeing a finished task's storages may need the GIL.
void host_wait(const std::function<void()>& wait);

// ---- events: a version counter the recording stream advances ----
struct EventState;
using EventHandle = std::shared_ptr<EventState>;
EventHandle make_event(bool timing);
void record_event(const EventHandle& event, Stream& stream);
void block_on_event(const EventHandle& event, Stream& stream);  // stream waits for it
bool query_event(const EventHandle& event);
void synchronize_event(const EventHandle& event);
double elapsed_ms(const EventHandle& start, const EventHandle& end);

// ---- test and bench helpers: device work of a known shape ----
// A task that holds a stream until the host releases it (tests of asynchrony need no clock).
struct Stall {
  std::mutex mutex;
  std::condition_variable released_cv;
  bool released = false;
};
std::shared_ptr<Stall> stall_stream(Stream& stream, double timeout_s);
void release_stall(const std::shared_ptr<Stall>& stall);
void sleep_on_stream(Stream& stream, double ms);

}  // namespace dicp_emu
