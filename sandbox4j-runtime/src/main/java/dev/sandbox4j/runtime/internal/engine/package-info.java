/**
 * Not API: may change in any release. The crun engine: one sandbox's life on this host. Engine
 * creates and destroys, Exec runs commands, Lifecycle suspends, stops, hibernates, forks and
 * snapshots (with Checkpoints), SandboxFiles is the file API (openat2-confined),
 * SandboxRecord/StateDirectory keep the on-disk state, SandboxDisk/SpareDisks the per-sandbox ext4
 * quota, IdBlocks the per-sandbox id block, Timers the timer settings, RecipeBuild image recipes,
 * NetNamespace connections into a sandbox.
 *
 * <p>Non-goals: what another backend would reuse (the proxies, the image store live below); the
 * public API (dev.sandbox4j.runtime wraps it).
 */
package dev.sandbox4j.runtime.internal.engine;
