#include "mpi/team_pool.hpp"

#include <algorithm>

namespace shmcoll::mpi {

std::vector<int> world_ranks_of(MPI_Comm comm) {
  MPI_Group group = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
  PMPI_Comm_group(comm, &group);
  PMPI_Comm_group(MPI_COMM_WORLD, &world);
  int size = 0;
  PMPI_Group_size(group, &size);
  std::vector<int> ranks(static_cast<std::size_t>(size)), world_ranks(ranks.size());
  for (int i = 0; i < size; ++i) ranks[i] = i;
  PMPI_Group_translate_ranks(group, size, ranks.data(), world, world_ranks.data());
  PMPI_Group_free(&group);
  PMPI_Group_free(&world);
  if (std::ranges::find(world_ranks, MPI_UNDEFINED) != world_ranks.end()) return {};
  return world_ranks;
}

void TeamPool::keep(std::vector<int> members, std::uint64_t id, std::shared_ptr<Team> team) {
  if (capacity_ == 0 || members.empty()) return;
  if (entries_.size() == capacity_) entries_.pop_front();
  entries_.push_back({std::move(members), id, std::move(team)});
}

std::uint64_t TeamPool::find(const std::vector<int>& members) const {
  if (members.empty()) return 0;
  const auto found = std::find_if(entries_.rbegin(), entries_.rend(),
                                  [&](const Entry& entry) { return entry.members == members; });
  return found == entries_.rend() ? 0 : found->id;
}

std::size_t TeamPool::bytes() const {
  std::size_t total = 0;
  for (const Entry& entry : entries_) total += entry.team->segment_bytes();
  return total;
}

std::shared_ptr<Team> TeamPool::take(std::uint64_t id) {
  const auto found =
      std::ranges::find_if(entries_, [id](const Entry& entry) { return entry.id == id; });
  if (found == entries_.end()) return nullptr;
  std::shared_ptr<Team> team = std::move(found->team);
  entries_.erase(found);
  return team;
}

long& TeamPool::warm_up_calls(const std::vector<int>& members) {
  if (warm_up_calls_.size() >= 256 && !warm_up_calls_.contains(members)) warm_up_calls_.clear();
  return warm_up_calls_[members];
}

}  // namespace shmcoll::mpi
