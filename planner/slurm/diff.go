package slurm

import (
	"maps"
	"slices"
	"strings"
)

// Live is a cluster's accounting as read: every QOS and every account
// association (user associations are the site's and not read).
type Live struct {
	QOS      []QOS
	Accounts []Account
}

// Change is one step of converging: what it does, and the sacctmgr argv
// that does it (nil for a conflict, which allot reports and never runs).
type Change struct {
	// Op is add, modify, remove or conflict.
	Op string `json:"op"`
	// Kind is qos or account.
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Detail says what differs, for a plan to show.
	Detail string   `json:"detail"`
	Argv   []string `json:"argv,omitempty"`
}

// Owned reports whether allot created the QOS (its Description's mark).
func (q QOS) Owned() bool { return strings.HasPrefix(q.Description, DescriptionPrefix) }

// Owned reports whether allot created the account (its Organization).
func (a Account) Owned() bool { return a.Organization == Organization }

// Diff returns the changes that make live hold want, in a safe order: QOS
// added, QOS settings and Preempt, accounts added (parents first), account
// limits, shares and QOS, accounts removed (children first), QOS removed.
// Only what allot created (Owned) is changed or removed; a wanted name held
// by something allot did not create is a conflict, left alone.
func Diff(want *Cluster, live *Live) []Change {
	liveQOS := map[string]QOS{}
	for _, q := range live.QOS {
		liveQOS[q.Name] = q
	}
	liveAcct := map[string]Account{}
	for _, a := range live.Accounts {
		liveAcct[a.Name] = a
	}
	var adds, settings, preempts, acctAdds, acctSettings, removes []Change
	wantQOS := map[string]bool{}
	for _, q := range want.QOS {
		wantQOS[q.Name] = true
		l, ok := liveQOS[q.Name]
		switch {
		case !ok:
			adds = append(adds, Change{Op: "add", Kind: "qos", Name: q.Name, Detail: strings.Join(q.Settings(), " "),
				Argv: append([]string{"sacctmgr", "-i", "add", "qos", q.Name}, q.Settings()...)})
		case !l.Owned():
			settings = append(settings, conflict("qos", q.Name))
			continue
		case l.Priority != q.Priority || l.PreemptMode != q.PreemptMode:
			settings = append(settings, Change{Op: "modify", Kind: "qos", Name: q.Name, Detail: strings.Join(q.Settings(), " "),
				Argv: append([]string{"sacctmgr", "-i", "modify", "qos", "where", "name=" + q.Name, "set"}, q.Settings()...)})
		}
		if ok && !sameSet(l.Preempt, q.Preempt) || !ok && len(q.Preempt) > 0 { // a new QOS preempts none
			preempts = append(preempts, Change{Op: "modify", Kind: "qos", Name: q.Name, Detail: "Preempt=" + orNone(q.Preempt),
				Argv: []string{"sacctmgr", "-i", "modify", "qos", "where", "name=" + q.Name, "set", "Preempt=" + orNone(q.Preempt)}})
		}
	}
	wantAcct := map[string]bool{}
	for _, a := range want.Accounts { // parents first
		wantAcct[a.Name] = true
		l, ok := liveAcct[a.Name]
		switch {
		case !ok:
			acctAdds = append(acctAdds, Change{Op: "add", Kind: "account", Name: a.Name, Detail: "Parent=" + a.Parent,
				Argv: append([]string{"sacctmgr", "-i", "add", "account", a.Name}, a.CreateSettings()...)})
		case !l.Owned():
			acctSettings = append(acctSettings, conflict("account", a.Name))
			continue
		}
		set := a.Settings(want.TRES)
		if ok && l.Parent != a.Parent {
			set = append([]string{"Parent=" + a.Parent}, set...)
		}
		if !ok || !sameAccount(l, a, want.TRES) {
			acctSettings = append(acctSettings, Change{Op: "modify", Kind: "account", Name: a.Name, Detail: strings.Join(set, " "),
				Argv: append([]string{"sacctmgr", "-i", "modify", "account", "where", "name=" + a.Name, "set"}, set...)})
		}
	}
	// Children before parents: the live order is parents first.
	for i := len(live.Accounts) - 1; i >= 0; i-- {
		if a := live.Accounts[i]; a.Owned() && !wantAcct[a.Name] {
			removes = append(removes, Change{Op: "remove", Kind: "account", Name: a.Name,
				Argv: []string{"sacctmgr", "-i", "remove", "account", "where", "name=" + a.Name}})
		}
	}
	for _, q := range live.QOS {
		if q.Owned() && !wantQOS[q.Name] {
			removes = append(removes, Change{Op: "remove", Kind: "qos", Name: q.Name,
				Argv: []string{"sacctmgr", "-i", "remove", "qos", "where", "name=" + q.Name}})
		}
	}
	return slices.Concat(adds, settings, preempts, acctAdds, acctSettings, removes)
}

func conflict(kind, name string) Change {
	return Change{Op: "conflict", Kind: kind, Name: name,
		Detail: "exists and was not created by allot: left alone (rename it in the repository, or mark it " + Organization + ")"}
}

func sameAccount(l, a Account, tres []string) bool {
	if l.Parent != a.Parent || l.Fairshare != a.Fairshare {
		return false
	}
	for _, n := range tres {
		lv, lok := l.GrpTRES[n]
		av, aok := a.GrpTRES[n]
		if lok != aok || lv != av {
			return false
		}
	}
	return !a.Team || sameSet(l.QOS, a.QOS) && l.DefaultQOS == a.DefaultQOS
}

func sameSet(a, b []string) bool {
	set := func(s []string) map[string]bool {
		m := map[string]bool{}
		for _, x := range s {
			if x != "" {
				m[x] = true
			}
		}
		return m
	}
	return maps.Equal(set(a), set(b))
}
