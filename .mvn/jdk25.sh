# Sourced (POSIX sh) by ./mvnw, ./sandbox4j and .ci/run: point JAVA_HOME at a JDK 25 or newer,
# because the machine's default java may be older (Debian 12 ships 17) and the build needs
# --release 25. Order: JAVA_HOME if it is already 25+, then the usual install places.
sandbox4j_java_feature() { # prints the feature version of the JDK at $1, or nothing
  [ -x "$1/bin/java" ] && [ -x "$1/bin/javac" ] || return 0
  # A JDK's release file names its version: reading it costs no JVM start (tens of ms on every
  # ./sandbox4j call). Without one, ask the JVM.
  if [ -f "$1/release" ]; then
    while IFS= read -r sandbox4j_line; do
      case $sandbox4j_line in
        JAVA_VERSION=\"[0-9]*)
          sandbox4j_rv=${sandbox4j_line#JAVA_VERSION=\"}
          echo "${sandbox4j_rv%%[!0-9]*}"
          return 0
          ;;
      esac
    done <"$1/release"
  fi
  "$1/bin/java" -XshowSettings:properties -version 2>&1 |
    sed -n 's/^ *java\.specification\.version = \([0-9][0-9]*\).*/\1/p' | head -n 1
}
sandbox4j_find_jdk25() {
  sandbox4j_v=$(sandbox4j_java_feature "${JAVA_HOME:-/nonexistent}")
  if [ -n "$sandbox4j_v" ] && [ "$sandbox4j_v" -ge 25 ]; then return 0; fi
  sandbox4j_had_noglob=0
  case $- in *f*) sandbox4j_had_noglob=1; set +f ;; esac
  for sandbox4j_dir in /usr/lib/jvm/*25* /usr/lib/jvm/*-2[5-9]* /usr/lib/jvm/*-[3-9][0-9]* \
    /opt/java/*25* /opt/jdk*25* "$HOME"/.sdkman/candidates/java/25* "$HOME"/.jdks/*25* \
    /Library/Java/JavaVirtualMachines/*25*/Contents/Home; do
    sandbox4j_v=$(sandbox4j_java_feature "$sandbox4j_dir")
    if [ -n "$sandbox4j_v" ] && [ "$sandbox4j_v" -ge 25 ]; then
      JAVA_HOME=$sandbox4j_dir
      export JAVA_HOME
      [ "$sandbox4j_had_noglob" = 1 ] && set -f
      return 0
    fi
  done
  [ "$sandbox4j_had_noglob" = 1 ] && set -f
  echo "Sandbox4j needs a JDK 25 or newer (javac included), and none was found." >&2
  echo "  JAVA_HOME=${JAVA_HOME:-<unset>} is not a JDK 25+, and none is in /usr/lib/jvm, /opt/java or ~/.sdkman." >&2
  echo "  Install one (e.g. Eclipse Temurin 25) and set JAVA_HOME to it." >&2
  return 1
}
sandbox4j_find_jdk25 || exit 1
