package workload

import "slices"

// Assign maps every job onto the given teams and tiers. A job whose team is one of
// teams keeps it; the others' teams (a trace's users) are dealt round-robin onto
// teams in order of first appearance, so one user stays in one team; a job of a
// trace that names neither user nor team (openb's pod lists) is dealt on its
// own, so that such a trace spreads over the teams. A job whose
// tier is one of tiers (highest priority first) keeps it; openb's QoS classes map
// by rank (Guaranteed and LS to the highest, Burstable to the middle, BE to the
// lowest); anything else gets def.
func Assign(jobs []Spec, teams, tiers []string, def string) {
	if len(teams) == 0 {
		return
	}
	NewDealer(teams).Deal(jobs)
	for i := range jobs {
		if j := &jobs[i]; !slices.Contains(tiers, j.Tier) {
			j.Tier = qosTier(j.Tier, tiers, def)
		}
	}
}

// Dealer deals a trace's users onto teams as Assign does, keeping who went
// where from one call to the next: allot import deals a trace batch by
// batch.
type Dealer struct {
	teams []string
	users map[string]string
	next  int
}

// NewDealer returns a Dealer onto teams (none: Deal keeps every team).
func NewDealer(teams []string) *Dealer {
	return &Dealer{teams: teams, users: map[string]string{}}
}

// Deal gives every job whose team is not one of the dealer's teams the
// team its user (its Team; for a job of sacct's, whose Team is its Slurm
// account, its User) was dealt; a job with no team (its trace names no
// user) the next team in turn.
func (d *Dealer) Deal(jobs []Spec) {
	if len(d.teams) == 0 {
		return
	}
	for i := range jobs {
		j := &jobs[i]
		if slices.Contains(d.teams, j.Team) {
			continue
		}
		if j.Team == "" {
			j.Team = d.teams[d.next%len(d.teams)]
			d.next++
			continue
		}
		user := j.Team
		if j.Slurm != nil && j.User != "" {
			user = j.User // a Slurm account that is no team: its users are dealt
		}
		t, ok := d.users[user]
		if !ok {
			t = d.teams[d.next%len(d.teams)]
			d.next++
			d.users[user] = t
		}
		j.Team = t
	}
}

func qosTier(qos string, tiers []string, def string) string {
	if len(tiers) == 0 {
		return def
	}
	switch qos {
	case "Guaranteed", "LS":
		return tiers[0]
	case "Burstable":
		return tiers[len(tiers)/2]
	case "BE":
		return tiers[len(tiers)-1]
	}
	return def
}
