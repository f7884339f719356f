package com.example.workspace;

import dev.sandbox4j.runtime.EgressPolicy;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.util.List;

/** The user guide's egress policies: what a sandbox may reach, and the headers the proxy adds. */
final class Egress {
  private Egress() {}

  /** The guide's policies, as values: no sandbox needed. */
  static List<EgressPolicy> policies(String apiKey, String key) {
    // [egress-policies]
    EgressPolicy nothing = EgressPolicy.none();
    EgressPolicy publicInternet = EgressPolicy.all(); // nothing private (the default)
    EgressPolicy allowlist =
        EgressPolicy.allow("api.example.com", "*.pkg.dev", "198.51.100.0/24")
            .withHeader("api.example.com", "Authorization", "Bearer " + apiKey) // HTTPS to 443
            .withInterceptTls(true); // the proxy sees inside HTTPS (opt-in, below)
    EgressPolicy internal =
        EgressPolicy.allow("api.internal.example")
            .withHeader("api.internal.example", "X-Key", key, List.of(8080)); // plain HTTP on 8080
    // [/egress-policies]
    return List.of(nothing, publicInternet, allowlist, internal);
  }

  /** A sandbox's policy set when it is made and changed while it runs, as its toString shows it. */
  static String networking(String apiKey) {
    // [networking]
    LocalSandbox sandboxes =
        LocalSandbox.builder()
            .egress(
                EgressPolicy.allow("api.example.com", "*.pkg.dev", "198.51.100.0/24")
                    .withHeader("api.example.com", "Authorization", "Bearer " + apiKey))
            .build();
    WorkspaceRef ref = Workspace.of(sandboxes.newBackend()).open();
    String before = sandboxes.egress(ref).toString();
    sandboxes.setEgress(ref, EgressPolicy.none()); // new connections follow at once
    sandboxes.egress(ref); // the policy now (toString hides secrets)
    // [/networking]
    String after = sandboxes.egress(ref).toString();
    sandboxes.destroy(ref);
    return before + "\n" + after;
  }
}
