#!/bin/sh
# label.sh: label the pull or merge request $ALLOT_LABEL (default finance-approval)
# while the plan's approvals include the finance role, and take the label off when
# a later push no longer needs finance.
set -eu
. "$(dirname -- "$0")/lib.sh"
review_target || exit 0
label=${ALLOT_LABEL:-finance-approval}

want=false
if jq -e '[.diff.approvals[]? | select(.role == "finance")] | length > 0' "$ALLOT_OUT/plan.json" >/dev/null; then
	want=true
fi

body=$(mktemp)
resp=$(mktemp)
trap 'rm -f "$body" "$resp"' EXIT
case $(forge) in
github)
	api GET "$ISSUE/labels?per_page=100" >"$resp"
	has=$(jq --arg l "$label" 'any(.[]?; .name == $l)' "$resp")
	if [ "$want" = true ] && [ "$has" = false ]; then
		jq -n --arg l "$label" '{labels: [$l]}' >"$body"
		api POST "$ISSUE/labels" "$body" >/dev/null
	elif [ "$want" = false ] && [ "$has" = true ]; then
		api DELETE "$ISSUE/labels/$(jq -rn --arg l "$label" '$l | @uri')" >/dev/null
	fi
	;;
gitlab)
	api GET "$ISSUE" >"$resp"
	has=$(jq --arg l "$label" 'any(.labels[]?; . == $l)' "$resp")
	if [ "$want" = true ] && [ "$has" = false ]; then
		jq -n --arg l "$label" '{add_labels: $l}' >"$body"
		api PUT "$ISSUE" "$body" >/dev/null
	elif [ "$want" = false ] && [ "$has" = true ]; then
		jq -n --arg l "$label" '{remove_labels: $l}' >"$body"
		api PUT "$ISSUE" "$body" >/dev/null
	fi
	;;
esac
if [ "$want" = true ]; then
	say "finance must approve: labelled $label"
else
	say "finance need not approve: no $label label"
fi
