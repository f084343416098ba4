/* The emulated dispatch test's application, built once per x86-64 level
 * (gcc -march=x86-64-v2, -v3, -v4): it executes instructions of each level
 * up to its own (v2: POPCNT, SSE4.2 CRC32; v3: AVX2, FMA, BMI2; v4:
 * AVX-512F) on data made at run time, checks them against plain C, writes
 * its level into the file argv[1] names (if any) and prints "<level> ok".
 * On a CPU below its level it dies of SIGILL. */
#include <immintrin.h>
#include <stdio.h>
#include <string.h>

#if defined(__AVX512F__)
#define LEVEL "x86-64-v4"
#elif defined(__AVX2__)
#define LEVEL "x86-64-v3"
#elif defined(__SSE4_2__)
#define LEVEL "x86-64-v2"
#else
#error "build with -march=x86-64-v2, -v3 or -v4"
#endif

enum { N = 64 };
static unsigned long long words[N];
static double a[N], b[N], c[N];

/* Data from a volatile seed: the compiler cannot fold the checks away. */
static void make_data(void) {
  volatile unsigned long long seed = 0x9e3779b97f4a7c15ull;
  unsigned long long x = seed;
  for (int i = 0; i < N; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    words[i] = x;
    a[i] = (double)(x % 1000), b[i] = (double)(x % 37), c[i] = (double)(x % 11);
  }
}

static int bits_set(unsigned long long x) {
  int n = 0;
  for (; x; x >>= 1) n += (int)(x & 1);
  return n;
}

static unsigned crc32c_byte(unsigned crc, unsigned char byte) {
  crc ^= byte;
  for (int k = 0; k < 8; k++) crc = crc & 1 ? (crc >> 1) ^ 0x82f63b78u : crc >> 1;
  return crc;
}

static int check_v2(void) {
  unsigned long long crc = 0;
  unsigned reference = 0;
  int pop = 0, pop_reference = 0;
  for (int i = 0; i < N; i++) {
    pop += (int)_mm_popcnt_u64(words[i]);
    pop_reference += bits_set(words[i]);
    crc = _mm_crc32_u64(crc, words[i]);
    for (int byte = 0; byte < 8; byte++) reference = crc32c_byte(reference, (unsigned char)(words[i] >> (8 * byte)));
  }
  return pop == pop_reference && (unsigned)crc == reference;
}

#if defined(__AVX2__)
static unsigned long long pdep_reference(unsigned long long source, unsigned long long mask) {
  unsigned long long result = 0;
  for (unsigned long long bit = 1; mask; bit <<= 1, mask &= mask - 1)
    if (source & bit) result |= mask & -mask;
  return result;
}

static int check_v3(void) {
  double out[4];
  for (int i = 0; i < N; i += 4) {
    __m256d r = _mm256_fmadd_pd(_mm256_loadu_pd(a + i), _mm256_loadu_pd(b + i), _mm256_loadu_pd(c + i));
    _mm256_storeu_pd(out, r);
    for (int k = 0; k < 4; k++)
      if (out[k] != a[i + k] * b[i + k] + c[i + k]) return 0;
    if (_pdep_u64(words[i], words[i + 1]) != pdep_reference(words[i], words[i + 1])) return 0;
  }
  return 1;
}
#endif

#if defined(__AVX512F__)
static int check_v4(void) {
  double sum = 0, reference = 0;
  for (int i = 0; i < N; i += 8)
    sum += _mm512_reduce_add_pd(_mm512_fmadd_pd(_mm512_loadu_pd(a + i), _mm512_loadu_pd(b + i), _mm512_loadu_pd(c + i)));
  for (int i = 0; i < N; i++) reference += a[i] * b[i] + c[i];
  return sum == reference; /* small integers: exact in any order */
}
#endif

int main(int argc, char **argv) {
  make_data();
  int ok = check_v2();
#if defined(__AVX2__)
  ok = ok && check_v3();
#endif
#if defined(__AVX512F__)
  ok = ok && check_v4();
#endif
  if (argc > 1) {
    FILE *marker = fopen(argv[1], "w");
    if (!marker || fprintf(marker, "%s\n", LEVEL) < 0 || fclose(marker) != 0) return 2;
  }
  printf("%s %s\n", LEVEL, ok ? "ok" : "WRONG RESULT");
  return ok ? 0 : 1;
}
