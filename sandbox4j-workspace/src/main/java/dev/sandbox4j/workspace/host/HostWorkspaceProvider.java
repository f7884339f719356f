package dev.sandbox4j.workspace.host;

import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.io.IOException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.security.SecureRandom;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * Workspaces that are plain directories on the host, under one root directory: provider {@code
 * host}, refs {@code host:<id>} naming {@code <root>/<id>}.
 *
 * <p><b>This isolates nothing.</b> Commands run on the host as the JVM's user, with its rights, and
 * can read, write and reach whatever that user can; absolute paths are host paths. Use it for
 * development and tests with code you trust, never for an agent that runs untrusted commands.
 *
 * <p>What it does keep: each command runs in its own session; only {@code PATH}, {@code HOME},
 * {@code LANG} and {@code LC_*} are inherited from the JVM's environment; the deadline,
 * cancellation, the output limit and {@link #destroy} kill every process a command started, also
 * those that called {@code setsid} or daemonized (on Linux, found by a marker variable {@code
 * SANDBOX4J_HOST_RUN} that every command's processes inherit, as Jenkins finds a build's
 * processes).
 */
public final class HostWorkspaceProvider implements WorkspaceProvider {

  /** The provider name in refs. */
  public static final String NAME = "host";

  private static final Pattern ID = Pattern.compile("[a-z0-9]{1,64}");
  private static final String ID_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789";
  private static final SecureRandom RANDOM = new SecureRandom();

  private final Path root;
  private final String rootTag;
  private final Map<String, String> env;
  private final Runnable beforeCreate;

  private HostWorkspaceProvider(Builder b) {
    this.beforeCreate = b.beforeCreate;
    this.root = b.root.toAbsolutePath().normalize();
    this.rootTag = Integer.toHexString(root.toString().hashCode());
    this.env = Map.copyOf(b.env);
  }

  /** Workspaces under {@code root}, which is created on first use. */
  public static HostWorkspaceProvider create(Path root) {
    return builder().root(root).build();
  }

  /** A builder; {@code root} is required. */
  public static Builder builder() {
    return new Builder();
  }

  @Override
  public String name() {
    return NAME;
  }

  /** The directory holding every workspace of this provider. */
  public Path root() {
    return root;
  }

  @Override
  public Optional<WorkspaceBackend> backend(WorkspaceRef ref) {
    Objects.requireNonNull(ref, "ref");
    if (!ref.provider().equals(NAME)) {
      return Optional.empty();
    }
    return Optional.of(new HostWorkspace(this, checkedId(ref)));
  }

  @Override
  public WorkspaceBackend newBackend() {
    return new HostWorkspace(this, null);
  }

  /**
   * Kills every process of the workspace's commands, then deletes its directory. The directory is
   * first renamed away, so from that instant the ref is unavailable and running commands fail with
   * {@link dev.sandbox4j.workspace.WorkspaceUnavailableException}.
   */
  @Override
  public void destroy(WorkspaceRef ref) {
    Objects.requireNonNull(ref, "ref");
    if (!ref.provider().equals(NAME)) {
      throw new IllegalArgumentException(
          "cannot destroy " + ref + ": it belongs to provider '" + ref.provider() + "', not host");
    }
    String id = checkedId(ref);
    Path trash = root.resolve(".destroyed-" + id + "-" + newId());
    boolean moved;
    try {
      Files.move(directoryOf(id), trash, StandardCopyOption.ATOMIC_MOVE);
      moved = true;
    } catch (NoSuchFileException e) {
      moved = false; // already gone; still kill stragglers below
    } catch (IOException e) {
      throw new WorkspaceException("cannot destroy " + ref + ": " + e, e);
    }
    ProcessTree.killAll(null, markerPrefix(id));
    if (moved) {
      try {
        deleteTree(trash);
      } catch (IOException e) {
        throw new WorkspaceException(
            ref
                + " is destroyed, but some of its files could not be deleted from "
                + trash
                + ": "
                + e,
            e);
      }
    }
  }

  /** The refs of every workspace under the root, sorted by id. */
  public List<WorkspaceRef> list() {
    if (!Files.isDirectory(root)) {
      return List.of();
    }
    try (Stream<Path> children = Files.list(root)) {
      return children
          .filter(Files::isDirectory)
          .map(p -> p.getFileName().toString())
          .filter(name -> ID.matcher(name).matches())
          .sorted()
          .map(name -> new WorkspaceRef(NAME, name))
          .toList();
    } catch (IOException e) {
      throw new WorkspaceException("cannot list host workspaces in " + root + ": " + e, e);
    }
  }

  Map<String, String> env() {
    return env;
  }

  Path directoryOf(String id) {
    return root.resolve(id);
  }

  /** Creates a fresh workspace directory and returns its id. */
  String createWorkspaceDirectory() {
    beforeCreate.run();
    try {
      Files.createDirectories(root);
      for (int attempt = 0; ; attempt++) {
        String id = newId();
        try {
          Files.createDirectory(directoryOf(id));
          return id;
        } catch (FileAlreadyExistsException e) {
          if (attempt == 10) {
            throw e;
          }
        }
      }
    } catch (IOException e) {
      throw new WorkspaceException("cannot create a host workspace under " + root + ": " + e, e);
    }
  }

  /**
   * The marker value prefix of every command in workspace {@code id}; includes the root, so equal
   * ids under two roots never match each other's processes.
   */
  String markerPrefix(String id) {
    return rootTag + "." + id + "/";
  }

  static String newId() {
    char[] id = new char[12];
    for (int i = 0; i < id.length; i++) {
      id[i] = ID_ALPHABET.charAt(RANDOM.nextInt(ID_ALPHABET.length()));
    }
    return new String(id);
  }

  private static String checkedId(WorkspaceRef ref) {
    if (!ID.matcher(ref.id()).matches()) {
      throw new IllegalArgumentException(
          "malformed host workspace id in " + ref + ": expected 1 to 64 of [a-z0-9]");
    }
    return ref.id();
  }

  private static void deleteTree(Path dir) throws IOException {
    try (Stream<Path> walk = Files.walk(dir)) {
      for (Path p : walk.sorted(Comparator.reverseOrder()).toList()) {
        Files.deleteIfExists(p);
      }
    }
  }

  /** Builds a {@link HostWorkspaceProvider}. */
  public static final class Builder {
    private Path root;
    private final Map<String, String> env = new LinkedHashMap<>();
    private Runnable beforeCreate = () -> {};

    private Builder() {}

    /**
     * Runs {@code hook} before each workspace directory is created, inside the first operation that
     * creates it (tests make creation slow with it: the conformance suite checks that a timeout's
     * clock starts after acquisition). Package-private: not an API.
     */
    Builder beforeCreate(Runnable hook) {
      this.beforeCreate = Objects.requireNonNull(hook, "hook");
      return this;
    }

    /** The directory under which workspaces are created. */
    public Builder root(Path root) {
      this.root = Objects.requireNonNull(root, "root");
      return this;
    }

    /** A variable every command of every workspace gets (a command's own env wins). */
    public Builder env(String name, String value) {
      env.put(Objects.requireNonNull(name, "env name"), Objects.requireNonNull(value, "env value"));
      return this;
    }

    /** Variables every command gets. */
    public Builder env(Map<String, String> vars) {
      vars.forEach(this::env);
      return this;
    }

    /** Returns the provider. */
    public HostWorkspaceProvider build() {
      if (root == null) {
        throw new IllegalStateException("HostWorkspaceProvider needs a root directory");
      }
      return new HostWorkspaceProvider(this);
    }
  }
}
