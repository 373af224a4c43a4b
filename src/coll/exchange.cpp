#include "coll/exchange.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>

#include "coll/chunks.hpp"
#include "coll/exchange_plan.hpp"
#include "coll/shared_inputs.hpp"
#include "coll/store.hpp"
#include "shm/process_memory.hpp"
#include "shm/shared_pages.hpp"
#include "util/fail.hpp"

namespace shmcoll::coll {

namespace {

using namespace exchange_plan;

// One call of the engine: the spec, the geometry, and this rank's choices.
class Exchange {
 public:
  // `in_place_allowed`: false for the second try of a call a rank could not finish from shared
  // pages or a sender's own memory.
  Exchange(Context& ctx, const ExchangeSpec& spec, const ExchangeShape& shape,
           bool in_place_allowed)
      : in_place_allowed_(in_place_allowed),
        ctx_(ctx),
        rounds_(ctx.rounds),
        spec_(spec),
        shape_(shape),
        me_(rounds_.rank()),
        size_(rounds_.size()),
        geometry_(Geometry::of(shape, size_, rounds_.slot_bytes())) {}

  // False when a rank could not reach a sender's shared pages or memory: every rank then learns
  // it in a closing round, and the call is to be made again through the slots.
  bool run() {
    choose_mode();
    const std::uint32_t first = rounds_.begin();
    post_first_round(first);
    spec_.copy_own();
    const std::uint32_t total = total_rounds(first);
    if (gatherv_shape() && me_ != shape_.root) take_offer(first);
    receive_first_round(first);
    rounds_.release(first);  // done with every heap I read from (senders may wait for it)
    for (std::uint32_t k = 1; k < total; ++k) next_round(k);
    if (mode_ == in_heap) {
      for (std::uint32_t peer = 0; peer < size_; ++peer) {
        if (peer != me_) rounds_.wait_released(peer, first);
      }
    }
    // Reads in place close with a round every rank takes alike, which also tells their senders
    // that every receiver is done with their memory. Every rank has read the header of every
    // sender that may be read in place: such a block is long, so it is read by all it goes to,
    // and where lengths are not known to all (v and w calls) every header is read to count
    // rounds.
    if (gatherv_shape()) {  // the root hears every sender; senders, the root
      if (!writes_planned_) return true;
      return what_any_rank_missed_writing(ctx_, rounds_.begin(), missed_, shape_.root) ==
             kMissedNothing;
    }
    const bool read_in_place = mode_ == in_pages || mode_ == in_process || sender_read_in_place_;
    if (!read_in_place) return true;
    return what_any_rank_missed(ctx_, rounds_.begin(), missed_) == kMissedNothing;
  }

 private:
  // A sender's header of the first round, noting whether it is read in place.
  LineHeader header_of(std::uint32_t sender, std::uint32_t first) {
    LineHeader theirs;
    std::memcpy(&theirs, rounds_.wait_message(sender, first), kHeaderBytes);
    sender_read_in_place_ |= theirs.mode == in_pages || theirs.mode == in_process;
    return theirs;
  }

  // The ranks that may send to me: all; only the root of a one-sender exchange; none off the
  // root of a one-receiver exchange (which spares each rank of a scatter or gather a look at
  // every rank, every call).
  std::uint32_t first_source() const { return shape_.one_sender ? shape_.root : 0; }
  std::uint32_t end_of_sources() const {
    if (shape_.one_receiver && me_ != shape_.root) return 0;
    return shape_.one_sender ? shape_.root + 1 : size_;
  }

  template <typename Fn>
  void for_each_outgoing(Fn&& fn) const {
    if (shape_.one_sender && me_ != shape_.root) return;
    if (!shape_.personalized) return fn(spec_.outgoing(ExchangeSpec::kEveryone), 0u);
    for (std::uint32_t dest = 0; dest < size_; ++dest) {
      if (dest != me_) fn(spec_.outgoing(dest), geometry_.region(me_, dest));
    }
  }

  // In the line when everything fits; from my heap when every block is there, contiguous and
  // long enough; else through my slots. Also the rounds I know the call needs: my sends', and
  // those of what I receive (every sender decides the same way).
  void choose_mode() {
    std::size_t longest = 0;
    bool all_contiguous = true;
    bool all_in_heap = shape_.direct_allowed;
    const shm::Segment& segment = rounds_.segment();
    for_each_outgoing([&](const Block& block, std::uint32_t) {
      longest = std::max(longest, block.bytes());
      if (block.bytes() == 0) return;
      const std::byte* data = block.base + block.type->lb();
      all_contiguous = all_contiguous && block.type->is_contiguous();
      all_in_heap = all_in_heap && all_contiguous && data >= segment.heap(me_) &&
                    data + block.bytes() <= segment.heap(me_) + segment.layout().heap_bytes;
    });
    // Where every rank knows the lengths, the lines are planned from the call's longest block,
    // the same plan on every rank (total_rounds counts the call's rounds from it).
    const bool everyone_knows = shape_.lengths_known_by == ExchangeShape::Knowledge::everyone;
    lines_ = plan_lines(shape_, geometry_, everyone_knows ? shape_.longest : longest);
    if (geometry_.line_holds(longest)) {
      mode_ = in_line;
    } else if (lines_ && longest <= lines_->stride) {
      mode_ = in_lines;
    } else if (all_in_heap && longest >= ctx_.tunables.direct_min) {
      mode_ = in_heap;
    } else if (me_ != shape_.root && written_into_root(longest)) {
      mode_ = into_root;
    } else if (shares_pages(longest)) {
      mode_ = in_pages;
    } else {
      mode_ = all_contiguous && read_from_my_memory(longest) ? in_process : in_slots;
    }
    my_rounds_ = mode_ == in_slots   ? rounds_needed(longest, false, geometry_.slot_region)
                 : mode_ == in_lines ? lines_->rounds
                                     : 1;
    known_rounds_ = my_rounds_;
    for (std::uint32_t source = first_source(); source < end_of_sources(); ++source) {
      const std::size_t bytes = source == me_ ? 0 : spec_.incoming(source).bytes();
      if (written_into_root(bytes)) continue;  // one round
      known_rounds_ = std::max(
          known_rounds_, rounds_needed(bytes, geometry_.line_holds(bytes), geometry_.slot_region));
    }
  }

  // Whether a sender's block of `bytes` goes straight into the root's receive buffer, written
  // with the kernel's cross-memory copy (a gatherv: only the root knows where each block goes;
  // the regular gather has its own way, gather.cpp): sender and root decide alike, each from
  // the block's length. The root posts a note on its buffer and each block's place in its first
  // round; every sender copies its own block, all at once, where through the slots the root
  // copies every block itself, round after round (osu_gatherv of 4 MiB, 8 ranks on 2 cores:
  // 3.7-4.3 ms, where the gather's senders write in 1.0-1.2). Where ranks share CPUs, only
  // blocks that take more than one round through the slots (kernel_write_pays). A root whose
  // blocks have gaps declines, and the call goes again through the slots.
  bool written_into_root(std::size_t bytes) const {
    return gatherv_shape() && in_place_allowed_ && shape_.direct_allowed &&
           kernel_write_pays(ctx_, bytes, geometry_.slot_region);
  }
  bool gatherv_shape() const {
    return shape_.one_receiver && shape_.lengths_known_by == ExchangeShape::Knowledge::root;
  }

  // The root's side of written_into_root, in its first round: appends its RootOffer to its line
  // at `at` and puts each sender's place into its slot. Returns where the line ends.
  std::size_t offer_receive_buffer(std::uint32_t round, std::byte* line, std::size_t at) {
    const std::byte* begin = nullptr;
    const std::byte* end = nullptr;
    bool contiguous = true;
    for (std::uint32_t source = 0; source < size_; ++source) {
      const Block in = source == me_ ? Block{} : spec_.incoming(source);
      if (!written_into_root(in.bytes())) continue;
      const std::byte* data = in.base + in.type->lb();
      contiguous = contiguous && in.type->is_contiguous();
      begin = begin ? std::min(begin, data) : data;
      end = std::max(end, data + in.bytes());
    }
    shm::ProcessNote note{};
    if (begin && contiguous && BlockPlace::table_bytes(size_) <= rounds_.slot_bytes()) {
      note = shm::process_note(begin, std::size_t(end - begin));
      rounds_.wait_slot_free(round);
      for (std::uint32_t source = 0; source < size_; ++source) {
        const Block in = source == me_ ? Block{} : spec_.incoming(source);
        const bool written = written_into_root(in.bytes());
        const BlockPlace place{written ? std::uint64_t(in.base + in.type->lb() - begin) : 0,
                               written ? in.bytes() : 0};
        place.put(rounds_.slot(me_, round), source);
      }
    }
    accepts_writes_ = note.bytes > 0;
    writes_planned_ = begin != nullptr;
    const RootOffer offer{note, writes_planned_};
    std::memcpy(line + at, &offer, sizeof offer);
    return at + sizeof offer;
  }

  // A gatherv sender's side: whether the call closes with a round, and, in into_root, my block
  // into the root's buffer where its offer and table say. (A root that planned nothing did not
  // plan mine: it fails the call, seeing I sent more than it expects.)
  void take_offer(std::uint32_t round) {
    RootOffer offer;
    std::memcpy(&offer, rounds_.wait_message(shape_.root, round) + kHeaderBytes, sizeof offer);
    writes_planned_ = offer.planned != 0;
    if (mode_ != into_root || !writes_planned_) return;
    const shm::ProcessNote& note = offer.note;
    if (note.bytes == 0) {
      missed_ |= kMissedDeclined;
      return;
    }
    const BlockPlace place = BlockPlace::in(rounds_.slot(shape_.root, round), me_);
    const Block block = spec_.outgoing(ExchangeSpec::kEveryone);
    const std::size_t bytes = std::min<std::size_t>(block.bytes(), place.bytes);
    if (bytes > 0 && !write_into_rank_memory(ctx_, shape_.root, note, place.at, block, 0, bytes)) {
      missed_ |= kMissedProcess;  // the call goes again, through the slots
    }
  }

  // Whether my blocks are long enough, contiguous and in an ordinary buffer whose pages are (now)
  // shared: then pages_ holds them.
  bool shares_pages(std::size_t longest) {
    const std::uint64_t least = ctx_.tunables.share_pages_min;
    // Not where one rank receives everything (gather): it copies every block either way, out of
    // slots its senders fill at the same time, or out of their buffers, which measured no faster
    // (2 ranks, 256 KiB-4 MiB). A regular gather's senders write into the root's buffer instead
    // (gather.cpp).
    if (!in_place_allowed_ || !shape_.direct_allowed || shape_.one_receiver || least == 0 ||
        longest < least || geometry_.slot_region < kPagesRegionMin) {
      return false;
    }
    const std::byte* begin = nullptr;
    const std::byte* end = nullptr;
    bool contiguous = true;
    // Whether each block starts where the one before it ends: only then are the span's pages
    // all send buffer, which the program does not write during the call. Memory between blocks
    // (alltoallv/w and scatterv with gaps) is the program's to write meanwhile, and a write
    // between a move's copy and its remap would be lost: such a span is never moved (its pages
    // may still be read where they are shared already).
    bool adjacent = true;
    const std::byte* last_end = nullptr;
    for_each_outgoing([&](const Block& block, std::uint32_t) {
      if (block.bytes() == 0) return;
      contiguous = contiguous && block.type->is_contiguous();
      const std::byte* data = block.base + block.type->lb();
      adjacent = adjacent && (!last_end || data == last_end);
      last_end = data + block.bytes();
      begin = begin ? std::min(begin, data) : data;
      end = std::max(end, data + block.bytes());
    });
    if (!contiguous || !begin) return false;
    pages_ = shm::shared_pages_for(begin, std::size_t(end - begin),
                                   ctx_.tunables.move_pages && adjacent);
    return pages_.has_value();
  }

  // Whether receivers copy my blocks straight out of my memory with the kernel's cross-memory
  // copy (where every block is contiguous, which choose_mode knows): the longest at least
  // SHMCOLL_CMA_MIN. One copy instead of
  // a copy into my slot and one out of it (2 ranks, alltoall of 256 KiB-4 MiB written by the
  // program: 1.35-1.65x faster), at the price of the kernel pinning my pages
  // for the copy. Not where one rank receives everything (gather), which would read every
  // sender's memory itself, one after the other, where senders fill their slots at once (its
  // senders write into the root's memory instead: gather.cpp). Nor
  // where a block goes to every rank (allgather) of more than 2: a read costs 1.5-2 copies here
  // (shmcoll-bench-cma), so n - 1 reads of a block cost more than its copy into my slot and the
  // n - 1 copies out of it from 3 ranks up (4 ranks on 2 cores, 256 KiB and 1 MiB: 0.87-1.56x
  // the slots' time, slower in 3 of 4 runs).
  // Whatever SHMCOLL_CMA_MIN says, a scatter's root whose blocks take more than one round
  // through the slots, where ranks share CPUs: there it copies every block into its slot itself,
  // round after round, each round waiting for the readers to be scheduled, where each reader
  // can instead copy its own block at once (osu_scatter, 8 ranks on 2 cores, us with the slots /
  // with the kernel's copy: 1 MiB 676-889 / 221-289, 4 MiB 3407-3758 / 1683-2594; 4 ranks,
  // 1 MiB 153-156 / 130-132; one round, 4 ranks, 256 KiB: 23 / 42-43).
  bool read_from_my_memory(std::size_t longest) const {
    if (!in_place_allowed_ || !shape_.direct_allowed || shape_.one_receiver) return false;
    if (shape_.one_sender && ctx_.tree_shape.ranks_share_cpus && !ctx_.cma_refused &&
        longest > geometry_.slot_region) {
      return true;
    }
    return (shape_.personalized || size_ <= 2) && kernel_copy_applies(ctx_, longest);
  }

  // in_process: block `in` from `source`, whose note is at `region`, read out of its memory (a
  // receive layout with gaps through a staging buffer on the stack).
  void receive_from_process(std::uint32_t source, const Block& in, const std::byte* region) {
    shm::ProcessNote note;
    std::memcpy(&note, region, sizeof note);
    if (note.bytes < in.bytes()) fail_sent(source, note.bytes, in);
    if (!read_from_rank_memory(ctx_, source, note, in, in.bytes()))
      missed_ |= kMissedProcess;  // the block comes again, through the slots
  }

  // in_pages: the note for `block` and the bytes of it outside the shared pages, into `region`.
  void post_pages_note(const Block& block, std::byte* region) const {
    const std::byte* data = block.base + block.type->lb();
    const BufferNote note = note_on(*pages_, data, block.bytes(), 1);
    std::memcpy(region, &note, sizeof note);
    copy_outside(note, data, region + sizeof note);
  }

  // in_pages: the block `in` from `source`, whose note is at `region`.
  void receive_from_pages(std::uint32_t source, const Block& in, const std::byte* region) {
    BufferNote note;
    std::memcpy(&note, region, sizeof note);
    if (note.bytes < in.bytes() || !note_is_sound(note) || note.outside() > 2 * shm::kPageBytes) {
      fail_sent(source, note.bytes, in);
    }
    const bool shared = note.tail_from > note.head;
    const std::byte* pages = shared ? map_shared_buffer(ctx_, source, note) : nullptr;
    if (shared && !pages) {
      missed_ |= kMissedPages;  // the block comes again, through the slots
      return;
    }
    unpack_shared(in, note, pages, region + sizeof note);
  }

  // `block` at `at` in `line` and, where lengths travel, its length in the byte at `length_at`;
  // returns where what it wrote ends (0: nothing written).
  std::size_t put_in_line(const Block& block, std::byte* line, std::size_t at,
                          std::size_t length_at) const {
    std::size_t end = 0;
    if (geometry_.lengths_travel) {
      line[length_at] = static_cast<std::byte>(block.bytes());  // a line block: below 256
      end = length_at + 1;
    }
    if (block.bytes() == 0) return end;
    block.type->pack_range(block.base, block.count, 0, block.bytes(), line + at);
    return std::max(end, at + block.bytes());
  }

  // into_root: the length `source` posted after its header.
  std::uint64_t their_length(std::uint32_t source, std::uint32_t round) {
    std::uint64_t sent;
    std::memcpy(&sent, rounds_.wait_message(source, round) + kHeaderBytes, sizeof sent);
    return sent;
  }
  // A block of another length than I expect (longer: MPI's truncation error; a block written
  // into my buffer that I did not plan to take is longer, as the choice grows with the length).
  [[noreturn]] void fail_sent(std::uint32_t source, std::uint64_t sent, const Block& in) const {
    fail_mismatched_counts(me_, source, sent, in.bytes());
  }

  // Where lengths travel: fails when `source` sent other than `in` expects (a collective's
  // sender and receiver name the same amount), whichever way the block came.
  void check_sent(std::uint32_t source, std::uint64_t sent, const Block& in) const {
    if (!geometry_.lengths_travel) return;
    if (sent != in.bytes()) fail_sent(source, sent, in);
  }

  // The block `in` from `source`, `at` in a line whose byte at `length_at` is its length.
  void receive_from_line(std::uint32_t source, const std::byte* line, std::size_t length_at,
                         std::size_t at, const Block& in, std::size_t most) const {
    check_sent(source, std::uint64_t(line[length_at]), in);
    in.type->unpack_range(line + at, in.count, 0, most, in.base);
  }

  // My blocks (or their first pieces, or their heap offsets) and my round count, at once.
  void post_first_round(std::uint32_t round) {
    alignas(8) std::byte line[shm::kMessageBytes];
    const LineHeader header{known_rounds_, mode_,
                            mode_ == in_lines ? lines_->stride : std::uint16_t{0}};
    std::memcpy(line, &header, kHeaderBytes);
    if (mode_ == in_lines) return post_line(round, 0, line);
    std::size_t line_bytes = kHeaderBytes;
    if (mode_ == into_root) {  // my length, which the root checks
      const std::uint64_t sent = spec_.outgoing(ExchangeSpec::kEveryone).bytes();
      std::memcpy(line + kHeaderBytes, &sent, sizeof sent);
      return rounds_.publish_message(round, line, kHeaderBytes + sizeof sent);
    }
    if (gatherv_shape() && me_ == shape_.root) {
      line_bytes = offer_receive_buffer(round, line, line_bytes);
    }
    if (mode_ != in_line) rounds_.wait_slot_free(round);
    std::byte* slot = rounds_.slot(me_, round);
    for_each_outgoing([&](const Block& block, std::uint32_t region) {
      if (mode_ == in_line) {
        const std::size_t at = kHeaderBytes + region * geometry_.line_region;
        line_bytes =
            std::max(line_bytes, put_in_line(block, line, at, geometry_.line_length_at(region)));
        return;
      }
      if (geometry_.lengths_travel) {
        const std::uint64_t bytes = block.bytes();
        std::memcpy(slot + geometry_.slot_length_at(region), &bytes, sizeof bytes);
      }
      if (block.bytes() == 0) return;
      if (mode_ == in_heap) {
        const std::uint64_t offset =
            std::uint64_t(block.base + block.type->lb() - rounds_.segment().heap(me_));
        std::memcpy(slot + region * geometry_.slot_region, &offset, sizeof offset);
      } else if (mode_ == in_pages) {
        post_pages_note(block, slot + region * geometry_.slot_region);
      } else if (mode_ == in_process) {
        const shm::ProcessNote note =
            shm::process_note(block.base + block.type->lb(), block.bytes());
        std::memcpy(slot + region * geometry_.slot_region, &note, sizeof note);
      } else {
        pack_into_slot(block, 0, geometry_.slot_region, slot + region * geometry_.slot_region,
                       streams_between_cores(ctx_, block.bytes()));
      }
    });
    rounds_.publish_message(round, line, line_bytes);
  }

  // in_lines: the blocks whose place is line `index` of this call, into `line` after the header.
  void post_line(std::uint32_t round, std::uint32_t index, std::byte* line) {
    std::size_t line_bytes = kHeaderBytes;
    for_each_outgoing([&](const Block& block, std::uint32_t region) {
      if (region / lines_->per_line != index) return;
      const std::size_t at = kHeaderBytes + region % lines_->per_line * lines_->stride;
      const std::size_t length_at =
          geometry_.line_lengths_at(lines_->per_line, lines_->stride) + region % lines_->per_line;
      line_bytes = std::max(line_bytes, put_in_line(block, line, at, length_at));
    });
    rounds_.publish_message(round, line, line_bytes);
  }

  std::uint32_t total_rounds(std::uint32_t round) {
    using Knowledge = ExchangeShape::Knowledge;
    auto rounds_known_by = [&](std::uint32_t peer) { return header_of(peer, round).rounds; };
    switch (shape_.lengths_known_by) {
      case Knowledge::everyone:
        if (lines_) return lines_->rounds;
        return rounds_needed(shape_.longest, geometry_.line_holds(shape_.longest),
                             geometry_.slot_region);
      case Knowledge::root:
        return me_ == shape_.root ? known_rounds_ : rounds_known_by(shape_.root);
      case Knowledge::nobody:
        break;
    }
    std::uint32_t total = known_rounds_;
    for (std::uint32_t peer = 0; peer < size_; ++peer) {
      if (peer != me_) total = std::max(total, rounds_known_by(peer));
    }
    return total;
  }

  void receive_first_round(std::uint32_t round) {
    const shm::Segment& segment = rounds_.segment();
    const bool senders_may_write = written_into_root(std::numeric_limits<std::size_t>::max());
    for (std::uint32_t source = first_source(); source < end_of_sources(); ++source) {
      ctx_.direct_from[source] = 0;
      ctx_.line_arrival[source] = 0;
      const Block in = source == me_ ? Block{} : spec_.incoming(source);
      if (in.bytes() == 0) {
        // A sender that writes into my buffer where I expect nothing sent more than I expect.
        if (source != me_ && senders_may_write && header_of(source, round).mode == into_root) {
          fail_sent(source, their_length(source, round), in);
        }
        continue;
      }
      const std::byte* their_line = rounds_.wait_message(source, round);
      const LineHeader theirs = header_of(source, round);
      const std::uint32_t region = geometry_.region(source, me_);
      const std::byte* in_slot = rounds_.slot(source, round) + region * geometry_.slot_region;
      if (theirs.mode == in_line) {
        receive_from_line(source, their_line, geometry_.line_length_at(region),
                          kHeaderBytes + region * geometry_.line_region, in, geometry_.line_region);
        continue;
      }
      if (theirs.mode == into_root) {  // written by its sender (or declined: missed_ says so)
        check_sent(source, their_length(source, round), in);
        if (!accepts_writes_) missed_ |= kMissedDeclined;
        ctx_.direct_from[source] = 1;
        continue;
      }
      if (theirs.mode == in_lines) {
        const std::size_t per_line = geometry_.blocks_per_line(theirs.stride);
        const auto index = std::uint32_t(region / per_line);
        const std::size_t at = kHeaderBytes + region % per_line * theirs.stride;
        const std::size_t length_at =
            geometry_.line_lengths_at(per_line, theirs.stride) + region % per_line;
        if (index == 0) receive_from_line(source, their_line, length_at, at, in, in.bytes());
        ctx_.line_arrival[source] = in_lines_at(index, length_at, at);
        continue;
      }
      if (geometry_.lengths_travel) {
        std::uint64_t sent;
        std::memcpy(&sent, rounds_.slot(source, round) + geometry_.slot_length_at(region),
                    sizeof sent);
        check_sent(source, sent, in);
      }
      if (theirs.mode == in_heap) {
        std::uint64_t offset;
        std::memcpy(&offset, in_slot, sizeof offset);
        const std::uint64_t heap_bytes = segment.layout().heap_bytes;
        const std::uint64_t in_heap_after = offset > heap_bytes ? 0 : heap_bytes - offset;
        if (in.bytes() > in_heap_after) fail_sent(source, in_heap_after, in);
        in.type->unpack_range(segment.heap(source) + offset, in.count, 0, in.bytes(), in.base);
        ctx_.direct_from[source] = 1;
      } else if (theirs.mode == in_pages) {
        receive_from_pages(source, in, in_slot);
        ctx_.direct_from[source] = 1;
      } else if (theirs.mode == in_process) {
        receive_from_process(source, in, in_slot);
        ctx_.direct_from[source] = 1;
      } else {
        in.type->unpack_range(in_slot, in.count, 0, geometry_.slot_region, in.base);
      }
    }
  }

  // Round k + 1: the next slot-region-sized piece of every block still longer than that.
  void next_round(std::uint32_t k) {
    const std::size_t offset = k * geometry_.slot_region;
    const std::uint32_t round = rounds_.begin();
    if (mode_ == in_lines && k < my_rounds_) {
      alignas(8) std::byte line[shm::kMessageBytes] = {};
      post_line(round, k, line);
    } else if (k < my_rounds_) {
      rounds_.wait_slot_free(round);
      std::byte* slot = rounds_.slot(me_, round);
      for_each_outgoing([&](const Block& block, std::uint32_t region) {
        if (block.bytes() <= offset) return;
        pack_into_slot(block, offset, geometry_.slot_region, slot + region * geometry_.slot_region,
                       streams_between_cores(ctx_, block.bytes()));
      });
    }
    if (mode_ != in_lines || k >= my_rounds_) rounds_.publish(round);
    for (std::uint32_t source = first_source(); source < end_of_sources(); ++source) {
      const Block in = source == me_ ? Block{} : spec_.incoming(source);
      if (const std::uint32_t arrival = ctx_.line_arrival[source]; arrival & kInLines) {
        if ((arrival & ~kInLines) >> 16 == k) {
          receive_from_line(source, rounds_.wait_message(source, round), arrival >> 8 & 0xff,
                            arrival & 0xff, in, in.bytes());
        }
        continue;
      }
      if (in.bytes() <= offset || ctx_.direct_from[source]) continue;
      rounds_.wait_for(source, round);
      in.type->unpack_range(
          rounds_.slot(source, round) + geometry_.region(source, me_) * geometry_.slot_region,
          in.count, offset, geometry_.slot_region, in.base);
    }
  }

  const bool in_place_allowed_;
  unsigned missed_ = kMissedNothing;   // what I could not read in place (Missed bits)
  bool sender_read_in_place_ = false;  // a sender whose header I read is read in place
  bool accepts_writes_ = false;        // a root that offered its buffer (offer_receive_buffer)
  bool writes_planned_ = false;        // a gatherv's root planned blocks written into it
  Context& ctx_;
  shm::Rounds& rounds_;
  const ExchangeSpec& spec_;
  const ExchangeShape& shape_;
  const std::uint32_t me_;
  const std::uint32_t size_;
  const Geometry geometry_;
  Mode mode_ = in_slots;
  std::optional<LinePlan> lines_;          // the call's line plan, where it has one (choose_mode)
  std::optional<shm::SharedPages> pages_;  // in_pages: my shared pages
  std::uint32_t my_rounds_ = 1;
  std::uint32_t known_rounds_ = 1;
};

}  // namespace

void copy_block(const Block& from, const Block& to) {
  const std::size_t bytes = std::min(from.bytes(), to.bytes());
  if (bytes == 0) return;
  if (from.type->is_contiguous()) {
    to.type->unpack_range(from.base + from.type->lb(), to.count, 0, bytes, to.base);
    return;
  }
  if (to.type->is_contiguous()) {
    from.type->pack_range(from.base, from.count, 0, bytes, to.base + to.type->lb());
    return;
  }
  unpack_through_stack(to, bytes, [&](std::size_t offset, std::size_t n, std::byte* staging) {
    from.type->pack_range(from.base, from.count, offset, n, staging);
    return true;
  });
}

void fail_mismatched_counts(std::uint32_t me, std::uint32_t source, std::uint64_t sent,
                            std::size_t expected) {
  fail(Errc::invalid_argument, "rank ", me, ": rank ", source, " sent a block of ", sent,
       " bytes, ", sent < expected ? "shorter" : "longer", " than the ", expected,
       " bytes this rank expects (mismatched counts)");
}

void exchange(Context& ctx, const ExchangeSpec& spec, const ExchangeShape& shape) {
  const bool nothing_moves =
      shape.lengths_known_by == ExchangeShape::Knowledge::everyone && shape.longest == 0;
  if (ctx.rounds.size() == 1 || nothing_moves) return spec.copy_own();
  if (!Exchange(ctx, spec, shape, true).run()) Exchange(ctx, spec, shape, false).run();
}

}  // namespace shmcoll::coll
