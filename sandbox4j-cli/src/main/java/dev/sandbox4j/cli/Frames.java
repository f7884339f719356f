package dev.sandbox4j.cli;

import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The wire format between the thin client and the resident CLI process ({@link Resident}): frames
 * of one type byte, a four-byte big-endian length and that many bytes of payload, over a unix
 * socket. Every frame read is checked as input from a hostile peer: its type must be one the reader
 * expects, its length within that type's bound, and every count and string inside its payload
 * within what is left of the payload, so a bad frame is a {@link BadFrame}, never a crash or an
 * allocation larger than the bound.
 *
 * <p>Client to resident: {@link #REQUEST} first, then {@link #STDIN} (the bytes a {@link
 * #STDIN_WANTED} asked for; empty at end of input) and {@link #CANCEL}. Resident to client: {@link
 * #ACCEPT} or {@link #REFUSE} (the client then runs the command itself), then {@link #STDOUT},
 * {@link #STDERR}, {@link #STDIN_WANTED}, and last {@link #EXIT}.
 *
 * <p>Reading and writing are done straight on the channel: a blocking {@link SocketChannel} allows
 * one reader and one writer at a time, which streams over it from {@code
 * java.nio.channels.Channels} would serialize.
 */
final class Frames {
  /** Bumped whenever the format changes; a client and a resident of different jars never talk. */
  static final int PROTOCOL = 1;

  static final byte REQUEST = 'Q';
  static final byte STDIN = 'D';
  static final byte CANCEL = 'C';
  static final byte ACCEPT = 'A';
  static final byte REFUSE = 'R';
  static final byte STDOUT = 'O';
  static final byte STDERR = 'E';
  static final byte STDIN_WANTED = 'I';
  static final byte EXIT = 'X';

  /** A request's bound: Linux's own for arguments and environment together is 2 MiB. */
  static final int MAX_REQUEST = 4 << 20;

  /** The bound of a chunk of output or input. */
  static final int MAX_CHUNK = 64 << 10;

  /** The bound of a refusal's reason. */
  static final int MAX_REASON = 4 << 10;

  private static final int MAX_STRINGS = 1 << 16;

  private Frames() {}

  /** A frame that breaks the format: the connection ends, with this as the reason. */
  static final class BadFrame extends IOException {
    BadFrame(String message) {
      super(message);
    }
  }

  /** One frame as read. */
  record Frame(byte type, byte[] payload) {}

  /** What a client asks the resident to run, and the surroundings to run it in. */
  record Request(
      int protocol,
      String code,
      String cwd,
      String stdoutEncoding,
      String stderrEncoding,
      boolean terminal,
      List<String> args,
      Map<String, String> env) {

    byte[] encode() {
      Writer w = new Writer();
      w.i32(protocol);
      w.str(code);
      w.str(cwd);
      w.str(stdoutEncoding);
      w.str(stderrEncoding);
      w.i32(terminal ? 1 : 0);
      w.i32(args.size());
      args.forEach(w::str);
      w.i32(env.size());
      env.forEach(
          (k, v) -> {
            w.str(k);
            w.str(v);
          });
      return w.bytes();
    }

    static Request decode(byte[] payload) throws BadFrame {
      Reader r = new Reader(payload);
      int protocol = r.i32();
      if (protocol != PROTOCOL) {
        // the rest may be laid out differently: stop here, the caller refuses
        return new Request(protocol, "", "", "", "", false, List.of(), Map.of());
      }
      String code = r.str();
      String cwd = r.str();
      String outEncoding = r.str();
      String errEncoding = r.str();
      int terminal = r.i32();
      if (terminal != 0 && terminal != 1) {
        throw new BadFrame("terminal flag " + terminal + " is neither 0 nor 1");
      }
      int argc = r.count("arguments");
      List<String> args = new ArrayList<>(argc);
      for (int i = 0; i < argc; i++) {
        args.add(r.str());
      }
      int envc = r.count("environment variables");
      Map<String, String> env = new LinkedHashMap<>();
      for (int i = 0; i < envc; i++) {
        String key = r.str();
        if (env.put(key, r.str()) != null) {
          throw new BadFrame("environment variable " + key + " given twice");
        }
      }
      r.end();
      return new Request(protocol, code, cwd, outEncoding, errEncoding, terminal == 1, args, env);
    }
  }

  /** Reads one frame, whose type must be one of {@code expected}; null at a clean end of stream. */
  static Frame read(SocketChannel channel, byte... expected) throws IOException {
    ByteBuffer head = ByteBuffer.allocate(5);
    if (!fill(channel, head, true)) {
      return null;
    }
    head.flip();
    byte type = head.get();
    int length = head.getInt();
    int max = -1;
    for (byte e : expected) {
      if (e == type) {
        max = bound(type);
      }
    }
    if (max < 0) {
      throw new BadFrame("unexpected frame type " + (type & 0xff));
    }
    if (length < 0 || length > max) {
      throw new BadFrame(
          "frame of type '" + (char) type + "' is " + length + " bytes long; at most " + max);
    }
    ByteBuffer payload = ByteBuffer.allocate(length);
    if (!fill(channel, payload, false)) {
      throw new EOFException("end of stream inside a frame");
    }
    return new Frame(type, payload.array());
  }

  private static int bound(byte type) {
    return switch (type) {
      case REQUEST -> MAX_REQUEST;
      case STDIN, STDOUT, STDERR -> MAX_CHUNK;
      case STDIN_WANTED, EXIT -> 4;
      case REFUSE -> MAX_REASON;
      default -> 0; // ACCEPT, CANCEL
    };
  }

  /**
   * Fills {@code buffer}; false if the stream ends first (at its start only if {@code atStart}).
   */
  private static boolean fill(SocketChannel channel, ByteBuffer buffer, boolean atStart)
      throws IOException {
    while (buffer.hasRemaining()) {
      if (channel.read(buffer) < 0) {
        if (atStart && buffer.position() == 0) {
          return false;
        }
        throw new EOFException("end of stream inside a frame");
      }
    }
    return true;
  }

  /** Writes one frame; callers that write from several threads hold one lock around it. */
  static void write(SocketChannel channel, byte type, byte[] payload, int offset, int length)
      throws IOException {
    ByteBuffer head = ByteBuffer.allocate(5).put(type).putInt(length).flip();
    ByteBuffer body = ByteBuffer.wrap(payload, offset, length);
    while (head.hasRemaining() || body.hasRemaining()) {
      channel.write(new ByteBuffer[] {head, body});
    }
  }

  static void write(SocketChannel channel, byte type, byte[] payload) throws IOException {
    write(channel, type, payload, 0, payload.length);
  }

  static byte[] i32(int value) {
    return ByteBuffer.allocate(4).putInt(value).array();
  }

  /** The one int of a four-byte payload. */
  static int i32(Frame frame) throws BadFrame {
    if (frame.payload().length != 4) {
      throw new BadFrame("frame of type '" + (char) frame.type() + "' must hold 4 bytes");
    }
    return ByteBuffer.wrap(frame.payload()).getInt();
  }

  static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  static String utf8(byte[] bytes) {
    return new String(bytes, StandardCharsets.UTF_8);
  }

  private static final class Writer {
    private final ByteArrayOutputStream out = new ByteArrayOutputStream(4096);

    void i32(int v) {
      out.writeBytes(Frames.i32(v));
    }

    void str(String s) {
      byte[] b = utf8(s);
      i32(b.length);
      out.writeBytes(b);
    }

    byte[] bytes() {
      return out.toByteArray();
    }
  }

  private static final class Reader {
    private final ByteBuffer in;

    Reader(byte[] payload) {
      in = ByteBuffer.wrap(payload);
    }

    int i32() throws BadFrame {
      if (in.remaining() < 4) {
        throw new BadFrame("request ends inside a number");
      }
      return in.getInt();
    }

    /** A count of strings: each takes at least four bytes, so it cannot pass what is left. */
    int count(String what) throws BadFrame {
      int n = i32();
      if (n < 0 || n > MAX_STRINGS || n > in.remaining() / 4) {
        throw new BadFrame("request claims " + n + " " + what + "; the frame cannot hold them");
      }
      return n;
    }

    String str() throws BadFrame {
      int n = i32();
      if (n < 0 || n > in.remaining()) {
        throw new BadFrame(
            "request claims a string of " + n + " bytes; " + in.remaining() + " are left");
      }
      byte[] b = new byte[n];
      in.get(b);
      return utf8(b);
    }

    void end() throws BadFrame {
      if (in.hasRemaining()) {
        throw new BadFrame("request has " + in.remaining() + " bytes after its end");
      }
    }
  }
}
