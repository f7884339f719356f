package dev.sandbox4j.cli;

import dev.sandbox4j.runtime.ImageInfo;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.PrintStream;
import java.time.temporal.ChronoUnit;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParentCommand;
import picocli.CommandLine.Spec;

/** {@code sandbox4j image build|ls|rm}: the local engine's images. */
@Command(
    name = "image",
    mixinStandardHelpOptions = true,
    description = "Builds, lists and removes the images local sandboxes start from.",
    subcommands = {
      ImageCommand.Build.class,
      ImageCommand.ListImages.class,
      ImageCommand.Remove.class
    })
final class ImageCommand implements Runnable {

  @ParentCommand SandboxCommand root;
  @Spec CommandSpec spec;

  @Override
  public void run() {
    throw new ParameterException(spec.commandLine(), "missing a command: build, ls or rm");
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

    @Override
    public Integer call() {
      LocalSandbox sandboxes = image.sandboxes();
      PrintStream err = image.root.context().err();
      boolean exists = sandboxes.images().stream().anyMatch(i -> i.name().equals("default"));
      if (exists && !rebuild) {
        err.println("sandbox4j: image default is already built (--rebuild builds it anew)");
      } else {
        err.println("sandbox4j: building image default (about a minute):");
        image.root.progressHeadingShown();
      }
      ImageInfo built = sandboxes.buildDefaultImage(rebuild);
      image.root.context().out().println(built.name());
      return ExitCodes.OK;
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
            "Print a JSON array of {\"name\",\"created\",\"sizeBytes\",\"description\"} instead.")
    boolean json;

    @Override
    public Integer call() {
      List<ImageInfo> images = image.sandboxes().images();
      PrintStream out = image.root.context().out();
      if (json) {
        out.println(
            Json.write(
                images.stream()
                    .map(
                        i -> {
                          Map<String, Object> m = new LinkedHashMap<>();
                          m.put("name", i.name());
                          m.put("created", i.created().truncatedTo(ChronoUnit.SECONDS).toString());
                          m.put("sizeBytes", i.sizeBytes());
                          m.put("description", i.description());
                          return m;
                        })
                    .toList()));
        return ExitCodes.OK;
      }
      if (images.isEmpty()) {
        return ExitCodes.OK;
      }
      int nameWidth = Math.max(4, images.stream().mapToInt(i -> i.name().length()).max().orElse(0));
      String format = "%-" + nameWidth + "s  %-20s  %8s  %s%n";
      out.printf(format, "NAME", "CREATED", "SIZE", "DESCRIPTION");
      for (ImageInfo i : images) {
        out.printf(
            format,
            i.name(),
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

    @Parameters(arity = "1..*", paramLabel = "NAME", description = "Images to remove.")
    List<String> names;

    @Override
    public Integer call() {
      LocalSandbox sandboxes = image.sandboxes();
      for (String name : names) {
        if (!sandboxes.removeImage(name)) {
          throw new WorkspaceException("no image '" + name + "' here: see 'sandbox4j image ls'");
        }
        image.root.context().out().println(name);
      }
      return ExitCodes.OK;
    }
  }
}
