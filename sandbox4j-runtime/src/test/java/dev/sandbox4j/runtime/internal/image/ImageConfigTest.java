package dev.sandbox4j.runtime.internal.image;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The parts of an image config a sandbox uses, read from untrusted JSON and checked. */
class ImageConfigTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  @Test
  void readsUserWorkingDirEnvEntrypointAndCmd() throws Exception {
    ImageConfig c =
        parse(
            """
            {"architecture": "amd64", "config": {"User": "app:staff", "WorkingDir": "/srv/./app/",
             "Env": ["PATH=/usr/bin", "GREETING=a=b"], "Entrypoint": ["/entry"], "Cmd": ["run", "x"]}}
            """);

    assertThat(c.user()).isEqualTo("app:staff");
    assertThat(c.workingDir())
        .as("normalized, as docker keeps WORKDIR /app/")
        .isEqualTo("/srv/app");
    assertThat(c.env()).containsExactly("PATH=/usr/bin", "GREETING=a=b");
    assertThat(c.envValue("GREETING")).isEqualTo("a=b");
    assertThat(c.entrypoint()).containsExactly("/entry");
    assertThat(c.cmd()).containsExactly("run", "x");
  }

  @Test
  void missingOrEmptyFieldsMeanNone() throws Exception {
    assertThat(parse("{\"architecture\": \"amd64\"}")).isEqualTo(ImageConfig.NONE);
    ImageConfig empty =
        parse("{\"config\": {\"User\": \"\", \"WorkingDir\": \"\", \"Env\": null}}");
    assertThat(empty.user()).isNull();
    assertThat(empty.workingDir()).isNull();
    assertThat(empty.env()).isEmpty();
    assertThat(parse("{\"config\": {\"WorkingDir\": \"//\"}}").workingDir()).isEqualTo("/");
  }

  @Test
  void malformedUsersAreRefused() {
    for (String user : List.of("a:b:c", ":x", "x:", "-x", "a b", "é", "x".repeat(65))) {
      assertThatThrownBy(
              () -> parse("{\"config\": {\"User\": " + JSON.writeValueAsString(user) + "}}"))
          .as(user)
          .isInstanceOf(ImageBuildException.class)
          .hasMessageContaining("User")
          .hasMessageContaining("is not NAME, UID, NAME:GROUP or UID:GID");
    }
  }

  @Test
  void relativeOrEscapingWorkingDirsAreRefused() {
    assertThatThrownBy(() -> parse("{\"config\": {\"WorkingDir\": \"app\"}}"))
        .isInstanceOf(ImageBuildException.class)
        .hasMessageContaining("WorkingDir 'app' is not an absolute path");
    assertThatThrownBy(() -> parse("{\"config\": {\"WorkingDir\": \"/srv/../etc\"}}"))
        .isInstanceOf(ImageBuildException.class)
        .hasMessageContaining("contains '..'");
  }

  @Test
  void malformedEnvIsRefused() {
    for (String entry : List.of("NOEQUALS", "=x", "1X=y", "A-B=c")) {
      assertThatThrownBy(
              () -> parse("{\"config\": {\"Env\": [" + JSON.writeValueAsString(entry) + "]}}"))
          .as(entry)
          .isInstanceOf(ImageBuildException.class)
          .hasMessageContaining("is not NAME=value");
    }
    assertThatThrownBy(() -> parse("{\"config\": {\"Env\": \"A=b\"}}"))
        .isInstanceOf(ImageBuildException.class)
        .hasMessageContaining("Env is not a list of strings");
    assertThatThrownBy(() -> parse("{\"config\": {\"Env\": [\"A=\\u0000\"]}}"))
        .isInstanceOf(ImageBuildException.class)
        .hasMessageContaining("NUL");
  }

  @Test
  void wrongTypesAndOversizedValuesAreRefused() {
    assertThatThrownBy(() -> parse("{\"config\": []}"))
        .isInstanceOf(ImageBuildException.class)
        .hasMessageContaining("'config' is not an object");
    assertThatThrownBy(() -> parse("{\"config\": {\"User\": 1000}}"))
        .isInstanceOf(ImageBuildException.class)
        .hasMessageContaining("User is not a string");
    assertThatThrownBy(
            () ->
                parse(
                    "{\"config\": {\"Cmd\": [\""
                        + "x".repeat(ImageConfig.MAX_STRING + 1)
                        + "\"]}}"))
        .isInstanceOf(ImageBuildException.class)
        .hasMessageContaining("Cmd holds a string of");
    String many = "\"A=b\",".repeat(ImageConfig.MAX_ENTRIES) + "\"A=b\"";
    assertThatThrownBy(() -> parse("{\"config\": {\"Env\": [" + many + "]}}"))
        .isInstanceOf(ImageBuildException.class)
        .hasMessageContaining("Env has " + (ImageConfig.MAX_ENTRIES + 1) + " entries");
  }

  private static ImageConfig parse(String json) throws Exception {
    JsonNode document = JSON.readTree(json);
    return ImageConfig.fromImageConfigJson(document);
  }
}
