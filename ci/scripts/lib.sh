# lib.sh: what the CI scripts share. Sourced, not run; POSIX sh.
#
# Settings (environment):
#   ALLOT_OUT        where plan.sh leaves plan.md, plan.json, codequality.json and
#                    status for the later steps (default: $RUNNER_TEMP/allot, or
#                    $CI_PROJECT_DIR/.allot, or ./.allot)
#   ALLOT            the allot binary (default: bin/allot of this checkout, built
#                    by install.sh)
#   ALLOT_FORGE      github or gitlab (default: detected from GITHUB_ACTIONS or GITLAB_CI)
#   ALLOT_TOKEN      the token that comments and labels
#   ALLOT_PR_NUMBER  the pull request number (GitHub) or merge request IID (GitLab);
#                    empty: not a change under review, nothing is posted
#   GitHub: GITHUB_API_URL (default https://api.github.com), GITHUB_REPOSITORY
#   GitLab: CI_API_V4_URL, CI_PROJECT_ID

# MARKER is the first line of allot's comment (report.Marker): the comment is
# found again by it and updated, never posted twice.
MARKER='<!-- allot-plan -->'

# ALLOT_ROOT is the allot source tree these scripts belong to.
ALLOT_ROOT=$(CDPATH='' cd -- "$(dirname -- "$0")/../.." && pwd)

: "${ALLOT_OUT:=${RUNNER_TEMP:+$RUNNER_TEMP/allot}}"
: "${ALLOT_OUT:=${CI_PROJECT_DIR:+$CI_PROJECT_DIR/.allot}}"
: "${ALLOT_OUT:=.allot}"
: "${ALLOT:=$ALLOT_ROOT/bin/allot}"

die() {
	echo "allot-ci: $*" >&2
	exit 2
}

say() { echo "allot-ci: $*" >&2; }

need() {
	for _c in "$@"; do
		command -v "$_c" >/dev/null 2>&1 || die "$_c is not installed (run ci/scripts/install.sh)"
	done
}

# forge prints github, gitlab or none.
forge() {
	if [ -n "${ALLOT_FORGE:-}" ]; then
		echo "$ALLOT_FORGE"
	elif [ "${GITHUB_ACTIONS:-}" = true ]; then
		echo github
	elif [ "${GITLAB_CI:-}" = true ]; then
		echo gitlab
	else
		echo none
	fi
}

# review_target checks that there is a change under review to post to and the
# settings to reach it; it returns 1 (post nothing) outside a pull request.
review_target() {
	if [ -z "${ALLOT_PR_NUMBER:-}" ]; then
		say "not a pull or merge request (ALLOT_PR_NUMBER is empty): nothing to post"
		return 1
	fi
	[ -n "${ALLOT_TOKEN:-}" ] || die "ALLOT_TOKEN is empty: no token to comment and label with"
	need curl jq
	case $(forge) in
	github)
		[ -n "${GITHUB_REPOSITORY:-}" ] || die "GITHUB_REPOSITORY is empty"
		API=${GITHUB_API_URL:-https://api.github.com}
		ISSUE="/repos/$GITHUB_REPOSITORY/issues/$ALLOT_PR_NUMBER"
		;;
	gitlab)
		[ -n "${CI_API_V4_URL:-}" ] && [ -n "${CI_PROJECT_ID:-}" ] || die "CI_API_V4_URL or CI_PROJECT_ID is empty"
		API=$CI_API_V4_URL
		ISSUE="/projects/$CI_PROJECT_ID/merge_requests/$ALLOT_PR_NUMBER"
		;;
	*) die "cannot tell the forge: set ALLOT_FORGE to github or gitlab" ;;
	esac
}

# api METHOD PATH [JSON_FILE] calls the forge's API and prints the response body;
# it fails on any status but 2xx.
api() {
	_method=$1 _path=$2 _body=${3:-}
	_resp=$(mktemp)
	if [ "$(forge)" = github ]; then
		set -- -H "Authorization: Bearer $ALLOT_TOKEN" -H "Accept: application/vnd.github+json" -H "X-GitHub-Api-Version: 2022-11-28"
	else
		set -- -H "PRIVATE-TOKEN: $ALLOT_TOKEN"
	fi
	if [ -n "$_body" ]; then
		set -- "$@" -H "Content-Type: application/json" --data-binary "@$_body"
	fi
	_code=$(curl -sS --retry 3 -o "$_resp" -w '%{http_code}' -X "$_method" "$@" "$API$_path") || {
		rm -f "$_resp"
		die "$_method $API$_path: curl failed"
	}
	case $_code in
	2??) cat "$_resp" ;;
	*)
		echo "allot-ci: $_method $API$_path: HTTP $_code: $(head -c 300 "$_resp")" >&2
		rm -f "$_resp"
		exit 1
		;;
	esac
	rm -f "$_resp"
}
