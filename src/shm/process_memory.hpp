// One copy out of a peer's own memory with the kernel's cross-memory copy (CMA:
// process_vm_readv): the sender posts where its block is, and a reader copies it straight into
// its buffer, without the sender's pages being mapped, moved or shared; or into it
// (process_vm_writev): a gather's root posts where its receive buffer is, and each sender copies
// its block there. It needs what ptrace
// reading needs (the same user, not blocked by Yama's ptrace_scope or a non-dumpable sender); a
// read that fails is a reason to take the copy path, never an error.
//
// A pid names a process only in its pid namespace: ranks in separate namespaces (containers that
// share /dev/shm) would read whatever process has that pid here. So every note carries the
// address and value of a random token of its sender's, which the reader reads in the same call
// and compares before it trusts the bytes.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace shmcoll::shm {

struct ProcessNote {
  std::uint64_t address;  // the block's first byte in its sender's address space
  std::uint64_t bytes;
  std::uint64_t token_address;  // where the sender's token is
  std::uint64_t token;
};

// My note on `bytes` at `data`.
ProcessNote process_note(const std::byte* data, std::size_t bytes);

// Copies bytes [at, at + n) of the block `note` names in process `pid` into `to`. False when it
// cannot (no permission, the process gone or not the one that wrote the note, a short read);
// `to` may then hold part of the bytes.
bool read_process_memory(pid_t pid, const ProcessNote& note, std::size_t at, std::byte* to,
                         std::size_t n);

// Copies `n` bytes from `from` into bytes [at, at + n) of the block `note` names in process
// `pid` (process_vm_writev), once its token is read back as the note says. False as
// read_process_memory; the block may then hold part of the bytes.
bool write_process_memory(pid_t pid, const ProcessNote& note, std::size_t at, const std::byte* from,
                          std::size_t n);

// This process's copies so far: blocks read, writes (a block each, or a piece of one from a
// layout with gaps), and copies that failed (the calls then went through the slots). For the MPI
// layer's verbose table.
struct ProcessCopyCounts {
  std::uint64_t blocks_read;
  std::uint64_t writes;
  std::uint64_t refused;
};
ProcessCopyCounts process_copy_counts();

}  // namespace shmcoll::shm
