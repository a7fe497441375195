// Files libhier writes inside other people's jobs, often in shared directories: never through a
// symlink or a file planted by someone else, never half-written, and files it reads never without
// a size limit (a device such as /dev/zero would otherwise hang the reader).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>

namespace hier::util {

// Writes `text` to a new temporary file in `path`'s directory (random name, created with
// O_CREAT|O_EXCL|O_NOFOLLOW, so nothing planted there is opened), then rename()s it over `path`:
// a symlink at `path` is replaced, its target left untouched; readers see the old file or the
// whole new one. false and `err` (strerror text) on failure; the temporary file is removed.
bool write_file_replacing(const std::string& path, const std::string& text, std::string& err, mode_t mode = 0600);

// Whether write_file_replacing(path, ...) can create its temporary file (tried and removed), so
// that a long computation is not spent before a write that cannot happen. false: `err` set.
bool can_create_beside(const std::string& path, std::string& err);

// Opens `path` for appending: a new file is created 0600 with O_EXCL|O_NOFOLLOW (as
// write_file_replacing creates its files); an existing one is taken only if it is a regular file
// of this user's with one link (never a symlink, a FIFO, a device, nor another user's file
// planted in a shared directory). -1 and a one-line `err` otherwise ("owned by uid 65534, not by
// this user (uid 0)", "not a regular file (a FIFO)", "a symbolic link", ...).
int open_append_owned(const std::string& path, std::string& err);

// Reads a regular file of at most `max_bytes`. false and a one-line `err` otherwise (not a
// regular file, larger than the limit, cannot be read).
bool read_file_capped(const std::string& path, size_t max_bytes, std::string& out, std::string& err);

// How deeply JSON text nests ([ and { outside strings); the JSON parser recurses that deep.
size_t json_nesting_depth(const std::string& text);

}  // namespace hier::util
