package dev.sandbox4j.runtime;

import static com.tngtech.archunit.base.DescribedPredicate.not;
import static com.tngtech.archunit.core.domain.JavaClass.Predicates.belongToAnyOf;
import static com.tngtech.archunit.core.domain.JavaClass.Predicates.resideInAPackage;
import static com.tngtech.archunit.library.Architectures.layeredArchitecture;
import static com.tngtech.archunit.library.dependencies.SlicesRuleDefinition.slices;

import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.library.Architectures.LayeredArchitecture;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Issue 14: the runtime's packages depend one way, as docs/design.md draws them. Each internal
 * package may use only the packages below it in {@link #LAYERS} and the API's {@link #VALUES}; the
 * values use nothing internal; the API's façade ({@code LocalSandbox}, its backend, {@code
 * HostSetup}) may use anything. Read from the compiled classes (every reference the compiler kept:
 * types, calls, fields, annotations), not from import lines.
 */
class PackageDependenciesTest {
  private static final String INTERNAL = "dev.sandbox4j.runtime.internal.";

  /** The internal packages, bottom first: each may use those before it, never one after it. */
  static final List<String> LAYERS =
      List.of(
          "util",
          "linux",
          "http",
          "egress",
          "image",
          "oci",
          "net",
          "engine",
          "ports",
          "supervisor");

  /**
   * The API package's plain values, which the internals take and return. They sit below every
   * internal package (they use none), so that no cycle runs through the API package.
   */
  static final Class<?>[] VALUES = {
    EgressPolicy.class, HostCheck.class, ImageRecipe.class, InsufficientDiskException.class
  };

  private static final JavaClasses RUNTIME =
      new ClassFileImporter()
          .withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS)
          .importPackages("dev.sandbox4j.runtime");

  @Test
  void theInternalPackagesFormNoCycle() {
    slices().matching(INTERNAL + "(*)..").should().beFreeOfCycles().check(RUNTIME);
  }

  @Test
  void eachPackageUsesOnlyThePackagesBelowIt() {
    LayeredArchitecture layers =
        layeredArchitecture()
            .consideringOnlyDependenciesInAnyPackage("dev.sandbox4j.runtime..")
            .layer("values")
            .definedBy(belongToAnyOf(VALUES))
            .layer("facade")
            .definedBy(resideInAPackage("dev.sandbox4j.runtime").and(not(belongToAnyOf(VALUES))));
    for (String layer : LAYERS) {
      layers = layers.layer(layer).definedBy(INTERNAL + layer + "..");
    }
    layers = layers.whereLayer("values").mayOnlyAccessLayers("values");
    List<String> below = new ArrayList<>(List.of("values"));
    for (String layer : LAYERS) {
      layers = layers.whereLayer(layer).mayOnlyAccessLayers(below.toArray(String[]::new));
      below.add(layer);
    }
    layers.check(RUNTIME);
  }

  @Test
  void everyClassOfTheRuntimeBelongsToALayer() {
    com.tngtech.archunit.lang.syntax.ArchRuleDefinition.classes()
        .should()
        .resideInAnyPackage(LAYERS.stream().map(l -> INTERNAL + l + "..").toArray(String[]::new))
        .orShould()
        .resideInAPackage("dev.sandbox4j.runtime")
        .check(RUNTIME);
  }
}
