package dev.sandbox4j.workspace.spi;

/**
 * The shell that kills a command's whole process tree inside a container whose backend cannot give
 * each command a cgroup of its own (Docker's exec, Modal's command router): every process whose
 * {@code /proc/PID/cmdline} or {@code /proc/PID/environ} holds a marker line naming the command,
 * and every descendant of one (adoptees of a subreaper too), is stopped first, so that none forks
 * while the tree is walked, then killed; it exits 0 once none runs (zombies aside), 1 if one still
 * did after two seconds. POSIX sh, {@code tr} and {@code grep} only, so that it runs in any image
 * with a shell.
 */
public final class MarkedTrees {
  private MarkedTrees() {}

  /** Where a command carries its marker. */
  public enum MarkerIn {
    /** An argument (readable by any user in the container). */
    CMDLINE("cmdline"),
    /** An environment variable {@code NAME=VALUE} (readable by the process's user or root). */
    ENVIRON("environ"),
    /**
     * Either: for a command whose first process gets its marker as an argument (an exec API with no
     * environment, Kubernetes') and exports it to the rest, so that the tree is found from the
     * moment that process starts, before any process with the variable exists.
     */
    CMDLINE_OR_ENVIRON("cmdline", "environ");

    private final java.util.List<String> files;

    MarkerIn(String... files) {
      this.files = java.util.List.of(files);
    }

    /** The shell that prints the marker lines of the process at {@code $d}. */
    String lines() {
      return files.stream()
          .map(f -> "tr '\\0' '\\n' < \"$d/" + f + "\"")
          .collect(java.util.stream.Collectors.joining("; ", "{ ", "; }"));
    }
  }

  /**
   * The script, to run as {@code sh -c SCRIPT NAME ID}: it kills the tree of every process that has
   * the line {@code markerPrefix + ID} in {@code where}.
   *
   * @param where which {@code /proc/PID} file holds the marker
   * @param markerPrefix the marker without the command's id, such as {@code sandbox4j-command-}; no
   *     shell metacharacters (checked)
   */
  public static String killScript(MarkerIn where, String markerPrefix) {
    if (!markerPrefix.matches("[A-Za-z0-9_=.-]+")) {
      throw new IllegalArgumentException(
          "a marker prefix of plain characters, not " + markerPrefix);
    }
    return """
        m="%s$1"; self=$$; tree=" "
        for d in /proc/[0-9]*; do
          p=${d#/proc/}; [ "$p" = "$self" ] && continue
          if %s 2>/dev/null | grep -qxF -- "$m"; then tree="$tree$p "; fi
        done
        [ "$tree" = " " ] && exit 0
        round=0
        while :; do
          kill -STOP $tree 2>/dev/null; grown=0
          for d in /proc/[0-9]*; do
            p=${d#/proc/}
            case "$tree" in *" $p "*) continue ;; esac
            ppid=
            while read -r k v; do case $k in PPid:) ppid=$v; break ;; esac; done 2>/dev/null < "$d/status"
            case "$tree" in *" $ppid "*) tree="$tree$p "; grown=1 ;; esac
          done
          round=$((round + 1)); [ $grown = 0 ] || [ $round -gt 100 ] && break
        done
        kill -KILL $tree 2>/dev/null
        n=0
        while [ $n -lt 200 ]; do
          alive=0
          for p in $tree; do
            s=; read -r s < "/proc/$p/stat" 2>/dev/null || continue
            case "$s" in *") Z "*) ;; *) alive=1 ;; esac
          done
          [ $alive = 0 ] && exit 0
          n=$((n + 1)); sleep 0.01
        done
        exit 1
        """
        .formatted(markerPrefix, where.lines());
  }
}
