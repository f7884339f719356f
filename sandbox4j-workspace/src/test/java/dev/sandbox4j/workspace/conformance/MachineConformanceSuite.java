package dev.sandbox4j.workspace.conformance;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import dev.sandbox4j.workspace.machine.EgressRules;
import dev.sandbox4j.workspace.machine.ForkResult;
import dev.sandbox4j.workspace.machine.SandboxInfo;
import dev.sandbox4j.workspace.machine.SandboxTimers;
import dev.sandbox4j.workspace.machine.SnapshotInfo;
import dev.sandbox4j.workspace.machine.SupportsEgress;
import dev.sandbox4j.workspace.machine.SupportsFork;
import dev.sandbox4j.workspace.machine.SupportsHibernate;
import dev.sandbox4j.workspace.machine.SupportsListing;
import dev.sandbox4j.workspace.machine.SupportsPorts;
import dev.sandbox4j.workspace.machine.SupportsSnapshots;
import dev.sandbox4j.workspace.machine.SupportsStop;
import dev.sandbox4j.workspace.machine.SupportsSuspend;
import dev.sandbox4j.workspace.machine.SupportsTimers;
import java.net.URI;
import java.time.Duration;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;

/**
 * The machine capabilities' contract (see {@code dev.sandbox4j.workspace.machine} package-info), a
 * section per capability; a failure message quotes the rule it checks.
 *
 * <p>A provider's test extends this class and supplies the provider. Each section runs only where
 * the provider implements that capability ({@code instanceof}) and is skipped, as not applicable,
 * elsewhere; a check of a machine's state runs where the provider also lists its machines. The
 * machines need POSIX {@code sh}, {@code sleep} and {@code pgrep}. Bounds are there to turn hangs
 * into failures, never speed goals.
 */
public abstract class MachineConformanceSuite {

  private static final Duration HANG_BOUND = Duration.ofSeconds(60);

  /** A background process with an argument nothing else uses, found again by {@code pgrep -f}. */
  private static final String MARKER_SLEEP = "sleep 6017";

  private final Set<WorkspaceRef> made = ConcurrentHashMap.newKeySet();
  private final Set<String> snapshotsMade = ConcurrentHashMap.newKeySet();
  private WorkspaceProvider provider;

  /** The provider under test; called once per test. */
  protected abstract WorkspaceProvider provider();

  /**
   * A backend for a fresh machine started from snapshot {@code name}, as the provider's builder
   * makes one; null if it cannot, which skips the rules that need it. Does no I/O.
   */
  protected WorkspaceBackend newBackendFromSnapshot(String name) {
    return null;
  }

  private WorkspaceProvider theProvider() {
    if (provider == null) {
      provider = provider();
    }
    return provider;
  }

  /**
   * Capabilities the provider declares but whose sections do not apply to the machines this test
   * makes, each skipped saying so: a provider whose machines lack them in the configuration under
   * test (the docker provider on Podman, whose machines have no egress network). Default: none.
   */
  protected java.util.Set<Class<?>> notApplicableHere() {
    return java.util.Set.of();
  }

  private <C> C require(Class<C> capability) {
    assumeTrue(
        capability.isInstance(theProvider()),
        theProvider().name() + " does not declare " + capability.getSimpleName());
    assumeTrue(
        !notApplicableHere().contains(capability),
        capability.getSimpleName() + " does not apply to the machines this test makes");
    return capability.cast(theProvider());
  }

  @AfterEach
  void cleanUp() {
    for (WorkspaceRef ref : made) {
      theProvider().destroy(ref);
    }
    if (theProvider() instanceof SupportsSnapshots snapshots) {
      snapshotsMade.forEach(snapshots::removeSnapshot);
    }
  }

  // ---- helpers ----------------------------------------------------------------------------

  /** A fresh machine, created now and destroyed after the test. */
  private Workspace newMachine() {
    return track(Workspace.of(theProvider().newBackend()));
  }

  private Workspace track(Workspace ws) {
    made.add(ws.open());
    return ws;
  }

  private Workspace attach(WorkspaceRef ref) {
    made.add(ref);
    return Workspace.of(
        theProvider()
            .backend(ref)
            .orElseThrow(() -> new AssertionError("provider refused its own ref " + ref)));
  }

  private static String shOk(Workspace ws, String script) {
    CommandResult r = ws.run(Command.shell(script), RunOptions.withTimeout(HANG_BOUND));
    assertThat(r.exitCode())
        .as("command failed: %s%nstdout: %s%nstderr: %s", script, r.stdoutText(), r.stderrText())
        .isZero();
    return r.stdoutText();
  }

  /** Starts a background process that outlives the command, and returns its pid. */
  private static String startBackgroundProcess(Workspace ws) {
    return shOk(ws, "nohup " + MARKER_SLEEP + " >/dev/null 2>&1 & echo $!").strip();
  }

  /** Whether the background process of {@link #startBackgroundProcess} runs. */
  private static boolean backgroundProcessRuns(Workspace ws) {
    return !shOk(ws, "pgrep -f '" + MARKER_SLEEP.replace("6", "[6]") + "' || true").isBlank();
  }

  /** The machine's state, or null where the provider does not list its machines. */
  private String stateOf(WorkspaceRef ref) {
    if (!(theProvider() instanceof SupportsListing listing)) {
      return null;
    }
    return listing
        .info(ref)
        .map(SandboxInfo::state)
        .orElseThrow(() -> new AssertionError("info(" + ref + ") is empty for a machine that is"));
  }

  private void assertState(WorkspaceRef ref, String expected, String rule) {
    if (theProvider() instanceof SupportsListing) {
      assertThat(stateOf(ref)).as(rule).isEqualTo(expected);
    }
  }

  private WorkspaceRef destroyedRef() {
    Workspace ws = newMachine();
    WorkspaceRef ref = ws.open();
    theProvider().destroy(ref);
    return ref;
  }

  private WorkspaceRef foreignRef() {
    return new WorkspaceRef("no-such-provider-x", "abc");
  }

  private static String uniqueName() {
    return "conformance-" + UUID.randomUUID().toString().substring(0, 12);
  }

  // ---- listing -----------------------------------------------------------------------------

  @Nested
  @DisplayName("Listing")
  class Listing {

    @Test
    @DisplayName("a new machine is listed, running, by its ref; the list is sorted by id")
    void newMachineIsListed() {
      SupportsListing listing = require(SupportsListing.class);
      WorkspaceRef ref = newMachine().open();

      List<SandboxInfo> all = listing.list();
      assertThat(all)
          .as("rule: list() shows every machine of the provider")
          .extracting(SandboxInfo::ref)
          .contains(ref);
      assertThat(all)
          .as("rule: list() is sorted by id")
          .isSortedAccordingTo(Comparator.comparing(s -> s.ref().id()));
      SandboxInfo info =
          listing.info(ref).orElseThrow(() -> new AssertionError("info of a new machine"));
      assertThat(info.ref()).isEqualTo(ref);
      assertThat(info.state()).as("rule: a machine in use is running").isEqualTo("running");
      assertThat(all.stream().filter(s -> s.ref().equals(ref)).findFirst().orElseThrow().state())
          .isEqualTo("running");
    }

    @Test
    @DisplayName("a destroyed machine has no info and is no longer listed")
    void destroyedMachineHasNoInfo() {
      SupportsListing listing = require(SupportsListing.class);
      WorkspaceRef ref = destroyedRef();

      assertThat(listing.info(ref)).as("rule: info of a machine that is gone is empty").isEmpty();
      assertThat(listing.list()).extracting(SandboxInfo::ref).doesNotContain(ref);
    }

    @Test
    @DisplayName("another provider's ref is refused")
    void foreignRefIsRefused() {
      SupportsListing listing = require(SupportsListing.class);
      assertThatThrownBy(() -> listing.info(foreignRef()))
          .as("rule: another provider's ref is an IllegalArgumentException")
          .isInstanceOf(IllegalArgumentException.class);
    }
  }

  // ---- suspend -----------------------------------------------------------------------------

  @Nested
  @DisplayName("Suspend")
  class Suspend {

    @Test
    @DisplayName("suspend keeps processes and files; any use wakes the machine")
    void suspendKeepsProcessesAndAnyUseWakes() {
      SupportsSuspend suspend = require(SupportsSuspend.class);
      Workspace ws = newMachine();
      WorkspaceRef ref = ws.open();
      ws.writeText("kept.txt", "kept");
      startBackgroundProcess(ws);

      suspend.suspend(ref);
      assertState(ref, "suspended", "rule: a suspended machine says so");

      assertThat(ws.readText("kept.txt")).as("rule: its files are always kept").isEqualTo("kept");
      assertThat(backgroundProcessRuns(ws))
          .as("rule: suspend keeps the processes; any use wakes the machine")
          .isTrue();
      assertState(ref, "running", "rule: any use wakes a suspended machine");
    }

    @Test
    @DisplayName("suspend and resume are idempotent")
    void suspendAndResumeAreIdempotent() {
      SupportsSuspend suspend = require(SupportsSuspend.class);
      Workspace ws = newMachine();
      WorkspaceRef ref = ws.open();
      startBackgroundProcess(ws);

      suspend.suspend(ref);
      suspend.suspend(ref);
      assertState(ref, "suspended", "rule: suspend is idempotent");
      suspend.resume(ref);
      suspend.resume(ref);
      assertState(ref, "running", "rule: resume wakes, and is idempotent");
      assertThat(backgroundProcessRuns(ws)).as("resume keeps the processes").isTrue();
    }

    @Test
    @DisplayName("suspending a machine that is gone is unavailable; another provider's ref refused")
    void goneIsUnavailable() {
      SupportsSuspend suspend = require(SupportsSuspend.class);
      WorkspaceRef gone = destroyedRef();
      assertThatThrownBy(() -> suspend.suspend(gone))
          .as("rule: a ref whose workspace is gone raises unavailable")
          .isInstanceOf(WorkspaceUnavailableException.class);
      assertThatThrownBy(() -> suspend.resume(gone))
          .isInstanceOf(WorkspaceUnavailableException.class);
      assertThatThrownBy(() -> suspend.suspend(foreignRef()))
          .as("rule: another provider's ref is an IllegalArgumentException")
          .isInstanceOf(IllegalArgumentException.class);
    }
  }

  // ---- stop --------------------------------------------------------------------------------

  @Nested
  @DisplayName("Stop")
  class Stop {

    @Test
    @DisplayName("stop ends the processes and keeps the files; any use starts the machine again")
    void stopEndsProcessesKeepsFiles() {
      SupportsStop stop = require(SupportsStop.class);
      Workspace ws = newMachine();
      WorkspaceRef ref = ws.open();
      ws.writeText("kept.txt", "kept");
      startBackgroundProcess(ws);

      stop.stop(ref);
      assertState(ref, "stopped", "rule: a stopped machine says so");

      assertThat(ws.readText("kept.txt")).as("rule: its files are always kept").isEqualTo("kept");
      assertThat(backgroundProcessRuns(ws))
          .as("rule: stop ends every process; the next use starts it with a fresh init")
          .isFalse();
      assertState(ref, "running", "rule: any use starts a stopped machine");
    }

    @Test
    @DisplayName("stop and start are idempotent; a stopped machine stays stopped when suspended")
    void stopAndStartAreIdempotent() {
      SupportsStop stop = require(SupportsStop.class);
      Workspace ws = newMachine();
      WorkspaceRef ref = ws.open();

      stop.stop(ref);
      stop.stop(ref);
      assertState(ref, "stopped", "rule: stop is idempotent");
      if (theProvider() instanceof SupportsSuspend suspend) {
        suspend.suspend(ref);
        assertState(ref, "stopped", "rule: a stopped machine stays stopped when suspended");
      }
      stop.start(ref);
      stop.start(ref);
      assertState(ref, "running", "rule: start starts it, and is idempotent");
      assertThat(shOk(ws, "echo up")).isEqualTo("up\n");
    }

    @Test
    @DisplayName("stopping a machine that is gone is unavailable; another provider's ref refused")
    void goneIsUnavailable() {
      SupportsStop stop = require(SupportsStop.class);
      WorkspaceRef gone = destroyedRef();
      assertThatThrownBy(() -> stop.stop(gone))
          .as("rule: a ref whose workspace is gone raises unavailable")
          .isInstanceOf(WorkspaceUnavailableException.class);
      assertThatThrownBy(() -> stop.start(gone)).isInstanceOf(WorkspaceUnavailableException.class);
      assertThatThrownBy(() -> stop.stop(foreignRef()))
          .as("rule: another provider's ref is an IllegalArgumentException")
          .isInstanceOf(IllegalArgumentException.class);
    }
  }

  // ---- hibernate ---------------------------------------------------------------------------

  @Nested
  @DisplayName("Hibernate")
  class Hibernate {

    private void hibernate(SupportsHibernate hibernate, WorkspaceRef ref) {
      try {
        hibernate.hibernate(ref);
      } catch (WorkspaceUnavailableException e) {
        throw e;
      } catch (WorkspaceException e) {
        Prerequisites.require(false, "hibernate on this host: " + e.getMessage());
      }
    }

    @Test
    @DisplayName("hibernate saves the processes and keeps the files; any use restores them")
    void hibernateKeepsProcessesAndAnyUseRestores() {
      SupportsHibernate hibernate = require(SupportsHibernate.class);
      Workspace ws = newMachine();
      WorkspaceRef ref = ws.open();
      ws.writeText("kept.txt", "kept");
      String pid = startBackgroundProcess(ws);

      hibernate(hibernate, ref);
      assertState(ref, "hibernated", "rule: a hibernated machine says so");

      assertThat(ws.readText("kept.txt")).as("rule: its files are always kept").isEqualTo("kept");
      assertThat(shOk(ws, "kill -0 " + pid + " && echo restored"))
          .as("rule: any use restores a hibernated machine's processes where they were")
          .isEqualTo("restored\n");
      assertState(ref, "running", "rule: any use wakes a hibernated machine");
    }

    @Test
    @DisplayName("hibernate is idempotent; a stopped machine stays stopped when hibernated")
    void hibernateIsIdempotentAndStoppedStaysStopped() {
      SupportsHibernate hibernate = require(SupportsHibernate.class);
      Workspace ws = newMachine();
      WorkspaceRef ref = ws.open();

      hibernate(hibernate, ref);
      hibernate(hibernate, ref);
      assertState(ref, "hibernated", "rule: hibernate is idempotent");
      if (theProvider() instanceof SupportsStop stop) {
        stop.stop(ref);
        hibernate(hibernate, ref);
        assertState(ref, "stopped", "rule: a stopped machine stays stopped when hibernated");
      }
      assertThat(shOk(ws, "echo up")).isEqualTo("up\n");
    }

    @Test
    @DisplayName("hibernating a machine that is gone is unavailable")
    void goneIsUnavailable() {
      SupportsHibernate hibernate = require(SupportsHibernate.class);
      WorkspaceRef gone = destroyedRef();
      assertThatThrownBy(() -> hibernate.hibernate(gone))
          .as("rule: a ref whose workspace is gone raises unavailable")
          .isInstanceOf(WorkspaceUnavailableException.class);
      assertThatThrownBy(() -> hibernate.hibernate(foreignRef()))
          .as("rule: another provider's ref is an IllegalArgumentException")
          .isInstanceOf(IllegalArgumentException.class);
    }
  }

  // ---- fork --------------------------------------------------------------------------------

  @Nested
  @DisplayName("Fork")
  class Fork {

    @Test
    @DisplayName("a files-only fork is a new machine with a copy of the files, independent after")
    void forkFilesCopiesFilesIntoAnIndependentMachine() {
      SupportsFork forks = require(SupportsFork.class);
      Workspace parent = newMachine();
      parent.writeText("note.txt", "parent");
      startBackgroundProcess(parent);

      ForkResult fork = forks.forkFiles(parent.open());
      Workspace child = attach(fork.ref());

      assertThat(fork.ref()).as("rule: a fork is a new machine").isNotEqualTo(parent.open());
      assertThat(fork.ref().provider()).isEqualTo(theProvider().name());
      assertThat(fork.processesCopied()).as("rule: forkFiles never copies processes").isFalse();
      assertThat(fork.reason())
          .as("rule: the result says why processes were not copied, never silently")
          .isNotBlank();
      assertThat(child.readText("note.txt"))
          .as("rule: a fork has a copy of the files")
          .isEqualTo("parent");
      assertThat(backgroundProcessRuns(child)).as("no process of the parent's").isFalse();
      child.writeText("note.txt", "child");
      parent.writeText("other.txt", "parent only");
      assertThat(parent.readText("note.txt"))
          .as("rule: the two are independent afterwards")
          .isEqualTo("parent");
      assertThat(child.exists("other.txt")).isFalse();
      assertThat(backgroundProcessRuns(parent)).as("the parent goes on").isTrue();
    }

    @Test
    @DisplayName("a fork says whether it copied the processes, and why not")
    void forkSaysWhetherProcessesWereCopied() {
      SupportsFork forks = require(SupportsFork.class);
      Workspace parent = newMachine();
      parent.writeText("note.txt", "parent");
      startBackgroundProcess(parent);

      ForkResult fork = forks.fork(parent.open());
      Workspace child = attach(fork.ref());

      assertThat(child.readText("note.txt"))
          .as("rule: a fork has a copy of the files")
          .isEqualTo("parent");
      if (fork.processesCopied()) {
        assertThat(backgroundProcessRuns(child))
            .as("rule: processesCopied means the parent's processes run in the fork")
            .isTrue();
        assertThat(fork.reason()).isEmpty();
      } else {
        assertThat(fork.reason())
            .as("rule: the result says why processes were not copied, never silently")
            .isNotBlank();
        assertThat(backgroundProcessRuns(child)).isFalse();
      }
      assertThat(backgroundProcessRuns(parent)).as("the parent goes on").isTrue();
      assertState(fork.ref(), "running", "rule: a fork is a new running machine");
    }

    @Test
    @DisplayName("forking a machine that is gone is unavailable")
    void goneIsUnavailable() {
      SupportsFork forks = require(SupportsFork.class);
      WorkspaceRef gone = destroyedRef();
      assertThatThrownBy(() -> forks.forkFiles(gone))
          .as("rule: a ref whose workspace is gone raises unavailable")
          .isInstanceOf(WorkspaceUnavailableException.class);
      assertThatThrownBy(() -> forks.fork(foreignRef()))
          .as("rule: another provider's ref is an IllegalArgumentException")
          .isInstanceOf(IllegalArgumentException.class);
    }
  }

  // ---- snapshots ---------------------------------------------------------------------------

  @Nested
  @DisplayName("Snapshots")
  class Snapshots {

    private SnapshotInfo save(SupportsSnapshots snapshots, WorkspaceRef ref, String name) {
      snapshotsMade.add(name);
      return snapshots.snapshot(ref, name);
    }

    @Test
    @DisplayName("a snapshot is listed by name until removed; removing it twice says so")
    void snapshotIsListedUntilRemoved() {
      SupportsSnapshots snapshots = require(SupportsSnapshots.class);
      Workspace ws = newMachine();
      ws.writeText("note.txt", "saved");
      String name = uniqueName();

      SnapshotInfo info = save(snapshots, ws.open(), name);

      assertThat(info.name()).isEqualTo(name);
      if (info.source() != null) {
        assertThat(info.source()).as("the machine it was saved from").isEqualTo(ws.open());
      }
      List<SnapshotInfo> all = snapshots.snapshots();
      assertThat(all)
          .as("rule: a complete snapshot is listed")
          .extracting(SnapshotInfo::name)
          .contains(name);
      assertThat(all)
          .as("snapshots() is sorted by name")
          .isSortedAccordingTo(Comparator.comparing(SnapshotInfo::name));
      assertThat(snapshots.removeSnapshot(name)).as("there was such a snapshot").isTrue();
      assertThat(snapshots.removeSnapshot(name)).as("there is none any more").isFalse();
      assertThat(snapshots.snapshots()).extracting(SnapshotInfo::name).doesNotContain(name);
      assertThat(ws.readText("note.txt")).as("the machine goes on").isEqualTo("saved");
    }

    @Test
    @DisplayName(
        "a new machine starts from a snapshot's files; saving again under its name replaces it")
    void newMachineStartsFromTheSnapshot() {
      SupportsSnapshots snapshots = require(SupportsSnapshots.class);
      String name = uniqueName();
      Workspace ws = newMachine();
      ws.writeText("note.txt", "first");
      save(snapshots, ws.open(), name);
      WorkspaceBackend fromSnapshot = newBackendFromSnapshot(name);
      assumeTrue(fromSnapshot != null, "the test gives no way to start from a snapshot");

      Workspace first = track(Workspace.of(fromSnapshot));
      assertThat(first.readText("note.txt"))
          .as("rule: new machines start from a snapshot's files")
          .isEqualTo("first");

      ws.writeText("note.txt", "second");
      save(snapshots, ws.open(), name);
      Workspace second = track(Workspace.of(newBackendFromSnapshot(name)));
      assertThat(second.readText("note.txt"))
          .as("rule: saving under a name in use replaces that snapshot")
          .isEqualTo("second");
      assertThat(first.readText("note.txt"))
          .as("rule: machines made from a replaced snapshot keep theirs")
          .isEqualTo("first");
    }

    @Test
    @DisplayName("saving a machine that is gone is unavailable")
    void goneIsUnavailable() {
      SupportsSnapshots snapshots = require(SupportsSnapshots.class);
      WorkspaceRef gone = destroyedRef();
      String name = uniqueName();
      snapshotsMade.add(name);
      assertThatThrownBy(() -> snapshots.snapshot(gone, name))
          .as("rule: a ref whose workspace is gone raises unavailable")
          .isInstanceOf(WorkspaceUnavailableException.class);
      assertThatThrownBy(() -> snapshots.snapshot(foreignRef(), name))
          .as("rule: another provider's ref is an IllegalArgumentException")
          .isInstanceOf(IllegalArgumentException.class);
    }
  }

  // ---- timers ------------------------------------------------------------------------------

  @Nested
  @DisplayName("Timers")
  class Timers {

    @Test
    @DisplayName("a machine's timers are those it was created with, and agree with its info")
    void timersAgreeWithInfo() {
      SupportsTimers timers = require(SupportsTimers.class);
      WorkspaceRef ref = newMachine().open();

      Optional<SandboxTimers> first = timers.timers(ref);
      assertThat(timers.timers(ref))
          .as("rule: a machine's timers are those it was created with; reading changes nothing")
          .isEqualTo(first);
      if (theProvider() instanceof SupportsListing listing) {
        assertThat(Optional.ofNullable(listing.info(ref).orElseThrow().timers()))
            .as("rule: a machine's timers agree with what info says of it")
            .isEqualTo(first);
      }
    }

    @Test
    @DisplayName("the timers of a machine that is gone are unavailable")
    void goneIsUnavailable() {
      SupportsTimers timers = require(SupportsTimers.class);
      WorkspaceRef gone = destroyedRef();
      assertThatThrownBy(() -> timers.timers(gone))
          .as("rule: a ref whose workspace is gone raises unavailable")
          .isInstanceOf(WorkspaceUnavailableException.class);
      assertThatThrownBy(() -> timers.timers(foreignRef()))
          .as("rule: another provider's ref is an IllegalArgumentException")
          .isInstanceOf(IllegalArgumentException.class);
    }
  }

  // ---- egress ------------------------------------------------------------------------------

  @Nested
  @DisplayName("Egress")
  class Egress {

    @Test
    @DisplayName("rules read back as they were set, in every mode")
    void rulesReadBackAsSet() {
      SupportsEgress egress = require(SupportsEgress.class);
      WorkspaceRef ref = newMachine().open();
      EgressRules.Header header =
          new EgressRules.Header("api.example.com", "X-Conformance", "secret-1", List.of(80));
      EgressRules allow =
          new EgressRules(
              EgressRules.Mode.ALLOWLIST,
              List.of("api.example.com", "198.51.100.0/24"),
              List.of(header),
              false);

      egress.setEgressRules(ref, allow);
      assertThat(egress.egressRules(ref))
          .as("rule: egress rules read back as they were set")
          .isEqualTo(allow);

      egress.setEgressRules(ref, EgressRules.none());
      assertThat(egress.egressRules(ref).mode())
          .as("rule: egress rules read back as they were set")
          .isEqualTo(EgressRules.Mode.NONE);
      egress.setEgressRules(ref, EgressRules.all());
      assertThat(egress.egressRules(ref))
          .as("rule: egress rules read back as they were set")
          .isEqualTo(EgressRules.all());
    }

    @Test
    @DisplayName("a refused rule is an IllegalArgumentException and changes nothing")
    void refusedRuleChangesNothing() {
      SupportsEgress egress = require(SupportsEgress.class);
      WorkspaceRef ref = newMachine().open();
      EgressRules before = EgressRules.allow(List.of("api.example.com"));
      egress.setEgressRules(ref, before);

      assertThatThrownBy(
              () -> egress.setEgressRules(ref, EgressRules.allow(List.of("not a domain!"))))
          .as("rule: a rule the provider refuses is an IllegalArgumentException")
          .isInstanceOf(IllegalArgumentException.class);
      assertThat(egress.egressRules(ref))
          .as("rule: a refused rule leaves the rules as they were")
          .isEqualTo(before);
    }

    @Test
    @DisplayName("the rules of a machine that is gone are unavailable")
    void goneIsUnavailable() {
      SupportsEgress egress = require(SupportsEgress.class);
      WorkspaceRef gone = destroyedRef();
      assertThatThrownBy(() -> egress.egressRules(gone))
          .as("rule: a ref whose workspace is gone raises unavailable")
          .isInstanceOf(WorkspaceUnavailableException.class);
      assertThatThrownBy(() -> egress.setEgressRules(gone, EgressRules.none()))
          .as("rule: a ref whose workspace is gone raises unavailable")
          .isInstanceOf(WorkspaceUnavailableException.class);
      assertThatThrownBy(() -> egress.egressRules(foreignRef()))
          .as("rule: another provider's ref is an IllegalArgumentException")
          .isInstanceOf(IllegalArgumentException.class);
    }
  }

  // ---- ports -------------------------------------------------------------------------------

  @Nested
  @DisplayName("Ports")
  class Ports {

    @Test
    @DisplayName("a port has one URL and one forward; a port outside 1..65535 is refused")
    void urlsAndForwardsAreStable() {
      SupportsPorts ports = require(SupportsPorts.class);
      WorkspaceRef ref = newMachine().open();

      URI url = ports.url(ref, 8080);
      assertThat(url.isAbsolute()).as("a port's URL is absolute: %s", url).isTrue();
      assertThat(url.getScheme()).as("a port's URL is HTTP: %s", url).isIn("http", "https");
      assertThat(ports.url(ref, 8080)).as("rule: a port's URL is stable").isEqualTo(url);
      assertThat(ports.url(ref, 8081)).as("another port has another URL").isNotEqualTo(url);
      assertThat(ports.portToken(ref)).as("a token or none, never null").isNotNull();

      int hostPort = ports.forwardTcp(ref, 8080);
      assertThat(hostPort).as("a host port").isBetween(1, 65535);
      assertThat(ports.forwardTcp(ref, 8080))
          .as("rule: a port's forward is stable")
          .isEqualTo(hostPort);
      for (int bad : new int[] {0, 65536}) {
        assertThatThrownBy(() -> ports.url(ref, bad))
            .as("rule: a port is from 1 to 65535")
            .isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> ports.forwardTcp(ref, bad))
            .as("rule: a port is from 1 to 65535")
            .isInstanceOf(IllegalArgumentException.class);
      }
    }

    @Test
    @DisplayName("the ports of a machine that is gone are unavailable")
    void goneIsUnavailable() {
      SupportsPorts ports = require(SupportsPorts.class);
      WorkspaceRef gone = destroyedRef();
      assertThatThrownBy(() -> ports.url(gone, 8080))
          .as("rule: a ref whose workspace is gone raises unavailable")
          .isInstanceOf(WorkspaceUnavailableException.class);
      assertThatThrownBy(() -> ports.portToken(gone))
          .as("rule: a ref whose workspace is gone raises unavailable")
          .isInstanceOf(WorkspaceUnavailableException.class);
      assertThatThrownBy(() -> ports.forwardTcp(gone, 8080))
          .as("rule: a ref whose workspace is gone raises unavailable")
          .isInstanceOf(WorkspaceUnavailableException.class);
      assertThatThrownBy(() -> ports.url(foreignRef(), 8080))
          .as("rule: another provider's ref is an IllegalArgumentException")
          .isInstanceOf(IllegalArgumentException.class);
    }
  }
}
