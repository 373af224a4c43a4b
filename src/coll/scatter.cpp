#include "coll/exchange.hpp"

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

}  // namespace

void scatter(Context& ctx, const Layout& send, const Block& recv, int root, bool varying) {
  const auto me = ctx.rounds.rank();
  const auto root_rank = static_cast<std::uint32_t>(root);
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
