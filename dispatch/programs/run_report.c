/* The fast dispatch tests' stand-in for an application, one copy in each
 * per-level bin folder: it says how it was run (its own path, which names
 * the build; argv; one variable) and, when DISPATCH_TEST_MARKER names a file,
 * writes it, so that a test can tell a program that ran from one that did
 * not. C, not a shell script: a script's $0 is its path, not the argv[0]
 * the dispatcher passed on. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
  char exe[4096];
  ssize_t length = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[length < 0 ? 0 : length] = '\0';
  printf("exe=%s\nargv0=%s\n", exe, argv[0]);
  for (int i = 1; i < argc; i++) printf("arg=%s\n", argv[i]);
  const char *value = getenv("DISPATCH_TEST_VALUE");
  printf("value=%s\n", value ? value : "");
  const char *marker = getenv("DISPATCH_TEST_MARKER");
  if (marker) {
    FILE *out = fopen(marker, "w");
    if (!out || fprintf(out, "%s\n", exe) < 0 || fclose(out) != 0) return 1;
  }
  return 0;
}
