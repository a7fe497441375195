#include "shm/cma.hpp"

#include <sys/uio.h>

#include <cerrno>
#include <cstdio>

namespace hier::shm {

bool cma_read(pid_t pid, const void* remote, void* local, size_t n) {
  auto* to = static_cast<char*>(local);
  auto* from = static_cast<const char*>(remote);
  while (n > 0) {  // the kernel may copy less than asked (a page not yet faulted in, a signal)
    iovec l{to, n}, r{const_cast<char*>(from), n};
    const ssize_t got = process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    to += got, from += got, n -= static_cast<size_t>(got);
  }
  return true;
}

int yama_ptrace_scope() {
  int scope = -1;
  if (FILE* f = std::fopen("/proc/sys/kernel/yama/ptrace_scope", "r")) {
    if (std::fscanf(f, "%d", &scope) != 1) scope = -1;
    std::fclose(f);
  }
  return scope;
}

}  // namespace hier::shm
