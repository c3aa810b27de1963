// Devices, streams and events. A stream is a queue and one worker thread that runs the queue's
// tasks in order; the host enqueues and returns. Events are version counters a stream advances
// when it reaches the point they were recorded at, so another stream can wait for them.
#include "runtime.h"

#include <c10/util/Exception.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include <omp.h>
#include <pthread.h>

namespace dicp_emu {

namespace {

using Clock = std::chrono::steady_clock;

thread_local c10::DeviceIndex t_device = 0;
thread_local std::array<c10::StreamId, kDeviceCount> t_stream{};  // 0: the default stream

constexpr c10::StreamId kPoolSize = 4;   // ids 1..kPoolSize: the global pool
constexpr size_t kMaxStreams = 1024;     // per device, a guard against runaway creation

// Streams, and the registry, are never destroyed: their detached workers outlive any static
// destructor.
struct Registry {
  std::mutex mutex;
  std::array<std::vector<Stream*>, kDeviceCount> streams;
  std::array<c10::StreamId, kDeviceCount> next_pool{};
};
Registry& g_registry = *new Registry();
std::mutex& g_streams_mutex = g_registry.mutex;
auto& g_streams = g_registry.streams;
auto& g_next_pool = g_registry.next_pool;

Stream& stream_at(c10::DeviceIndex device, c10::StreamId id) {
  std::lock_guard<std::mutex> lock(g_streams_mutex);
  auto& streams = g_streams[device];
  if (streams.empty()) {  // the default stream and the pool, created together
    for (c10::StreamId i = 0; i <= kPoolSize; ++i) streams.push_back(new Stream(device, i));
  }
  TORCH_CHECK(id >= 0 && static_cast<size_t>(id) < streams.size(), "emu: no stream ", id,
              " on emu:", static_cast<int>(device));
  return *streams[id];
}

std::string error_text(const std::exception& error) {
  if (auto* c10_error = dynamic_cast<const c10::Error*>(&error)) {
    return c10_error->what_without_backtrace();
  }
  return error.what();
}

}  // namespace

// ---- fork ----

namespace {
std::atomic<bool> g_forked{false};
}  // namespace

void install_fork_guard() {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(nullptr, nullptr, [] { g_forked = true; }); });
}

bool in_forked_child() {
  return g_forked;
}

// ---- devices ----

c10::DeviceIndex checked_index(c10::DeviceIndex index) {
  if (index < 0) return t_device;
  TORCH_CHECK(index < kDeviceCount, "emu: device index ", static_cast<int>(index),
              " is out of range: there are ", static_cast<int>(kDeviceCount), " emu devices");
  return index;
}

c10::DeviceIndex current_device() {
  return t_device;
}

void set_device(c10::DeviceIndex index) {
  if (index >= 0) t_device = checked_index(index);
}

// ---- streams ----

struct Stream::State {
  std::mutex mutex;
  std::condition_variable work, done;
  std::deque<Task> queue;
  uint64_t enqueued = 0, completed = 0;
  std::string error;  // the first failed task's message, raised at the next wait
  bool started = false;
};

Stream::Stream(c10::DeviceIndex device, c10::StreamId id)
    : device_(device), id_(id), state_(std::make_shared<State>()) {}

uint64_t Stream::enqueue(Task task) {
  TORCH_CHECK(!g_forked, "emu: the emulated device cannot be used in a forked child process "
              "(its stream threads do not survive fork()); start processes with 'spawn'");
  uint64_t ticket;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (!state_->started) {
      state_->started = true;
      std::thread([this] { loop(); }).detach();
    }
    claim_uses(task.uses, this);
    state_->queue.push_back(std::move(task));
    ticket = ++state_->enqueued;
  }
  state_->work.notify_one();
  return ticket;
}

void Stream::loop() {
  set_device(device_);
  // Kernels run on this thread alone: device work must not take the host's cores (OpenMP
  // teams spinning here starved the enqueueing host thread on a 2-core machine).
  omp_set_num_threads(1);
  State& state = *state_;
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(state.mutex);
      state.work.wait(lock, [&] { return !state.queue.empty(); });
      task = std::move(state.queue.front());
      state.queue.pop_front();
    }
    std::string error;
    open_blocks(task.blocks);
    try {
      task.run();
    } catch (const std::exception& e) {
      error = error_text(e);
    }
    close_blocks(task.blocks);
    task = Task();  // free what it held before the host can see the work as done
    {
      std::lock_guard<std::mutex> lock(state.mutex);
      ++state.completed;
      if (!error.empty() && state.error.empty()) state.error = error;
    }
    state.done.notify_all();
  }
}

void Stream::wait(uint64_t ticket) {
  host_wait([&] {  // its lock released before it takes the GIL back
    std::unique_lock<std::mutex> lock(state_->mutex);
    state_->done.wait(lock, [&] { return state_->completed >= ticket; });
  });
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (state_->error.empty()) return;
  std::string error = std::move(state_->error);
  state_->error.clear();
  TORCH_CHECK(false, "emu: device work on emu:", static_cast<int>(device_), " stream ", id_,
              " failed: ", error);
}

void Stream::synchronize() {
  uint64_t last;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    last = state_->enqueued;
  }
  wait(last);
}

bool Stream::query() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->completed == state_->enqueued;
}

c10::Stream Stream::unwrap() const {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kEmu, device_), id_);
}

Stream& stream_of(const c10::Stream& stream) {
  TORCH_CHECK(stream.device_type() == kEmu, "emu: not an emu stream: ", stream);
  return stream_at(checked_index(stream.device_index()), stream.id());
}

Stream& current_stream(c10::DeviceIndex device) {
  device = checked_index(device);
  return stream_at(device, t_stream[device]);
}

c10::Stream current_c10_stream(c10::DeviceIndex device) {
  return current_stream(device).unwrap();
}

c10::Stream exchange_stream(const c10::Stream& stream) {
  Stream& next = stream_of(stream);
  c10::Stream previous = current_c10_stream(next.device());
  t_stream[next.device()] = stream.id();
  return previous;
}

c10::Stream default_stream(c10::DeviceIndex device) {
  return stream_at(checked_index(device), 0).unwrap();
}

c10::Stream new_stream(c10::DeviceIndex device) {
  device = checked_index(device);
  stream_at(device, 0);  // the default stream and pool exist first
  std::lock_guard<std::mutex> lock(g_streams_mutex);
  auto& streams = g_streams[device];
  TORCH_CHECK(streams.size() < kMaxStreams, "emu: more than ", kMaxStreams,
              " streams on one device");
  streams.push_back(new Stream(device, static_cast<c10::StreamId>(streams.size())));
  return streams.back()->unwrap();
}

c10::Stream pool_stream(c10::DeviceIndex device) {
  device = checked_index(device);
  c10::StreamId id;
  {
    std::lock_guard<std::mutex> lock(g_streams_mutex);
    id = 1 + (g_next_pool[device]++ % kPoolSize);
  }
  return stream_at(device, id).unwrap();
}

void synchronize_device(c10::DeviceIndex device) {
  device = checked_index(device);
  stream_at(device, 0);
  std::vector<Stream*> streams;
  {
    std::lock_guard<std::mutex> lock(g_streams_mutex);
    streams = g_streams[device];
  }
  for (Stream* stream : streams) stream->synchronize();
}

// ---- events ----

struct EventState {
  std::mutex mutex;
  std::condition_variable reached_cv;
  uint64_t recorded = 0;  // versions handed out by record()
  uint64_t reached = 0;   // the newest version a stream has run up to
  bool timing = false;
  Clock::time_point when;
};

EventHandle make_event(bool timing) {
  auto event = std::make_shared<EventState>();
  event->timing = timing;
  return event;
}

void record_event(const EventHandle& event, Stream& stream) {
  uint64_t version;
  {
    std::lock_guard<std::mutex> lock(event->mutex);
    version = ++event->recorded;
  }
  Task task;
  task.run = [event, version] {
    {
      std::lock_guard<std::mutex> lock(event->mutex);
      if (version > event->reached) {
        event->reached = version;
        event->when = Clock::now();
      }
    }
    event->reached_cv.notify_all();
  };
  stream.enqueue(std::move(task));
}

void block_on_event(const EventHandle& event, Stream& stream) {
  uint64_t version;
  {
    std::lock_guard<std::mutex> lock(event->mutex);
    version = event->recorded;
  }
  if (version == 0) return;  // never recorded: nothing to wait for, as in CUDA
  Task task;
  task.run = [event, version] {
    std::unique_lock<std::mutex> lock(event->mutex);
    event->reached_cv.wait(lock, [&] { return event->reached >= version; });
  };
  stream.enqueue(std::move(task));
}

bool query_event(const EventHandle& event) {
  std::lock_guard<std::mutex> lock(event->mutex);
  return event->reached >= event->recorded;
}

void synchronize_event(const EventHandle& event) {
  host_wait([&] {
    std::unique_lock<std::mutex> lock(event->mutex);
    const uint64_t version = event->recorded;
    event->reached_cv.wait(lock, [&] { return event->reached >= version; });
  });
}

double elapsed_ms(const EventHandle& start, const EventHandle& end) {
  TORCH_CHECK(start->timing && end->timing,
              "emu: elapsed_time needs two events created with enable_timing=True");
  TORCH_CHECK(start->recorded > 0 && end->recorded > 0,
              "emu: elapsed_time needs both events recorded");
  TORCH_CHECK(query_event(start) && query_event(end),
              "emu: elapsed_time needs both events completed: synchronize first");
  std::lock_guard<std::mutex> first(start->mutex);
  std::unique_lock<std::mutex> second(end->mutex, std::defer_lock);
  if (end != start) second.lock();
  return std::chrono::duration<double, std::milli>(end->when - start->when).count();
}

// ---- test and bench helpers ----

std::shared_ptr<Stall> stall_stream(Stream& stream, double timeout_s) {
  auto stall = std::make_shared<Stall>();
  Task task;
  task.run = [stall, timeout_s] {
    std::unique_lock<std::mutex> lock(stall->mutex);
    const bool released = stall->released_cv.wait_for(
        lock, std::chrono::duration<double>(timeout_s), [&] { return stall->released; });
    TORCH_CHECK(released, "emu: a stalled stream was not released within ", timeout_s, " s");
  };
  stream.enqueue(std::move(task));
  return stall;
}

void release_stall(const std::shared_ptr<Stall>& stall) {
  {
    std::lock_guard<std::mutex> lock(stall->mutex);
    stall->released = true;
  }
  stall->released_cv.notify_all();
}

void sleep_on_stream(Stream& stream, double ms) {
  Task task;
  task.run = [ms] { std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms)); };
  stream.enqueue(std::move(task));
}

}  // namespace dicp_emu
