/*
 * sandbox4j-execd: the exec helper that runs inside one sandbox and forks its commands.
 *
 * The engine starts it with the runtime's own exec (so it has the container's namespaces, seccomp
 * filter, capability bounding set, rlimits and cgroups, exactly as a command exec'd the slow way),
 * as root, with fd 0 and fd 1 both one end of a private unix socket pair: no path anywhere, only
 * the engine holds the other end. It serves until that socket ends, then exits. The engine trusts
 * nothing it says (code in the sandbox can replace or ptrace it): see docs/security.md.
 *
 * Request (engine -> helper), on fd 0: a header of two u32 (magic, payload length) sent with
 * exactly four descriptors (SCM_RIGHTS): the command's stdin, stdout, stderr, and a "go" pipe;
 * then the payload: u32 request id, uid, gid, argc, envc, then NUL-terminated cwd, argv..., env...
 *
 * Replies (helper -> engine), on fd 1: 16 bytes each, four u32 (type, request id, a, b):
 *   STARTED  a = the command's first process, a pid in the sandbox's pid namespace
 *   FAILED   a = errno, b = stage (fork, setgroups, setgid, setuid, chdir, fork of the command)
 *   EXITED   a = exit code (128 + signal for a signalled command), b = 1 if the keeper itself was
 *            killed (by a signal from inside the sandbox, not by its command's end)
 *
 * Per command: the helper forks a "keeper" that makes a process group of its own, then waits for a
 * byte on the go pipe: the engine sends it once it has moved the keeper into the command's cgroup
 * (EOF: exit without running anything). The keeper then takes on the user and working directory,
 * forks the command and waits for it; the command is not a group leader (it may call setsid), and
 * a `kill 0` of it reaches neither the helper nor other commands.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAGIC 0x53425831u /* "SBX1" */
#define MAX_PAYLOAD (8u << 20)
#define MAX_COMMANDS 1024
#define MAX_STRINGS 65536

enum { STARTED = 1, FAILED = 2, EXITED = 3, READY = 4 };
enum { ST_FORK = 1, ST_SETGROUPS, ST_SETGID, ST_SETUID, ST_CHDIR, ST_FORK_COMMAND, ST_PROTOCOL };

struct command {
  pid_t keeper;
  uint32_t id;
  int report; /* read end: the keeper's setup failure, if any (closes on exec/exit) */
};

static struct command commands[MAX_COMMANDS];
static int sigchld_pipe[2];

static int write_all(int fd, const void *buf, size_t len) {
  const char *p = buf;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

static void reply(uint32_t type, uint32_t id, uint32_t a, uint32_t b) {
  uint32_t msg[4] = {type, id, a, b};
  if (write_all(1, msg, sizeof msg) < 0)
    _exit(0); /* the engine is gone */
}

static int read_all(int fd, void *buf, size_t len) {
  char *p = buf;
  while (len > 0) {
    ssize_t n = read(fd, p, len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return -1;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

static void on_sigchld(int sig) {
  (void)sig;
  int saved = errno;
  char c = 0;
  (void)!write(sigchld_pipe[1], &c, 1);
  errno = saved;
}

/* In the keeper: reports a setup failure to the helper and exits. */
static void keeper_fail(int report, uint32_t stage) {
  uint32_t msg[2] = {stage, (uint32_t)errno};
  (void)write_all(report, msg, sizeof msg);
  _exit(127);
}

static void null_stdio(void) {
  int fd = open("/dev/null", O_RDWR);
  if (fd >= 0) {
    dup2(fd, 0);
    dup2(fd, 1);
    dup2(fd, 2);
    if (fd > 2)
      close(fd);
  }
}

/*
 * As crun exec does: a command whose environment has no HOME gets the user's home directory from
 * the sandbox's /etc/passwd, or "/". Read as root before the keeper takes on the user.
 */
static char **with_home(char **envp, uint32_t uid) {
  size_t n = 0;
  for (; envp[n]; n++) {
    if (strncmp(envp[n], "HOME=", 5) == 0)
      return envp;
  }
  static char home[4096 + 6];
  snprintf(home, sizeof home, "HOME=/");
  FILE *f = fopen("/etc/passwd", "re");
  if (f) {
    char line[4096];
    while (fgets(line, sizeof line, f)) {
      char *field[7] = {0};
      char *p = line;
      int k = 0;
      for (; k < 7 && p; k++) {
        field[k] = p;
        p = strchr(p, ':');
        if (p)
          *p++ = 0;
      }
      if (k < 6 || !field[2] || !field[5])
        continue;
      char *end;
      unsigned long id = strtoul(field[2], &end, 10);
      if (*field[2] && *end == 0 && id == uid) {
        field[5][strcspn(field[5], "\n")] = 0;
        if (*field[5])
          snprintf(home, sizeof home, "HOME=%s", field[5]);
        break;
      }
    }
    fclose(f);
  }
  char **out = calloc(n + 2, sizeof(char *));
  if (!out)
    return envp;
  memcpy(out, envp, n * sizeof(char *));
  out[n] = home;
  return out;
}

static void run_keeper(int fds[4], int report, uint32_t uid, uint32_t gid, const char *cwd,
                       char **argv, char **envp) {
  null_stdio(); /* let go of the helper's socket at once: only the helper speaks to the engine */
  setpgid(0, 0);
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, NULL); /* the keeper ends only with its command, or SIGKILL */
  char go;
  ssize_t n;
  do {
    n = read(fds[3], &go, 1);
  } while (n < 0 && errno == EINTR);
  if (n != 1)
    _exit(125); /* the engine said no (the command was cancelled) or is gone */
  close(fds[3]);
  envp = with_home(envp, uid);
  if (setgroups(0, NULL) < 0)
    keeper_fail(report, ST_SETGROUPS);
  if (setgid(gid) < 0)
    keeper_fail(report, ST_SETGID);
  if (setuid(uid) < 0)
    keeper_fail(report, ST_SETUID);
  if (chdir(cwd) < 0)
    keeper_fail(report, ST_CHDIR);
  pid_t child = fork();
  if (child < 0)
    keeper_fail(report, ST_FORK_COMMAND);
  if (child == 0) {
    for (int i = 0; i < 3; i++) {
      if (dup2(fds[i], i) < 0)
        _exit(127);
    }
    for (int i = 0; i < 3; i++) {
      if (fds[i] > 2)
        close(fds[i]);
    }
    close(report);
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    for (int s = 1; s < NSIG; s++)
      sigaction(s, &dfl, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execve(argv[0], argv, envp);
    int e = errno;
    dprintf(2, "sandbox4j: cannot run %s: %s\n", argv[0], strerror(e));
    _exit(e == ENOENT ? 127 : 126);
  }
  for (int i = 0; i < 3; i++)
    close(fds[i]);
  close(report); /* and it holds no end of the command's pipes: their EOF is the command's */
  int status;
  while (waitpid(child, &status, 0) < 0) {
    if (errno != EINTR)
      _exit(127);
  }
  _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

/* Reads one request and starts its command; returns -1 when the engine is gone or misbehaves. */
static int serve_one(void) {
  uint32_t header[2];
  char control[CMSG_SPACE(4 * sizeof(int))];
  struct iovec iov = {header, sizeof header};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
                       .msg_controllen = sizeof control};
  ssize_t n;
  do {
    n = recvmsg(0, &msg, MSG_CMSG_CLOEXEC | MSG_WAITALL);
  } while (n < 0 && errno == EINTR);
  if (n <= 0)
    return -1;
  int fds[4] = {-1, -1, -1, -1};
  int nfds = 0;
  for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      int count = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
      for (int i = 0; i < count; i++) {
        int fd;
        memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        if (nfds < 4)
          fds[nfds++] = fd;
        else
          close(fd);
      }
    }
  }
  if (n != sizeof header || nfds != 4 || (msg.msg_flags & MSG_CTRUNC) || header[0] != MAGIC ||
      header[1] < 20 || header[1] > MAX_PAYLOAD)
    return -1;
  char *payload = malloc(header[1] + 1);
  if (!payload || read_all(0, payload, header[1]) < 0)
    return -1;
  payload[header[1]] = 0;
  uint32_t f[5];
  memcpy(f, payload, sizeof f);
  uint32_t id = f[0], uid = f[1], gid = f[2], argc = f[3], envc = f[4];
  if (argc < 1 || argc > MAX_STRINGS || envc > MAX_STRINGS)
    return -1;
  char **strings = calloc(1 + argc + 1 + envc + 1, sizeof(char *));
  if (!strings)
    return -1;
  char *p = payload + 20, *end = payload + header[1];
  for (uint32_t i = 0; i < 1 + argc + envc; i++) {
    char *z = memchr(p, 0, (size_t)(end - p));
    if (!z)
      return -1;
    strings[i < 1 + argc ? i : i + 1] = p;
    p = z + 1;
  }
  const char *cwd = strings[0];
  char **argv = strings + 1;
  char **envp = strings + 1 + argc + 1;
  int slot = -1;
  for (int i = 0; i < MAX_COMMANDS; i++) {
    if (commands[i].keeper == 0) {
      slot = i;
      break;
    }
  }
  int report[2];
  if (slot < 0) {
    errno = EAGAIN;
    reply(FAILED, id, EAGAIN, ST_FORK);
  } else if (pipe2(report, O_CLOEXEC) < 0) {
    reply(FAILED, id, (uint32_t)errno, ST_FORK);
  } else {
    pid_t keeper = fork();
    if (keeper == 0) {
      close(report[0]);
      close(sigchld_pipe[0]);
      close(sigchld_pipe[1]);
      signal(SIGCHLD, SIG_DFL);
      run_keeper(fds, report[1], uid, gid, cwd, argv, envp);
    }
    close(report[1]);
    if (keeper < 0) {
      reply(FAILED, id, (uint32_t)errno, ST_FORK);
      close(report[0]);
    } else {
      commands[slot] = (struct command){keeper, id, report[0]};
      reply(STARTED, id, (uint32_t)keeper, 0);
    }
  }
  for (int i = 0; i < 4; i++)
    close(fds[i]);
  free(strings);
  free(payload);
  return 0;
}

static void reap(void) {
  int status;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    for (int i = 0; i < MAX_COMMANDS; i++) {
      if (commands[i].keeper != pid)
        continue;
      uint32_t failure[2];
      ssize_t n;
      do {
        n = read(commands[i].report, failure, sizeof failure);
      } while (n < 0 && errno == EINTR);
      if (n == (ssize_t)sizeof failure)
        reply(FAILED, commands[i].id, failure[1], failure[0]);
      else
        /* the keeper only ever _exits: a signal that ended it came from elsewhere (b = 1) */
        reply(EXITED, commands[i].id,
              WIFEXITED(status) ? (uint32_t)WEXITSTATUS(status) : 128u + (uint32_t)WTERMSIG(status),
              WIFEXITED(status) ? 0 : 1);
      close(commands[i].report);
      commands[i].keeper = 0;
      break;
    }
  }
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  if (pipe2(sigchld_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
    return 1;
  struct sigaction sa = {.sa_handler = on_sigchld, .sa_flags = SA_RESTART | SA_NOCLDSTOP};
  sigaction(SIGCHLD, &sa, NULL);
  int null = open("/dev/null", O_WRONLY);
  if (null >= 0 && null != 2) {
    dup2(null, 2);
    close(null);
  }
  reply(READY, 0, 1, 0);
  struct pollfd pfd[2] = {{.fd = 0, .events = POLLIN}, {.fd = sigchld_pipe[0], .events = POLLIN}};
  while (1) {
    if (poll(pfd, 2, -1) < 0) {
      if (errno == EINTR)
        continue;
      return 1;
    }
    if (pfd[1].revents) {
      char drain[64];
      while (read(sigchld_pipe[0], drain, sizeof drain) > 0) {
      }
      reap();
    }
    if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      if (serve_one() < 0)
        return 0;
    }
  }
}
