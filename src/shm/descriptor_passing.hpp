// How a process's shared pages (shared_pages.hpp) reach its peers, and no other process. Anyone
// who may read /proc/<pid>/fd (ptrace-read permission: every process of the same user, whatever
// Yama's ptrace_scope says) could open a memfd there whose mode lets them, and a memfd is made
// with mode 0777 (issue 43, row 15). So every memfd here is made with mode 0 before anyone can
// name it, and its owner hands it out itself: a small server thread answers, over a unix socket,
// a peer that names the memfd by its key, a random number that only the team's notes carry. The
// peer checks that the socket's other end is the process it meant to ask (SO_PEERCRED); the
// server, that the other end is a member of one of its teams (SO_PEERCRED again, before it
// reads a byte: anyone on the node can connect to an abstract socket, whose name
// /proc/net/unix lists) and that the key is one of its memfds'. It serves every connection at
// once (poll), so no client, idle or slow, holds up another (issue 57, row 2). Where any of it
// fails (a peer in another network namespace, an owner that cannot listen or does not answer
// in time), the peer takes the copy path, as where it cannot map the pages.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shmcoll::shm {

// A memfd no other process can open through /proc/<pid>/fd (a process with CAP_DAC_OVERRIDE and
// CAP_SYS_PTRACE aside, which may read this process's memory anyway); -1 where there is none.
int new_private_memfd(const char* name);

// A random key for a new memfd, never 0.
std::uint64_t new_memfd_key();

// Answers peers' keys with a duplicate of the descriptor `lookup` gives for the key (a new
// descriptor the server closes once sent; -1: not mine), from a thread started once per process
// (again in a forked child). `lookup` is called on that thread. False where it cannot listen.
// Callers serialize the calls.
using DescriptorLookup = int (*)(std::uint64_t key);
bool serve_descriptors(DescriptorLookup lookup);

// The descriptor process `pid` serves for `key`; -1, with the reason in `why`, where it does not.
int fetch_descriptor(std::int32_t pid, std::uint64_t key, std::string& why);

// The processes this one's server answers: the members of its teams, each allowed for as long as
// an AllowedPeers that names it lives (a pid may be named by several).
class AllowedPeers {
 public:
  AllowedPeers() = default;
  explicit AllowedPeers(std::vector<std::int32_t> pids);
  AllowedPeers(AllowedPeers&& other) noexcept : pids_(std::move(other.pids_)) {
    other.pids_.clear();
  }
  AllowedPeers& operator=(AllowedPeers&& other) noexcept;
  AllowedPeers(const AllowedPeers&) = delete;
  AllowedPeers& operator=(const AllowedPeers&) = delete;
  ~AllowedPeers();

 private:
  std::vector<std::int32_t> pids_;
};

}  // namespace shmcoll::shm
