// A CUDA driver for machines without a GPU, installed as libcuda.so.1 on the tests'
// LD_LIBRARY_PATH so that JCuda's own JNI code, and with it every line of the CUDA backend, runs
// in CI. It implements the driver calls the backend makes, with a GPU's semantics where they
// matter for correctness:
//   - device memory is host memory handed out as device pointers; new allocations are filled with
//     NaN bytes (a GPU does not zero them either), the device's size is configurable;
//   - a stream is a host thread running its queue in order; events are completion points with
//     times; cuStreamWaitEvent orders streams; errors of enqueued work surface at synchronize and
//     stick to the context, as a GPU's do;
//   - kernels are the project's own CUDA sources compiled as C++ (cuda_shim.h) and found by name
//     at module load; a block's threads run one after another, or as fibers switching at
//     __syncthreads for kernels that use barriers;
//   - a driver call from a thread without a current context fails, as on a GPU.
// Faults for the tests come from the file named by RAMTRAIN_CUDA_EMULATOR_FAULTS, read when the
// primary context is created (see README.md beside this file).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cuda_shim.h"
#include "emulator_fibers.h"
#include "emulator_registry.h"
#include "emulator_streams.h"

#define EXPORT extern "C" __attribute__((visibility("default")))

namespace emu {

thread_local dim3 thread_idx, block_idx, block_dim, grid_dim;

// ---- kernel registry ------------------------------------------------------------------------

struct Kernel {
  std::string name;
  Binder binder;
  bool barriers;
};

static std::map<std::string, Kernel>& kernels() {
  static std::map<std::string, Kernel> registry;  // filled by static initializers only
  return registry;
}

void register_kernel(const char* name, Binder binder, bool barriers) {
  kernels()[name] = Kernel{name, std::move(binder), barriers};
}

// ---- block scheduling: fibers for kernels with barriers -------------------------------------

static const size_t kFiberStack = 64 * 1024;
static const unsigned kMaxFiberThreads = 1024;

struct Fiber {
  FiberContext context;
  bool done;
};

thread_local FiberContext scheduler;
thread_local Fiber* running = nullptr;
thread_local const ThreadBody* running_body = nullptr;
thread_local std::vector<std::unique_ptr<char[]>> fiber_stacks;

void syncthreads() {
  if (running == nullptr) {
    std::fprintf(stderr,
                 "cuda emulator: __syncthreads in a kernel registered with RT_KERNEL; register "
                 "it with RT_KERNEL_WITH_BARRIERS\n");
    std::abort();
  }
  fiber_switch(running->context, scheduler);
}

static void fiber_entry() {
  (*running_body)();
  running->done = true;
  fiber_switch(running->context, scheduler);  // never resumed
  std::abort();
}

static dim3 coordinates(unsigned t, const dim3& block) {
  dim3 d;
  d.x = t % block.x;
  d.y = (t / block.x) % block.y;
  d.z = t / (block.x * block.y);
  return d;
}

static void run_block(const ThreadBody& body, bool barriers, const dim3& block) {
  unsigned threads = block.x * block.y * block.z;
  if (!barriers) {
    for (unsigned t = 0; t < threads; t++) {
      thread_idx = coordinates(t, block);
      body();
    }
    return;
  }
  while (fiber_stacks.size() < threads) {
    fiber_stacks.emplace_back(new char[kFiberStack]);
  }
  std::vector<Fiber> fibers(threads);
  for (unsigned t = 0; t < threads; t++) {
    fiber_make(fibers[t].context, fiber_stacks[t].get(), kFiberStack, fiber_entry);
    fibers[t].done = false;
  }
  running_body = &body;
  // Each round runs every unfinished thread up to its next barrier: a CUDA barrier's semantics.
  for (bool left = true; left;) {
    left = false;
    for (unsigned t = 0; t < threads; t++) {
      if (fibers[t].done) continue;
      running = &fibers[t];
      thread_idx = coordinates(t, block);
      fiber_switch(scheduler, fibers[t].context);
      left |= !fibers[t].done;
    }
  }
  running = nullptr;
  running_body = nullptr;
}

static void run_grid(const ThreadBody& body, bool barriers, dim3 grid, dim3 block) {
  grid_dim = grid;
  block_dim = block;
  for (unsigned z = 0; z < grid.z; z++)
    for (unsigned y = 0; y < grid.y; y++)
      for (unsigned x = 0; x < grid.x; x++) {
        block_idx.x = x;
        block_idx.y = y;
        block_idx.z = z;
        run_block(body, barriers, block);
      }
}

}  // namespace emu

// ---- driver state ---------------------------------------------------------------------------

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct Context* CUcontext;
typedef struct Module* CUmodule;
typedef struct Function* CUfunction;
typedef struct Event* CUevent;

enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_IMAGE = 200,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_NOT_READY = 600,
  CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
  CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712,
  CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713,
  CUDA_ERROR_LAUNCH_FAILED = 719,
  CUDA_ERROR_UNKNOWN = 999,
};

struct Faults {
  long fail_alloc = 0;          // the Nth cuMemAlloc fails with out of memory (1-based; 0: never)
  long slow_copy_us = 0;        // every host-device copy first waits this long
  std::string fail_launch;      // launches of this kernel fail when they run
  long lose_device_after = 0;   // after this many launches every call fails (0: never)
  std::string lose_device_when;  // or from the first launch after this file appears
  unsigned long long memory = 4ULL << 30;  // the device's memory
  int driver_version = 13000;   // what cuDriverGetVersion reports (CUDA 13.0: driver 580)
  int sm_major = 9, sm_minor = 0;
  int devices = 1;              // GPUs the driver reports (all share one emulated context)
};

static Faults read_faults() {
  Faults f;
  if (const char* memory = std::getenv("RAMTRAIN_CUDA_EMULATOR_MEMORY")) {
    f.memory = std::strtoull(memory, nullptr, 10);
  }
  const char* path = std::getenv("RAMTRAIN_CUDA_EMULATOR_FAULTS");
  if (path == nullptr) return f;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string key = line.substr(0, eq), value = line.substr(eq + 1);
    if (key == "fail-alloc") f.fail_alloc = std::stol(value);
    else if (key == "slow-copy-us") f.slow_copy_us = std::stol(value);
    else if (key == "fail-launch") f.fail_launch = value;
    else if (key == "lose-device-after") f.lose_device_after = std::stol(value);
    else if (key == "lose-device-when") f.lose_device_when = value;
    else if (key == "memory") f.memory = std::stoull(value);
    else if (key == "driver-version") f.driver_version = std::stoi(value);
    else if (key == "devices") f.devices = std::stoi(value);
    else if (key == "compute-capability") {
      f.sm_major = std::stoi(value.substr(0, value.find('.')));
      f.sm_minor = std::stoi(value.substr(value.find('.') + 1));
    }
  }
  return f;
}

struct Context {
  std::mutex lock;
  int references = 0;
  Faults faults;
  std::map<CUdeviceptr, size_t> device;  // live device allocations
  std::map<void*, size_t> pinned;        // live pinned host allocations
  std::map<void*, size_t> registered;    // host memory of the caller's, page-locked
  unsigned long long used = 0;
  long allocations = 0;
  std::atomic<long> launches{0};
  std::atomic<int> sticky{CUDA_SUCCESS};  // an error that has broken the context
};

struct Module {
  int unused = 0;
};

struct Function {
  const emu::Kernel* kernel;
};

static Context primary;
static bool initialized = false;
static thread_local CUcontext current = nullptr;

static CUresult with_context() {
  if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (current == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  return current->sticky.load();
}

#define REQUIRE_CONTEXT()                  \
  do {                                     \
    CUresult state = with_context();       \
    if (state != CUDA_SUCCESS) return state; \
  } while (0)

// ---- streams and events ---------------------------------------------------------------------

struct Event {
  std::mutex lock;
  std::condition_variable reached;
  unsigned long long recorded = 0;   // points recorded so far
  unsigned long long completed = 0;  // the last point reached
  std::chrono::steady_clock::time_point at;
  bool timing = true;
};

namespace emu {

Stream::Stream() : worker([this] { run(); }) {}

Stream::~Stream() {
  {
    std::lock_guard<std::mutex> g(lock);
    closing = true;
  }
  ready.notify_all();
  worker.join();
}

void Stream::enqueue(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> g(lock);
    queue.push_back(std::move(task));
    unfinished++;
  }
  ready.notify_all();
}

bool Stream::on_worker() const { return std::this_thread::get_id() == worker.get_id(); }

bool Stream::idle() {
  std::lock_guard<std::mutex> g(lock);
  return unfinished == 0;
}

void Stream::run() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> g(lock);
      ready.wait(g, [this] { return closing || !queue.empty(); });
      if (queue.empty()) return;
      task = std::move(queue.front());
      queue.pop_front();
    }
    task();
    std::lock_guard<std::mutex> g(lock);
    unfinished--;
  }
}

void Stream::drain() {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  enqueue([&] {
    std::lock_guard<std::mutex> g(m);
    done = true;
    cv.notify_all();
  });
  std::unique_lock<std::mutex> g(m);
  cv.wait(g, [&] { return done; });
}

// Work for the device: skipped once the context is broken (markers still run, so nothing hangs).
void enqueue_work(Stream* stream, std::function<void()> work) {
  Context* context = current;
  auto task = [context, work = std::move(work)] {
    if (context->sticky.load() == CUDA_SUCCESS) work();
  };
  if (stream == nullptr) {
    task();  // the legacy default stream: synchronous here
  } else {
    stream->enqueue(std::move(task));
  }
}

int context_error() { return current == nullptr ? CUDA_ERROR_INVALID_CONTEXT : with_context(); }

}  // namespace emu

using emu::Stream;
typedef Stream* CUstream;

// Every live stream and its context, for what the driver does to all of a context's streams.
static std::mutex streams_lock;
static std::map<Stream*, Context*> stream_contexts;

// Waits for the work queued so far on every stream of the context, as the driver does in
// cuCtxSynchronize and before it frees memory (cuMemFree, cuMemFreeHost): memory is never freed
// under work still using it. A stream is not destroyed meanwhile (streams_lock); its own thread
// would wait for itself, so that stream is skipped.
static void drain_streams(Context* context) {
  std::lock_guard<std::mutex> g(streams_lock);
  for (auto& [stream, owner] : stream_contexts) {
    if (owner == context && !stream->on_worker()) stream->drain();
  }
}

// ---- initialization and devices -------------------------------------------------------------

EXPORT CUresult cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  initialized = true;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDriverGetVersion(int* version) {
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *version = read_faults().driver_version;
  return CUDA_SUCCESS;
}

// The GPUs reported: as the faults file says, and while a context is open, as it said then (the
// tests delete the file once the backend is open).
static int device_count() {
  int n = read_faults().devices;
  std::lock_guard<std::mutex> g(primary.lock);
  return primary.references > 0 ? std::max(n, primary.faults.devices) : n;
}

static bool valid(CUdevice device) { return device >= 0 && device < device_count(); }

EXPORT CUresult cuDeviceGetCount(int* count) {
  if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
  *count = device_count();
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (ordinal < 0 || ordinal >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetName(char* name, int length, CUdevice device) {
  if (!valid(device)) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(name, length, "ramtrain CUDA emulator");
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice device) {
  if (!valid(device)) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = read_faults().memory;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetAttribute(int* value, int attribute, CUdevice device) {
  if (!valid(device)) return CUDA_ERROR_INVALID_DEVICE;
  Faults f = read_faults();
  switch (attribute) {
    case 1: *value = 1024; break;    // max threads per block
    case 8: *value = 49152; break;   // shared memory per block
    case 10: *value = 32; break;     // warp size
    case 16: *value = 2; break;      // multiprocessors
    case 75: *value = f.sm_major; break;
    case 76: *value = f.sm_minor; break;
    default: *value = 0; break;
  }
  return CUDA_SUCCESS;
}

// ---- contexts -------------------------------------------------------------------------------

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (!valid(device)) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard<std::mutex> g(primary.lock);
  if (primary.references++ == 0) {
    primary.faults = read_faults();
    primary.allocations = 0;
    primary.launches = 0;
    primary.sticky = CUDA_SUCCESS;
  }
  *context = &primary;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
  if (!valid(device)) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard<std::mutex> g(primary.lock);
  if (primary.references == 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (--primary.references == 0) {  // the context goes, and its memory with it
    for (auto& a : primary.device) std::free(reinterpret_cast<void*>(a.first));
    for (auto& a : primary.pinned) std::free(a.first);
    primary.device.clear();
    primary.pinned.clear();
    primary.registered.clear();
    primary.used = 0;
  }
  return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext context) {
  current = context;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetCurrent(CUcontext* context) {
  *context = current;
  return CUDA_SUCCESS;
}

// ---- memory ---------------------------------------------------------------------------------

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* pointer, size_t bytes) {
  REQUIRE_CONTEXT();
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(current->lock);
  long n = ++current->allocations;
  if (n == current->faults.fail_alloc || current->used + bytes > current->faults.memory) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  size_t rounded = (bytes + 255) / 256 * 256;
  void* memory = std::aligned_alloc(256, rounded);
  if (memory == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  std::memset(memory, 0xFF, rounded);  // NaN patterns: code that trusts fresh memory fails here
  *pointer = reinterpret_cast<CUdeviceptr>(memory);
  current->device[*pointer] = bytes;
  current->used += bytes;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr pointer) {
  if (current == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  drain_streams(current);
  std::lock_guard<std::mutex> g(current->lock);
  auto it = current->device.find(pointer);
  if (it == current->device.end()) return CUDA_ERROR_INVALID_VALUE;
  current->used -= it->second;
  current->device.erase(it);
  std::free(reinterpret_cast<void*>(pointer));
  return current->sticky.load();
}

EXPORT CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  REQUIRE_CONTEXT();
  std::lock_guard<std::mutex> g(current->lock);
  *free_bytes = current->faults.memory - current->used;
  *total_bytes = current->faults.memory;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemHostAlloc(void** pointer, size_t bytes, unsigned int flags) {
  REQUIRE_CONTEXT();
  (void)flags;
  void* memory = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096 + (bytes == 0 ? 4096 : 0));
  if (memory == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  std::lock_guard<std::mutex> g(current->lock);
  current->pinned[memory] = bytes;
  *pointer = memory;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemFreeHost(void* pointer) {
  if (current == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  drain_streams(current);
  std::lock_guard<std::mutex> g(current->lock);
  auto it = current->pinned.find(pointer);
  if (it == current->pinned.end()) return CUDA_ERROR_INVALID_VALUE;
  current->pinned.erase(it);
  std::free(pointer);
  return current->sticky.load();
}

// The caller's memory page-locked in place: nothing to do here but to know it, so that an unknown
// or twice-unregistered range fails as the driver's does.
EXPORT CUresult cuMemHostRegister_v2(void* pointer, size_t bytes, unsigned int flags) {
  REQUIRE_CONTEXT();
  (void)flags;
  if (pointer == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(current->lock);
  if (!current->registered.emplace(pointer, bytes).second) {
    return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  }
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemHostUnregister(void* pointer) {
  if (current == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  drain_streams(current);
  std::lock_guard<std::mutex> g(current->lock);
  if (current->registered.erase(pointer) == 0) return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  return current->sticky.load();
}

// Mapped pinned memory: the device sees host memory at the same address.
EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* device, void* host, unsigned int flags) {
  REQUIRE_CONTEXT();
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  *device = reinterpret_cast<CUdeviceptr>(host);
  return CUDA_SUCCESS;
}

static CUresult copy_async(void* to, const void* from, size_t bytes, CUstream stream, bool bus) {
  REQUIRE_CONTEXT();
  long slow = bus ? current->faults.slow_copy_us : 0;
  emu::enqueue_work(stream, [to, from, bytes, slow] {
    if (slow > 0) std::this_thread::sleep_for(std::chrono::microseconds(slow));
    std::memcpy(to, from, bytes);
  });
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr to, const void* from, size_t bytes,
                                     CUstream stream) {
  return copy_async(reinterpret_cast<void*>(to), from, bytes, stream, true);
}

EXPORT CUresult cuMemcpyDtoHAsync_v2(void* to, CUdeviceptr from, size_t bytes, CUstream stream) {
  return copy_async(to, reinterpret_cast<const void*>(from), bytes, stream, true);
}

// Synchronous copies: the calling thread copies (the streams here never block the default one).
EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr to, const void* from, size_t bytes) {
  return copy_async(reinterpret_cast<void*>(to), from, bytes, nullptr, true);
}

EXPORT CUresult cuMemcpyDtoH_v2(void* to, CUdeviceptr from, size_t bytes) {
  return copy_async(to, reinterpret_cast<const void*>(from), bytes, nullptr, true);
}

EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr to, CUdeviceptr from, size_t bytes,
                                     CUstream stream) {
  return copy_async(reinterpret_cast<void*>(to), reinterpret_cast<const void*>(from), bytes,
                    stream, false);
}

EXPORT CUresult cuMemsetD8Async(CUdeviceptr to, unsigned char value, size_t count,
                                CUstream stream) {
  REQUIRE_CONTEXT();
  emu::enqueue_work(stream, [to, value, count] {
    std::memset(reinterpret_cast<void*>(to), value, count);
  });
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemsetD32Async(CUdeviceptr to, unsigned int value, size_t count,
                                 CUstream stream) {
  REQUIRE_CONTEXT();
  emu::enqueue_work(stream, [to, value, count] {
    unsigned int* words = reinterpret_cast<unsigned int*>(to);
    for (size_t i = 0; i < count; i++) words[i] = value;
  });
  return CUDA_SUCCESS;
}

// ---- streams --------------------------------------------------------------------------------

EXPORT CUresult cuStreamCreate(CUstream* stream, unsigned int flags) {
  REQUIRE_CONTEXT();
  (void)flags;
  *stream = new Stream();
  std::lock_guard<std::mutex> g(streams_lock);
  stream_contexts[*stream] = current;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamDestroy_v2(CUstream stream) {
  if (stream == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  {
    std::lock_guard<std::mutex> g(streams_lock);
    stream_contexts.erase(stream);
  }
  delete stream;  // runs what is queued, then stops its thread
  return current == nullptr ? CUDA_SUCCESS : current->sticky.load();
}

EXPORT CUresult cuStreamSynchronize(CUstream stream) {
  if (current == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (stream != nullptr) stream->drain();
  return current->sticky.load();
}

EXPORT CUresult cuStreamQuery(CUstream stream) {
  if (current == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (current->sticky.load() != CUDA_SUCCESS) return current->sticky.load();
  return stream == nullptr || stream->idle() ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

EXPORT CUresult cuCtxSynchronize() {
  if (current == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  drain_streams(current);
  return current->sticky.load();
}

EXPORT CUresult cuStreamWaitEvent(CUstream stream, CUevent event, unsigned int flags) {
  REQUIRE_CONTEXT();
  if (event == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  unsigned long long point;
  {
    std::lock_guard<std::mutex> g(event->lock);
    point = event->recorded;  // the point recorded by now, as CUDA captures it
  }
  auto wait = [event, point] {
    std::unique_lock<std::mutex> g(event->lock);
    event->reached.wait(g, [&] { return event->completed >= point; });
  };
  if (stream == nullptr) wait();
  else stream->enqueue(wait);
  return CUDA_SUCCESS;
}

// ---- events ---------------------------------------------------------------------------------

EXPORT CUresult cuEventCreate(CUevent* event, unsigned int flags) {
  REQUIRE_CONTEXT();
  *event = new Event();
  (*event)->timing = (flags & 0x2) == 0;  // CU_EVENT_DISABLE_TIMING
  return CUDA_SUCCESS;
}

EXPORT CUresult cuEventDestroy_v2(CUevent event) {
  if (event == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  delete event;
  return current == nullptr ? CUDA_SUCCESS : current->sticky.load();
}

EXPORT CUresult cuEventRecord(CUevent event, CUstream stream) {
  REQUIRE_CONTEXT();
  if (event == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  unsigned long long point;
  {
    std::lock_guard<std::mutex> g(event->lock);
    point = ++event->recorded;
  }
  auto reach = [event, point] {
    std::lock_guard<std::mutex> g(event->lock);
    if (point > event->completed) {
      event->completed = point;
      event->at = std::chrono::steady_clock::now();
    }
    event->reached.notify_all();
  };
  if (stream == nullptr) reach();
  else stream->enqueue(reach);  // a marker: runs even on a broken context
  return CUDA_SUCCESS;
}

EXPORT CUresult cuEventQuery(CUevent event) {
  if (event == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  std::lock_guard<std::mutex> g(event->lock);
  return event->completed >= event->recorded ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

EXPORT CUresult cuEventSynchronize(CUevent event) {
  if (event == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  std::unique_lock<std::mutex> g(event->lock);
  unsigned long long point = event->recorded;
  event->reached.wait(g, [&] { return event->completed >= point; });
  return current == nullptr ? CUDA_SUCCESS : current->sticky.load();
}

EXPORT CUresult cuEventElapsedTime(float* millis, CUevent start, CUevent end) {
  if (start == nullptr || end == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (!start->timing || !end->timing) return CUDA_ERROR_INVALID_HANDLE;
  std::scoped_lock g(start->lock, end->lock);
  if (start->completed == 0 || end->completed == 0) return CUDA_ERROR_INVALID_HANDLE;
  if (start->completed < start->recorded || end->completed < end->recorded) {
    return CUDA_ERROR_NOT_READY;
  }
  *millis = std::chrono::duration<float, std::milli>(end->at - start->at).count();
  return CUDA_SUCCESS;
}

// ---- modules and launches -------------------------------------------------------------------

EXPORT CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  REQUIRE_CONTEXT();
  unsigned int magic;
  std::memcpy(&magic, image, sizeof magic);
  if (magic != 0xBA55ED50u) return CUDA_ERROR_INVALID_IMAGE;  // not a fatbin
  *module = new Module();
  return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleUnload(CUmodule module) {
  if (module == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  delete module;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
  REQUIRE_CONTEXT();
  if (module == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  auto it = emu::kernels().find(name);
  if (it == emu::kernels().end()) return CUDA_ERROR_NOT_FOUND;
  *function = new Function{&it->second};  // one per lookup; the module's lifetime in CUDA
  return CUDA_SUCCESS;
}

EXPORT CUresult cuLaunchKernel(CUfunction function, unsigned int gx, unsigned int gy,
                               unsigned int gz, unsigned int bx, unsigned int by, unsigned int bz,
                               unsigned int shared_bytes, CUstream stream, void** params,
                               void** extra) {
  REQUIRE_CONTEXT();
  if (function == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (extra != nullptr || shared_bytes != 0 || params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (gx * gy * gz == 0 || bx * by * bz == 0) return CUDA_ERROR_INVALID_VALUE;
  if (bx * by * bz > emu::kMaxFiberThreads) return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  const emu::Kernel* kernel = function->kernel;
  Context* context = current;
  long launches = ++context->launches;
  bool lost = context->faults.lose_device_after > 0 && launches > context->faults.lose_device_after;
  lost |= !context->faults.lose_device_when.empty() &&
          access(context->faults.lose_device_when.c_str(), F_OK) == 0;
  if (lost) {
    context->sticky = CUDA_ERROR_UNKNOWN;  // the device is gone: every call fails from now on
    return CUDA_ERROR_UNKNOWN;
  }
  bool fail = kernel->name == context->faults.fail_launch;
  emu::ThreadBody body = kernel->binder(params);  // the values, copied now
  emu::dim3 grid, block;
  grid.x = gx, grid.y = gy, grid.z = gz;
  block.x = bx, block.y = by, block.z = bz;
  bool barriers = kernel->barriers;
  emu::enqueue_work(stream, [context, body, barriers, grid, block, fail] {
    if (fail) {
      context->sticky = CUDA_ERROR_LAUNCH_FAILED;  // as a faulting kernel breaks the context
      return;
    }
    emu::run_grid(body, barriers, grid, block);
  });
  return CUDA_SUCCESS;
}

// ---- errors ---------------------------------------------------------------------------------

static const char* error_name(CUresult e) {
  switch (e) {
    case CUDA_SUCCESS: return "CUDA_SUCCESS";
    case CUDA_ERROR_INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
    case CUDA_ERROR_NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
    case CUDA_ERROR_NO_DEVICE: return "CUDA_ERROR_NO_DEVICE";
    case CUDA_ERROR_INVALID_DEVICE: return "CUDA_ERROR_INVALID_DEVICE";
    case CUDA_ERROR_INVALID_IMAGE: return "CUDA_ERROR_INVALID_IMAGE";
    case CUDA_ERROR_INVALID_CONTEXT: return "CUDA_ERROR_INVALID_CONTEXT";
    case CUDA_ERROR_INVALID_HANDLE: return "CUDA_ERROR_INVALID_HANDLE";
    case CUDA_ERROR_NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
    case CUDA_ERROR_NOT_READY: return "CUDA_ERROR_NOT_READY";
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
    case CUDA_ERROR_LAUNCH_FAILED: return "CUDA_ERROR_LAUNCH_FAILED";
    default: return "CUDA_ERROR_UNKNOWN";
  }
}

EXPORT CUresult cuGetErrorName(CUresult error, const char** name) {
  *name = error_name(error);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuGetErrorString(CUresult error, const char** text) {
  *text = error_name(error);
  return CUDA_SUCCESS;
}
