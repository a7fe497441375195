#include "dtype/ir.hpp"

#include <cstdio>

namespace hier::dtype {

int64_t Node::point_bytes() const {
  switch (kind) {
    case Leaf: return width;
    case Group: return seq_bytes(kids);
    case Gather: {
      int64_t b = 0;
      for (const Run& r : runs) b += r.len;
      return b;
    }
  }
  return 0;
}

bool same_shape(const Node& a, const Node& b) {
  if (a.kind != b.kind || a.nd != b.nd || a.width != b.width) return false;
  for (int32_t d = 0; d < a.nd; ++d)
    if (!(a.dim[d] == b.dim[d])) return false;
  return a.runs == b.runs && a.kids == b.kids;
}

bool operator==(const Node& a, const Node& b) { return a.off == b.off && same_shape(a, b); }

int64_t seq_bytes(const Seq& s) {
  int64_t b = 0;
  for (const Node& n : s) b += n.points() * n.point_bytes();
  return b;
}

size_t seq_nodes(const Seq& s) {
  size_t n = 0;
  for (const Node& x : s) n += 1 + x.runs.size() / 8 + (x.kind == Node::Group ? seq_nodes(x.kids) : 0);
  return n;
}

Seq repeat(Seq s, int64_t count, int64_t stride) {
  if (count <= 0 || s.empty()) return {};
  if (count == 1) return s;
  if (s.size() == 1 && s[0].nd < kMaxDims) {
    Node& n = s[0];
    for (int32_t d = n.nd; d > 0; --d) n.dim[d] = n.dim[d - 1];
    n.dim[0] = {count, stride};
    ++n.nd;
  } else {
    Node g;
    g.kind = Node::Group;
    g.nd = 1;
    g.dim[0] = {count, stride};
    g.kids = std::move(s);
    s.clear();
    s.push_back(std::move(g));
  }
  simplify(s);
  return s;
}

Seq shift(Seq s, int64_t delta) {
  for (Node& n : s) n.off += delta;
  return s;
}

void append(Seq& a, Seq b) {
  for (Node& n : b) a.push_back(std::move(n));
}

namespace {
void node_string(const Node& n, std::string& o) {
  char buf[96];
  switch (n.kind) {
    case Node::Leaf: std::snprintf(buf, sizeof buf, "leaf %lld@%lld", (long long)n.width, (long long)n.off); break;
    case Node::Gather: std::snprintf(buf, sizeof buf, "gather(%zu)@%lld", n.runs.size(), (long long)n.off); break;
    case Node::Group: std::snprintf(buf, sizeof buf, "group@%lld", (long long)n.off); break;
  }
  o += buf;
  for (int32_t d = 0; d < n.nd; ++d) {
    std::snprintf(buf, sizeof buf, " [%lldx%+lld]", (long long)n.dim[d].cnt, (long long)n.dim[d].str);
    o += buf;
  }
  if (n.kind == Node::Gather) {
    o += " {";
    for (size_t i = 0; i < n.runs.size() && i < 8; ++i) {
      std::snprintf(buf, sizeof buf, "%s%lld@%lld", i ? " " : "", (long long)n.runs[i].len, (long long)n.runs[i].off);
      o += buf;
    }
    if (n.runs.size() > 8) o += " ...";
    o += "}";
  }
  if (n.kind == Node::Group) o += " (" + to_string(n.kids) + ")";
}
}  // namespace

std::string to_string(const Seq& s) {
  std::string o;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) o += " ; ";
    node_string(s[i], o);
  }
  return o.empty() ? "empty" : o;
}

}  // namespace hier::dtype
