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
 * A claim of the spare keeper (magic MAGIC_CLAIM) has three descriptors (no go pipe), and its
 * payload starts with the spare's sequence number (see "the spare keeper" below).
 *
 * Replies (helper -> engine), on fd 1: 16 bytes each, four u32 (type, request id, a, b):
 *   READY    once, first: request id 0, a = VERSION
 *   STARTED  a = the command's first process, a pid in the sandbox's pid namespace
 *   FAILED   a = errno, b = stage (fork, setgroups, setgid, setuid, chdir, fork of the command)
 *   EXITED   a = exit code (128 + signal for a signalled command), b = 1 if the keeper itself was
 *            killed (by a signal from inside the sandbox, not by its command's end)
 *   SPARE    request id = the spare keeper's sequence number, a = its pid (VERSION 3)
 *
 * Per command: the helper forks a "keeper" that makes a process group of its own, then waits for a
 * byte on the go pipe: the engine sends it once it has moved the keeper into the command's cgroup
 * (EOF: exit without running anything). The keeper then takes on the user and working directory,
 * vforks the command and waits for it; the command is not a group leader (it may call setsid), and
 * a `kill 0` of it reaches neither the helper nor other commands. argv runs as `sh -c 'exec "$@"'`
 * would run it (exec_as_shell), without that shell's own exec.
 *
 * `sandbox4j-execd --framed` is the helper of a gVisor sandbox (see framed_main below): there no
 * descriptor crosses runsc's boundary, so the commands' stdin and output travel as frames over the
 * helper's own stdin and stdout, and a keeper that is a child subreaper stands in for the cgroup
 * that the crun mode kills a command's processes by.
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
#include <dirent.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAGIC 0x53425831u /* "SBX1" */
#define MAGIC_CLAIM 0x53425843u /* "SBXC": a request for the spare keeper (VERSION 3) */
#define SPARE_IDLE_MS 30000 /* a spare unclaimed this long is given up (it holds a pid) */
#define MAX_PAYLOAD (8u << 20)
#define MAX_COMMANDS 1024
#define MAX_STRINGS 65536
/* READY's a: 1 ran argv[0] as a path; 2 runs argv as `sh -c 'exec "$@"'` would (exec_as_shell);
   3 also keeps a spare keeper (SPARE, MAGIC_CLAIM) when started with --spares. A helper serves
   every request of an engine of an older version, and sends nothing the engine did not ask for. */
#define VERSION 3u

enum { STARTED = 1, FAILED = 2, EXITED = 3, READY = 4, SPARE = 5 };
enum { ST_FORK = 1, ST_SETGROUPS, ST_SETGID, ST_SETUID, ST_CHDIR, ST_FORK_COMMAND, ST_PROTOCOL,
       ST_SPARE };

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

/*
 * Runs `argv` as `sh -c 'exec "$@"'` would, without the shell's own exec (which cost 7-21 ms per
 * command under gVisor here, and about 1 ms under crun): a name without a slash is looked up on the
 * command's own PATH (a shell's default if it has none); a file the kernel cannot run (no #!) runs
 * under /bin/sh; not found exits 127, found but not runnable 126, each with the shell's message.
 */
static void exec_as_shell(char **argv, char **envp) {
  const char *name = argv[0];
  int found_but_denied = 0;
  if (strchr(name, '/')) {
    execve(name, argv, envp);
    if (errno == ENOEXEC)
      goto script;
    dprintf(2, "%s: %s\n", name, strerror(errno));
    _exit(errno == ENOENT || errno == ENOTDIR ? 127 : 126);
  }
  const char *path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  for (char **e = envp; *e; e++)
    if (strncmp(*e, "PATH=", 5) == 0)
      path = *e + 5;
  static char file[8192];
  for (const char *p = path;; p++) {
    const char *end = strchr(p, ':');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len + 1 + strlen(name) + 1 <= sizeof file) {
      if (len == 0)
        snprintf(file, sizeof file, "%s", name);
      else
        snprintf(file, sizeof file, "%.*s/%s", (int)len, p, name);
      execve(file, argv, envp);
      if (errno == ENOEXEC) {
        name = file;
        goto script;
      }
      if (errno == EACCES)
        found_but_denied = 1;
    }
    if (!end)
      break;
    p = end;
  }
  if (found_but_denied) {
    dprintf(2, "%s: Permission denied\n", argv[0]);
    _exit(126);
  }
  dprintf(2, "%s: not found\n", argv[0]);
  _exit(127);
script:;
  size_t n = 0;
  while (argv[n])
    n++;
  char **sh = calloc(n + 2, sizeof(char *));
  if (!sh)
    _exit(126);
  sh[0] = "/bin/sh";
  sh[1] = (char *)name;
  for (size_t i = 1; i <= n; i++)
    sh[i + 1] = argv[i];
  execve("/bin/sh", sh, envp);
  dprintf(2, "%s: %s\n", name, strerror(ENOEXEC));
  _exit(126);
}

/* Closes every descriptor from `low` on: close_range, or one by one as /proc/self/fd lists them. */
static void close_from(int low) {
  if (syscall(SYS_close_range, (unsigned)low, ~0u, 0) == 0)
    return;
  DIR *d = opendir("/proc/self/fd");
  if (!d) {
    for (int fd = low; fd < 65536; fd++)
      close(fd);
    return;
  }
  int mine = dirfd(d);
  int fds[4096], n = 0;
  struct dirent *e;
  while ((e = readdir(d)) && n < 4096) {
    int fd = atoi(e->d_name);
    if (fd >= low && fd != mine)
      fds[n++] = fd;
  }
  closedir(d);
  for (int i = 0; i < n; i++)
    close(fds[i]);
}

/* Moves the keeper's `n` descriptors to 3.. and closes the rest of the helper's. */
static void keep_fds(const int *fds, int n) {
  int high[5];
  for (int i = 0; i < n; i++) {
    high[i] = fcntl(fds[i], F_DUPFD, 64);
    if (high[i] < 0)
      _exit(127);
  }
  for (int i = 0; i < n; i++) {
    if (dup2(high[i], 3 + i) < 0)
      _exit(127);
  }
  close_from(3 + n);
}

/* What every keeper does first: nothing of the helper's stdio, a process group, no signals. */
static void become_keeper(void) {
  null_stdio(); /* let go of the helper's socket at once: only the helper speaks to the engine */
  setpgid(0, 0);
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, NULL); /* the keeper ends only with its command, or SIGKILL */
}

/* A keeper, in its command's cgroup: takes on the user, runs the command (fds: its stdin, stdout,
   stderr), waits for it and exits with its code. */
static void keeper_run(int fds[3], int report, uint32_t uid, uint32_t gid, const char *cwd,
                       char **argv, char **envp) {
  envp = with_home(envp, uid);
  if (setgroups(0, NULL) < 0)
    keeper_fail(report, ST_SETGROUPS);
  if (setgid(gid) < 0)
    keeper_fail(report, ST_SETGID);
  if (setuid(uid) < 0)
    keeper_fail(report, ST_SETUID);
  if (chdir(cwd) < 0)
    keeper_fail(report, ST_CHDIR);
  /* The keeper is the user now, and not dumpable (a change of user makes it so), so no process of
     the sandbox can trace it. vfork: the command needs no copy of the keeper's memory, which its
     exec discards at once; the child shares that memory until then and runs system calls only,
     and exec_as_shell, whose buffers nothing else uses meanwhile (the keeper is suspended). */
  prctl(PR_SET_DUMPABLE, 0);
  pid_t child = vfork();
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
    exec_as_shell(argv, envp);
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

/* The keeper of a request: waits for the go byte on fds[3] (sent once the engine has moved it into
   the command's cgroup), then runs the command. */
static void run_keeper(int fds[4], int report, uint32_t uid, uint32_t gid, const char *cwd,
                       char **argv, char **envp) {
  become_keeper();
  char go;
  ssize_t n;
  do {
    n = read(fds[3], &go, 1);
  } while (n < 0 && errno == EINTR);
  if (n != 1)
    _exit(125); /* the engine said no (the command was cancelled) or is gone */
  close(fds[3]);
  keeper_run(fds, report, uid, gid, cwd, argv, envp);
}

/* A command's payload (validated): f = request id, uid, gid, argc, envc; strings = cwd, argv...,
   NULL, env..., NULL (pointing into payload). 0, or -1 if malformed. */
static int parse_payload(char *payload, uint32_t len, uint32_t f[5], char ***strings) {
  if (len < 20)
    return -1;
  memcpy(f, payload, 5 * sizeof(uint32_t));
  uint32_t argc = f[3], envc = f[4];
  if (argc < 1 || argc > MAX_STRINGS || envc > MAX_STRINGS)
    return -1;
  char **out = calloc(1 + argc + 1 + envc + 1, sizeof(char *));
  if (!out)
    return -1;
  char *p = payload + 20, *end = payload + len;
  for (uint32_t i = 0; i < 1 + argc + envc; i++) {
    char *z = memchr(p, 0, (size_t)(end - p));
    if (!z) {
      free(out);
      return -1;
    }
    out[i < 1 + argc ? i : i + 1] = p;
    p = z + 1;
  }
  *strings = out;
  return 0;
}

/* ---- the spare keeper (VERSION 3) -----------------------------------------------------------
 * Forked ahead, while no command waits, so that a command's start is neither a fork of the helper
 * nor a move into a cgroup: the helper reports it (SPARE: request id = its sequence number, a =
 * its pid), and the engine moves it into a fresh command cgroup of its own before it ever claims
 * it. It waits on a socket pair with the helper, holding only that and /dev/null, for a claim: the
 * payload's length (u32, with the command's stdin, stdout and stderr as SCM_RIGHTS), then the
 * payload. An end of that socket without a claim (the helper gave it up, or is gone) ends it.
 * Root in the sandbox may kill it: the helper reaps it, and a claim of it then fails (FAILED, stage
 * ST_SPARE, nothing ran) and the engine starts that command the usual way. The helper makes the
 * next spare after each request, and gives one up that nobody claimed for SPARE_IDLE_MS.
 */
static int spares_wanted;    /* started with --spares: the engine takes SPARE replies */
static pid_t spare_pid;      /* 0: none */
static uint32_t spare_seq;   /* the current (or last) spare's sequence number */
static int spare_ctl = -1;   /* the helper's end of the spare's socket pair */
static int spare_report = -1; /* the read end of the spare's report pipe */

static void spare_main(int ctl, int report) {
  become_keeper();
  uint32_t len;
  int fds[3] = {-1, -1, -1};
  char control[CMSG_SPACE(3 * sizeof(int))];
  struct iovec iov = {&len, sizeof len};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
                       .msg_controllen = sizeof control};
  ssize_t n;
  do {
    n = recvmsg(ctl, &msg, MSG_CMSG_CLOEXEC | MSG_WAITALL);
  } while (n < 0 && errno == EINTR);
  if (n != sizeof len)
    _exit(125); /* given up */
  int nfds = 0;
  for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      int count = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
      for (int i = 0; i < count && nfds < 3; i++)
        memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
    }
  }
  char *payload = nfds == 3 && len >= 20 && len <= MAX_PAYLOAD ? malloc(len + 1) : NULL;
  if (!payload || read_all(ctl, payload, len) < 0)
    _exit(125);
  payload[len] = 0;
  close(ctl);
  uint32_t f[5];
  char **strings;
  if (parse_payload(payload, len, f, &strings) < 0)
    _exit(125);
  keeper_run(fds, report, f[1], f[2], strings[0], strings + 1, strings + 1 + f[3] + 1);
}

/* Forks the next spare and reports it; quietly none if it cannot (commands start the usual way). */
static void make_spare(void) {
  if (!spares_wanted)
    return;
  int pair[2], report[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) < 0)
    return;
  if (pipe2(report, O_CLOEXEC) < 0) {
    close(pair[0]);
    close(pair[1]);
    return;
  }
  pid_t pid = fork();
  if (pid == 0) {
    signal(SIGCHLD, SIG_DFL);
    int keep[2] = {pair[1], report[1]};
    keep_fds(keep, 2); /* nothing else of the helper's: not its socket, nor commands' reports */
    spare_main(3, 4);
  }
  close(pair[1]);
  close(report[1]);
  if (pid < 0) {
    close(pair[0]);
    close(report[0]);
    return;
  }
  spare_pid = pid;
  spare_ctl = pair[0];
  spare_report = report[0];
  reply(SPARE, ++spare_seq, (uint32_t)pid, 0);
}

/* Lets the spare go: it reads the end of its socket and exits (SIGKILL if `kill_it`). */
static void drop_spare(int kill_it) {
  if (spare_pid == 0)
    return;
  if (kill_it)
    kill(spare_pid, SIGKILL);
  close(spare_ctl);
  close(spare_report);
  spare_ctl = spare_report = -1;
  spare_pid = 0;
}

/* Hands a claimed command to spare `seq`; its pid, or 0 if there is no such spare any more. */
static pid_t claim_spare(uint32_t seq, const int fds[3], const char *payload, uint32_t len) {
  if (spare_pid == 0 || seq != spare_seq)
    return 0;
  char control[CMSG_SPACE(3 * sizeof(int))];
  memset(control, 0, sizeof control);
  struct iovec iov = {&len, sizeof len};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
                       .msg_controllen = sizeof control};
  struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(3 * sizeof(int));
  memcpy(CMSG_DATA(c), fds, 3 * sizeof(int));
  ssize_t n;
  do {
    n = sendmsg(spare_ctl, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n != sizeof len || write_all(spare_ctl, payload, len) < 0) {
    drop_spare(1); /* killed from inside, or not reading: never trusted with a command again */
    return 0;
  }
  pid_t pid = spare_pid;
  close(spare_ctl);
  spare_ctl = spare_report = -1; /* its report pipe is the command's now */
  spare_pid = 0;
  return pid;
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
  int claim = n == sizeof header && header[0] == MAGIC_CLAIM;
  uint32_t skip = claim ? 4 : 0; /* a claim's payload starts with the spare's sequence number */
  if (n != sizeof header || nfds != (claim ? 3 : 4) || (msg.msg_flags & MSG_CTRUNC) ||
      (header[0] != MAGIC && !claim) || header[1] < 20 + skip || header[1] > MAX_PAYLOAD)
    return -1;
  char *payload = malloc(header[1] + 1);
  if (!payload || read_all(0, payload, header[1]) < 0)
    return -1;
  payload[header[1]] = 0;
  uint32_t f[5];
  char **strings;
  if (parse_payload(payload + skip, header[1] - skip, f, &strings) < 0)
    return -1;
  uint32_t id = f[0], uid = f[1], gid = f[2], argc = f[3];
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
  } else if (claim) {
    uint32_t seq;
    memcpy(&seq, payload, sizeof seq);
    int reports = spare_report;
    pid_t keeper = claim_spare(seq, fds, payload + skip, header[1] - skip);
    if (keeper == 0) {
      reply(FAILED, id, ESRCH, ST_SPARE); /* nothing ran: the engine starts it the usual way */
    } else {
      commands[slot] = (struct command){keeper, id, reports};
      reply(STARTED, id, (uint32_t)keeper, 0);
    }
  } else if (pipe2(report, O_CLOEXEC) < 0) {
    reply(FAILED, id, (uint32_t)errno, ST_FORK);
  } else {
    pid_t keeper = fork();
    if (keeper == 0) {
      close(report[0]);
      close(sigchld_pipe[0]);
      close(sigchld_pipe[1]);
      if (spare_ctl >= 0) { /* else the spare would not see the helper give it up */
        close(spare_ctl);
        close(spare_report);
      }
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
    if (fds[i] >= 0)
      close(fds[i]);
  free(strings);
  free(payload);
  if (spare_pid == 0)
    make_spare();
  return 0;
}

static void reap(void) {
  int status;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    if (pid == spare_pid) {
      drop_spare(0); /* killed from inside: the next request makes another */
      continue;
    }
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

static int framed_main(void);

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--framed") == 0)
    return framed_main();
  spares_wanted = argc == 2 && strcmp(argv[1], "--spares") == 0;
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
  reply(READY, 0, VERSION, 0);
  make_spare();
  struct pollfd pfd[2] = {{.fd = 0, .events = POLLIN}, {.fd = sigchld_pipe[0], .events = POLLIN}};
  while (1) {
    int ready = poll(pfd, 2, spare_pid ? SPARE_IDLE_MS : -1);
    if (ready < 0) {
      if (errno == EINTR)
        continue;
      return 1;
    }
    if (ready == 0) {
      drop_spare(1);
      continue;
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

/* ---- framed mode: the helper of a gVisor sandbox ----------------------------------------------
 *
 * The engine runs `sandbox4j-execd --framed` with one `runsc exec` per sandbox, as root, its stdin
 * and stdout pipes of the engine's JVM (runsc hands the host's descriptors to the Sentry; only the
 * engine holds their other ends, and only a process allowed to ptrace the helper, root in the
 * sandbox, can reach them through /proc). Every message, each way, is a frame: three u32 (type,
 * command id, payload length), then the payload.
 *
 * Requests (engine -> helper):
 *   START      u32 uid, gid, argc, envc, then NUL-terminated cwd, argv..., env...
 *   STDIN      bytes for the command's stdin (the engine keeps at most FR_STDIN_MAX unacknowledged)
 *   STDIN_EOF  close the command's stdin once what came before is written
 *   CREDIT     u32 stream (1 stdout, 2 stderr), u32 bytes: the engine has room for that much more
 *   KILL       kill the command and every process it started; KILLED once none is left
 *   CLOSE      the engine reads no more of it: later output is read and dropped, stdin is closed
 * Replies (helper -> engine):
 *   READY      u32 FR_MAGIC, u32 FR_VERSION; command id 0; once, first
 *   STARTED    u32 the keeper's pid in the sandbox
 *   FAILED     u32 errno, u32 stage: nothing of the command ran
 *   OUTPUT     u32 stream, then at most FR_DATA bytes, never past the stream's credit
 *   EOF        u32 stream: every process has closed its end
 *   STDIN_ACK  u32 bytes of stdin written (or dropped: the command closed its stdin)
 *   EXITED     u32 exit code (128 + signal), u32 1 if the keeper itself ended by a signal
 *   KILLED     after KILL: the keeper has ended and every process it kept is dead
 *
 * Per command the helper forks a keeper, root, in a process group of its own, which makes itself a
 * child subreaper: every process the command starts stays its descendant while the command runs,
 * also one that called setsid and one whose parent exited (a daemon's double fork). The keeper
 * forks the command, which gives up everything of the helper (close_range) before it takes on the
 * user, and waits for it. The command is looked up on its PATH and run as `sh -c 'exec "$@"'` would
 * (exec_as_shell), without that shell. A KILL stops the keeper's tree, kills all of it but the keeper, and the
 * keeper last: gVisor (this release) kills the whole sandbox if a process dies whose subreaper is
 * exiting. When the engine's pipe ends (it gave the helper up, or its JVM is gone) the commands
 * still running are killed the same way: nothing would read their output.
 */
enum { R_START = 1, R_STDIN, R_STDIN_EOF, R_CREDIT, R_KILL, R_CLOSE };
enum { A_READY = 16, A_STARTED, A_FAILED, A_OUTPUT, A_EOF, A_STDIN_ACK, A_EXITED, A_KILLED };

#define FR_MAGIC 0x53425846u /* "SBXF" */
#define FR_VERSION 1u
#define FR_DATA 65536u
#define FR_STDIN_MAX (1u << 20)
#define FR_CREDIT_MAX (16u << 20)
#define FR_MAX 512

struct fcmd {
  int used;
  uint32_t id;
  pid_t keeper; /* 0 once reaped */
  int in, out[2], report;
  uint32_t credit[2];
  int detached, kill_pending, in_eof;
  char *inbuf;
  size_t inlen;
};

static struct fcmd fcmds[FR_MAX];

static void fr_send(uint32_t type, uint32_t id, const void *a, uint32_t alen, const void *b,
                    uint32_t blen) {
  uint32_t h[3] = {type, id, alen + blen};
  struct iovec v[3] = {{h, sizeof h}, {(void *)a, alen}, {(void *)b, blen}};
  int i = 0;
  while (i < 3) {
    ssize_t n = writev(1, v + i, 3 - i);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      _exit(0); /* the engine is gone */
    }
    while (i < 3 && (size_t)n >= v[i].iov_len) {
      n -= (ssize_t)v[i].iov_len;
      i++;
    }
    if (i < 3) {
      v[i].iov_base = (char *)v[i].iov_base + n;
      v[i].iov_len -= (size_t)n;
    }
  }
}

static void fr_send2(uint32_t type, uint32_t id, uint32_t a, uint32_t b) {
  uint32_t p[2] = {a, b};
  fr_send(type, id, p, sizeof p, NULL, 0);
}

static void fr_send1(uint32_t type, uint32_t id, uint32_t a) {
  fr_send(type, id, &a, sizeof a, NULL, 0);
}

/* State letter and parent of `pid` from /proc, or 0 if it is gone. */
static char proc_state(pid_t pid, pid_t *ppid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "re");
  if (!f)
    return 0;
  char state = 0;
  *ppid = 0;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "State:", 6) == 0) {
      char *p = line + 6;
      while (*p == ' ' || *p == '\t')
        p++;
      state = *p;
    } else if (strncmp(line, "PPid:", 5) == 0) {
      *ppid = (pid_t)atoi(line + 5);
      break;
    }
  }
  fclose(f);
  return state;
}

static int in_list(const pid_t *l, size_t n, pid_t p) {
  for (size_t i = 0; i < n; i++)
    if (l[i] == p)
      return 1;
  return 0;
}

static void sleep_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&t, &t) < 0 && errno == EINTR) {
  }
}

/*
 * Kills `root` (a keeper) and all its descendants: stops the tree until a listing of /proc, begun
 * once every member was seen stopped (a stopped process forks no more), finds no new member and
 * could read every process it saw; kills all but the root, waits until they are dead (zombies of
 * the stopped root, or gone), then kills the root. (A listing begun while a member still ran could
 * miss the child it forked just before it stopped.) Bounded: about 5 s at worst, whatever the tree
 * does.
 */
static void kill_tree(pid_t root) {
  size_t cap = 64, n = 1;
  pid_t *list = malloc(cap * sizeof(pid_t));
  if (!list) {
    kill(root, SIGKILL);
    return;
  }
  list[0] = root;
  kill(root, SIGSTOP);
  for (int round = 0; round < 2000; round++) {
    int stopped = 1;
    for (size_t i = 0; i < n; i++) {
      pid_t pp;
      char s = proc_state(list[i], &pp);
      if (s && s != 'T' && s != 't' && s != 'Z' && s != 'X')
        stopped = 0;
    }
    int added = 0, unread = 0;
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d && (e = readdir(d))) {
      pid_t p = (pid_t)atoi(e->d_name);
      pid_t pp;
      if (p <= 1 || in_list(list, n, p))
        continue;
      if (!proc_state(p, &pp)) {
        char dir[32];
        snprintf(dir, sizeof dir, "/proc/%d", (int)p);
        if (access(dir, F_OK) == 0)
          unread = 1; /* there, but its status could not be read: look again */
        continue;
      }
      if (!in_list(list, n, pp))
        continue;
      if (n == cap) {
        pid_t *bigger = realloc(list, cap * 2 * sizeof(pid_t));
        if (!bigger)
          break;
        list = bigger;
        cap *= 2;
      }
      list[n++] = p;
      kill(p, SIGSTOP);
      added = 1;
    }
    if (d)
      closedir(d);
    if (!d)
      unread = 1;
    if (stopped && !added && !unread)
      break;
    if (!added)
      sleep_ms(1);
  }
  for (size_t i = 1; i < n; i++)
    kill(list[i], SIGKILL);
  for (int tries = 0; tries < 5000; tries++) {
    int alive = 0;
    for (size_t i = 1; i < n; i++) {
      pid_t pp;
      char s = proc_state(list[i], &pp);
      if (s && s != 'Z' && s != 'X')
        alive = 1;
    }
    if (!alive)
      break;
    sleep_ms(1);
  }
  kill(root, SIGKILL);
  free(list);
}

/* The keeper of one command: fds 3..6 are its stdin, stdout, stderr and the report pipe. */
static void fr_keeper(uint32_t uid, uint32_t gid, const char *cwd, char **argv, char **envp) {
  null_stdio(); /* the helper's pipes to the engine are no business of the command's */
  setpgid(0, 0);
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, NULL); /* it ends with its command, or by SIGKILL */
  envp = with_home(envp, uid);
  /* vfork: under gVisor a fork copies the keeper's address space and the exec then tears it down
     again, which cost 15.6 ms p50 per fork+exec of /usr/bin/true here against 6.0 for vfork+exec.
     The child shares the keeper's memory until its exec, so it runs system calls only (and exec_as_shell,
     whose buffers nothing else uses meanwhile: the keeper is suspended), and it makes that memory
     not dumpable before it takes on the user, so that no process of that user can ptrace it or
     open its /proc/PID/mem in the moment between setuid and exec (the exec gives the command a
     memory of its own, dumpable as usual). */
  pid_t child = vfork();
  if (child < 0)
    keeper_fail(6, ST_FORK_COMMAND);
  if (child == 0) {
    if (prctl(PR_SET_DUMPABLE, 0) < 0)
      keeper_fail(6, ST_SETUID);
    for (int i = 0; i < 3; i++) {
      if (dup2(3 + i, i) < 0)
        _exit(127);
    }
    /* nothing of the helper's is left open across the change of user: only the report pipe,
       closed by the exec */
    close(3);
    close(4);
    close(5);
    fcntl(6, F_SETFD, FD_CLOEXEC);
    close_from(7);
    if (setgroups(0, NULL) < 0)
      keeper_fail(6, ST_SETGROUPS);
    if (setgid(gid) < 0)
      keeper_fail(6, ST_SETGID);
    if (setuid(uid) < 0)
      keeper_fail(6, ST_SETUID);
    if (chdir(cwd) < 0)
      keeper_fail(6, ST_CHDIR);
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    for (int s = 1; s < NSIG; s++)
      sigaction(s, &dfl, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    exec_as_shell(argv, envp);
  }
  close(3);
  close(4);
  close(5);
  close(6);
  int status;
  while (1) {
    pid_t w = waitpid(-1, &status, 0); /* its own command, and orphans it adopted */
    if (w == child)
      break;
    if (w < 0 && errno != EINTR)
      _exit(127);
  }
  _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

static struct fcmd *fr_find(uint32_t id) {
  for (int i = 0; i < FR_MAX; i++)
    if (fcmds[i].used && fcmds[i].id == id)
      return &fcmds[i];
  return NULL;
}

static void fr_close_in(struct fcmd *c) {
  if (c->in >= 0)
    close(c->in);
  c->in = -1;
  free(c->inbuf);
  c->inbuf = NULL;
  c->inlen = 0;
}

/* Frees a command's slot once its keeper is reaped and both streams have ended. */
static void fr_maybe_free(struct fcmd *c) {
  if (c->keeper != 0 || c->out[0] >= 0 || c->out[1] >= 0)
    return;
  fr_close_in(c);
  if (c->report >= 0)
    close(c->report);
  memset(c, 0, sizeof *c);
}

/* A START's payload (validated): its strings, cwd first, argv and env each NULL-terminated. */
static char **fr_parse_start(char *payload, uint32_t len, uint32_t *uid, uint32_t *gid,
                             uint32_t *argc) {
  if (len < 16)
    return NULL;
  uint32_t f[4];
  memcpy(f, payload, sizeof f);
  uint32_t envc = f[3];
  *uid = f[0];
  *gid = f[1];
  *argc = f[2];
  if (*argc < 1 || *argc > MAX_STRINGS || envc > MAX_STRINGS)
    return NULL;
  char **strings = calloc(1 + *argc + 1 + envc + 1, sizeof(char *));
  if (!strings)
    _exit(1);
  char *p = payload + 16, *end = payload + len;
  for (uint32_t i = 0; i < 1 + *argc + envc; i++) {
    char *z = memchr(p, 0, (size_t)(end - p));
    if (!z) {
      free(strings);
      return NULL;
    }
    strings[i < 1 + *argc ? i : i + 1] = p;
    p = z + 1;
  }
  return strings;
}

/*
 * The spare keeper: forked ahead, while nothing waits for it, so that a command's start is not
 * also a fork of the helper (about 4 ms under gVisor here). It holds the four pipes of the next
 * command at 3..6 and waits on a fifth, its control pipe at 7, for that command's START payload
 * (u32 length, then the payload); then it is that command's keeper. An end of its control pipe
 * without a payload (the helper gave it up or is gone) ends it. Root in the sandbox may kill it:
 * the helper then reaps it, gives it up and forks keepers itself until the next spare is made.
 */
static struct {
  pid_t pid; /* 0: none */
  int in, out, err, report, ctl; /* the helper's ends */
} spare;

static void fr_spare_wait(void) {
  uint32_t len, uid, gid, argc;
  if (read_all(7, &len, sizeof len) < 0 || len > MAX_PAYLOAD)
    _exit(0);
  char *payload = malloc(len + 1);
  if (!payload || read_all(7, payload, len) < 0)
    _exit(0);
  payload[len] = 0;
  close(7);
  char **strings = fr_parse_start(payload, len, &uid, &gid, &argc);
  if (!strings)
    _exit(2);
  fr_keeper(uid, gid, strings[0], strings + 1, strings + 1 + argc + 1);
}

static void fr_spare_discard(void) {
  if (spare.pid == 0)
    return;
  int ours[5] = {spare.in, spare.out, spare.err, spare.report, spare.ctl};
  for (int i = 0; i < 5; i++)
    if (ours[i] >= 0)
      close(ours[i]);
  spare.pid = 0; /* it reads the end of its control pipe and exits; reaped as any child */
}

static void fr_make_spare(void) {
  int p[5][2];
  int made = 0;
  for (; made < 5; made++)
    if (pipe2(p[made], O_CLOEXEC) < 0)
      break;
  pid_t pid = made == 5 ? fork() : -1;
  if (pid == 0) {
    signal(SIGCHLD, SIG_DFL);
    int fds[5] = {p[0][0], p[1][1], p[2][1], p[3][1], p[4][0]};
    keep_fds(fds, 5);
    null_stdio(); /* it waits holding nothing of the engine's */
    fr_spare_wait();
  }
  for (int i = 0; i < made; i++) {
    close(i == 0 || i == 4 ? p[i][0] : p[i][1]); /* the spare's ends */
    if (pid < 0)
      close(i == 0 || i == 4 ? p[i][1] : p[i][0]);
  }
  if (pid < 0)
    return; /* no spare: commands fork their keepers */
  fcntl(p[0][1], F_SETFL, O_NONBLOCK);
  fcntl(p[1][0], F_SETFL, O_NONBLOCK);
  fcntl(p[2][0], F_SETFL, O_NONBLOCK);
  spare.pid = pid;
  spare.in = p[0][1];
  spare.out = p[1][0];
  spare.err = p[2][0];
  spare.report = p[3][0];
  spare.ctl = p[4][1];
}

/* Hands a START's payload to the spare; 0 if it is gone (then it is given up). */
static int fr_spare_claim(const char *payload, uint32_t len) {
  if (spare.pid == 0)
    return 0;
  if (write_all(spare.ctl, &len, sizeof len) < 0 || write_all(spare.ctl, payload, len) < 0) {
    fr_spare_discard();
    return 0;
  }
  close(spare.ctl);
  spare.ctl = -1;
  return 1;
}

static void fr_start(uint32_t id, char *payload, uint32_t len) {
  uint32_t uid, gid, argc;
  char **strings = id == 0 || fr_find(id) ? NULL : fr_parse_start(payload, len, &uid, &gid, &argc);
  if (!strings)
    _exit(2); /* protocol violation: the engine never does this */
  struct fcmd *c = NULL;
  for (int i = 0; i < FR_MAX && !c; i++)
    if (!fcmds[i].used)
      c = &fcmds[i];
  if (!c) {
    fr_send2(A_FAILED, id, EAGAIN, ST_FORK);
    free(strings);
    return;
  }
  if (fr_spare_claim(payload, len)) {
    *c = (struct fcmd){.used = 1, .id = id, .keeper = spare.pid, .in = spare.in,
                       .out = {spare.out, spare.err}, .report = spare.report,
                       .credit = {256u << 10, 256u << 10}};
    spare.pid = 0;
    fr_send1(A_STARTED, id, (uint32_t)c->keeper);
    free(strings);
    fr_make_spare(); /* while the command runs, not when the next one waits */
    return;
  }
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, report[2] = {-1, -1};
  if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 ||
      pipe2(report, O_CLOEXEC) < 0) {
    fr_send2(A_FAILED, id, (uint32_t)errno, ST_FORK);
  } else {
    pid_t keeper = fork();
    if (keeper == 0) {
      signal(SIGCHLD, SIG_DFL);
      int fds[4] = {in[0], out[1], err[1], report[1]};
      keep_fds(fds, 4);
      fr_keeper(uid, gid, strings[0], strings + 1, strings + 1 + argc + 1);
    }
    if (keeper < 0) {
      fr_send2(A_FAILED, id, (uint32_t)errno, ST_FORK);
    } else {
      fcntl(in[1], F_SETFL, O_NONBLOCK);
      fcntl(out[0], F_SETFL, O_NONBLOCK);
      fcntl(err[0], F_SETFL, O_NONBLOCK);
      *c = (struct fcmd){.used = 1, .id = id, .keeper = keeper, .in = in[1],
                         .out = {out[0], err[0]}, .report = report[0],
                         .credit = {256u << 10, 256u << 10}};
      in[1] = out[0] = err[0] = report[0] = -1;
      fr_send1(A_STARTED, id, (uint32_t)keeper);
    }
  }
  int all[8] = {in[0], in[1], out[0], out[1], err[0], err[1], report[0], report[1]};
  for (int i = 0; i < 8; i++)
    if (all[i] >= 0)
      close(all[i]);
  free(strings);
  if (spare.pid == 0)
    fr_make_spare();
}

static void fr_reap(void) {
  int status;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    if (pid == spare.pid)
      fr_spare_discard(); /* killed from inside while it waited: the next command forks one */
    for (int i = 0; i < FR_MAX; i++) {
      struct fcmd *c = &fcmds[i];
      if (!c->used || c->keeper != pid)
        continue;
      uint32_t failure[2];
      ssize_t n;
      do {
        n = read(c->report, failure, sizeof failure);
      } while (n < 0 && errno == EINTR);
      if (n == (ssize_t)sizeof failure)
        fr_send2(A_FAILED, c->id, failure[1], failure[0]);
      else
        fr_send2(A_EXITED, c->id,
                 WIFEXITED(status) ? (uint32_t)WEXITSTATUS(status)
                                   : 128u + (uint32_t)WTERMSIG(status),
                 WIFEXITED(status) ? 0 : 1);
      c->keeper = 0;
      if (c->kill_pending)
        fr_send(A_KILLED, c->id, NULL, 0, NULL, 0);
      fr_maybe_free(c);
      break;
    }
  }
}

static void fr_kill(struct fcmd *c) {
  if (c->keeper == 0) {
    fr_send(A_KILLED, c->id, NULL, 0, NULL, 0);
    return;
  }
  if (!c->kill_pending) {
    c->kill_pending = 1;
    kill_tree(c->keeper); /* KILLED follows the keeper's reaping */
  }
}

/* One request from the engine; -1 when its pipe has ended. Anything malformed ends the helper. */
static int fr_request(void) {
  uint32_t h[3];
  if (read_all(0, h, sizeof h) < 0)
    return -1;
  uint32_t type = h[0], id = h[1], len = h[2];
  uint32_t max = type == R_START ? MAX_PAYLOAD : type == R_STDIN ? FR_DATA : 8;
  if (len > max)
    _exit(2);
  char *payload = malloc(len + 1);
  if (!payload)
    _exit(1);
  if (read_all(0, payload, len) < 0)
    return -1;
  payload[len] = 0;
  struct fcmd *c = fr_find(id);
  switch (type) {
  case R_START:
    fr_start(id, payload, len);
    break;
  case R_STDIN:
    if (!c || c->in < 0) {
      fr_send1(A_STDIN_ACK, id, len); /* it closed its stdin: dropped */
    } else {
      if (c->inlen + len > FR_STDIN_MAX)
        _exit(2);
      char *bigger = realloc(c->inbuf, c->inlen + len + 1);
      if (!bigger)
        _exit(1);
      c->inbuf = bigger;
      memcpy(c->inbuf + c->inlen, payload, len);
      c->inlen += len;
    }
    break;
  case R_STDIN_EOF:
    if (c) {
      c->in_eof = 1;
      if (c->inlen == 0)
        fr_close_in(c);
    }
    break;
  case R_CREDIT: {
    uint32_t v[2] = {0, 0};
    if (len != 8)
      _exit(2);
    memcpy(v, payload, sizeof v);
    if (v[0] < 1 || v[0] > 2)
      _exit(2);
    if (c) {
      if (c->credit[v[0] - 1] + (uint64_t)v[1] > FR_CREDIT_MAX)
        _exit(2);
      c->credit[v[0] - 1] += v[1];
    }
    break;
  }
  case R_KILL:
    if (c)
      fr_kill(c);
    else
      fr_send(A_KILLED, id, NULL, 0, NULL, 0);
    break;
  case R_CLOSE:
    if (c) {
      c->detached = 1;
      if (c->inlen)
        fr_send1(A_STDIN_ACK, id, (uint32_t)c->inlen);
      fr_close_in(c);
      fr_maybe_free(c);
    }
    break;
  default:
    _exit(2);
  }
  free(payload);
  return 0;
}

static void fr_write_stdin(struct fcmd *c) {
  ssize_t n = write(c->in, c->inbuf, c->inlen);
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return;
  if (n < 0) { /* EPIPE: it closed its stdin; what is left is dropped */
    fr_send1(A_STDIN_ACK, c->id, (uint32_t)c->inlen);
    fr_close_in(c);
    return;
  }
  memmove(c->inbuf, c->inbuf + n, c->inlen - (size_t)n);
  c->inlen -= (size_t)n;
  fr_send1(A_STDIN_ACK, c->id, (uint32_t)n);
  if (c->inlen == 0 && c->in_eof)
    fr_close_in(c);
}

static void fr_read_output(struct fcmd *c, int s) {
  static char buf[FR_DATA];
  size_t want = c->detached ? FR_DATA : (c->credit[s] < FR_DATA ? c->credit[s] : FR_DATA);
  ssize_t n = read(c->out[s], buf, want);
  if (n < 0)
    return; /* EAGAIN, EINTR */
  if (n == 0) {
    close(c->out[s]);
    c->out[s] = -1;
    if (!c->detached)
      fr_send1(A_EOF, c->id, (uint32_t)s + 1);
    fr_maybe_free(c);
    return;
  }
  if (!c->detached) {
    uint32_t stream = (uint32_t)s + 1;
    c->credit[s] -= (uint32_t)n;
    fr_send(A_OUTPUT, c->id, &stream, sizeof stream, buf, (uint32_t)n);
  }
}

static int framed_main(void) {
  signal(SIGPIPE, SIG_IGN);
  if (pipe2(sigchld_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
    return 1;
  struct sigaction sa = {.sa_handler = on_sigchld, .sa_flags = SA_RESTART | SA_NOCLDSTOP};
  sigaction(SIGCHLD, &sa, NULL);
  int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null >= 0 && null != 2) {
    dup2(null, 2);
    close(null);
  }
  fcntl(0, F_SETFD, FD_CLOEXEC);
  fcntl(1, F_SETFD, FD_CLOEXEC);
  fr_send2(A_READY, 0, FR_MAGIC, FR_VERSION);
  fr_make_spare();
  static struct pollfd pfd[2 + 3 * FR_MAX];
  static struct fcmd *owner[2 + 3 * FR_MAX];
  static int kind[2 + 3 * FR_MAX];
  while (1) {
    int n = 0;
    pfd[n++] = (struct pollfd){.fd = 0, .events = POLLIN};
    pfd[n++] = (struct pollfd){.fd = sigchld_pipe[0], .events = POLLIN};
    for (int i = 0; i < FR_MAX; i++) {
      struct fcmd *c = &fcmds[i];
      if (!c->used)
        continue;
      if (c->in >= 0 && c->inlen > 0) {
        owner[n] = c;
        kind[n] = 0;
        pfd[n++] = (struct pollfd){.fd = c->in, .events = POLLOUT};
      }
      for (int s = 0; s < 2; s++) {
        if (c->out[s] >= 0 && (c->detached || c->credit[s] > 0)) {
          owner[n] = c;
          kind[n] = 1 + s;
          pfd[n++] = (struct pollfd){.fd = c->out[s], .events = POLLIN};
        }
      }
    }
    if (poll(pfd, (nfds_t)n, -1) < 0) {
      if (errno == EINTR)
        continue;
      return 1;
    }
    if (pfd[1].revents) {
      char drain[64];
      while (read(sigchld_pipe[0], drain, sizeof drain) > 0) {
      }
      fr_reap();
    }
    for (int i = 2; i < n; i++) {
      struct fcmd *c = owner[i];
      if (!pfd[i].revents || !c->used)
        continue;
      if (kind[i] == 0 && c->in == pfd[i].fd)
        fr_write_stdin(c);
      else if (kind[i] > 0 && c->out[kind[i] - 1] == pfd[i].fd)
        fr_read_output(c, kind[i] - 1);
    }
    if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      if (fr_request() < 0) {
        for (int i = 0; i < FR_MAX; i++)
          if (fcmds[i].used && fcmds[i].keeper != 0)
            kill_tree(fcmds[i].keeper);
        return 0;
      }
    }
  }
}
