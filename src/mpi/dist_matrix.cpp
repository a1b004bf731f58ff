// DistMatrix: the split of a process's block rows into its diagonal and off-process
// parts, the halo exchange plan (built once), and the overlapped product.
//
// Product Y = α A X + β Y on process p:
//   1. post a receive per source process into the ghost panel G (ghosts are ascending
//      global block columns, so each source's rows are one contiguous range of G);
//   2. pack the rows other processes need into one send panel and post the sends;
//   3. Y = α A_diag X + β Y (local work, overlapping the messages);
//   4. wait, then Z = α A_off G over only the rows with off-process blocks, Y[rows] += Z.
// The order of every sum is fixed, so the result is the same in every run.
#include "trnsparse/mpi.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "mpi/collective.hpp"
#include "trnsparse/convert.hpp"
#include "trnsparse/error.hpp"
#include "trnsparse/io.hpp"
#include "trnsparse/ops.hpp"

namespace trnsparse::mpi {

using detail::agree;
using detail::concat;
using detail::count;
using detail::datatype;

// ---- the two local formats behind one interface ------------------------------------
namespace {

template <class Local> struct Format;

template <Value T>
struct Format<CsrMatrix<T>> {
  static index_t block_size(const CsrMatrix<T>&) noexcept { return 1; }
  static std::span<const index_t> ptr(const CsrMatrix<T>& A) noexcept { return A.row_ptr(); }
  static std::span<const index_t> idx(const CsrMatrix<T>& A) noexcept { return A.col_indices(); }
  static std::span<const T> values(const CsrMatrix<T>& A) noexcept { return A.values(); }
  static CsrMatrix<T> make(index_t rows, index_t cols, index_t, std::vector<index_t> ptr, std::vector<index_t> idx,
                           std::vector<T> values) {
    return CsrMatrix<T>(rows, cols, std::move(ptr), std::move(idx), std::move(values));
  }
};

template <Value T>
struct Format<BsrMatrix<T>> {
  static index_t block_size(const BsrMatrix<T>& A) noexcept { return A.block_size(); }
  static std::span<const index_t> ptr(const BsrMatrix<T>& A) noexcept { return A.structure().block_row_ptr(); }
  static std::span<const index_t> idx(const BsrMatrix<T>& A) noexcept { return A.structure().block_col_indices(); }
  static std::span<const T> values(const BsrMatrix<T>& A) noexcept { return A.blocks(); }
  static BsrMatrix<T> make(index_t rows, index_t cols, index_t b, std::vector<index_t> ptr, std::vector<index_t> idx,
                           std::vector<T> values) {
    return BsrMatrix<T>(rows, cols, b, std::move(ptr), std::move(idx), std::move(values));
  }
};

/// Block rows [first, last) of A as a (row count) x A.cols() matrix of the same format.
template <class Local>
Local block_rows(const Local& A, index_t first, index_t last) {
  using F = Format<Local>;
  const index_t b = F::block_size(A), bb = b * b;
  const auto ptr = F::ptr(A);
  const auto idx = F::idx(A);
  const auto vals = F::values(A);
  std::vector<index_t> p(static_cast<std::size_t>(last - first + 1));
  for (index_t i = first; i <= last; ++i) p[i - first] = ptr[i] - ptr[first];
  const index_t rows = std::min(A.rows(), last * b) - std::min(A.rows(), first * b);
  return F::make(rows, A.cols(), b, std::move(p), {idx.begin() + ptr[first], idx.begin() + ptr[last]},
                 {vals.begin() + ptr[first] * bb, vals.begin() + ptr[last] * bb});
}

/// Block rows of a matrix sharded by `from` (this process holds `mine`, its block rows
/// with global columns) moved to their owners under `to`. Both partitions are known on
/// every process, so only the stored-block counts travel ahead of the data.
template <class Local>
Local move_block_rows(MPI_Comm comm, const Local& mine, const Partition& from, const Partition& to, index_t rows) {
  using F = Format<Local>;
  using T = std::remove_cvref_t<decltype(F::values(mine)[0])>;
  const int rank = detail::rank_of(comm), size = detail::size_of(comm);
  const index_t b = F::block_size(mine), bb = b * b, f0 = from.first(rank), f1 = to.first(rank), l1 = to.first(rank + 1);
  const auto ptr = F::ptr(mine);
  std::vector<index_t> per_row(static_cast<std::size_t>(from.count(rank)));
  for (std::size_t i = 0; i < per_row.size(); ++i) per_row[i] = ptr[i + 1] - ptr[i];
  // Block rows [lo, hi) go from process p to process q: the overlap of their ranges.
  const auto overlap = [&](int p, int q) {
    return std::make_pair(std::max(from.first(p), to.first(q)), std::min(from.first(p + 1), to.first(q + 1)));
  };
  std::vector<int> send_rows(static_cast<std::size_t>(size)), send_rows_at(send_rows.size()), recv_rows(send_rows.size()),
      recv_rows_at(send_rows.size()), send_blocks(send_rows.size()), send_blocks_at(send_rows.size()),
      recv_blocks(send_rows.size()), recv_blocks_at(send_rows.size()), send_vals(send_rows.size()),
      send_vals_at(send_rows.size()), recv_vals(send_rows.size()), recv_vals_at(send_rows.size());
  agree(comm, [&] {  // counts as MPI ints, checked on every process before data moves
    for (int q = 0; q < size; ++q) {
      const auto [lo, hi] = overlap(rank, q);
      if (lo < hi) {
        send_rows[q] = count(hi - lo, "DistMatrix: block rows moved");
        send_rows_at[q] = count(lo - f0, "DistMatrix: block rows moved");
        send_blocks[q] = count(ptr[hi - f0] - ptr[lo - f0], "DistMatrix: stored blocks moved");
        send_blocks_at[q] = count(ptr[lo - f0], "DistMatrix: stored blocks moved");
        send_vals[q] = count((ptr[hi - f0] - ptr[lo - f0]) * bb, "DistMatrix: values moved");
        send_vals_at[q] = count(ptr[lo - f0] * bb, "DistMatrix: values moved");
      }
      const auto [rlo, rhi] = overlap(q, rank);
      if (rlo < rhi) {
        recv_rows[q] = count(rhi - rlo, "DistMatrix: block rows moved");
        recv_rows_at[q] = count(rlo - f1, "DistMatrix: block rows moved");
      }
    }
  });
  MPI_Alltoall(send_blocks.data(), 1, MPI_INT, recv_blocks.data(), 1, MPI_INT, comm);
  index_t n_blocks = 0;
  agree(comm, [&] {
    for (int q = 0; q < size; ++q) {
      recv_blocks_at[q] = count(n_blocks, "DistMatrix: stored blocks moved");
      recv_vals[q] = count(static_cast<index_t>(recv_blocks[q]) * bb, "DistMatrix: values moved");
      recv_vals_at[q] = count(n_blocks * bb, "DistMatrix: values moved");
      n_blocks += recv_blocks[q];
    }
  });
  const index_t n_rows = l1 - f1;
  std::vector<index_t> new_per_row(static_cast<std::size_t>(n_rows)), idx(static_cast<std::size_t>(n_blocks));
  std::vector<T> vals(static_cast<std::size_t>(n_blocks * bb));
  MPI_Alltoallv(per_row.data(), send_rows.data(), send_rows_at.data(), MPI_INT64_T, new_per_row.data(), recv_rows.data(),
                recv_rows_at.data(), MPI_INT64_T, comm);
  MPI_Alltoallv(F::idx(mine).data(), send_blocks.data(), send_blocks_at.data(), MPI_INT64_T, idx.data(),
                recv_blocks.data(), recv_blocks_at.data(), MPI_INT64_T, comm);
  MPI_Alltoallv(F::values(mine).data(), send_vals.data(), send_vals_at.data(), datatype<T>(), vals.data(),
                recv_vals.data(), recv_vals_at.data(), datatype<T>(), comm);
  std::vector<index_t> new_ptr(static_cast<std::size_t>(n_rows) + 1, 0);
  for (index_t i = 0; i < n_rows; ++i) new_ptr[i + 1] = new_ptr[i] + new_per_row[i];
  const index_t local = std::min(rows, l1 * b) - std::min(rows, f1 * b);
  return F::make(local, rows, b, std::move(new_ptr), std::move(idx), std::move(vals));
}

}  // namespace

// ---- Partition -----------------------------------------------------------------------

Partition::Partition(std::vector<index_t> bounds) : bounds_(std::move(bounds)) {
  if (bounds_.size() < 2) throw InvalidArgument("Partition: bounds has fewer than 2 entries, expected parts + 1 >= 2");
  if (bounds_[0] != 0) throw InvalidArgument(concat("Partition: bounds[0] = ", bounds_[0], ", expected 0"));
  for (std::size_t p = 1; p < bounds_.size(); ++p)
    if (bounds_[p] < bounds_[p - 1])
      throw InvalidArgument(concat("Partition: bounds[", p, "] = ", bounds_[p], " < bounds[", p - 1, "] = ",
                                   bounds_[p - 1], ", expected non-decreasing"));
}

Partition Partition::balanced(std::span<const index_t> block_row_ptr, int parts) {
  if (parts < 1) throw InvalidArgument(concat("Partition::balanced: parts = ", parts, ", expected >= 1"));
  if (block_row_ptr.empty()) throw InvalidArgument("Partition::balanced: block_row_ptr is empty, expected block rows + 1 entries");
  const index_t n = static_cast<index_t>(block_row_ptr.size()) - 1, total = block_row_ptr.back();
  std::vector<index_t> bounds(static_cast<std::size_t>(parts) + 1, n);
  bounds[0] = 0;
  for (int p = 1; p < parts; ++p) {
    if (total == 0) {
      bounds[p] = n * p / parts;
      continue;
    }
    // The block-row boundary whose prefix count is nearest p/parts of the total.
    const double target = static_cast<double>(total) * p / parts;
    auto it = std::lower_bound(block_row_ptr.begin(), block_row_ptr.end(), static_cast<index_t>(std::ceil(target)));
    index_t cut = it - block_row_ptr.begin();
    if (cut > 0 && target - static_cast<double>(block_row_ptr[cut - 1]) < static_cast<double>(block_row_ptr[std::min(cut, n)]) - target)
      --cut;
    bounds[p] = std::clamp(cut, bounds[p - 1], n);
  }
  return Partition(std::move(bounds));
}

int Partition::owner(index_t block_row) const noexcept {
  // The last p with first(p) <= block_row < first(p + 1) (empty ranges are skipped).
  const auto it = std::upper_bound(bounds_.begin(), bounds_.end(), block_row);
  return static_cast<int>(it - bounds_.begin()) - 1;
}

// ---- DistMatrix ------------------------------------------------------------------------

/// A duplicate of the user's communicator (our messages never mix with theirs), freed
/// with the last matrix that shares it.
template <class Local>
struct DistMatrix<Local>::Comm {
  MPI_Comm comm = MPI_COMM_NULL;
  explicit Comm(MPI_Comm user) { MPI_Comm_dup(user, &comm); }
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;
  ~Comm() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm);
  }
};

template <class Local>
MPI_Comm DistMatrix<Local>::comm() const noexcept {
  return comm_->comm;
}

template <class Local>
struct DistMatrix<Local>::Layout {
  std::shared_ptr<Comm> comm;
  Partition partition;
  index_t rows;
  index_t b;
};

template <class Local>
auto DistMatrix<Local>::layout(MPI_Comm comm, const Local& local_rows) -> Layout {
  auto shared = std::make_shared<Comm>(comm);
  using F = Format<Local>;
  const index_t b = F::block_size(local_rows);
  const index_t mine[4] = {local_rows.rows(), local_rows.cols(), b, static_cast<index_t>(F::ptr(local_rows).size()) - 1};
  const std::vector<index_t> all = detail::allgather(shared->comm, std::span<const index_t>(mine, 4));
  const std::size_t parts = all.size() / 4;
  // Every process sees every process's shape, so all throw the same error, or none.
  index_t rows = 0, last_nonempty = -1;
  for (std::size_t p = 0; p < parts; ++p) {
    if (all[4 * p + 2] != all[2] || all[4 * p + 1] != all[1])
      throw InvalidArgument(concat("DistMatrix: process ", p, " has ", all[4 * p + 1], " columns and block size ",
                                   all[4 * p + 2], ", process 0 has ", all[1], " and ", all[2],
                                   ", expected the same on every process"));
    if (all[4 * p] > 0) last_nonempty = static_cast<index_t>(p);
    rows += all[4 * p];
  }
  for (std::size_t p = 0; static_cast<index_t>(p) < last_nonempty; ++p)
    if (all[4 * p] % b != 0)
      throw InvalidArgument(concat("DistMatrix: process ", p, " has ", all[4 * p],
                                   " rows, expected a multiple of the block size ", b,
                                   " (only the last process holding rows may end with a partial block)"));
  if (rows != all[1])
    throw InvalidArgument(concat("DistMatrix: the processes hold ", rows, " rows of a matrix with ", all[1],
                                 " columns, expected a square matrix"));
  std::vector<index_t> bounds(parts + 1, 0);
  for (std::size_t p = 0; p < parts; ++p) bounds[p + 1] = bounds[p] + all[4 * p + 3];
  return {std::move(shared), Partition(std::move(bounds)), rows, b};
}

template <class Local>
DistMatrix<Local>::DistMatrix(MPI_Comm comm, const Local& local_rows) : DistMatrix(layout(comm, local_rows), local_rows) {}

template <class Local>
DistMatrix<Local>::DistMatrix(Layout setup, const Local& L)
    : comm_(std::move(setup.comm)), partition_(std::move(setup.partition)), rows_(setup.rows), b_(setup.b) {
  using F = Format<Local>;
  using T = value_type;
  const index_t rows = rows_, b = b_;
  rank_ = detail::rank_of(comm_->comm);
  const index_t first = partition_.first(rank_), nb = partition_.count(rank_), bb = b * b;
  row_offset_ = std::min(rows, first * b);
  local_rows_ = std::min(rows, (first + nb) * b) - row_offset_;
  const auto ptr = F::ptr(L);
  const auto idx = F::idx(L);
  const auto vals = F::values(L);
  local_stored_ = static_cast<index_t>(idx.size());

  // Ghosts: the remote block columns referenced, ascending (so grouped by owner).
  for (const index_t c : idx)
    if (c < first || c >= first + nb) ghosts_.push_back(c);
  std::ranges::sort(ghosts_);
  ghosts_.erase(std::unique(ghosts_.begin(), ghosts_.end()), ghosts_.end());

  // Split every block row into its diagonal part and (compressed) off-process part.
  std::vector<index_t> dptr{0}, didx, optr{0}, oidx;
  std::vector<T> dval, oval;
  for (index_t i = 0; i < nb; ++i) {
    bool remote = false;
    for (index_t k = ptr[i]; k < ptr[i + 1]; ++k) {
      const index_t c = idx[k];
      const auto src = vals.begin() + k * bb;
      if (c >= first && c < first + nb) {
        didx.push_back(c - first);
        dval.insert(dval.end(), src, src + bb);
      } else {
        oidx.push_back(std::ranges::lower_bound(ghosts_, c) - ghosts_.begin());
        oval.insert(oval.end(), src, src + bb);
        remote = true;
      }
    }
    dptr.push_back(static_cast<index_t>(didx.size()));
    if (remote) {
      offd_rows_.push_back(i);
      optr.push_back(static_cast<index_t>(oidx.size()));
    }
  }
  const index_t n_offd = static_cast<index_t>(offd_rows_.size()), n_ghost = ghost_blocks();
  diag_.emplace(F::make(local_rows_, local_rows_, b, std::move(dptr), std::move(didx), std::move(dval)));
  offd_.emplace(F::make(n_offd * b, n_ghost * b, b, std::move(optr), std::move(oidx), std::move(oval)));

  // The exchange plan: whom we receive from (owners of our ghosts), and, told by the
  // others, which of our block rows we send to whom.
  const int parts = partition_.parts();
  std::vector<int> want(static_cast<std::size_t>(parts), 0), give(static_cast<std::size_t>(parts), 0);
  recv_first_.push_back(0);
  for (index_t g = 0; g < n_ghost; ++g) {
    const int q = partition_.owner(ghosts_[g]);
    if (recv_ranks_.empty() || recv_ranks_.back() != q) {
      if (!recv_ranks_.empty()) recv_first_.push_back(g);
      recv_ranks_.push_back(q);
    }
    ++want[q];
  }
  if (!recv_ranks_.empty()) recv_first_.push_back(n_ghost);
  MPI_Alltoall(want.data(), 1, MPI_INT, give.data(), 1, MPI_INT, comm_->comm);
  std::vector<int> want_at(static_cast<std::size_t>(parts), 0), give_at(static_cast<std::size_t>(parts), 0);
  for (int q = 1; q < parts; ++q) {
    want_at[q] = want_at[q - 1] + want[q - 1];
    give_at[q] = give_at[q - 1] + give[q - 1];
  }
  send_blocks_.resize(static_cast<std::size_t>(give_at.back() + give.back()));
  MPI_Alltoallv(ghosts_.data(), want.data(), want_at.data(), MPI_INT64_T, send_blocks_.data(), give.data(),
                give_at.data(), MPI_INT64_T, comm_->comm);
  send_first_.push_back(0);
  for (int q = 0; q < parts; ++q)
    if (give[q] > 0) {
      send_ranks_.push_back(q);
      send_first_.push_back(give_at[q] + give[q]);
    }
  for (index_t& block : send_blocks_) block -= first;  // global block row -> local
  for (std::size_t q = 0; q + 1 < recv_first_.size(); ++q)
    largest_message_ = std::max(largest_message_, recv_first_[q + 1] - recv_first_[q]);
  for (std::size_t q = 0; q + 1 < send_first_.size(); ++q)
    largest_message_ = std::max(largest_message_, send_first_[q + 1] - send_first_[q]);
  MPI_Allreduce(&local_stored_, &global_stored_, 1, MPI_INT64_T, MPI_SUM, comm_->comm);
}

template <class Local>
DistMatrix<Local> DistMatrix<Local>::scatter(MPI_Comm comm, const Local* global, int root, const Partition* partition) {
  using F = Format<Local>;
  using T = value_type;
  const int rank = detail::rank_of(comm), size = detail::size_of(comm);
  auto shared = std::make_shared<Comm>(comm);
  // Shape and partition, checked on root and agreed on by all.
  index_t shape[2] = {0, 0};  // rows, block size
  std::vector<index_t> bounds(static_cast<std::size_t>(size) + 1);
  agree(shared->comm, [&] {
    if (rank != root) return;
    if (global == nullptr) throw InvalidArgument(concat("DistMatrix::scatter: global is null on root process ", root));
    if (global->rows() != global->cols())
      throw InvalidArgument(concat("DistMatrix::scatter: A is ", global->rows(), " x ", global->cols(), ", expected square"));
    const Partition p = partition ? *partition : Partition::balanced(F::ptr(*global), size);
    const index_t block_rows = static_cast<index_t>(F::ptr(*global).size()) - 1;
    if (p.parts() != size || p.bounds().back() != block_rows)
      throw InvalidArgument(concat("DistMatrix::scatter: the partition has ", p.parts(), " parts over ", p.bounds().back(),
                                   " block rows, expected ", size, " parts over ", block_rows));
    std::ranges::copy(p.bounds(), bounds.begin());
    shape[0] = global->rows();
    shape[1] = F::block_size(*global);
  });
  MPI_Bcast(shape, 2, MPI_INT64_T, root, shared->comm);
  MPI_Bcast(bounds.data(), size + 1, MPI_INT64_T, root, shared->comm);
  const index_t b = shape[1], bb = b * b;
  Partition parts(std::move(bounds));

  // Each process's block rows: their lengths (every root entry read once; summed into
  // pointers on arrival), column indices, values. Displacements are absolute: the
  // global matrix must hold fewer than 2^31 stored values (checked on root).
  const index_t nb = parts.count(rank);
  std::vector<int> n_len(static_cast<std::size_t>(size)), at_len(n_len.size()), n_idx(n_len.size()), at_idx(n_len.size()),
      n_val(n_len.size()), at_val(n_len.size());
  std::vector<index_t> lengths;
  agree(shared->comm, [&] {
    if (rank != root) return;
    const auto ptr = F::ptr(*global);
    lengths.resize(ptr.size() - 1);
    for (std::size_t i = 0; i < lengths.size(); ++i) lengths[i] = ptr[i + 1] - ptr[i];
    for (int p = 0; p < size; ++p) {
      const index_t f = parts.first(p), l = parts.first(p + 1);
      n_len[p] = count(l - f, "DistMatrix::scatter: block rows per process");
      at_len[p] = count(f, "DistMatrix::scatter: block rows");
      n_idx[p] = count(ptr[l] - ptr[f], "DistMatrix::scatter: stored blocks per process");
      at_idx[p] = count(ptr[f], "DistMatrix::scatter: stored blocks");
      n_val[p] = count((ptr[l] - ptr[f]) * bb, "DistMatrix::scatter: values per process");
      at_val[p] = count(ptr[f] * bb, "DistMatrix::scatter: values");
    }
  });
  int mine[3] = {0, 0, 0};
  MPI_Scatter(n_len.data(), 1, MPI_INT, &mine[0], 1, MPI_INT, root, shared->comm);
  MPI_Scatter(n_idx.data(), 1, MPI_INT, &mine[1], 1, MPI_INT, root, shared->comm);
  MPI_Scatter(n_val.data(), 1, MPI_INT, &mine[2], 1, MPI_INT, root, shared->comm);
  std::vector<index_t> ptr(static_cast<std::size_t>(mine[0]) + 1, 0), idx(static_cast<std::size_t>(mine[1]));
  std::vector<T> vals(static_cast<std::size_t>(mine[2]));
  const bool is_root = rank == root;
  MPI_Scatterv(lengths.data(), n_len.data(), at_len.data(), MPI_INT64_T, ptr.data() + 1, mine[0], MPI_INT64_T, root,
               shared->comm);
  MPI_Scatterv(is_root ? F::idx(*global).data() : nullptr, n_idx.data(), at_idx.data(), MPI_INT64_T, idx.data(), mine[1],
               MPI_INT64_T, root, shared->comm);
  MPI_Scatterv(is_root ? F::values(*global).data() : nullptr, n_val.data(), at_val.data(), datatype<T>(), vals.data(),
               mine[2], datatype<T>(), root, shared->comm);
  std::partial_sum(ptr.begin(), ptr.end(), ptr.begin());
  const index_t first = parts.first(rank), rows = shape[0];
  const index_t local = std::min(rows, (first + nb) * b) - std::min(rows, first * b);
  const Local mine_rows = F::make(local, rows, b, std::move(ptr), std::move(idx), std::move(vals));
  return DistMatrix(Layout{std::move(shared), std::move(parts), rows, b}, mine_rows);
}

template <class Local>
DistMatrix<Local> DistMatrix<Local>::read_matrix_market(MPI_Comm comm, const std::filesystem::path& path, index_t block_size) {
  using F = Format<Local>;
  using T = value_type;
  const int rank = detail::rank_of(comm), size = detail::size_of(comm);
  auto shared = std::make_shared<Comm>(comm);
  MmMatrix part;
  agree(shared->comm, [&] {
    const char* who = "DistMatrix::read_matrix_market";
    if (block_size < 1) throw InvalidArgument(concat(who, ": block_size = ", block_size, ", expected >= 1"));
    if (std::is_same_v<Local, CsrMatrix<T>> && block_size != 1)
      throw InvalidArgument(concat(who, ": block_size = ", block_size, ", expected 1 for a CSR matrix"));
    part = read_matrix_market_slice(path, rank, size);
    if (part.entries.rows() != part.entries.cols())
      throw InvalidArgument(concat(path.string(), ": the matrix is ", part.entries.rows(), " x ", part.entries.cols(),
                                   ", expected square"));
  });
  const index_t n = part.entries.rows(), b = block_size, block_rows = (n + b - 1) / b;

  // 1. Entries to the owners of their rows under an even split of the block rows.
  std::vector<index_t> even(static_cast<std::size_t>(size) + 1);
  for (int p = 0; p <= size; ++p) even[p] = block_rows * p / size;
  const Partition first_split(even);
  const CooMatrix<double>& e = part.entries;
  std::vector<int> send(static_cast<std::size_t>(size)), send_at(send.size()), recv(send.size()), recv_at(send.size());
  std::vector<index_t> order(static_cast<std::size_t>(e.nnz()));
  agree(shared->comm, [&] {  // counts as MPI ints: checked on every process before data moves
    std::vector<index_t> per(send.size(), 0), at(send.size(), 0);
    for (index_t k = 0; k < e.nnz(); ++k) ++per[first_split.owner(e.row_indices()[k] / b)];
    for (int q = 1; q < size; ++q) at[q] = at[q - 1] + per[q - 1];
    for (int q = 0; q < size; ++q) {
      send[q] = count(per[q], "DistMatrix::read_matrix_market: entries per message");
      send_at[q] = count(at[q], "DistMatrix::read_matrix_market: entries of a slice");
    }
    for (index_t k = 0; k < e.nnz(); ++k) order[at[first_split.owner(e.row_indices()[k] / b)]++] = k;  // file order per destination
  });
  MPI_Alltoall(send.data(), 1, MPI_INT, recv.data(), 1, MPI_INT, shared->comm);
  agree(shared->comm, [&] {
    index_t at = 0;
    for (int q = 0; q < size; ++q) {
      recv_at[q] = count(at, "DistMatrix::read_matrix_market: entries received");
      at += recv[q];
    }
    (void)count(at, "DistMatrix::read_matrix_market: entries received");
  });
  const index_t received = static_cast<index_t>(recv_at.back()) + recv.back();
  const auto route = [&](const auto& in, auto& out, MPI_Datatype type) {
    using V = std::remove_cvref_t<decltype(in[0])>;
    std::vector<V> packed(order.size());
    for (std::size_t k = 0; k < order.size(); ++k) packed[k] = in[order[k]];
    out.resize(static_cast<std::size_t>(received));
    MPI_Alltoallv(packed.data(), send.data(), send_at.data(), type, out.data(), recv.data(), recv_at.data(), type,
                  shared->comm);
  };
  std::vector<index_t> ri, ci;
  std::vector<double> vi;
  route(e.row_indices(), ri, MPI_INT64_T);
  route(e.col_indices(), ci, MPI_INT64_T);
  route(e.values(), vi, MPI_DOUBLE);
  part = MmMatrix{};  // the slice is no longer needed
  const index_t row0 = std::min(n, first_split.first(rank) * b);
  for (index_t& r : ri) r -= row0;
  const index_t local = std::min(n, first_split.first(rank + 1) * b) - row0;
  const CsrMatrix<double> csr = to_csr(CooMatrix<double>(local, n, std::move(ri), std::move(ci), std::move(vi)));
  const Local rows_even = [&] {
    if constexpr (std::is_same_v<Local, CsrMatrix<T>>) return cast<T>(csr);
    else return to_bsr(cast<T>(csr), b);
  }();

  // 2. Balance by stored blocks: every process learns every block row's count.
  const auto ptr = F::ptr(rows_even);
  std::vector<index_t> mine(ptr.size() - 1);
  for (std::size_t i = 0; i < mine.size(); ++i) mine[i] = ptr[i + 1] - ptr[i];
  std::vector<int> counts(static_cast<std::size_t>(size)), at(counts.size());
  for (int p = 0; p < size; ++p) {
    counts[p] = count(first_split.count(p), "DistMatrix::read_matrix_market: block rows");
    at[p] = count(first_split.first(p), "DistMatrix::read_matrix_market: block rows");
  }
  std::vector<index_t> prefix(static_cast<std::size_t>(block_rows) + 1, 0);
  MPI_Allgatherv(mine.data(), counts[rank], MPI_INT64_T, prefix.data() + 1, counts.data(), at.data(), MPI_INT64_T,
                 shared->comm);
  std::partial_sum(prefix.begin(), prefix.end(), prefix.begin());
  Partition balanced = Partition::balanced(prefix, size);
  const Local rows_mine = move_block_rows(shared->comm, rows_even, first_split, balanced, n);
  return DistMatrix(Layout{std::move(shared), std::move(balanced), n, b}, rows_mine);
}

/// Waits for the posted messages when a product unwinds (an exception in the local
/// product): the buffers they read and write must outlive them.
class PendingRequests {
public:
  explicit PendingRequests(std::size_t n) { requests_.reserve(n); }
  PendingRequests(const PendingRequests&) = delete;
  PendingRequests& operator=(const PendingRequests&) = delete;
  ~PendingRequests() { wait(); }
  MPI_Request* add() { return &requests_.emplace_back(); }
  void wait() {
    if (!requests_.empty()) MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
    requests_.clear();
  }

private:
  std::vector<MPI_Request> requests_;
};

template <class Local>
void DistMatrix<Local>::spmm(value_type alpha, DenseView<const value_type> X, value_type beta, DenseView<value_type> Y) const {
  using T = value_type;
  MPI_Comm comm = comm_->comm;
  const index_t k = X.cols, b = b_, rows_per_block = b * k;
  // One allgather checks every process's shapes and widths (and that every message of
  // this product fits an MPI count) before anything is posted.
  std::exception_ptr error;
  try {
    const char* who = "DistMatrix::spmm";
    trnsparse::detail::check_dim(X.rows, local_rows_, who, "X", "rows", "local_rows()");
    trnsparse::detail::check_dim(Y.rows, local_rows_, who, "Y", "rows", "local_rows()");
    trnsparse::detail::check_dim(Y.cols, X.cols, who, "Y", "columns", "X.cols");
    (void)count(largest_message_ * rows_per_block, "DistMatrix::spmm: halo message");
  } catch (...) {
    error = std::current_exception();
  }
  const index_t mine[2] = {error ? 1 : 0, k};
  const std::vector<index_t> all = detail::allgather(comm, std::span<const index_t>(mine, 2));
  bool failed = false, widths_differ = false;
  for (std::size_t p = 0; p < all.size() / 2; ++p) {
    failed = failed || all[2 * p] != 0;
    widths_differ = widths_differ || all[2 * p + 1] != k;
  }
  if (failed) detail::agree_impl(comm, error);  // throws on every process
  if (widths_differ)
    for (std::size_t p = 0; p < all.size() / 2; ++p)
      if (all[2 * p + 1] != all[1])
        throw DimensionMismatch(concat("DistMatrix::spmm: X has ", all[1], " columns on process 0 and ", all[2 * p + 1],
                                       " on process ", p, ", expected the same on every process"));
  if (k == 0) return;
  std::vector<T> ghost(static_cast<std::size_t>(ghost_blocks() * rows_per_block), T(0));
  std::vector<T> sendbuf(static_cast<std::size_t>(sent_blocks() * rows_per_block), T(0));
  PendingRequests requests(recv_ranks_.size() + send_ranks_.size());
  for (std::size_t q = 0; q < recv_ranks_.size(); ++q)
    MPI_Irecv(ghost.data() + recv_first_[q] * rows_per_block,
              static_cast<int>((recv_first_[q + 1] - recv_first_[q]) * rows_per_block), datatype<T>(), recv_ranks_[q], 0,
              comm, requests.add());
  for (std::size_t s = 0; s < send_blocks_.size(); ++s) {
    const index_t r0 = send_blocks_[s] * b, r1 = std::min(local_rows_, r0 + b);
    for (index_t r = r0; r < r1; ++r)
      std::copy_n(X.data + r * X.ld, k, sendbuf.data() + (static_cast<index_t>(s) * b + r - r0) * k);
  }
  for (std::size_t q = 0; q < send_ranks_.size(); ++q)
    MPI_Isend(sendbuf.data() + send_first_[q] * rows_per_block,
              static_cast<int>((send_first_[q + 1] - send_first_[q]) * rows_per_block), datatype<T>(), send_ranks_[q], 0,
              comm, requests.add());
  trnsparse::spmm(alpha, *diag_, X, beta, Y);
  requests.wait();
  if (offd_rows_.empty()) return;
  Dense<T> Z(offd_->rows(), k);
  trnsparse::spmm(alpha, *offd_, DenseView<const T>(ghost.data(), ghost_blocks() * b, k, k), T(0), Z.view());
  for (std::size_t i = 0; i < offd_rows_.size(); ++i) {
    const index_t r0 = offd_rows_[i] * b, r1 = std::min(local_rows_, r0 + b);
    for (index_t r = r0; r < r1; ++r) {
      T* y = Y.data + r * Y.ld;
      const T* z = Z.values().data() + (static_cast<index_t>(i) * b + r - r0) * k;
      for (index_t j = 0; j < k; ++j) y[j] += z[j];
    }
  }
}

template <class Local>
void DistMatrix<Local>::spmv(value_type alpha, std::span<const value_type> x, value_type beta, std::span<value_type> y) const {
  spmm(alpha, DenseView<const value_type>(x.data(), static_cast<index_t>(x.size()), 1, 1), beta,
       DenseView<value_type>(y.data(), static_cast<index_t>(y.size()), 1, 1));
}

template class DistMatrix<CsrMatrix<float>>;
template class DistMatrix<CsrMatrix<double>>;
template class DistMatrix<BsrMatrix<float>>;
template class DistMatrix<BsrMatrix<double>>;

}  // namespace trnsparse::mpi
