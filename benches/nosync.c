/* fsync and fdatasync made no-ops, for LD_PRELOAD: what a run costs when the
 * disk's waits are free (docs/performance.md). A measuring aid only: a run made
 * with it is not durable.
 *
 *   cc -shared -fPIC -O2 -o nosync.so benches/nosync.c
 */
int fsync(int fd) { (void)fd; return 0; }
int fdatasync(int fd) { (void)fd; return 0; }
