/**
 * Not API: may change in any release. The image store (ImageStore): images as stacks of content-
 * addressed layers under $SANDBOX4J_HOME/images, built by mmdebstrap (MmdebstrapBuilder) or
 * imported from archives (ImageArchive, strictly: ids in range, no device nodes), with their
 * ownership shifted into the sandboxes' id range (RootfsOwnership); names, manifests, locks, gc. It
 * learns which layers sandboxes run on through ImageStore.LayerUsers, so that it never deletes one.
 *
 * <p>Non-goals: running anything. Recipe builds, which run steps in sandboxes, are the engine's
 * (internal.engine.RecipeBuild).
 */
package dev.sandbox4j.runtime.internal.image;
