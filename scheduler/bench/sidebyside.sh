#!/bin/sh
# sidebyside.sh: the simulator's benchmarks of a fleet whose queue starves
# (BenchmarkSimStarving, scheduler/sim/starve_bench_test.go), run by the code
# of a base commit and of the working tree alternately; prints each run's
# user CPU seconds and figures, then the least of each side.
#
#   scheduler/bench/sidebyside.sh [base] [runs] [bench regexp]
#
# base defaults to 02ee642 (issue 43's "today"), runs to 3, the regexp to
# every sub-benchmark but the 2,500-node one (minutes each). The base is
# checked out in a temporary worktree (removed after) and given this tree's
# benchmark file; the working tree's own checkout is not touched. The
# machine may be shared: the least of several runs is the honest figure.
set -eu
base=${1:-02ee642}
runs=${2:-3}
bench=${3:-'SimStarving/(busy/nodes=(156|625)$|helios)'}
root=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$tmp/base" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
# Bases before the agent had its own module (624a032) link NVML: they need the
# tag and the C flags, which the working tree ignores.
: "${GOFLAGS:=-tags=kustomize_disable_go_plugin_support}"
: "${CGO_CFLAGS:=-O2 -g -Wno-deprecated-declarations}"
: "${ALLOT_SHARED:=$root/../shared}"
export GOFLAGS CGO_CFLAGS ALLOT_SHARED

git -C "$root" worktree add --detach "$tmp/base" "$base" >/dev/null 2>&1
cp "$root/scheduler/sim/starve_bench_test.go" "$tmp/base/scheduler/sim/"
(cd "$tmp/base" && go test -c -o "$tmp/sim.base" ./scheduler/sim/)
(cd "$root" && go test -c -o "$tmp/sim.new" ./scheduler/sim/)

# Sub-benchmarks one at a time, so that each run's CPU is its own.
names=$(for n in busy/nodes=156 busy/nodes=625 busy/nodes=2500 helios/nodes=40; do
	printf 'SimStarving/%s\n' "$n" | grep -Eq "$bench" && echo "$n" || :
done)
out=$tmp/runs
: >"$out"
for n in $names; do
	i=0
	while [ "$i" -lt "$runs" ]; do
		for side in base new; do
			res=$(cd "$root/scheduler/sim" && /usr/bin/time -f 'cpu %U' "$tmp/sim.$side" -test.run '^$' \
				-test.bench "^BenchmarkSimStarving\$/^${n%%/*}\$/^${n#*/}\$" -test.benchtime 1x 2>&1 | grep -E '^(Benchmark|cpu)')
			cpu=$(printf '%s\n' "$res" | sed -n 's/^cpu //p')
			figs=$(printf '%s\n' "$res" | grep '^Benchmark' | awk '{for (i = 5; i < NF; i += 2) printf "%s=%s ", $(i+1), $i}')
			echo "$n $side cpu=${cpu}s $figs" | tee -a "$out"
		done
		i=$((i + 1))
	done
done
echo "least user CPU (s), load $(cut -d' ' -f1-3 /proc/loadavg):"
for n in $names; do
	b=$(grep "^$n base " "$out" | sed 's/.*cpu=\([0-9.]*\)s.*/\1/' | sort -g | head -1)
	w=$(grep "^$n new " "$out" | sed 's/.*cpu=\([0-9.]*\)s.*/\1/' | sort -g | head -1)
	echo "$n $base=$b new=$w ratio=$(awk "BEGIN{printf \"%.2f\", $w/$b}")"
done
