// The sparse handles (Csr, Bsr), their construction from raw arrays (with the conversion
// cache's reuse of an earlier handle) and the conversions between formats.

#include "bindings.hpp"
#include "common.hpp"

namespace trnsparse::python {
namespace {

/// A structure's (row pointer, column index) arrays as Python gets them. Python may write
/// into what it gets, and a structure is immutable once others share it (a product's
/// result shares its plan's structure with every later product of the same pair; handles
/// share theirs with plans): a shared structure is copied, one only this handle holds is
/// lent.
std::pair<py::array, py::array> index_arrays(const std::shared_ptr<const BsrStructure>& structure,
                                             py::handle owner) {
  const auto lend = [](const BsrStructure& s, py::handle o) {
    return std::pair{array_over<index_t>(s.block_row_ptr().data(), {s.block_rows() + 1}, o),
                     array_over<index_t>(s.block_col_indices().data(), {s.n_blocks()}, o)};
  };
  if (structure.use_count() == 1) return lend(*structure, owner);
  auto [copy, copy_owner] = adopt(std::make_shared<const BsrStructure>(*structure));
  return lend(**copy, copy_owner);
}

/// A handle's stored values (a CSR's entries; a BSR's blocks, n_blocks x b x b) as an
/// array over its memory.
template <class H>
py::array stored_values(py::object self) {
  return std::visit(
      [&](const auto& A) {
        using T = matrix_value_t<decltype(A)>;
        if constexpr (requires { A.blocks(); }) {
          const auto n = static_cast<py::ssize_t>(A.n_blocks()), b = static_cast<py::ssize_t>(A.block_size());
          return array_over<T>(A.blocks().data(), {n, b, b}, self);
        } else {
          return array_over<T>(A.values().data(), {static_cast<py::ssize_t>(A.nnz())}, self);
        }
      },
      self.cast<const H&>().m);
}

template <class H>
py::tuple handle_arrays(py::object self) {
  auto [row_ptr, col_indices] =
      std::visit([&](const auto& A) { return index_arrays(A.structure_ptr(), self); }, self.cast<const H&>().m);
  return py::make_tuple(row_ptr, col_indices, stored_values<H>(self));
}

// `csr` and `bsr` take `cached`, None or the handle an earlier call returned for the
// same Python matrix. When it has the dtype, shape and index arrays given (compared bit
// for bit), the arrays are neither copied nor validated again: `cached` itself comes back
// if its values are the same bits too, else a new handle with its structure (shared
// BSR structure and plan; copied CSR indices sharing their analyses) and these values.
// A cached handle's memory is never handed to Python (results are new handles), so its
// arrays are the ones it was validated with.
py::object make_csr(const std::string& dtype, index_t rows, index_t cols, std::uintptr_t row_ptr,
                    std::uintptr_t col_idx, std::uintptr_t values, index_t nnz, bool canonicalize,
                    const py::object& cached) {
  return with_dtype(dtype, [&]<class T>() -> py::object {
    detail::check_nonnegative(rows, "rows");
    if (!cached.is_none()) {
      const auto* c = std::get_if<CsrMatrix<T>>(&cached.cast<const Csr&>().m);
      if (c != nullptr && c->rows() == rows && c->cols() == cols && same_bits(c->row_ptr(), row_ptr, rows + 1) &&
          same_bits(c->col_indices(), col_idx, nnz)) {
        if (same_bits(c->values(), values, nnz)) return cached;
        CsrMatrix<T> A = *c;
        const std::span<T> v = A.values();
        if (!v.empty()) std::memcpy(v.data(), reinterpret_cast<const void*>(values), v.size_bytes());
        return py::cast(Csr{std::move(A)});
      }
    }
    auto ptr = copy_of<index_t>(row_ptr, rows + 1);
    auto cols_v = copy_of<index_t>(col_idx, nnz);
    auto vals = copy_of<T>(values, nnz);
    Csr h = [&] {
      py::gil_scoped_release nogil;
      return Csr{CsrMatrix<T>(rows, cols, std::move(ptr), std::move(cols_v), std::move(vals),
                              canonicalize ? Canonicalize::yes : Canonicalize::no)};
    }();
    return py::cast(std::move(h));
  });
}

Csr make_csr_from_coo(const std::string& dtype, index_t rows, index_t cols, std::uintptr_t row_idx,
                      std::uintptr_t col_idx, std::uintptr_t values, index_t nnz) {
  return with_dtype(dtype, [&]<class T>() {
    auto r = copy_of<index_t>(row_idx, nnz);
    auto c = copy_of<index_t>(col_idx, nnz);
    auto v = copy_of<T>(values, nnz);
    py::gil_scoped_release nogil;
    return Csr{to_csr(CooMatrix<T>(rows, cols, std::move(r), std::move(c), std::move(v)))};
  });
}

py::object make_bsr(const std::string& dtype, index_t rows, index_t cols, index_t block_size,
                    std::uintptr_t block_row_ptr, index_t n_block_row_ptr, std::uintptr_t block_col_idx,
                    std::uintptr_t blocks, index_t n_blocks, const py::object& cached) {
  return with_dtype(dtype, [&]<class T>() -> py::object {
    if (!cached.is_none()) {
      const auto* c = std::get_if<BsrMatrix<T>>(&cached.cast<const Bsr&>().m);
      if (c != nullptr && c->rows() == rows && c->cols() == cols && c->block_size() == block_size &&
          same_bits(c->structure().block_row_ptr(), block_row_ptr, n_block_row_ptr) &&
          same_bits(c->structure().block_col_indices(), block_col_idx, n_blocks)) {
        const auto n_values = static_cast<index_t>(c->blocks().size());
        if (same_bits(c->blocks(), blocks, n_values)) return cached;
        auto vals = copy_of<T>(blocks, n_values);
        Bsr h = [&] {
          py::gil_scoped_release nogil;
          return Bsr{BsrMatrix<T>(c->structure_ptr(), std::move(vals))};
        }();
        return py::cast(std::move(h));
      }
    }
    auto ptr = copy_of<index_t>(block_row_ptr, n_block_row_ptr);
    auto cols_v = copy_of<index_t>(block_col_idx, n_blocks);
    auto vals = copy_of<T>(blocks, detail::checked_mul(n_blocks, detail::checked_mul(block_size, block_size, "b * b"),
                                                       "n_blocks * b * b"));
    Bsr h = [&] {
      py::gil_scoped_release nogil;
      return Bsr{BsrMatrix<T>(rows, cols, block_size, std::move(ptr), std::move(cols_v), std::move(vals))};
    }();
    return py::cast(std::move(h));
  });
}

}  // namespace

void bind_formats(py::module_& m) {
  py::class_<Csr>(m, "Csr")
      .def_property_readonly("rows", [](const Csr& h) { return std::visit([](const auto& A) { return A.rows(); }, h.m); })
      .def_property_readonly("cols", [](const Csr& h) { return std::visit([](const auto& A) { return A.cols(); }, h.m); })
      .def_property_readonly("dtype", &dtype_of<Csr>)
      .def("arrays", &handle_arrays<Csr>,
           "(row_ptr, col_indices, values) as arrays over this handle's memory (copied index arrays when its "
           "structure is shared)")
      .def("values", &stored_values<Csr>, "the stored values as an array over this handle's memory");
  py::class_<Bsr>(m, "Bsr")
      .def_property_readonly("rows", [](const Bsr& h) { return std::visit([](const auto& A) { return A.rows(); }, h.m); })
      .def_property_readonly("cols", [](const Bsr& h) { return std::visit([](const auto& A) { return A.cols(); }, h.m); })
      .def_property_readonly("block_size",
                             [](const Bsr& h) { return std::visit([](const auto& A) { return A.block_size(); }, h.m); })
      .def_property_readonly("dtype", &dtype_of<Bsr>)
      .def("arrays", &handle_arrays<Bsr>,
           "(block_row_ptr, block_col_indices, blocks) as arrays over this handle's memory (copied index arrays "
           "when its structure is shared)")
      .def("values", &stored_values<Bsr>, "the stored blocks as an array over this handle's memory");

  // ---- construction and conversion ----
  m.def("csr", &make_csr, "CSR from raw arrays (copied, validated), or `cached` reused when its arrays are equal");
  m.def("csr_from_coo", &make_csr_from_coo, "CSR from COO triplets (sorted, duplicates summed)");
  m.def("bsr", &make_bsr, "BSR from raw arrays (copied, validated), or `cached` reused when its arrays are equal");
  m.def("csr_from_dense", [](const std::string& dtype, const DenseArg& a, double threshold) {
    return with_dtype(dtype, [&]<class T>() {
      py::gil_scoped_release nogil;
      return Csr{to_csr(view_of<const T>(a), threshold)};
    });
  });
  m.def("bsr_from_dense", [](const std::string& dtype, const DenseArg& a, index_t block_size, double threshold) {
    return with_dtype(dtype, [&]<class T>() {
      py::gil_scoped_release nogil;
      return Bsr{to_bsr(view_of<const T>(a), block_size, threshold)};
    });
  });
  m.def("csr_to_bsr", [](const Csr& h, index_t block_size, double threshold) {
    return run(h, [&](const auto& A) { return Bsr{to_bsr(A, block_size, threshold)}; });
  });
  // The block size choose_format picks for products of `width` columns; a threshold other
  // than 0 converts again at that block size, as to_bsr(A, BlockSize::automatic) takes none.
  m.def("csr_to_bsr_auto", [](const Csr& h, index_t width, double threshold) {
    return run(h, [&](const auto& A) {
      auto B = to_bsr(A, BlockSize::automatic, {.width = width});
      return Bsr{threshold == 0.0 ? std::move(B) : to_bsr(A, B.block_size(), threshold)};
    });
  });
  m.def("bsr_to_csr", [](const Bsr& h) { return run(h, [](const auto& A) { return Csr{to_csr(A)}; }); });
  m.def("eye_csr", [](const std::string& dtype, index_t n) {
    return with_dtype(dtype, [&]<class T>() { return Csr{eye_csr<T>(n)}; });
  });
}

}  // namespace trnsparse::python
