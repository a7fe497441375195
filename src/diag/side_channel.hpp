// The hang watchdog's side channel: how the ranks of one job ask each other where they are, over
// TCP, without MPI (MPI may be what hangs). Only the job can talk on it:
//  - at MPI_Init every rank draws 32 random bytes (getrandom); they go round with its addresses in
//    the one PMPI_Allgather on MPI_COMM_WORLD, and the job's secret is SHA-256 of all of them;
//  - a connection is sent a challenge at once ("C <16 random bytes in hex>", fresh per
//    connection); the query carries HMAC-SHA256(secret, query), names the rank and pid it is for,
//    a fresh nonce of the asker's and that challenge, so a captured query replayed on another
//    connection fails; a rank answers nothing at all beyond the challenge, not one byte, to a
//    query that fails any check (and so walks no stack, runs no addr2line for it);
//  - every answer carries HMAC-SHA256(secret, answer) bound to that nonce, and the asker checks
//    its rank and pid against the allgathered table;
//  - sockets listen only on the addresses the job uses (never 0.0.0.0): the interface named by
//    HIER_WATCHDOG_IF, else those whose subnets hold the other hosts' addresses (choose_addresses),
//    loopback alone when every rank is on one host (same boot id and network namespace); a
//    first allgather tells every rank the others' addresses, a second where each listens;
//  - queries are read from a poll set on a thread of their own: lines capped at kMaxQueryBytes,
//    2 s per connection, at most kMaxConnections open (the oldest is dropped), so no client can
//    stall the watchdog's detection, which runs on another thread.
// The secret itself never leaves the process (docs/diagnostics.md, "Threat model").
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace hier::diag::channel {

struct Query {
  int from = -1;  // world rank asking
  uint64_t key = 0, seq = 0;
  bool brief = false;  // only "are you in this call": no stack look, no addr2line
};

// Opens the listening sockets and makes the two PMPI_Allgathers on MPI_COMM_WORLD (every rank
// calls them, also when its sockets fail: the others then see it as unreachable). false: no
// channel here, `err` says why in one line.
bool open(int world_rank, int world_size, std::string& err);

// Serves authenticated queries on a thread of its own; `answer` gives the answer's body (one line,
// no '\n'). Called with every signal blocked by the caller.
bool start_server(std::function<std::string(const Query&)> answer);
void stop();

enum class Reach { Ok, Gone, NoAnswer, Unreachable };
// Asks world rank `to` (connect within 1 s, answer within 2.5 s). Ok: `body` is its verified answer.
Reach ask(int to, const Query& q, std::string& body);

// This rank's listening addresses, "ip:port ip:port" (the log's INFO line; the hostile-client test
// tells libhier's sockets from the MPI library's by it).
std::string addresses();

// What the allgathered table says about world rank `r` (empty / 0 when unknown).
std::string host_of(int r);
long pid_of(int r);

// One IPv4 address of this host's interfaces (network order).
struct Iface {
  std::string name;
  uint32_t addr = 0, mask = 0;
  bool loopback = false;
};

// Where a rank listens, from this host's interfaces (`mine`) and the addresses of every rank on
// another host (`others`, one list per rank): `named`'s addresses (HIER_WATCHDOG_IF; none: `err`
// names it and the interfaces there are); loopback when `one_host`; else the interfaces whose
// subnets hold an address of the most other ranks (an address this host has too does not
// count); else the source addresses `route` gives towards the others. Empty: `err` says why.
std::vector<uint32_t> choose_addresses(const std::vector<Iface>& mine, const std::vector<std::vector<uint32_t>>& others,
                                       bool one_host, const std::string& named,
                                       const std::function<uint32_t(uint32_t)>& route, std::string& err);

// The wire format's limits.
constexpr size_t kMaxQueryBytes = 256;
constexpr size_t kMaxAnswerBytes = 16384;
constexpr int kMaxConnections = 256;

}  // namespace hier::diag::channel
