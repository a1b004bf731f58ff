// Block-sparse attention: validate → plan → dispatch → kernel. Threads take pieces of
// (batch, head, block row) units for the forward and dQ, of (batch, key head, block
// column) units for dK and dV, each piece a contiguous range within one slice, balanced
// by stored blocks (plus one per unit); each unit writes only its own rows, so results
// do not depend on the thread count.
#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "dispatch/dispatch.hpp"
#include "ops/run.hpp"
#include "runtime/parallel.hpp"
#include "runtime/checks.hpp"
#include "runtime/workspace.hpp"
#include "trnsparse/attention.hpp"
#include "trnsparse/plan.hpp"

namespace trnsparse {

namespace {

/// One operand as (batch, heads) slices of (rows, cols), rows ld apart.
template <class T>
struct Operand {
  T* data;
  index_t batch;
  index_t heads;
  index_t rows;
  index_t cols;
  index_t ld;
  index_t batch_stride;
  index_t head_stride;
};

template <class T>
Operand<T> operand(DenseView<T> v) {
  return {v.data, 1, 1, v.rows, v.cols, v.ld, 0, 0};
}
template <class T>
Operand<T> operand(HeadsView<T> v) {
  for (const index_t n : {v.batch, v.heads, v.seq, v.dim}) detail::check_nonnegative(n, "attention: HeadsView extent");
  for (const index_t n : {v.batch_stride, v.head_stride, v.seq_stride})
    detail::check_nonnegative(n, "attention: HeadsView stride");
  (void)detail::checked_mul(detail::checked_mul(v.batch, v.heads, "attention: batch * heads"),
                            detail::checked_mul(v.seq, v.dim, "attention: seq * dim"), "attention: tensor size");
  return {v.data, v.batch, v.heads, v.seq, v.dim, v.seq_stride, v.batch_stride, v.head_stride};
}

/// Bytes from x's first element to one past its last (strides are non-negative).
template <class T>
std::size_t bytes(const Operand<T>& x) {
  if (x.batch == 0 || x.heads == 0 || x.rows == 0 || x.cols == 0) return 0;
  const index_t last = (x.batch - 1) * x.batch_stride + (x.heads - 1) * x.head_stride + (x.rows - 1) * x.ld + x.cols;
  return static_cast<std::size_t>(last) * sizeof(T);
}

/// Throws unless no two elements of output x share memory: its dimensions, ordered by
/// stride, each step over everything the smaller ones span.
template <class T>
void check_no_self_overlap(const char* who, const char* name, const Operand<T>& x) {
  std::array<std::pair<index_t, index_t>, 3> dims{
      {{x.ld, x.rows}, {x.head_stride, x.heads}, {x.batch_stride, x.batch}}};  // (stride, extent)
  if (bytes(x) == 0) return;
  std::sort(dims.begin(), dims.end());
  index_t spanned = x.cols;
  for (const auto& [stride, extent] : dims) {
    if (extent == 1) continue;
    if (stride < spanned)
      throw InvalidArgument(detail::concat(who, ": ", name, " has overlapping elements (a stride of ", stride,
                                           " over a span of ", spanned, "); an output needs distinct memory"));
    spanned = stride * (extent - 1) + spanned;
  }
}

template <class T>
kernels::HeadOperand<T> head_operand(const Operand<T>& x) {
  return {x.data, x.ld, x.batch_stride, x.head_stride};
}

/// Checks x against (batch, heads, rows, d).
template <class T>
void check_operand(const char* who, const char* name, const Operand<T>& x, index_t batch, index_t heads, index_t rows,
                   const char* rows_name, index_t d) {
  detail::check_dim(x.batch, batch, who, name, "batch elements", "Q's");
  detail::check_dim(x.heads, heads, who, name, "heads", "the expected");
  detail::check_dim(x.rows, rows, who, name, "rows", rows_name);
  detail::check_dim(x.cols, d, who, name, "columns", "head_dim");
}

template <class A, class B>
void check_disjoint(const char* who, const Operand<A>& in, const char* in_name, const Operand<B>& out,
                    const char* out_name) {
  detail::check_no_alias(in.data, bytes(in), out.data, bytes(out), who, in_name, out_name);
}

/// The scale to use: `scale`, or 1 / sqrt(d) for 0 (in the statistics' type A).
template <class A>
A checked_scale(A scale, index_t d, const char* who) {
  if (!std::isfinite(scale) || scale < A(0))
    throw InvalidArgument(detail::concat(who, ": scale = ", scale, " must be finite and >= 0 (0: 1/sqrt(head_dim))"));
  return scale == A(0) ? A(1) / std::sqrt(static_cast<A>(d)) : scale;
}

/// Shapes shared by forward and backward: Q (batch, heads, queries, d), K and V (batch,
/// kv_heads, keys, d) with kv_heads dividing heads; the mask's slices 1 or the operands'.
template <class T>
index_t check_inputs(const char* who, const AttentionMask& mask, const Operand<const T>& Q, const Operand<const T>& K,
                     const Operand<const T>& V) {
  const index_t d = Q.cols;
  if (d < 1 || d > max_attention_head_dim)
    throw InvalidArgument(detail::concat(who, ": head_dim = ", d, " must be in [1, ", max_attention_head_dim, "]"));
  detail::check_dim(Q.rows, mask.queries(), who, "Q", "rows", "mask.queries()");
  if (K.heads < 1 || Q.heads % K.heads != 0)
    throw DimensionMismatch(detail::concat(who, ": K has ", K.heads, " heads, which must divide Q's ", Q.heads,
                                           " heads (grouped-query attention)"));
  check_operand(who, "K", K, Q.batch, K.heads, mask.keys(), "mask.keys()", d);
  check_operand(who, "V", V, Q.batch, K.heads, mask.keys(), "mask.keys()", d);
  if (mask.batch() != 1 && mask.batch() != Q.batch)
    throw DimensionMismatch(detail::concat(who, ": the mask has ", mask.batch(), " batch slices; expected 1 or Q's ",
                                           Q.batch));
  if (mask.heads() != 1 && mask.heads() != Q.heads)
    throw DimensionMismatch(detail::concat(who, ": the mask has ", mask.heads(), " head slices; expected 1 or Q's ",
                                           Q.heads));
  return d;
}

/// The score modifiers in acc_t<T>, checked: one ALiBi slope per query head (finite), a
/// soft-cap finite and >= 0.
template <class A>
std::vector<A> checked_slopes(const ScoreMod& mod, index_t heads, const char* who) {
  if (!std::isfinite(mod.softcap) || mod.softcap < 0)
    throw InvalidArgument(detail::concat(who, ": softcap = ", mod.softcap, " must be finite and >= 0 (0: none)"));
  if (mod.alibi_slopes.empty()) return {};
  detail::check_dim(static_cast<index_t>(mod.alibi_slopes.size()), heads, who, "alibi_slopes", "entries",
                    "Q's heads");
  std::vector<A> slopes(mod.alibi_slopes.size());
  for (std::size_t h = 0; h < slopes.size(); ++h) {
    if (!std::isfinite(mod.alibi_slopes[h]))
      throw InvalidArgument(detail::concat(who, ": alibi_slopes[", h, "] = ", mod.alibi_slopes[h], " must be finite"));
    slopes[h] = static_cast<A>(mod.alibi_slopes[h]);
  }
  return slopes;
}

template <class T>
kernels::AttentionProblem<T> problem(const AttentionMask& mask, const Operand<const T>& Q, const Operand<const T>& K,
                                 const Operand<const T>& V, acc_t<T> scale, const ScoreMod& mod,
                                 const std::vector<acc_t<T>>& slopes) {
  const BsrStructure& s = mask.structure();
  kernels::AttentionProblem<T> p{};
  p.b = s.block_size();
  p.queries = mask.queries();
  p.keys = mask.keys();
  p.block_rows = mask.block_rows();
  p.block_cols = mask.block_cols();
  p.dim = Q.cols;
  p.batch = Q.batch;
  p.heads = Q.heads;
  p.kv_group = Q.heads / K.heads;
  p.mask_batch = mask.batch();
  p.mask_heads = mask.heads();
  p.ptr = s.block_row_ptr().data();
  p.idx = s.block_col_indices().data();
  p.partial = mask.partial_index().data();
  p.masks = mask.partial_masks().data();
  p.scale = scale;
  p.alibi = slopes.empty() ? nullptr : slopes.data();
  p.softcap = static_cast<acc_t<T>>(mod.softcap);
  p.Q = head_operand(Q);
  p.K = head_operand(K);
  p.V = head_operand(V);
  return p;
}

/// Stored blocks of each unit of the forward and dQ passes as a prefix sum over
/// u = (z * heads + h) * block_rows + I.
template <class T>
std::vector<index_t> row_unit_blocks(const AttentionMask& mask, const kernels::AttentionProblem<T>& p) {
  const index_t br = p.block_rows;
  std::vector<index_t> ext(static_cast<std::size_t>(p.batch * p.heads * br) + 1, 0);
  for (index_t z = 0, u = 0; z < p.batch; ++z)
    for (index_t h = 0; h < p.heads; ++h) {
      const index_t m = mask.slice(z, h);
      for (index_t i = 0; i < br; ++i, ++u) {
        const index_t row = m * br + i;
        ext[static_cast<std::size_t>(u + 1)] = ext[static_cast<std::size_t>(u)] + p.ptr[row + 1] - p.ptr[row];
      }
    }
  return ext;
}

/// The same for the dK/dV pass, u = (z * kv_heads + k) * block_cols + J: the blocks of
/// column J over the mask slices of k's query heads.
template <class T>
std::vector<index_t> col_unit_blocks(const AttentionMask& mask, const kernels::AttentionProblem<T>& p) {
  const index_t bc = p.block_cols, kv_heads = p.heads / p.kv_group;
  std::vector<index_t> ext(static_cast<std::size_t>(p.batch * kv_heads * bc) + 1, 0);
  for (index_t z = 0, u = 0; z < p.batch; ++z)
    for (index_t k = 0; k < kv_heads; ++k)
      for (index_t j = 0; j < bc; ++j, ++u) {
        index_t n = 0;
        for (index_t h = k * p.kv_group; h < (k + 1) * p.kv_group; ++h) {
          const index_t col = mask.slice(z, h) * bc + j;
          n += p.col_ptr[col + 1] - p.col_ptr[col];
        }
        ext[static_cast<std::size_t>(u + 1)] = ext[static_cast<std::size_t>(u)] + n;
      }
  return ext;
}

/// Runs kernel(prob, workspace, u0, u1) over the units whose stored-block prefix sum is
/// `ext`, `per_slice` units a slice, split on threads by stored blocks + 1 per unit. Each
/// slice is cut into the same number of pieces, dealt part-major: thread t's range holds
/// part t of every slice, so the threads walk the slices side by side and share each
/// slice's operands in cache (the 2-D call's locality), where a plain cut of the units
/// would give each thread slices of its own and double what the cache must hold.
template <class T, class Kernel>
void run_units(const kernels::AttentionKernels<T>& k, const kernels::AttentionProblem<T>& prob, Kernel kernel,
               const std::vector<index_t>& ext, index_t per_slice) {
  const auto units = static_cast<index_t>(ext.size()) - 1;
  const double work = static_cast<double>(ext.back()) * static_cast<double>(prob.b * prob.b) *
                      static_cast<double>(prob.dim);
  const int parts = detail::parts_for(units, detail::work_ns(detail::Work::attention, work));
  const index_t slices = per_slice == 0 ? 0 : units / per_slice;
  // Several pieces a part (pieces_for's), for a thread that falls behind to leave small
  // ones, but no more than a slice's units give.
  const index_t per_part = parts == 1 ? 1 : std::clamp<index_t>(per_slice / parts, 1, detail::kPiecesPerPart);
  const auto cuts = static_cast<int>(parts * per_part);
  // pieces[(t * slices + s) * per_part + i]: piece i of part t of slice s, as [from, to).
  std::vector<std::pair<index_t, index_t>> pieces(static_cast<std::size_t>(slices * cuts));
  std::vector<index_t> local(static_cast<std::size_t>(per_slice) + 1);  // slice s's prefix sum from 0
  for (index_t s = 0; s < slices; ++s) {
    const auto first = ext.begin() + s * per_slice;
    std::transform(first, first + per_slice + 1, local.begin(), [&](index_t e) { return e - *first; });
    const auto cut = detail::balanced_split(local, cuts);
    for (index_t c = 0; c < cuts; ++c)
      pieces[static_cast<std::size_t>(((c / per_part) * slices + s) * per_part + c % per_part)] = {
          s * per_slice + cut[c], s * per_slice + cut[c + 1]};
  }
  const std::size_t ws = detail::round_to_line(k.workspace_bytes(prob));
  std::byte* mem = detail::thread_workspace(static_cast<std::size_t>(parts) * ws);
  detail::parallel_for(parts, static_cast<index_t>(pieces.size()), [&](int slot, index_t i) {
    const auto [u0, u1] = pieces[static_cast<std::size_t>(i)];
    if (u0 < u1) kernel(prob, mem + static_cast<std::size_t>(slot) * ws, u0, u1);
  });
}

/// The lse buffer as an operand, for the overlap checks.
template <class A>
Operand<const A> lse_operand(std::span<A> lse) {
  return {lse.data(), 1, 1, 1, static_cast<index_t>(lse.size()), 0, 0, 0};
}

template <class T>
void forward_impl(const AttentionMask& mask, const Operand<const T>& Q, const Operand<const T>& K,
                  const Operand<const T>& V, const Operand<T>& O, std::span<acc_t<T>> lse, acc_t<T> scale,
                  const ScoreMod& mod) {
  const char* who = "attention_forward";
  const index_t d = check_inputs(who, mask, Q, K, V);
  check_operand(who, "O", O, Q.batch, Q.heads, mask.queries(), "mask.queries()", d);
  check_no_self_overlap(who, "O", O);
  if (!lse.empty())
    detail::check_dim(static_cast<index_t>(lse.size()), Q.batch * Q.heads * mask.queries(), who, "lse", "entries",
                      "batch * heads * queries");
  const auto L = lse_operand(lse);
  for (const auto& [in, name] : {std::pair{&Q, "Q"}, std::pair{&K, "K"}, std::pair{&V, "V"}}) {
    check_disjoint(who, *in, name, O, "O");
    check_disjoint(who, *in, name, L, "lse");
  }
  check_disjoint(who, O, "O", L, "lse");
  const auto slopes = checked_slopes<acc_t<T>>(mod, Q.heads, who);
  auto p = problem(mask, Q, K, V, checked_scale(scale, d, who), mod, slopes);
  p.O = head_operand(O);
  p.lse = lse.empty() ? nullptr : lse.data();
  const auto& k = dispatch::attention_kernels<T>();
  run_units(k, p, k.forward, row_unit_blocks(mask, p), p.block_rows);
}

template <class T>
void backward_impl(const AttentionMask& mask, const Operand<const T>& Q, const Operand<const T>& K,
                   const Operand<const T>& V, const Operand<const T>& O, const Operand<const T>& dO,
                   std::span<const acc_t<T>> lse, const Operand<T>& dQ, const Operand<T>& dK, const Operand<T>& dV,
                   acc_t<T> scale, const ScoreMod& mod) {
  const char* who = "attention_backward";
  const index_t d = check_inputs(who, mask, Q, K, V);
  check_operand(who, "O", O, Q.batch, Q.heads, mask.queries(), "mask.queries()", d);
  check_operand(who, "dO", dO, Q.batch, Q.heads, mask.queries(), "mask.queries()", d);
  detail::check_dim(static_cast<index_t>(lse.size()), Q.batch * Q.heads * mask.queries(), who, "lse", "entries",
                    "batch * heads * queries");
  check_operand(who, "dQ", dQ, Q.batch, Q.heads, mask.queries(), "mask.queries()", d);
  check_operand(who, "dK", dK, Q.batch, K.heads, mask.keys(), "mask.keys()", d);
  check_operand(who, "dV", dV, Q.batch, K.heads, mask.keys(), "mask.keys()", d);
  const auto L = lse_operand(lse);
  for (const auto& [out, oname] : {std::pair{&dQ, "dQ"}, std::pair{&dK, "dK"}, std::pair{&dV, "dV"}}) {
    check_no_self_overlap(who, oname, *out);
    for (const auto& [in, iname] :
         {std::pair{&Q, "Q"}, std::pair{&K, "K"}, std::pair{&V, "V"}, std::pair{&O, "O"}, std::pair{&dO, "dO"}})
      check_disjoint(who, *in, iname, *out, oname);
    check_disjoint(who, L, "lse", *out, oname);
  }
  check_disjoint(who, dQ, "dQ", dK, "dK");
  check_disjoint(who, dQ, "dQ", dV, "dV");
  check_disjoint(who, dK, "dK", dV, "dV");
  const auto slopes = checked_slopes<acc_t<T>>(mod, Q.heads, who);
  auto p = problem(mask, Q, K, V, checked_scale(scale, d, who), mod, slopes);
  const BscView& t = plan(mask.structure_ptr())->transposed();
  p.col_ptr = t.col_ptr.data();
  p.row_idx = t.row_idx.data();
  p.perm = t.perm.data();
  p.Oin = head_operand(O);
  p.dO = head_operand(dO);
  p.lse_in = lse.data();
  p.dQ = head_operand(dQ);
  p.dK = head_operand(dK);
  p.dV = head_operand(dV);
  const auto& k = dispatch::attention_kernels<T>();
  run_units(k, p, k.backward_dq, row_unit_blocks(mask, p), p.block_rows);
  run_units(k, p, k.backward_dkv, col_unit_blocks(mask, p), p.block_cols);
}

}  // namespace

template <AttentionValue T>
void attention_forward(const AttentionMask& mask, DenseView<const std::type_identity_t<T>> Q,
                       DenseView<const std::type_identity_t<T>> K, DenseView<const std::type_identity_t<T>> V,
                       DenseView<T> O, std::span<acc_t<T>> lse, acc_t<T> scale, const ScoreMod& mod) {
  if (mask.slices() != 1)
    throw InvalidArgument(detail::concat("attention_forward: the mask has ", mask.slices(),
                                         " slices; one head takes a single-slice mask"));
  forward_impl<T>(mask, operand(Q), operand(K), operand(V), operand(O), lse, scale, mod);
}

template <AttentionValue T>
void attention_forward(const AttentionMask& mask, HeadsView<const std::type_identity_t<T>> Q,
                       HeadsView<const std::type_identity_t<T>> K, HeadsView<const std::type_identity_t<T>> V,
                       HeadsView<T> O, std::span<acc_t<T>> lse, acc_t<T> scale, const ScoreMod& mod) {
  forward_impl<T>(mask, operand(Q), operand(K), operand(V), operand(O), lse, scale, mod);
}

template <AttentionValue T>
void attention_backward(const AttentionMask& mask, DenseView<const std::type_identity_t<T>> Q,
                        DenseView<const std::type_identity_t<T>> K, DenseView<const std::type_identity_t<T>> V,
                        DenseView<const std::type_identity_t<T>> O, DenseView<const std::type_identity_t<T>> dO,
                        std::span<const acc_t<T>> lse, DenseView<T> dQ, DenseView<T> dK, DenseView<T> dV,
                        acc_t<T> scale, const ScoreMod& mod) {
  if (mask.slices() != 1)
    throw InvalidArgument(detail::concat("attention_backward: the mask has ", mask.slices(),
                                         " slices; one head takes a single-slice mask"));
  backward_impl<T>(mask, operand(Q), operand(K), operand(V), operand(O), operand(dO), lse, operand(dQ), operand(dK),
                   operand(dV), scale, mod);
}

template <AttentionValue T>
void attention_backward(const AttentionMask& mask, HeadsView<const std::type_identity_t<T>> Q,
                        HeadsView<const std::type_identity_t<T>> K, HeadsView<const std::type_identity_t<T>> V,
                        HeadsView<const std::type_identity_t<T>> O, HeadsView<const std::type_identity_t<T>> dO,
                        std::span<const acc_t<T>> lse, HeadsView<T> dQ, HeadsView<T> dK, HeadsView<T> dV,
                        acc_t<T> scale, const ScoreMod& mod) {
  backward_impl<T>(mask, operand(Q), operand(K), operand(V), operand(O), operand(dO), lse, operand(dQ), operand(dK),
                   operand(dV), scale, mod);
}

#define TRNSPARSE_INSTANTIATE(T)                                                                                   \
  template void attention_forward<T>(const AttentionMask&, DenseView<const T>, DenseView<const T>,                \
                                     DenseView<const T>, DenseView<T>, std::span<acc_t<T>>, acc_t<T>,             \
                                     const ScoreMod&);                                                            \
  template void attention_forward<T>(const AttentionMask&, HeadsView<const T>, HeadsView<const T>,                \
                                     HeadsView<const T>, HeadsView<T>, std::span<acc_t<T>>, acc_t<T>,             \
                                     const ScoreMod&);                                                            \
  template void attention_backward<T>(const AttentionMask&, DenseView<const T>, DenseView<const T>,               \
                                      DenseView<const T>, DenseView<const T>, DenseView<const T>,                 \
                                      std::span<const acc_t<T>>, DenseView<T>, DenseView<T>, DenseView<T>,        \
                                      acc_t<T>, const ScoreMod&);                                                 \
  template void attention_backward<T>(const AttentionMask&, HeadsView<const T>, HeadsView<const T>,               \
                                      HeadsView<const T>, HeadsView<const T>, HeadsView<const T>,                 \
                                      std::span<const acc_t<T>>, HeadsView<T>, HeadsView<T>, HeadsView<T>,        \
                                      acc_t<T>, const ScoreMod&);
TRNSPARSE_INSTANTIATE(float)
TRNSPARSE_INSTANTIATE(bf16)
TRNSPARSE_INSTANTIATE(double)
#undef TRNSPARSE_INSTANTIATE

}  // namespace trnsparse
