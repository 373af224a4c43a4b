// gather(v) and allgather(v): every contributor packs its block once, into one region that the
// root (gather) or every rank (allgather) reads.
#include "coll/exchange.hpp"

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

}  // namespace

void gather(Context& ctx, const Block& send, const Layout& recv, int root, bool varying) {
  const auto me = ctx.rounds.rank();
  const bool at_root = me == std::uint32_t(root);
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
  exchange(ctx, GatherSpec(send, recv, me, root, false), shape);
}

void allgather(Context& ctx, const Block& send, const Layout& recv, bool in_place) {
  const auto me = ctx.rounds.rank();
  // allgatherv's receive counts are significant everywhere: every rank knows every length.
  exchange(ctx, GatherSpec(send, recv, me, -1, in_place),
           {false, ExchangeShape::Knowledge::everyone, recv.longest_bytes()});
}

}  // namespace shmcoll::coll
