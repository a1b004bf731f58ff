// The linear layer with a block-sparse weight (trnsparse/linear.hpp): a layout handle
// (the weight's structure, validated once per layout) and the four kernels over
// caller-owned buffers. The weight's blocks, X, dY and the outputs are passed by
// address and read or written in place, so a model's parameter and its gradient are
// never copied.

#include "bindings.hpp"
#include "common.hpp"

namespace trnsparse::python {
namespace {

/// The structure of a BlockSparseLinear's weight: immutable, shared by its plan.
struct LinearLayout {
  std::shared_ptr<const BsrStructure> structure;
};

/// Calls f.template operator()<TA, TY>() for operands `dtype` and outputs `out_dtype`:
/// the same type, or float32 outputs of bfloat16 operands.
template <class F>
void with_types(const std::string& dtype, const std::string& out_dtype, F&& f) {
  with_dtype(dtype, [&]<class TA>() {
    if (out_dtype == dtype) return f.template operator()<TA, TA>();
    if constexpr (std::is_same_v<TA, bf16>)
      if (out_dtype == "float32") return f.template operator()<bf16, float>();
    throw NotSupported("linear: output dtype " + out_dtype + " for " + dtype + " operands");
  });
}

template <class T>
BlockSparseWeight<T> weight(const LinearLayout& l, std::uintptr_t blocks) {
  return {l.structure, reinterpret_cast<T*>(blocks)};
}

}  // namespace

void bind_linear(py::module_& m) {
  py::class_<LinearLayout>(m, "LinearLayout")
      .def_property_readonly("n_blocks", [](const LinearLayout& l) { return l.structure->n_blocks(); });
  m.def(
      "linear_layout",
      [](index_t rows, index_t cols, index_t block_size, std::uintptr_t ptr, index_t ptr_len, std::uintptr_t idx,
         index_t n_blocks) {
        auto p = copy_of<index_t>(ptr, ptr_len);
        auto i = copy_of<index_t>(idx, n_blocks);
        py::gil_scoped_release nogil;
        return LinearLayout{BsrStructure::make(rows, cols, block_size, std::move(p), std::move(i))};
      },
      "The weight structure (out x in) from block row pointers and block column indices (copied, validated)");
  using Guard = py::call_guard<py::gil_scoped_release>;
  m.def(
      "linear_forward",
      [](const LinearLayout& l, const std::string& dtype, std::uintptr_t blocks, const DenseArg& X,
         std::uintptr_t bias, const DenseArg& Y, const std::string& out_dtype) {
        with_types(dtype, out_dtype, [&]<class TA, class TY>() {
          const std::span<const acc_t<TA>> b =
              bias ? std::span<const acc_t<TA>>(reinterpret_cast<const acc_t<TA>*>(bias),
                                                static_cast<std::size_t>(l.structure->rows()))
                   : std::span<const acc_t<TA>>();
          linear_forward<TA, TY>(weight<const TA>(l, blocks), view_of<const TA>(X), b, view_of<TY>(Y));
        });
      },
      Guard(), "Y = X Wᵀ + bias (bias: the address of W.rows accumulator-type values, or 0)");
  m.def(
      "linear_backward_input",
      [](const LinearLayout& l, const std::string& dtype, std::uintptr_t blocks, const DenseArg& dY,
         const DenseArg& dX, const std::string& out_dtype) {
        with_types(dtype, out_dtype, [&]<class TA, class TY>() {
          linear_backward_input<TA, TY>(weight<const TA>(l, blocks), view_of<const TA>(dY), view_of<TY>(dX));
        });
      },
      Guard(), "dX = dY W");
  m.def(
      "linear_backward_weight",
      [](const LinearLayout& l, const std::string& dtype, const DenseArg& dY, const DenseArg& X, std::uintptr_t dW) {
        with_dtype(dtype, [&]<class T>() {
          linear_backward_weight<T>(view_of<const T>(dY), view_of<const T>(X), weight<T>(l, dW));
        });
      },
      Guard(), "dW = dYᵀ X on the layout's blocks (written in place; padding untouched)");
  m.def(
      "linear_backward_bias",
      [](const std::string& dtype, const DenseArg& dY, std::uintptr_t db) {
        with_dtype(dtype, [&]<class T>() {
          const DenseView<const T> d = view_of<const T>(dY);
          linear_backward_bias<T>(d, std::span<acc_t<T>>(reinterpret_cast<acc_t<T>*>(db), static_cast<std::size_t>(d.cols)));
        });
      },
      Guard(), "db = the column sums of dY, in accumulator type");
}

}  // namespace trnsparse::python
