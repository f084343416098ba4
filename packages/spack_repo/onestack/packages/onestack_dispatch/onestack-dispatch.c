/* onestack-dispatch: one entry point per program over a flavor's builds for
 * each x86-64 level (x86-64-v2, -v3, -v4 of the x86-64 psABI), choosing at
 * exec time, on the node where the program starts, the best build that CPU
 * can run. Built for plain x86-64 (-march=x86-64), so that on a CPU below
 * the stack's baseline it still runs, to refuse clearly.
 *
 * Layout (the publish step makes it):
 *   <dispatch>/levels.conf            the table of builds
 *   <dispatch>/bin/<program>          hard links (or copies) of this file,
 *                                     one per program name, e.g. pw.x
 *   <dispatch>/bin/onestack-cpu-check one more, for `module load`
 * The program's name is the file name of the entry point as the kernel
 * reports it (/proc/self/exe). A symbolic link to an entry point works (it
 * resolves to the entry point); a symbolic link to the dispatcher itself
 * does not (the name would be onestack-dispatch): use hard links or copies.
 *
 * levels.conf: one build per line, lowest level first, each level at most
 * once: `<level> <absolute bin folder of that build>`, the two separated by
 * blanks; the folder is the rest of the line (it may contain blanks, not
 * end in one). <level> is a GCC -march name: x86-64, x86-64-v2, x86-64-v3,
 * x86-64-v4. Blank lines and lines whose first non-blank is '#' are
 * ignored.
 *
 * A table may also lower the level on some CPU models, where the
 * application's own authors advise code below the CPU's level there (e.g.
 * GROMACS: AVX2 on an Intel CPU with one AVX-512 FMA unit):
 *   `at-most <level> <class> <vendor> <family> <model> [<brand prefix>]`
 * On a CPU whose CPUID vendor string (leaf 0), family and model (leaf 1, as
 * Intel's and AMD's manuals combine the extended fields; decimal or 0x..)
 * are those, and whose brand string (leaves 0x80000002-4, blanks trimmed)
 * starts with the prefix (the rest of the line; none: any), the chosen level
 * is at most <level>; <class> names the rule in messages. The lowest
 * matching line wins. Anything else is refused with the file and line.
 *
 * What runs: <bin folder of the chosen level>/<program>, with the same
 * arguments (argv[0] as the user typed it) and environment. The chosen level
 * is the highest of the table not above the CPU's level (nor above a
 * matching `at-most` line's). The CPU's level is
 * read from the CPU itself: CPUID leaves 1, 7 and 0x80000001, and XCR0
 * (xgetbv) for the register state the OS enables, as glibc does for
 * glibc-hwcaps; never /proc/cpuinfo.
 *
 * Environment:
 *   ONESTACK_CPU_LEVEL=<level>  run that level's build (debugging); refused
 *                               when above the CPU's level or not in the table
 *   ONESTACK_CPU_VERBOSE=1      one line on stderr: the CPU's level and the
 *                               build that runs (any value but empty or 0)
 *   ONESTACK_CPUID_FILE=<file>  TEST INPUT: the CPU's report is read from
 *                               <file> (the format `onestack-dispatch --cpuid`
 *                               prints) instead of the CPU. Every use says so
 *                               on stderr. It can make a program run a build
 *                               the CPU lacks (it then dies of SIGILL): it is
 *                               the caller's own statement about its CPU, with
 *                               no more power than running that build directly.
 *
 * Exit codes (the program's own once it runs):
 *   125  the dispatch cannot be decided: levels.conf missing, unreadable or
 *        malformed, ONESTACK_CPU_LEVEL refused, a bad ONESTACK_CPUID_FILE,
 *        /proc/self/exe unreadable, or the dispatcher run under its own name
 *   126  this CPU is below every level of the table (below the baseline):
 *        nothing is executed
 *   127  the chosen build cannot be executed: its folder or program is
 *        missing, or exec failed
 *
 * Under other names:
 *   onestack-cpu-check            exit 0 and one line on stdout (the CPU's
 *                                 level, the level and folder that programs
 *                                 run here) when a build fits, and a second
 *                                 naming the `at-most` line that lowered the
 *                                 level, if one did; otherwise the same
 *                                 refusal and exit code as a program
 *   onestack-dispatch --level     the CPU's level, e.g. x86-64-v3 (no table)
 *   onestack-dispatch --cpuid     the CPUID leaves and XCR0 this file reads
 *                                 (the brand string's too), in the
 *                                 ONESTACK_CPUID_FILE format
 *
 * Statically linked: no dynamic loader runs before the dispatch, which sits
 * in front of every rank of every job (per spawn of a no-op program, on a
 * loaded 2-core VM: 1.2 ms direct, 2.1 ms through this dispatcher, 2.6 ms
 * through a dynamically linked one); it runs whatever LD_LIBRARY_PATH or
 * LD_PRELOAD a module or Lmod's capture() sets, and needs no library of the
 * node. The price: 0.9 MB a copy (hard links share it), and a glibc fix
 * reaches it only by a rebuild. */
#define _GNU_SOURCE
#include <cpuid.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { EXIT_UNDECIDED = 125, EXIT_BELOW_BASELINE = 126, EXIT_CANNOT_RUN = 127 };

#define DISPATCHER_NAME "onestack-dispatch"
#define CHECK_NAME "onestack-cpu-check"
#define TABLE_NAME "levels.conf"

/* Index = level: 1 is the x86-64 baseline every 64-bit CPU has. */
static const char *const LEVEL_NAMES[] = {NULL, "x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4"};
enum { LOWEST_LEVEL = 1, HIGHEST_LEVEL = 4 };

static _Noreturn void fail(int code, const char *format, ...) {
  va_list args;
  va_start(args, format);
  fputs("onestack: ", stderr);
  vfprintf(stderr, format, args);
  fputc('\n', stderr);
  va_end(args);
  exit(code);
}

/* An environment variable, unset when empty (Lmod may leave one empty). */
static const char *setting(const char *name) {
  const char *value = secure_getenv(name);
  return value && *value ? value : NULL;
}

/* A level in a sentence: the baseline has no -march name of its own but x86-64. */
static const char *described(int level) {
  return level == LOWEST_LEVEL ? "x86-64 (v1)" : LEVEL_NAMES[level];
}

static int level_of_name(const char *name) {
  for (int level = LOWEST_LEVEL; level <= HIGHEST_LEVEL; level++)
    if (strcmp(name, LEVEL_NAMES[level]) == 0) return level;
  return 0;
}

/* ---- the CPU's report: the CPU itself, or a recorded one (test input) ---- */

struct regs { unsigned eax, ebx, ecx, edx; };

struct cpuid_source {
  const char *file;     /* NULL: the CPU itself */
  FILE *echo;           /* not NULL: print each value read, as a record */
  int count;
  struct { unsigned leaf, subleaf; struct regs regs; } records[32];
  int has_xcr0;
  unsigned long long xcr0;
};

static int blank_or_comment(const char *line) {
  line += strspn(line, " \t\r\n");
  return *line == '\0' || *line == '#';
}

static void parse_record_line(struct cpuid_source *src, const char *line, int number) {
  unsigned leaf, subleaf;
  struct regs r;
  int end = -1;
  if (sscanf(line, " 0x%x 0x%x: eax=0x%x ebx=0x%x ecx=0x%x edx=0x%x %n",
             &leaf, &subleaf, &r.eax, &r.ebx, &r.ecx, &r.edx, &end) == 6 && line[end] == '\0') {
    if (src->count == (int)(sizeof src->records / sizeof src->records[0]))
      fail(EXIT_UNDECIDED, "%s:%d: too many CPUID records", src->file, number);
    src->records[src->count].leaf = leaf;
    src->records[src->count].subleaf = subleaf;
    src->records[src->count++].regs = r;
  } else if (sscanf(line, " xcr0=0x%llx %n", &src->xcr0, &end) == 1 && line[end] == '\0') {
    src->has_xcr0 = 1;
  } else {
    fail(EXIT_UNDECIDED, "%s:%d: not a record: expected `0x<leaf> 0x<subleaf>: eax=0x.. ebx=0x.. "
         "ecx=0x.. edx=0x..` or `xcr0=0x..` (ONESTACK_CPUID_FILE, a test input)", src->file, number);
  }
}

static void load_records(struct cpuid_source *src) {
  FILE *in = fopen(src->file, "r");
  if (!in) fail(EXIT_UNDECIDED, "%s: %s (ONESTACK_CPUID_FILE, a test input)", src->file, strerror(errno));
  fprintf(stderr, "onestack: test input: the CPU's report is read from ONESTACK_CPUID_FILE=%s, "
          "not from this CPU\n", src->file);
  char line[512];
  for (int number = 1; fgets(line, sizeof line, in); number++)
    if (!blank_or_comment(line)) parse_record_line(src, line, number);
  fclose(in);
}

static struct regs query_cpuid(const struct cpuid_source *src, unsigned leaf, unsigned subleaf) {
  struct regs r = {0, 0, 0, 0};
  if (!src->file) {
    __cpuid_count(leaf, subleaf, r.eax, r.ebx, r.ecx, r.edx);
  } else {
    int i = 0;
    while (i < src->count && (src->records[i].leaf != leaf || src->records[i].subleaf != subleaf)) i++;
    if (i == src->count)
      fail(EXIT_UNDECIDED, "%s: no record of CPUID leaf 0x%08x subleaf 0x%02x", src->file, leaf, subleaf);
    r = src->records[i].regs;
  }
  if (src->echo)
    fprintf(src->echo, "0x%08x 0x%02x: eax=0x%08x ebx=0x%08x ecx=0x%08x edx=0x%08x\n",
            leaf, subleaf, r.eax, r.ebx, r.ecx, r.edx);
  return r;
}

/* XCR0: which register state the OS saves on a context switch; an AVX
 * instruction faults unless the OS enabled the YMM state (likewise AVX-512
 * and the opmask/ZMM state), whatever CPUID says. Read only when CPUID says
 * OSXSAVE (the OS enabled xgetbv). */
static unsigned long long query_xcr0(const struct cpuid_source *src) {
  unsigned long long xcr0;
  if (!src->file) {
    unsigned low, high;
    __asm__ volatile("xgetbv" : "=a"(low), "=d"(high) : "c"(0));
    xcr0 = (unsigned long long)high << 32 | low;
  } else if (src->has_xcr0) {
    xcr0 = src->xcr0;
  } else {
    fail(EXIT_UNDECIDED, "%s: no `xcr0=0x..` record, and CPUID says OSXSAVE", src->file);
  }
  if (src->echo) fprintf(src->echo, "xcr0=0x%016llx\n", xcr0);
  return xcr0;
}

/* ---- the x86-64 level: the psABI's feature lists ---- */

/* The registers the level definitions read. */
enum reg { LEAF1_ECX, LEAF7_EBX, EXT1_ECX, XCR0, REG_COUNT };

struct feature { int level; const char *name; enum reg reg; unsigned long long bits; };

/* x86-64 psABI "Micro-architecture levels"; glibc's sysdeps/x86/get-isa-level.h
 * says the same. OSXSAVE and the XCR0 states are what makes AVX and AVX-512
 * usable (glibc's cpu_features.c checks the same bits). */
static const struct feature FEATURES[] = {
  {2, "CMPXCHG16B", LEAF1_ECX, 1u << 13},
  {2, "LAHF-SAHF", EXT1_ECX, 1u << 0},
  {2, "POPCNT", LEAF1_ECX, 1u << 23},
  {2, "SSE3", LEAF1_ECX, 1u << 0},
  {2, "SSE4.1", LEAF1_ECX, 1u << 19},
  {2, "SSE4.2", LEAF1_ECX, 1u << 20},
  {2, "SSSE3", LEAF1_ECX, 1u << 9},
  {3, "AVX", LEAF1_ECX, 1u << 28},
  {3, "AVX2", LEAF7_EBX, 1u << 5},
  {3, "BMI1", LEAF7_EBX, 1u << 3},
  {3, "BMI2", LEAF7_EBX, 1u << 8},
  {3, "F16C", LEAF1_ECX, 1u << 29},
  {3, "FMA", LEAF1_ECX, 1u << 12},
  {3, "LZCNT", EXT1_ECX, 1u << 5},
  {3, "MOVBE", LEAF1_ECX, 1u << 22},
  {3, "OSXSAVE", LEAF1_ECX, 1u << 27},
  {3, "XCR0 SSE+AVX state (OS-enabled)", XCR0, 0x6},
  {4, "AVX512F", LEAF7_EBX, 1u << 16},
  {4, "AVX512BW", LEAF7_EBX, 1u << 30},
  {4, "AVX512CD", LEAF7_EBX, 1u << 28},
  {4, "AVX512DQ", LEAF7_EBX, 1u << 17},
  {4, "AVX512VL", LEAF7_EBX, 1u << 31},
  {4, "XCR0 opmask+ZMM state (OS-enabled)", XCR0, 0xe0},
};
enum { FEATURE_COUNT = sizeof FEATURES / sizeof FEATURES[0] };

/* The level, and the model the table's `at-most` lines match (the brand
 * string read only for a table that has a line naming one). */
struct cpu {
  unsigned long long reg[REG_COUNT];
  int level;
  char vendor[13];
  int family, model;
  char brand[49];
};

static int has(const struct cpu *cpu, const struct feature *f) {
  return (cpu->reg[f->reg] & f->bits) == f->bits;
}

/* The highest level all of whose features (and all lower levels') are there. */
static int level_of(const struct cpu *cpu) {
  int level = LOWEST_LEVEL;
  while (level < HIGHEST_LEVEL) {
    for (int i = 0; i < FEATURE_COUNT; i++)
      if (FEATURES[i].level == level + 1 && !has(cpu, &FEATURES[i])) return level;
    level++;
  }
  return level;
}

/* Family and model from leaf 1's EAX, the extended fields added as Intel's
 * and AMD's manuals say (Skylake-SP's 0x00050654: family 6, model 0x55). */
static void decode_signature(struct cpu *cpu, unsigned eax) {
  int family = (eax >> 8) & 0xf, model = (eax >> 4) & 0xf;
  cpu->family = family == 0xf ? family + (int)((eax >> 20) & 0xff) : family;
  cpu->model = family == 0x6 || family == 0xf ? (int)((eax >> 12) & 0xf0) | model : model;
}

/* The brand string, 16 bytes a leaf, blanks trimmed at both ends. */
static void read_brand(const struct cpuid_source *src, struct cpu *cpu) {
  char raw[49] = {0};
  for (unsigned i = 0; i < 3; i++) {
    struct regs r = query_cpuid(src, 0x80000002 + i, 0);
    memcpy(raw + 16 * i, &r.eax, 4);
    memcpy(raw + 16 * i + 4, &r.ebx, 4);
    memcpy(raw + 16 * i + 8, &r.ecx, 4);
    memcpy(raw + 16 * i + 12, &r.edx, 4);
  }
  const char *start = raw + strspn(raw, " ");
  size_t length = strlen(start);
  while (length && start[length - 1] == ' ') length--;
  memcpy(cpu->brand, start, length);
  cpu->brand[length] = '\0';
}

static struct cpu read_cpu(const struct cpuid_source *src, int with_brand) {
  struct cpu cpu;
  memset(&cpu, 0, sizeof cpu);
  struct regs leaf0 = query_cpuid(src, 0, 0);
  memcpy(cpu.vendor, &leaf0.ebx, 4);
  memcpy(cpu.vendor + 4, &leaf0.edx, 4);
  memcpy(cpu.vendor + 8, &leaf0.ecx, 4);
  if (leaf0.eax >= 1) {
    struct regs leaf1 = query_cpuid(src, 1, 0);
    cpu.reg[LEAF1_ECX] = leaf1.ecx;
    decode_signature(&cpu, leaf1.eax);
  }
  if (leaf0.eax >= 7) cpu.reg[LEAF7_EBX] = query_cpuid(src, 7, 0).ebx;
  unsigned max_extended = query_cpuid(src, 0x80000000, 0).eax;
  if (max_extended >= 0x80000001) cpu.reg[EXT1_ECX] = query_cpuid(src, 0x80000001, 0).ecx;
  if (cpu.reg[LEAF1_ECX] & (1u << 27)) cpu.reg[XCR0] = query_xcr0(src);
  if (with_brand && max_extended >= 0x80000004) read_brand(src, &cpu);
  cpu.level = level_of(&cpu);
  return cpu;
}

static struct cpu detect_cpu(FILE *echo, int with_brand) {
  static struct cpuid_source src;
  src.file = setting("ONESTACK_CPUID_FILE");
  src.echo = echo;
  if (src.file) load_records(&src);
  return read_cpu(&src, with_brand);
}

/* What the CPU lacks of a level, e.g. "AVX2, BMI1" (into a static buffer). */
static const char *missing_for(const struct cpu *cpu, int level) {
  static char list[512];
  list[0] = '\0';
  for (int i = 0; i < FEATURE_COUNT; i++) {
    if (FEATURES[i].level > level || has(cpu, &FEATURES[i])) continue;
    if (list[0]) strcat(list, ", ");
    strcat(list, FEATURES[i].name);
  }
  return list;
}

/* ---- the table ---- */

struct build { int level; int line; char bin[PATH_MAX]; };
/* An `at-most` line: on CPUs of that model, builds up to that level only. */
struct rule { int level; int line; char class[65]; char vendor[13]; int family, model; char brand[49]; };
enum { MAX_RULES = 32 };
struct table {
  char path[PATH_MAX];
  int count;
  struct build builds[HIGHEST_LEVEL];
  int rule_count;
  struct rule rules[MAX_RULES];
};

#define AT_MOST "at-most"

static void parse_rule(struct table *t, const char *fields, int number) {
  if (t->rule_count == MAX_RULES)
    fail(EXIT_UNDECIDED, "%s:%d: more than %d `" AT_MOST "` lines", t->path, number, MAX_RULES);
  struct rule *r = &t->rules[t->rule_count];
  char level[16];
  int end = -1;
  if (sscanf(fields, " %15s %64s %12s %i %i %n", level, r->class, r->vendor, &r->family, &r->model,
             &end) != 5 || end < 0)
    fail(EXIT_UNDECIDED, "%s:%d: expected `" AT_MOST " <level> <class> <vendor> <family> <model> [<brand prefix>]`",
         t->path, number);
  r->level = level_of_name(level);
  if (!r->level)
    fail(EXIT_UNDECIDED, "%s:%d: unknown level '%s'; allowed: x86-64, x86-64-v2, x86-64-v3, x86-64-v4", t->path,
         number, level);
  if (strlen(fields + end) >= sizeof r->brand)
    fail(EXIT_UNDECIDED, "%s:%d: a brand prefix longer than a brand string (48 characters)", t->path, number);
  strcpy(r->brand, fields + end); /* the caller trimmed the line's end */
  r->line = number;
  t->rule_count++;
}

static void parse_table_line(struct table *t, char *line, int number) {
  char *word = line + strspn(line, " \t");
  size_t word_length = strcspn(word, " \t\r\n");
  char *bin = word + word_length;
  bin += strspn(bin, " \t");
  char *end = bin + strlen(bin);
  while (end > bin && strchr(" \t\r\n", end[-1])) *--end = '\0';
  word[word_length] = '\0';
  if (strcmp(word, AT_MOST) == 0) {
    parse_rule(t, bin, number);
    return;
  }
  int level = level_of_name(word);
  if (!level)
    fail(EXIT_UNDECIDED, "%s:%d: unknown level '%s'; allowed: x86-64, x86-64-v2, x86-64-v3, x86-64-v4",
         t->path, number, word);
  if (bin[0] != '/')
    fail(EXIT_UNDECIDED, "%s:%d: expected `%s <absolute bin folder>`, got no absolute folder after the level",
         t->path, number, word);
  if (t->count && level <= t->builds[t->count - 1].level)
    fail(EXIT_UNDECIDED, "%s:%d: %s after %s (line %d): list each level once, lowest first",
         t->path, number, word, LEVEL_NAMES[t->builds[t->count - 1].level], t->builds[t->count - 1].line);
  struct build *b = &t->builds[t->count++];
  b->level = level;
  b->line = number;
  strcpy(b->bin, bin); /* fits: the line buffer is PATH_MAX long */
}

static void read_table(struct table *t) {
  FILE *in = fopen(t->path, "r");
  if (!in)
    fail(EXIT_UNDECIDED, "%s: %s (the table of this dispatcher's builds, made when the module tree is published)",
         t->path, strerror(errno));
  char line[PATH_MAX];
  for (int number = 1; fgets(line, sizeof line, in); number++) {
    if (!strchr(line, '\n') && !feof(in))
      fail(EXIT_UNDECIDED, "%s:%d: line longer than %d characters", t->path, number, PATH_MAX - 2);
    if (!blank_or_comment(line)) parse_table_line(t, line, number);
  }
  if (ferror(in)) fail(EXIT_UNDECIDED, "%s: %s", t->path, strerror(errno));
  fclose(in);
  if (!t->count) fail(EXIT_UNDECIDED, "%s: lists no build (lines `x86-64-v2 <absolute bin folder>`)", t->path);
  for (int i = 0; i < t->rule_count; i++)
    if (t->rules[i].level < t->builds[0].level)
      fail(EXIT_UNDECIDED, "%s:%d: at most %s is below the table's lowest build, %s", t->path, t->rules[i].line,
           described(t->rules[i].level), LEVEL_NAMES[t->builds[0].level]);
}

/* Whether a line names a brand prefix: only then is the brand string read. */
static int names_a_brand(const struct table *t) {
  for (int i = 0; i < t->rule_count; i++)
    if (t->rules[i].brand[0]) return 1;
  return 0;
}

/* The matching `at-most` line of the lowest level, or NULL. */
static const struct rule *matching_rule(const struct table *t, const struct cpu *cpu) {
  const struct rule *lowest = NULL;
  for (int i = 0; i < t->rule_count; i++) {
    const struct rule *r = &t->rules[i];
    if (strcmp(r->vendor, cpu->vendor) == 0 && r->family == cpu->family && r->model == cpu->model &&
        strncmp(cpu->brand, r->brand, strlen(r->brand)) == 0 && (!lowest || r->level < lowest->level))
      lowest = r;
  }
  return lowest;
}

/* Why the level is below the CPU's here, for the messages (NULL if it is
 * not): "one_avx512_fma_unit: at most x86-64-v3 on this CPU (<table>:7)". */
static const char *lowered(const struct table *t, const struct cpu *cpu) {
  static char why[PATH_MAX + 128];
  const struct rule *r = matching_rule(t, cpu);
  if (!r || r->level >= cpu->level) return NULL;
  snprintf(why, sizeof why, "%s: at most %s on this CPU (%s:%d)", r->class, described(r->level), t->path, r->line);
  return why;
}

/* "x86-64-v2, x86-64-v3": the levels the table offers (static buffer). */
static const char *levels_listed(const struct table *t) {
  static char list[128];
  list[0] = '\0';
  for (int i = 0; i < t->count; i++) {
    if (i) strcat(list, ", ");
    strcat(list, LEVEL_NAMES[t->builds[i].level]);
  }
  return list;
}

/* ---- the choice ---- */

static const struct build *forced_build(const struct table *t, const struct cpu *cpu, const char *forced) {
  int level = level_of_name(forced);
  int i = 0;
  while (i < t->count && t->builds[i].level != level) i++;
  if (i == t->count)
    fail(EXIT_UNDECIDED, "ONESTACK_CPU_LEVEL=%s: no such build in %s; it has: %s", forced, t->path, levels_listed(t));
  if (level > cpu->level)
    fail(EXIT_UNDECIDED, "ONESTACK_CPU_LEVEL=%s: this CPU is %s, it lacks %s; unset it, or pick a level of %s "
         "(%s) not above %s", forced, described(cpu->level), missing_for(cpu, level), t->path, levels_listed(t),
         described(cpu->level));
  return &t->builds[i];
}

/* subject: who cannot run, in the refusal ("pw.x", "this stack's programs"). */
static const struct build *chosen_build(const struct table *t, const struct cpu *cpu, const char *subject) {
  const char *forced = setting("ONESTACK_CPU_LEVEL");
  if (forced) return forced_build(t, cpu, forced);
  const struct rule *rule = matching_rule(t, cpu);
  int limit = rule && rule->level < cpu->level ? rule->level : cpu->level;
  const struct build *best = NULL;
  for (int i = 0; i < t->count; i++)
    if (t->builds[i].level <= limit) best = &t->builds[i];
  if (!best)
    fail(EXIT_BELOW_BASELINE, "%s cannot run on this CPU: it is %s, below the stack's baseline %s (it lacks %s); "
         "use a node with a newer CPU", subject, described(cpu->level), LEVEL_NAMES[t->builds[0].level],
         missing_for(cpu, t->builds[0].level));
  return best;
}

/* ---- who am I ---- */

/* The entry point's own path, as the kernel resolved it at exec. */
static void own_path(char *path) {
  ssize_t length = readlink("/proc/self/exe", path, PATH_MAX - 1);
  if (length < 0) fail(EXIT_UNDECIDED, "/proc/self/exe: %s (the dispatcher names its program by it)", strerror(errno));
  path[length] = '\0';
}

/* <dispatch>/levels.conf for the entry point <dispatch>/bin/<program>. */
static void table_path(const char *exe, char *path) {
  strcpy(path, exe);
  *strrchr(path, '/') = '\0'; /* the kernel's path is absolute */
  char *bin = strrchr(path, '/');
  if (bin) *bin = '\0';
  if (strlen(path) + sizeof "/" TABLE_NAME > PATH_MAX) fail(EXIT_UNDECIDED, "%s: path too long", exe);
  strcat(path, "/" TABLE_NAME);
}

static void program_path(const struct build *b, const char *program, char *path) {
  if ((size_t)snprintf(path, PATH_MAX, "%s/%s", b->bin, program) >= PATH_MAX)
    fail(EXIT_CANNOT_RUN, "%s/%s: path too long", b->bin, program);
}

/* The build's program, checked before exec: its folder and file exist, and
 * it is not this dispatcher again (a table pointing at the dispatch folder
 * would exec itself forever). */
static void check_runnable(const struct table *t, const struct build *b, const char *path, const char *exe) {
  struct stat folder, target, self;
  const char *level = LEVEL_NAMES[b->level];
  if (stat(b->bin, &folder) != 0 || !S_ISDIR(folder.st_mode))
    fail(EXIT_CANNOT_RUN, "the %s build's folder %s is missing (%s:%d)", level, b->bin, t->path, b->line);
  if (!path) return;
  if (stat(path, &target) != 0)
    fail(EXIT_CANNOT_RUN, "the %s build has no program %s (%s: %s; %s:%d)", level, strrchr(path, '/') + 1, path,
         strerror(errno), t->path, b->line);
  if (stat(exe, &self) == 0 && self.st_dev == target.st_dev && self.st_ino == target.st_ino)
    fail(EXIT_CANNOT_RUN, "%s:%d: the %s build's %s is this dispatcher itself", t->path, b->line, level, path);
}

static void print_level(void) {
  struct cpu cpu = detect_cpu(NULL, 0);
  printf("%s\n", LEVEL_NAMES[cpu.level]);
}

static int as_dispatcher(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--level") == 0) {
    print_level();
    return 0;
  }
  if (argc == 2 && strcmp(argv[1], "--cpuid") == 0) {
    printf("# CPUID leaves and XCR0 as onestack-dispatch reads them (onestack-dispatch --cpuid)\n");
    detect_cpu(stdout, 1);
    return 0;
  }
  fail(EXIT_UNDECIDED, "usage: %s --level | --cpuid; to run a program, execute a hard link or copy of this file "
       "named after it in <dispatch>/bin/, beside <dispatch>/%s", DISPATCHER_NAME, TABLE_NAME);
}

int main(int argc, char **argv) {
  static char exe[PATH_MAX], path[PATH_MAX];
  static struct table table;
  own_path(exe);
  const char *program = strrchr(exe, '/') + 1;
  if (strcmp(program, DISPATCHER_NAME) == 0) return as_dispatcher(argc, argv);

  table_path(exe, table.path);
  read_table(&table);
  struct cpu cpu = detect_cpu(NULL, names_a_brand(&table));
  int check = strcmp(program, CHECK_NAME) == 0;
  const struct build *b = chosen_build(&table, &cpu, check ? "this stack's programs" : program);
  const char *forced = setting("ONESTACK_CPU_LEVEL"), *why = forced ? NULL : lowered(&table, &cpu);
  if (check) {
    check_runnable(&table, b, NULL, exe);
    printf("onestack: CPU %s; programs here run the %s build in %s\n", described(cpu.level),
           LEVEL_NAMES[b->level], b->bin);
    if (why) printf("onestack: %s\n", why);
    return 0;
  }
  program_path(b, program, path);
  check_runnable(&table, b, path, exe);
  const char *verbose = setting("ONESTACK_CPU_VERBOSE");
  if (verbose && strcmp(verbose, "0") != 0) {
    static char note[PATH_MAX + 160];
    if (forced) strcpy(note, " (ONESTACK_CPU_LEVEL)");
    else if (why) snprintf(note, sizeof note, " (%s)", why);
    fprintf(stderr, "onestack: CPU %s; running the %s build%s: %s\n", described(cpu.level), LEVEL_NAMES[b->level],
            note, path);
  }
  execv(path, argv);
  fail(EXIT_CANNOT_RUN, "%s: %s (the %s build, %s:%d)", path, strerror(errno), LEVEL_NAMES[b->level], table.path,
       b->line);
}
