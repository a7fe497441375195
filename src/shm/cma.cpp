#include "shm/cma.hpp"

#include <sys/uio.h>

#include <cerrno>
#include <cstdio>

namespace hier::shm {

namespace {
// The kernel may copy less than asked (a page not yet faulted in, a signal): the rest again.
template <class Call>
bool cma_all(char* local, char* remote, size_t n, Call call) {
  while (n > 0) {
    iovec l{local, n}, r{remote, n};
    const ssize_t got = call(&l, &r);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    local += got, remote += got, n -= static_cast<size_t>(got);
  }
  return true;
}
}  // namespace

bool cma_read(pid_t pid, const void* remote, void* local, size_t n) {
  return cma_all(static_cast<char*>(local), const_cast<char*>(static_cast<const char*>(remote)), n,
                 [pid](iovec* l, iovec* r) { return process_vm_readv(pid, l, 1, r, 1, 0); });
}

bool cma_write(pid_t pid, void* remote, const void* local, size_t n) {
  return cma_all(const_cast<char*>(static_cast<const char*>(local)), static_cast<char*>(remote), n,
                 [pid](iovec* l, iovec* r) { return process_vm_writev(pid, l, 1, r, 1, 0); });
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
