package dev.sandbox4j.server;

import java.nio.file.Path;
import java.time.Instant;
import java.util.List;
import java.util.Objects;
import java.util.regex.Pattern;

/**
 * The images a server's data directory publishes to every organization: what a create's {@code
 * image} may name. Any other image on the host, including another organization's snapshot, is no
 * organization's: naming it is the same 404 as naming one that does not exist.
 *
 * <pre>{@code
 * try (ServerImages images = ServerImages.open(dataDir)) {
 *   images.publish("python");
 * }
 * }</pre>
 *
 * <p>A new data directory publishes {@code default} (the engine's default image); unpublishing it
 * refuses creates that name no image or snapshot. Changes take effect on the server's next request:
 * every create looks the image up. Works while a server runs on the same directory (SQLite in WAL
 * mode). Thread-safe.
 */
public final class ServerImages implements AutoCloseable {

  private static final Pattern IMAGE_NAME = Pattern.compile("[a-z0-9][a-z0-9._-]{0,62}");

  private final Database db;

  private ServerImages(Database db) {
    this.db = db;
  }

  /** Opens (creating, migrating) the database of data directory {@code dataDirectory}. */
  public static ServerImages open(Path dataDirectory) {
    return new ServerImages(Database.open(Objects.requireNonNull(dataDirectory, "dataDirectory")));
  }

  /**
   * Publishes image {@code name} to every organization. It need not exist yet: a create that names
   * it is a 404 until it does.
   *
   * @return whether it was not published before
   * @throws IllegalArgumentException if the name is not an image name (1 to 63 of a-z, 0-9, '.',
   *     '_', '-', starting with a letter or digit)
   */
  public boolean publish(String name) {
    return db.publishImage(checkName(name), Instant.now().toString());
  }

  /**
   * Unpublishes image {@code name}: from the next request on, no organization can create a sandbox
   * from it. Sandboxes already made from it keep running.
   *
   * @return whether it was published
   * @throws IllegalArgumentException if the name is not an image name
   */
  public boolean unpublish(String name) {
    return db.unpublishImage(checkName(name));
  }

  /** The published image names, sorted. */
  public List<String> list() {
    return db.publishedImages().stream().map(Database.PublishedRow::name).toList();
  }

  static String checkName(String name) {
    if (name == null || !IMAGE_NAME.matcher(name).matches() || name.equals("layers")) {
      throw new IllegalArgumentException(
          "invalid image name '"
              + Sandboxes.printable(name)
              + "': 1 to 63 of a-z, 0-9, '.', '_', '-', starting with a letter or digit");
    }
    return name;
  }

  @Override
  public void close() {
    db.close();
  }
}
