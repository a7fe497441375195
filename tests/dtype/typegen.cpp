#include "typegen.hpp"

#include <cstdio>
#include <vector>

namespace hier::test {

bool is_predefined(MPI_Datatype t) {
  int ni, na, nt, comb;
  PMPI_Type_get_envelope(t, &ni, &na, &nt, &comb);
  return comb == MPI_COMBINER_NAMED;
}

void free_type(MPI_Datatype& t) {
  if (t != MPI_DATATYPE_NULL && !is_predefined(t)) MPI_Type_free(&t);
  t = MPI_DATATYPE_NULL;
}

bool TypeGen::ok(MPI_Datatype t) const {
  MPI_Count size, lb, ext, tlb, text;
  MPI_Type_size_x(t, &size);
  MPI_Type_get_extent_x(t, &lb, &ext);
  MPI_Type_get_true_extent_x(t, &tlb, &text);
  return size >= 0 && size <= o_.max_size && text <= o_.max_span && ext >= -o_.max_span && ext <= o_.max_span &&
         tlb > -o_.max_span && tlb < o_.max_span;
}

MPI_Datatype TypeGen::base(std::string& desc) {
  struct B { MPI_Datatype t; const char* n; };
  const B bases[] = {{MPI_CHAR, "char"}, {MPI_SHORT, "short"}, {MPI_INT, "int"}, {MPI_FLOAT, "float"},
                     {MPI_DOUBLE, "double"}, {MPI_LONG_DOUBLE, "long_double"}, {MPI_DOUBLE_INT, "double_int"},
                     {MPI_SHORT_INT, "short_int"}, {MPI_2INT, "2int"}, {MPI_FLOAT_INT, "float_int"},
                     {MPI_LONG_DOUBLE_INT, "long_double_int"}, {MPI_C_DOUBLE_COMPLEX, "dcomplex"},
                     {MPI_INT64_T, "int64"}, {MPI_BYTE, "byte"}};
  const B& b = bases[uni(0, sizeof(bases) / sizeof(bases[0]) - 1)];
  desc += b.n;
  return b.t;
}

MPI_Datatype TypeGen::next(std::string& desc) {
  for (;;) {
    desc.clear();
    MPI_Datatype t = gen(0, desc);
    if (!is_predefined(t)) MPI_Type_commit(&t);
    if (ok(t)) return t;
    free_type(t);
  }
}

MPI_Datatype TypeGen::gen(int depth, std::string& desc) {
  if (depth >= o_.max_depth || uni(0, 9) < 2 + depth) return base(desc);
  MPI_Datatype r = MPI_DATATYPE_NULL;
  const int kind = static_cast<int>(uni(0, 11));
  auto inner = [&](std::string& d) {
    MPI_Datatype t = gen(depth + 1, d);
#if defined(MPICH_VERSION)
    // MPICH 4.0.2 (yaksa) divides by zero packing a zero-size type repeated inside another:
    // zero-size types are generated only at the top level there.
    int sz = 0;
    MPI_Type_size(t, &sz);
    if (sz == 0) {
      free_type(t);
      d.clear();
      t = base(d);
    }
#endif
    return t;
  };
  std::string sd;
  MPI_Datatype old = MPI_DATATYPE_NULL;
  switch (kind) {
    case 0: {
      old = inner(sd);
      const int n = static_cast<int>(uni(0, 4));
      MPI_Type_contiguous(n, old, &r);
      desc += "contig(" + std::to_string(n) + "," + sd + ")";
      break;
    }
    case 1: {
      old = inner(sd);
      const int c = static_cast<int>(uni(1, 4)), bl = static_cast<int>(uni(0, 3)), st = static_cast<int>(uni(-4, 6));
      MPI_Type_vector(c, bl, st, old, &r);
      desc += "vector(" + std::to_string(c) + "," + std::to_string(bl) + "," + std::to_string(st) + "," + sd + ")";
      break;
    }
    case 2: {
      old = inner(sd);
      const int c = static_cast<int>(uni(1, 4)), bl = static_cast<int>(uni(0, 3));
      const MPI_Aint st = uni(-96, 96);
      MPI_Type_create_hvector(c, bl, st, old, &r);
      desc += "hvector(" + std::to_string(c) + "," + std::to_string(bl) + "," + std::to_string(st) + "," + sd + ")";
      break;
    }
    case 3:
    case 4: {
      old = inner(sd);
      const int n = static_cast<int>(uni(1, 5));
      std::vector<int> bl(n), di(n);
      std::vector<MPI_Aint> da(n);
      std::string args;
      for (int i = 0; i < n; ++i) {
        bl[i] = static_cast<int>(uni(0, 3));
        di[i] = static_cast<int>(uni(-8, 16));
        da[i] = uni(-64, 128);
        args += "," + std::to_string(bl[i]) + "@" + std::to_string(kind == 3 ? di[i] : da[i]);
      }
      if (kind == 3) MPI_Type_indexed(n, bl.data(), di.data(), old, &r);
      else MPI_Type_create_hindexed(n, bl.data(), da.data(), old, &r);
      desc += std::string(kind == 3 ? "indexed(" : "hindexed(") + sd + args + ")";
      break;
    }
    case 5: {
      old = inner(sd);
      const int n = static_cast<int>(uni(1, 5)), bl = static_cast<int>(uni(0, 3));
      std::vector<int> di(n);
      std::vector<MPI_Aint> da(n);
      const bool bytes = uni(0, 1);
      std::string args;
      for (int i = 0; i < n; ++i) {
        di[i] = static_cast<int>(uni(-8, 16));
        da[i] = uni(-64, 128);
        args += "," + std::to_string(bytes ? da[i] : di[i]);
      }
      if (bytes) MPI_Type_create_hindexed_block(n, bl, da.data(), old, &r);
      else MPI_Type_create_indexed_block(n, bl, di.data(), old, &r);
      desc += std::string(bytes ? "hindexed_block(" : "indexed_block(") + std::to_string(bl) + "," + sd + args + ")";
      break;
    }
    case 6: {
      const int n = static_cast<int>(uni(1, 4));
      std::vector<int> bl(n);
      std::vector<MPI_Aint> da(n);
      std::vector<MPI_Datatype> ts(n);
      desc += "struct(";
      for (int i = 0; i < n; ++i) {
        std::string d;
        ts[i] = inner(d);
        bl[i] = static_cast<int>(uni(0, 2));
        da[i] = uni(-64, 128);
        desc += (i ? "," : "") + std::to_string(bl[i]) + "x" + d + "@" + std::to_string(da[i]);
      }
      desc += ")";
      MPI_Type_create_struct(n, bl.data(), da.data(), ts.data(), &r);
      for (auto& t : ts) free_type(t);
      break;
    }
    case 7: {
      old = inner(sd);
      const int nd = static_cast<int>(uni(1, 3));
      std::vector<int> sz(nd), sub(nd), st(nd);
      const int order = uni(0, 1) ? MPI_ORDER_C : MPI_ORDER_FORTRAN;
      std::string args;
      for (int i = 0; i < nd; ++i) {
        sz[i] = static_cast<int>(uni(1, 5));
        sub[i] = static_cast<int>(uni(1, sz[i]));
        st[i] = static_cast<int>(uni(0, sz[i] - sub[i]));
        args += "," + std::to_string(sz[i]) + "/" + std::to_string(sub[i]) + "+" + std::to_string(st[i]);
      }
      MPI_Type_create_subarray(nd, sz.data(), sub.data(), st.data(), order, old, &r);
      desc += std::string("subarray_") + (order == MPI_ORDER_C ? "C(" : "F(") + sd + args + ")";
      break;
    }
    case 8: {
      old = inner(sd);
      const int nd = static_cast<int>(uni(1, 3));
      std::vector<int> gs(nd), dist(nd), darg(nd), ps(nd);
      int size = 1;
      std::string args;
      for (int i = 0; i < nd; ++i) {
        gs[i] = static_cast<int>(uni(1, 7));
        const int k = static_cast<int>(uni(0, 2));
        dist[i] = k == 0 ? MPI_DISTRIBUTE_BLOCK : k == 1 ? MPI_DISTRIBUTE_CYCLIC : MPI_DISTRIBUTE_NONE;
        ps[i] = dist[i] == MPI_DISTRIBUTE_NONE ? 1 : static_cast<int>(uni(1, 3));
        if (dist[i] == MPI_DISTRIBUTE_BLOCK) {
          const int minb = (gs[i] + ps[i] - 1) / ps[i];
          darg[i] = uni(0, 1) ? MPI_DISTRIBUTE_DFLT_DARG : static_cast<int>(uni(minb, minb + 2));
        } else if (dist[i] == MPI_DISTRIBUTE_CYCLIC) {
          darg[i] = uni(0, 1) ? MPI_DISTRIBUTE_DFLT_DARG : static_cast<int>(uni(1, 3));
        } else {
          darg[i] = MPI_DISTRIBUTE_DFLT_DARG;
        }
        size *= ps[i];
        args += "," + std::to_string(gs[i]) + ":" + std::to_string(dist[i]) + ":" + std::to_string(darg[i]) + ":" +
                std::to_string(ps[i]);
      }
      const int rank = static_cast<int>(uni(0, size - 1));
      const int order = uni(0, 1) ? MPI_ORDER_C : MPI_ORDER_FORTRAN;
      // Open MPI rejects a darray of a zero-size type and MPICH 4.0 crashes packing one.
      int old_size = 0;
      MPI_Type_size(old, &old_size);
      if (old_size == 0) {
        MPI_Type_contiguous(1, old, &r);
        desc += "contig(1," + sd + ")";
        break;
      }
      MPI_Type_create_darray(size, rank, nd, gs.data(), dist.data(), darg.data(), ps.data(), order, old, &r);
      desc += std::string("darray_") + (order == MPI_ORDER_C ? "C(" : "F(") + std::to_string(rank) + "/" +
              std::to_string(size) + "," + sd + args + ")";
      break;
    }
    case 9:
    case 10: {
      old = inner(sd);
      MPI_Aint lb, ext;
      MPI_Type_get_extent(old, &lb, &ext);
      const MPI_Aint nlb = uni(-32, 32);
      MPI_Aint next = ext + uni(-8, 24);
      if (!o_.allow_resized_overlap && next < ext) next = ext;
      if (next < 1) next = 1;
      MPI_Type_create_resized(old, nlb, next, &r);
      desc += "resized(" + std::to_string(nlb) + "," + std::to_string(next) + "," + sd + ")";
      break;
    }
    default: {
      old = inner(sd);
      MPI_Type_dup(old, &r);
      desc += "dup(" + sd + ")";
      break;
    }
  }
  free_type(old);
  // Inner types are committed sometimes, as applications do: the engine must not depend on it.
  if (uni(0, 3) == 0) MPI_Type_commit(&r);
  return r;
}

}  // namespace hier::test
