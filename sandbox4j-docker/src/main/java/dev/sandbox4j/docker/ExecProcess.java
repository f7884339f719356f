package dev.sandbox4j.docker;

import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;

/**
 * A Docker exec seen as a {@link Process}, so that {@code ProcessCommands} drives it by the same
 * rules as a local one. Its attach connection carries stdin one way (half-closed at its end) and
 * the daemon's multiplexed stdout/stderr frames the other; a reader thread splits the frames into
 * two streams. The exit is known from the exec's inspection, not from the stream: a background
 * child may hold the output open long after the command exits, and the stream may end a moment
 * before the daemon has recorded the exit code. So a watcher inspects the exec, at once when the
 * stream ends, else every few milliseconds at first and then every {@value #MAX_POLL_MILLIS} ms.
 */
final class ExecProcess extends Process {
  private static final int MAX_POLL_MILLIS = 200;

  /** The exit code of a command whose container went away under it (as if SIGKILLed). */
  static final int GONE = 137;

  /** What the watcher asks: the exec's state. */
  interface Inspector {
    /** The exit code, or -1 while it runs; throws {@link Gone} if the exec or container is gone. */
    int exitCode() throws Gone;
  }

  /** The exec, or the container it ran in, no longer exists. */
  static final class Gone extends Exception {
    Gone(String message) {
      super(message);
    }
  }

  private final DaemonSocket socket;
  private final Frames stdout = new Frames();
  private final Frames stderr = new Frames();
  private final CompletableFuture<Process> exit = new CompletableFuture<>();
  private final Semaphore streamEnded = new Semaphore(0);
  private final OutputStream stdin;
  private volatile int exitCode = -1;
  private volatile boolean gone;

  ExecProcess(DaemonSocket socket, InputStream frames, String name, Inspector inspector) {
    this.socket = socket;
    this.stdin = new Stdin(socket);
    Thread.ofPlatform() // blocks on the socket for as long as the command writes
        .daemon()
        .name("sandbox4j-docker-exec-" + name)
        .start(() -> demultiplex(frames));
    Thread.ofVirtual().name("sandbox4j-docker-exit-" + name).start(() -> watch(inspector));
  }

  /** Whether the container went away while the command ran. */
  boolean containerGone() {
    return gone;
  }

  private void demultiplex(InputStream raw) {
    DataInputStream in = new DataInputStream(raw);
    byte[] header = new byte[8];
    try {
      while (true) {
        try {
          in.readFully(header);
        } catch (EOFException e) {
          break;
        }
        long size =
            ((header[4] & 0xffL) << 24)
                | ((header[5] & 0xff) << 16)
                | ((header[6] & 0xff) << 8)
                | (header[7] & 0xff);
        Frames to = header[0] == 2 || header[0] == 3 ? stderr : stdout;
        while (size > 0) {
          byte[] chunk = new byte[(int) Math.min(size, 64 * 1024)];
          in.readFully(chunk);
          size -= chunk.length;
          to.put(chunk);
        }
      }
    } catch (IOException e) {
      // the connection was closed: the run is over, or the daemon went away
    } finally {
      stdout.end();
      stderr.end();
      streamEnded.release();
    }
  }

  private void watch(Inspector inspector) {
    long pause = 1;
    try {
      while (true) {
        int code;
        try {
          code = inspector.exitCode();
        } catch (Gone e) {
          gone = true;
          code = GONE;
        }
        if (code >= 0) {
          exitCode = code;
          exit.complete(this);
          return;
        }
        boolean ended = streamEnded.tryAcquire(pause, TimeUnit.MILLISECONDS);
        if (ended) {
          streamEnded.release(); // stays signalled: from now on, look again at once
          pause = 1;
        } else {
          pause = Math.min(pause * 2, MAX_POLL_MILLIS);
        }
      }
    } catch (InterruptedException | RuntimeException e) {
      exit.completeExceptionally(e);
    }
  }

  @Override
  public OutputStream getOutputStream() {
    return stdin;
  }

  @Override
  public InputStream getInputStream() {
    return stdout;
  }

  @Override
  public InputStream getErrorStream() {
    return stderr;
  }

  @Override
  public int waitFor() throws InterruptedException {
    try {
      exit.get();
    } catch (java.util.concurrent.ExecutionException e) {
      throw new IllegalStateException("cannot learn the exec's exit", e.getCause());
    }
    return exitCode;
  }

  @Override
  public CompletableFuture<Process> onExit() {
    return exit;
  }

  @Override
  public int exitValue() {
    if (!exit.isDone()) {
      throw new IllegalThreadStateException("the exec is still running");
    }
    return exitCode;
  }

  @Override
  public boolean isAlive() {
    return !exit.isDone();
  }

  @Override
  public long pid() {
    return 0; // in another pid namespace, maybe another machine
  }

  /** Ends this side only: killing is the backend's job (an exec cannot be killed by the API). */
  @Override
  public void destroy() {
    socket.close();
  }

  /** Closes the connection: the reader ends, output still in flight is dropped. */
  void release() {
    socket.close();
    stdout.close();
    stderr.close();
  }

  /** The exec's stdin: writes go to the connection, close half-closes it (EOF for the command). */
  private static final class Stdin extends OutputStream {
    private final DaemonSocket socket;
    private boolean closed;

    Stdin(DaemonSocket socket) {
      this.socket = socket;
    }

    @Override
    public void write(int b) throws IOException {
      write(new byte[] {(byte) b}, 0, 1);
    }

    @Override
    public synchronized void write(byte[] b, int off, int len) throws IOException {
      if (closed) {
        throw new IOException("stdin is closed");
      }
      socket.output().write(b, off, len);
    }

    @Override
    public synchronized void close() throws IOException {
      if (!closed) {
        closed = true;
        socket.shutdownOutput();
      }
    }
  }

  /**
   * One output stream of the exec: chunks from the reader, bounded so that a slow reader slows the
   * command rather than this JVM's memory; once closed, further chunks are dropped.
   */
  private static final class Frames extends InputStream {
    private static final byte[] END = new byte[0];
    private final BlockingQueue<byte[]> chunks = new ArrayBlockingQueue<>(64);
    private byte[] current;
    private int pos;
    private volatile boolean closed;
    private boolean ended;

    void put(byte[] chunk) {
      try {
        while (!closed && !chunks.offer(chunk, 50, TimeUnit.MILLISECONDS)) {
          // the reader is busy: wait (back-pressure), unless it closes the stream
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }

    void end() {
      try {
        while (!closed && !chunks.offer(END, 50, TimeUnit.MILLISECONDS)) {
          // as put
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }

    @Override
    public int read() throws IOException {
      byte[] one = new byte[1];
      return read(one, 0, 1) < 0 ? -1 : one[0] & 0xff;
    }

    @Override
    public int read(byte[] b, int off, int len) throws IOException {
      if (len == 0) {
        return 0;
      }
      while (current == null || pos == current.length) {
        if (ended || closed) {
          return -1;
        }
        try {
          current = chunks.take();
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new java.io.InterruptedIOException("interrupted while reading the exec's output");
        }
        pos = 0;
        if (current == END) {
          ended = true;
          return -1;
        }
      }
      int n = Math.min(len, current.length - pos);
      System.arraycopy(current, pos, b, off, n);
      pos += n;
      return n;
    }

    @Override
    public void close() {
      closed = true;
      chunks.clear();
      chunks.offer(END); // wakes a reader blocked in take
    }
  }
}
