/**
 * Not API: may change in any release. The per-home supervisor process (Supervisor, SupervisedHome,
 * SandboxChanges: what changed among the sandboxes, so a scan's work follows changes): enforces
 * timers, runs the home's egress and port proxies, outlives the JVM that started it, exits when its
 * home has no sandbox.
 *
 * <p>Non-goals: anything a call of the API does on its own path.
 */
package dev.sandbox4j.runtime.internal.supervisor;
