package dev.sandbox4j.server;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.sandbox4j.workspace.DirectoryEntry;
import dev.sandbox4j.workspace.FileStat;
import dev.sandbox4j.workspace.FileType;
import dev.sandbox4j.workspace.Workspace;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import jakarta.servlet.http.Part;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.zip.GZIPInputStream;

/**
 * The E2B-compatible API, mounted at {@code /e2b/*} (docs/e2b.md): E2B's control plane at {@code
 * /e2b} ({@code E2B_API_URL}), authenticated by a Sandbox4j API key in {@code X-API-Key}, and envd
 * at {@code /e2b/envd} ({@code E2B_SANDBOX_URL}), where every call names its sandbox in {@code
 * E2b-Sandbox-Id} and proves access with the sandbox's envd token in {@code X-Access-Token} ({@link
 * E2bTokens}). Logged and counted like the rest of the API.
 */
final class E2bServlet extends HttpServlet {

  private static final long serialVersionUID = 1L;
  static final String PATH = "/e2b/*";
  static final String SIGNED_FILES = "/files";

  private final transient Sandboxes sandboxes;
  private final transient Database db;
  private final transient Metrics metrics;
  private final transient RequestLog log;
  private final transient E2bTokens tokens;
  private final transient E2bProcesses processes = new E2bProcesses();
  private final transient E2bControlPlane control;
  private final transient E2bWatch watch;

  E2bServlet(Sandboxes sandboxes, Database db, Metrics metrics, RequestLog log, E2bTokens tokens) {
    this.sandboxes = sandboxes;
    this.db = db;
    this.metrics = metrics;
    this.log = log;
    this.tokens = tokens;
    this.control = new E2bControlPlane(sandboxes, tokens, processes);
    this.watch = new E2bWatch();
  }

  @Override
  public void destroy() {
    control.close();
  }

  @Override
  protected void service(HttpServletRequest request, HttpServletResponse response)
      throws IOException {
    long start = System.nanoTime();
    String info = request.getPathInfo() == null ? "/" : request.getPathInfo();
    // /files at the root: the SDK's signed file URLs (uploadUrl, downloadUrl) resolve "/files"
    // against E2B_SANDBOX_URL, dropping its path
    boolean signedFiles = request.getServletPath().equals(SIGNED_FILES);
    List<String> path =
        signedFiles ? List.of("envd", "files") : List.of(info.substring(1).split("/", -1));
    boolean envd = path.getFirst().equals("envd");
    String template = envd ? "/e2b/envd/" + (path.size() > 1 ? path.get(1) : "") : "/e2b/control";
    Organization org = null;
    String sandboxId = envd ? request.getHeader("E2b-Sandbox-Id") : null;
    try {
      if (envd) {
        org = envd(path.subList(1, path.size()), sandboxId, request, response);
      } else {
        org = organizationOfApiKey(request);
        control.handle(org, path, request, response);
      }
    } catch (Exception e) {
      failed(envd && path.size() > 1 && path.get(1).contains("."), e, response);
    } finally {
      metrics.request(request.getMethod(), template, response.getStatus());
      log.request(
          request.getMethod(),
          template,
          org == null ? null : org.name(),
          sandboxId,
          response.getStatus(),
          (System.nanoTime() - start) / 1_000_000);
    }
  }

  private Organization organizationOfApiKey(HttpServletRequest request) {
    String key = request.getHeader("X-API-Key");
    if (key == null || key.isBlank()) {
      throw new ApiException(
          ErrorCode.UNAUTHENTICATED,
          "send a Sandbox4j API key in X-API-Key (E2B_API_KEY)",
          null,
          null,
          null);
    }
    key = key.trim();
    Optional<Organization> org =
        key.startsWith(ServerKeys.KEY_PREFIX) && key.length() < 200
            ? db.organizationOfKey(ServerKeys.hash(key))
            : Optional.empty();
    return org.orElseThrow(
        () ->
            new ApiException(
                ErrorCode.UNAUTHENTICATED, "unknown or revoked API key", null, null, null));
  }

  /** Writes an error as the caller expects it: Connect's for an RPC, E2B's JSON otherwise. */
  private void failed(boolean rpc, Exception e, HttpServletResponse response) throws IOException {
    if (response.isCommitted()) {
      // a stream under way: dropping it is the only signal left (the SDK then probes /health)
      throw new IOException("failed after the answer started: " + e.getMessage(), e);
    }
    response.reset();
    if (rpc) {
      E2bConnect.RpcException r = E2bConnect.map(e);
      E2bConnect.unaryError(response, r);
      return;
    }
    int status;
    String message;
    if (e instanceof E2bControlPlane.E2bError x) {
      status = x.status;
      message = x.getMessage();
    } else if (e instanceof E2bConnect.RpcException r) {
      status = E2bConnect.status(r.code);
      message = r.getMessage();
    } else {
      ApiException a = ApiServlet.map(e);
      metrics.error(a.code);
      status = a.status;
      message = a.getMessage();
      if (a.retryAfterSeconds != null) {
        response.setHeader("Retry-After", Long.toString(a.retryAfterSeconds));
      }
    }
    E2bControlPlane.json(
        response, status, Json.object().put("code", status).put("message", message));
  }

  // ---- envd ----------------------------------------------------------------------------------

  private Organization envd(
      List<String> path, String sandboxId, HttpServletRequest request, HttpServletResponse response)
      throws IOException {
    String first = path.isEmpty() ? "" : path.getFirst();
    if (first.equals("files")
        && path.size() == 1
        && request.getHeader("X-Access-Token") == null
        && request.getParameter("signature") != null) {
      Database.SandboxRow signed = signedSandbox(sandboxId, request);
      Organization org =
          db.organization(signed.organization())
              .orElseThrow(() -> ApiException.notFound("no sandbox '" + signed.id() + "'"));
      if (control.paused.contains(signed.id())) {
        throw new E2bControlPlane.E2bError(
            502, "sandbox '" + signed.id() + "' is paused: connect to resume it");
      }
      files(sandboxes.workspace(org, signed.id()), request, response);
      return org;
    }
    if (sandboxId == null || !Sandboxes.ID.matcher(sandboxId).matches()) {
      throw new E2bControlPlane.E2bError(400, "send the sandbox id in the E2b-Sandbox-Id header");
    }
    Optional<Database.SandboxRow> row = db.sandboxOfAnyOrganization(sandboxId);
    if (first.equals("health") && path.size() == 1) {
      // envd's health as the SDK reads it: 204 running; 502 (what E2B's proxy answers for a
      // sandbox that is not running) when killed, paused or unknown
      boolean up =
          row.isPresent()
              && !control.paused.contains(sandboxId)
              && sandboxes.info(sandboxId).map(i -> "running".equals(i.state())).orElse(false);
      response.setStatus(up ? 204 : 502);
      return null;
    }
    long orgId = tokens.organizationOf(request.getHeader("X-Access-Token"), sandboxId);
    if (orgId >= 0 && row.isEmpty()) {
      // the token was given for this sandbox, which is gone (killed, or its timeout ran out): what
      // E2B's proxy answers for a sandbox that no longer runs, which the SDK reports as such
      throw new E2bControlPlane.E2bError(502, "sandbox '" + sandboxId + "' is not running");
    }
    if (row.isEmpty() || orgId < 0 || row.get().organization() != orgId) {
      // a wrong token and an unknown sandbox look the same: neither says whether the other exists
      throw new E2bConnect.RpcException(
          "unauthenticated",
          "invalid access token for sandbox '" + sandboxId + "', or no such sandbox");
    }
    Organization org =
        db.organization(orgId)
            .orElseThrow(() -> ApiException.notFound("no sandbox '" + sandboxId + "'"));
    if (control.paused.contains(sandboxId)) {
      throw new E2bControlPlane.E2bError(
          502, "sandbox '" + sandboxId + "' is paused: connect to resume it");
    }
    Workspace ws = sandboxes.workspace(org, sandboxId);
    if (path.size() == 1 && first.equals("files")) {
      files(ws, request, response);
    } else if (path.size() == 1 && first.equals("envs")) {
      ObjectNode envs = Json.object();
      Sandboxes.env(sandboxes.owned(org, sandboxId)).forEach(envs::put);
      E2bControlPlane.json(response, 200, envs);
    } else if (path.size() == 2 && first.equals("process.Process")) {
      requirePost(request);
      processes.handle(path.get(1), ws, sandboxId, E2bUsers.ofRpc(request), request, response);
    } else if (path.size() == 2 && first.equals("filesystem.Filesystem")) {
      requirePost(request);
      E2bUsers.ofRpc(request);
      filesystem(path.get(1), ws, request, response);
    } else {
      throw ApiException.notFound("no envd route /" + Sandboxes.printable(String.join("/", path)));
    }
    return org;
  }

  private static void files(Workspace ws, HttpServletRequest request, HttpServletResponse response)
      throws IOException {
    switch (request.getMethod()) {
      case "GET" -> download(ws, request, response);
      case "POST" -> upload(ws, request, response);
      default ->
          throw new E2bControlPlane.E2bError(
              405, request.getMethod() + " is not allowed on /files");
    }
  }

  /**
   * The sandbox a signed file URL was made for, as envd checks it: {@code v1_} and the unpadded
   * base64 of SHA-256 over {@code path:operation:username:accessToken[:expiration]}, operation
   * {@code read} for a GET and {@code write} for a POST, refused after {@code signature_expiration}
   * (Unix seconds). The URL names no sandbox when {@code E2B_SANDBOX_URL} is set, so without {@code
   * E2b-Sandbox-Id} every sandbox's token is tried: a cost linear in the number of sandboxes, one
   * hash each.
   */
  private Database.SandboxRow signedSandbox(String sandboxId, HttpServletRequest request) {
    String signature = request.getParameter("signature");
    String expiration = request.getParameter("signature_expiration");
    if (expiration != null) {
      long until;
      try {
        until = Long.parseLong(expiration);
      } catch (NumberFormatException e) {
        throw new E2bControlPlane.E2bError(400, "signature_expiration must be Unix seconds");
      }
      if (until < java.time.Instant.now().getEpochSecond()) {
        throw new E2bControlPlane.E2bError(401, "the file URL's signature has expired");
      }
    }
    String operation =
        switch (request.getMethod()) {
          case "GET" -> "read";
          case "POST" -> "write";
          default ->
              throw new E2bControlPlane.E2bError(
                  405, request.getMethod() + " is not allowed on /files");
        };
    String path = request.getParameter("path") == null ? "" : request.getParameter("path");
    String user = request.getParameter("username") == null ? "" : request.getParameter("username");
    byte[] given = signature.getBytes(java.nio.charset.StandardCharsets.UTF_8);
    List<Database.SandboxRow> candidates =
        sandboxId != null
            ? db.sandboxOfAnyOrganization(sandboxId).stream().toList()
            : db.allSandboxes();
    for (Database.SandboxRow row : candidates) {
      String raw =
          path
              + ":"
              + operation
              + ":"
              + user
              + ":"
              + tokens.token(row.organization(), row.id())
              + (expiration == null ? "" : ":" + expiration);
      if (java.security.MessageDigest.isEqual(
          given, signature(raw).getBytes(java.nio.charset.StandardCharsets.UTF_8))) {
        return row;
      }
    }
    throw new E2bControlPlane.E2bError(401, "invalid file URL signature");
  }

  private static String signature(String raw) {
    try {
      byte[] hash =
          java.security.MessageDigest.getInstance("SHA-256")
              .digest(raw.getBytes(java.nio.charset.StandardCharsets.UTF_8));
      return "v1_" + java.util.Base64.getEncoder().withoutPadding().encodeToString(hash);
    } catch (java.security.NoSuchAlgorithmException e) {
      throw new IllegalStateException("SHA-256 is missing from the JDK", e);
    }
  }

  private static void requirePost(HttpServletRequest request) {
    if (!request.getMethod().equals("POST")) {
      throw new E2bConnect.RpcException("unimplemented", "Connect calls are POSTs");
    }
  }

  private static String filePath(Workspace ws, HttpServletRequest request, String fallback) {
    String path = request.getParameter("path");
    if (path == null || path.isEmpty()) {
      path = fallback;
    }
    if (path == null || path.isEmpty()) {
      throw ApiException.invalid("path", "give the file's path: ?path=...");
    }
    E2bUsers.named(request.getParameter("username"));
    return ws.resolve(Call.checkPath("path", path));
  }

  private static void download(
      Workspace ws, HttpServletRequest request, HttpServletResponse response) throws IOException {
    String path = filePath(ws, request, null);
    FileStat stat = ws.stat(path);
    if (stat.isDirectory()) {
      throw ApiException.invalid("path", "path '" + path + "' is a directory");
    }
    response.setStatus(200);
    response.setContentType("application/octet-stream");
    response.setContentLengthLong(stat.size());
    try (InputStream in = ws.openRead(path)) {
      OutputStream out = response.getOutputStream();
      in.transferTo(out);
    }
  }

  /**
   * Where multipart uploads spill to before they are written into a sandbox: {@code
   * <data>/e2b-uploads}, emptied here of what a server that died left (the data directory is
   * owner-only, so nobody else can read what a tenant uploads).
   */
  static Path uploadsDirectory(Path dataDirectory) {
    Path dir = dataDirectory.resolve("e2b-uploads");
    try {
      if (Files.isDirectory(dir, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
        try (java.util.stream.Stream<Path> left = Files.list(dir)) {
          for (Path f : left.toList()) {
            Files.deleteIfExists(f);
          }
        }
      } else {
        Files.createDirectory(dir);
      }
      return dir;
    } catch (IOException e) {
      throw new java.io.UncheckedIOException("cannot prepare " + dir + ": " + e.getMessage(), e);
    }
  }

  private static void upload(Workspace ws, HttpServletRequest request, HttpServletResponse response)
      throws IOException {
    ArrayNode written = Json.MAPPER.createArrayNode();
    String type =
        request.getContentType() == null
            ? ""
            : request.getContentType().toLowerCase(java.util.Locale.ROOT);
    if (type.startsWith("multipart/form-data")) {
      List<Part> files = new ArrayList<>();
      try {
        for (Part p : request.getParts()) {
          if (p.getName().equals("file")) {
            files.add(p);
          }
        }
      } catch (jakarta.servlet.ServletException | IllegalStateException e) {
        throw ApiException.invalid("file", "the multipart body cannot be read: " + e.getMessage());
      }
      if (files.isEmpty()) {
        throw ApiException.invalid("file", "the multipart body has no part named 'file'");
      }
      E2bUsers.named(request.getParameter("username"));
      String query = request.getParameter("path");
      for (Part p : files) {
        // one file: ?path=, else its part's file name; several: each part's file name
        String name =
            files.size() == 1 && query != null && !query.isEmpty()
                ? query
                : p.getSubmittedFileName();
        if (name == null || name.isEmpty()) {
          throw ApiException.invalid(
              "path", "give the file's path: ?path=... or the part's file name");
        }
        String path = ws.resolve(Call.checkPath("path", name));
        try (InputStream in = p.getInputStream()) {
          write(ws, path, in);
        }
        written.add(entry(path));
      }
    } else {
      String path = filePath(ws, request, null);
      InputStream in = request.getInputStream();
      if ("gzip".equalsIgnoreCase(request.getHeader("Content-Encoding"))) {
        in = new GZIPInputStream(in);
      }
      write(ws, path, in);
      written.add(entry(path));
    }
    E2bControlPlane.json(response, 200, written);
  }

  private static void write(Workspace ws, String path, InputStream in) {
    int slash = path.lastIndexOf('/');
    if (slash > 0) {
      ws.createDirectories(path.substring(0, slash));
    }
    ws.write(path, in);
  }

  private static ObjectNode entry(String path) {
    ObjectNode o = Json.object();
    o.put("name", name(path));
    o.put("type", "file");
    o.put("path", path);
    return o;
  }

  // ---- filesystem.Filesystem -----------------------------------------------------------------

  private void filesystem(
      String method, Workspace ws, HttpServletRequest request, HttpServletResponse response)
      throws IOException {
    E2bConnect.Codec codec = E2bConnect.codec(request, "filesystem.Filesystem", method);
    JsonNode in = E2bConnect.readRequest(request, codec);
    if (method.equals("WatchDir")) {
      watch.watch(
          ws,
          path(ws, in, "path"),
          in.path("recursive").asBoolean(false),
          request,
          response,
          codec);
      return;
    }
    if (codec.streaming()) {
      throw E2bConnect.invalid(
          "filesystem.Filesystem/" + method + " is unary: send application/json");
    }
    ObjectNode out = Json.object();
    switch (method) {
      case "Stat" -> out.set("entry", entryInfo(ws, path(ws, in, "path")));
      case "MakeDir" -> {
        String path = path(ws, in, "path");
        if (ws.exists(path)) {
          throw new E2bConnect.RpcException(
              "already_exists", "directory '" + path + "' already exists");
        }
        ws.createDirectories(path);
        out.set("entry", entryInfo(ws, path));
      }
      case "Move" -> {
        String from = path(ws, in, "source");
        String to = path(ws, in, "destination");
        ws.rename(from, to);
        out.set("entry", entryInfo(ws, to));
      }
      case "ListDir" -> {
        String path = path(ws, in, "path");
        long depth = in.path("depth").asLong(1);
        if (depth < 1) {
          depth = 1;
        }
        if (!ws.stat(path).isDirectory()) {
          throw E2bConnect.invalid("path '" + path + "' is not a directory");
        }
        ArrayNode entries = out.putArray("entries");
        list(ws, path, (int) Math.min(depth, 64), entries);
      }
      case "Remove" -> {
        String path = path(ws, in, "path");
        ws.remove(path, true);
      }
      case "CreateWatcher", "GetWatcherEvents", "RemoveWatcher" ->
          throw new E2bConnect.RpcException(
              "unimplemented",
              "polling watchers are not supported: use WatchDir (the SDK's watchDir)");
      default ->
          throw new E2bConnect.RpcException(
              "unimplemented", "no method filesystem.Filesystem/" + method);
    }
    E2bConnect.unary(response, codec, out);
  }

  private static String path(Workspace ws, JsonNode in, String field) {
    String p = in.path(field).asText("");
    if (p.isEmpty()) {
      throw E2bConnect.invalid(field + " must not be empty");
    }
    try {
      return ws.resolve(Call.checkPath(field, p));
    } catch (ApiException e) {
      throw E2bConnect.invalid(e.getMessage());
    }
  }

  private static void list(Workspace ws, String dir, int depth, ArrayNode out) {
    for (DirectoryEntry e : ws.list(dir)) {
      String child = dir.equals("/") ? "/" + e.name() : dir + "/" + e.name();
      ObjectNode o = out.addObject();
      o.put("name", e.name());
      o.put("type", fileType(e.type()));
      o.put("path", child);
      o.put("size", Long.toString(e.size()));
      if (depth > 1 && e.type() == FileType.DIRECTORY) {
        list(ws, child, depth - 1, out);
      }
    }
  }

  static ObjectNode entryInfo(Workspace ws, String path) {
    FileStat s = ws.stat(path);
    ObjectNode o = Json.object();
    o.put("name", name(path));
    o.put("type", fileType(s.type()));
    o.put("path", path);
    o.put("size", Long.toString(s.size()));
    o.put("mode", s.permissions());
    o.put("permissions", permissions(s.type(), s.permissions()));
    if (s.modified() != null) {
      o.put("modifiedTime", s.modified().toString());
    }
    return o;
  }

  static String fileType(FileType t) {
    return switch (t) {
      case FILE -> "FILE_TYPE_FILE";
      case DIRECTORY -> "FILE_TYPE_DIRECTORY";
      case SYMLINK -> "FILE_TYPE_SYMLINK";
      case OTHER -> "FILE_TYPE_UNSPECIFIED";
    };
  }

  /** Permissions as envd prints them (Go's FileMode.String): {@code drwxr-xr-x}. */
  private static String permissions(FileType type, int mode) {
    StringBuilder b =
        new StringBuilder(type == FileType.DIRECTORY ? "d" : type == FileType.SYMLINK ? "L" : "-");
    String rwx = "rwxrwxrwx";
    for (int i = 0; i < 9; i++) {
      b.append((mode & (1 << (8 - i))) != 0 ? rwx.charAt(i) : '-');
    }
    return b.toString();
  }

  static String name(String path) {
    int slash = path.lastIndexOf('/');
    return slash < 0 ? path : path.substring(slash + 1);
  }
}
