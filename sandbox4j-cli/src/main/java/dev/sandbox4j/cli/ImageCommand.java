package dev.sandbox4j.cli;

import dev.sandbox4j.runtime.ImageInfo;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.server.ServerImages;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.PrintStream;
import java.nio.file.Path;
import java.time.temporal.ChronoUnit;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.stream.Collectors;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParentCommand;
import picocli.CommandLine.Spec;

/**
 * {@code sandbox4j image build|ls|rm|publish|unpublish|published}: the local engine's images, and
 * which of them {@code sandbox4j serve} offers to every organization.
 */
@Command(
    name = "image",
    mixinStandardHelpOptions = true,
    description = {
      "Builds, lists and removes the images local sandboxes start from, and publishes them to the"
          + " organizations of 'sandbox4j serve'."
    },
    subcommands = {
      ImageCommand.Build.class,
      ImageCommand.Pull.class,
      ImageCommand.Push.class,
      ImageCommand.ListImages.class,
      ImageCommand.Remove.class,
      ImageCommand.Gc.class,
      ImageCommand.Publish.class,
      ImageCommand.Unpublish.class,
      ImageCommand.Published.class
    })
final class ImageCommand implements Runnable {

  @ParentCommand SandboxCommand root;
  @Spec CommandSpec spec;

  @Override
  public void run() {
    throw new ParameterException(
        spec.commandLine(),
        "missing a command: build, pull, ls, rm, gc, publish, unpublish or published");
  }

  LocalSandbox sandboxes() {
    return root.providers().local();
  }

  /** {@code image build [--rebuild]}. */
  @Command(
      name = "build",
      mixinStandardHelpOptions = true,
      description = {
        "Builds the default image (Debian bookworm minbase with git, python3, nodejs, ripgrep,"
            + " sudo, curl and more, from Debian's archive with mmdebstrap; about a minute),"
            + " with progress on stderr, and prints its name. Needs root.",
        "An image that is already built is kept unless --rebuild; sandboxes running on the old"
            + " one keep running."
      })
  static final class Build implements Callable<Integer> {
    @ParentCommand ImageCommand image;

    @Option(names = "--rebuild", description = "Build it anew even if it exists.")
    boolean rebuild;

    @Option(
        names = "--json",
        description =
            "Print {\"name\",\"created\",\"sizeBytes\",\"description\"} (as 'image ls --json')"
                + " instead of its name, and nothing on stderr.")
    boolean json;

    @Override
    public Integer call() {
      LocalSandbox sandboxes = image.sandboxes();
      PrintStream err = image.root.context().err();
      boolean exists = sandboxes.images().stream().anyMatch(i -> i.name().equals("default"));
      ImageInfo built;
      if (exists && !rebuild) {
        if (!json) {
          err.println("sandbox4j: image default is already built (--rebuild builds it anew)");
        }
        built = sandboxes.buildDefaultImage(false);
      } else {
        try (var task = image.root.task("building image default (about a minute)", true, json)) {
          built = sandboxes.buildDefaultImage(rebuild);
        }
      }
      image
          .root
          .context()
          .out()
          .println(json ? Json.write(ListImages.fields(built)) : built.name());
      return ExitCodes.OK;
    }
  }

  /** {@code image pull REF}. */
  @Command(
      name = "pull",
      mixinStandardHelpOptions = true,
      description = {
        "Pulls an image from its registry (Docker Hub, ghcr.io, any OCI Distribution registry)"
            + " with progress on stderr, and prints the name it is stored under. Layers this"
            + " machine has are not downloaded again; a pull cut midway continues where it"
            + " stopped. 'create --image REF' pulls too, when the image is not here. Needs root.",
        "Credentials: --registry-auth, else those of 'docker login' (~/.docker/config.json and"
            + " its credential helpers), else none. Loopback registries get plain HTTP, the"
            + " others HTTPS unless --plain-http."
      })
  static final class Pull implements Callable<Integer> {
    @ParentCommand ImageCommand image;

    @Parameters(
        index = "0",
        paramLabel = "REF",
        description = "NAME[:TAG][@DIGEST], e.g. python:3.12-slim or ghcr.io/org/app:1.2.")
    String reference;

    @Mixin RegistryOptions registry;

    @Option(
        names = "--json",
        description = "Print the image as 'image ls --json' shows it, and nothing on stderr.")
    boolean json;

    @Override
    public Integer call() throws java.io.IOException {
      LocalSandbox sandboxes = registry.sandboxes(image.root);
      ImageInfo pulled;
      try (var task = image.root.task("pulling " + reference, true, json)) {
        pulled = sandboxes.pullImage(reference);
      }
      image
          .root
          .context()
          .out()
          .println(json ? Json.write(ListImages.fields(pulled)) : pulled.name());
      return ExitCodes.OK;
    }
  }

  /** {@code image push NAME REF}. */
  @Command(
      name = "push",
      mixinStandardHelpOptions = true,
      description = {
        "Pushes an image (a snapshot too) to a registry as an OCI image and prints REF@DIGEST,"
            + " which any host pulls ('image pull', 'docker pull') to start from it. Layers the"
            + " registry has are not uploaded again. Progress on stderr. Needs root.",
        "The image's config says how to run it: a pulled or imported image's own, else the"
            + " user, working directory and environment Sandbox4j runs its images with. A"
            + " snapshot's size goes into labels dev.sandbox4j.snapshot.*. Credentials and plain"
            + " HTTP as for 'image pull'."
      })
  static final class Push implements Callable<Integer> {
    @ParentCommand ImageCommand image;

    @Parameters(
        index = "0",
        paramLabel = "NAME",
        description = "The image: its name, or the reference it was pulled as.")
    String name;

    @Parameters(
        index = "1",
        paramLabel = "REF",
        description = "Where to: NAME:TAG with the registry's host, e.g. ghcr.io/org/app:1.2.")
    String reference;

    @Mixin RegistryOptions registry;

    @Override
    public Integer call() throws java.io.IOException {
      LocalSandbox sandboxes = registry.sandboxes(image.root);
      image.root.context().out().println(push(image.root, sandboxes, name, reference));
      return ExitCodes.OK;
    }

    /** Pushes {@code name} with progress on stderr; the reference pushed, with its digest. */
    static String push(SandboxCommand root, LocalSandbox sandboxes, String name, String reference) {
      try (var task = root.task("pushing " + name + " to " + reference, true, false)) {
        return sandboxes.pushImage(name, reference);
      }
    }
  }

  /** {@code image ls [--json]}. */
  @Command(
      name = "ls",
      mixinStandardHelpOptions = true,
      description =
          "Lists the images, sorted by name: a table with a heading, or nothing if there are"
              + " none.")
  static final class ListImages implements Callable<Integer> {
    @ParentCommand ImageCommand image;

    @Option(
        names = "--json",
        description =
            "Print a JSON array of {\"name\",\"created\",\"sizeBytes\",\"description\","
                + "\"reference\",\"digest\"} instead (reference and digest null unless pulled).")
    boolean json;

    /** An image as the server's {@code GET /v1/images} shows it. */
    static Map<String, Object> fields(ImageInfo i) {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("name", i.name());
      m.put("created", i.created().truncatedTo(ChronoUnit.SECONDS).toString());
      m.put("sizeBytes", i.sizeBytes());
      m.put("description", i.description());
      m.put("reference", i.reference());
      m.put("digest", i.digest());
      return m;
    }

    private static String reference(ImageInfo i) {
      return i.reference() == null ? "-" : i.reference();
    }

    @Override
    public Integer call() {
      List<ImageInfo> images = image.sandboxes().images();
      PrintStream out = image.root.context().out();
      if (json) {
        out.println(Json.write(images.stream().map(ListImages::fields).toList()));
        return ExitCodes.OK;
      }
      if (images.isEmpty()) {
        return ExitCodes.OK;
      }
      int nameWidth = Math.max(4, images.stream().mapToInt(i -> i.name().length()).max().orElse(0));
      int refWidth =
          Math.max(9, images.stream().mapToInt(i -> reference(i).length()).max().orElse(0));
      String format = "%-" + nameWidth + "s  %-" + refWidth + "s  %-19s  %-20s  %8s  %s%n";
      out.printf(format, "NAME", "REFERENCE", "DIGEST", "CREATED", "SIZE", "DESCRIPTION");
      for (ImageInfo i : images) {
        out.printf(
            format,
            i.name(),
            reference(i),
            i.digest() == null ? "-" : i.digest().substring(0, Math.min(19, i.digest().length())),
            i.created().truncatedTo(ChronoUnit.SECONDS),
            i.sizeBytes() / (1024 * 1024) + " MiB",
            i.description());
      }
      return ExitCodes.OK;
    }
  }

  /** {@code image rm NAME...}. */
  @Command(
      name = "rm",
      mixinStandardHelpOptions = true,
      description = {
        "Removes images and prints each name. An image a sandbox was created from is kept until"
            + " that sandbox is destroyed (sandbox4j rm).",
        "Removing 'default' is allowed: the next sandbox builds it again."
      })
  static final class Remove implements Callable<Integer> {
    @ParentCommand ImageCommand image;

    @Parameters(
        arity = "1..*",
        paramLabel = "NAME",
        description = "Images to remove, by name or by the reference they were pulled as.")
    List<String> names;

    @Option(
        names = "--json",
        description = "Print a JSON array of the names instead, one line per name.")
    boolean json;

    @Override
    public Integer call() {
      LocalSandbox sandboxes = image.sandboxes();
      for (String name : names) {
        if (!sandboxes.removeImage(name)) {
          throw new WorkspaceException("no image '" + name + "' here: see 'sandbox4j image ls'");
        }
        if (!json) {
          image.root.context().out().println(name);
        }
      }
      if (json) {
        image.root.context().out().println(Json.write(names));
      }
      return ExitCodes.OK;
    }
  }

  /** {@code image gc}. */
  @Command(
      name = "gc",
      mixinStandardHelpOptions = true,
      description = {
        "Deletes the image layers that no image, sandbox or image build uses (left by removed or"
            + " replaced images), leftovers of interrupted image builds, and partial downloads of"
            + " pulls that are not running. 'sandbox4j gc' does this too, with the rest.",
        "Prints a line per thing removed, or 'nothing to clean'."
      })
  static final class Gc implements Callable<Integer> {
    @ParentCommand ImageCommand image;

    @Option(names = "--json", description = "Print {\"removed\":[...]} instead.")
    boolean json;

    @Override
    public Integer call() {
      List<String> removed = image.sandboxes().gcImages();
      PrintStream out = image.root.context().out();
      if (json) {
        out.println(Json.write(Map.of("removed", removed)));
      } else if (removed.isEmpty()) {
        out.println("nothing to clean");
      } else {
        removed.forEach(line -> out.println("removed " + line));
      }
      return ExitCodes.OK;
    }
  }

  /** The server data directory of a publish command: {@code --data}, else the home's. */
  static final class ServerData {
    @Option(
        names = "--data",
        paramLabel = "DIR",
        description = "The server's database directory. Default: $SANDBOX4J_HOME/server.")
    Path data;

    ServerImages open(ImageCommand image) {
      return ServerImages.open(data != null ? data : KeysCommand.dataDirectory(image.root));
    }
  }

  /** {@code image publish NAME...}. */
  @Command(
      name = "publish",
      mixinStandardHelpOptions = true,
      description = {
        "Publishes images to every organization of 'sandbox4j serve': a create may name them as"
            + " its image. Only published images are usable through the server ('default' is,"
            + " until unpublished); any other image on this machine, another organization's"
            + " snapshot included, is 'not found' to every organization. Works while the server"
            + " runs.",
        "An image must exist here (see 'image ls'), except 'default', which the first sandbox"
            + " builds. Publishing a snapshot gives every organization its files: it says so."
      })
  static final class Publish implements Callable<Integer> {
    @ParentCommand ImageCommand image;
    @Mixin ServerData server;

    @Parameters(arity = "1..*", paramLabel = "NAME", description = "Images to publish.")
    List<String> names;

    @Option(
        names = "--json",
        description = "Print a JSON array of the names instead, one line per name.")
    boolean json;

    @Override
    public Integer call() {
      LocalSandbox sandboxes = image.sandboxes();
      PrintStream err = image.root.context().err();
      Set<String> here =
          sandboxes.images().stream().map(ImageInfo::name).collect(Collectors.toSet());
      for (String name : names) {
        if (!name.equals("default") && !here.contains(name)) {
          err.println("sandbox4j: no image '" + name + "' here: see 'sandbox4j image ls'");
          return ExitCodes.USAGE;
        }
      }
      try (ServerImages published = server.open(image)) {
        for (String name : names) {
          boolean added = published.publish(name);
          sandboxes.snapshots().stream()
              .filter(s -> s.name().equals(name))
              .findFirst()
              .ifPresent(
                  s ->
                      err.println(
                          "sandbox4j: warning: '"
                              + name
                              + "' is a snapshot of sandbox "
                              + s.source()
                              + ": every organization can now start from its files"));
          if (!json) {
            image.root.context().out().println(name);
          }
          if (!added) {
            err.println("sandbox4j: '" + name + "' was already published");
          }
        }
        if (json) {
          image.root.context().out().println(Json.write(names));
        }
      } catch (IllegalArgumentException e) {
        err.println("sandbox4j: " + e.getMessage());
        return ExitCodes.USAGE;
      }
      return ExitCodes.OK;
    }
  }

  /** {@code image unpublish NAME...}. */
  @Command(
      name = "unpublish",
      mixinStandardHelpOptions = true,
      description = {
        "Unpublishes images: from the server's next request on, no organization can create a"
            + " sandbox from them (a 404, as for an image that does not exist). Sandboxes made"
            + " from them keep running. Unpublishing 'default' refuses creates that name no image."
      })
  static final class Unpublish implements Callable<Integer> {
    @ParentCommand ImageCommand image;
    @Mixin ServerData server;

    @Parameters(arity = "1..*", paramLabel = "NAME", description = "Images to unpublish.")
    List<String> names;

    @Option(
        names = "--json",
        description = "Print a JSON array of the names instead, one line per name.")
    boolean json;

    @Override
    public Integer call() {
      PrintStream err = image.root.context().err();
      try (ServerImages published = server.open(image)) {
        for (String name : names) {
          if (!published.unpublish(name)) {
            err.println("sandbox4j: '" + name + "' is not published: see 'image published'");
            return ExitCodes.USAGE;
          }
          if (!json) {
            image.root.context().out().println(name);
          }
        }
        if (json) {
          image.root.context().out().println(Json.write(names));
        }
      } catch (IllegalArgumentException e) {
        err.println("sandbox4j: " + e.getMessage());
        return ExitCodes.USAGE;
      }
      return ExitCodes.OK;
    }
  }

  /** {@code image published}. */
  @Command(
      name = "published",
      mixinStandardHelpOptions = true,
      description =
          "Lists the images published to every organization of 'sandbox4j serve', one per line;"
              + " one that is not on this machine says so.")
  static final class Published implements Callable<Integer> {
    @ParentCommand ImageCommand image;
    @Mixin ServerData server;

    @Option(
        names = "--json",
        description = "Print a JSON array of {\"name\",\"onThisMachine\"} instead.")
    boolean json;

    @Override
    public Integer call() {
      Set<String> here =
          image.sandboxes().images().stream().map(ImageInfo::name).collect(Collectors.toSet());
      try (ServerImages published = server.open(image)) {
        if (json) {
          List<Map<String, Object>> rows = new java.util.ArrayList<>();
          for (String name : published.list()) {
            Map<String, Object> fields = new LinkedHashMap<>();
            fields.put("name", name);
            fields.put("onThisMachine", here.contains(name));
            rows.add(fields);
          }
          image.root.context().out().println(Json.write(rows));
          return ExitCodes.OK;
        }
        for (String name : published.list()) {
          image
              .root
              .context()
              .out()
              .println(name + (here.contains(name) ? "" : "  (not on this machine)"));
        }
      }
      return ExitCodes.OK;
    }
  }
}
