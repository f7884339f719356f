package dev.sandbox4j.workspace.conformance;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.lang.reflect.Constructor;
import java.lang.reflect.Executable;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/**
 * A module's public API as text, checked against a dump in the repository ({@code
 * api/public-api.txt} of the module), so every change to the surface shows in review. After an
 * intended change, rerun the module's test with {@code -Dsandbox4j.api.update=true} and commit the
 * new dump. Packages named {@code …internal…} are not API, though their classes are public (other
 * packages of the module use them): their package-info says so, and the dump leaves them out.
 */
public final class PublicApi {

  private static final Path DUMP = Path.of("api/public-api.txt");

  private PublicApi() {}

  /**
   * Fails unless the public types and members of the classes directory (or jar) that holds {@code
   * anchor} match the module's dump; rewrites the dump first when {@code sandbox4j.api.update} is
   * set.
   */
  public static void assertMatchesDump(Class<?> anchor) throws Exception {
    String actual = String.join("\n", dump(anchor)) + "\n";
    if (Boolean.getBoolean("sandbox4j.api.update")) {
      Files.createDirectories(DUMP.getParent());
      Files.writeString(DUMP, actual);
    }
    assertThat(DUMP).as("the API dump %s exists", DUMP.toAbsolutePath()).exists();
    assertThat(actual)
        .as(
            "the public API changed; if intended, rerun with -Dsandbox4j.api.update=true and"
                + " commit %s",
            DUMP)
        .isEqualTo(Files.readString(DUMP));
  }

  private static List<String> dump(Class<?> anchor)
      throws IOException, URISyntaxException, ClassNotFoundException {
    Path classes = Path.of(anchor.getProtectionDomain().getCodeSource().getLocation().toURI());
    List<String> lines = new ArrayList<>();
    try (Stream<Path> files = Files.walk(classes)) {
      for (Path file : files.filter(f -> f.toString().endsWith(".class")).sorted().toList()) {
        String name =
            classes.relativize(file).toString().replace('/', '.').replaceAll("\\.class$", "");
        Class<?> type = Class.forName(name, false, anchor.getClassLoader());
        if (!isVisible(type) || isInternal(type)) {
          continue;
        }
        lines.add(describe(type));
        List<String> members = new ArrayList<>();
        for (Field f : type.getDeclaredFields()) {
          if (isApi(f.getModifiers())) {
            members.add(
                "  "
                    + modifiers(f.getModifiers())
                    + f.getGenericType().getTypeName()
                    + " "
                    + f.getName());
          }
        }
        for (Constructor<?> c : type.getDeclaredConstructors()) {
          if (isApi(c.getModifiers())) {
            members.add("  " + modifiers(c.getModifiers()) + type.getSimpleName() + params(c));
          }
        }
        for (Method m : type.getDeclaredMethods()) {
          if (isApi(m.getModifiers()) && !m.isSynthetic() && !m.isBridge()) {
            members.add(
                "  "
                    + modifiers(m.getModifiers())
                    + (m.isDefault() ? "default " : "")
                    + m.getGenericReturnType().getTypeName()
                    + " "
                    + m.getName()
                    + params(m));
          }
        }
        members.sort(null);
        lines.addAll(members);
      }
    }
    return lines;
  }

  private static boolean isInternal(Class<?> type) {
    return ("." + type.getPackageName() + ".").contains(".internal.");
  }

  private static boolean isVisible(Class<?> type) {
    for (Class<?> t = type; t != null; t = t.getDeclaringClass()) {
      if (!Modifier.isPublic(t.getModifiers()) || t.isAnonymousClass() || t.isSynthetic()) {
        return false;
      }
    }
    return true;
  }

  private static boolean isApi(int modifiers) {
    return Modifier.isPublic(modifiers) || Modifier.isProtected(modifiers);
  }

  private static String describe(Class<?> type) {
    String kind =
        type.isRecord()
            ? "record"
            : type.isEnum() ? "enum" : type.isInterface() ? "interface" : "class";
    int mods =
        type.getModifiers()
            & ~(Modifier.INTERFACE | Modifier.ABSTRACT * (type.isInterface() ? 1 : 0));
    String supers =
        Stream.concat(
                Stream.ofNullable(type.getGenericSuperclass())
                    .filter(
                        s ->
                            !s.equals(Object.class)
                                && !s.getTypeName().startsWith("java.lang.Record")
                                && !s.getTypeName().startsWith("java.lang.Enum")),
                Arrays.stream(type.getGenericInterfaces()))
            .map(t -> t.getTypeName())
            .collect(Collectors.joining(", "));
    String permits =
        type.isSealed()
            ? " permits "
                + Arrays.stream(type.getPermittedSubclasses())
                    .map(Class::getName)
                    .collect(Collectors.joining(", "))
            : "";
    return modifiers(mods)
        + (type.isSealed() ? "sealed " : "")
        + kind
        + " "
        + type.getName()
        + (supers.isEmpty() ? "" : " : " + supers)
        + permits;
  }

  private static String modifiers(int modifiers) {
    String text = Modifier.toString(modifiers & ~Modifier.TRANSIENT & ~Modifier.VOLATILE);
    return text.isEmpty() ? "" : text + " ";
  }

  private static String params(Executable e) {
    return Arrays.stream(e.getGenericParameterTypes())
            .map(t -> t.getTypeName())
            .collect(Collectors.joining(", ", "(", ")"))
        + (e.getGenericExceptionTypes().length == 0
            ? ""
            : Arrays.stream(e.getGenericExceptionTypes())
                .map(t -> t.getTypeName())
                .collect(Collectors.joining(", ", " throws ", "")));
  }
}
