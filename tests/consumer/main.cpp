// Builds a small CSR matrix, converts it to BSR and checks y = A x. Exit code 0 on success.
#include <cstdio>
#include <span>
#include <vector>

#include <trnsparse/trnsparse.hpp>

int main() {
  // [[1 0 2]
  //  [0 3 0]
  //  [4 0 5]]
  const trnsparse::CsrMatrix<double> A(3, 3, {0, 2, 3, 5}, {0, 2, 1, 0, 2}, {1, 2, 3, 4, 5});
  const trnsparse::BsrMatrix<double> B = trnsparse::to_bsr(A, 2);
  const std::vector<double> x{1, 2, 3};
  std::vector<double> y(3);
  trnsparse::spmv(1.0, B, x, 0.0, std::span(y));

  const std::vector<double> expected{7, 6, 19};
  if (y != expected) {
    std::fprintf(stderr, "consumer: A x = [%g %g %g], expected [7 6 19]\n", y[0], y[1], y[2]);
    return 1;
  }
  std::printf("consumer: trnsparse %s works from its installed package\n", trnsparse::version_string);
  return 0;
}
