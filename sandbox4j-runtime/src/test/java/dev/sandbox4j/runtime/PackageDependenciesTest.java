package dev.sandbox4j.runtime;

import static com.tngtech.archunit.core.domain.JavaClass.Predicates.belongToAnyOf;
import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.classes;
import static com.tngtech.archunit.library.Architectures.layeredArchitecture;
import static com.tngtech.archunit.library.dependencies.SlicesRuleDefinition.slices;

import com.tngtech.archunit.base.DescribedPredicate;
import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.library.Architectures.LayeredArchitecture;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Issue 14: the runtime's packages depend one way, as docs/design.md draws them. Each layer of
 * {@link #LAYERS} may use only the layers below it: the internal packages, with the API's plain
 * {@link #VALUES} as one layer among them (they use only {@code util} and {@code addr}, and the
 * packages above take and return them). The API's façade ({@code LocalSandbox}, its backend, {@code
 * HostSetup}, {@code ImageRecipe}, {@code ImageInfo}) may use any layer, and no layer uses it. Read
 * from the compiled classes (every reference the compiler kept: types, calls, fields, annotations),
 * not from import lines.
 */
class PackageDependenciesTest {
  private static final String INTERNAL = "dev.sandbox4j.runtime.internal.";
  private static final String VALUES_LAYER = "values";

  /** Bottom first: each may use those before it, never one after it. */
  static final List<String> LAYERS =
      List.of(
          "util",
          "addr",
          VALUES_LAYER,
          "linux",
          "http",
          "egress",
          "ports",
          "registry",
          "image",
          "oci",
          "net",
          "engine",
          "supervisor");

  /** The API package's plain values, which the internals take and return. */
  static final Class<?>[] VALUES = {
    EgressPolicy.class, HostCheck.class, InsufficientDiskException.class, Isolation.class
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
  void eachLayerUsesOnlyTheLayersBelowIt() {
    LayeredArchitecture layers =
        layeredArchitecture()
            .consideringOnlyDependenciesInAnyPackage("dev.sandbox4j.runtime..")
            .layer("facade")
            .definedBy(
                DescribedPredicate.describe(
                    "the API's façade",
                    c ->
                        c.getBaseComponentType().getPackageName().equals("dev.sandbox4j.runtime")
                            && !isValue(c)));
    for (String layer : LAYERS) {
      layers =
          layer.equals(VALUES_LAYER)
              ? layers
                  .layer(layer)
                  .definedBy(DescribedPredicate.describe("the API's values", c -> isValue(c)))
              : layers.layer(layer).definedBy(INTERNAL + layer + "..");
    }
    List<String> below = new ArrayList<>();
    for (String layer : LAYERS) {
      layers =
          below.isEmpty()
              ? layers.whereLayer(layer).mayNotAccessAnyLayer()
              : layers.whereLayer(layer).mayOnlyAccessLayers(below.toArray(String[]::new));
      below.add(layer);
    }
    layers.whereLayer("facade").mayNotBeAccessedByAnyLayer().check(RUNTIME);
  }

  /** A value, a class nested in one, or an array of either. */
  private static boolean isValue(JavaClass c) {
    return belongToAnyOf(VALUES).test(c.getBaseComponentType());
  }

  @Test
  void everyClassOfTheRuntimeBelongsToALayer() {
    classes()
        .should()
        .resideInAnyPackage(
            LAYERS.stream()
                .filter(l -> !l.equals(VALUES_LAYER))
                .map(l -> INTERNAL + l + "..")
                .toArray(String[]::new))
        .orShould()
        .resideInAPackage("dev.sandbox4j.runtime")
        .check(RUNTIME);
  }
}
