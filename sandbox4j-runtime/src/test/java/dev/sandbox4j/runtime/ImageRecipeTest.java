package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.runtime.internal.engine.Engine;
import dev.sandbox4j.runtime.internal.engine.Overlay;
import dev.sandbox4j.runtime.internal.image.Image;
import dev.sandbox4j.runtime.internal.image.ImageBuildException;
import dev.sandbox4j.runtime.internal.image.ImageStore;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Building images from recipes on the default image (hard-linked from the shared state directory
 * into a private one, so these tests never touch other tests' images or sandboxes).
 */
class ImageRecipeTest {
  private static final String MARKER_STEP = "echo built > /opt/marker && chown 1000 /opt/marker";

  @TempDir Path temp;

  private Path home;
  private LocalSandbox sandboxes;
  private ImageStore store;
  private final List<String> progress = new CopyOnWriteArrayList<>();

  @BeforeEach
  void setUp() throws Exception {
    Prerequisites.requireLocalEngine();
    home = TestImages.privateHome(temp);
    TestImages.seedDefault(home);
    sandboxes = LocalSandbox.builder().home(home).progress(progress::add).build();
    store = sandboxes.engine().images();
  }

  /** Destroys what a failed test left and deletes the store here (its absolute links too). */
  @AfterEach
  void tearDown() throws IOException {
    TestImages.destroyAllAndDelete(sandboxes, home);
  }

  @Test
  void stepsAreCachedByContentAndOnlyChangedStepsRunAgain() throws Exception {
    Path data = temp.resolve("data.txt");
    Files.writeString(data, "version 1\n");
    ImageRecipe recipe = ImageRecipe.from("default").run(MARKER_STEP).copy(data, "/opt/data.txt");

    ImageInfo built = recipe.build(sandboxes, "recipe");

    assertThat(progress)
        .contains(
            "step 1/2 RUN " + MARKER_STEP + ": running",
            "step 2/2 COPY " + data + " /opt/data.txt: running");
    assertThat(built.description()).contains("recipe from image default", "RUN echo built");
    Image image = store.find("recipe").orElseThrow();
    Image base = store.find("default").orElseThrow();
    assertThat(image.layerIds()).hasSize(3).startsWith(base.layerIds().getFirst());
    // A step's layer holds what it changed, and not the sandbox's own /etc/hostname and hosts.
    Path runLayer = image.layers().get(1);
    assertThat(runLayer.resolve("opt/marker")).hasContent("built");
    assertThat((Integer) Files.getAttribute(runLayer.resolve("opt/marker"), "unix:uid"))
        .isEqualTo(101_000);
    assertThat(runLayer.resolve("etc")).doesNotExist();
    assertThat(image.layers().get(2).resolve("opt/data.txt")).hasContent("version 1\n");
    assertThat(
            runIn("recipe", "cat /opt/marker /opt/data.txt; stat -c %U /opt/marker /opt/data.txt"))
        .isEqualTo("built\nversion 1\nsandbox\nroot\n");

    // Built again: every step cached, no sandbox started, the same layers.
    progress.clear();
    long start = System.nanoTime();
    recipe.build(sandboxes, "recipe");
    long millis = (System.nanoTime() - start) / 1_000_000;
    assertThat(progress).anyMatch(l -> l.startsWith("step 1/2 ") && l.endsWith(": cached"));
    assertThat(progress).anyMatch(l -> l.startsWith("step 2/2 ") && l.endsWith(": cached"));
    assertThat(progress).noneMatch(l -> l.endsWith(": running") || l.startsWith("  | "));
    assertThat(store.find("recipe").orElseThrow().layerIds()).isEqualTo(image.layerIds());
    System.out.println("fully cached rebuild: " + millis + " ms");

    // The copied file changed: the run step stays cached, the copy runs again.
    Files.writeString(data, "version 2\n");
    progress.clear();
    recipe.build(sandboxes, "recipe");
    assertThat(progress).anyMatch(l -> l.startsWith("step 1/2 ") && l.endsWith(": cached"));
    assertThat(progress).anyMatch(l -> l.startsWith("step 2/2 ") && l.endsWith(": running"));
    Image rebuilt = store.find("recipe").orElseThrow();
    assertThat(rebuilt.layerIds().subList(0, 2)).isEqualTo(image.layerIds().subList(0, 2));
    assertThat(rebuilt.layerIds().get(2)).isNotEqualTo(image.layerIds().get(2));
    assertThat(image.layers().get(2)).as("the old copy layer, used by nothing").doesNotExist();
    assertThat(runIn("recipe", "cat /opt/data.txt")).isEqualTo("version 2\n");
    assertThat(sandboxes.list()).as("no step sandbox left").isEmpty();
  }

  @Test
  void aFailingStepFailsTheBuildWithItsExitCodeAndOutputAndPublishesNothing() {
    ImageRecipe recipe =
        ImageRecipe.from("default")
            .run("echo first > /opt/first")
            .run("echo oops; echo bad >&2; exit 3");

    assertThatThrownBy(() -> recipe.build(sandboxes, "broken"))
        .isInstanceOf(ImageBuildException.class)
        .hasMessageContaining("step 2/2 RUN echo oops")
        .hasMessageContaining("failed with exit code 3")
        .hasMessageContaining("oops")
        .hasMessageContaining("bad");

    assertThat(store.find("broken")).isEmpty();
    assertThat(sandboxes.list()).as("no step sandbox left").isEmpty();
    assertThat(progress).contains("  | oops");
    // The first step succeeded: its layer is cached for the next attempt, until gc.
    progress.clear();
    assertThatThrownBy(() -> recipe.build(sandboxes, "broken"))
        .isInstanceOf(ImageBuildException.class);
    assertThat(progress).anyMatch(l -> l.startsWith("step 1/2 ") && l.endsWith(": cached"));
    assertThat(sandboxes.gc()).anyMatch(l -> l.startsWith("unused image layer "));
  }

  @Test
  void aSandboxKeepsItsLayersWhenItsImageIsRemovedUntilItIsDestroyed() throws Exception {
    ImageRecipe.from("default").run(MARKER_STEP).build(sandboxes, "doomed");
    Image image = store.find("doomed").orElseThrow();
    LocalSandbox onDoomed = LocalSandbox.builder().home(home).image("doomed").build();
    Workspace ws = Workspace.of(onDoomed.newBackend());
    WorkspaceRef ref = ws.open();
    try {
      store.remove("doomed");
      assertThat(store.find("doomed")).isEmpty();
      assertThat(sandboxes.gc()).noneMatch(l -> l.startsWith("unused image layer "));
      assertThat(image.layers().get(1)).as("the step layer the sandbox runs on").isDirectory();
      assertThat(run(ws, "cat /opt/marker")).isEqualTo("built\n");

      // Its container stops (as after a reboot): attaching starts it on its recorded layers.
      Engine engine = sandboxes.engine();
      engine.runtime().delete(ref.id());
      Overlay.unmount(home.resolve("sandboxes").resolve(ref.id()).resolve("rootfs"));
      Workspace attached = Workspace.of(onDoomed.backend(ref).orElseThrow());
      assertThat(run(attached, "cat /opt/marker")).isEqualTo("built\n");
    } finally {
      onDoomed.destroy(ref);
    }
    assertThat(sandboxes.gc())
        .contains("unused image layer " + image.layerIds().get(1).substring(0, 12));
    assertThat(image.layers().get(1)).doesNotExist();
    assertThat(image.layers().getFirst()).as("still the default image's").isDirectory();
  }

  @Test
  void aRecipeCanStartFromAnArchive() throws Exception {
    TestImages.requireBusybox();
    Path rootfs = TestImages.busyboxRootfs(temp.resolve("rootfs"));
    Path archive = TestImages.tar(rootfs, temp.resolve("bb.tar.zst"), "--zstd");
    Path tree = Files.createDirectories(temp.resolve("tree/sub"));
    Files.writeString(tree.resolve("script.sh"), "#!/bin/sh\necho hello from the tree\n");
    Files.setAttribute(tree.resolve("script.sh"), "unix:mode", 0755);

    ImageRecipe.fromArchive(archive)
        .copy(tree.getParent(), "/opt/tree", 1000, 1000)
        .run("rm /bin/vi && mkdir /etc/app")
        .build(sandboxes, "bb-recipe");

    assertThat(
            runIn(
                "bb-recipe",
                "/opt/tree/sub/script.sh; stat -c %u /opt/tree/sub/script.sh; test -e /bin/vi || echo no-vi; ls -d /etc/app"))
        .isEqualTo("hello from the tree\n1000\nno-vi\n/etc/app\n");
  }

  private String runIn(String image, String script) {
    LocalSandbox onImage = LocalSandbox.builder().home(home).image(image).build();
    Workspace ws = Workspace.of(onImage.newBackend());
    try {
      return run(ws, script);
    } finally {
      ws.ref().ifPresent(onImage::destroy);
    }
  }

  private static String run(Workspace ws, String script) {
    CommandResult r = ws.run(Command.shell(script));
    assertThat(r.exitCode()).as(r.stderrText()).isZero();
    return r.stdoutText();
  }
}
