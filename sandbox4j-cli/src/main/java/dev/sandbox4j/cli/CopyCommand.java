package dev.sandbox4j.cli;

import dev.sandbox4j.workspace.FileStat;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceNoSuchFileException;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.concurrent.Callable;
import java.util.regex.Pattern;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParentCommand;
import picocli.CommandLine.Spec;

/** {@code sandbox4j cp SRC DST}: copies one file between this machine and a sandbox. */
@Command(
    name = "cp",
    mixinStandardHelpOptions = true,
    customSynopsis = "sandbox4j cp [OPTIONS] SRC DST",
    description = {
      "Copies one file between this machine and a sandbox, byte for byte. Exactly one of SRC"
          + " and DST is in a sandbox: ID:PATH, where ID is a ref (local:abc, host:abc) or a bare"
          + " local id, and PATH is absolute or relative to /home/sandbox.",
      "A host path is anything else; write one that contains ':' as ./a:b. '-' is stdin as SRC"
          + " and stdout as DST. If DST is an existing directory, the file keeps its name in it.",
      "In the sandbox the file is read and written as the sandbox user. Directories are not"
          + " copied: use 'sandbox4j exec ID -- tar -C DIR -cf - . | tar -xf -' and the like."
    })
final class CopyCommand implements Callable<Integer> {

  private static final Pattern BARE_ID = Pattern.compile("[a-z0-9]{1,32}");

  @ParentCommand SandboxCommand root;
  @Spec CommandSpec spec;

  @Parameters(index = "0", paramLabel = "SRC", description = "What to copy.")
  String source;

  @Parameters(index = "1", paramLabel = "DST", description = "Where to copy it.")
  String target;

  /** A side of the copy in a sandbox. */
  private record InSandbox(WorkspaceRef ref, String path) {}

  @Override
  public Integer call() {
    try {
      return copy();
    } catch (IOException e) {
      throw new WorkspaceException("cp failed on this machine: " + e, e);
    }
  }

  private int copy() throws IOException {
    InSandbox from = parse(source);
    InSandbox to = parse(target);
    if ((from == null) == (to == null)) {
      throw new ParameterException(
          spec.commandLine(),
          from == null
              ? "neither SRC nor DST is in a sandbox: write one as ID:/path"
              : "both SRC and DST are in sandboxes: copy through this machine, one side at a time");
    }
    if (from == null) {
      toSandbox(source, to);
    } else {
      fromSandbox(from, target);
    }
    return ExitCodes.OK;
  }

  private void toSandbox(String hostPath, InSandbox to) throws IOException {
    Workspace ws = workspace(to.ref());
    String path = to.path();
    if (path.endsWith("/") || isDirectory(ws, path)) {
      if (hostPath.equals("-")) {
        throw new ParameterException(
            spec.commandLine(), "DST " + target + " is a directory: name the file to write");
      }
      path = (path.endsWith("/") ? path : path + "/") + Path.of(hostPath).getFileName();
    }
    if (hostPath.equals("-")) {
      ws.write(path, root.context().in());
      return;
    }
    Path file = root.context().hostPath(hostPath);
    if (Files.isDirectory(file)) {
      throw new WorkspaceException(
          hostPath
              + " is a directory: cp copies one file (for a directory: tar -C DIR -cf - . |"
              + " sandbox4j exec --stdin ID -- tar -xf - -C DEST)");
    }
    try (InputStream in = Files.newInputStream(file)) {
      ws.write(path, in);
    } catch (java.nio.file.NoSuchFileException e) {
      throw new WorkspaceException("no such file on this machine: " + hostPath, e);
    }
  }

  private void fromSandbox(InSandbox from, String hostPath) throws IOException {
    Workspace ws = workspace(from.ref());
    if (isDirectory(ws, from.path())) {
      throw new WorkspaceException(
          source
              + " is a directory: cp copies one file (for a directory: sandbox4j exec ID -- tar"
              + " -C DIR -cf - . | tar -xf -)");
    }
    if (hostPath.equals("-")) {
      try (InputStream in = ws.openRead(from.path())) {
        OutputStream out = root.context().out();
        in.transferTo(out);
        out.flush();
      }
      return;
    }
    Path file = root.context().hostPath(hostPath);
    if (Files.isDirectory(file)) {
      file = file.resolve(Path.of(from.path()).getFileName().toString());
    }
    Path dir = file.toAbsolutePath().getParent();
    Path temp = Files.createTempFile(dir, "." + file.getFileName() + ".", ".sandbox4j-cp");
    try {
      try (InputStream in = ws.openRead(from.path())) {
        Files.copy(in, temp, StandardCopyOption.REPLACE_EXISTING);
      }
      Files.move(temp, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    } finally {
      Files.deleteIfExists(temp);
    }
  }

  private static boolean isDirectory(Workspace ws, String path) {
    try {
      FileStat stat = ws.stat(path);
      return stat.isDirectory();
    } catch (WorkspaceNoSuchFileException e) {
      return false;
    }
  }

  private Workspace workspace(WorkspaceRef ref) {
    WorkspaceProvider provider = root.provider(spec, ref.provider());
    root.warnIfNotIsolated(ref.provider());
    return Workspace.of(root.backend(spec, provider, ref));
  }

  /**
   * The sandbox side {@code ID:PATH} or {@code provider:ID:PATH}; null for a host path. A host path
   * is one starting with '/' or '.', '-', or one whose part before the first ':' is neither a
   * provider nor a bare id.
   */
  private InSandbox parse(String text) {
    int colon = text.indexOf(':');
    if (colon < 0 || text.startsWith("/") || text.startsWith(".")) {
      return null;
    }
    String first = text.substring(0, colon);
    String rest = text.substring(colon + 1);
    if (root.providers().names().contains(first)) {
      int second = rest.indexOf(':');
      if (second < 0) {
        throw new ParameterException(
            spec.commandLine(),
            "'" + text + "' names a sandbox but no path in it: write " + text + ":/path");
      }
      return inSandbox(text, first + ":" + rest.substring(0, second), rest.substring(second + 1));
    }
    if (BARE_ID.matcher(first).matches()) {
      return inSandbox(text, first, rest);
    }
    return null;
  }

  private InSandbox inSandbox(String text, String ref, String path) {
    if (path.isEmpty()) {
      throw new ParameterException(
          spec.commandLine(),
          "'" + text + "' has no path after the sandbox: write " + text + "/path");
    }
    return new InSandbox(root.parseRef(spec, ref), path);
  }
}
