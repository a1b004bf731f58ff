// `trnsparse-mpi-bench --ksp cg|gmres|bcgs --pc gamg|hypre|bjacobi-icc|bjacobi-ilu|jacobi|none
//  --problem SPEC [--rtol R] [--restart M] [--reps N] [-- PETSC_OPTIONS...]`:
// PETSc's time to solution on a generated problem (named_problem) or a Matrix Market
// file, the baseline of `trnsparse bench --section krylov` and of docs/solvers.md.
//
// The rows are split evenly over the processes (whole nodes for elasticity3d, whose
// matrix gets block size 3 and, for GAMG, the rigid-body modes of its node coordinates
// as near-nullspace: GAMG's best configuration for elasticity). b = ones. CG converges
// on the unpreconditioned residual, GMRES and BiCGStab are preconditioned on the right:
// all three stop on ||b - A x|| / ||b|| <= rtol, as ours do. Each repetition builds a
// fresh KSP (setup = KSPSetUp, which builds the preconditioner; solve = KSPSolve); the
// medians over the repetitions of the slowest process are printed by process 0 as one
// JSON line, with the true relative residual of the last solution. PETSc options after
// `--` (e.g. -pc_gamg_threshold 0.02) reach the options database, applied last.
#include <petscksp.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "mpi_support.hpp"
#include "trnsparse/convert.hpp"
#include "trnsparse/generators.hpp"
#include "trnsparse/io.hpp"
#include "trnsparse/ops.hpp"

namespace trnsparse::mpi_bench {

namespace {

struct KspOptions {
  std::string ksp = "cg", pc = "gamg", problem;
  double rtol = 1e-8;
  int restart = 30, reps = 3;
};

/// The matrix SPEC names: a named problem or a Matrix Market file.
CsrMatrix<double> load(const std::string& spec) {
  if (spec.find(':') != std::string::npos && spec.find('/') == std::string::npos) return named_problem<double>(spec);
  return to_csr(read_matrix_market(spec).entries);
}

void set_pc(PC pc, const std::string& name) {
  if (name == "gamg") check(PCSetType(pc, PCGAMG), "PCSetType gamg");
  else if (name == "hypre") {
    check(PCSetType(pc, PCHYPRE), "PCSetType hypre");
    check(PCHYPRESetType(pc, "boomeramg"), "PCHYPRESetType");
  } else if (name == "bjacobi-icc" || name == "bjacobi-ilu") {
    check(PCSetType(pc, PCBJACOBI), "PCSetType bjacobi");
    check(PetscOptionsSetValue(nullptr, "-sub_pc_type", name == "bjacobi-icc" ? "icc" : "ilu"), "-sub_pc_type");
  } else if (name == "jacobi") check(PCSetType(pc, PCJACOBI), "PCSetType jacobi");
  else if (name == "none") check(PCSetType(pc, PCNONE), "PCSetType none");
  else throw std::invalid_argument("--pc " + name + ": expected gamg, hypre, bjacobi-icc, bjacobi-ilu, jacobi or none");
}

int solve(const KspOptions& o) {
  const int rank = rank_of(MPI_COMM_WORLD), ranks = size_of(MPI_COMM_WORLD);
  const CsrMatrix<double> full = load(o.problem);
  const bool elasticity = o.problem.rfind("elasticity3d:", 0) == 0;
  const index_t bs = elasticity ? 3 : 1, N = full.rows(), nodes = N / bs;
  const index_t first = nodes * rank / ranks * bs, last = nodes * (rank + 1) / ranks * bs, m = last - first;
  std::vector<PetscInt> ia(static_cast<std::size_t>(m) + 1), ja;
  std::vector<PetscScalar> va;
  for (index_t i = first; i < last; ++i) {
    for (index_t e = full.row_ptr()[i]; e < full.row_ptr()[i + 1]; ++e) {
      ja.push_back(static_cast<PetscInt>(full.col_indices()[e]));
      va.push_back(full.values()[e]);
    }
    ia[static_cast<std::size_t>(i - first) + 1] = static_cast<PetscInt>(ja.size());
  }
  Mat A;
  check(MatCreate(PETSC_COMM_WORLD, &A), "MatCreate");
  check(MatSetSizes(A, static_cast<PetscInt>(m), static_cast<PetscInt>(m), static_cast<PetscInt>(N),
                    static_cast<PetscInt>(N)),
        "MatSetSizes");
  check(MatSetType(A, MATMPIAIJ), "MatSetType");
  check(MatSetBlockSize(A, static_cast<PetscInt>(bs)), "MatSetBlockSize");
  check(MatMPIAIJSetPreallocationCSR(A, ia.data(), ja.data(), va.data()), "MatMPIAIJSetPreallocationCSR");
  Vec b, x;
  check(MatCreateVecs(A, &x, &b), "MatCreateVecs");
  check(VecSet(b, 1.0), "VecSet");
  MatNullSpace rigid = nullptr;
  if (elasticity && o.pc == "gamg") {
    const Dense<double> xyz = elasticity3d_coordinates(std::stoll(o.problem.substr(13)));
    Vec coords;
    check(VecCreateMPI(PETSC_COMM_WORLD, static_cast<PetscInt>(m), static_cast<PetscInt>(N), &coords), "VecCreateMPI");
    check(VecSetBlockSize(coords, 3), "VecSetBlockSize");
    PetscScalar* c = nullptr;
    check(VecGetArray(coords, &c), "VecGetArray");
    for (index_t i = 0; i < m; ++i) c[i] = xyz((first + i) / 3, (first + i) % 3);
    check(VecRestoreArray(coords, &c), "VecRestoreArray");
    check(MatNullSpaceCreateRigidBody(coords, &rigid), "MatNullSpaceCreateRigidBody");
    check(MatSetNearNullSpace(A, rigid), "MatSetNearNullSpace");
    check(VecDestroy(&coords), "VecDestroy");
  }
  std::vector<double> setup, solve;
  PetscInt iterations = 0;
  KSPConvergedReason reason = KSP_CONVERGED_ITERATING;
  for (int r = 0; r < o.reps; ++r) {
    KSP ksp;
    PC pc;
    check(KSPCreate(PETSC_COMM_WORLD, &ksp), "KSPCreate");
    check(KSPSetOperators(ksp, A, A), "KSPSetOperators");
    check(KSPSetType(ksp, o.ksp.c_str()), "KSPSetType");
    check(KSPGetPC(ksp, &pc), "KSPGetPC");
    set_pc(pc, o.pc);
    if (o.ksp == "cg") check(KSPSetNormType(ksp, KSP_NORM_UNPRECONDITIONED), "KSPSetNormType");
    else check(KSPSetPCSide(ksp, PC_RIGHT), "KSPSetPCSide");
    if (o.ksp == "gmres") check(KSPGMRESSetRestart(ksp, o.restart), "KSPGMRESSetRestart");
    check(KSPSetTolerances(ksp, o.rtol, 0.0, PETSC_DEFAULT, 100000), "KSPSetTolerances");
    check(KSPSetFromOptions(ksp), "KSPSetFromOptions");
    check(VecSet(x, 0.0), "VecSet");
    MPI_Barrier(PETSC_COMM_WORLD);
    const auto t0 = std::chrono::steady_clock::now();
    check(KSPSetUp(ksp), "KSPSetUp");
    MPI_Barrier(PETSC_COMM_WORLD);
    const auto t1 = std::chrono::steady_clock::now();
    check(KSPSolve(ksp, b, x), "KSPSolve");
    MPI_Barrier(PETSC_COMM_WORLD);
    const auto t2 = std::chrono::steady_clock::now();
    setup.push_back(std::chrono::duration<double>(t1 - t0).count());
    solve.push_back(std::chrono::duration<double>(t2 - t1).count());
    check(KSPGetIterationNumber(ksp, &iterations), "KSPGetIterationNumber");
    check(KSPGetConvergedReason(ksp, &reason), "KSPGetConvergedReason");
    check(KSPDestroy(&ksp), "KSPDestroy");
  }
  // The true residual of the last solution.
  Vec res;
  check(VecDuplicate(b, &res), "VecDuplicate");
  check(MatMult(A, x, res), "MatMult");
  check(VecAYPX(res, -1.0, b), "VecAYPX");
  PetscReal rn = 0, bn = 0;
  check(VecNorm(res, NORM_2, &rn), "VecNorm");
  check(VecNorm(b, NORM_2, &bn), "VecNorm");
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  if (rank == 0) {
    std::printf("{\"bench\":\"petsc_ksp\",\"problem\":\"%s\",\"n\":%lld,\"ranks\":%d,\"method\":\"%s\",\"precond\":\"%s\","
                "\"iterations\":%lld,\"converged\":%s,\"rel_residual\":%.3g,\"setup_seconds\":%.6g,\"seconds\":%.6g,"
                "\"total_seconds\":%.6g}\n",
                o.problem.c_str(), static_cast<long long>(N), ranks, o.ksp.c_str(), o.pc.c_str(),
                static_cast<long long>(iterations), reason > 0 ? "true" : "false", rn / bn, median(setup),
                median(solve), median(setup) + median(solve));
    std::fflush(stdout);
  }
  check(VecDestroy(&res), "VecDestroy");
  if (rigid) check(MatNullSpaceDestroy(&rigid), "MatNullSpaceDestroy");
  check(VecDestroy(&x), "VecDestroy");
  check(VecDestroy(&b), "VecDestroy");
  check(MatDestroy(&A), "MatDestroy");
  return reason > 0 ? 0 : 3;
}

}  // namespace

int run_ksp(int argc, char** argv) {
  KspOptions o;
  int i = 1, petsc_first = argc;
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") {
      petsc_first = i + 1;
      break;
    }
    if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
    const std::string v = argv[++i];
    if (a == "--ksp") o.ksp = v;
    else if (a == "--pc") o.pc = v;
    else if (a == "--problem") o.problem = v;
    else if (a == "--rtol") o.rtol = std::stod(v);
    else if (a == "--restart") o.restart = std::stoi(v);
    else if (a == "--reps") o.reps = std::max(1, std::stoi(v));
    else throw std::invalid_argument("unknown option " + a);
  }
  if (o.problem.empty()) throw std::invalid_argument("--problem SPEC is required");
  if (o.ksp != "cg" && o.ksp != "gmres" && o.ksp != "bcgs")
    throw std::invalid_argument("--ksp " + o.ksp + ": expected cg, gmres or bcgs");
  // PETSc sees the program name and the options after `--`.
  std::vector<char*> petsc_argv{argv[0]};
  for (int k = petsc_first; k < argc; ++k) petsc_argv.push_back(argv[k]);
  int petsc_argc = static_cast<int>(petsc_argv.size());
  char** pa = petsc_argv.data();
  check(PetscInitialize(&petsc_argc, &pa, nullptr, nullptr), "PetscInitialize");
  int status = 1;
  try {
    status = solve(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "trnsparse-mpi-bench: %s\n", e.what());
  }
  check(PetscFinalize(), "PetscFinalize");
  return status;
}

}  // namespace trnsparse::mpi_bench
