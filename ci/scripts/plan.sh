#!/bin/sh
# plan.sh: validate the capacity repository and write its plan against the base of
# the change into $ALLOT_OUT: plan.md (the comment), plan.json, report.html (the
# finance report), codequality.json (GitLab's code-quality report) and status
# (allot validate's exit code, for verdict.sh). Findings do not fail this step, so that the comment and the label
# are still posted; verdict.sh fails the check. Bad usage (an unknown base, say)
# fails here, exit 2.
#
#   ALLOT_DIR          the capacity repository, relative to the work tree (default .)
#   ALLOT_BASE         the base as allot's --base reads it: ref:REF or dir:DIR
#                      (default: ref:$ALLOT_BASE_SHA, else the target branch)
#   ALLOT_BASE_SHA     the commit of the target branch the change is compared with,
#                      as the forge names it (GitHub: pull_request.base.sha; GitLab:
#                      CI_MERGE_REQUEST_DIFF_BASE_SHA); fetched when the clone lacks it
#   ALLOT_BASE_BRANCH  the target branch of the change: fetched as
#                      refs/remotes/origin/$ALLOT_BASE_BRANCH when there is no
#                      ALLOT_BASE_SHA, or when fetching that commit alone fails
#   ALLOT_SIMULATE     optional workload file: adds the what-if to the comment
#   ALLOT_CODEOWNERS   optional path of the committed CODEOWNERS (e.g. .github/CODEOWNERS):
#                      when allot render --codeowners renders another, verdict.sh fails
#   ALLOT_TARGET       the scheduler the quotas run on: allot (default), kueue or slurm;
#                      with kueue, the rules Kueue only approximates are findings and the
#                      comment lists every approximation in force
#   ALLOT_STRICT       true: an approximation its tier, team or pool does not accept
#                      (approximate: true) is an error, as a manager running Kueue refuses it
set -eu
. "$(dirname -- "$0")/lib.sh"
need git jq
[ -x "$ALLOT" ] || die "$ALLOT is not an executable (run ci/scripts/install.sh, or set ALLOT)"

dir=${ALLOT_DIR:-.}
[ -n "${ALLOT_GIT_DIR:-}" ] || ALLOT_GIT_DIR=$(git_dir "$dir") || die "$dir is in no Git checkout (set ALLOT_GIT_DIR)"
base=${ALLOT_BASE:-}
if [ -z "$base" ]; then
	sha=${ALLOT_BASE_SHA:-}
	branch=${ALLOT_BASE_BRANCH:-}
	case $branch in -* | *..* | *[!A-Za-z0-9._/-]*) die "ALLOT_BASE_BRANCH=$branch: not a branch name" ;; esac
	case $sha in *[!0-9a-f]*) die "ALLOT_BASE_SHA=$sha: not a commit's hex name" ;; esac
	if [ -n "$sha" ]; then
		base=ref:$sha
		if ! git_read cat-file -e "$sha^{commit}" 2>/dev/null; then
			say "fetching $sha, the base of the change"
			git_fetch --depth=1 origin "$sha" 2>/dev/null ||
				{ [ -n "$branch" ] && git_fetch --depth=50 origin "+refs/heads/$branch:refs/remotes/origin/$branch"; } ||
				die "cannot fetch $sha, the base of the change"
			git_read cat-file -e "$sha^{commit}" || die "the base $sha is not in the fetched history of $branch"
		fi
	elif [ -n "$branch" ]; then
		base=ref:refs/remotes/origin/$branch
		if ! git_read rev-parse -q --verify "refs/remotes/origin/$branch^{commit}" >/dev/null; then
			say "fetching $branch, the base of the change"
			git_fetch --depth=1 origin "+refs/heads/$branch:refs/remotes/origin/$branch"
		fi
	else
		die "set ALLOT_BASE_SHA or ALLOT_BASE_BRANCH (the target of the change), or ALLOT_BASE"
	fi
fi
target=${ALLOT_TARGET:-allot}
case $target in '' | *[!a-z]*) die "ALLOT_TARGET=$target: want allot, kueue or slurm" ;; esac
strict=
case ${ALLOT_STRICT:-false} in
true) strict=--strict ;;
false | '') ;;
*) die "ALLOT_STRICT=$ALLOT_STRICT: want true or false" ;;
esac
mkdir -p "$ALLOT_OUT"

# Findings with their annotations (GITHUB_ACTIONS=true) come from validate; the
# plans run without, so each annotation is written once.
status=0
"$ALLOT" validate "$dir" --base "$base" --target "$target" $strict || status=$?
[ "$status" -le 1 ] || exit "$status"
echo "$status" >"$ALLOT_OUT/status"

code=0
GITHUB_ACTIONS='' "$ALLOT" plan "$dir" --base "$base" --target "$target" $strict -o markdown ${ALLOT_SIMULATE:+--simulate "$ALLOT_SIMULATE"} >"$ALLOT_OUT/plan.md" || code=$?
[ "$code" -le 1 ] || exit "$code"
code=0
GITHUB_ACTIONS='' "$ALLOT" plan "$dir" --base "$base" --target "$target" $strict -o json >"$ALLOT_OUT/plan.json" || code=$?
[ "$code" -le 1 ] || exit "$code"

code=0
"$ALLOT" report "$dir" --base "$base" ${ALLOT_SIMULATE:+--simulate "$ALLOT_SIMULATE"} -o "$ALLOT_OUT/report.html" >/dev/null 2>"$ALLOT_OUT/report.log" || code=$?
if [ "$code" -gt 1 ]; then
	cat "$ALLOT_OUT/report.log" >&2
	exit "$code"
fi

# The committed CODEOWNERS must be what allot renders from the teams' owners and
# the policy's approvers (not checked when the configuration has errors).
rm -f "$ALLOT_OUT/codeowners-stale"
if [ -n "${ALLOT_CODEOWNERS:-}" ] && [ "$status" -eq 0 ]; then
	"$ALLOT" render "$dir" --codeowners "$ALLOT_OUT/CODEOWNERS"
	if ! cmp -s "$ALLOT_OUT/CODEOWNERS" "$ALLOT_CODEOWNERS"; then
		say "$ALLOT_CODEOWNERS is not what allot renders: run 'allot render $dir --codeowners $ALLOT_CODEOWNERS' and commit it"
		diff -u "$ALLOT_CODEOWNERS" "$ALLOT_OUT/CODEOWNERS" >&2 || true
		echo "$ALLOT_CODEOWNERS" >"$ALLOT_OUT/codeowners-stale"
	fi
fi

# GitLab's code-quality report: one entry per finding; allot names a finding's
# file relative to the working directory, the work tree here.
jq '[.findings[] | {
	description: "\(.rule): \(.message)",
	check_name: ("allot " + .rule),
	fingerprint: "\(.rule):\(.file):\(.line):\(.col):\(.message)",
	severity: (if .severity == "error" then "major" else "minor" end),
	location: {path: .file, lines: {begin: ([.line, 1] | max)}}
}]' "$ALLOT_OUT/plan.json" >"$ALLOT_OUT/codequality.json"

if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
	cat "$ALLOT_OUT/plan.md" >>"$GITHUB_STEP_SUMMARY"
fi
say "plan written to $ALLOT_OUT/plan.md"
