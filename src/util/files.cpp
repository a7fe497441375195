#include "util/files.hpp"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace hier::util {

namespace {

bool write_all(int fd, const char* p, size_t n) {
  while (n) {
    const ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// "<dir>/.<name>.<16 random hex digits>.tmp": unpredictable, so nobody can plant it in advance
// (O_EXCL would refuse it anyway; the random part keeps a planted name from blocking the write).
std::string temp_name_beside(const std::string& path) {
  unsigned char r[8] = {};
  size_t got = 0;
  while (got < sizeof r) {
    const ssize_t n = getrandom(r + got, sizeof r - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  char hex[17];
  for (size_t i = 0; i < sizeof r; ++i) std::snprintf(hex + 2 * i, 3, "%02x", r[i]);
  const size_t s = path.rfind('/');
  const std::string dir = s == std::string::npos ? "" : path.substr(0, s + 1);
  const std::string base = s == std::string::npos ? path : path.substr(s + 1);
  return dir + "." + base + "." + hex + ".tmp";
}

}  // namespace

bool write_file_replacing(const std::string& path, const std::string& text, std::string& err, mode_t mode) {
  const std::string tmp = temp_name_beside(path);
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) {
    err = std::strerror(errno);
    return false;
  }
  bool ok = write_all(fd, text.data(), text.size());
  int e = ok ? 0 : errno;
  if (close(fd) != 0 && ok) {
    ok = false;
    e = errno;
  }
  if (ok && rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    e = errno;
  }
  if (!ok) {
    unlink(tmp.c_str());
    err = std::strerror(e ? e : EIO);
  }
  return ok;
}

bool can_create_beside(const std::string& path, std::string& err) {
  const std::string tmp = temp_name_beside(path);
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    err = std::strerror(errno);
    return false;
  }
  close(fd);
  unlink(tmp.c_str());
  return true;
}

int open_append_owned(const std::string& path, std::string& err) {
  // A new file: created here, 0600, never through anything planted at the path.
  int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd >= 0) return fd;
  if (errno != EEXIST) {
    err = std::strerror(errno);
    return -1;
  }
  // An existing one: O_NONBLOCK so that a FIFO planted there cannot block the open.
  fd = open(path.c_str(), O_WRONLY | O_APPEND | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    struct stat st {};
    if (e == ELOOP) err = "a symbolic link";
    else if (lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
      err = S_ISFIFO(st.st_mode) ? "not a regular file (a FIFO)" : "not a regular file";
    else err = std::strerror(e);
    return -1;
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    err = std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    err = S_ISFIFO(st.st_mode) ? "not a regular file (a FIFO)" : "not a regular file";
  } else if (st.st_uid != geteuid()) {
    err = "owned by uid " + std::to_string(st.st_uid) + ", not by this user (uid " + std::to_string(geteuid()) + ")";
  } else if (st.st_nlink != 1) {
    err = "a file with " + std::to_string(st.st_nlink) + " hard links";
  } else {
    fcntl(fd, F_SETFL, O_WRONLY | O_APPEND);  // blocking writes again
    return fd;
  }
  close(fd);
  return -1;
}

bool read_file_capped(const std::string& path, size_t max_bytes, std::string& out, std::string& err) {
  out.clear();
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a FIFO must not block the open
  if (fd < 0) {
    err = std::string("cannot read the file (") + std::strerror(errno) + ")";
    return false;
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    err = "not a regular file";
    return false;
  }
  char buf[65536];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      err = std::string("cannot read the file (") + std::strerror(errno) + ")";
      close(fd);
      return false;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max_bytes) {
      close(fd);
      err = "larger than " + std::to_string(max_bytes) + " bytes";
      out.clear();
      return false;
    }
  }
  close(fd);
  return true;
}

size_t json_nesting_depth(const std::string& text) {
  size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth) {
      --depth;
    }
  }
  return deepest;
}

}  // namespace hier::util
