/* The fork floor of a stage that waits, as the engine does, for every process
 * its command leaves behind (docs/performance.md, benches/dag.sh).
 *
 *   cc -O2 -o group-floor benches/group-floor.c
 *   group-floor N ARGV...        # every "{}" in ARGV becomes 1, 2, ... N
 *
 * Runs ARGV N times, one after the other, each in a process group of its own,
 * and starts the next only once every process the last one started has ended.
 * `xargs` waits for its child only: under bubblewrap with `--unshare-pid` the
 * child is the outer bwrap, whose inner one (the new namespace's first process)
 * may still be ending when the next is started. This loop is made the reaper
 * of its orphans (PR_SET_CHILD_SUBREAPER), so that inner process is its own to
 * wait for too, the way the engine, the subreaper of what it starts, waits for
 * a stage's whole group. Exits 1 if a command fails or cannot be started.
 *
 * With GROUP_FLOOR_PIPES=1 each command's stdout and stderr are pipes that the
 * loop reads until both end, before it waits: the floor of an engine that
 * records what its commands print, as specbridge does (docs/performance.md,
 * "Chains against Snakemake").
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* Reads the two pipes until both have ended, discarding what comes. */
static void drain(int out, int err) {
    struct pollfd fds[2] = {{out, POLLIN, 0}, {err, POLLIN, 0}};
    int open_ends = 2;
    char buf[4096];
    while (open_ends > 0) {
        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        for (int k = 0; k < 2; k++) {
            if (fds[k].fd >= 0 && fds[k].revents != 0 && read(fds[k].fd, buf, sizeof buf) <= 0) {
                close(fds[k].fd);
                fds[k].fd = -1;
                open_ends--;
            }
        }
    }
}

/* `arg` with every "{}" replaced by `n`. */
static char *substitute(const char *arg, const char *n) {
    size_t len = strlen(arg), nlen = strlen(n), count = 0;
    for (const char *p = arg; (p = strstr(p, "{}")) != NULL; p += 2)
        count++;
    char *out = malloc(len + count * nlen + 1), *o = out;
    if (out == NULL)
        return NULL;
    for (const char *p = arg; *p != '\0';) {
        if (p[0] == '{' && p[1] == '}') {
            memcpy(o, n, nlen);
            o += nlen;
            p += 2;
        } else {
            *o++ = *p++;
        }
    }
    *o = '\0';
    return out;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s N ARGV...\n", argv[0]);
        return 2;
    }
    long n = strtol(argv[1], NULL, 10);
    int given = argc - 2;
    char **args = calloc((size_t)given + 1, sizeof *args);
    if (args == NULL || prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
        perror("group-floor");
        return 1;
    }
    int failed = 0;
    const char *pipes_env = getenv("GROUP_FLOOR_PIPES");
    int piped = pipes_env != NULL && strcmp(pipes_env, "1") == 0;
    for (long i = 1; i <= n; i++) {
        int out[2], err[2];
        if (piped && (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0)) {
            perror("group-floor: pipe");
            return 1;
        }
        char num[24];
        snprintf(num, sizeof num, "%ld", i);
        for (int a = 0; a < given; a++) {
            args[a] = substitute(argv[a + 2], num);
            if (args[a] == NULL) {
                perror("group-floor");
                return 1;
            }
        }
        pid_t pid = fork();
        if (pid < 0) {
            perror("group-floor: fork");
            return 1;
        }
        if (pid == 0) {
            setpgid(0, 0);
            if (piped && (dup2(out[1], 1) < 0 || dup2(err[1], 2) < 0))
                _exit(127);
            execvp(args[0], args);
            _exit(127);
        }
        for (int a = 0; a < given; a++)
            free(args[a]);
        if (piped) {
            close(out[1]);
            close(err[1]);
            drain(out[0], err[0]);
        }
        /* Every descendant, the command's own child and any orphan it left. */
        for (;;) {
            int status;
            pid_t done = waitpid(-1, &status, 0);
            if (done < 0) {
                if (errno == EINTR)
                    continue;
                break; /* ECHILD: nothing of this command is left */
            }
            if (done == pid && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
                failed = 1;
        }
    }
    return failed;
}
