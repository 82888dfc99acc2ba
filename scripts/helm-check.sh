#!/usr/bin/env bash
# Checks the Helm chart (helm/) and the Dockerfile offline, with pinned tools that
# scripts/helm-tools.sh installs into target/tools:
#
#   1. helm lint and helm template for each documented values set (helm/ci/*.yaml), and for
#      an application chart that includes freshet's named templates (helm/ci/app);
#   2. the rendered manifests against the Kubernetes JSON schemas that kubernetes-validate
#      ships (strict: unknown fields fail), for 1.29 (the first with native sidecars) and 1.33;
#   3. kube-score, the best-practice linter, with the few checks this chart answers otherwise
#      switched off (each with its reason below);
#   4. the freshet.toml each values set renders, read by freshet's own config loader
#      (`freshet check`, which exits 64 on a bad config and 1 when only the upstream fails);
#   5. hadolint on the Dockerfile.
#
# Set FRESHET_SKIP_HELM_CHECK to a reason to skip it (the reason is printed); .ci/run runs it.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
if [[ -n "${FRESHET_SKIP_HELM_CHECK:-}" ]]; then
    echo "helm-check: skipped: $FRESHET_SKIP_HELM_CHECK"
    exit 0
fi
bin=$(scripts/helm-tools.sh)
out=${CARGO_TARGET_DIR:-$repo/target}/helm-check
rm -rf "$out" && mkdir -p "$out"
kube=1.30.0

# Not switched off: everything else kube-score checks. Switched off, and why:
#   pod-networkpolicy            freshet joins the application's pod; its NetworkPolicy is the
#                                application chart's (freshet's MySQL port is on loopback).
#   container-image-pull-policy  images are pinned by tag; Always would make every start
#                                depend on the registry.
#   deployment-replicas, deployment-strategy, deployment-has-host-podantiaffinity
#                                only the demo has Deployments, one replica each by design.
#   CPU limits (--ignore-container-cpu-limit): a throttled proxy adds latency to every query.
score_flags=(--ignore-test pod-networkpolicy --ignore-test container-image-pull-policy --ignore-test deployment-replicas
    --ignore-test deployment-strategy --ignore-test deployment-has-host-podantiaffinity --ignore-container-cpu-limit
    --kubernetes-version v1.30)

render() { # name, then helm template arguments
    local name=$1
    shift
    "$bin/helm" lint --strict --kube-version $kube "$@" >"$out/$name.lint" || { cat "$out/$name.lint"; echo "helm-check: helm lint failed for $name" >&2; exit 1; }
    "$bin/helm" template check --kube-version $kube "$@" >"$out/$name.yaml"
}

for values in helm/ci/*.yaml; do
    name=$(basename "$values" .yaml)
    render "$name" helm -f "$values"
done
# With the PodMonitor CRD served, the PodMonitor is rendered (it is not validated against a
# schema: kubernetes-validate knows only the built-in kinds).
"$bin/helm" template check --kube-version $kube -f helm/ci/demo.yaml --api-versions monitoring.coreos.com/v1/PodMonitor helm >"$out/podmonitor.yaml"
grep -q "kind: PodMonitor" "$out/podmonitor.yaml" || { echo "helm-check: no PodMonitor with the CRD present" >&2; exit 1; }
grep -q "kind: PodMonitor" "$out/demo.yaml" && { echo "helm-check: a PodMonitor without the CRD" >&2; exit 1; }
# An application's own chart that includes freshet (as a dependency) with the named templates.
rm -rf helm/ci/app/charts
"$bin/helm" dependency build helm/ci/app >/dev/null
render app helm/ci/app
rm -rf helm/ci/app/charts helm/ci/app/Chart.lock

for manifest in "$out"/*.yaml; do
    [[ $(basename "$manifest") == podmonitor.yaml ]] && continue
    for version in 1.29.0 1.33.0; do
        "$bin/kubernetes-validate" --strict --quiet -k $version "$manifest" || { echo "helm-check: $manifest fails the Kubernetes $version schemas" >&2; exit 1; }
    done
    "$bin/kube-score" score "${score_flags[@]}" "$manifest" >"$out/$(basename "$manifest" .yaml).score" || {
        cat "$out/$(basename "$manifest" .yaml).score"
        echo "helm-check: kube-score finds $manifest lacking" >&2
        exit 1
    }
done

# The rendered configs, read by freshet itself: 64 would be a bad config; 1 is the upstream
# (these hosts do not exist here), after "ok: config is valid".
cargo build -q -p freshet-proxy
freshet=${CARGO_TARGET_DIR:-target}/debug/freshet
for manifest in "$out"/*.yaml; do
    [[ $(basename "$manifest") == podmonitor.yaml ]] && continue
    python3 - "$manifest" "$out/freshet.toml" <<'PY'
import sys
text = open(sys.argv[1]).read()
# The ConfigMap's freshet.toml: the indented block after "freshet.toml: |".
lines = text.split("\n")
start = next(i for i, l in enumerate(lines) if l.strip() == "freshet.toml: |") + 1
body = []
for line in lines[start:]:
    if line and not line.startswith("    "):
        break
    body.append(line[4:])
open(sys.argv[2], "w").write("\n".join(body))
PY
    # The url from the Secret when the chart left it out of the file (upstream.urlKey).
    url_env=()
    grep -q '^url = ' "$out/freshet.toml" || url_env=(FRESHET_UPSTREAM_URL="mysql://freshet:x@127.0.0.1:1/x")
    set +e
    result=$(env -u FRESHET_CONFIG "${url_env[@]}" FRESHET_UPSTREAM_PASSWORD=x FRESHET_UPSTREAM_CONNECT_TIMEOUT=1s \
        "$freshet" check --config "$out/freshet.toml" 2>&1)
    status=$?
    set -e
    if [[ $status -ne 1 || $result != "ok: config is valid"* ]]; then
        echo "$result"
        echo "helm-check: freshet does not accept the config rendered in $manifest (status $status)" >&2
        exit 1
    fi
done

"$bin/hadolint" Dockerfile
echo "helm-check: ok ($(ls "$out"/*.yaml | wc -l) manifests; helm, kubernetes-validate, kube-score, freshet check, hadolint)"
