#!/bin/sh
# comment.sh: post $ALLOT_OUT/plan.md on the pull or merge request, or update the
# comment that already starts with the marker (never a second one).
set -eu
. "$(dirname -- "$0")/lib.sh"
review_target || exit 0

# GitHub refuses comments over 65,536 characters: a larger plan is cut, and the
# job log and the artifact keep it whole.
limit=60000
body=$(mktemp)
page=$(mktemp)
trap 'rm -f "$body" "$page"' EXIT
if [ "$(wc -c <"$ALLOT_OUT/plan.md")" -gt "$limit" ]; then
	{
		head -c "$limit" "$ALLOT_OUT/plan.md"
		printf '\n\n…the plan is cut here; the job log has all of it.\n'
	} | jq -Rs '{body: .}' >"$body"
else
	jq -Rs '{body: .}' <"$ALLOT_OUT/plan.md" >"$body"
fi

case $(forge) in
github) list="$ISSUE/comments" edit="/repos/$GITHUB_REPOSITORY/issues/comments" verb=PATCH ;;
gitlab) list="$ISSUE/notes" edit="$ISSUE/notes" verb=PUT ;;
esac

# Find the comment by its first line, page by page (100 a page).
id='' n=1
while :; do
	api GET "$list?per_page=100&page=$n" >"$page"
	id=$(jq -r --arg m "$MARKER" 'first(.[] | select((.body // "") | startswith($m)) | .id) // empty' "$page")
	[ -z "$id" ] && [ "$(jq length "$page")" -ge 100 ] || break
	n=$((n + 1))
done

if [ -n "$id" ]; then
	api "$verb" "$edit/$id" "$body" >/dev/null
	say "updated comment $id"
else
	api POST "$list" "$body" >"$page"
	id=$(jq -r .id "$page")
	say "posted comment $id"
fi
