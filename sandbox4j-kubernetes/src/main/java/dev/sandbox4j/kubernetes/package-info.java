/**
 * The {@code k8s} provider: workspaces in Kubernetes pods, plain or as agent-sandbox Sandboxes
 * ({@link dev.sandbox4j.kubernetes.KubernetesSandbox}).
 */
package dev.sandbox4j.kubernetes;
