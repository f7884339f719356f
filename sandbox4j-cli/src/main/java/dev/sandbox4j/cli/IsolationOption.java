package dev.sandbox4j.cli;

import dev.sandbox4j.runtime.Isolation;
import dev.sandbox4j.workspace.WorkspaceRef;
import picocli.CommandLine.ITypeConverter;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.TypeConversionException;

/**
 * {@code --isolation}, defined once for every command that can create a sandbox (create, exec new,
 * run, mcp, demo): the boundary between the new sandbox's code and the host's kernel. A sandbox
 * keeps it for life, so a command that acts on an existing sandbox refuses it ({@link #refuseFor}).
 */
final class IsolationOption {

  @Option(
      names = "--isolation",
      paramLabel = "container|gvisor",
      converter = Parse.class,
      description =
          "The boundary between a new sandbox's code and this machine's kernel: container (crun:"
              + " namespaces, cgroups and seccomp around processes on the host's kernel; the"
              + " default) or gvisor (gVisor's runsc: a kernel of its own, which 'sandbox4j setup'"
              + " installs; slower to start and exec, and no hibernate, live fork or shell"
              + " terminal). Local sandboxes, and a server's (remote) where its operator allows"
              + " it.")
  Isolation isolation;

  /**
   * Refuses {@code --isolation} where the command acts on {@code existing}, which keeps the
   * isolation it was created with; does nothing when the option was not given.
   */
  void refuseFor(CommandSpec spec, WorkspaceRef existing) {
    if (isolation != null) {
      throw new ParameterException(
          spec.commandLine(),
          "--isolation is for a new sandbox; "
              + existing
              + " keeps the isolation it was created with (see 'sandbox4j ls')");
    }
  }

  /** The engine's own parse, so that the error names the accepted values as the engine does. */
  static final class Parse implements ITypeConverter<Isolation> {
    @Override
    public Isolation convert(String value) {
      try {
        return Isolation.parse(value);
      } catch (IllegalArgumentException e) {
        throw new TypeConversionException(e.getMessage());
      }
    }
  }
}
