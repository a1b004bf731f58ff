// Block-sparse attention: AttentionMask, its builders, and the forward and backward
// kernels over caller-owned (batch, heads, seq, dim) buffers.

#include "bindings.hpp"
#include "common.hpp"

namespace trnsparse::python {
namespace {

/// A (batch, heads, seq, dim) CPU buffer, the last dimension contiguous: (address, batch,
/// heads, seq, dim, batch stride, head stride, seq stride), strides in elements.
using HeadsArg = std::tuple<std::uintptr_t, index_t, index_t, index_t, index_t, index_t, index_t, index_t>;

template <class T>
HeadsView<T> heads_of(const HeadsArg& a) {
  const auto& [addr, batch, heads, seq, dim, bs, hs, ss] = a;
  return HeadsView<T>(reinterpret_cast<T*>(addr), batch, heads, seq, dim, bs, hs, ss);
}

/// `n` row statistics of type A at `addr` (n = 0: none).
template <class A>
std::span<A> stats_of(std::uintptr_t addr, index_t n) {
  detail::check_nonnegative(n, "lse length");
  return {reinterpret_cast<A*>(addr), static_cast<std::size_t>(n)};
}

}  // namespace

/// Binds AttentionMask (immutable handle), its builders, and the batched forward and
/// backward kernels over caller-owned buffers.
void bind_attention(py::module_& m) {
  py::class_<AttentionMask>(m, "AttentionMask")
      .def_property_readonly("batch", &AttentionMask::batch)
      .def_property_readonly("heads", &AttentionMask::heads)
      .def_property_readonly("queries", &AttentionMask::queries)
      .def_property_readonly("keys", &AttentionMask::keys)
      .def_property_readonly("block_size", &AttentionMask::block_size)
      .def_property_readonly("n_blocks", &AttentionMask::n_blocks)
      .def_property_readonly("n_partial", &AttentionMask::n_partial)
      .def(
          "block_arrays",
          [](py::object self) {
            const auto& mk = self.cast<const AttentionMask&>();
            const BsrStructure& s = mk.structure();
            const auto over = [&](std::span<const index_t> a) {
              return array_over<index_t>(a.data(), {static_cast<py::ssize_t>(a.size())}, self);
            };
            const auto masks = mk.partial_masks();
            return py::make_tuple(over(s.block_row_ptr()), over(s.block_col_indices()), over(mk.partial_index()),
                                  array_over<std::uint8_t>(masks.data(), {static_cast<py::ssize_t>(masks.size())}, self));
          },
          "(block_row_ptr, block_col_indices, partial_index, partial_masks) of the stacked structure, as arrays "
          "over this handle's memory")
      .def(
          "allowed",
          [](const AttentionMask& mk) {
            const index_t q = mk.queries(), k = mk.keys(), n = mk.slices();
            std::vector<std::uint8_t> a(static_cast<std::size_t>(
                detail::checked_mul(n, detail::checked_mul(q, k, "queries * keys"), "slices * queries * keys")));
            {
              py::gil_scoped_release nogil;
              for (index_t s = 0; s < n; ++s)
                for (index_t i = 0; i < q; ++i)
                  for (index_t j = 0; j < k; ++j)
                    a[static_cast<std::size_t>((s * q + i) * k + j)] =
                        mk.allows(s / mk.heads(), s % mk.heads(), i, j) ? 1 : 0;
            }
            auto [p, owner] = adopt(std::move(a));
            return array_over<std::uint8_t>(p->data(),
                                            {static_cast<py::ssize_t>(mk.batch()), static_cast<py::ssize_t>(mk.heads()),
                                             static_cast<py::ssize_t>(q), static_cast<py::ssize_t>(k)},
                                            owner);
          },
          "batch x heads x queries x keys uint8 array: 1 where the pair is allowed (O(queries * keys) per slice, "
          "for inspection)");

  using Guard = py::call_guard<py::gil_scoped_release>;
  m.def("mask_local_window", py::overload_cast<index_t, index_t, index_t, index_t>(&mask::local_window), Guard());
  m.def("mask_dilated", &mask::dilated, Guard());
  m.def("mask_global_tokens", &mask::global_tokens, Guard());
  m.def("mask_causal", py::overload_cast<index_t, index_t, index_t>(&mask::causal), Guard());
  m.def("mask_document", [](std::uintptr_t lengths, index_t n, index_t block, bool causal) {
    const auto l = copy_of<index_t>(lengths, n);
    py::gil_scoped_release nogil;
    return mask::document(l, block, causal);
  });
  m.def("mask_unite", &mask::unite, Guard());
  m.def("mask_intersect", &mask::intersect, Guard());
  m.def("mask_stack", [](const py::list& masks, index_t batch, index_t heads) {
    std::vector<AttentionMask> v;
    v.reserve(masks.size());
    for (const auto& x : masks) v.push_back(x.cast<const AttentionMask&>());
    py::gil_scoped_release nogil;
    return mask::stack(v, batch, heads);
  });
  // Every stored block of a BSR pattern full (its values are not read).
  m.def("mask_from_pattern", [](index_t rows, index_t cols, index_t block_size, std::uintptr_t block_row_ptr,
                                index_t n_block_row_ptr, std::uintptr_t block_col_idx, index_t n_blocks) {
    auto ptr = copy_of<index_t>(block_row_ptr, n_block_row_ptr);
    auto cols_v = copy_of<index_t>(block_col_idx, n_blocks);
    py::gil_scoped_release nogil;
    return AttentionMask(BsrStructure::make(rows, cols, block_size, std::move(ptr), std::move(cols_v)));
  });
  // Classified blocks of batch x heads slices (AttentionMask::from_blocks).
  m.def("mask_from_blocks", [](index_t batch, index_t heads, index_t queries, index_t keys, index_t block,
                               std::uintptr_t ptr, index_t n_ptr, std::uintptr_t cols, index_t n_blocks,
                               std::uintptr_t partial, std::uintptr_t masks, index_t n_mask_bytes) {
    auto p = copy_of<index_t>(ptr, n_ptr);
    auto c = copy_of<index_t>(cols, n_blocks);
    auto k = copy_of<index_t>(partial, n_blocks);
    auto e = copy_of<std::uint8_t>(masks, n_mask_bytes);
    py::gil_scoped_release nogil;
    return AttentionMask::from_blocks(batch, heads, queries, keys, block, std::move(p), std::move(c), std::move(k),
                                      std::move(e));
  });
  // O and lse (float32; float64 for float64 operands; lse_n = 0: none) in place; scale 0
  // means 1 / sqrt(d); alibi: one slope per query head or empty; softcap 0: none.
  m.def("attention_forward", [](const AttentionMask& mk, const std::string& dtype, const HeadsArg& Q,
                                const HeadsArg& K, const HeadsArg& V, const HeadsArg& O, std::uintptr_t lse,
                                index_t lse_n, double scale, const std::vector<double>& alibi, double softcap) {
    with_dtype(dtype, [&]<class T>() {
      py::gil_scoped_release nogil;
      attention_forward<T>(mk, heads_of<const T>(Q), heads_of<const T>(K), heads_of<const T>(V), heads_of<T>(O),
                           stats_of<acc_t<T>>(lse, lse_n), static_cast<acc_t<T>>(scale), ScoreMod{alibi, softcap});
    });
  });
  // dQ, dK, dV in place from the forward's O and lse.
  m.def("attention_backward",
        [](const AttentionMask& mk, const std::string& dtype, const HeadsArg& Q, const HeadsArg& K, const HeadsArg& V,
           const HeadsArg& O, const HeadsArg& dO, std::uintptr_t lse, index_t lse_n, const HeadsArg& dQ,
           const HeadsArg& dK, const HeadsArg& dV, double scale, const std::vector<double>& alibi, double softcap) {
          with_dtype(dtype, [&]<class T>() {
            py::gil_scoped_release nogil;
            attention_backward<T>(mk, heads_of<const T>(Q), heads_of<const T>(K), heads_of<const T>(V),
                                  heads_of<const T>(O), heads_of<const T>(dO), stats_of<const acc_t<T>>(lse, lse_n),
                                  heads_of<T>(dQ), heads_of<T>(dK), heads_of<T>(dV), static_cast<acc_t<T>>(scale),
                                  ScoreMod{alibi, softcap});
          });
        });
}

}  // namespace trnsparse::python
