package dev.sandbox4j.server;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.Workspace;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** A servlet mounted beside the API (as /mcp is) gets key authentication and its tenant. */
class MountTest {

  @TempDir Path data;

  /** Answers with the tenant's name; {@code ?sandbox=ID} runs {@code hostname} there, or 404. */
  static final class TenantServlet extends HttpServlet {
    private static final long serialVersionUID = 1L;

    @Override
    protected void doGet(HttpServletRequest request, HttpServletResponse response)
        throws IOException {
      Tenant tenant = Tenant.of(request);
      if (request.getParameter("async") != null) { // as the MCP transport answers: later, elsewhere
        var async = request.startAsync();
        Thread.ofVirtual()
            .start(
                () -> {
                  try {
                    async
                        .getResponse()
                        .getOutputStream()
                        .write(("async " + tenant.organization()).getBytes(StandardCharsets.UTF_8));
                  } catch (IOException e) {
                    throw new java.io.UncheckedIOException(e);
                  } finally {
                    async.complete();
                  }
                });
        return;
      }
      String id = request.getParameter("sandbox");
      String body = tenant.organization();
      if (request.getParameter("principal") != null) {
        body = request.getUserPrincipal().getName();
      }
      if ("new".equals(id)) {
        Workspace ws = tenant.create(Map.of("via", "mount"));
        body += " created " + ws.open().id();
      } else if (id != null) {
        var ws = tenant.sandbox(id);
        if (ws.isEmpty()) {
          response.setStatus(404);
          return;
        }
        body += " ran " + ws.get().run(Command.argv("echo", "inside")).stdoutText().strip();
      }
      response.getOutputStream().write(body.getBytes(StandardCharsets.UTF_8));
    }
  }

  @Test
  void theMountedServletSeesOnlyItsCallersOrganization() throws Exception {
    TestServer.requireLocalEngine();
    try (TestServer s = new TestServer(data, b -> b.servlet("/tenant/*", new TenantServlet()))) {
      String a = s.key("mount-a");
      String b = s.key("mount-b");
      TestServer.Answer anonymous = s.call(null, "GET", "/tenant/x", null);
      assertThat(anonymous.status()).isEqualTo(401);
      assertThat(anonymous.error().get("code").asText()).isEqualTo("unauthenticated");
      assertThat(s.call(a, "GET", "/tenant/x", null).text()).isEqualTo("mount-a");
      assertThat(s.call(a, "GET", "/tenant/x?async=1", null).text()).isEqualTo("async mount-a");
      // servlets that scope state by principal (MCP sessions) see the organization
      assertThat(s.call(a, "GET", "/tenant/x?principal=1", null).text()).isEqualTo("org:mount-a");
      assertThat(s.call(b, "GET", "/tenant/x?principal=1", null).text()).isEqualTo("org:mount-b");

      String created = s.call(a, "GET", "/tenant/x?sandbox=new", null).text();
      assertThat(created).startsWith("mount-a created ");
      String id = created.substring("mount-a created ".length());
      s.track(id);
      // the sandbox is a's, like one made through the API
      assertThat(
              s.call(a, "GET", "/v1/sandboxes/" + id, null)
                  .json()
                  .get("labels")
                  .get("via")
                  .asText())
          .isEqualTo("mount");
      assertThat(s.call(a, "GET", "/tenant/x?sandbox=" + id, null).text())
          .isEqualTo("mount-a ran inside");
      assertThat(s.call(b, "GET", "/tenant/x?sandbox=" + id, null).status()).isEqualTo(404);
      assertThat(s.logLines).anyMatch(l -> l.contains("\"/tenant/*\"") && l.contains("mount-a"));
    }
  }

  @Test
  void mountsCannotShadowTheApi() {
    var builder = SandboxServer.builder();
    for (String bad : new String[] {"/v1/*", "/", "/metrics", "mcp"}) {
      org.assertj.core.api.Assertions.assertThatThrownBy(
              () -> builder.servlet(bad, new TenantServlet()))
          .isInstanceOf(IllegalArgumentException.class);
    }
  }
}
