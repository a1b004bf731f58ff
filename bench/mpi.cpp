// `trnsparse-mpi-bench`: the MPI layer next to PETSc on the same matrix in the same run.
//
//     mpirun -np 1 build/bin/trnsparse-mpi-bench --poisson 100
//     mpirun -np 2 build/bin/trnsparse-mpi-bench --poisson 100
//     build/bin/trnsparse-mpi-bench --baij elasticity3d:24 --block-size 3
//     build/bin/trnsparse-mpi-bench --sbaij elasticity3d:24 --block-size 3
//     mpirun -np 2 build/bin/trnsparse-mpi-bench --ksp cg --pc gamg --problem poisson3d:100 (mpi_ksp.cpp)
//
// Every process generates its rows of the 3D Poisson matrix (poisson3d, 7-point) and
// hands the same CSR arrays to trnsparse (DistCsrMatrix) and to PETSc (MATMPIAIJ).
// Timed: one SpMV (trnsparse spmv vs MatMult) and one CG iteration (mpi::cg with Jacobi
// vs KSPCG + PCJACOBI, both converging on the unpreconditioned relative residual), as the
// median over --reps runs of the slowest process. The results are checked against each
// other (SpMV relative difference, iteration counts, true residuals). One OpenMP thread
// per process unless --threads says otherwise (PETSc runs one thread per process).
// Process 0 prints one JSON line.
#include <mpi.h>
#include <petscksp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <span>
#include <limits>
#include <string>
#include <vector>

#include "trnsparse/convert.hpp"
#include "trnsparse/generators.hpp"
#include "trnsparse/io.hpp"
#include "trnsparse/mpi.hpp"
#include "trnsparse/ops.hpp"
#include "trnsparse/runtime.hpp"
#include "mpi_support.hpp"

namespace {

using namespace trnsparse::mpi_bench;


/// `--baij SOURCE --block-size B [--reps R]`, one process: PETSc's MatMult on the matrix
/// SOURCE names (a named_problem spec, or a Matrix Market file) stored as MATSEQBAIJ with
/// B x B blocks (the baseline of `trnsparse bench --section bsr --problem`). Prints
/// petsc_baij_ms and the relative difference from trnsparse's BSR product. `--sbaij`
/// (symmetric): MATSEQSBAIJ, PETSc's half storage (the upper block triangle, diagonal
/// blocks whole), printed as petsc_sbaij_ms.
int run_baij(const std::string& source, index_t b, int reps, bool symmetric) {
  const trnsparse::CsrMatrix<double> A = std::filesystem::exists(source)
                                             ? trnsparse::to_csr(trnsparse::read_matrix_market(source).entries)
                                             : trnsparse::named_problem<double>(source);
  if (b < 1 || A.rows() % b != 0 || A.cols() % b != 0) {
    std::fprintf(stderr, "trnsparse-mpi-bench: --block-size %lld must divide the %lld x %lld matrix\n",
                 static_cast<long long>(b), static_cast<long long>(A.rows()), static_cast<long long>(A.cols()));
    return 1;
  }
  const trnsparse::BsrMatrix<double> B = trnsparse::to_bsr(A, b);
  const trnsparse::BsrMatrix<double> stored = symmetric ? trnsparse::triangle(B, trnsparse::Triangle::upper) : B;
  const auto& s = stored.structure();
  std::vector<PetscInt> ia(s.block_row_ptr().begin(), s.block_row_ptr().end()),
      ja(s.block_col_indices().begin(), s.block_col_indices().end());
  Mat M;
  check(MatCreate(PETSC_COMM_SELF, &M), "MatCreate");
  check(MatSetSizes(M, static_cast<PetscInt>(A.rows()), static_cast<PetscInt>(A.cols()), static_cast<PetscInt>(A.rows()),
                    static_cast<PetscInt>(A.cols())),
        "MatSetSizes");
  check(MatSetType(M, symmetric ? MATSEQSBAIJ : MATSEQBAIJ), "MatSetType");
  // Row-oriented blocks (PETSc's default MAT_ROW_ORIENTED): trnsparse's block layout.
  if (symmetric)
    check(MatSeqSBAIJSetPreallocationCSR(M, static_cast<PetscInt>(b), ia.data(), ja.data(), stored.blocks().data()),
          "MatSeqSBAIJSetPreallocationCSR");
  else
    check(MatSeqBAIJSetPreallocationCSR(M, static_cast<PetscInt>(b), ia.data(), ja.data(), stored.blocks().data()),
          "MatSeqBAIJSetPreallocationCSR");
  Vec px, py;
  check(MatCreateVecs(M, &px, &py), "MatCreateVecs");
  std::vector<double> x(static_cast<std::size_t>(A.cols())), y(static_cast<std::size_t>(A.rows()));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.001 * static_cast<double>(i));
  double* a = nullptr;
  check(VecGetArray(px, &a), "VecGetArray");
  std::copy(x.begin(), x.end(), a);
  check(VecRestoreArray(px, &a), "VecRestoreArray");
  const double ms = median_ms(reps, [&] { check(MatMult(M, px, py), "MatMult"); });
  trnsparse::spmv(1.0, B, std::span<const double>(x), 0.0, std::span<double>(y));
  double diff = 0.0, ref = 0.0;
  const double* p = nullptr;
  check(VecGetArrayRead(py, &p), "VecGetArrayRead");
  for (std::size_t i = 0; i < y.size(); ++i) {
    diff = std::max(diff, std::fabs(y[i] - p[i]));
    ref = std::max(ref, std::fabs(p[i]));
  }
  check(VecRestoreArrayRead(py, &p), "VecRestoreArrayRead");
  const char* kind = symmetric ? "sbaij" : "baij";
  std::printf("{\"bench\":\"%s\",\"block_size\":%lld,\"n\":%lld,\"petsc_%s_ms\":%.6g,\"rel_diff\":%.3g}\n", kind,
              static_cast<long long>(b), static_cast<long long>(A.rows()), kind, ms, ref > 0 ? diff / ref : diff);
  check(VecDestroy(&px), "VecDestroy");
  check(VecDestroy(&py), "VecDestroy");
  check(MatDestroy(&M), "MatDestroy");
  return 0;
}

/// `--matmatmult SOURCE [--reps R]`, one process: PETSc's MatMatMult of the MATSEQAIJ
/// matrix SOURCE names with itself (the baseline of `trnsparse bench --section spgemm`):
/// the full product (MAT_INITIAL_MATRIX, symbolic and numeric) and the numeric phase
/// alone (MAT_REUSE_MATRIX). Prints petsc_ms, petsc_numeric_ms and C's stored entries.
int run_matmatmult(const std::string& source, int reps) {
  const trnsparse::CsrMatrix<double> A = std::filesystem::exists(source)
                                             ? trnsparse::to_csr(trnsparse::read_matrix_market(source).entries)
                                             : trnsparse::named_problem<double>(source);
  std::vector<PetscInt> ia(A.row_ptr().begin(), A.row_ptr().end()), ja(A.col_indices().begin(), A.col_indices().end());
  std::vector<double> va(A.values().begin(), A.values().end());
  Mat M, C;
  check(MatCreateSeqAIJWithArrays(PETSC_COMM_SELF, static_cast<PetscInt>(A.rows()), static_cast<PetscInt>(A.cols()),
                                  ia.data(), ja.data(), va.data(), &M),
        "MatCreateSeqAIJWithArrays");
  const double ms = median_ms(reps, [&] {
    check(MatMatMult(M, M, MAT_INITIAL_MATRIX, PETSC_DEFAULT, &C), "MatMatMult");
    check(MatDestroy(&C), "MatDestroy");
  });
  check(MatMatMult(M, M, MAT_INITIAL_MATRIX, PETSC_DEFAULT, &C), "MatMatMult");
  const double numeric_ms = median_ms(reps, [&] { check(MatMatMult(M, M, MAT_REUSE_MATRIX, PETSC_DEFAULT, &C), "MatMatMult"); });
  MatInfo info;
  check(MatGetInfo(C, MAT_LOCAL, &info), "MatGetInfo");
  std::printf("{\"bench\":\"matmatmult\",\"n\":%lld,\"petsc_ms\":%.6g,\"petsc_numeric_ms\":%.6g,\"nnz_c\":%.0f}\n",
              static_cast<long long>(A.rows()), ms, numeric_ms, info.nz_used);
  check(MatDestroy(&C), "MatDestroy");
  check(MatDestroy(&M), "MatDestroy");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  if (argc >= 2 && std::string(argv[1]) == "--ksp") {
    int status = 1;
    try {
      status = run_ksp(argc, argv);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "trnsparse-mpi-bench: %s\n", e.what());
    }
    MPI_Finalize();
    return status;
  }
  if (argc >= 3 && std::string(argv[1]) == "--matmatmult") {
    const int reps = argc >= 5 && std::string(argv[3]) == "--reps" ? std::max(1, std::atoi(argv[4])) : 5;
    int petsc_argc = 1;
    char** petsc_argv = argv;
    check(PetscInitialize(&petsc_argc, &petsc_argv, nullptr, nullptr), "PetscInitialize");
    int status = 1;
    try {
      status = run_matmatmult(argv[2], reps);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "trnsparse-mpi-bench: %s\n", e.what());
    }
    check(PetscFinalize(), "PetscFinalize");
    MPI_Finalize();
    return status;
  }
  if (argc >= 3 && (std::string(argv[1]) == "--baij" || std::string(argv[1]) == "--sbaij")) {
    index_t b = 0;
    int reps = 20;
    for (int i = 3; i + 1 < argc; i += 2) {
      const std::string a = argv[i];
      if (a == "--block-size") b = std::atoll(argv[i + 1]);
      else if (a == "--reps") reps = std::max(1, std::atoi(argv[i + 1]));
    }
    int petsc_argc = 1;
    char** petsc_argv = argv;
    check(PetscInitialize(&petsc_argc, &petsc_argv, nullptr, nullptr), "PetscInitialize");
    int status = 1;
    try {
      status = run_baij(argv[2], b, reps, std::string(argv[1]) == "--sbaij");
    } catch (const std::exception& e) {
      std::fprintf(stderr, "trnsparse-mpi-bench: %s\n", e.what());
    }
    check(PetscFinalize(), "PetscFinalize");
    MPI_Finalize();
    return status;
  }
  index_t n = 100;
  int reps = 10, threads = 1;
  double tol = 1e-8;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--poisson" && has_value) n = std::atoll(argv[++i]);
    else if (a == "--reps" && has_value) reps = std::atoi(argv[++i]);
    else if (a == "--threads" && has_value) threads = std::atoi(argv[++i]);
    else if (a == "--tol" && has_value) tol = std::atof(argv[++i]);
    else {
      if (rank_of(MPI_COMM_WORLD) == 0)
        std::fprintf(stderr, "usage: trnsparse-mpi-bench [--poisson N] [--reps R] [--threads T] [--tol TOL]\n");
      MPI_Finalize();
      return 1;
    }
  }
  if (n < 2 || reps < 1 || threads < 1) {
    if (rank_of(MPI_COMM_WORLD) == 0) std::fprintf(stderr, "trnsparse-mpi-bench: expected N >= 2, R >= 1, T >= 1\n");
    MPI_Finalize();
    return 1;
  }
  int petsc_argc = 1;
  char** petsc_argv = argv;
  check(PetscInitialize(&petsc_argc, &petsc_argv, nullptr, nullptr), "PetscInitialize");
  trnsparse::set_num_threads(threads);
  const int rank = rank_of(MPI_COMM_WORLD), ranks = size_of(MPI_COMM_WORLD);
  {
    // The same rows for both: an even split (every Poisson row stores the same work).
    const index_t N = n * n * n, first = N * rank / ranks, last = N * (rank + 1) / ranks, m = last - first;
    const trnsparse::CsrMatrix<double> rows = trnsparse::poisson3d_rows<double>(n, first, last);
    const trnsparse::mpi::DistCsrMatrix<double> D(MPI_COMM_WORLD, rows);

    if (static_cast<double>(N) * 7 > static_cast<double>(std::numeric_limits<PetscInt>::max())) {
      if (rank == 0) std::fprintf(stderr, "trnsparse-mpi-bench: the problem exceeds PETSc's index type\n");
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    std::vector<PetscInt> ia(rows.row_ptr().begin(), rows.row_ptr().end()), ja(rows.col_indices().begin(), rows.col_indices().end());
    Mat A;
    check(MatCreateMPIAIJWithArrays(PETSC_COMM_WORLD, static_cast<PetscInt>(m), static_cast<PetscInt>(m), static_cast<PetscInt>(N),
                                    static_cast<PetscInt>(N), ia.data(), ja.data(), rows.values().data(), &A),
          "MatCreateMPIAIJWithArrays");
    Vec px, py, pb, psol;
    check(MatCreateVecs(A, &px, &py), "MatCreateVecs");
    check(VecDuplicate(px, &pb), "VecDuplicate");
    check(VecDuplicate(px, &psol), "VecDuplicate");

    // x: a fixed pattern of global index; b = ones.
    std::vector<double> x(static_cast<std::size_t>(m)), y(x.size()), b(x.size(), 1.0);
    for (index_t i = 0; i < m; ++i) x[i] = std::sin(0.001 * static_cast<double>(first + i));
    double* a = nullptr;
    check(VecGetArray(px, &a), "VecGetArray");
    std::copy(x.begin(), x.end(), a);
    check(VecRestoreArray(px, &a), "VecRestoreArray");
    check(VecSet(pb, 1.0), "VecSet");

    const double ours_spmv = median_ms(reps * 5, [&] { D.spmv(1.0, x, 0.0, y); });
    const double petsc_spmv = median_ms(reps * 5, [&] { check(MatMult(A, px, py), "MatMult"); });
    double diff = 0.0, ref = 0.0;
    {
      const double* p = nullptr;
      check(VecGetArrayRead(py, &p), "VecGetArrayRead");
      for (index_t i = 0; i < m; ++i) {
        diff = std::max(diff, std::fabs(y[i] - p[i]));
        ref = std::max(ref, std::fabs(p[i]));
      }
      check(VecRestoreArrayRead(py, &p), "VecRestoreArrayRead");
      const double both[2] = {diff, ref};
      double out[2];
      MPI_Allreduce(both, out, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      diff = out[0] / out[1];
    }

    // CG with Jacobi, to the same tolerance on ||b - Ax|| / ||b||.
    const std::vector<double> M = trnsparse::mpi::jacobi_preconditioner(D);
    trnsparse::SolveResult<double> ours;
    const double ours_total = median_ms(reps, [&] { ours = trnsparse::mpi::cg(D, b, {.tol = tol, .max_iter = 100000, .preconditioner = M}); });
    KSP ksp;
    PC pc;
    check(KSPCreate(PETSC_COMM_WORLD, &ksp), "KSPCreate");
    check(KSPSetOperators(ksp, A, A), "KSPSetOperators");
    check(KSPSetType(ksp, KSPCG), "KSPSetType");
    check(KSPGetPC(ksp, &pc), "KSPGetPC");
    check(PCSetType(pc, PCJACOBI), "PCSetType");
    check(KSPSetNormType(ksp, KSP_NORM_UNPRECONDITIONED), "KSPSetNormType");
    check(KSPSetTolerances(ksp, tol, 0.0, PETSC_DEFAULT, 100000), "KSPSetTolerances");
    check(KSPSetUp(ksp), "KSPSetUp");
    const double petsc_total = median_ms(reps, [&] { check(KSPSolve(ksp, pb, psol), "KSPSolve"); });
    PetscInt petsc_iters = 0;
    check(KSPGetIterationNumber(ksp, &petsc_iters), "KSPGetIterationNumber");
    // True residuals of both solutions, through trnsparse's product.
    std::vector<double> r = b, xs(static_cast<std::size_t>(m)), rp = b;
    D.spmv(-1.0, ours.x, 1.0, r);
    {
      const double* p = nullptr;
      check(VecGetArrayRead(psol, &p), "VecGetArrayRead");
      std::copy(p, p + m, xs.begin());
      check(VecRestoreArrayRead(psol, &p), "VecRestoreArrayRead");
    }
    D.spmv(-1.0, xs, 1.0, rp);
    const double bn = global_norm(b), ours_res = global_norm(r) / bn, petsc_res = global_norm(rp) / bn;

    if (rank == 0) {
      const auto per = [](double total, double iters) { return iters > 0 ? total / iters : 0.0; };
      std::printf(
          "{\"bench\":\"mpi\",\"matrix\":\"poisson3d(%lld)\",\"ranks\":%d,\"threads\":%d,\"n\":%lld,\"nnz\":%lld,"
          "\"trnsparse_spmv_ms\":%.6g,\"petsc_spmv_ms\":%.6g,\"spmv_rel_diff\":%.3g,"
          "\"trnsparse_iter_ms\":%.6g,\"petsc_iter_ms\":%.6g,\"trnsparse_iterations\":%lld,\"petsc_iterations\":%lld,"
          "\"trnsparse_rel_residual\":%.3g,\"petsc_rel_residual\":%.3g,\"trnsparse_solve_ms\":%.6g,\"petsc_solve_ms\":%.6g,"
          "\"ghost_rows_rank0\":%lld}\n",
          static_cast<long long>(n), ranks, trnsparse::num_threads(), static_cast<long long>(N),
          static_cast<long long>(D.global_stored()), ours_spmv, petsc_spmv, diff,
          per(ours_total, static_cast<double>(ours.iterations)), per(petsc_total, static_cast<double>(petsc_iters)),
          static_cast<long long>(ours.iterations), static_cast<long long>(petsc_iters), ours_res, petsc_res, ours_total,
          petsc_total, static_cast<long long>(D.ghost_blocks()));
      std::fflush(stdout);
    }
    check(KSPDestroy(&ksp), "KSPDestroy");
    check(VecDestroy(&px), "VecDestroy");
    check(VecDestroy(&py), "VecDestroy");
    check(VecDestroy(&pb), "VecDestroy");
    check(VecDestroy(&psol), "VecDestroy");
    check(MatDestroy(&A), "MatDestroy");
  }
  check(PetscFinalize(), "PetscFinalize");
  MPI_Finalize();
  return 0;
}
