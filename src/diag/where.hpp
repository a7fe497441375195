// Where a thread of this process is: code addresses resolved to function and file:line, and a
// look at a blocked thread's stack without stopping it. Used by the watchdog thread only, at
// report time (never on the hot path): it reads /proc/self and runs binutils' addr2line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hier::diag::where {

struct Frame {
  const void* addr = nullptr;
  std::string object;    // file name of the shared object or executable
  std::string function;  // "??" when unknown
  uintptr_t offset = 0;  // the looked-up address: offset into the object (fixed executables: the address)
  std::string file_line;  // "file.c:42" when debug information exists, else ""
  bool system = false;   // libc, the MPI library, libhier, ...: not the program's own code
};

// Resolves return addresses (the instruction before each is looked up) and the call sites of
// diag/call_site.hpp (Python's file:line).
std::vector<Frame> resolve(const std::vector<const void*>& return_addresses);

// "hang.c:42 (main)", or "main in prog", or "prog+0x1234" (module and offset: never a raw address).
std::string describe(const Frame& f);

// What the thread `tid` of this process is doing while not in a collective: its scheduler state
// and system call (from /proc/self/task/TID), and the return addresses found on its stack (a
// scan from its stack pointer for words that point just after a call instruction), innermost
// first. `state` is e.g. "S (sleeping)"; `syscall` e.g. "nanosleep", "" when running.
struct ThreadLook {
  std::string state;
  std::string syscall;
  std::vector<const void*> stack;
};
ThreadLook look_at_thread(int tid);

}  // namespace hier::diag::where
