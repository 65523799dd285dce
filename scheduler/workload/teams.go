package workload

import "slices"

// Assign maps every job onto the given teams and tiers. A job whose team is one of
// teams keeps it; the others' teams (a trace's users) are dealt round-robin onto
// teams in order of first appearance, so one user stays in one team. A job whose
// tier is one of tiers (highest priority first) keeps it; openb's QoS classes map
// by rank (Guaranteed and LS to the highest, Burstable to the middle, BE to the
// lowest); anything else gets def.
func Assign(jobs []Spec, teams, tiers []string, def string) {
	if len(teams) == 0 {
		return
	}
	users := map[string]string{}
	next := 0
	for i := range jobs {
		j := &jobs[i]
		if !slices.Contains(teams, j.Team) {
			t, ok := users[j.Team]
			if !ok {
				t = teams[next%len(teams)]
				next++
				users[j.Team] = t
			}
			j.Team = t
		}
		if !slices.Contains(tiers, j.Tier) {
			j.Tier = qosTier(j.Tier, tiers, def)
		}
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
