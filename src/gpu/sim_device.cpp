// The simulated device's devices (gpu/sim_runtime.hpp): which device is current on each thread,
// which device owns memory and streams. All of it comes from the process's simulated machine
// (tests/device/fake_gpu.cpp) through optional hooks; without them the machine has one device, 0.
//   int  hier_sim_get_device(void)            the calling thread's current device
//   int  hier_sim_set_device(int)             0, or an error (no such device)
//   int  hier_sim_device_of(const void*)      the device owning device memory, or -1
//   void hier_sim_begin(const void* stream, int device)   a stream operation begins (the
//                                             machine may hold it there; within its span)
#include <dlfcn.h>

#include <condition_variable>
#include <mutex>
#include <unordered_map>

#include "gpu/sim_runtime.hpp"

namespace hier::gpu::sim {
namespace {

struct DeviceHooks {
  int (*get)() = nullptr;
  int (*set)(int) = nullptr;
  int (*of)(const void*) = nullptr;
  void (*begin)(const void*, int) = nullptr;
  DeviceHooks() {
    begin = reinterpret_cast<void (*)(const void*, int)>(dlsym(RTLD_DEFAULT, "hier_sim_begin"));
    get = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "hier_sim_get_device"));
    set = reinterpret_cast<int (*)(int)>(dlsym(RTLD_DEFAULT, "hier_sim_set_device"));
    of = reinterpret_cast<int (*)(const void*)>(dlsym(RTLD_DEFAULT, "hier_sim_device_of"));
  }
};
const DeviceHooks& dh() {
  static const DeviceHooks h;
  return h;
}

// The device of each stream, fixed when it is made (as a runtime's streams are).
std::mutex g_mu;
std::unordered_map<const void*, int> g_stream_device;
// Waits queued on streams for each event (simStreamWaitEvent): the event outlives them.
std::condition_variable g_waits_cv;
std::unordered_map<const void*, int> g_waits;

}  // namespace

int current_device() { return dh().get ? dh().get() : 0; }
int device_of(const void* p) {
  if (dh().of) return dh().of(p);
  return p && alias(p) != p ? 0 : -1;  // one device: its memory is what has an alias
}

void note_stream(Stream s, bool made) {
  std::lock_guard<std::mutex> lk(g_mu);
  if (made) g_stream_device[s] = current_device();
  else g_stream_device.erase(s);
}

int stream_device(Stream s) {
  if (!s) return current_device();  // the default stream: the current device's
  std::lock_guard<std::mutex> lk(g_mu);
  const auto it = g_stream_device.find(s);
  return it == g_stream_device.end() ? current_device() : it->second;
}

// Work queued on a stream of another device than the current one: the runtimes' "invalid
// resource handle" (400) for a launch, as for the copies and events of a stream.
int check_stream(Stream s) { return s && stream_device(s) != current_device() ? 400 : 0; }

// A kernel argument that is device memory of another device than the stream's: a GPU without
// peer access faults there (an illegal address, 700), so the simulation refuses the launch.
int check_arg(Stream s, const void* p) {
  const int d = p ? device_of(p) : -1;
  return d >= 0 && d != stream_device(s) ? 700 : 0;
}

void event_unwaited(Event e) {
  std::unique_lock<std::mutex> lk(g_mu);
  g_waits_cv.wait(lk, [&] { return g_waits.find(e) == g_waits.end(); });
}

void op_begins(Stream s) {
  if (dh().begin) dh().begin(s, stream_device(s));
}

}  // namespace hier::gpu::sim

using namespace hier::gpu::sim;

int simGetDevice(int* d) {
  *d = current_device();
  return 0;
}
int simSetDevice(int d) {
  if (!dh().set) return d == 0 ? 0 : 101;  // one device; cudaErrorInvalidDevice
  return dh().set(d);
}
int simStreamWaitEvent(simStream_t s, simEvent_t e, unsigned) {
  if (!e) return 400;
  if (int rc = check_stream(s)) return rc;
  const uint64_t want = event_recorded(e);
  {
    std::lock_guard<std::mutex> lk(g_mu);
    ++g_waits[e];
  }
  const int rc = enqueue(s, [e, want] {
    event_wait_for(e, want);
    std::lock_guard<std::mutex> lk(g_mu);
    if (--g_waits[e] == 0) g_waits.erase(e);
    g_waits_cv.notify_all();
  }, "wait");
  if (rc != 0) {
    std::lock_guard<std::mutex> lk(g_mu);
    if (--g_waits[e] == 0) g_waits.erase(e);
  }
  return rc;
}
