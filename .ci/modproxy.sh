# Sourced by .ci/pin-root and .ci/consumer-check: resolve this repository's
# modules the way a consumer's `go get` does, but from the local git
# history instead of GitHub. `direct_download MOD@REV` fetches through git
# (url.insteadOf points github.com/dynabill/billing at this clone) into
# $MODFILL, whose cache/download directory is then a file GOPROXY.
set -euo pipefail
REPO_ROOT=$(git -C "$(dirname "${BASH_SOURCE[0]}")/.." rev-parse --show-toplevel)
GIT_DIR_ABS=$(git -C "$REPO_ROOT" rev-parse --absolute-git-dir)
MODFILL=${MODFILL:-$(mktemp -d)}
direct_download() {
	env GOMODCACHE="$MODFILL" GOPROXY=direct GOPRIVATE='github.com/dynabill/*' GOFLAGS=-mod=mod \
		GIT_CONFIG_COUNT=2 \
		GIT_CONFIG_KEY_0="url.file://$GIT_DIR_ABS.insteadOf" GIT_CONFIG_VALUE_0=https://github.com/dynabill/billing \
		GIT_CONFIG_KEY_1=protocol.file.allow GIT_CONFIG_VALUE_1=always \
		go mod download -json "$1"
}
# version_of MOD@REV prints the (pseudo-)version a consumer gets for REV.
version_of() {
	direct_download "$1" | sed -n 's/^[[:space:]]*"Version": "\(.*\)",$/\1/p'
}
