// A shared-memory segment of one level communicator whose members share memory (HIER_SHM): one
// slot per member, cut in two halves (double buffering: a member fills one half while its
// peers still read the other), and two flags per member that only that member writes:
//   ready: the round of the member's data now in its slot (half = round % 2);
//   done:  the last round whose data the member has finished reading from every slot.
// Rounds are numbered per segment from 1, in the order the members run the steps on the
// communicator (every step is collective over it, so every member numbers them alike). No lock
// on the data path: a member writes half h of round t once every member's done >= t - 2, and
// reads round t once the writers' ready >= t.
#pragma once

#include <mpi.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace hier::shm {

// One flag in a cache line of its own: its writer never shares a line with another writer.
struct alignas(64) Flag {
  std::atomic<uint64_t> v{0};
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "flags in shared memory must be lock-free");
// A 32-bit word in a cache line of its own (a futex must be 32 bits).
struct alignas(64) Word {
  std::atomic<uint32_t> v{0};
};

// The segment's first bytes, written by the creator before anyone else maps it.
struct Header {
  uint64_t nonce = 0;   // the creator's random tag, checked by every member: the same segment
  uint64_t members = 0;
  uint64_t half = 0;    // bytes of one half of a slot
};

// Bytes of one half of a member's slot in the segments libhier builds (topo::build_levels): a
// reduce-scatter of 16 MiB per rank runs in 16 rounds; pages are touched only as used.
inline constexpr int64_t kHalfBytes = int64_t{1} << 20;

// A member's mapping of the segment `name` that member 0 made of `bytes` bytes: only a regular
// shared-memory object owned by `creator` (member 0's uid, which must be this process's too),
// checked with fstat before anything is mapped. nullptr and a one-line `why` otherwise.
void* map_creators_segment(const char* name, size_t bytes, uid_t creator, std::string& why);

class Step;  // a step running on the segment (exec/shm_steps.hpp implements them)

class Segment {
 public:
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment();  // unmaps (and unlinks, when the creator still holds the name)

  int me() const { return me_; }
  int members() const { return members_; }
  int64_t half_bytes() const { return half_; }
  // Half `round % 2` of member m's slot.
  char* slot(int m, uint64_t round) const { return data_ + (2 * static_cast<int64_t>(m) + static_cast<int64_t>(round % 2)) * half_; }
  std::atomic<uint64_t>& ready(int m) const { return flags_[2 * m].v; }
  std::atomic<uint64_t>& done(int m) const { return flags_[2 * m + 1].v; }
  // Raises this member's flag to `round` and rings the segment's bell (shm/wait.hpp), waking
  // the members asleep on it.
  void raise(std::atomic<uint64_t>& flag, uint64_t round) const;
  // The bell: a counter every raise() bumps, and how many members sleep on it (futex).
  std::atomic<uint32_t>& bell() const { return bell_->v; }
  std::atomic<uint32_t>& sleepers() const { return sleepers_->v; }

  // The next `n` rounds of this member (their numbers: the value returned, + 1, ...).
  uint64_t take_rounds(uint64_t n) {
    const uint64_t first = next_;
    next_ += n;
    return first;
  }
  // Single copy (shm/cma.hpp): whether every member can read every other's memory, as
  // open_segment found and agreed; and member m's process.
  bool cma() const { return cma_; }
  int pid(int m) const { return pids_[static_cast<size_t>(m)]; }
  // Private bytes of this member for the step at the queue's front (steps on a segment run
  // one at a time on each member: shm/step.hpp), kept between steps.
  std::vector<char>& scratch() { return scratch_; }

  // Whether every member's done flag reached `round` (0: always true).
  bool all_done(uint64_t round) const;

  // The steps started on this segment and not yet complete, in the order they were started:
  // a step advances only after the ones before it (exec/shm_steps.cpp), whichever request the
  // program completes first.
  std::deque<Step*>& queue() { return queue_; }

  // The creator removes the name once every member has mapped it (after the agreement that
  // they did): from then on a killed member leaves nothing behind in /dev/shm.
  void unlink_name();

 private:
  friend std::unique_ptr<Segment> open_segment(MPI_Comm, int64_t, bool*);
  Segment() = default;
  int me_ = 0, members_ = 0;
  int64_t half_ = 0;
  size_t bytes_ = 0;
  void* base_ = nullptr;
  Flag* flags_ = nullptr;
  Word *bell_ = nullptr, *sleepers_ = nullptr;  // in the header page
  char* data_ = nullptr;
  std::string name_;  // the creator's, until unlinked
  uint64_t next_ = 1;
  std::deque<Step*> queue_;
  bool cma_ = false;
  std::vector<int> pids_;
  std::vector<char> scratch_;
};

// Removes from `dir` (/dev/shm) the segment names of this user whose creator, in this pid
// namespace, no longer runs: what a creator killed between creating its segment and the
// agreement leaves behind (after the agreement the name is gone). open_segment calls it before
// a process creates its first segment. Returns how many it removed.
int sweep_dead_names(const char* dir);

// Whether every member of `comm` shares memory with every other (MPI_Comm_split_type with
// MPI_COMM_TYPE_SHARED keeps them in one group). Collective over comm.
bool members_share_memory(MPI_Comm comm);

// Collective over `comm` (members that share memory): member 0 creates the segment (slots of
// 2 x half_bytes per member), tells the others its name and nonce, each maps it and checks the
// nonce. Returns null where this member failed (*failed set): the caller agrees with every
// member and drops the segments everywhere when one failed. The name stays until unlink_name().
// Where every member mapped it, each then tries a single-copy read from every other (shm/cma.hpp)
// and the members agree on the answer (Segment::cma(): the same on every member).
std::unique_ptr<Segment> open_segment(MPI_Comm comm, int64_t half_bytes, bool* failed);

}  // namespace hier::shm
