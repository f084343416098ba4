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
 * Measured on the site's AMD EPYC (environments/components.yaml, mkl).
 */
int mkl_serv_intel_cpu_true(void);

int mkl_serv_intel_cpu_true(void) { return 1; }
