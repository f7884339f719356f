/*
 * sandbox4j-reaper: runs a command whose daemons outlive it (`runsc run -detach`) so that those
 * daemons are reaped the moment they die.
 *
 *   sandbox4j-reaper PROGRAM [ARG...]
 *
 * Why: `runsc run -detach` forks gVisor's Sentry and gofer and exits; they are reparented to the
 * host's init. `runsc delete` kills the Sentry and waits until its pid is gone, which for a zombie
 * means until the init reaps it. An init that reaps late (a VM's agent that reaps once a second, a
 * container whose PID 1 is a JVM that never reaps strangers) makes every destroy wait that long
 * or forever.
 *
 * How: a keeper process, in a session of its own, makes itself a child subreaper
 * (PR_SET_CHILD_SUBREAPER) and runs PROGRAM as its child. The daemons PROGRAM leaves behind are
 * reparented to the keeper, which reaps each the moment it dies and exits when none is left.
 * This process waits only for PROGRAM and exits with its status (128+N for a signal), so the
 * caller sees PROGRAM's result as if it had run PROGRAM itself.
 *
 * It reads nothing from a sandbox and takes no input but its argv, given by the engine. It is
 * built by `sandbox4j setup` (ExecHelperBuild) with gcc -static.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static int status_code(int status) {
  if (WIFEXITED(status)) {
    return WEXITSTATUS(status);
  }
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 125;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: sandbox4j-reaper PROGRAM [ARG...]\n");
    return 125;
  }
  int result[2];
  if (pipe2(result, O_CLOEXEC) != 0) {
    perror("sandbox4j-reaper: pipe2");
    return 125;
  }
  pid_t keeper = fork();
  if (keeper < 0) {
    perror("sandbox4j-reaper: fork");
    return 125;
  }
  if (keeper > 0) {
    close(result[1]);
    int code = 125;
    ssize_t n;
    do {
      n = read(result[0], &code, sizeof code);
    } while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof code) {
      fprintf(stderr, "sandbox4j-reaper: the keeper ended before PROGRAM did\n");
      code = 125;
    }
    return code;
  }

  close(result[0]);
  setsid(); /* no signal meant for the caller's process group or terminal reaches the daemons */
  if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
    perror("sandbox4j-reaper: PR_SET_CHILD_SUBREAPER");
    _exit(125);
  }
  pid_t program = fork();
  if (program < 0) {
    perror("sandbox4j-reaper: fork");
    _exit(125);
  }
  if (program == 0) {
    execvp(argv[1], argv + 1);
    fprintf(stderr, "sandbox4j-reaper: cannot run %s: %m\n", argv[1]);
    _exit(127);
  }
  int status = 0;
  int code;
  for (;;) {
    pid_t done = waitpid(-1, &status, 0);
    if (done == program) {
      code = status_code(status);
      break;
    }
    if (done < 0 && errno != EINTR) {
      code = 125;
      break;
    }
    /* a daemon PROGRAM started died before PROGRAM returned: reaped, nothing to report */
  }
  /* the caller's stdio is no business of the daemons': let its pipes end */
  int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null >= 0) {
    dup2(null, 0);
    dup2(null, 1);
    dup2(null, 2);
  }
  ssize_t w;
  do {
    w = write(result[1], &code, sizeof code);
  } while (w < 0 && errno == EINTR);
  close(result[1]);
  while (waitpid(-1, NULL, 0) > 0 || errno == EINTR) {
    /* each daemon reaped as it dies; none left (ECHILD) ends the keeper */
  }
  _exit(0);
}
