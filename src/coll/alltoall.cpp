// alltoall, alltoallv and alltoallw: each rank's block for each peer goes into that peer's
// region of its slot. In place works because a rank packs its round-k pieces of every block
// before it unpacks the round-k pieces it receives, which land on exactly those bytes.
#include "coll/exchange.hpp"

namespace shmcoll::coll {

namespace {

class AlltoallSpec final : public ExchangeSpec {
 public:
  AlltoallSpec(const Layout& send, const Layout& recv, std::uint32_t me, bool in_place)
      : send_(send), recv_(recv), me_(me), in_place_(in_place) {}
  Block outgoing(std::uint32_t dest) const override { return send_.block(dest); }
  Block incoming(std::uint32_t source) const override { return recv_.block(source); }
  void copy_own() const override {
    if (!in_place_) copy_block(send_.block(me_), recv_.block(me_));
  }

 private:
  const Layout& send_;
  const Layout& recv_;
  std::uint32_t me_;
  bool in_place_;
};

}  // namespace

void alltoall(Context& ctx, const Layout& send, const Layout& recv, bool in_place, bool varying) {
  using Knowledge = ExchangeShape::Knowledge;
  // In place, a block I send is where the block from that peer lands: no direct reads.
  const ExchangeShape shape =
      varying ? ExchangeShape{true, Knowledge::nobody, 0, 0, !in_place}
              : ExchangeShape{true, Knowledge::everyone, recv.longest_bytes(), 0, !in_place};
  exchange(ctx, AlltoallSpec(send, recv, ctx.rounds.rank(), in_place), shape);
}

}  // namespace shmcoll::coll
