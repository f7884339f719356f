package dev.sandbox4j.server;

import jakarta.servlet.http.HttpServletRequest;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.List;
import java.util.Map;

/**
 * E2B's users as Sandbox4j runs them. E2B programs name {@code user} (the default) or {@code root},
 * in {@code Authorization: Basic base64(name + ":")} on each envd call, or in {@code ?username=} on
 * {@code /files}. A Sandbox4j sandbox has one unprivileged user ({@code sandbox}, uid 1000, with a
 * sudo that is root only inside the sandbox): {@code user} (and {@code sandbox}) run as it; {@code
 * root} runs the command under {@code sudo -n -E}. File operations always run as the sandbox user.
 * Any other name is refused, as envd refuses a user that does not exist.
 */
final class E2bUsers {

  private E2bUsers() {}

  /** How a command of an E2B user is run. */
  record User(String name, List<String> wrap) {
    Map<String, String> env() {
      return Map.of("USER", name.equals("root") ? "root" : "user");
    }
  }

  static final User USER = new User("user", List.of());
  static final User ROOT = new User("root", List.of("sudo", "-n", "-E", "--"));

  /** The user an envd RPC names in its {@code Authorization} header; {@code user} without one. */
  static User ofRpc(HttpServletRequest request) {
    String header = request.getHeader("Authorization");
    if (header == null || header.isBlank()) {
      return USER;
    }
    if (!header.regionMatches(true, 0, "Basic ", 0, 6)) {
      throw new E2bConnect.RpcException(
          "unauthenticated", "Authorization must be Basic base64(username:)");
    }
    String decoded;
    try {
      decoded =
          new String(
              Base64.getDecoder().decode(header.substring(6).trim()), StandardCharsets.UTF_8);
    } catch (IllegalArgumentException e) {
      throw new E2bConnect.RpcException("unauthenticated", "Authorization is not base64");
    }
    int colon = decoded.indexOf(':');
    return named(colon < 0 ? decoded : decoded.substring(0, colon));
  }

  /** The user {@code name}, or an {@code unauthenticated} error for one this mapping lacks. */
  static User named(String name) {
    return switch (name == null ? "" : name) {
      case "", "user", "sandbox" -> USER;
      case "root" -> ROOT;
      default ->
          throw new E2bConnect.RpcException(
              "unauthenticated",
              "user '"
                  + Sandboxes.printable(name)
                  + "' does not exist in this sandbox: use 'user' or 'root'");
    };
  }
}
