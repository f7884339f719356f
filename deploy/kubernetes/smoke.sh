#!/usr/bin/env bash
# Runs the k8s provider's smoke subset (KubernetesRealClusterSmoke) against the cluster kubectl
# points at: creates a namespace, runs one workspace through commands, stdin, files, a timeout
# that must kill a setsid daemon, destroy, then removes the namespace and anything left in it.
# Needs: kubectl, a JDK 25 (JAVA_HOME), this repository. Usage: deploy/kubernetes/smoke.sh [pod|sandbox|auto]
set -euo pipefail
mode=${1:-auto}
ns=sandbox4j-smoke-$RANDOM
cd "$(dirname "$0")/../.."
kubectl create namespace "$ns"
trap 'kubectl delete namespace "$ns" --wait=false' EXIT
CI= ./mvnw -B -q -P '!ci-fuzz' -pl sandbox4j-kubernetes -am verify \
  -Dspotless.check.skip=true -Dinvoker.skip -Dmaven.install.skip=true \
  -Dtest=KubernetesRealClusterSmoke -Dsurefire.failIfNoSpecifiedTests=false \
  -Dsandbox4j.k8s.namespace="$ns" -Dsandbox4j.k8s.mode="$mode"
echo "smoke passed in namespace $ns (mode $mode)"
