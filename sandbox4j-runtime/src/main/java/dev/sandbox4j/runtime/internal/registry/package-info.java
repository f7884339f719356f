/**
 * Not API: may change in any release. A client of the OCI Distribution API: image references with
 * Docker Hub's defaults (ImageReference), credentials from the builder and the docker CLI's
 * config.json and credential helpers (RegistryCredentials), and the HTTP conversation itself
 * (RegistryClient): manifests and indexes, blobs verified against their digests, resumable
 * downloads, the 401 challenge answered with a Bearer token or Basic credentials. It uses only the
 * JDK's HTTP client and Jackson; it knows nothing of the image store, which drives it
 * (internal.image.RegistryPull).
 *
 * <p>Why not a library: the Java clients of the distribution API on Maven Central either build and
 * push images (Jib, whose registry client is internal to it) or bring a native dependency; the pull
 * protocol is a handful of GETs, and every byte it returns is verified here anyway.
 *
 * <p>Non-goals: storing anything (the caller gives the files), choosing a platform (the image store
 * does), schema-1 manifests, registries that speak neither Bearer nor Basic auth.
 */
package dev.sandbox4j.runtime.internal.registry;
