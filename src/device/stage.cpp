#include "device/stage.hpp"

#include "device/runtime_copy.hpp"

#include <algorithm>
#include <climits>
#include <new>
#include <memory>

namespace hier::device {
namespace {

// n elements from src to dst through a packed host buffer, with the MPI's own (GPU-aware) pack
// and unpack: no message, so no self-communicator traffic that two threads could cross.
int copy(const void* src, void* dst, int64_t n, MPI_Datatype t, MPI_Aint extent) {
  std::unique_ptr<char[]> packed;
  int cap = 0;
  for (int64_t done = 0; done < n;) {
    int c = static_cast<int>(std::min<int64_t>(n - done, INT_MAX));
    int bytes = 0;
    int rc = PMPI_Pack_size(c, t, MPI_COMM_SELF, &bytes);
    while (rc == MPI_SUCCESS && bytes < 0 && c > 1) {  // more than INT_MAX bytes: smaller pieces
      c /= 2;
      rc = PMPI_Pack_size(c, t, MPI_COMM_SELF, &bytes);
    }
    if (rc != MPI_SUCCESS) return rc;
    if (bytes > cap) {
      packed.reset(new (std::nothrow) char[static_cast<size_t>(bytes)]);
      if (!packed) return MPI_ERR_NO_MEM;
      cap = bytes;
    }
    const MPI_Aint off = static_cast<MPI_Aint>(done) * extent;
    int pos = 0;
    rc = PMPI_Pack(static_cast<const char*>(src) + off, c, t, packed.get(), cap, &pos, MPI_COMM_SELF);
    int upos = 0;
    if (rc == MPI_SUCCESS) rc = PMPI_Unpack(packed.get(), pos, &upos, static_cast<char*>(dst) + off, c, t, MPI_COMM_SELF);
    if (rc != MPI_SUCCESS) return rc;
    done += c;
  }
  return MPI_SUCCESS;
}

MPI_Aint extent_of(MPI_Datatype t) {
  MPI_Aint lb = 0, ext = 0;
  PMPI_Type_get_extent(t, &lb, &ext);
  return ext;
}

}  // namespace

int64_t span_bytes(MPI_Datatype t, int64_t n, MPI_Aint* lb) {
  MPI_Aint text = 0;
  *lb = 0;
  if (n <= 0) return 0;
  if (PMPI_Type_get_true_extent(t, lb, &text) != MPI_SUCCESS) return -1;
  const int64_t extent = extent_of(t);
  const int64_t last = (n - 1) * extent;  // element n-1's origin; below element 0's if the extent is negative
  const int64_t first = *lb + std::min<int64_t>(last, 0);
  int64_t end = *lb + std::max<int64_t>(last, 0) + text;
  // A type whose data is one block (size == true extent) is packed by both MPIs, and by libhier's
  // engine, as n * size bytes from its true lower bound, even where its extent is smaller and the
  // elements overlap (a struct resized to extent 0): the span covers those bytes too. (Found by
  // the random-datatype test on device memory: MPI_Pack read past a span one element long.)
  MPI_Count size = 0;
  if (extent < text && PMPI_Type_size_x(t, &size) == MPI_SUCCESS && size == text)
    end = std::max<int64_t>(end, *lb + n * size);
  *lb = first;
  return end - first;
}

MemKind classify_typed(const void* p, int64_t n, MPI_Datatype t) {
  if (runtime() == Runtime::None) return MemKind::Host;
  MPI_Aint lb = 0;
  if (n <= 0 || span_bytes(t, n, &lb) <= 0) return classify(p);  // (null: host)
  // MPI_BOTTOM (a null pointer in both MPIs) with a type of absolute addresses: its first touched
  // byte is the address lb itself, device memory too (a GPU-aware program's struct of device
  // addresses; tests/dtype/p2p_test.cpp's BottomWithAbsoluteAddresses on device buffers, which
  // libhier's engine packed on the host before).
  return classify(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(lb)));
}

HostStage::HostStage(const void* dev, int64_t n, MPI_Datatype t, bool mpi_packs_device) : n_(n), t_(t) {
  if (n <= 0) return;
  MPI_Aint tlb = 0;
  const int64_t span = span_bytes(t, n, &tlb);
  if (span < 0) {
    rc_ = MPI_ERR_TYPE;
    return;
  }
  mem_.reset(new (std::nothrow) char[static_cast<size_t>(span)]);
  if (!mem_) {
    rc_ = MPI_ERR_NO_MEM;
    return;
  }
  host_ = mem_.get() - tlb;  // element 0's address: its first touched byte is mem_[0]
  span_ = static_cast<size_t>(span);
  lb_ = tlb;
  by_runtime_ = runtime_copy(mem_.get(), static_cast<const char*>(dev) + tlb, span_);
  if (by_runtime_) return;
  rc_ = mpi_packs_device ? copy(dev, host_, n, t, extent_of(t)) : MPI_ERR_OTHER;
}

int HostStage::copy_back(void* dev) const {
  if (n_ <= 0 || rc_ != MPI_SUCCESS) return rc_;
  if (by_runtime_) return runtime_copy(static_cast<char*>(dev) + lb_, mem_.get(), span_) ? MPI_SUCCESS : MPI_ERR_OTHER;
  return copy(host_, dev, n_, t_, extent_of(t_));
}

int HostStage::refresh(const void* dev) {
  if (n_ <= 0 || rc_ != MPI_SUCCESS) return rc_;
  if (by_runtime_) return runtime_copy(mem_.get(), static_cast<const char*>(dev) + lb_, span_) ? MPI_SUCCESS : MPI_ERR_OTHER;
  return copy(dev, host_, n_, t_, extent_of(t_));
}

}  // namespace hier::device
