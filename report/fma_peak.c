/* The machine's measured floating-point peak for the benchmark report: one
 * process per core, each running independent chains of fused multiply-adds
 * (enough of them to hide FMA latency), on the widest vectors the CPU has.
 * Prints GFLOPS of this core. HPL's peak goal (report/goals.yaml) is against this. */
#include <immintrin.h>
#include <stdio.h>
#include <time.h>

#define CHAINS 12
#define ITERS 100000000L  /* half a second at 20 GFLOPS a core: a sample long enough to mean something */

__attribute__((target("avx512f"))) static double run_avx512(void) {
    __m512d acc[CHAINS], a = _mm512_set1_pd(1.0000001), b = _mm512_set1_pd(0.9999999);
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_set1_pd(i);
    for (long n = 0; n < ITERS; n++)
        for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_fmadd_pd(acc[i], a, b);
    double sink = 0;
    for (int i = 0; i < CHAINS; i++) sink += _mm512_reduce_add_pd(acc[i]);
    return sink;
}

__attribute__((target("avx2,fma"))) static double run_avx2(void) {
    __m256d acc[CHAINS], a = _mm256_set1_pd(1.0000001), b = _mm256_set1_pd(0.9999999);
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm256_set1_pd(i);
    for (long n = 0; n < ITERS; n++)
        for (int i = 0; i < CHAINS; i++) acc[i] = _mm256_fmadd_pd(acc[i], a, b);
    double sink = 0, out[4];
    for (int i = 0; i < CHAINS; i++) { _mm256_storeu_pd(out, acc[i]); sink += out[0] + out[1] + out[2] + out[3]; }
    return sink;
}

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

int main(void) {
    __builtin_cpu_init();
    int wide = __builtin_cpu_supports("avx512f");
    int lanes = wide ? 8 : 4;
    double start = seconds();
    double sink = wide ? run_avx512() : run_avx2();
    double elapsed = seconds() - start;
    /* 2 flops (multiply + add) per lane per FMA. */
    printf("%s %.3f GFLOPS (sink %g)\n", wide ? "avx512" : "avx2",
           2.0 * lanes * CHAINS * ITERS / elapsed / 1e9, sink);
    return 0;
}
