package dev.sandbox4j.remote;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.sandbox4j.workspace.WorkspaceAccessDeniedException;
import dev.sandbox4j.workspace.WorkspaceDirectoryNotEmptyException;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceFileAlreadyExistsException;
import dev.sandbox4j.workspace.WorkspaceFileException;
import dev.sandbox4j.workspace.WorkspaceIsDirectoryException;
import dev.sandbox4j.workspace.WorkspaceNoSuchFileException;
import dev.sandbox4j.workspace.WorkspaceNotDirectoryException;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The client reads every error code the server documents, the way this table says. The server's own
 * test pins docs/server-api.md's table to its {@code ErrorCode}; this one pins the client to the
 * same table without depending on the server's code: a code added, renamed or given another status
 * fails here until the client is told what it means.
 */
class ServerErrorCodesTest {

  private static final ObjectMapper JSON = new ObjectMapper();

  /**
   * What the client makes of each code in an error answer to a file request on sandbox {@code s1}.
   */
  private static final Map<String, Class<? extends RuntimeException>> ANSWERS =
      Map.ofEntries(
          Map.entry("invalid_request", IllegalArgumentException.class),
          Map.entry("unauthenticated", WorkspaceException.class),
          Map.entry("access_denied", WorkspaceAccessDeniedException.class),
          Map.entry("not_found", WorkspaceUnavailableException.class),
          Map.entry("no_such_file", WorkspaceNoSuchFileException.class),
          Map.entry("method_not_allowed", WorkspaceException.class),
          Map.entry("already_exists", WorkspaceFileAlreadyExistsException.class),
          Map.entry("is_directory", WorkspaceIsDirectoryException.class),
          Map.entry("not_directory", WorkspaceNotDirectoryException.class),
          Map.entry("directory_not_empty", WorkspaceDirectoryNotEmptyException.class),
          Map.entry("file_error", WorkspaceFileException.class),
          // answers of the background-command stdin route, which this client never calls (it
          // streams a command's stdin over its exec socket): read as any other failure
          Map.entry("stdin_closed", WorkspaceException.class),
          Map.entry("stdin_busy", WorkspaceException.class),
          Map.entry("too_large", WorkspaceException.class),
          Map.entry("quota_exceeded", WorkspaceException.class),
          Map.entry("rate_limited", WorkspaceException.class),
          Map.entry("internal", WorkspaceException.class),
          Map.entry("not_supported", WorkspaceException.class),
          Map.entry("unavailable", WorkspaceUnavailableException.class),
          Map.entry("insufficient_disk", WorkspaceException.class));

  /** The codes that come only as the last event of an exec, which {@code ExecCall} reads. */
  private static final Map<String, String> EXEC_EVENT_CODES =
      Map.of("timeout", "408", "output_limit", "413");

  /** The documented codes, each with its status, from docs/server-api.md's table. */
  private static Map<String, String> documented() throws Exception {
    String text = Files.readString(Path.of("..", "docs", "server-api.md"));
    Map<String, String> statusOf = new TreeMap<>();
    Matcher row = Pattern.compile("(?m)^\\s*\\| (\\d{3}) \\| ([^|]*) \\|").matcher(text);
    while (row.find()) {
      Matcher code = Pattern.compile("`([a-z_]+)`").matcher(row.group(2));
      while (code.find()) {
        statusOf.put(code.group(1), row.group(1));
      }
    }
    return statusOf;
  }

  @Test
  void everyDocumentedCodeBecomesTheExceptionItMeans() throws Exception {
    Map<String, String> documented = documented();
    Map<String, String> known = new TreeMap<>(EXEC_EVENT_CODES);
    ANSWERS.keySet().forEach(code -> known.put(code, documented.get(code)));
    assertThat(documented.keySet())
        .as("the codes docs/server-api.md lists, against the codes this client reads")
        .isEqualTo(known.keySet());
    EXEC_EVENT_CODES.forEach((code, status) -> assertThat(documented).containsEntry(code, status));

    ServerClient client = new ServerClient(URI.create("http://127.0.0.1:1"), "s4j_unused");
    ServerClient.Target target = ServerClient.Target.file("s1", "/home/sandbox/f");
    ANSWERS.forEach(
        (code, expected) -> {
          ObjectNode error = JSON.createObjectNode().put("code", code).put("message", "m");
          if (WorkspaceFileException.class.isAssignableFrom(expected)) {
            error.put("path", "/home/sandbox/f"); // as the server sends a file error
          }
          int status = Integer.parseInt(documented.get(code));
          assertThat(client.error(status, error, target, null))
              .as(code)
              .isExactlyInstanceOf(expected);
        });
  }

  @Test
  void anAnswerWithoutACodeIsReadByItsStatusAsTheDocumentedCode() throws Exception {
    Map<String, String> documented = documented();
    assertThat(documented)
        .containsEntry("unauthenticated", "401")
        .containsEntry("not_found", "404")
        .containsEntry("unavailable", "503");
    ServerClient client = new ServerClient(URI.create("http://127.0.0.1:1"), "s4j_unused");
    ServerClient.Target target = ServerClient.Target.sandbox("s1");
    assertThat(client.error(404, new byte[0], target, null))
        .isExactlyInstanceOf(WorkspaceUnavailableException.class)
        .hasMessageContaining("is gone");
    assertThat(client.error(503, new byte[0], target, null))
        .isExactlyInstanceOf(WorkspaceUnavailableException.class);
    assertThat(client.error(401, new byte[0], target, null))
        .hasMessageContaining("refused the API key");
  }
}
