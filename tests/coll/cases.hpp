// Types x ops for the collective tests. Every rank can compute what any rank contributes
// (fill(rank, i)), so float results are checked against a float64 reference computed locally,
// and integer / data-movement results byte for byte against PMPI's result on the same data.
#pragma once

#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <algorithm>
#include <vector>

namespace coll_test {

// A communicator under test, with my rank and its size.
struct Env {
  MPI_Comm comm;
  int rank, size;
};
inline Env env_of(MPI_Comm c) {
  Env e{c, 0, 0};
  MPI_Comm_rank(c, &e.rank);
  MPI_Comm_size(c, &e.size);
  return e;
}
// COLL_TEST_QUICK: the reduced matrix of the 6+ rank variants (tests/coll/CMakeLists.txt).
inline bool quick() { return std::getenv("COLL_TEST_QUICK") != nullptr; }

struct TypeCase {
  std::string name;
  MPI_Datatype type;
  MPI_Op op;
  MPI_Aint extent;
  void (*fill)(int rank, int64_t i, char* elem);
  bool exact;                              // compare whole buffers with PMPI byte for byte
  double (*value)(const char* elem) = nullptr;       // inexact: the element as a double
  double (*contrib)(int rank, int64_t i) = nullptr;  // inexact: what a rank adds at i
  double eps = 0;                                    // inexact: unit roundoff of the type
};

inline int ival(int rank, int64_t i) { return static_cast<int>((rank * 131 + i * 17) % 201) - 100; }
inline double dval(int rank, int64_t i) {
  // Mixed signs and magnitudes, so the reduction order shows in the last bits.
  static constexpr double kScale[] = {1e-3, 1e-2, 1e-1, 1.0, 1e1, 1e2, 1e3};
  const double x = std::sin(0.37 * static_cast<double>(rank + 1) + 0.011 * static_cast<double>(i));
  return x * kScale[(rank + i) % 7];
}

// A commutative user op: wrapping int addition (exact, order-free), on MPI_INT or on
// contiguous types of ints ...
inline void user_add(void* in, void* inout, int* len, MPI_Datatype* type) {
  int size = 4;
  MPI_Type_size(*type, &size);
  auto* a = static_cast<unsigned*>(in);
  auto* b = static_cast<unsigned*>(inout);
  for (int64_t i = 0; i < int64_t{*len} * (size / 4); ++i) b[i] += a[i];
}
// ... the same on vector(2, 1, 2, int): two ints per 12-byte element, a hole between them ...
inline void user_vec_add(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<unsigned*>(in);
  auto* b = static_cast<unsigned*>(inout);
  for (int i = 0; i < *len; ++i) {
    b[3 * i] += a[3 * i];
    b[3 * i + 2] += a[3 * i + 2];
  }
}
// ... and a non-commutative one: 2x2 integer matrix product (inout = in * inout), flat only.
inline void user_matmul(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<int*>(in);
  auto* b = static_cast<int*>(inout);
  for (int k = 0; k < *len; ++k, a += 4, b += 4) {
    const int c0 = a[0] * b[0] + a[1] * b[2], c1 = a[0] * b[1] + a[1] * b[3];
    const int c2 = a[2] * b[0] + a[3] * b[2], c3 = a[2] * b[1] + a[3] * b[3];
    b[0] = c0; b[1] = c1; b[2] = c2; b[3] = c3;
  }
}

struct Types {
  MPI_Datatype int3 = MPI_DATATYPE_NULL;    // contiguous(3, int)
  MPI_Datatype ivec = MPI_DATATYPE_NULL;    // vector(2, 1, 2, int): a hole between the ints
  MPI_Datatype mat2 = MPI_DATATYPE_NULL;    // contiguous(4, int): 2x2 matrix
  MPI_Op add = MPI_OP_NULL, vec_add = MPI_OP_NULL, matmul = MPI_OP_NULL;
  Types() {
    MPI_Type_contiguous(3, MPI_INT, &int3);
    MPI_Type_commit(&int3);
    MPI_Type_vector(2, 1, 2, MPI_INT, &ivec);
    MPI_Type_commit(&ivec);
    MPI_Type_contiguous(4, MPI_INT, &mat2);
    MPI_Type_commit(&mat2);
    MPI_Op_create(user_add, 1, &add);
    MPI_Op_create(user_vec_add, 1, &vec_add);
    MPI_Op_create(user_matmul, 0, &matmul);
  }
  ~Types() {
    MPI_Type_free(&int3);
    MPI_Type_free(&ivec);
    MPI_Type_free(&mat2);
    MPI_Op_free(&add);
    MPI_Op_free(&vec_add);
    MPI_Op_free(&matmul);
  }
};

template <class T>
void put(char* p, T v) {
  std::memcpy(p, &v, sizeof v);
}
template <class T>
T get(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The reduction cases. `full`: the whole list; otherwise a smaller set for the slow variants.
inline std::vector<TypeCase> reduction_cases(const Types& t, bool full) {
  std::vector<TypeCase> v;
  auto fill_int = [](int r, int64_t i, char* p) { put<int>(p, ival(r, i)); };
  auto fill_dbl = [](int r, int64_t i, char* p) { put<double>(p, dval(r, i)); };
  v.push_back({"int/sum", MPI_INT, MPI_SUM, 4, fill_int, true});
  v.push_back({"double/sum", MPI_DOUBLE, MPI_SUM, 8, fill_dbl, false,
               [](const char* p) { return get<double>(p); }, dval, 0x1p-53});
  v.push_back({"2int/minloc", MPI_2INT, MPI_MINLOC, 8,
               [](int r, int64_t i, char* p) { put<int>(p, ival(r, i) % 5); put<int>(p + 4, r); }, true});
  v.push_back({"user-add/int", MPI_INT, t.add, 4, fill_int, true});
  v.push_back({"matmul/noncommutative", t.mat2, t.matmul, 16,
               [](int r, int64_t i, char* p) {
                 for (int k = 0; k < 4; ++k) put<int>(p + 4 * k, ((r + k + static_cast<int>(i)) % 3) - 1);
               }, true});
  if (!full) return v;
  const std::pair<const char*, MPI_Op> int_ops[] = {{"int/prod", MPI_PROD}, {"int/max", MPI_MAX},
      {"int/min", MPI_MIN}, {"int/band", MPI_BAND}, {"int/bor", MPI_BOR}, {"int/bxor", MPI_BXOR},
      {"int/land", MPI_LAND}, {"int/lor", MPI_LOR}};
  for (const auto& [name, op] : int_ops) v.push_back({name, MPI_INT, op, 4, fill_int, true});
  v.push_back({"int64/sum", MPI_INT64_T, MPI_SUM, 8,
               [](int r, int64_t i, char* p) { put<int64_t>(p, (int64_t{ival(r, i)} << 33) + i); }, true});
  v.push_back({"uint8/sum", MPI_UINT8_T, MPI_SUM, 1,
               [](int r, int64_t i, char* p) { put<uint8_t>(p, static_cast<uint8_t>(r * 37 + i)); }, true});
  v.push_back({"short/max", MPI_SHORT, MPI_MAX, 2,
               [](int r, int64_t i, char* p) { put<short>(p, static_cast<short>(ival(r, i))); }, true});
  v.push_back({"float/sum", MPI_FLOAT, MPI_SUM, 4,
               [](int r, int64_t i, char* p) { put<float>(p, static_cast<float>(dval(r, i))); }, false,
               [](const char* p) { return static_cast<double>(get<float>(p)); },
               [](int r, int64_t i) { return static_cast<double>(static_cast<float>(dval(r, i))); }, 0x1p-24});
  v.push_back({"float/max", MPI_FLOAT, MPI_MAX, 4,
               [](int r, int64_t i, char* p) { put<float>(p, static_cast<float>(dval(r, i))); }, true});
  v.push_back({"double/min", MPI_DOUBLE, MPI_MIN, 8, fill_dbl, true});
  v.push_back({"double-int/maxloc", MPI_DOUBLE_INT, MPI_MAXLOC, 16,
               [](int r, int64_t i, char* p) {
                 put<double>(p, static_cast<double>(ival(r, i) % 4));
                 put<int>(p + 8, r * 3);
               }, true});
  // Derived types take user ops: MPI defines predefined ops on predefined types only.
  v.push_back({"int3/user-add", t.int3, t.add, 12,
               [](int r, int64_t i, char* p) { for (int k = 0; k < 3; ++k) put<int>(p + 4 * k, ival(r, 3 * i + k)); },
               true});
  v.push_back({"int-vector/user-add", t.ivec, t.vec_add, 12,  // extent 3 ints, 2 of them data
               [](int r, int64_t i, char* p) { put<int>(p, ival(r, i)); put<int>(p + 8, ival(r, i + 1)); }, true});
  return v;
}

// Fills n elements of what `rank` contributes; holes keep `pattern`.
inline std::vector<char> make_input(const TypeCase& c, int rank, int64_t n, unsigned char pattern = 0xAB) {
  std::vector<char> b(static_cast<size_t>(std::max<int64_t>(n, 1) * c.extent), static_cast<char>(pattern));
  for (int64_t i = 0; i < n; ++i) c.fill(rank, i, b.data() + i * c.extent);
  return b;
}

}  // namespace coll_test
