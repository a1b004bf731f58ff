// Block-sparse attention: validate → plan → dispatch → kernel. Threads own contiguous
// ranges of (head, block row) units for the forward and dQ, of (head, block column)
// units for dK and dV, balanced by stored blocks (plus one per unit); each unit writes
// only its own rows, so results do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <utility>

#include "dispatch/attention.hpp"
#include "ops/run.hpp"
#include "plan/split.hpp"
#include "runtime/checks.hpp"
#include "runtime/workspace.hpp"
#include "trnsparse/attention.hpp"
#include "trnsparse/plan.hpp"

namespace trnsparse {

namespace {

namespace cpu = kernels::cpu;

/// One operand as (heads) slices of (rows, cols) with row stride ld.
template <class T>
struct Operand {
  T* data;
  index_t heads;
  index_t rows;
  index_t cols;
  index_t ld;
  index_t head_stride;
};

template <class T>
Operand<T> operand(DenseView<T> v) {
  return {v.data, 1, v.rows, v.cols, v.ld, 0};
}
template <class T>
Operand<T> operand(HeadsView<T> v) {
  for (const index_t n : {v.batch, v.heads, v.seq, v.dim}) detail::check_nonnegative(n, "attention: HeadsView extent");
  const index_t slices = detail::checked_mul(v.batch, v.heads, "attention: batch * heads");
  (void)detail::checked_mul(slices, detail::checked_mul(v.seq, v.dim, "attention: seq * dim"), "attention: tensor size");
  return {v.data, slices, v.seq, v.dim, std::max<index_t>(v.dim, 1), v.seq * v.dim};
}

template <class T>
std::size_t bytes(const Operand<T>& x) {
  if (x.heads == 0 || x.rows == 0 || x.cols == 0) return 0;
  return static_cast<std::size_t>((x.heads - 1) * x.head_stride + (x.rows - 1) * x.ld + x.cols) * sizeof(T);
}

template <class T>
cpu::HeadOperand<T> head_operand(const Operand<T>& x) {
  return {x.data, x.ld, x.head_stride};
}

/// Checks x against (heads, rows, d).
template <class T>
void check_operand(const char* who, const char* name, const Operand<T>& x, index_t heads, index_t rows,
                   const char* rows_name, index_t d) {
  detail::check_dim(x.heads, heads, who, name, "batch * heads slices", "Q's");
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

/// Shapes shared by forward and backward: Q (heads, queries, d), K and V (heads, keys, d).
template <class T>
index_t check_inputs(const char* who, const AttentionMask& mask, const Operand<const T>& Q, const Operand<const T>& K,
                     const Operand<const T>& V) {
  const index_t d = Q.cols;
  if (d < 1 || d > max_attention_head_dim)
    throw InvalidArgument(detail::concat(who, ": head_dim = ", d, " must be in [1, ", max_attention_head_dim, "]"));
  detail::check_dim(Q.rows, mask.queries(), who, "Q", "rows", "mask.queries()");
  check_operand(who, "K", K, Q.heads, mask.keys(), "mask.keys()", d);
  check_operand(who, "V", V, Q.heads, mask.keys(), "mask.keys()", d);
  return d;
}

template <class T>
cpu::AttentionProblem<T> problem(const AttentionMask& mask, const Operand<const T>& Q, const Operand<const T>& K,
                                 const Operand<const T>& V, acc_t<T> scale) {
  const BsrStructure& s = mask.structure();
  cpu::AttentionProblem<T> p{};
  p.b = s.block_size();
  p.queries = s.rows();
  p.keys = s.cols();
  p.block_rows = s.block_rows();
  p.block_cols = s.block_cols();
  p.dim = Q.cols;
  p.heads = Q.heads;
  p.ptr = s.block_row_ptr().data();
  p.idx = s.block_col_indices().data();
  p.partial = mask.partial_index().data();
  p.masks = mask.partial_masks().data();
  p.scale = scale;
  p.Q = head_operand(Q);
  p.K = head_operand(K);
  p.V = head_operand(V);
  return p;
}

/// Boundaries of `parts` ranges of units u = h * n + i (h < heads, i < n) of about equal
/// cost, the cost of unit (h, i) being ptr[i+1] - ptr[i] + 1.
std::vector<index_t> head_split(std::span<const index_t> ptr, index_t heads, int parts) {
  const auto n = static_cast<index_t>(ptr.size()) - 1;
  std::vector<index_t> ext(static_cast<std::size_t>(heads * n) + 1, 0);
  for (index_t h = 0; h < heads; ++h)
    for (index_t i = 0; i < n; ++i) ext[static_cast<std::size_t>(h * n + i + 1)] = h * ptr[n] + ptr[i + 1];
  return detail::balanced_split(ext, parts);
}

/// Runs kernel(prob, workspace, u0, u1) over `units` units split by `ptr` on threads.
template <class T, class Kernel>
void run_units(const cpu::AttentionKernels<T>& k, const cpu::AttentionProblem<T>& prob, Kernel kernel,
               std::span<const index_t> ptr) {
  const auto n = static_cast<index_t>(ptr.size()) - 1;
  const double work = static_cast<double>(prob.heads) * static_cast<double>(ptr[n]) *
                      static_cast<double>(prob.b * prob.b) * static_cast<double>(prob.dim);
  const auto split = head_split(ptr, prob.heads, detail::parts_for(prob.heads * n, work));
  const int parts = static_cast<int>(split.size()) - 1;
  const std::size_t ws = detail::round_to_line(k.workspace_bytes(prob));
  std::byte* mem = detail::thread_workspace(static_cast<std::size_t>(parts) * ws);
  detail::parallel_parts(parts, [&](int t) { kernel(prob, mem + static_cast<std::size_t>(t) * ws, split[t], split[t + 1]); });
}

template <class T>
void forward_impl(const AttentionMask& mask, const Operand<const T>& Q, const Operand<const T>& K,
                  const Operand<const T>& V, const Operand<T>& O, std::span<acc_t<T>> lse, acc_t<T> scale) {
  const char* who = "attention_forward";
  const index_t d = check_inputs(who, mask, Q, K, V);
  check_operand(who, "O", O, Q.heads, mask.queries(), "mask.queries()", d);
  if (!lse.empty())
    detail::check_dim(static_cast<index_t>(lse.size()), Q.heads * mask.queries(), who, "lse", "entries",
                      "batch * heads * queries");
  const Operand<const acc_t<T>> L{lse.data(), 1, 1, static_cast<index_t>(lse.size()), 1, 0};
  for (const auto& [in, name] : {std::pair{&Q, "Q"}, std::pair{&K, "K"}, std::pair{&V, "V"}}) {
    check_disjoint(who, *in, name, O, "O");
    check_disjoint(who, *in, name, L, "lse");
  }
  check_disjoint(who, O, "O", L, "lse");
  auto p = problem(mask, Q, K, V, checked_scale(scale, d, who));
  p.O = head_operand(O);
  p.lse = lse.empty() ? nullptr : lse.data();
  const auto& k = dispatch::attention_kernels<T>();
  run_units(k, p, k.forward, mask.structure().block_row_ptr());
}

template <class T>
void backward_impl(const AttentionMask& mask, const Operand<const T>& Q, const Operand<const T>& K,
                   const Operand<const T>& V, const Operand<const T>& O, const Operand<const T>& dO,
                   std::span<const acc_t<T>> lse, const Operand<T>& dQ, const Operand<T>& dK, const Operand<T>& dV,
                   acc_t<T> scale) {
  const char* who = "attention_backward";
  const index_t d = check_inputs(who, mask, Q, K, V);
  check_operand(who, "O", O, Q.heads, mask.queries(), "mask.queries()", d);
  check_operand(who, "dO", dO, Q.heads, mask.queries(), "mask.queries()", d);
  detail::check_dim(static_cast<index_t>(lse.size()), Q.heads * mask.queries(), who, "lse", "entries",
                    "batch * heads * queries");
  check_operand(who, "dQ", dQ, Q.heads, mask.queries(), "mask.queries()", d);
  check_operand(who, "dK", dK, Q.heads, mask.keys(), "mask.keys()", d);
  check_operand(who, "dV", dV, Q.heads, mask.keys(), "mask.keys()", d);
  const Operand<const acc_t<T>> L{lse.data(), 1, 1, static_cast<index_t>(lse.size()), 1, 0};
  for (const auto& [out, oname] : {std::pair{&dQ, "dQ"}, std::pair{&dK, "dK"}, std::pair{&dV, "dV"}}) {
    for (const auto& [in, iname] :
         {std::pair{&Q, "Q"}, std::pair{&K, "K"}, std::pair{&V, "V"}, std::pair{&O, "O"}, std::pair{&dO, "dO"}})
      check_disjoint(who, *in, iname, *out, oname);
    check_disjoint(who, L, "lse", *out, oname);
  }
  check_disjoint(who, dQ, "dQ", dK, "dK");
  check_disjoint(who, dQ, "dQ", dV, "dV");
  check_disjoint(who, dK, "dK", dV, "dV");
  auto p = problem(mask, Q, K, V, checked_scale(scale, d, who));
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
  run_units(k, p, k.backward_dq, mask.structure().block_row_ptr());
  run_units(k, p, k.backward_dkv, std::span<const index_t>(t.col_ptr));
}

}  // namespace

template <AttentionValue T>
void attention_forward(const AttentionMask& mask, DenseView<const std::type_identity_t<T>> Q,
                       DenseView<const std::type_identity_t<T>> K, DenseView<const std::type_identity_t<T>> V,
                       DenseView<T> O, std::span<acc_t<T>> lse, acc_t<T> scale) {
  forward_impl<T>(mask, operand(Q), operand(K), operand(V), operand(O), lse, scale);
}

template <AttentionValue T>
void attention_forward(const AttentionMask& mask, HeadsView<const std::type_identity_t<T>> Q,
                       HeadsView<const std::type_identity_t<T>> K, HeadsView<const std::type_identity_t<T>> V,
                       HeadsView<T> O, std::span<acc_t<T>> lse, acc_t<T> scale) {
  forward_impl<T>(mask, operand(Q), operand(K), operand(V), operand(O), lse, scale);
}

template <AttentionValue T>
void attention_backward(const AttentionMask& mask, DenseView<const std::type_identity_t<T>> Q,
                        DenseView<const std::type_identity_t<T>> K, DenseView<const std::type_identity_t<T>> V,
                        DenseView<const std::type_identity_t<T>> O, DenseView<const std::type_identity_t<T>> dO,
                        std::span<const acc_t<T>> lse, DenseView<T> dQ, DenseView<T> dK, DenseView<T> dV,
                        acc_t<T> scale) {
  backward_impl<T>(mask, operand(Q), operand(K), operand(V), operand(O), operand(dO), lse, operand(dQ), operand(dK),
                   operand(dV), scale);
}

template <AttentionValue T>
void attention_backward(const AttentionMask& mask, HeadsView<const std::type_identity_t<T>> Q,
                        HeadsView<const std::type_identity_t<T>> K, HeadsView<const std::type_identity_t<T>> V,
                        HeadsView<const std::type_identity_t<T>> O, HeadsView<const std::type_identity_t<T>> dO,
                        std::span<const acc_t<T>> lse, HeadsView<T> dQ, HeadsView<T> dK, HeadsView<T> dV,
                        acc_t<T> scale) {
  backward_impl<T>(mask, operand(Q), operand(K), operand(V), operand(O), operand(dO), lse, operand(dQ), operand(dK),
                   operand(dV), scale);
}

#define TRNSPARSE_INSTANTIATE(T)                                                                                   \
  template void attention_forward<T>(const AttentionMask&, DenseView<const T>, DenseView<const T>,                \
                                     DenseView<const T>, DenseView<T>, std::span<acc_t<T>>, acc_t<T>);            \
  template void attention_forward<T>(const AttentionMask&, HeadsView<const T>, HeadsView<const T>,                \
                                     HeadsView<const T>, HeadsView<T>, std::span<acc_t<T>>, acc_t<T>);            \
  template void attention_backward<T>(const AttentionMask&, DenseView<const T>, DenseView<const T>,               \
                                      DenseView<const T>, DenseView<const T>, DenseView<const T>,                 \
                                      std::span<const acc_t<T>>, DenseView<T>, DenseView<T>, DenseView<T>,        \
                                      acc_t<T>);                                                                  \
  template void attention_backward<T>(const AttentionMask&, HeadsView<const T>, HeadsView<const T>,               \
                                      HeadsView<const T>, HeadsView<const T>, HeadsView<const T>,                 \
                                      std::span<const acc_t<T>>, HeadsView<T>, HeadsView<T>, HeadsView<T>,        \
                                      acc_t<T>);
TRNSPARSE_INSTANTIATE(float)
TRNSPARSE_INSTANTIATE(bf16)
TRNSPARSE_INSTANTIATE(double)
#undef TRNSPARSE_INSTANTIATE

}  // namespace trnsparse
