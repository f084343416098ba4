/*
 * MKL by the CPU's instruction sets, whoever made the CPU.
 *
 * MKL 2020.1 and later ask mkl_serv_intel_cpu_true() before choosing a code
 * path: on a CPU that is not Intel's the answer is no, and MKL runs its
 * generic path whatever the CPU has (the MKL_DEBUG_CPU_TYPE override of older
 * releases is gone). This library answers yes. Loaded before MKL
 * (LD_PRELOAD, set by the MKL flavors' modules), its definition is the one
 * MKL's own calls reach, and MKL then picks its path by the instruction sets
 * CPUID reports (AVX2, AVX-512), as it does on Intel's CPUs. On an Intel CPU
 * it changes nothing; a program without MKL never calls it.
 *
 * The same answer sends MKL to read the CPU's data caches the way Intel's
 * CPUs report them, at CPUID leaf 4, which AMD's CPUs leave empty (they
 * report the same fields at leaf 0x8000001D). MKL then holds that the CPU
 * has no data cache (mkl_serv_get_cache_size: 0 levels, every level -1),
 * and some of its kernels compute wrong results: QE 7.5's lda+U case on one
 * rank stopped at "charge is wrong" (2026-11-27, AMD EPYC Zen 4), and passed
 * with MKL's fixed sizes (MKL_CBWR) or this library's. So where MKL found no
 * data cache, this library answers from leaf 0x8000001D in MKL's own layout;
 * where MKL found some (Intel's CPUs) or uses its fixed sizes (MKL_CBWR),
 * MKL's answer stands.
 *
 * Measured on the site's AMD EPYC (environments/components.yaml, mkl).
 */
#define _GNU_SOURCE
#include <cpuid.h>
#include <dlfcn.h>

enum { MAX_LEVELS = 4, INSTRUCTION_CACHE = 2 };

int mkl_serv_intel_cpu_true(void);
long mkl_serv_get_cache_size(int level);

int mkl_serv_intel_cpu_true(void) { return 1; }

/* AMD's older leaves, where a hypervisor hides leaf 0x8000001D (a guest
   without topoext): L1 data at 0x80000005 (ECX[31:24], KiB), L2 and L3 at
   0x80000006 (ECX[31:16] KiB, EDX[31:18] in 512 KiB units; the L3 of the
   whole package there, where leaf 0x8000001D gives a core complex's). */
static void amd_legacy_caches(long sizes[MAX_LEVELS + 1]) {
    unsigned a, b, c, d, max = __get_cpuid_max(0x80000000, 0);
    if (max >= 0x80000005) {
        __cpuid(0x80000005, a, b, c, d);
        if (c >> 24)
            sizes[++sizes[0]] = (long)(c >> 24) * 1024;
    }
    if (sizes[0] == 1 && max >= 0x80000006) {
        __cpuid(0x80000006, a, b, c, d);
        if (c >> 16)
            sizes[++sizes[0]] = (long)(c >> 16) * 1024;
        if (sizes[0] == 2 && d >> 18)
            sizes[++sizes[0]] = (long)(d >> 18) * 512 * 1024;
    }
}

/* MKL's table: sizes[0] the number of data cache levels, sizes[1..] their
   sizes in bytes, the smallest first, as Intel's leaf 4 lists them. */
static void amd_data_caches(long sizes[MAX_LEVELS + 1]) {
    unsigned a, b, c, d;
    sizes[0] = 0;
    if (__get_cpuid_max(0x80000000, 0) < 0x8000001D) {
        amd_legacy_caches(sizes);
        return;
    }
    for (unsigned sub = 0; sizes[0] < MAX_LEVELS; sub++) {
        __cpuid_count(0x8000001D, sub, a, b, c, d);
        if ((a & 0x1f) == 0)
            break;
        if ((a & 0x1f) == INSTRUCTION_CACHE)
            continue;
        long ways = (b >> 22) + 1, partitions = ((b >> 12) & 0x3ff) + 1, line = (b & 0xfff) + 1;
        sizes[++sizes[0]] = ways * partitions * line * ((long)c + 1);
    }
    if (sizes[0] == 0)
        amd_legacy_caches(sizes);
}

/* level 0: the last level's size; 1..n: that level's; else -1 (MKL's own
   answers, read from its disassembly: MKL documents no such function). */
long mkl_serv_get_cache_size(int level) {
    long (*mkl_own)(int) = (long (*)(int))dlsym(RTLD_NEXT, "mkl_serv_get_cache_size");
    if (mkl_own && mkl_own(1) > 0)
        return mkl_own(level);
    long sizes[MAX_LEVELS + 1];
    amd_data_caches(sizes);
    if (level < 0 || level > sizes[0])
        return -1;
    return sizes[level == 0 ? sizes[0] : level];
}
