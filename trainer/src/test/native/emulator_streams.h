// The emulator's streams, shared with the emulated cuBLAS (which enqueues its GEMMs on them).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#define EMU_SHARED __attribute__((visibility("default")))

namespace emu {

// A stream: a host thread running its queue in order.
class EMU_SHARED Stream {
 public:
  Stream();
  ~Stream();  // runs what is queued, then stops the thread
  void enqueue(std::function<void()> task);
  void drain();  // blocks until everything enqueued so far has run
  bool idle();   // nothing queued or running
  bool on_worker() const;  // called from the stream's own thread

 private:
  void run();
  std::mutex lock;
  std::condition_variable ready;
  std::deque<std::function<void()>> queue;
  bool closing = false;
  long unfinished = 0;  // enqueued tasks not yet done
  std::thread worker;  // last: starts once the members above exist
};

// Enqueues device work on the stream (null: the default stream, run now) for the calling
// thread's context; the work is skipped once an error has broken the context.
EMU_SHARED void enqueue_work(Stream* stream, std::function<void()> work);

// The calling thread's context state: 0 when it has a working context, else the CUresult.
EMU_SHARED int context_error();

}  // namespace emu
