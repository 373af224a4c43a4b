// A distributed matrix transpose: an N x N matrix of doubles is split into row bands, one per
// rank. Cut into p x p tiles, tile (i, j) must go to rank j as tile (j, i) of the transpose: one
// alltoall moves every tile, and each rank transposes the tiles it received in place.
#include <stdexcept>
#include <vector>

#include "example_main.hpp"

int main(int argc, char** argv) {
  return example::main(argc, argv, "Transpose a row-distributed matrix with one alltoall.",
                       [](shmcoll::Team& team) {
    const int p = team.size();
    const int band = 256;  // rows per rank, so N = 256 p
    const int n = band * p;
    const auto element = [n](int row, int column) { return double(row) * n + column; };

    // My rows, packed tile by tile: the tile for rank j holds my rows' columns of band j.
    std::vector<double> send(static_cast<std::size_t>(band) * n), recv(send.size());
    for (int j = 0; j < p; ++j) {
      for (int r = 0; r < band; ++r) {
        for (int c = 0; c < band; ++c) {
          send[(static_cast<std::size_t>(j) * band + r) * band + c] =
              element(team.rank() * band + r, j * band + c);
        }
      }
    }
    const shmcoll::Datatype tile_element{shmcoll::Dtype::f64};
    team.alltoall(send.data(), band * band, tile_element, recv.data(), band * band, tile_element);

    // Tile i came from rank i: rows i*band.., my columns. Transposed, it is my rows' band i.
    std::vector<double> rows(static_cast<std::size_t>(band) * n);  // my rows of the transpose
    for (int i = 0; i < p; ++i) {
      for (int r = 0; r < band; ++r) {
        for (int c = 0; c < band; ++c) {
          rows[static_cast<std::size_t>(c) * n + i * band + r] =
              recv[(static_cast<std::size_t>(i) * band + r) * band + c];
        }
      }
    }
    for (int r = 0; r < band; ++r) {
      for (int c = 0; c < n; ++c) {
        if (rows[static_cast<std::size_t>(r) * n + c] != element(c, team.rank() * band + r)) {
          throw std::runtime_error("the transpose is wrong");
        }
      }
    }
    if (team.rank() == 0) std::printf("transposed a %d x %d matrix on %d ranks\n", n, n, p);
  });
}
