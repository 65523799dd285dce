package capacity

import (
	"fmt"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/planner/render/kube"
)

func team(name string, q ...allotv1.FlavorQuota) allotv1.Team {
	t := allotv1.Team{}
	t.Name = name
	t.Spec.Quota = q
	return t
}

func fq(flavor string, nominal int64) allotv1.FlavorQuota {
	return allotv1.FlavorQuota{Flavor: flavor, Nominal: nominal}
}

func pool(name string, target int64) allotv1.Pool {
	p := allotv1.Pool{}
	p.Name = name
	p.Spec.NodesTarget = target
	return p
}

func ptr[T any](v T) *T { return &v }

// describe renders steps as "phase: +applied -deleted ~pool:from>to" lines.
func describe(steps []Step) string {
	var b strings.Builder
	for _, s := range steps {
		fmt.Fprintf(&b, "%s:", s.Phase)
		for _, o := range s.Apply {
			fmt.Fprintf(&b, " +%s", name(o))
		}
		for _, c := range s.Resize {
			fmt.Fprintf(&b, " ~%s:%d>%d", c.Pool.Name, c.From, c.To)
		}
		for _, o := range s.Delete {
			fmt.Fprintf(&b, " -%s", name(o))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func name(o client.Object) string { return kindOf(o) + "/" + o.GetName() }

func TestStepsOrder(t *testing.T) {
	cur := State{
		Teams: map[string]*allotv1.Team{
			"down":  ptr(team("down", fq("h100", 64))),
			"up":    ptr(team("up", fq("h100", 16))),
			"mixed": ptr(team("mixed", fq("h100", 16), fq("a100", 16))),
			"same":  ptr(team("same", fq("h100", 8))),
			"gone":  ptr(team("gone", fq("h100", 8))),
			"drop":  ptr(team("drop", fq("h100", 8), fq("a100", 8))),
		},
		Pools: map[string]*allotv1.Pool{
			"grow":   ptr(pool("grow", 4)),
			"shrink": ptr(pool("shrink", 10)),
			"steady": ptr(pool("steady", 3)),
			"old":    ptr(pool("old", 2)),
		},
		Tiers: map[string]*allotv1.Tier{"legacy": {}},
	}
	cur.Tiers["legacy"].Name = "legacy"
	want := &kube.Objects{
		Teams: []allotv1.Team{
			team("down", fq("h100", 32)),
			team("drop", fq("h100", 8)),
			team("mixed", fq("h100", 8), fq("a100", 32)),
			team("new", fq("h100", 8)),
			team("same", fq("h100", 8)),
			team("up", fq("h100", 48)),
		},
		Pools: []allotv1.Pool{pool("fresh", 2), pool("grow", 6), pool("shrink", 7), pool("steady", 3)},
		Tiers: []allotv1.Tier{{}},
	}
	want.Tiers[0].Name = "prod"

	got := describe(Steps(cur, want, true))
	wantSteps := `prerequisites: +Tier/prod
lower-quotas: +Team/down +Team/drop -Team/gone
grow-capacity: +Pool/fresh +Pool/grow ~fresh:0>2 ~grow:4>6
raise-quotas: +Team/mixed +Team/new +Team/same +Team/up
shrink-capacity: +Pool/shrink +Pool/steady ~shrink:10>7 ~old:2>0 -Pool/old
prune: -Tier/legacy
`
	if got != wantSteps {
		t.Errorf("Steps =\n%s\nwant\n%s", got, wantSteps)
	}

	noPrune := describe(Steps(cur, want, false))
	if strings.Contains(noPrune, " -") || strings.Contains(noPrune, "prune:") {
		t.Errorf("Steps without prune deletes something:\n%s", noPrune)
	}
}

func TestOnlyLowers(t *testing.T) {
	lim := func(q allotv1.FlavorQuota, borrow, lend *int64) allotv1.FlavorQuota {
		q.BorrowingLimit, q.LendingLimit = borrow, lend
		return q
	}
	for _, c := range []struct {
		name     string
		old, new []allotv1.FlavorQuota
		want     bool
	}{
		{"nominal down", []allotv1.FlavorQuota{fq("a", 8)}, []allotv1.FlavorQuota{fq("a", 4)}, true},
		{"nominal up", []allotv1.FlavorQuota{fq("a", 8)}, []allotv1.FlavorQuota{fq("a", 9)}, false},
		{"unchanged", []allotv1.FlavorQuota{fq("a", 8)}, []allotv1.FlavorQuota{fq("a", 8)}, false},
		{"flavor removed", []allotv1.FlavorQuota{fq("a", 8), fq("b", 8)}, []allotv1.FlavorQuota{fq("a", 8)}, true},
		{"flavor added", []allotv1.FlavorQuota{fq("a", 8)}, []allotv1.FlavorQuota{fq("a", 4), fq("b", 1)}, false},
		{"borrowing limit set", []allotv1.FlavorQuota{fq("a", 8)}, []allotv1.FlavorQuota{lim(fq("a", 8), ptr[int64](4), nil)}, true},
		{"borrowing limit removed", []allotv1.FlavorQuota{lim(fq("a", 8), ptr[int64](4), nil)}, []allotv1.FlavorQuota{fq("a", 8)}, false},
		{"lending limit down, nominal up", []allotv1.FlavorQuota{lim(fq("a", 8), nil, ptr[int64](8))}, []allotv1.FlavorQuota{lim(fq("a", 9), nil, ptr[int64](2))}, false},
	} {
		if got := onlyLowers(c.old, c.new); got != c.want {
			t.Errorf("%s: onlyLowers = %v, want %v", c.name, got, c.want)
		}
	}
}
