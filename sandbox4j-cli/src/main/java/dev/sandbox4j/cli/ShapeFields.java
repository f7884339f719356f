package dev.sandbox4j.cli;

/** How the CLI's server engines set one field of a create's shape on a provider's builder. */
final class ShapeFields {
  private ShapeFields() {}

  /**
   * Runs {@code setter}; what it refuses becomes {@code "name: why"}, the form the server answers a
   * 400 with ({@link dev.sandbox4j.server.ServerEngine#shaped}).
   */
  static void field(String name, Runnable setter) {
    try {
      setter.run();
    } catch (IllegalArgumentException | NullPointerException e) {
      throw new IllegalArgumentException(name + ": " + e.getMessage(), e);
    }
  }

  /** {@link #field} for a field the shape may leave out: sets {@code value} only if given. */
  static <T> void ifSet(String name, T value, java.util.function.Consumer<? super T> setter) {
    if (value != null) {
      field(name, () -> setter.accept(value));
    }
  }
}
