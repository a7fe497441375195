// Single-copy reads between the members of a segment (HIER_SHM): Linux's cross-memory attach
// (process_vm_readv) copies straight from a peer's user buffer into ours, one copy per byte
// where the copy-in path (every writer into its slot, every reader out of it) makes two. The
// kernel allows it where the reader may ptrace the peer: the same user, and Yama's ptrace_scope
// (0, or 1 with the peer naming us, which MPI's ranks do not) or CAP_SYS_PTRACE; a seccomp
// filter may forbid the call altogether. So open_segment() tries it once between every pair of
// members and agrees the answer over the communicator (Segment::cma()).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace hier::shm {

// Copies n bytes at `remote` in process `pid` to `local`; false when the kernel refuses or the
// peer's range is not mapped (then nothing can be said about `local`'s bytes).
bool cma_read(pid_t pid, const void* remote, void* local, size_t n);
// Copies n bytes at `local` to `remote` in process `pid` (process_vm_writev: the kernel asks the
// same permission as for a read, which open_segment's probe found); false when refused.
bool cma_write(pid_t pid, void* remote, const void* local, size_t n);

// Whether a step moving `bytes` in all (the span of every member's data) is worth single copy:
// it saves a copy per byte but ends with one more wait (a member keeps its buffers until every
// peer is done reading them), so small steps stay copy-in. The executor (exec/shm_steps.cpp) and
// the model (model/cost.cpp) ask this same question.
inline constexpr int64_t kSingleCopyFrom = int64_t{256} << 10;
inline bool single_copy_pays(int64_t bytes) { return bytes >= kSingleCopyFrom; }

// Yama's ptrace_scope (-1: no Yama), for the message that says why single copy is off: a read
// between the members (open_segment) decides, as the kernel's rules have more cases than this.
int yama_ptrace_scope();

}  // namespace hier::shm
