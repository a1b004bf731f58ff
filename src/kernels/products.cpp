#include "kernels/products.hpp"

#include <algorithm>
#include <iterator>

namespace trnsparse::kernels {

bool small_block_size(index_t b) { return std::ranges::find(kSmallBlockSizes, b) != std::end(kSmallBlockSizes); }

}  // namespace trnsparse::kernels
