package dev.sandbox4j.runtime.internal.engine;

import dev.sandbox4j.workspace.WorkspaceException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * One command as an exec helper ({@link ExecHelper}, {@link GvisorHelper}) runs it: {@code argv} as
 * numeric {@code uid}:{@code gid}, in {@code cwd}, with exactly {@code env}.
 */
record CommandSpec(int uid, int gid, String cwd, List<String> argv, Map<String, String> env) {
  /** The largest command both helpers accept (their own bound too: sandbox4j-execd.c). */
  static final int MAX_PAYLOAD = 8 << 20;

  /** This command with {@code argv} instead (the same user, directory and environment). */
  CommandSpec withArgv(List<String> argv) {
    return new CommandSpec(uid, gid, cwd, argv, env);
  }

  /**
   * The command as both helpers read it: {@code header} (32-bit ints in {@code order}), argv's and
   * env's counts, then the working directory, each argument and each {@code NAME=value}, as
   * NUL-terminated strings; at most {@link #MAX_PAYLOAD} bytes. The caller puts uid and gid in the
   * header where its protocol has them.
   */
  byte[] payload(ByteOrder order, int... header) {
    List<byte[]> strings = new ArrayList<>();
    strings.add(cString(cwd));
    for (String a : argv) {
      strings.add(cString(a));
    }
    for (Map.Entry<String, String> e : env.entrySet()) {
      strings.add(cString(e.getKey() + "=" + e.getValue()));
    }
    long size = 4L * (header.length + 2);
    for (byte[] s : strings) {
      size += s.length;
    }
    if (size > MAX_PAYLOAD) {
      throw new WorkspaceException(
          "the command's arguments and environment take "
              + size
              + " bytes, more than "
              + MAX_PAYLOAD);
    }
    ByteBuffer b = ByteBuffer.allocate((int) size).order(order);
    for (int h : header) {
      b.putInt(h);
    }
    b.putInt(argv.size()).putInt(env.size());
    for (byte[] s : strings) {
      b.put(s);
    }
    return b.array();
  }

  private static byte[] cString(String s) {
    byte[] bytes = s.getBytes(StandardCharsets.UTF_8);
    for (byte x : bytes) {
      if (x == 0) {
        throw new WorkspaceException("a command's argument or environment contains a NUL byte");
      }
    }
    byte[] z = new byte[bytes.length + 1];
    System.arraycopy(bytes, 0, z, 0, bytes.length);
    return z;
  }
}
