/* Wall-clock timing shared by the benchmark programs; included once at the end of each program. */
#include <sys/time.h>

double bench_now_seconds(void)
{
  struct timeval tv;
  gettimeofday(&tv, NULL);
  return tv.tv_sec + tv.tv_usec * 1.0e-6;
}

void bench_report(const char* name, double seconds)
{
  printf("%s: %.4f s\n", name, seconds);
}
