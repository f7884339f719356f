package dev.sandbox4j.runtime;

import dev.sandbox4j.runtime.internal.engine.Engine;
import dev.sandbox4j.runtime.internal.engine.EnginePorts;
import dev.sandbox4j.runtime.internal.net.Networks;
import dev.sandbox4j.runtime.internal.ports.PortForwards;
import dev.sandbox4j.runtime.internal.ports.PortTokens;
import dev.sandbox4j.runtime.internal.ports.PortUrls;
import dev.sandbox4j.runtime.internal.supervisor.Supervisor;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.net.URI;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * A sandbox's network as {@link LocalSandbox} shows it to its owner: the egress policy, the port
 * URLs and TCP forwards (served by the state directory's supervisor), and which named networks this
 * provider may reach into. {@link LocalSandbox} documents each operation.
 */
final class LocalNetworking {
  private final LocalSandbox sandboxes;
  private final List<String> networks;

  LocalNetworking(LocalSandbox sandboxes, List<String> networks) {
    this.sandboxes = sandboxes;
    this.networks = networks;
  }

  void setEgress(WorkspaceRef ref, EgressPolicy policy) {
    Objects.requireNonNull(policy, "policy");
    String id = LocalRefs.localId(ref);
    Engine e = sandboxes.engine();
    e.record(id); // unavailable if gone
    e.networks().setPolicy(e.dir(id), id, policy);
    if (policy.interceptTls()) {
      e.wake(id);
      e.installCaIfIntercepting(id);
    }
  }

  EgressPolicy egress(WorkspaceRef ref) {
    String id = LocalRefs.localId(ref);
    Engine e = sandboxes.engine();
    e.record(id);
    return Networks.policy(e.dir(id));
  }

  /**
   * Refuses a sandbox on a named network that this provider was not built for ({@link
   * LocalSandbox.Builder#network}): the isolated-only API cannot reach into a network.
   */
  void checkNetworkAccess(String id, String what) {
    List<String> on = Networks.networksOf(sandboxes.engine().dir(id));
    List<String> foreign = on.stream().filter(n -> !networks.contains(n)).toList();
    if (!foreign.isEmpty()) {
      throw new WorkspaceException(
          "refusing to "
              + what
              + " local:"
              + id
              + ": it is on named network "
              + String.join(", ", foreign)
              + ", and this LocalSandbox was built without it (use"
              + " LocalSandbox.builder().network(\""
              + foreign.getFirst()
              + "\"))");
    }
  }

  URI url(WorkspaceRef ref, int port) {
    PortUrls.checkPort(port);
    String id = LocalRefs.localId(ref);
    Engine e = sandboxes.engine();
    e.record(id);
    Supervisor.ensureRunning(e);
    return PortUrls.url(PortUrls.port(sandboxes.home()), id, port);
  }

  Optional<String> portToken(WorkspaceRef ref) {
    String id = LocalRefs.localId(ref);
    Engine e = sandboxes.engine();
    e.record(id);
    return PortTokens.token(e.dir(id));
  }

  int forwardTcp(WorkspaceRef ref, int port) {
    PortUrls.checkPort(port);
    String id = LocalRefs.localId(ref);
    Engine e = sandboxes.engine();
    e.record(id);
    boolean running = Supervisor.isRunning(sandboxes.home());
    Supervisor.ensureRunning(e);
    return PortForwards.forward(new EnginePorts(e), id, port, running);
  }
}
