package dev.sandbox4j.workspace;

import java.io.IOException;
import java.io.InputStream;
import java.io.InterruptedIOException;
import java.math.BigDecimal;
import java.math.RoundingMode;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CancellationException;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A file system built from commands, for backends that only run commands.
 *
 * <p>Each operation is one {@code /bin/sh} script run in the workspace, which needs POSIX {@code
 * sh} and GNU coreutils and findutils (Debian and Ubuntu images have them). Paths are passed as
 * positional arguments, never spliced into script text, and every script runs with {@code LC_ALL=C}
 * so that the tools' error messages, whose last words are {@code strerror(errno)}, can be told
 * apart. {@code ..} is left to the kernel and coreutils to resolve, physically.
 *
 * <p>Scripts check the error cases themselves and report them by exit code:
 *
 * <table>
 *   <caption>Exit codes of the scripts</caption>
 *   <tr><th>code<th>meaning<th>exception
 *   <tr><td>40<td>no such file or directory<td>{@link WorkspaceNoSuchFileException}
 *   <tr><td>41<td>is a directory<td>{@link WorkspaceIsDirectoryException}
 *   <tr><td>42<td>not a directory (the path or a component on the way)
 *       <td>{@link WorkspaceNotDirectoryException}
 *   <tr><td>43<td>already exists<td>{@link WorkspaceFileAlreadyExistsException}
 *   <tr><td>44<td>permission denied, operation not permitted
 *       <td>{@link WorkspaceAccessDeniedException}
 *   <tr><td>45<td>directory not empty<td>{@link WorkspaceDirectoryNotEmptyException}
 *   <tr><td>46<td>not a regular file (FIFO, socket, device)<td>{@link WorkspaceFileException}
 *   <tr><td>47<td>the working directory or one of its ancestors
 *       <td>{@link WorkspaceAccessDeniedException}
 *   <tr><td>other<td>anything else (a symlink loop, an I/O error)<td>{@link
 *       WorkspaceFileException}, with the tool's message
 * </table>
 *
 * <p>Names are bytes inside the workspace but strings here: the tools get and give them as UTF-8,
 * and a name that is not valid UTF-8 is listed (and resolved by {@link #realpath}) with U+FFFD in
 * place of the invalid bytes, so it cannot be named again through this API.
 */
final class CommandFileSystem implements SupportsFileSystem {
  private static final java.security.SecureRandom RANDOM = new java.security.SecureRandom();

  private static final int NO_SUCH_FILE = 40;
  private static final int IS_DIRECTORY = 41;
  private static final int NOT_DIRECTORY = 42;
  private static final int ALREADY_EXISTS = 43;
  private static final int ACCESS_DENIED = 44;
  private static final int NOT_EMPTY = 45;
  private static final int NOT_REGULAR_FILE = 46;
  private static final int WORKING_DIRECTORY = 47;

  /** Helpers every script starts with. */
  private static final String PRELUDE =
      """
      # A tool's error message (LC_ALL=C) ends in strerror(errno): map that to an exit code.
      fail() {
        printf '%s\\n' "$1" >&2
        case $1 in
          *': No such file or directory') exit 40 ;;
          *': Is a directory') exit 41 ;;
          *': Not a directory') exit 42 ;;
          *': File exists') exit 43 ;;
          *': Permission denied' | *': Operation not permitted') exit 44 ;;
          *': Directory not empty') exit 45 ;;
        esac
        exit 1
      }
      # Runs a tool with its stdout untouched; if it fails, exits through fail with its stderr.
      try() {
        { err=$("$@" 2>&1 >&3 3>&-); } 3>&1 || fail "$err"
      }
      # [ -e ] is false alike for a missing file, a file on the way, a directory we may not search
      # and a symlink loop; stat's error tells them apart.
      missing() {
        try stat -L -- "$1" >/dev/null
        exit 40
      }
      # Sets r to `realpath $1 -- $2`; the x keeps a trailing newline of a name from being eaten.
      canon() {
        r=$(try realpath "$1" -- "$2" && echo x) || exit
        r=${r%?x}
      }
      # mkdir -p, where "File exists" means a component on the way is not a directory.
      mkdirs() {
        err=$(mkdir -p -- "$1" 2>&1) && return
        case $err in *': File exists') printf '%s\\n' "$err" >&2; exit 42 ;; esac
        fail "$err"
      }
      # Refuses a path, not itself a symlink, whose physical location is the working directory $wd
      # or one of its ancestors; else sets loc to that location.
      guard() {
        canon -e "$1"
        case $wd/ in
          "${r%/}"/*)
            printf '%s\\n' "$r is the working directory $wd or one of its ancestors" >&2
            exit 47 ;;
        esac
        loc=$r
      }
      """;

  private static final String READ =
      """
      p=$1
      if [ -d "$p" ]; then exit 41; fi
      # Opening a FIFO waits for a writer and a device may never end: refuse them before opening.
      if [ -p "$p" ] || [ -S "$p" ] || [ -b "$p" ] || [ -c "$p" ]; then exit 46; fi
      [ -e "$p" ] || missing "$p"
      [ -r "$p" ] || exit 44
      # The status byte tells the reader that the checks passed and the content follows. dd, unlike
      # cat, writes to stderr when it is done, with the number of bytes it copied: the reader stops
      # holding the output back then, and checks that no byte was lost on the way.
      # nonblock: a FIFO swapped in after the checks above then reads as empty instead of waiting.
      printf O
      exec dd if="$p" bs=128K iflag=nonblock
      """;

  private static final String WRITE =
      """
      p=$1
      if [ -d "$p" ]; then exit 41; fi
      case $p in /*/*) mkdirs "${p%/*}" ;; esac
      # Write through symlinks, dangling ones too: replace the file the link chain ends at.
      canon -m "$p"
      t=$r
      if [ -L "$t" ]; then
        # realpath -m stops at a symlink loop without complaint
        printf '%s\\n' 'Too many levels of symbolic links' >&2
        exit 1
      fi
      d=${t%/*}
      d=${d:-/}
      if [ -e "$t" ]; then
        if [ ! -f "$t" ]; then exit 46; fi
        # Renaming over the file would bypass its own permissions: honour them first.
        if [ ! -w "$t" ]; then exit 44; fi
      else
        mkdirs "$d"
      fi
      tmp=
      trap 'if [ -n "$tmp" ]; then rm -f -- "$tmp"; fi' EXIT
      trap 'exit 1' HUP INT TERM
      tmp=$(try mktemp -- "${d%/}/$2.XXXXXX") || exit
      # If the content's source fails, the command is killed before stdin ends (see
      # ProcessCommands), so a complete cat means complete content.
      try cat >"$tmp" || exit
      # Only now: a mode without u+w would have stopped the writing, and writing may clear setuid.
      if [ -e "$t" ]; then
        try chmod --reference="$t" -- "$tmp"
      else
        try chmod "$(printf %o $((0666 & ~0$(umask))))" -- "$tmp"
      fi
      try mv -f -T -- "$tmp" "$t"
      trap - EXIT
      """;

  /** Removes the temporary file of a write that was killed before its trap could run. */
  private static final String WRITE_CLEANUP =
      """
      canon -m "$1"
      d=${r%/*}
      rm -f -- "${d%/}/$2".*
      """;

  private static final String STAT =
      """
      try stat -L -c '%f %s %.9Y' -- "$1"
      """;

  private static final String EXISTS =
      """
      [ -e "$1" ]
      """;

  private static final String LIST =
      """
      p=$1
      [ -e "$p" ] || missing "$p"
      if [ ! -d "$p" ]; then exit 42; fi
      # -H follows $p itself if it is a symlink, but no entry. Names may hold newlines: end with NUL.
      try find -H "$p" -mindepth 1 -maxdepth 1 -printf '%y\\t%s\\t%P\\0'
      """;

  private static final String CREATE_DIRECTORIES =
      """
      p=$1
      if [ -d "$p" ]; then exit 0; fi
      if [ -e "$p" ] || [ -L "$p" ]; then exit 43; fi
      mkdirs "$p"
      """;

  private static final String REMOVE =
      """
      p=$1 wd=$2 recursive=$3
      if [ ! -e "$p" ] && [ ! -L "$p" ]; then missing "$p"; fi
      if [ -L "$p" ]; then
        # Only the link goes, never its target; a link is never the (canonical) working directory.
        try rm -f -- "$p"
        exit 0
      fi
      guard "$p"
      # Act on the physical location: rm and rmdir refuse a path ending in "..".
      if [ ! -d "$loc" ]; then
        try rm -f -- "$loc"
      elif [ "$recursive" = true ]; then
        try rm -rf -- "$loc"
      else
        try rmdir -- "$loc"
      fi
      """;

  private static final String RENAME =
      """
      from=$1 to=$2 wd=$3
      if [ ! -e "$from" ] && [ ! -L "$from" ]; then missing "$from"; fi
      src=$from
      if [ ! -L "$from" ]; then
        guard "$from"
        src=$loc
      fi
      # rename(2) never follows a symlink at either end: a symlink counts as a non-directory.
      if [ -d "$to" ] && [ ! -L "$to" ]; then
        # Replacing a directory removes it: the same refusal as remove.
        guard "$to"
        if [ -L "$from" ] || [ ! -d "$from" ]; then exit 41; fi
      elif [ -e "$to" ] || [ -L "$to" ]; then
        if [ ! -L "$from" ] && [ -d "$from" ]; then exit 42; fi
      fi
      # rename(2) onto a hard link of the same file does nothing; mv would call it an error.
      if [ ! -L "$from" ] && [ ! -L "$to" ] && [ "$from" -ef "$to" ]; then exit 0; fi
      try mv -f -T -- "$src" "$to"
      """;

  private static final String REALPATH =
      """
      try realpath -m -z -- "$1"
      """;

  /** Output chunks a read holds for its reader (with 64 KiB chunks, 1 MiB). */
  private static final int READ_QUEUE_CHUNKS = 16;

  /** dd's last line on stderr: "1234 bytes (1.2 kB, 1.2 KiB) copied, ..." or "1 byte copied". */
  private static final Pattern DD_COPIED = Pattern.compile("(?m)^(\\d+) bytes? .*copied");

  private final WorkspaceBackend backend;
  private final SupportsCommands commands;

  CommandFileSystem(WorkspaceBackend backend, SupportsCommands commands) {
    this.backend = backend;
    this.commands = commands;
  }

  /** {@code realpath -m} run in the workspace: the canonical path, a missing tail kept as given. */
  static String realpath(SupportsCommands commands, String path) {
    CommandResult result = run(commands, REALPATH, RunOptions.builder(), path);
    byte[] out = result.stdout();
    if (!result.succeeded()) {
      throw failure(path, result);
    }
    if (out.length == 0 || out[out.length - 1] != 0) {
      throw new WorkspaceFileException(path, "unexpected output of realpath: " + result);
    }
    // -z ends the path with NUL rather than a newline, which a name may end with
    return Texts.decode(Arrays.copyOf(out, out.length - 1));
  }

  /**
   * Opens a file and streams it. The command runs on a virtual thread and hands its output to the
   * stream through a small bounded queue, so a slow reader slows the command down instead of
   * filling memory (though a backend may keep its own copy of the output for the {@link
   * CommandResult}). This returns as soon as the script has passed its checks and sent its status
   * byte, or throws what the checks found.
   *
   * <p>Closing the stream early cancels the command (by interrupting its thread, which {@link
   * SupportsCommands#run} turns into killing it) and drops whatever output still arrives, so no
   * thread stays blocked. A failure after the content started, or fewer bytes than dd reports
   * having copied, make {@code read} throw {@link IOException}; a backend failure (the workspace
   * gone, say) is rethrown as it is.
   */
  @Override
  public InputStream openRead(String path) {
    ReadStream stream = new ReadStream(path);
    stream.start();
    return stream.awaitStatus();
  }

  /**
   * Writes through a temporary file renamed over the target. If {@code content} fails midway the
   * command is killed before its stdin ends, the file stays as it was, and the temporary file is
   * removed; the failure is rethrown as a {@link WorkspaceException} whose cause is the content's
   * exception.
   */
  @Override
  public void write(String path, InputStream content) {
    String temp = ".sandbox4j-write." + Long.toString(RANDOM.nextLong() & Long.MAX_VALUE, 36);
    CommandResult result;
    try {
      result = run(commands, WRITE, RunOptions.builder().stdin(content), path, temp);
    } catch (WorkspaceException e) {
      if (!(e instanceof WorkspaceUnavailableException)) {
        run(commands, WRITE_CLEANUP, RunOptions.builder(), path, temp);
      }
      throw e;
    }
    if (!result.succeeded()) {
      throw failure(path, result);
    }
  }

  @Override
  public FileStat stat(String path) {
    CommandResult result = run(commands, STAT, RunOptions.builder(), path);
    if (!result.succeeded()) {
      throw failure(path, result);
    }
    String[] fields = result.stdoutText().strip().split(" ");
    if (fields.length != 3) {
      throw new WorkspaceFileException(path, "unexpected output of stat: " + result);
    }
    int mode = Integer.parseInt(fields[0], 16);
    FileType type =
        switch (mode & 0170000) {
          case 0100000 -> FileType.FILE;
          case 0040000 -> FileType.DIRECTORY;
          case 0120000 -> FileType.SYMLINK;
          default -> FileType.OTHER;
        };
    return new FileStat(
        path, type, Long.parseLong(fields[1]), mode & 07777, epochInstant(fields[2]));
  }

  @Override
  public boolean exists(String path) {
    CommandResult result = run(commands, EXISTS, RunOptions.builder(), path);
    return switch (result.exitCode()) {
      case 0 -> true;
      case 1 -> false;
      default -> throw failure(path, result);
    };
  }

  /** Lists with {@code find}; names that are not valid UTF-8 get U+FFFD for the invalid bytes. */
  @Override
  public List<DirectoryEntry> list(String path) {
    CommandResult result = run(commands, LIST, RunOptions.builder(), path);
    if (!result.succeeded()) {
      throw failure(path, result);
    }
    byte[] out = result.stdout();
    List<DirectoryEntry> entries = new ArrayList<>();
    int start = 0;
    for (int end = 0; end < out.length; end++) {
      if (out[end] == 0) {
        entries.add(entry(path, out, start, end));
        start = end + 1;
      }
    }
    entries.sort(Comparator.comparing(DirectoryEntry::name));
    return entries;
  }

  @Override
  public void createDirectories(String path) {
    CommandResult result = run(commands, CREATE_DIRECTORIES, RunOptions.builder(), path);
    if (!result.succeeded()) {
      throw failure(path, result);
    }
  }

  @Override
  public void remove(String path, boolean recursive) {
    CommandResult result =
        run(
            commands,
            REMOVE,
            RunOptions.builder(),
            path,
            backend.workingDirectory(),
            Boolean.toString(recursive));
    if (!result.succeeded()) {
      throw failure(path, result);
    }
  }

  @Override
  public void rename(String from, String to) {
    CommandResult result =
        run(commands, RENAME, RunOptions.builder(), from, to, backend.workingDirectory());
    if (!result.succeeded()) {
      throw failure(from, "cannot rename to " + to + ": ", result);
    }
  }

  private static CommandResult run(
      SupportsCommands commands, String script, RunOptions.Builder options, String... args) {
    List<String> argv = new ArrayList<>(List.of("/bin/sh", "-c", PRELUDE + script, "sh"));
    argv.addAll(List.of(args));
    // Output is the file's content or a listing: whatever its size, it is what was asked for.
    return commands.run(
        Command.argv(argv), options.env("LC_ALL", "C").outputLimit(Long.MAX_VALUE).build());
  }

  private static WorkspaceFileException failure(String path, CommandResult result) {
    return failure(path, "", result);
  }

  private static WorkspaceFileException failure(String path, String prefix, CommandResult result) {
    String stderr = result.stderrText().strip();
    String detail = stderr.isEmpty() ? "" : ": " + stderr;
    return switch (result.exitCode()) {
      case NO_SUCH_FILE ->
          new WorkspaceNoSuchFileException(path, prefix + "no such file or directory" + detail);
      case IS_DIRECTORY ->
          new WorkspaceIsDirectoryException(path, prefix + "is a directory" + detail);
      case NOT_DIRECTORY ->
          new WorkspaceNotDirectoryException(path, prefix + "not a directory" + detail);
      case ALREADY_EXISTS ->
          new WorkspaceFileAlreadyExistsException(
              path, prefix + "already exists and is not a directory" + detail);
      case ACCESS_DENIED ->
          new WorkspaceAccessDeniedException(path, prefix + "permission denied" + detail);
      case NOT_EMPTY ->
          new WorkspaceDirectoryNotEmptyException(path, prefix + "directory not empty" + detail);
      case NOT_REGULAR_FILE ->
          new WorkspaceFileException(
              path, prefix + "not a regular file (a FIFO, socket or device): refused" + detail);
      case WORKING_DIRECTORY ->
          new WorkspaceAccessDeniedException(
              path,
              prefix
                  + "refused: the working directory and its ancestors are never removed, moved"
                  + " or replaced"
                  + detail);
      case 126, 127 ->
          new WorkspaceFileException(
              path,
              prefix
                  + "the workspace needs /bin/sh and GNU coreutils and findutils (exit "
                  + result.exitCode()
                  + ")"
                  + detail);
      default ->
          new WorkspaceFileException(
              path, prefix + "failed (exit " + result.exitCode() + ")" + detail);
    };
  }

  /** One {@code %y\t%s\t%P} record of find. */
  private static DirectoryEntry entry(String path, byte[] out, int start, int end) {
    int tab1 = indexOf(out, (byte) '\t', start, end);
    int tab2 = tab1 < 0 ? -1 : indexOf(out, (byte) '\t', tab1 + 1, end);
    if (tab2 < 0) {
      throw new WorkspaceFileException(path, "unexpected output of find");
    }
    FileType type =
        switch (out[start]) {
          case 'f' -> FileType.FILE;
          case 'd' -> FileType.DIRECTORY;
          case 'l' -> FileType.SYMLINK;
          default -> FileType.OTHER;
        };
    long size =
        Long.parseLong(new String(out, tab1 + 1, tab2 - tab1 - 1, StandardCharsets.US_ASCII));
    String name = Texts.decode(Arrays.copyOfRange(out, tab2 + 1, end));
    return new DirectoryEntry(name, type, size);
  }

  private static int indexOf(byte[] bytes, byte b, int from, int to) {
    for (int i = from; i < to; i++) {
      if (bytes[i] == b) {
        return i;
      }
    }
    return -1;
  }

  /** Seconds since the epoch as stat's {@code %.9Y} prints them, such as {@code 1700000000.5}. */
  private static Instant epochInstant(String text) {
    BigDecimal value = new BigDecimal(text);
    BigDecimal seconds = value.setScale(0, RoundingMode.FLOOR);
    return Instant.ofEpochSecond(
        seconds.longValueExact(), value.subtract(seconds).movePointRight(9).intValue());
  }

  /** The stream {@link #openRead} returns, fed by the command's output callbacks. */
  private final class ReadStream extends InputStream {
    private final String path;
    private final Object lock = new Object();

    /** Output chunks ({@code byte[]}), then the {@link CommandResult} or a Throwable. */
    private final ArrayDeque<Object> items = new ArrayDeque<>();

    private int queuedChunks;
    private boolean ddDone;
    private volatile boolean closed;
    private Thread runner;

    // The reader's side, used by the reading thread only.
    private byte[] chunk = new byte[0];
    private int position;
    private long received;
    private boolean eof;

    ReadStream(String path) {
      this.path = path;
    }

    void start() {
      RunOptions.Builder options =
          RunOptions.builder().onStdout(this::hand).onStderr(chunk -> ddDone());
      runner =
          Thread.ofVirtual()
              .name("sandbox4j-read")
              .start(
                  () -> {
                    Object outcome;
                    try {
                      outcome = run(commands, READ, options, path);
                    } catch (Throwable t) {
                      outcome = t;
                    }
                    hand(outcome);
                  });
    }

    /**
     * Queues an item for the reader. While the queue is full this waits, holding up the command's
     * output: a slow reader slows dd down instead of filling memory. Once dd is done it no longer
     * waits, since a backend may stop collecting output shortly after the command exits (a grace
     * period for background children) and what is left in the pipe must be taken at once. After
     * close, items are dropped, so the backend never stays blocked.
     */
    private void hand(Object item) {
      synchronized (lock) {
        try {
          while (item instanceof byte[]
              && queuedChunks >= READ_QUEUE_CHUNKS
              && !ddDone
              && !closed) {
            lock.wait();
          }
        } catch (InterruptedException e) {
          // Dropped: a lost chunk shows as fewer bytes than dd reports.
          Thread.currentThread().interrupt();
          return;
        }
        if (closed) {
          return;
        }
        items.add(item);
        if (item instanceof byte[]) {
          queuedChunks++;
        }
        lock.notifyAll();
      }
    }

    /** dd writes to stderr only when it ends, with its byte count or its error. */
    private void ddDone() {
      synchronized (lock) {
        ddDone = true;
        lock.notifyAll();
      }
    }

    /** The next item, or null once closed. */
    private Object take() throws InterruptedException {
      synchronized (lock) {
        while (items.isEmpty() && !closed) {
          lock.wait();
        }
        if (closed) {
          return null;
        }
        Object item = items.remove();
        if (item instanceof byte[]) {
          queuedChunks--;
        }
        lock.notifyAll();
        return item;
      }
    }

    /** Waits for the status byte, or for the script's verdict on the path. */
    InputStream awaitStatus() {
      try {
        while (true) {
          switch (take()) {
            case byte[] bytes when bytes.length == 0 -> {}
            case byte[] bytes when bytes[0] == 'O' -> {
              chunk = bytes;
              position = 1;
              received = bytes.length - 1L;
              return this;
            }
            case byte[] bytes -> {
              close();
              throw new WorkspaceFileException(path, "unexpected output while opening the file");
            }
            case CommandResult result when result.succeeded() ->
                throw new WorkspaceFileException(path, "no content: " + result);
            case CommandResult result -> throw failure(path, result);
            case RuntimeException e -> throw e;
            case Error e -> throw e;
            case Throwable t -> throw new WorkspaceFileException(path, "reading failed", t);
            case null, default -> throw new AssertionError("closed while opening");
          }
        }
      } catch (InterruptedException e) {
        close();
        Thread.currentThread().interrupt();
        throw new CancellationException("interrupted while opening " + path);
      }
    }

    @Override
    public int read() throws IOException {
      byte[] one = new byte[1];
      return read(one, 0, 1) < 0 ? -1 : one[0] & 0xff;
    }

    @Override
    public int read(byte[] b, int off, int len) throws IOException {
      Objects.checkFromIndexSize(off, len, b.length);
      if (closed) {
        throw new IOException(path + ": stream closed");
      }
      if (len == 0) {
        return 0;
      }
      while (position == chunk.length) {
        if (eof) {
          return -1;
        }
        next();
      }
      int n = Math.min(len, chunk.length - position);
      System.arraycopy(chunk, position, b, off, n);
      position += n;
      return n;
    }

    @Override
    public int available() {
      return closed ? 0 : chunk.length - position;
    }

    private void next() throws IOException {
      Object item;
      try {
        item = take();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new InterruptedIOException(path + ": interrupted while reading");
      }
      switch (item) {
        case null -> throw new IOException(path + ": stream closed");
        case byte[] bytes -> {
          chunk = bytes;
          position = 0;
          received += bytes.length;
        }
        case CommandResult result -> {
          checkComplete(result);
          eof = true;
        }
        case RuntimeException e -> throw e;
        case Error e -> throw e;
        case Throwable t -> throw new IOException(path + ": reading failed", t);
        default -> throw new AssertionError(item);
      }
    }

    private void checkComplete(CommandResult result) throws IOException {
      String stderr = result.stderrText().strip();
      if (!result.succeeded()) {
        throw new IOException(
            path + ": reading failed (exit " + result.exitCode() + "): " + stderr);
      }
      Matcher copied = DD_COPIED.matcher(stderr);
      Long expected = null;
      while (copied.find()) {
        expected = Long.parseLong(copied.group(1));
      }
      // Without dd's count (a dd that words it differently) there is nothing to check against.
      if (expected != null && expected != received) {
        throw new IOException(
            path + ": read " + received + " of " + expected + " bytes: output was lost on the way");
      }
    }

    /** Cancels the command if it still runs and drops whatever output still arrives. */
    @Override
    public void close() {
      synchronized (lock) {
        if (closed) {
          return;
        }
        closed = true;
        items.clear();
        lock.notifyAll();
      }
      // SupportsCommands.run turns the interrupt into killing the command.
      runner.interrupt();
    }
  }
}
