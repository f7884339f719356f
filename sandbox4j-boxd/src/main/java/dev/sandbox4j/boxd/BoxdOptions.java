package dev.sandbox4j.boxd;

import java.time.Duration;
import java.util.Map;

/**
 * What {@link BoxdSandbox}'s builder set: how new machines are created and commands run. Null
 * fields are boxd's defaults.
 */
record BoxdOptions(
    String name,
    String image,
    Integer vcpu,
    String snapshot,
    Map<String, String> env,
    String workingDirectory,
    Duration autoSuspendTimeout,
    Duration autoDestroyTimeout,
    Duration noOutputLimit,
    Duration readyTimeout,
    Duration snapshotTimeout,
    Runnable beforeCreate) {}
