// src/util's safety helpers: SHA-256 / HMAC-SHA256 against the published vectors (FIPS 180-4
// examples, RFC 4231), and the file helpers against a planted symlink, a device and deep nesting.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "util/files.hpp"
#include "util/sha256.hpp"

using namespace hier::util;

namespace {
std::string hex_of(const Digest& d) { return to_hex(d.data(), d.size()); }
std::string sha_hex(const std::string& s) { return hex_of(sha256(s.data(), s.size())); }
std::string hmac_hex(const std::string& k, const std::string& m) {
  return hex_of(hmac_sha256(k.data(), k.size(), m.data(), m.size()));
}
std::string slurp(const std::string& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
std::string temp_dir() {
  char t[] = "/tmp/hier-util-XXXXXX";  // the test's own private directory (mkdtemp: 0700)
  return mkdtemp(t);
}
}  // namespace

TEST(Sha256, FipsVectors) {
  EXPECT_EQ(sha_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // Lengths around the one-or-two-final-blocks boundary (55, 56, 64 bytes).
  EXPECT_EQ(sha_hex(std::string(55, 'a')), "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  EXPECT_EQ(sha_hex(std::string(56, 'a')), "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  EXPECT_EQ(sha_hex(std::string(64, 'a')), "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}

TEST(Sha256, HmacRfc4231) {
  EXPECT_EQ(hmac_hex(std::string(20, '\x0b'), "Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(hmac_hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(hmac_hex(std::string(20, '\xaa'), std::string(50, '\xdd')),
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
  // A key longer than the block (131 bytes) is hashed first.
  EXPECT_EQ(hmac_hex(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First"),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(Sha256, ConstantTimeEqual) {
  EXPECT_TRUE(equal_constant_time("abcd", "abcd", 4));
  EXPECT_FALSE(equal_constant_time("abcd", "abce", 4));
  EXPECT_FALSE(equal_constant_time("xbcd", "abcd", 4));
}

TEST(Files, ReplacingLeavesASymlinkTargetUntouched) {
  const std::string d = temp_dir();
  const std::string victim = d + "/victim", link = d + "/report.json";
  { std::ofstream(victim) << "precious\n"; }
  ASSERT_EQ(symlink(victim.c_str(), link.c_str()), 0);
  std::string err;
  ASSERT_TRUE(write_file_replacing(link, "{}\n", err)) << err;
  EXPECT_EQ(slurp(victim), "precious\n");
  struct stat st {};
  ASSERT_EQ(lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));  // the link itself was replaced by the new file
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(slurp(link), "{}\n");
  // Nothing but the two files is left behind (no temporary file).
  EXPECT_EQ(std::system(("test $(ls -A " + d + " | wc -l) -eq 2").c_str()), 0);
  std::system(("rm -rf " + d).c_str());
}

TEST(Files, ReplacingFailsCleanlyInAMissingDirectory) {
  std::string err;
  EXPECT_FALSE(write_file_replacing("/nonexistent-hier-dir/x.json", "{}", err));
  EXPECT_FALSE(err.empty());
  err.clear();
  EXPECT_FALSE(can_create_beside("/nonexistent-hier-dir/x.json", err));
  EXPECT_EQ(err, "No such file or directory");
  const std::string d = temp_dir();
  EXPECT_TRUE(can_create_beside(d + "/x.json", err)) << err;
  EXPECT_EQ(std::system(("test $(ls -A " + d + " | wc -l) -eq 0").c_str()), 0);  // nothing left behind
  std::system(("rm -rf " + d).c_str());
}

TEST(Files, AppendRefusesASymlink) {
  const std::string d = temp_dir();
  const std::string victim = d + "/victim", link = d + "/debug.log";
  { std::ofstream(victim) << "precious\n"; }
  ASSERT_EQ(symlink(victim.c_str(), link.c_str()), 0);
  std::string err;
  EXPECT_LT(open_append_owned(link, err), 0);
  EXPECT_EQ(err, "a symbolic link");
  const int fd = open_append_owned(d + "/real.log", err);
  EXPECT_GE(fd, 0) << err;
  close(fd);
  EXPECT_EQ(slurp(victim), "precious\n");
  std::system(("rm -rf " + d).c_str());
}

// A file planted in a shared directory: a FIFO (the open must not block), another user's file, a
// hard link to a file elsewhere. Each refused with one line; an own regular file is appended to.
TEST(Files, AppendRefusesPlantedFiles) {
  const std::string d = temp_dir();
  std::string err;
  const std::string fifo = d + "/fifo.log";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0666), 0);
  EXPECT_LT(open_append_owned(fifo, err), 0);
  EXPECT_EQ(err, "not a regular file (a FIFO)");
  const std::string own = d + "/own.log", twice = d + "/twice.log";
  { std::ofstream(own) << "mine\n"; }
  int fd = open_append_owned(own, err);
  ASSERT_GE(fd, 0) << err;
  EXPECT_EQ(write(fd, "more\n", 5), 5);
  close(fd);
  EXPECT_EQ(slurp(own), "mine\nmore\n");
  ASSERT_EQ(link(own.c_str(), twice.c_str()), 0);
  EXPECT_LT(open_append_owned(twice, err), 0);
  EXPECT_EQ(err, "a file with 2 hard links");
  if (geteuid() == 0) {  // another user's file: root can make one (the suite runs as root)
    const std::string theirs = d + "/theirs.log";
    { std::ofstream(theirs) << "precious\n"; }
    ASSERT_EQ(chown(theirs.c_str(), 65534, 65534), 0);
    EXPECT_LT(open_append_owned(theirs, err), 0);
    EXPECT_EQ(err, "owned by uid 65534, not by this user (uid 0)");
    EXPECT_EQ(slurp(theirs), "precious\n");
  }
  std::system(("rm -rf " + d).c_str());
}

TEST(Files, CappedReadRefusesDevicesAndLargeFiles) {
  std::string out, err;
  EXPECT_FALSE(read_file_capped("/dev/zero", 1 << 20, out, err));
  EXPECT_EQ(err, "not a regular file");
  const std::string d = temp_dir();
  { std::ofstream(d + "/big") << std::string(2000, 'x'); }
  EXPECT_FALSE(read_file_capped(d + "/big", 1000, out, err));
  EXPECT_EQ(err, "larger than 1000 bytes");
  EXPECT_TRUE(read_file_capped(d + "/big", 2000, out, err));
  EXPECT_EQ(out.size(), 2000u);
  EXPECT_FALSE(read_file_capped(d + "/missing", 10, out, err));
  EXPECT_NE(err.find("cannot read the file"), std::string::npos);
  std::system(("rm -rf " + d).c_str());
}

TEST(Files, JsonNestingDepth) {
  EXPECT_EQ(json_nesting_depth("{}"), 1u);
  EXPECT_EQ(json_nesting_depth("{\"a\": [1, {\"b\": 2}]}"), 3u);
  EXPECT_EQ(json_nesting_depth("{\"a\": \"[[[[\\\"{{\"}"), 1u);  // brackets inside strings do not count
  EXPECT_EQ(json_nesting_depth(std::string(100000, '[')), 100000u);
}
