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

#   ALLOT_GIT_DIR    the Git directory of the checkout CI made (default: the .git
#                    of the working directory, else the one above ALLOT_DIR)

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

# Git is only read, never obeyed: every git command names the checkout's Git
# directory (--git-dir, never found from inside the capacity folder, whose
# files are the change's: a folder of them can look like a repository) and
# applies nothing of the change's choosing or the machine's beyond that
# repository's own config: no hooks, no file system monitor, no attributes
# (textconv, filters), no signature programs, no pager, no replace refs, no
# submodules.
GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_ATTR_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 GIT_NO_REPLACE_OBJECTS=1 GIT_PAGER=cat
export GIT_CONFIG_NOSYSTEM GIT_CONFIG_GLOBAL GIT_ATTR_NOSYSTEM GIT_TERMINAL_PROMPT GIT_NO_REPLACE_OBJECTS GIT_PAGER
unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES GIT_CONFIG \
	GIT_CONFIG_PARAMETERS GIT_CONFIG_COUNT GIT_EXTERNAL_DIFF GIT_SSH_COMMAND GIT_CEILING_DIRECTORIES GIT_NAMESPACE

# git_dir DIR prints the Git directory of the checkout that holds DIR: the
# nearest .git (a directory, or a file naming one) at or above the working
# directory, when DIR is inside its work tree, else at or above DIR. A folder
# is never taken for a bare repository: a commit cannot hold a .git entry.
git_dir() {
	_target=$(CDPATH='' cd -- "$1" && pwd -P) || return 1
	for _start in "$(pwd -P)" "$_target"; do
		_d=$_start
		while :; do
			if [ -d "$_d/.git" ] || [ -f "$_d/.git" ]; then
				case $_target/ in "${_d%/}"/*)
					echo "$_d/.git"
					return 0
					;;
				esac
				break
			fi
			[ "$_d" != / ] || break
			_d=$(dirname -- "$_d")
		done
	done
	return 1
}

# git_read ARGS... reads the checkout's repository ($ALLOT_GIT_DIR), with no
# transport (a lazy fetch of a partial clone) either.
git_read() {
	GIT_ALLOW_PROTOCOL=none git --git-dir="$ALLOT_GIT_DIR" $_git_safe -c protocol.allow=never "$@"
}

# git_fetch ARGS... fetches into the checkout's repository: its remote and
# credentials are CI's (the repository's .git/config, which no change
# writes); no submodule of the change's .gitmodules is fetched.
git_fetch() {
	git --git-dir="$ALLOT_GIT_DIR" $_git_safe fetch -q --no-tags --no-recurse-submodules "$@"
}

_git_safe='-c safe.bareRepository=explicit -c core.fsmonitor=false -c core.hooksPath=/dev/null -c core.attributesFile=/dev/null -c core.pager=cat -c log.showSignature=false -c diff.external= -c gc.auto=0 -c maintenance.auto=false -c fetch.recurseSubmodules=false -c submodule.recurse=false --no-replace-objects'
