// Device memory: a caching allocator over anonymous mappings that the host cannot touch.
//
// Each block is its own mapping, PROT_NONE while closed. A stream's worker opens the blocks of
// the task it runs (a count per block, since two streams may run tasks on one block at once)
// and closes them after. mprotect is per process, not per thread: while a worker has a block
// open, any thread of the process can read it. Isolation therefore catches host reads of
// device memory whenever no device work on that block is running, which on a test's timescale
// is nearly always; it does not catch a host read that races with a kernel on the same block.
#include "runtime.h"

#include <c10/util/Exception.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

namespace dicp_emu {

// A block's mapping has a guard page on each side of its memory, opened and closed with it:
// a kernel's vector load may straddle a tensor's first or last byte (g++ -O3 loads a whole
// vector of a row whose outer lanes a mask then discards: circular padding read 4 bytes before
// its input). On a real device that read lands in the allocator's pool and is harmless; here
// the neighbouring page was another block, closed, and the stream's thread died of SIGSEGV.
struct Block {
  char* ptr;          // the memory handed out: page-aligned, `size` bytes
  size_t size;
  c10::DeviceIndex device;
  int opens = 0;
  size_t used = 0;  // what the allocation asked for (page-rounded): a cached block may be larger
  char* mapping() const;       // the guard page before ptr
  size_t mapped_size() const;  // size and both guard pages
  // Queued tasks that use the block (Task::touch) and the stream they are on. A freed block
  // still in use goes back to the cache at once, as a CUDA caching allocator's does: the
  // next allocation on that stream may take it, since its work runs after theirs.
  int uses = 0;
  const Stream* stream = nullptr;  // kSeveralStreams if they are on more than one
};

namespace {

// The allocator's state lives as long as the process: stream workers and Python's finalizer
// may still free blocks while static destructors run at exit.
struct State {
  std::mutex mutex;                      // everything below
  std::map<uintptr_t, Block*> blocks;    // base address -> block, for every live mapping
  std::multimap<size_t, Block*> cache[kDeviceCount];  // free blocks by size
  MemoryStats stats[kDeviceCount];
  std::map<uintptr_t, size_t> pinned;    // pinned host memory: base -> size
};
State& g = *new State();
std::mutex& g_mutex = g.mutex;
auto& g_blocks = g.blocks;
auto& g_cache = g.cache;
auto& g_stats = g.stats;
auto& g_pinned = g.pinned;
bool g_isolation = true;
const Stream* const kSeveralStreams = reinterpret_cast<const Stream*>(&g_isolation);

size_t page_size() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

size_t round_to_pages(size_t n) {
  return (n + page_size() - 1) / page_size() * page_size();
}

int closed_protection() {
  return g_isolation ? PROT_NONE : (PROT_READ | PROT_WRITE);
}

void protect(Block* block, int protection) {
  TORCH_CHECK(mprotect(block->mapping(), block->mapped_size(), protection) == 0,
              "emu: mprotect of a device block failed: ", std::strerror(errno));
}

void unmap(Block* block) {
  g_blocks.erase(reinterpret_cast<uintptr_t>(block->ptr));
  munmap(block->mapping(), block->mapped_size());
  delete block;
}

void release_cache_locked() {  // but blocks that queued work still uses
  for (auto& cache : g_cache) {
    for (auto it = cache.begin(); it != cache.end();) {
      if (it->second->uses > 0) {
        ++it;
        continue;
      }
      unmap(it->second);
      it = cache.erase(it);
    }
  }
}

Block* map_block(size_t size, c10::DeviceIndex device) {
  const size_t mapped = size + 2 * page_size();
  void* ptr = mmap(nullptr, mapped, closed_protection(), MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (ptr == MAP_FAILED) {  // cached blocks of other sizes may be what is in the way
    release_cache_locked();
    ptr = mmap(nullptr, mapped, closed_protection(), MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  }
  TORCH_CHECK(ptr != MAP_FAILED, "emu: out of device memory: mapping ", size,
              " bytes failed: ", std::strerror(errno));
  auto* block = new Block{static_cast<char*>(ptr) + page_size(), size, device};
  g_blocks[reinterpret_cast<uintptr_t>(block->ptr)] = block;
  return block;
}

// A cached block fits if it wastes at most a quarter of itself and no queued work of another
// stream than `stream` (the allocating one) still uses it.
Block* take_cached(size_t size, c10::DeviceIndex device, const Stream* stream) {
  auto& cache = g_cache[device];
  for (auto it = cache.lower_bound(size); it != cache.end() && it->first <= size + size / 4;
       ++it) {
    Block* block = it->second;
    if (block->uses > 0 && block->stream != stream) continue;
    cache.erase(it);
    return block;
  }
  return nullptr;
}

void count(Block* block, int sign) {
  auto& stats = g_stats[block->device];
  // The request's size, as CUDA's allocator counts it, not the block's: a block taken from the
  // cache may be up to a quarter larger, and the peak would depend on what was cached before.
  stats.allocated += sign * static_cast<int64_t>(block->used);
  stats.allocations += sign;
  stats.peak = std::max(stats.peak, stats.allocated);
}

void free_block(void* context) {
  auto* block = static_cast<Block*>(context);
  std::lock_guard<std::mutex> lock(g_mutex);
  count(block, -1);
  g_cache[block->device].emplace(block->size, block);
}

struct DeviceAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    const auto device = current_device();
    if (n == 0) return {nullptr, nullptr, &free_nothing, c10::Device(kEmu, device)};
    const size_t size = round_to_pages(n);
    const Stream* stream = &current_stream(device);
    std::lock_guard<std::mutex> lock(g_mutex);
    Block* block = take_cached(size, device, stream);
    if (block == nullptr) block = map_block(size, device);
    block->used = size;
    count(block, +1);
    return {block->ptr, block, &free_block, c10::Device(kEmu, device)};
  }

  // Storage clones copy device to device: device work, waited for.
  void copy_data(void* dest, const void* src, std::size_t n) const override {
    Task task;
    task.blocks = {find_block(dest), find_block(src)};
    task.run = [dest, src, n] { std::memcpy(dest, src, n); };
    auto& stream = current_stream(current_device());
    stream.wait(stream.enqueue(std::move(task)));
  }

  static void free_nothing(void*) {}
};

// Pinned host memory: ordinary host memory the runtime knows, so asynchronous copies may use it.

void free_pinned(void* ptr) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_pinned.erase(reinterpret_cast<uintptr_t>(ptr));
  }
  std::free(ptr);
}

struct PinnedAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    if (n == 0) return {nullptr, nullptr, &free_pinned, c10::Device(c10::kCPU)};
    void* ptr = std::aligned_alloc(64, (n + 63) / 64 * 64);
    TORCH_CHECK(ptr != nullptr, "emu: out of pinned host memory (", n, " bytes)");
    std::lock_guard<std::mutex> lock(g_mutex);
    g_pinned[reinterpret_cast<uintptr_t>(ptr)] = n;
    return {ptr, ptr, &free_pinned, c10::Device(c10::kCPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_pinned; }
  void copy_data(void* dest, const void* src, std::size_t n) const override {
    default_copy_data(dest, src, n);
  }
};

template <class Map>
typename Map::const_iterator containing(const Map& map, const void* ptr) {
  auto address = reinterpret_cast<uintptr_t>(ptr);
  auto it = map.upper_bound(address);
  if (it == map.begin()) return map.end();
  return std::prev(it);
}

}  // namespace

char* Block::mapping() const { return ptr - page_size(); }

size_t Block::mapped_size() const { return size + 2 * page_size(); }

// A device storage is not kept alive: its block stays mapped while `uses` counts the task,
// and freed memory is free at once (peak memory follows the host's frees, not the queue).
void Task::touch(const c10::Storage& storage) {
  if (!storage) return;
  Block* block = find_block(storage.data());
  blocks.push_back(block);
  if (block == nullptr) {
    keep.push_back(storage);
  } else {
    uses.push_back(use_block(block));
  }
}

BlockUse use_block(Block* block) {
  std::lock_guard<std::mutex> lock(g_mutex);
  ++block->uses;
  return BlockUse(block, [](Block* used) {  // the task has run (or was never enqueued)
    std::lock_guard<std::mutex> lock(g_mutex);
    if (--used->uses == 0) used->stream = nullptr;
  });
}

void claim_uses(const std::vector<BlockUse>& uses, const Stream* stream) {
  std::lock_guard<std::mutex> lock(g_mutex);
  for (const auto& use : uses) {
    use->stream = use->stream == nullptr || use->stream == stream ? stream : kSeveralStreams;
  }
}

c10::Allocator* device_allocator() {
  static DeviceAllocator allocator;
  return &allocator;
}

c10::Allocator* pinned_allocator() {
  static PinnedAllocator allocator;
  return &allocator;
}

bool is_pinned(const void* ptr) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = containing(g_pinned, ptr);
  return it != g_pinned.end() &&
         reinterpret_cast<uintptr_t>(ptr) < it->first + std::max<size_t>(it->second, 1);
}

Block* find_block(const void* ptr) {
  if (ptr == nullptr) return nullptr;
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = containing(g_blocks, ptr);
  if (it == g_blocks.end()) return nullptr;
  Block* block = it->second;
  return static_cast<const char*>(ptr) < block->ptr + block->size ? block : nullptr;
}

c10::DeviceIndex device_of_block(const Block* block) {
  return block->device;
}

MemoryStats memory_stats(c10::DeviceIndex device) {
  device = checked_index(device);
  std::lock_guard<std::mutex> lock(g_mutex);
  MemoryStats stats = g_stats[device];
  stats.reserved = stats.allocated;
  for (auto& entry : g_cache[device]) stats.reserved += static_cast<int64_t>(entry.first);
  return stats;
}

void reset_peak(c10::DeviceIndex device) {
  device = checked_index(device);
  std::lock_guard<std::mutex> lock(g_mutex);
  g_stats[device].peak = g_stats[device].allocated;
}

void empty_cache() {
  std::lock_guard<std::mutex> lock(g_mutex);
  release_cache_locked();
}

void set_isolation(bool on) {
  std::lock_guard<std::mutex> lock(g_mutex);
  TORCH_CHECK(g_blocks.empty() || on == g_isolation,
              "emu: isolation can only change before the first device allocation");
  g_isolation = on;
}

bool isolation() {
  return g_isolation;
}

void open_blocks(const std::vector<Block*>& blocks) {
  if (!g_isolation) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  for (Block* block : blocks) {
    if (block != nullptr && block->opens++ == 0) protect(block, PROT_READ | PROT_WRITE);
  }
}

void close_blocks(const std::vector<Block*>& blocks) {
  if (!g_isolation) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  for (Block* block : blocks) {
    if (block != nullptr && --block->opens == 0) protect(block, PROT_NONE);
  }
}

}  // namespace dicp_emu
