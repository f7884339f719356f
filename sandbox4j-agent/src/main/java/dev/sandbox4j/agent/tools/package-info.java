/**
 * The tools an agent works with, as capabilities: {@link dev.sandbox4j.agent.tools.Shell} (run and
 * manage commands), {@link dev.sandbox4j.agent.tools.FileSystem} (read, write, edit and search
 * files), {@link dev.sandbox4j.agent.tools.RepoContext} (load {@code AGENTS.md}/{@code CLAUDE.md}
 * into the instructions) and {@link dev.sandbox4j.agent.tools.Coder} (the bundle for coding
 * agents).
 *
 * <p>Every tool acts on the run's workspace ({@code ToolContext.workspace()}), so the same tools
 * run in a local sandbox, on a server or in a cloud machine, whichever capability supplies the
 * workspace. Their names, arguments and output shapes follow Pydantic AI Harness, so prompts
 * written for it transfer.
 *
 * <h2>What every tool keeps</h2>
 *
 * <ol>
 *   <li>A failure the model can fix — a missing file, an ambiguous edit, a stale hash, a denied
 *       command, a path outside the root — is an error result that says what to do next; it never
 *       fails the run. A workspace that is gone fails the run ({@code
 *       WorkspaceUnavailableException}).
 *   <li>Output is bounded: commands keep the tail under a marker that says how much was cut; file
 *       reads and searches stop at a limit and say how to continue.
 *   <li>Policies (root directory, read-only patterns, command lists) guard against the model's
 *       accidents. They are not isolation: the sandbox is.
 * </ol>
 */
package dev.sandbox4j.agent.tools;
