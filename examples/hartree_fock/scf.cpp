#include "scf.hpp"

#include <chrono>
#include <cmath>
#include <deque>
#include <string>
#include <utility>

#include "lapack.hpp"
#include "trnsparse/error.hpp"

namespace trnsparse::hf {
namespace {

using Clock = std::chrono::steady_clock;
using Matrix = Dense<double>;

/// A · B (or Aᵀ · B): the SCF's matrices are nbf x nbf, a few hundred at most.
Matrix multiply(const Matrix& A, const Matrix& B, bool transpose_a = false) {
  const index_t m = transpose_a ? A.cols() : A.rows();
  const index_t inner = transpose_a ? A.rows() : A.cols();
  Matrix C(m, B.cols());
  for (index_t i = 0; i < m; ++i)
    for (index_t k = 0; k < inner; ++k) {
      const double a = transpose_a ? A(k, i) : A(i, k);
      if (a == 0.0) continue;
      for (index_t j = 0; j < B.cols(); ++j) C(i, j) += a * B(k, j);
    }
  return C;
}

Matrix combine(double alpha, const Matrix& A, double beta, const Matrix& B) {
  Matrix C(A.rows(), A.cols());
  for (index_t i = 0; i < A.rows(); ++i)
    for (index_t j = 0; j < A.cols(); ++j) C(i, j) = alpha * A(i, j) + beta * B(i, j);
  return C;
}

/// Σ_ij A_ij B_ij.
double dot(const Matrix& A, const Matrix& B) {
  double s = 0.0;
  const std::span<const double> a = A.values(), b = B.values();
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

/// D = C_occ C_occᵀ from the lowest `n_occ` orbitals of F in the orthogonal basis X.
Matrix density(const Matrix& F, const Matrix& X, index_t n_occ) {
  const lapack::SymmetricEigen e = lapack::eigh(multiply(X, multiply(F, X), true));
  const Matrix C = multiply(X, e.vectors);
  Matrix D(C.rows(), C.rows());
  for (index_t p = 0; p < C.rows(); ++p)
    for (index_t q = 0; q < C.rows(); ++q) {
      double s = 0.0;
      for (index_t k = 0; k < n_occ; ++k) s += C(p, k) * C(q, k);
      D(p, q) = s;
    }
  return D;
}

/// Pulay's DIIS: the Fock matrix combination Σ c_i F_i, Σ c_i = 1, with the smallest
/// combined error Σ c_i e_i.
class Diis {
public:
  explicit Diis(int size) : size_(static_cast<std::size_t>(size)) {}

  Matrix extrapolate(Matrix F, Matrix error) {
    if (size_ == 0) return F;
    focks_.push_back(std::move(F));
    errors_.push_back(std::move(error));
    if (focks_.size() > size_) {
      focks_.pop_front();
      errors_.pop_front();
    }
    while (focks_.size() > 1) {
      const int m = static_cast<int>(focks_.size());
      const int n = m + 1;
      std::vector<double> B(static_cast<std::size_t>(n * n), -1.0);  // column-major, symmetric
      std::vector<double> c(static_cast<std::size_t>(n), 0.0);
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < m; ++j)
          B[static_cast<std::size_t>(i * n + j)] = dot(errors_[static_cast<std::size_t>(i)], errors_[static_cast<std::size_t>(j)]);
      B[static_cast<std::size_t>(n * n - 1)] = 0.0;
      c[static_cast<std::size_t>(m)] = -1.0;
      if (!lapack::solve(B, c)) {  // singular: the oldest vectors are nearly dependent
        focks_.pop_front();
        errors_.pop_front();
        continue;
      }
      Matrix out(focks_.front().rows(), focks_.front().cols());
      for (int i = 0; i < m; ++i) out = combine(1.0, out, c[static_cast<std::size_t>(i)], focks_[static_cast<std::size_t>(i)]);
      return out;
    }
    return focks_.back();
  }

private:
  std::size_t size_;
  std::deque<Matrix> focks_;
  std::deque<Matrix> errors_;
};

}  // namespace

ScfResult run_rhf(const Molecule& molecule, const OneElectron& one, const EriSupermatrices& eri,
                  const ScfOptions& options, const std::function<void(const ScfIteration&)>& on_iteration) {
  const index_t n = one.S.rows();
  if (one.T.rows() != n || one.V.rows() != n || eri.nbf() != n)
    throw DimensionMismatch("run_rhf: S is " + std::to_string(n) + " x " + std::to_string(n) + ", T has " +
                            std::to_string(one.T.rows()) + " rows, V " + std::to_string(one.V.rows()) +
                            ", the ERIs " + std::to_string(eri.nbf()));
  if (options.max_iterations < 1 || options.diis_size < 0 || !(options.energy_tolerance > 0.0) ||
      !(options.commutator_tolerance > 0.0))
    throw InvalidArgument("run_rhf: max_iterations >= 1, diis_size >= 0 and positive tolerances are required");
  const int electrons = nuclear_charge(molecule) - options.charge;
  if (electrons <= 0 || electrons % 2 != 0 || electrons / 2 > n)
    throw InvalidArgument("run_rhf: " + std::to_string(electrons) +
                          " electrons; restricted Hartree-Fock needs an even, positive number, at most 2 nbf = " +
                          std::to_string(2 * n));
  const index_t n_occ = electrons / 2;

  const auto start = Clock::now();
  ScfResult result;
  result.nuclear_repulsion = nuclear_repulsion(molecule);
  const Matrix H = combine(1.0, one.T, 1.0, one.V);
  const Matrix& S = one.S;

  // X = S^(-1/2) = U s^(-1/2) Uᵀ.
  const lapack::SymmetricEigen s = lapack::eigh(S);
  if (!(s.values.front() > 1e-10))
    throw InvalidArgument("run_rhf: the overlap matrix is singular (smallest eigenvalue " +
                          std::to_string(s.values.front()) + "): the basis is linearly dependent");
  Matrix Us = s.vectors;
  for (index_t i = 0; i < n; ++i)
    for (index_t k = 0; k < n; ++k) Us(i, k) /= std::sqrt(s.values[static_cast<std::size_t>(k)]);
  Matrix X(n, n);
  for (index_t i = 0; i < n; ++i)
    for (index_t j = 0; j < n; ++j)
      for (index_t k = 0; k < n; ++k) X(i, j) += Us(i, k) * s.vectors(j, k);

  Matrix D = density(H, X, n_occ);  // core-Hamiltonian guess
  Matrix J(n, n), K(n, n), F(n, n);
  Diis diis(options.diis_size);
  double previous = 0.0;
  for (int it = 1; it <= options.max_iterations; ++it) {
    const auto jk_start = Clock::now();
    eri.coulomb_exchange(D, J, K);
    ScfIteration info;
    info.jk_seconds = std::chrono::duration<double>(Clock::now() - jk_start).count();
    result.jk_seconds += info.jk_seconds;
    F = combine(1.0, H, 1.0, combine(2.0, J, -1.0, K));
    result.electronic_energy = dot(D, H) + dot(D, F);
    info.iteration = it;
    info.energy = result.electronic_energy + result.nuclear_repulsion;
    info.delta_energy = info.energy - previous;
    const Matrix FDS = multiply(F, multiply(D, S));
    Matrix error(n, n);  // FDS - SDF = FDS - (FDS)ᵀ
    double norm2 = 0.0;
    for (index_t i = 0; i < n; ++i)
      for (index_t j = 0; j < n; ++j) {
        error(i, j) = FDS(i, j) - FDS(j, i);
        norm2 += error(i, j) * error(i, j);
      }
    info.commutator_norm = std::sqrt(norm2);
    previous = info.energy;
    result.iterations = it;
    if (on_iteration) on_iteration(info);
    if (std::abs(info.delta_energy) < options.energy_tolerance &&
        info.commutator_norm < options.commutator_tolerance) {
      result.converged = true;
      break;
    }
    // DIIS errors in the orthonormal basis: Xᵀ (FDS - SDF) X.
    D = density(diis.extrapolate(F, multiply(X, multiply(error, X), true)), X, n_occ);
  }
  result.orbital_energies = lapack::eigh(multiply(X, multiply(F, X), true)).values;
  result.density = std::move(D);
  result.energy = result.electronic_energy + result.nuclear_repulsion;
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

}  // namespace trnsparse::hf
