/**
 * Not API: may change in any release. The image store: images as stacks of content-addressed layers
 * under $SANDBOX4J_HOME/images, built by mmdebstrap (MmdebstrapBuilder) or imported from archives
 * (ImageArchive, strictly: ids in range, no device nodes), with their ownership shifted into the
 * sandboxes' id range (RootfsOwnership); names, manifests, locks, gc. It uses only {@code util} and
 * {@code linux} (and the workspace's exceptions): no OCI runtime, no engine.
 *
 * <p><b>What another backend uses</b> (a Docker backend, say, that runs containers on these layers,
 * or just lists and imports images): {@link dev.sandbox4j.runtime.internal.image.ImageStore} alone,
 * opened on an images directory with the backend's own {@link
 * dev.sandbox4j.runtime.internal.image.ImageStore.LayerUsers}:
 *
 * <ul>
 *   <li>resolve a name to its layers: {@code find(name)} (or {@code ensureDefault(progress)}) gives
 *       an {@link dev.sandbox4j.runtime.internal.image.Image}: layer ids and directories, bottom
 *       first, owned by the canonical host ids ({@code Image.UID_SHIFT}), ready to be overlay lower
 *       layers; {@code list()}, {@code snapshotOf(name)};
 *   <li>bring images in: {@code importArchive(name, archive, progress)} (rootfs tarball, {@code
 *       docker save}, OCI layout; layers deduplicated by id), {@code pull(ref, client, progress)}
 *       from a registry, {@code buildDefault(progress)};
 *   <li>send them out: {@code push(name, ref, client, ownImagesConfig, progress)} to a registry, as
 *       an OCI image (LayerExport writes each layer, RegistryPush the rest);
 *   <li>build its own: {@code withNameLock(name, build -> ...)} with {@code pin}, {@code
 *       pinIfPresent}, {@code addLayer} and {@code publish} on the {@code Build};
 *   <li>keep its layers: before mounting an image's layers, record them where its {@code
 *       LayerUsers} reads them, then {@code checkLayersKept(image)}; {@code remove(name)} and
 *       {@code gc()} then delete only layers no image, build or sandbox of any backend sharing the
 *       directory uses. A store opened without {@code LayerUsers} ({@code UNKNOWN}) deletes no
 *       layer; {@code NONE} says no sandbox runs on it.
 * </ul>
 *
 * The other classes (StoreLayout, StoreLocks, Manifests, Staging, DefaultImage, StoreGc,
 * RegistryPull, RegistryPush, LayerExport) are the store's parts and package-private; ImageArchive
 * and RootfsOwnership are public for the engine's recipe builds and snapshots.
 *
 * <p>Non-goals: running anything. Recipe builds, which run steps in sandboxes, are the engine's
 * (internal.engine.RecipeBuild); so is knowing which sandboxes exist.
 */
package dev.sandbox4j.runtime.internal.image;
