// gather(v) and allgather(v): every contributor packs its block once, into one region that the
// root (gather) or every rank (allgather) reads; or, in a gather of long blocks, straight into the
// root's receive buffer (its shared pages, or its memory through the kernel's copy).
#include <algorithm>
#include <cstring>

#include "coll/exchange.hpp"
#include "coll/shared_inputs.hpp"
#include "shm/process_memory.hpp"
#include "util/copy.hpp"
#include "util/fail.hpp"

namespace shmcoll::coll {

namespace {

class GatherSpec final : public ExchangeSpec {
 public:
  // root < 0: every rank receives (allgather).
  GatherSpec(const Block& send, const Layout& recv, std::uint32_t me, int root, bool in_place)
      : send_(send), recv_(recv), me_(me), root_(root), in_place_(in_place) {}
  Block outgoing(std::uint32_t) const override {
    if (me_ == std::uint32_t(root_)) return {};
    return in_place_ ? recv_.block(me_) : send_;
  }
  Block incoming(std::uint32_t source) const override {
    return receives() ? recv_.block(source) : Block{};
  }
  void copy_own() const override {
    if (receives() && !in_place_) copy_block(send_, recv_.block(me_));
  }

 private:
  bool receives() const { return root_ < 0 || me_ == std::uint32_t(root_); }
  const Block& send_;
  const Layout& recv_;
  std::uint32_t me_;
  int root_;
  bool in_place_;
};

// Blocks that fit one message line, as every rank knows from the block length they agree on:
// each sender publishes its block in its line and the root copies each out. The exchange engine
// moves them the same way, but through its header, per-peer bookkeeping and release.
void gather_in_lines(Context& ctx, const Block& send, const Layout& recv, std::uint32_t root,
                     std::size_t block_bytes, const GatherSpec& spec) {
  shm::Rounds& rounds = ctx.rounds;
  const std::uint32_t round = rounds.begin();
  if (rounds.rank() != root) {
    alignas(8) std::byte line[shm::kMessageBytes];
    send.type->pack_range(send.base, send.count, 0, block_bytes, line);
    rounds.publish_message(round, line, block_bytes);
    return;
  }
  rounds.publish(round);
  spec.copy_own();
  for (std::uint32_t sender = 0; sender < rounds.size(); ++sender) {
    if (sender == root) continue;
    const Block block = recv.block(sender);
    block.type->unpack_range(rounds.wait_message(sender, round), block.count, 0, block_bytes,
                             block.base);
  }
}

// Where the root's receive buffer starts when its blocks lie back to back in rank order, each
// `block_bytes` long and contiguous; nullptr when it is laid out otherwise.
std::byte* dense_receive_buffer(const Layout& recv, std::uint32_t size, std::size_t block_bytes) {
  const Block first = recv.block(0);
  if (!first.type->is_contiguous()) return nullptr;
  std::byte* const begin = first.base + first.type->lb();
  for (std::uint32_t rank = 0; rank < size; ++rank) {
    const Block block = recv.block(rank);
    if (block.bytes() != block_bytes || block.base + block.type->lb() != begin + rank * block_bytes)
      return nullptr;
  }
  return begin;
}

// What the root of a gather posts in its first round when its receive buffer may take the
// senders' blocks straight: a note on its shared pages, or else (bytes > 0) on its memory for the
// kernel's copy.
struct RootBufferNotes {
  BufferNote pages;
  shm::ProcessNote process;
};
static_assert(sizeof(RootBufferNotes) <= shm::kMessageBytes);

// The root's side of gather_into_root_buffer: the bytes of each sender's block in the partly
// used pages at the ends of its shared buffer, out of the sender's slot of round `done`.
void copy_outside_the_pages(Context& ctx, std::uint32_t root, std::size_t block_bytes,
                            const BufferNote& note, std::byte* first, std::uint32_t done) {
  for (std::uint32_t sender = 0; sender < ctx.rounds.size(); ++sender) {
    if (sender == root) continue;
    // Its bytes outside the shared pages, in order: before them, then after them.
    const std::size_t begin = sender * block_bytes, end = begin + block_bytes;
    const std::byte* outside = ctx.rounds.slot(sender, done);
    const std::size_t before =
        std::min(end, std::size_t(note.head)) - std::min(begin, std::size_t(note.head));
    copy_bytes(first + begin, outside, before);
    const std::size_t after_from = std::max(begin, std::size_t(note.tail_from));
    if (end > after_from) copy_bytes(first + after_from, outside + before, end - after_from);
  }
}

// A sender's side of gather_into_root_buffer through shared pages: my block's part in the
// root's pages straight there, the rest into my slot of round `done`. False where I cannot map
// the root's pages.
bool write_into_root_pages(Context& ctx, const Block& send, std::uint32_t root,
                           std::size_t block_bytes, const BufferNote& note, std::uint32_t done) {
  shm::Rounds& rounds = ctx.rounds;
  std::byte* const mapped = map_shared_buffer_to_write(ctx, root, note);
  std::byte* const pages = mapped ? mapped + note.offset : nullptr;
  const std::size_t begin = rounds.rank() * block_bytes, end = begin + block_bytes;
  const std::size_t head = note.head, tail_from = note.tail_from;
  const std::size_t in_from = std::clamp(begin, head, tail_from);
  const std::size_t in_to = std::clamp(end, head, tail_from);
  if (pages && in_to > in_from) {
    write_in_pieces(ctx, root, in_to - in_from, 1, [&](std::size_t at, std::size_t n) {
      send.type->pack_range(send.base, send.count, in_from - begin + at, n,
                            pages + (in_from - head + at));
      return true;
    });
  }
  rounds.wait_slot_free(done);
  std::byte* const outside = rounds.slot(rounds.rank(), done);
  const std::size_t before = std::min(end, head) - std::min(begin, head);
  if (before > 0) send.type->pack_range(send.base, send.count, 0, before, outside);
  const std::size_t after_from = std::max(begin, tail_from);
  if (end > after_from) {
    send.type->pack_range(send.base, send.count, after_from - begin, end - after_from,
                          outside + before);
  }
  return pages != nullptr;
}

// Gather straight into the root's receive buffer, where its blocks lie back to back: through its
// shared pages (shm/shared_pages.hpp) when it has them, else through the kernel's cross-memory
// copy (process_vm_writev, where kernel_write_pays). In round one the root posts its note; each
// sender copies its block into the root's buffer while the root copies its own, one copy each and
// all at once, where through the slots the root copies every block itself (2 bound ranks, blocks
// of 256 KiB-4 MiB on buffers the program wrote: docs/performance.md). Into shared pages, the bytes
// of a block in the partly used pages at the buffer's ends go through its sender's slot in round
// two. Round two also tells the root that each sender is done, or could not reach its buffer
// (then all go on through the exchange, the kernel's copy off for the team where it was
// refused), and the senders what the root heard (what_any_rank_missed_writing): a sender
// succeeds only where the root did. Senders write in pieces (write_in_pieces), so a root that
// fails waits only for the pieces under way, and none begins after. Regular gather only (in gatherv
// the senders do not know where their block goes); shared pages not where ranks share CPUs
// (sharing_applies). When the root's buffer can take neither, the call goes on through the
// exchange, one round later.
bool gather_into_root_buffer(Context& ctx, const Block& send, const Layout& recv,
                             std::uint32_t root, std::size_t block_bytes, const GatherSpec& spec) {
  shm::Rounds& rounds = ctx.rounds;
  const std::uint32_t me = rounds.rank(), size = rounds.size();
  const bool pages_apply = sharing_applies(ctx, block_bytes);
  const bool kernel_applies = kernel_write_pays(ctx, block_bytes, rounds.slot_bytes());
  if (!pages_apply && !kernel_applies) return false;
  const std::size_t span = block_bytes * size;
  const std::uint32_t round = rounds.begin();
  if (me == root) {
    std::byte* const first = dense_receive_buffer(recv, size, block_bytes);
    RootBufferNotes notes{note_if_shared(ctx, pages_apply ? first : nullptr, span, 1), {}};
    if (notes.pages.fd < 0 && kernel_applies && first)
      notes.process = shm::process_note(first, span);
    rounds.publish_message(round, &notes, sizeof notes);
    if (notes.pages.fd < 0 && notes.process.bytes == 0) return false;
    spec.copy_own();
    const std::uint32_t done = rounds.begin();
    if (what_any_rank_missed_writing(ctx, done, kMissedNothing, root) != kMissedNothing) {
      return false;
    }
    if (notes.pages.fd >= 0)
      copy_outside_the_pages(ctx, root, block_bytes, notes.pages, first, done);
    return true;
  }
  rounds.publish(round);
  RootBufferNotes notes;
  std::memcpy(&notes, rounds.wait_message(root, round), sizeof notes);
  const bool in_pages = notes.pages.fd >= 0;
  if (!in_pages && notes.process.bytes == 0) return false;
  const std::uint64_t root_bytes = in_pages ? notes.pages.bytes : notes.process.bytes;
  if (root_bytes != span || (in_pages && !note_is_sound(notes.pages))) {
    fail(Errc::invalid_argument, "rank ", me, ": the gather root (rank ", root, ") receives ",
         root_bytes, " bytes, not the ", span,
         " of this rank's block times the ranks (mismatched counts)");
  }
  const std::uint32_t done = rounds.begin();
  unsigned missed = kMissedNothing;
  if (in_pages) {
    if (!write_into_root_pages(ctx, send, root, block_bytes, notes.pages, done)) {
      missed = kMissedPages;
    }
  } else if (!write_into_rank_memory(ctx, root, notes.process, me * block_bytes, send, 0,
                                     block_bytes)) {
    missed = kMissedProcess;
  }
  return what_any_rank_missed_writing(ctx, done, missed, root) == kMissedNothing;
}

}  // namespace

void gather(Context& ctx, const Block& send, const Layout& recv, int root, bool varying) {
  const auto me = ctx.rounds.rank();
  const bool at_root = me == std::uint32_t(root);
  const GatherSpec spec(send, recv, me, root, false);
  if (!varying && ctx.rounds.size() > 1) {
    const std::size_t block_bytes = at_root ? recv.longest_bytes() : send.bytes();
    if (block_bytes > 0 && block_bytes <= shm::kMessageBytes) {
      return gather_in_lines(ctx, send, recv, std::uint32_t(root), block_bytes, spec);
    }
    if (gather_into_root_buffer(ctx, send, recv, std::uint32_t(root), block_bytes, spec)) return;
  }
  using Knowledge = ExchangeShape::Knowledge;
  const ExchangeShape shape =
      varying ? ExchangeShape{.personalized = false,
                              .lengths_known_by = Knowledge::root,
                              .root = std::uint32_t(root),
                              .one_receiver = true}
              : ExchangeShape{.personalized = false,
                              .lengths_known_by = Knowledge::everyone,
                              .longest = at_root ? recv.longest_bytes() : send.bytes(),
                              .root = std::uint32_t(root),
                              .one_receiver = true};
  // At the root, in place is a send block of count 0: nothing to copy into its own block.
  exchange(ctx, spec, shape);
}

void allgather(Context& ctx, const Block& send, const Layout& recv, bool in_place) {
  const auto me = ctx.rounds.rank();
  // allgatherv's receive counts are significant everywhere: every rank knows every length.
  exchange(ctx, GatherSpec(send, recv, me, -1, in_place),
           {false, ExchangeShape::Knowledge::everyone, recv.longest_bytes()});
}

}  // namespace shmcoll::coll
