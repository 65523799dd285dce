package scheduler

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestRules checks each rule of the scheduling semantics on a small fleet: the
// workloads of first are submitted and admitted at 0 (in that order, one cycle
// each), then those of then are submitted together and one cycle runs.
func TestRules(t *testing.T) {
	twoTeams := func(aBorrow, aLend, bBorrow, bLend *GPUs) Config {
		return Config{
			Cohorts: []Cohort{{Name: "ml"}},
			Teams:   []Team{teamQ("a", "ml", 16, aBorrow, aLend), teamQ("b", "ml", 16, bBorrow, bLend)},
		}
	}
	fourNodes := rack("n", "a", 4, 8, 0, 0)
	for name, tc := range map[string]struct {
		cfg         Config
		nodes       []Node
		first, then []Workload
		wantRunning []WorkloadID
		wantPreempt map[WorkloadID]PreemptReason
		wantReasons map[WorkloadID]ReasonCode
	}{
		"a team without a cohort stops at its nominal": {
			cfg:         Config{Teams: []Team{teamQ("a", "", 8, nil, nil)}},
			nodes:       fourNodes,
			then:        []Workload{wl("w1", "a", "production", 1, 8, 1), wl("w2", "a", "production", 1, 8, 2)},
			wantRunning: []WorkloadID{"w1"},
			wantReasons: map[WorkloadID]ReasonCode{"w2": ReasonOverQuota},
		},
		"a workload runs only on a flavor its team has quota for": {
			cfg:         Config{Teams: []Team{teamQ("a", "", 32, nil, nil)}},
			nodes:       append(rack("b", "b", 2, 8, 0, 0), rack("n", "a", 1, 8, 0, 0)...),
			then:        []Workload{wl("w1", "a", "production", 1, 8, 1), withFlavors(wl("w2", "a", "production", 1, 8, 2), "b")},
			wantRunning: []WorkloadID{"w1"},
			wantReasons: map[WorkloadID]ReasonCode{"w2": ReasonNoFlavor},
		},
		"borrowing up to the borrowing limit from the cohort's idle quota": {
			cfg:         twoTeams(lim(8), nil, nil, nil),
			nodes:       fourNodes,
			then:        []Workload{wl("w1", "a", "production", 2, 8, 1), wl("w2", "a", "production", 1, 8, 2), wl("w3", "a", "production", 1, 8, 3)},
			wantRunning: []WorkloadID{"w1", "w2"},
			wantReasons: map[WorkloadID]ReasonCode{"w3": ReasonOverQuota},
		},
		"a lending limit keeps the rest of the lender's nominal": {
			cfg:         twoTeams(nil, nil, nil, lim(8)),
			nodes:       fourNodes,
			then:        []Workload{wl("w1", "a", "production", 3, 8, 1), wl("w2", "a", "production", 1, 8, 2)},
			wantRunning: []WorkloadID{"w1"},
			wantReasons: map[WorkloadID]ReasonCode{"w2": ReasonCohortExhausted},
		},
		"a team under its nominal reclaims borrowed capacity whatever its tier": {
			cfg:         twoTeams(nil, nil, nil, nil),
			nodes:       fourNodes,
			first:       []Workload{wl("b1", "b", "critical", 2, 8, 0), wl("b2", "b", "critical", 1, 8, 0), wl("a1", "a", "research", 1, 8, 0)},
			then:        []Workload{wl("w", "a", "research", 1, 8, 1)},
			wantRunning: []WorkloadID{"a1", "b1", "w"},
			wantPreempt: map[WorkloadID]PreemptReason{"b2": PreemptReclaim},
		},
		"a borrowing workload never preempts one inside its owner's nominal": {
			cfg:         twoTeams(nil, nil, nil, nil),
			nodes:       fourNodes,
			first:       []Workload{wl("a1", "a", "production", 2, 8, 0), wl("b1", "b", "research", 2, 8, 0)},
			then:        []Workload{wl("w", "a", "critical", 1, 8, 1)},
			wantRunning: []WorkloadID{"a1", "b1"},
			wantReasons: map[WorkloadID]ReasonCode{"w": ReasonCohortExhausted},
		},
		"a team under its nominal takes its own lower tier and reclaims in one move": {
			// Alpha ends at exactly its nominal only with both evictions.
			cfg: Config{
				Cohorts: []Cohort{{Name: "ml"}},
				Teams:   []Team{teamQ("alpha", "ml", 2, nil, nil), teamQ("beta", "ml", 0, nil, nil), teamQ("gamma", "ml", 2, nil, nil)},
			},
			nodes:       rack("n", "a", 4, 1, 0, 0),
			first:       []Workload{wl("a-low", "alpha", "research", 1, 1, 0), wl("b1", "beta", "production", 1, 1, 0), wl("b2", "beta", "production", 1, 1, 0), wl("b3", "beta", "production", 1, 1, 0)},
			then:        []Workload{wl("w", "alpha", "production", 2, 1, 1)},
			wantRunning: []WorkloadID{"b1", "b2", "w"},
			wantPreempt: map[WorkloadID]PreemptReason{"a-low": PreemptHigherTier, "b3": PreemptReclaim},
		},
		"a team under its nominal preempts the low tier of every team of its cohort": {
			cfg:         twoTeams(nil, nil, nil, nil),
			nodes:       rack("n", "a", 32, 1, 0, 0),
			first:       []Workload{wl("a-low", "a", "research", 8, 1, 0), wl("b-low", "b", "research", 8, 1, 0), wl("b-mid", "b", "production", 16, 1, 0)},
			then:        []Workload{wl("w", "a", "critical", 16, 1, 1)},
			wantRunning: []WorkloadID{"b-mid", "w"},
			wantPreempt: map[WorkloadID]PreemptReason{"a-low": PreemptHigherTier, "b-low": PreemptReclaim},
		},
		"a team that would end above its nominal takes only its own lower tier": {
			// Evicting a-low and reclaiming b-low would fit the nodes and
			// the cohort, but a would end at 20 of a nominal of 16.
			cfg:         twoTeams(nil, nil, nil, nil),
			nodes:       rack("n", "a", 32, 1, 0, 0),
			first:       []Workload{wl("a-low", "a", "research", 8, 1, 0), wl("a-prod", "a", "production", 4, 1, 0), wl("b-low", "b", "research", 8, 1, 0), wl("b-mid", "b", "production", 12, 1, 0)},
			then:        []Workload{wl("w", "a", "critical", 16, 1, 1)},
			wantRunning: []WorkloadID{"a-low", "a-prod", "b-low", "b-mid"},
			wantReasons: map[WorkloadID]ReasonCode{"w": ReasonCohortExhausted},
		},
		"within a team a higher tier preempts a lower preemptible one": {
			cfg:         Config{Teams: []Team{teamQ("a", "", 16, nil, nil)}},
			nodes:       fourNodes,
			first:       []Workload{wl("r1", "a", "research", 1, 8, 0), wl("p1", "a", "production", 1, 8, 0)},
			then:        []Workload{wl("w", "a", "critical", 1, 8, 1)},
			wantRunning: []WorkloadID{"p1", "w"},
			wantPreempt: map[WorkloadID]PreemptReason{"r1": PreemptHigherTier},
		},
		"a tier that is not preemptible is not preempted": {
			cfg:         Config{Teams: []Team{teamQ("a", "", 16, nil, nil)}},
			nodes:       fourNodes,
			first:       []Workload{wl("p1", "a", "production", 2, 8, 0)},
			then:        []Workload{wl("w", "a", "critical", 1, 8, 1)},
			wantRunning: []WorkloadID{"p1"},
			wantReasons: map[WorkloadID]ReasonCode{"w": ReasonOverQuota},
		},
		"victims: lowest tier first, then most recently started, and no more than needed": {
			cfg:   Config{Teams: []Team{teamQ("a", "", 32, nil, nil)}},
			nodes: fourNodes,
			first: []Workload{
				wl("r-old", "a", "research", 1, 8, 0), wl("r-new", "a", "research", 1, 8, 0), wl("p1", "a", "production", 1, 8, 0),
				wl("o1", "a", "opportunist", 1, 4, 0), wl("p2", "a", "production", 1, 4, 0),
			},
			then:        []Workload{wl("w", "a", "critical", 1, 8, 1)},
			wantRunning: []WorkloadID{"o1", "p1", "p2", "r-old", "w"},
			wantPreempt: map[WorkloadID]PreemptReason{"r-new": PreemptHigherTier},
		},
		"the lowest tier goes first": {
			cfg:         Config{Teams: []Team{teamQ("a", "", 32, nil, nil)}},
			nodes:       rack("n", "a", 2, 8, 0, 0),
			first:       []Workload{wl("r1", "a", "research", 1, 8, 0), wl("o1", "a", "opportunist", 1, 8, 0)},
			then:        []Workload{wl("w", "a", "critical", 1, 8, 1)},
			wantRunning: []WorkloadID{"r1", "w"},
			wantPreempt: map[WorkloadID]PreemptReason{"o1": PreemptHigherTier},
		},
		"nothing is preempted for a workload that still would not fit": {
			cfg:         Config{Teams: []Team{teamQ("a", "", 64, nil, nil)}},
			nodes:       fourNodes,
			first:       []Workload{wl("r1", "a", "research", 1, 8, 0), wl("p1", "a", "production", 3, 8, 0)},
			then:        []Workload{wl("w", "a", "critical", 2, 8, 1)},
			wantRunning: []WorkloadID{"p1", "r1"},
			wantReasons: map[WorkloadID]ReasonCode{"w": ReasonInsufficientNodes},
		},
		"a borrowOnly tier counts as borrowed even inside its team's nominal": {
			cfg:         twoTeams(nil, nil, nil, nil),
			nodes:       rack("n", "a", 3, 8, 0, 0),
			first:       []Workload{wl("o1", "a", "opportunist", 2, 8, 0), wl("b1", "b", "production", 1, 8, 0)},
			then:        []Workload{wl("w", "b", "research", 1, 8, 1)},
			wantRunning: []WorkloadID{"b1", "w"},
			wantPreempt: map[WorkloadID]PreemptReason{"o1": PreemptReclaim},
		},
		"a gang is placed whole or not at all": {
			cfg:         Config{Teams: []Team{teamQ("a", "", 64, nil, nil)}},
			nodes:       fourNodes,
			first:       []Workload{wl("p1", "a", "production", 1, 4, 0)},
			then:        []Workload{wl("g", "a", "production", 4, 8, 1)},
			wantRunning: []WorkloadID{"p1"},
			wantReasons: map[WorkloadID]ReasonCode{"g": ReasonInsufficientNodes},
		},
		"smaller work backfills around a gang that does not fit yet": {
			cfg:         Config{Teams: []Team{teamQ("a", "", 64, nil, nil)}},
			nodes:       fourNodes,
			first:       []Workload{wl("p1", "a", "production", 1, 4, 0)},
			then:        []Workload{wl("g", "a", "production", 4, 8, 1), wl("s", "a", "production", 1, 8, 2)},
			wantRunning: []WorkloadID{"p1", "s"},
			wantReasons: map[WorkloadID]ReasonCode{"g": ReasonInsufficientNodes},
		},
		"higher tier first within a team, then submit time": {
			cfg:         Config{Teams: []Team{teamQ("a", "", 64, nil, nil)}},
			nodes:       rack("n", "a", 1, 8, 0, 0),
			then:        []Workload{wl("early", "a", "research", 1, 8, 1), wl("late", "a", "production", 1, 8, 5), wl("later", "a", "production", 1, 8, 6)},
			wantRunning: []WorkloadID{"late"},
			wantReasons: map[WorkloadID]ReasonCode{"early": ReasonBehindHigherTier, "later": ReasonBehindHigherTier},
		},
		"across teams the one furthest below its weighted fair share goes first": {
			cfg: Config{Cohorts: []Cohort{{Name: "ml"}}, Teams: []Team{
				teamQ("a", "ml", 16, nil, nil),
				{Name: "b", Cohort: "ml", Weight: 2, Quota: map[Flavor]Quota{"a": {Nominal: 16}}},
			}},
			nodes:       rack("n", "a", 3, 8, 0, 0),
			first:       []Workload{wl("a1", "a", "research", 1, 4, 0), wl("b1", "b", "research", 1, 6, 0)},
			then:        []Workload{wl("a2", "a", "research", 1, 8, 1), wl("b2", "b", "research", 1, 8, 2)},
			wantRunning: []WorkloadID{"a1", "b1", "b2"},
			wantReasons: map[WorkloadID]ReasonCode{"a2": ReasonBehindHigherTier},
		},
		"required topology: all pods in one domain of the level": {
			cfg:         Config{Teams: []Team{teamQ("a", "", 64, nil, nil)}},
			nodes:       rack("n", "a", 4, 8, 2, 0),
			first:       []Workload{wl("p1", "a", "production", 1, 8, 0)},
			then:        []Workload{withRequire(wl("g", "a", "production", 3, 8, 1), "rack")},
			wantRunning: []WorkloadID{"p1"},
			wantReasons: map[WorkloadID]ReasonCode{"g": ReasonNoTopologyDomain},
		},
		"preferred topology falls back to a wider level": {
			cfg:         Config{Teams: []Team{teamQ("a", "", 64, nil, nil)}},
			nodes:       rack("n", "a", 4, 8, 2, 0),
			first:       []Workload{wl("p1", "a", "production", 1, 8, 0)},
			then:        []Workload{withPrefer(wl("g", "a", "production", 3, 8, 1), "rack")},
			wantRunning: []WorkloadID{"g", "p1"},
		},
		"unhealthy nodes are not placed on": {
			cfg: Config{Teams: []Team{teamQ("a", "", 64, nil, nil)}},
			nodes: func() []Node {
				n := rack("n", "a", 2, 8, 0, 0)
				n[1].Unhealthy = true
				return n
			}(),
			then:        []Workload{wl("g", "a", "production", 2, 8, 1), wl("s", "a", "production", 1, 8, 2)},
			wantRunning: []WorkloadID{"s"},
			wantReasons: map[WorkloadID]ReasonCode{"g": ReasonInsufficientNodes},
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFx(t, tc.cfg, tc.nodes, noReserve())
			for i, w := range tc.first {
				f.submit(w)
				if res := f.cycle(i); len(res.Admitted) != 1 {
					t.Fatalf("setup: %s not admitted: %+v", w.ID, f.s.workloads[w.ID].reason)
				}
			}
			f.submit(tc.then...)
			res := f.cycle(10)
			if diff := cmp.Diff(tc.wantRunning, f.running(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("running (-want +got):\n%s", diff)
			}
			gotPre := map[WorkloadID]PreemptReason{}
			for _, p := range res.Preempted {
				gotPre[p.Victim] = p.Reason
			}
			if diff := cmp.Diff(tc.wantPreempt, gotPre, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("preempted (-want +got):\n%s", diff)
			}
			gotReasons := map[WorkloadID]ReasonCode{}
			for _, w := range tc.then {
				if c := f.reasonCode(w.ID); c != "" {
					gotReasons[w.ID] = c
				}
			}
			if diff := cmp.Diff(tc.wantReasons, gotReasons, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("reasons (-want +got):\n%s", diff)
			}
		})
	}
}
