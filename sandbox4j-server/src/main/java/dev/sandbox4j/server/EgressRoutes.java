package dev.sandbox4j.server;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.machine.EgressRules;
import dev.sandbox4j.workspace.machine.SupportsEgress;
import java.io.IOException;
import java.util.List;
import java.util.Locale;

/**
 * {@code GET} and {@code PUT /v1/sandboxes/{id}/egress}: an organization reads and replaces the
 * egress rules of one of its own sandboxes (docs/server-api.md), where the server's provider has
 * {@link SupportsEgress} (a 501 {@code not_supported} elsewhere). The provider validates the rules
 * (the local engine as its {@code EgressPolicy} does for a local caller); a rule it refuses is a
 * 400 naming it.
 */
final class EgressRoutes {
  private final Sandboxes sandboxes;

  EgressRoutes(Sandboxes sandboxes) {
    this.sandboxes = sandboxes;
  }

  /** The body of a PUT, and of the answers: {@link EgressRules} in JSON. */
  record Body(String mode, List<String> allow, List<Header> headers, Boolean interceptTls) {}

  /** One header rule of {@link Body}. */
  record Header(String domain, String name, String value, List<Integer> ports) {}

  void get(Call c) throws IOException {
    c.onlyQuery(java.util.Set.of());
    WorkspaceRef ref = ref(c);
    c.json(200, json(egress().egressRules(ref)));
  }

  private SupportsEgress egress() {
    return sandboxes.capability(SupportsEgress.class, "limit the egress of sandboxes");
  }

  void put(Call c) throws IOException {
    c.onlyQuery(java.util.Set.of());
    // the body's shape first, as on every route (a duplicate key, an unknown field: 400), then
    // ownership (another organization's sandbox is a 404), then what the rules say
    Body body = c.body(Body.class, null);
    WorkspaceRef ref = ref(c);
    SupportsEgress egress = egress();
    EgressRules rules;
    try {
      rules = rules(body);
    } catch (IllegalArgumentException | NullPointerException e) {
      throw ApiException.invalid("egress", e.getMessage());
    }
    try {
      egress.setEgressRules(
          ref, rules); // a rule the provider refuses leaves the rules as they were
    } catch (IllegalArgumentException e) {
      throw ApiException.invalid("egress", e.getMessage());
    }
    c.json(200, json(egress.egressRules(ref)));
  }

  private WorkspaceRef ref(Call c) {
    return new WorkspaceRef(
        sandboxes.provider().name(), sandboxes.owned(c.organization, c.param("id")).id());
  }

  private static EgressRules rules(Body b) {
    if (b.mode() == null) {
      throw ApiException.invalid("mode", "mode is required: none, all or allowlist");
    }
    EgressRules.Mode mode;
    try {
      mode = EgressRules.Mode.valueOf(b.mode().toUpperCase(Locale.ROOT));
    } catch (IllegalArgumentException e) {
      throw ApiException.invalid(
          "mode",
          "mode must be none, all or allowlist, was '" + Sandboxes.printable(b.mode()) + "'");
    }
    List<EgressRules.Header> headers =
        b.headers() == null
            ? List.of()
            : b.headers().stream()
                .map(
                    h -> {
                      if (h == null) {
                        throw ApiException.invalid("headers", "a header rule is null");
                      }
                      return new EgressRules.Header(h.domain(), h.name(), h.value(), h.ports());
                    })
                .toList();
    return new EgressRules(mode, b.allow(), headers, Boolean.TRUE.equals(b.interceptTls()));
  }

  private static ObjectNode json(EgressRules rules) {
    ObjectNode o = Json.object();
    o.put("mode", rules.mode().name().toLowerCase(Locale.ROOT));
    ArrayNode allow = o.putArray("allow");
    rules.allow().forEach(allow::add);
    ArrayNode headers = o.putArray("headers");
    for (EgressRules.Header h : rules.headers()) {
      ObjectNode rule =
          headers
              .addObject()
              .put("domain", h.domain())
              .put("name", h.name())
              .put("value", h.value());
      h.ports().forEach(rule.putArray("ports")::add);
    }
    o.put("interceptTls", rules.interceptTls());
    return o;
  }
}
