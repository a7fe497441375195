#include "shm/segment.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "diag/log.hpp"
#include "shm/cma.hpp"
#include "shm/wait.hpp"
#include "util/inject.hpp"

namespace hier::shm {
namespace {

constexpr int64_t kAlign = 4096;
int64_t align_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

// The flags start at the second page, the data at a page after them.
int64_t flags_at() { return kAlign; }
int64_t data_at(int members) { return align_up(flags_at() + 2 * members * static_cast<int64_t>(sizeof(Flag)), kAlign); }

// What each member leaves in its slot for the single-copy probe: its process and a word of its
// memory, with the value the word must have.
struct Probe {
  int64_t pid = 0;
  uint64_t addr = 0, value = 0;
};

// Whether this member reads every other member's probe word through the kernel.
bool probe_peers(const Segment& s) {
  if (util::injected_failure("cma")) return false;  // tests: this member cannot use single copy
  for (int m = 0; m < s.members(); ++m) {
    if (m == s.me()) continue;
    Probe rec;
    std::memcpy(&rec, s.slot(m, 0), sizeof rec);
    uint64_t v = 0;
    if (!cma_read(static_cast<pid_t>(rec.pid), reinterpret_cast<const void*>(rec.addr), &v, sizeof v) || v != rec.value)
      return false;
  }
  return true;
}

// What member 0 tells the others (PMPI_Bcast as bytes).
struct Announce {
  char name[64] = {};
  uint64_t nonce = 0;
  uint32_t uid = 0;  // the creator's: the segment's owner
  int ok = 0;
};

// Segment names: "libhier.<uid>.<pid namespace>.<pid>.<counter>.<nonce>" (under /dev/shm). The
// creator's pid and its pid namespace (the inode of /proc/self/ns/pid, 0 where unreadable) are in
// the name so that a later creator can tell a name whose creator died before unlinking it (a
// member killed between the creation and the agreement takes the job, and the creator, down with
// it) from a live one: same user, same namespace (a pid means the same process there), pid gone.
unsigned long pid_namespace() {
  struct stat st {};
  return stat("/proc/self/ns/pid", &st) == 0 ? static_cast<unsigned long>(st.st_ino) : 0ul;
}

}  // namespace

int sweep_dead_names(const char* dir) {
  // No /proc to tell our pid namespace by: two such namespaces sharing /dev/shm would look alike,
  // and a live process of the other one would seem dead here. Remove nothing.
  if (pid_namespace() == 0) return 0;
  DIR* d = opendir(dir);
  if (!d) return 0;
  char mine[64];
  std::snprintf(mine, sizeof mine, "libhier.%u.%lu.", static_cast<unsigned>(getuid()), pid_namespace());
  const size_t n = std::strlen(mine);
  int removed = 0;
  while (const dirent* e = readdir(d)) {
    if (std::strncmp(e->d_name, mine, n) != 0) continue;
    char* end = nullptr;
    const long pid = std::strtol(e->d_name + n, &end, 10);
    if (end == e->d_name + n || *end != '.' || pid <= 0 || pid == static_cast<long>(getpid())) continue;
    // ESRCH only: EPERM means a live process (of someone else, after a pid reuse), never removed.
    if (kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    const std::string name = std::string("/") + e->d_name;
    if (shm_unlink(name.c_str()) == 0) ++removed;
  }
  closedir(d);
  return removed;
}

namespace {

uint64_t fresh_nonce() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(getpid());
}

}  // namespace

void* map_creators_segment(const char* name, size_t bytes, uid_t creator, std::string& why) {
  if (creator != geteuid()) {
    why = "its creator's uid " + std::to_string(creator) + " is not this process's (" + std::to_string(geteuid()) + ")";
    return nullptr;
  }
  const int fd = shm_open(name, O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
  if (fd < 0) {
    why = std::strerror(errno);
    return nullptr;
  }
  void* m = nullptr;
  struct stat st {};
  if (fstat(fd, &st) != 0) why = std::strerror(errno);
  else if (!S_ISREG(st.st_mode)) why = "not a shared-memory object";
  else if (st.st_uid != creator)
    why = "owned by uid " + std::to_string(st.st_uid) + ", not by its creator's (uid " + std::to_string(creator) + ")";
  else if (static_cast<size_t>(st.st_size) != bytes)
    why = std::to_string(st.st_size) + " bytes, not " + std::to_string(bytes);
  else if ((m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
    why = std::strerror(errno);
    m = nullptr;
  }
  close(fd);
  return m;
}

Segment::~Segment() {
  unlink_name();
  if (base_) munmap(base_, bytes_);
}

void Segment::unlink_name() {
  if (name_.empty()) return;
  shm_unlink(name_.c_str());
  name_.clear();
}

void Segment::raise(std::atomic<uint64_t>& flag, uint64_t round) const {
  flag.store(round, std::memory_order_release);
  bell().fetch_add(1, std::memory_order_seq_cst);
  if (sleepers().load(std::memory_order_seq_cst) > 0) ring(bell());
}

bool Segment::all_done(uint64_t round) const {
  if (round == 0) return true;
  for (int m = 0; m < members_; ++m)
    if (done(m).load(std::memory_order_acquire) < round) return false;
  return true;
}

bool members_share_memory(MPI_Comm comm) {
  int size = 0;
  PMPI_Comm_size(comm, &size);
  MPI_Comm shared = MPI_COMM_NULL;
  if (PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &shared) != MPI_SUCCESS) return false;
  int n = 0;
  PMPI_Comm_size(shared, &n);
  PMPI_Comm_free(&shared);
  return n == size;  // then every member is in this one group: the same answer on every member
}

std::unique_ptr<Segment> open_segment(MPI_Comm comm, int64_t half_bytes, bool* failed) {
  *failed = false;
  int me = 0, p = 0;
  PMPI_Comm_rank(comm, &me);
  PMPI_Comm_size(comm, &p);
  std::unique_ptr<Segment> s(new Segment());
  s->me_ = me;
  s->members_ = p;
  s->half_ = align_up(half_bytes, 64);
  s->bytes_ = static_cast<size_t>(data_at(p) + 2 * static_cast<int64_t>(p) * s->half_);

  Announce a;
  if (me == 0) {
    // Readable and writable by this user only (nothing given to another user of the machine);
    // O_EXCL: never someone else's file of the same name.
    static std::atomic<unsigned> counter{0};
    // Names a dead creator left behind (killed before the agreement) go first.
    if (counter.load() == 0)
      if (const int k = sweep_dead_names("/dev/shm")) HIER_INFO("shm", "removed %d segment name(s) of dead processes", k);
    a.nonce = fresh_nonce();
    a.uid = static_cast<uint32_t>(geteuid());
    std::snprintf(a.name, sizeof a.name, "/libhier.%u.%lu.%d.%u.%08x", static_cast<unsigned>(getuid()), pid_namespace(),
                  static_cast<int>(getpid()), counter.fetch_add(1), static_cast<unsigned>(a.nonce));
    const int fd = shm_open(a.name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd >= 0) {
      s->name_ = a.name;
      if (ftruncate(fd, static_cast<off_t>(s->bytes_)) == 0) {
        void* m = mmap(nullptr, s->bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m != MAP_FAILED) {
          s->base_ = m;
          auto* h = new (m) Header();
          h->nonce = a.nonce;
          h->members = static_cast<uint64_t>(p);
          h->half = static_cast<uint64_t>(s->half_);
          a.ok = 1;
        }
      }
      close(fd);
    }
    if (!a.ok) HIER_INFO("shm", "cannot create a shared segment of %zu bytes: %s", s->bytes_, std::strerror(errno));
  }
  if (PMPI_Bcast(&a, sizeof a, MPI_BYTE, 0, comm) != MPI_SUCCESS) a.ok = 0;
  if (me != 0 && a.ok) {
    a.name[sizeof a.name - 1] = '\0';
    // Only the creator's object (its owner checked before the mapping: never one another user
    // put under that name), of the size it made.
    std::string why;
    s->base_ = map_creators_segment(a.name, s->bytes_, static_cast<uid_t>(a.uid), why);
    // The creator's nonce: the same file as the creator's (not another mount's /dev/shm).
    const auto* h = static_cast<const Header*>(s->base_);
    if (h && (h->nonce != a.nonce || h->members != static_cast<uint64_t>(p) || h->half != static_cast<uint64_t>(s->half_)))
      why = "not the segment member 0 made (another nonce or geometry)";
    if (!why.empty()) {
      HIER_INFO("shm", "cannot map the shared segment %s of member 0: %s", a.name, why.c_str());
      a.ok = 0;
    }
  }
  if (util::injected_failure("shm")) a.ok = 0;  // tests: this member cannot map it
  const bool mine = a.ok && s->base_;
  if (mine) {
    s->flags_ = reinterpret_cast<Flag*>(static_cast<char*>(s->base_) + flags_at());
    s->bell_ = reinterpret_cast<Word*>(static_cast<char*>(s->base_) + 1024);  // the header page, past the Header
    s->sleepers_ = s->bell_ + 1;
    s->data_ = static_cast<char*>(s->base_) + data_at(p);
  }
  // Single copy: each member leaves its pid and a word of its stack in its slot; once every
  // member mapped the segment (the first agreement, which also orders those writes before the
  // reads), each reads every other's word through the kernel; the second agreement makes the
  // answer the same on every member. The word stays valid: no member leaves the second
  // agreement before every member has entered it, i.e. finished its reads.
  const uint64_t word = a.nonce ^ (0x9e3779b97f4a7c15ull * static_cast<uint64_t>(me + 1));
  if (mine) {
    const Probe rec{static_cast<int64_t>(getpid()), reinterpret_cast<uint64_t>(&word), word};
    std::memcpy(s->slot(me, 0), &rec, sizeof rec);
  }
  int all = mine ? 1 : 0;
  if (PMPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS) all = 0;
  if (!mine) {
    *failed = true;
    return nullptr;  // the creator's destructor unlinks and unmaps
  }
  if (!all) return s;  // the caller's agreement drops every member's segment
  int cma = probe_peers(*s) ? 1 : 0;
  if (PMPI_Allreduce(MPI_IN_PLACE, &cma, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS) cma = 0;
  s->cma_ = cma != 0;
  if (s->cma_) {
    s->pids_.resize(static_cast<size_t>(p));
    for (int m = 0; m < p; ++m) {
      Probe rec;
      std::memcpy(&rec, s->slot(m, 0), sizeof rec);
      s->pids_[static_cast<size_t>(m)] = static_cast<int>(rec.pid);
    }
  } else if (me == 0) {
    HIER_INFO("shm", "no single copy between the %d members (process_vm_readv refused on some member; "
              "Yama ptrace_scope %d): copy-in through the segment", p, yama_ptrace_scope());
  }
  return s;
}

}  // namespace hier::shm
