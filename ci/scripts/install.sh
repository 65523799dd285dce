#!/bin/sh
# install.sh: make sure the tools the other scripts need are there: git, curl and
# jq (installed with apt-get or apk when missing and root), and allot: $ALLOT when
# set, else bin/allot built from this source tree, so that the binary and the
# scripts are always of one version.
set -eu
. "$(dirname -- "$0")/lib.sh"

missing=''
for c in git curl jq; do
	command -v "$c" >/dev/null 2>&1 || missing="$missing $c"
done
if [ -n "$missing" ]; then
	if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
		apt-get update -qq && apt-get install -y -qq $missing >/dev/null
	elif [ "$(id -u)" -eq 0 ] && command -v apk >/dev/null 2>&1; then
		apk add --no-cache -q $missing
	else
		die "missing:$missing (install them in the job's image)"
	fi
fi

if [ ! -x "$ALLOT" ]; then
	need go
	say "building allot from $ALLOT_ROOT"
	# Static: no C compiler needed, runs on any Linux runner.
	(cd "$ALLOT_ROOT" && CGO_ENABLED=0 go build -o "$ALLOT" ./cmd/allot)
fi
"$ALLOT" --help >/dev/null || die "$ALLOT does not run"
say "using $ALLOT"
