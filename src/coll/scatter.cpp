#include <cstring>

#include "coll/exchange.hpp"
#include "util/copy.hpp"

namespace shmcoll::coll {

namespace {

// The root's block for each rank goes into its own region of the root's slot (or line).
class ScatterSpec final : public ExchangeSpec {
 public:
  ScatterSpec(const Layout& send, const Block& recv, std::uint32_t me, std::uint32_t root)
      : send_(send), recv_(recv), me_(me), root_(root) {}
  Block outgoing(std::uint32_t dest) const override {
    return me_ == root_ ? send_.block(dest) : Block{};
  }
  Block incoming(std::uint32_t source) const override { return source == root_ ? recv_ : Block{}; }
  void copy_own() const override {
    if (me_ == root_) copy_block(send_.block(root_), recv_);
  }

 private:
  const Layout& send_;
  const Block& recv_;
  std::uint32_t me_, root_;
};

// Each receiver's share of a message line when the root writes one block per receiver.
std::size_t line_region(std::uint32_t ranks) {
  return shm::kMessageBytes / (ranks - 1) / 8 * 8;
}

// Blocks that all fit one message line, as every rank knows from the block length they agree
// on: the root packs each rank's block into that rank's region of one line and publishes it,
// and the others copy theirs out. The exchange engine moves them the same way, but through its
// header, per-peer bookkeeping and release, which cost a small call a third of its time (2
// ranks, 8 B: batch 0.12 -> 0.10 us, one call after a barrier 0.16 -> 0.14).
void scatter_in_one_line(Context& ctx, const Layout& send, const Block& recv, std::uint32_t root,
                         std::size_t block_bytes) {
  shm::Rounds& rounds = ctx.rounds;
  const std::uint32_t others = rounds.size() - 1;
  const std::size_t region = line_region(rounds.size());
  const std::uint32_t me = rounds.rank();
  const std::uint32_t round = rounds.begin();
  if (me == root) {
    alignas(8) std::byte line[shm::kMessageBytes];
    for (std::uint32_t dest = 0; dest < rounds.size(); ++dest) {
      if (dest == root) continue;
      const Block block = send.block(dest);
      block.type->pack_range(block.base, block.count, 0, block_bytes,
                             line + (dest - (dest > root)) * region);
    }
    rounds.publish_message(round, line, (others - 1) * region + block_bytes);
    copy_block(send.block(root), recv);
    return;
  }
  rounds.publish(round);
  const std::byte* posted = rounds.wait_message(root, round) + (me - (me > root)) * region;
  recv.type->unpack_range(posted, recv.count, 0, block_bytes, recv.base);
}

// Where a scatterv's blocks, together, stay within this, the root posts them all in its slot.
constexpr std::size_t kScattervInSlotMost = 4 * 1024;

// Scatterv's blocks differ in length, and only the root knows them all: the root decides alone,
// and its message of the first round says which way every rank goes. Small ones: each block with
// its place in a table at the head of the root's slot, published at once, so the root leaves as
// soon as it has written, where through the exchange it waited for its readers (OSU's average
// at 8-64 B, 2 ranks: 0.44-0.50x Open MPI alone, whose root sends eagerly and leaves). The slot
// is the root's again once every reader has begun its next call (wait_slot_free). Larger ones go
// through the exchange, one round later. False: the exchange's way.
bool scatterv_in_slot(Context& ctx, const Layout& send, const Block& recv, std::uint32_t root) {
  shm::Rounds& rounds = ctx.rounds;
  const std::uint32_t me = rounds.rank(), size = rounds.size();
  const std::size_t table_bytes = BlockPlace::table_bytes(size);
  const auto padded = [](std::size_t bytes) {
    return (bytes + 7) / 8 * 8;
  };  // blocks start 8-aligned
  const std::uint32_t round = rounds.begin();
  if (me == root) {
    std::size_t end = table_bytes;
    for (std::uint32_t dest = 0; dest < size; ++dest) {
      if (dest != root) end += padded(send.block(dest).bytes());
    }
    const std::uint64_t in_slot =
        end - table_bytes <= kScattervInSlotMost && end <= rounds.slot_bytes();
    if (in_slot) {
      rounds.wait_slot_free(round);
      std::byte* const slot = rounds.slot(root, round);
      std::size_t at = table_bytes;
      for (std::uint32_t dest = 0; dest < size; ++dest) {
        if (dest == root) continue;
        const Block block = send.block(dest);
        const BlockPlace place{at, block.bytes()};
        place.put(slot, dest);
        block.type->pack_range(block.base, block.count, 0, place.bytes, slot + at);
        at += padded(place.bytes);
      }
    }
    rounds.publish_message(round, &in_slot, sizeof in_slot);
    if (in_slot) copy_block(send.block(root), recv);
    return in_slot;
  }
  rounds.publish(round);
  const std::byte* const slot = rounds.slot(root, round);
  prefetch_head(slot, table_bytes + recv.bytes());
  std::uint64_t in_slot = 0;
  std::memcpy(&in_slot, rounds.wait_message(root, round), sizeof in_slot);
  if (!in_slot) return false;
  const BlockPlace place = BlockPlace::in(slot, me);
  if (place.bytes != recv.bytes()) fail_mismatched_counts(me, root, place.bytes, recv.bytes());
  recv.type->unpack_range(slot + place.at, recv.count, 0, recv.bytes(), recv.base);
  return true;
}

}  // namespace

void scatter(Context& ctx, const Layout& send, const Block& recv, int root, bool varying) {
  const auto me = ctx.rounds.rank();
  const auto root_rank = static_cast<std::uint32_t>(root);
  const std::size_t block_bytes = me == root_rank ? send.longest_bytes() : recv.bytes();
  if (!varying && ctx.rounds.size() > 1 && block_bytes > 0 &&
      block_bytes <= line_region(ctx.rounds.size())) {
    return scatter_in_one_line(ctx, send, recv, root_rank, block_bytes);
  }
  if (varying && ctx.rounds.size() > 1 && scatterv_in_slot(ctx, send, recv, root_rank)) return;
  using Knowledge = ExchangeShape::Knowledge;
  const ExchangeShape shape =
      varying ? ExchangeShape{.personalized = true,
                              .lengths_known_by = Knowledge::root,
                              .root = root_rank,
                              .one_sender = true}
              : ExchangeShape{.personalized = true,
                              .lengths_known_by = Knowledge::everyone,
                              .longest = me == root_rank ? send.longest_bytes() : recv.bytes(),
                              .root = root_rank,
                              .one_sender = true};
  exchange(ctx, ScatterSpec(send, recv, me, root_rank), shape);
}

}  // namespace shmcoll::coll
