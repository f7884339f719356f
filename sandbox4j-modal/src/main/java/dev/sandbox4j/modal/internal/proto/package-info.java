/**
 * Not API: the messages and stubs protoc generates from this module's subset of Modal's {@code
 * modal.client} protocol ({@code src/main/proto}). Public only because generated code is; the
 * client in {@code dev.sandbox4j.modal} is their one user.
 */
package dev.sandbox4j.modal.internal.proto;
