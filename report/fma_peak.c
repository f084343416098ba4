/* The machine's measured floating-point peak for the benchmark report: one
 * process per core, each running independent chains of fused multiply-adds
 * (enough of them to hide FMA latency), on the widest vectors the CPU has;
 * on a CPU without FMA (x86-64-v2, the site's baseline), a multiply and an
 * add per step, on AVX's vectors where it has them (Sandy Bridge), else SSE2's. Prints GFLOPS of this core. HPL's peak
 * goal (report/goals.yaml) is against this. An argument sets the iterations
 * (the tests' runs under qemu). */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CHAINS 12
static long ITERS = 100000000L; /* half a second at 20 GFLOPS a core: a sample long enough to mean something */

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

/* No FMA: each step a multiply and an add, 2 flops per lane as an FMA's. */
__attribute__((target("avx"))) static double run_avx(void) {
    __m256d acc[CHAINS], a = _mm256_set1_pd(1.0000001), b = _mm256_set1_pd(0.9999999);
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm256_set1_pd(i);
    for (long n = 0; n < ITERS; n++)
        for (int i = 0; i < CHAINS; i++) acc[i] = _mm256_add_pd(_mm256_mul_pd(acc[i], a), b);
    double sink = 0, out[4];
    for (int i = 0; i < CHAINS; i++) { _mm256_storeu_pd(out, acc[i]); sink += out[0] + out[1] + out[2] + out[3]; }
    return sink;
}

static double run_sse2(void) {
    __m128d acc[CHAINS], a = _mm_set1_pd(1.0000001), b = _mm_set1_pd(0.9999999);
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm_set1_pd(i);
    for (long n = 0; n < ITERS; n++)
        for (int i = 0; i < CHAINS; i++) acc[i] = _mm_add_pd(_mm_mul_pd(acc[i], a), b);
    double sink = 0, out[2];
    for (int i = 0; i < CHAINS; i++) { _mm_storeu_pd(out, acc[i]); sink += out[0] + out[1]; }
    return sink;
}

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc > 1) ITERS = atol(argv[1]);
    __builtin_cpu_init();
    const char *isa = "sse2";
    int lanes = 2;
    double (*run)(void) = run_sse2;
    if (__builtin_cpu_supports("avx512f")) {
        isa = "avx512", lanes = 8, run = run_avx512;
    } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        isa = "avx2", lanes = 4, run = run_avx2;
    } else if (__builtin_cpu_supports("avx")) {
        isa = "avx", lanes = 4, run = run_avx;
    }
    double start = seconds();
    double sink = run();
    double elapsed = seconds() - start;
    /* 2 flops (multiply + add) per lane per step. */
    printf("%s %.3f GFLOPS (sink %g)\n", isa, 2.0 * lanes * CHAINS * ITERS / elapsed / 1e9, sink);
    return 0;
}
