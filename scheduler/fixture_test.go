package scheduler

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

var t0 = time.Unix(0, 0).UTC()

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

func lim(n GPUs) *GPUs { return &n }

// rack builds n nodes of a flavor with gpus each, hostsPerRack to a rack (racks of
// a block of blockRacks racks when blockRacks > 0); names are prefix-i.
func rack(prefix string, flavor Flavor, n int, gpus GPUs, hostsPerRack, blockRacks int) []Node {
	var out []Node
	for i := range n {
		name := fmt.Sprintf("%s-%d", prefix, i)
		nd := Node{Name: NodeName(name), Flavor: flavor, GPUs: gpus}
		if hostsPerRack > 0 {
			r := i / hostsPerRack
			if blockRacks > 0 {
				nd.Domains = append(nd.Domains, Domain{Level: "block", Name: fmt.Sprintf("%s-b%d", prefix, r/blockRacks)})
			}
			nd.Domains = append(nd.Domains, Domain{Level: "rack", Name: fmt.Sprintf("%s-r%d", prefix, r)}, Domain{Level: "host", Name: name})
		}
		out = append(out, nd)
	}
	return out
}

var (
	tiers = []Tier{
		{Name: "critical", Priority: 1000},
		{Name: "production", Priority: 500},
		{Name: "research", Priority: 100, Preemptible: true},
		{Name: "opportunist", Priority: 0, Preemptible: true, BorrowOnly: true},
	}
)

// wl is a workload of pods x gpp GPUs of flavor "a" submitted at second sec.
func wl(id, team, tier string, pods int64, gpp GPUs, sec int) Workload {
	return Workload{ID: WorkloadID(id), Team: TeamName(team), Tier: TierName(tier), Pods: pods, GPUsPerPod: gpp, Submitted: at(sec)}
}

func withRequire(w Workload, level string) Workload { w.Require = level; return w }
func withPrefer(w Workload, level string) Workload  { w.Prefer = level; return w }
func withFlavors(w Workload, f ...Flavor) Workload  { w.Flavors = f; return w }

// teamQ is a team of cohort c with a nominal (and optional limits) on flavor "a".
func teamQ(name, cohort string, nominal GPUs, borrow, lend *GPUs) Team {
	return Team{Name: TeamName(name), Cohort: CohortName(cohort), Quota: map[Flavor]Quota{"a": {Nominal: nominal, BorrowingLimit: borrow, LendingLimit: lend}}}
}

// orgConfig is five teams t0..t4 of 16 GPUs in cohort org, on the tiers
// and evenTiers.
func orgConfig() Config {
	cfg := Config{Tiers: append(slices.Clone(tiers), evenTiers...), Cohorts: []Cohort{{Name: "org"}}}
	for i := range 5 {
		cfg.Teams = append(cfg.Teams, teamQ(fmt.Sprintf("t%d", i), "org", 16, nil, nil))
	}
	return cfg
}

// orgArrival is a random workload w<id> of an orgConfig world submitted at
// second sec: most from t0 and t1, which borrow; one in three a gang held
// to one of levels ("": none); with rules, three in four with placement
// rules of ruleClasses.
func orgArrival(rng *rand.Rand, cfg Config, id, sec int, levels []string, rules bool) Workload {
	team := fmt.Sprintf("t%d", min(4, int(rng.ExpFloat64()*1.2)))
	w := wl(fmt.Sprintf("w%d", id), team, string(cfg.Tiers[rng.IntN(len(cfg.Tiers))].Name), 1, GPUs(1+rng.IntN(8)), sec)
	if rng.IntN(3) == 0 {
		w.Pods, w.GPUsPerPod = int64(2+rng.IntN(3)), GPUs(2*(1+rng.IntN(4)))
		w.Require = levels[rng.IntN(len(levels))]
	}
	if rules && rng.IntN(4) > 0 {
		w.Rules = randomRules(rng, ruleClasses)
	}
	return w
}

type fx struct {
	t   *testing.T
	s   *Scheduler
	now time.Time
	// log of every admission and preemption, for the invariants.
	admitted map[WorkloadID]Admission
}

func newFx(t *testing.T, cfg Config, nodes []Node, opts Options) *fx {
	t.Helper()
	if cfg.Tiers == nil {
		cfg.Tiers = tiers
	}
	s, err := New(cfg, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	for _, n := range nodes {
		if err := s.AddNode(n); err != nil {
			t.Fatalf("AddNode: %v", err)
		}
	}
	return &fx{t: t, s: s, admitted: map[WorkloadID]Admission{}}
}

func noReserve() Options { return Options{ReserveAfter: -1} }

func (f *fx) submit(ws ...Workload) {
	f.t.Helper()
	for _, w := range ws {
		if err := f.s.Submit(w); err != nil {
			f.t.Fatalf("Submit %s: %v", w.ID, err)
		}
	}
}

// cycle runs a cycle at second sec, starts every admitted gang and keeps the log.
func (f *fx) cycle(sec int) Results {
	f.t.Helper()
	f.now = at(sec)
	if err := checkQueues(f.s); err != nil {
		f.t.Fatalf("before the cycle at %ds: %v", sec, err)
	}
	res := f.s.Cycle(f.now)
	if err := checkQueues(f.s); err != nil {
		f.t.Fatalf("after the cycle at %ds: %v", sec, err)
	}
	for _, p := range res.Preempted {
		delete(f.admitted, p.Victim)
	}
	for _, e := range res.Evicted {
		delete(f.admitted, e.Workload)
	}
	for _, a := range res.Admitted {
		f.admitted[a.Workload] = a
		if f.s.opts.GangTimeout > 0 {
			if err := f.s.Started(a.Workload); err != nil {
				f.t.Fatalf("Started: %v", err)
			}
		}
	}
	return res
}

func (f *fx) finish(id WorkloadID) {
	f.t.Helper()
	if err := f.s.Finish(id); err != nil {
		f.t.Fatal(err)
	}
	delete(f.admitted, id)
}

func admittedIDs(res Results) []WorkloadID {
	var out []WorkloadID
	for _, a := range res.Admitted {
		out = append(out, a.Workload)
	}
	slices.Sort(out)
	return out
}

// pending counts the workloads that wait.
func (f *fx) pending() int { return countPending(f.s) }

func (f *fx) running() []WorkloadID {
	var out []WorkloadID
	for id := range f.admitted {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

func (f *fx) reasonCode(id WorkloadID) ReasonCode {
	r, ok := f.s.Reason(id)
	if !ok {
		return ""
	}
	return r.Code
}

func (f *fx) nodesOf(id WorkloadID) []NodeName {
	var out []NodeName
	for _, p := range f.admitted[id].Pods {
		out = append(out, p.Node)
	}
	slices.Sort(out)
	return out
}
