/* The control of the fat-binary tests: built with -march=haswell only, its
 * AVX2 loop must die with SIGILL on a pre-AVX2 CPU, proving that the tests
 * can tell a single-path binary from one that runs everywhere. */
#include <stdio.h>
int main(void) {
  volatile double a[64], b[64];
  double s = 0;
  for (int i = 0; i < 64; i++) { a[i] = i; b[i] = 2 * i; }  /* written: no zero-page reads */
  for (int i = 0; i < 64; i++) s += a[i] * b[i] + 1.0;
  printf("%g\n", s);
  return 0;
}
