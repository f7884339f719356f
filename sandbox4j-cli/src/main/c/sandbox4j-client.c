/*
 * sandbox4j-client: the native thin client of the resident CLI process.
 *
 * A JVM takes about 100 ms on this kind of machine to start and run the Java thin client
 * (ResidentClient) before a command even reaches the resident; this program does the same job in
 * about a millisecond. It speaks ResidentClient's protocol (Frames.java) to the resident of this
 * user, code, Java and environment, and relays the command's output, input, exit code and
 * cancellation. Whenever it cannot hand the command over exactly as the Java client would (no
 * resident, a refusal, a locale or bytes the JVM would decode differently, anything unexpected
 * before the command started), it execs the JVM with the same arguments instead, which then does
 * what the CLI always did. So it only ever makes a command faster, never different.
 *
 *   sandbox4j-client JAVA_HOME CLASS_PATH [JVM_OPTION...] -- [ARG...]
 *
 * ./sandbox4j builds it (cc) and runs it; nothing else should. The resident checks every request
 * (peer uid, code identity, environment, servable command) and this program checks every frame it
 * reads: type, length, and stdin requests, as ResidentClient does.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <langinfo.h>
#include <locale.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* Frames.java */
#define PROTOCOL 1
#define MAX_REQUEST (4 << 20)
#define MAX_CHUNK (64 << 10)
#define MAX_REASON (4 << 10)
#define FAILURE 70
#define KILL_WAIT_SECONDS 10

extern char **environ;

static char *java_home;
static char *class_path;
static char **jvm_options;
static int jvm_option_count;
static char **args;
static int arg_count;

/* Runs the command in the JVM, as if this program had not been there. */
__attribute__((noreturn)) static void run_in_jvm(void) {
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGHUP, SIG_DFL);
  signal(SIGPIPE, SIG_DFL);
  size_t n = (size_t)jvm_option_count + (size_t)arg_count + 5;
  char **argv = calloc(n, sizeof(char *));
  char *java = NULL;
  if (argv == NULL || asprintf(&java, "%s/bin/java", java_home) < 0) {
    fprintf(stderr, "sandbox4j: out of memory\n");
    exit(FAILURE);
  }
  int i = 0;
  argv[i++] = java;
  for (int j = 0; j < jvm_option_count; j++) argv[i++] = jvm_options[j];
  argv[i++] = "-cp";
  argv[i++] = class_path;
  argv[i++] = "dev.sandbox4j.cli.Main";
  for (int j = 0; j < arg_count; j++) argv[i++] = args[j];
  argv[i] = NULL;
  execv(java, argv);
  fprintf(stderr, "sandbox4j: cannot run %s: %s\n", java, strerror(errno));
  exit(FAILURE);
}

/* ---- a growing byte buffer ------------------------------------------------------------------ */

typedef struct {
  char *bytes;
  size_t length, capacity;
} buffer;

static void put(buffer *b, const void *bytes, size_t n) {
  if (b->length + n > b->capacity) {
    size_t c = b->capacity ? b->capacity : 4096;
    while (c < b->length + n) c *= 2;
    char *grown = realloc(b->bytes, c);
    if (grown == NULL) run_in_jvm();
    b->bytes = grown;
    b->capacity = c;
  }
  memcpy(b->bytes + b->length, bytes, n);
  b->length += n;
}

static void put_str(buffer *b, const char *s) { put(b, s, strlen(s)); }

static void put_i32(buffer *b, uint32_t v) {
  unsigned char be[4] = {v >> 24, v >> 16, v >> 8, v};
  put(b, be, 4);
}

/* A string as Frames.Writer.str writes it: its length, then its UTF-8. */
static void put_field(buffer *b, const char *s) {
  put_i32(b, (uint32_t)strlen(s));
  put_str(b, s);
}

/* ---- what the JVM would see ----------------------------------------------------------------- */

/*
 * Whether the JVM decodes s to the same characters that these bytes are: valid UTF-8 in a UTF-8
 * locale, ASCII in the C locale. Anything else and the Java client would send other bytes.
 */
static int decodes_alike(const char *s, int utf8) {
  const unsigned char *p = (const unsigned char *)s;
  while (*p) {
    if (*p < 0x80) {
      p++;
      continue;
    }
    if (!utf8) return 0;
    int extra;
    uint32_t cp;
    if ((*p & 0xe0) == 0xc0) {
      extra = 1;
      cp = *p & 0x1f;
    } else if ((*p & 0xf0) == 0xe0) {
      extra = 2;
      cp = *p & 0x0f;
    } else if ((*p & 0xf8) == 0xf0) {
      extra = 3;
      cp = *p & 0x07;
    } else {
      return 0;
    }
    for (int i = 1; i <= extra; i++) {
      if ((p[i] & 0xc0) != 0x80) return 0;
      cp = (cp << 6) | (p[i] & 0x3f);
    }
    static const uint32_t least[] = {0, 0x80, 0x800, 0x10000};
    if (cp < least[extra] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    p += extra + 1;
  }
  return 1;
}

typedef struct {
  const char *entry; /* KEY=VALUE as in environ */
  size_t key_length;
} variable;

/* ResidentClient.VOLATILE: not part of the resident's identity. */
static int volatile_key(const char *key, size_t n) {
  static const char *names[] = {"PWD", "OLDPWD", "_", "SHLVL", "SANDBOX4J_RESIDENT"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    if (strlen(names[i]) == n && memcmp(names[i], key, n) == 0) return 1;
  }
  return 0;
}

static int by_key(const void *a, const void *b) {
  const variable *x = a, *y = b;
  size_t n = x->key_length < y->key_length ? x->key_length : y->key_length;
  int c = memcmp(x->entry, y->entry, n);
  if (c != 0) return c;
  return x->key_length < y->key_length ? -1 : x->key_length > y->key_length;
}

/*
 * The environment as System.getenv() has it: entries with a name and '=', the first of a name
 * winning, sorted by name (ResidentClient sorts with a TreeMap: the same order for names that are
 * ASCII, and any other name decodes differently anyway).
 */
static variable *environment(int *count, int utf8) {
  int n = 0;
  while (environ[n]) n++;
  variable *vars = calloc((size_t)n + 1, sizeof *vars);
  if (vars == NULL) run_in_jvm();
  int kept = 0;
  for (int i = 0; i < n; i++) {
    const char *eq = strchr(environ[i], '=');
    if (eq == NULL || eq == environ[i]) continue;
    if (!decodes_alike(environ[i], utf8)) run_in_jvm();
    vars[kept].entry = environ[i];
    vars[kept].key_length = (size_t)(eq - environ[i]);
    kept++;
  }
  /* a stable sort by name, then drop later duplicates: the first of a name wins */
  for (int i = 1; i < kept; i++) {
    variable v = vars[i];
    int j = i - 1;
    while (j >= 0 && by_key(&vars[j], &v) > 0) {
      vars[j + 1] = vars[j];
      j--;
    }
    vars[j + 1] = v;
  }
  int unique = 0;
  for (int i = 0; i < kept; i++) {
    if (unique > 0 && by_key(&vars[unique - 1], &vars[i]) == 0) continue;
    vars[unique++] = vars[i];
  }
  *count = unique;
  return vars;
}

static const char *value_of(variable *vars, int count, const char *key) {
  size_t n = strlen(key);
  for (int i = 0; i < count; i++) {
    if (vars[i].key_length == n && memcmp(vars[i].entry, key, n) == 0) {
      return vars[i].entry + n + 1;
    }
  }
  return NULL;
}

/* ResidentClient.codeIdentity: PATH|SIZE|MTIME|DEV|INO; per class path entry. */
static void code_identity(buffer *id) {
  char *copy = strdup(class_path);
  if (copy == NULL) run_in_jvm();
  char *save = NULL;
  for (char *entry = strtok_r(copy, ":", &save); entry; entry = strtok_r(NULL, ":", &save)) {
    size_t n = strlen(entry);
    /* Path.of normalizes these; the launcher never passes them, so only the plain form is ours */
    if (entry[0] != '/' || strstr(entry, "//") != NULL || (n > 1 && entry[n - 1] == '/')) {
      run_in_jvm();
    }
    put_str(id, entry);
    put_str(id, "|");
    struct stat st;
    if (stat(entry, &st) != 0) {
      if (errno != ENOENT) run_in_jvm();
      put_str(id, "missing;");
      continue;
    }
    char line[128];
    int64_t millis = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
    snprintf(line, sizeof line, "%" PRId64 "|%" PRId64 "|%" PRIu64 "|%" PRIu64 ";",
             (int64_t)st.st_size, millis, (uint64_t)st.st_dev, (uint64_t)st.st_ino);
    put_str(id, line);
  }
  free(copy);
}

static uint64_t fnv1a(const buffer *b) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < b->length; i++) {
    h ^= (unsigned char)b->bytes[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

/* ResidentClient's terminal(): stdin, stdout and stderr are all terminals. */
static int terminal(void) {
  for (int fd = 0; fd <= 2; fd++) {
    char link[64], target[256];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n < 0) return 0;
    target[n] = 0;
    if (strncmp(target, "/dev/pts/", 9) != 0 && strncmp(target, "/dev/tty", 8) != 0) return 0;
  }
  return 1;
}

/* ---- the connection ------------------------------------------------------------------------- */

static int signal_pipe[2] = {-1, -1};

static void on_signal(int sig) {
  int saved = errno;
  unsigned char s = (unsigned char)sig;
  if (write(signal_pipe[1], &s, 1) < 0) {
    /* full: a signal is pending anyway */
  }
  errno = saved;
}

/* Reads exactly n bytes; 0 at a clean end before the first byte, -1 on an error or a cut. */
static int read_fully(int fd, void *into, size_t n, int at_start) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, (char *)into + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) return (at_start && got == 0) ? 0 : -1;
    got += (size_t)r;
  }
  return 1;
}

static int write_fully(int fd, const void *bytes, size_t n) {
  size_t done = 0;
  while (done < n) {
    ssize_t w = write(fd, (const char *)bytes + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return -1;
    done += (size_t)w;
  }
  return 0;
}

static int write_frame(int fd, char type, const void *payload, uint32_t length) {
  unsigned char head[5] = {(unsigned char)type, length >> 24, length >> 16, length >> 8, length};
  if (write_fully(fd, head, 5) != 0) return -1;
  return length ? write_fully(fd, payload, length) : 0;
}

/* After the command started: nothing may run it a second time, so a broken resident is an error. */
__attribute__((noreturn)) static void failed(const char *why) {
  dprintf(2, "sandbox4j: the resident sandbox4j process failed during the command: %s\n", why);
  exit(FAILURE);
}

static uint32_t be32(const unsigned char *b) {
  return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

static long long now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Relays an accepted command until its exit frame; never returns. */
static void relay(int sock) {
  static unsigned char chunk[MAX_CHUNK];
  uint32_t wanted = 0; /* stdin bytes asked for and not sent yet */
  int cancelled_by = 0;
  long long give_up = 0;
  for (;;) {
    struct pollfd fds[3] = {
        {.fd = sock, .events = POLLIN},
        {.fd = signal_pipe[0], .events = POLLIN},
        {.fd = wanted ? 0 : -1, .events = POLLIN},
    };
    int timeout = -1;
    if (cancelled_by) {
      long long left = give_up - now_ms();
      if (left <= 0) exit(128 + cancelled_by);
      timeout = (int)left;
    }
    int ready = poll(fds, 3, timeout);
    if (ready < 0) {
      if (errno == EINTR) continue;
      failed(strerror(errno));
    }
    if (fds[1].revents & POLLIN) {
      unsigned char sig;
      if (read(signal_pipe[0], &sig, 1) == 1 && !cancelled_by) {
        /* as the Java client's shutdown hook: ask for the kill, wait for the exit, then end by the
         * signal, with the JVM's status for it */
        cancelled_by = sig;
        give_up = now_ms() + KILL_WAIT_SECONDS * 1000LL;
        if (write_frame(sock, 'C', NULL, 0) != 0) exit(128 + sig);
      }
      continue;
    }
    if (fds[2].revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL)) {
      ssize_t n = read(0, chunk, wanted);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) n = 0; /* as end of input */
      wanted = 0;
      if (write_frame(sock, 'D', chunk, (uint32_t)n) != 0) failed("cannot send stdin");
      continue;
    }
    if (!(fds[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    unsigned char head[5];
    int r = read_fully(sock, head, 5, 1);
    if (r == 0) failed("the resident closed the connection");
    if (r < 0) failed("end of stream inside a frame");
    uint32_t length = be32(head + 1);
    char type = (char)head[0];
    uint32_t max;
    switch (type) {
      case 'O':
      case 'E':
        max = MAX_CHUNK;
        break;
      case 'I':
      case 'X':
        max = 4;
        break;
      default: {
        char why[64];
        snprintf(why, sizeof why, "unexpected frame type %u", head[0]);
        failed(why);
      }
    }
    if (length > max || ((type == 'I' || type == 'X') && length != 4)) {
      char why[96];
      snprintf(why, sizeof why, "frame of type '%c' is %" PRIu32 " bytes long; at most %" PRIu32,
               type, length, max);
      failed(why);
    }
    if (length && read_fully(sock, chunk, length, 0) != 1) {
      failed("end of stream inside a frame");
    }
    if (type == 'O' || type == 'E') {
      /* as the in-process CLI's PrintStream: a closed stdout does not end the command */
      (void)write_fully(type == 'O' ? 1 : 2, chunk, length);
    } else if (type == 'I') {
      uint32_t n = be32(chunk);
      if (n < 1 || n > MAX_CHUNK) {
        char why[48];
        snprintf(why, sizeof why, "stdin wanted %" PRIu32 " bytes", n);
        failed(why);
      }
      if (wanted) failed("stdin wanted again before the last read was answered");
      wanted = n;
    } else {
      exit(cancelled_by ? 128 + cancelled_by : (int)be32(chunk));
    }
  }
}

int main(int argc, char **argv) {
  int separator = -1;
  for (int i = 3; i < argc; i++) {
    if (strcmp(argv[i], "--") == 0) {
      separator = i;
      break;
    }
  }
  if (argc < 4 || separator < 0) {
    fprintf(stderr, "usage: sandbox4j-client JAVA_HOME CLASS_PATH [JVM_OPTION...] -- [ARG...]\n"
                    "(./sandbox4j runs it; run that instead)\n");
    return 64;
  }
  java_home = argv[1];
  class_path = argv[2];
  jvm_options = argv + 3;
  jvm_option_count = separator - 3;
  args = argv + separator + 1;
  arg_count = argc - separator - 1;

  const char *mode = getenv("SANDBOX4J_RESIDENT");
  if (mode != NULL && strcmp(mode, "off") == 0) run_in_jvm();

  /* stdout.encoding and stderr.encoding as the JVM sets them: the locale's codeset, for the two
   * codesets whose decoding this program can tell apart from the JVM's */
  setlocale(LC_ALL, "");
  const char *codeset = nl_langinfo(CODESET);
  int utf8 = strcmp(codeset, "UTF-8") == 0;
  if (!utf8 && strcmp(codeset, "ANSI_X3.4-1968") != 0) run_in_jvm();
  for (int i = 0; i < arg_count; i++) {
    if (!decodes_alike(args[i], utf8)) run_in_jvm();
  }
  int var_count;
  variable *vars = environment(&var_count, utf8);

  /* the socket: ResidentClient.socket */
  char dir[PATH_MAX];
  const char *runtime = value_of(vars, var_count, "XDG_RUNTIME_DIR");
  if (runtime != NULL && runtime[0] == '/') {
    snprintf(dir, sizeof dir, "%s/sandbox4j", runtime);
  } else {
    snprintf(dir, sizeof dir, "/tmp/sandbox4j-%u", (unsigned)geteuid());
  }
  struct stat st;
  if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
      (st.st_mode & 07777) != 0700) {
    run_in_jvm(); /* none yet, or not private: the JVM makes it or refuses it */
  }
  char home[PATH_MAX];
  if (realpath(java_home, home) == NULL) run_in_jvm();
  buffer identity = {0};
  code_identity(&identity);
  put(&identity, "", 1);
  buffer key = {0};
  put_str(&key, class_path);
  put(&key, "", 1);
  put_str(&key, identity.bytes);
  put(&key, "", 1);
  put_str(&key, home);
  put(&key, "", 1);
  for (int i = 0; i < var_count; i++) {
    if (volatile_key(vars[i].entry, vars[i].key_length)) continue;
    put_str(&key, vars[i].entry);
    put(&key, "", 1);
  }
  struct sockaddr_un address = {.sun_family = AF_UNIX};
  int length = snprintf(address.sun_path, sizeof address.sun_path, "%s/cli-%" PRIx64 ".sock", dir,
                        fnv1a(&key));
  if (length < 0 || (size_t)length >= sizeof address.sun_path) run_in_jvm();

  /* the request: Frames.Request.encode */
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof cwd) == NULL || !decodes_alike(cwd, utf8)) run_in_jvm();
  buffer request = {0};
  put_i32(&request, PROTOCOL);
  put_field(&request, identity.bytes);
  put_field(&request, cwd);
  put_field(&request, codeset);
  put_field(&request, codeset);
  put_i32(&request, (uint32_t)terminal());
  put_i32(&request, (uint32_t)arg_count);
  for (int i = 0; i < arg_count; i++) put_field(&request, args[i]);
  put_i32(&request, (uint32_t)var_count);
  for (int i = 0; i < var_count; i++) {
    put_i32(&request, (uint32_t)vars[i].key_length);
    put(&request, vars[i].entry, vars[i].key_length);
    put_field(&request, vars[i].entry + vars[i].key_length + 1);
  }
  if (request.length > MAX_REQUEST) run_in_jvm();

  if (pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) run_in_jvm();
  struct sigaction action = {.sa_handler = on_signal};
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, NULL);
  sigaction(SIGTERM, &action, NULL);
  sigaction(SIGHUP, &action, NULL);
  signal(SIGPIPE, SIG_IGN);

  int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (sock < 0) run_in_jvm();
  if (connect(sock, (struct sockaddr *)&address, sizeof address) != 0) {
    close(sock);
    run_in_jvm(); /* none listens: the JVM runs it, and starts one for the next call */
  }
  unsigned char head[5];
  if (write_frame(sock, 'Q', request.bytes, (uint32_t)request.length) != 0 ||
      read_fully(sock, head, 5, 1) != 1) {
    close(sock);
    run_in_jvm();
  }
  uint32_t answer_length = be32(head + 1);
  if (head[0] == 'A' && answer_length == 0) {
    relay(sock);
  }
  /* refused (or not an answer at all): nothing ran, so the JVM may run it */
  close(sock);
  unsigned char sig;
  if (read(signal_pipe[0], &sig, 1) == 1) return 128 + sig;
  run_in_jvm();
}
