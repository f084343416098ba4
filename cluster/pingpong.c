/* onestack's MPI ping-pong between rank 0 and rank 1: small-message latency
 * and large-message bandwidth, printed as key=value lines for a parser.
 *
 *   pingpong [latency_iterations [bandwidth_iterations [repetitions [seconds]]]]
 *
 * Every rank prints `rank=R host=H`; rank 0 then prints
 *   hosts=H0,H1,...                       (every rank's host, in rank order)
 *   latency_us=X bytes=8 iterations=I     (half a round trip, median of the repetitions)
 *   bandwidth_MBps=X bytes=N iterations=I (N bytes per half round trip, median; N = 1 MiB, 4 MiB)
 *   payload_bytes=X                       (what rank 0 sent to rank 1 in total, warm-up included;
 *                                          rank 1 sent as much back)
 * A warm-up (connections opened, buffers registered) runs before each size
 * and is not timed. A repetition stops early after `seconds` (default 2): on
 * a machine busy with other work a round trip can take milliseconds, and the
 * run must still end; `iterations` says how many the median's repetition did.
 * Ranks beyond 1 only report their host. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LATENCY_BYTES 8
static const int bandwidth_bytes[] = {1 << 20, 4 << 20};
static long long payload_bytes;  /* rank 0 -> rank 1, for the interface-counter checks */

struct timing {
  double half_round_trip;  /* seconds */
  int iterations;
};

/* Round trips of `bytes` until `iterations` or `seconds` are done. Rank 0
 * decides when to stop and says so in the first byte of each message, so
 * that rank 1 stops after the same round trip. */
static struct timing round_trips(int rank, char *buffer, int bytes, int iterations, double seconds) {
  MPI_Barrier(MPI_COMM_WORLD);
  double start = MPI_Wtime();
  int done = 0;
  for (char more = 1; more;) {
    if (rank == 0) {
      more = done + 1 < iterations && MPI_Wtime() - start < seconds;
      buffer[0] = more;
      MPI_Send(buffer, bytes, MPI_CHAR, 1, 0, MPI_COMM_WORLD);
      MPI_Recv(buffer, bytes, MPI_CHAR, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
      MPI_Recv(buffer, bytes, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      more = buffer[0];
      MPI_Send(buffer, bytes, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
    } else {
      more = 0;
    }
    done++;
  }
  payload_bytes += (long long)bytes * done;
  struct timing result = {(MPI_Wtime() - start) / (2.0 * done), done};
  return result;
}

static int by_time(const void *a, const void *b) {
  double x = ((const struct timing *)a)->half_round_trip, y = ((const struct timing *)b)->half_round_trip;
  return (x > y) - (x < y);
}

/* The median over `repetitions` timed runs, after one untimed warm-up run.
 * Every rank takes part in the barriers; only rank 0's figure is printed. */
static struct timing median_round_trip(int rank, char *buffer, int bytes, int iterations, int repetitions,
                                       double seconds) {
  struct timing times[repetitions];
  round_trips(rank, buffer, bytes, iterations > 10 ? iterations / 10 : 1, seconds);
  for (int r = 0; r < repetitions; r++) times[r] = round_trips(rank, buffer, bytes, iterations, seconds);
  qsort(times, repetitions, sizeof times[0], by_time);
  return times[repetitions / 2];
}

/* Each line goes out with one printf and a flush: a log line of the MPI
 * (UCX logs to stdout, from its own thread too) must not land inside one. */
static void print_hosts(int rank, int size) {
  char host[MPI_MAX_PROCESSOR_NAME] = {0};
  int length;
  MPI_Get_processor_name(host, &length);
  printf("rank=%d host=%s\n", rank, host);
  fflush(stdout);
  char *all = rank == 0 ? calloc(size, MPI_MAX_PROCESSOR_NAME) : NULL;
  MPI_Gather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    char *line = calloc(size, MPI_MAX_PROCESSOR_NAME + 1);  /* the names, a comma after each but the last */
    for (int r = 0; r < size; r++) {
      if (r) strcat(line, ",");
      strcat(line, all + (size_t)r * MPI_MAX_PROCESSOR_NAME);
    }
    printf("hosts=%s\n", line);
    fflush(stdout);
    free(line);
    free(all);
  }
}

static int positive_argument(int argc, char **argv, int index, int fallback) {
  if (argc <= index) return fallback;
  int value = atoi(argv[index]);
  if (value < 1) {
    fprintf(stderr, "pingpong: argument %d ('%s') must be a positive count\n", index, argv[index]);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  return value;
}

int main(int argc, char **argv) {
  int rank, size;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int latency_iterations = positive_argument(argc, argv, 1, 10000);
  int bandwidth_iterations = positive_argument(argc, argv, 2, 20);
  int repetitions = positive_argument(argc, argv, 3, 5);
  double seconds = positive_argument(argc, argv, 4, 2);
  if (size < 2) {
    if (rank == 0) fprintf(stderr, "pingpong: needs at least 2 ranks, got %d\n", size);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  print_hosts(rank, size);

  char *buffer = malloc(bandwidth_bytes[1]);
  memset(buffer, 1, bandwidth_bytes[1]);  /* touched: no page faults inside the timed loops */
  struct timing latency = median_round_trip(rank, buffer, LATENCY_BYTES, latency_iterations, repetitions, seconds);
  if (rank == 0) {
    printf("latency_us=%.3f bytes=%d iterations=%d\n", latency.half_round_trip * 1e6, LATENCY_BYTES,
           latency.iterations);
    fflush(stdout);
  }
  for (size_t i = 0; i < sizeof bandwidth_bytes / sizeof bandwidth_bytes[0]; i++) {
    int bytes = bandwidth_bytes[i];
    struct timing t = median_round_trip(rank, buffer, bytes, bandwidth_iterations, repetitions, seconds);
    if (rank == 0) {
      printf("bandwidth_MBps=%.1f bytes=%d iterations=%d\n", bytes / t.half_round_trip / 1e6, bytes, t.iterations);
      fflush(stdout);
    }
  }
  if (rank == 0) printf("payload_bytes=%lld\n", payload_bytes);
  free(buffer);
  MPI_Finalize();
  return 0;
}
