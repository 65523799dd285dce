package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"time"

	"sigs.k8s.io/yaml"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/planner/finance"
	"github.com/allot-dev/allot/scheduler/sim"
	"github.com/allot-dev/allot/scheduler/workload"
	"github.com/allot-dev/allot/schema"
)

// maxUsageGPUSeconds bounds one Slurm account's GPU-seconds of one kind:
// a million GPUs for a century is less.
const maxUsageGPUSeconds = 1e17

// slurmUsageFile is the JSON of allot slurm usage -o json.
type slurmUsageFile struct {
	Since, Until time.Time
	Usage        []workload.SlurmUsage
}

// readMetered reads what the teams used from each of files: a TeamList
// (JSON or YAML: the GPU-seconds the scheduler metered per flavor, over
// the window from each Team's creation to its status' meteredAt) or the
// JSON of allot slurm usage, whose accounts are cfg's teams of their names
// and whose GRES types and partitions are the flavors of cfg's pools (as
// allot import maps them). What maps onto no team or flavor is left out,
// with a warning on stderr.
func readMetered(stderr io.Writer, files []string, cfg *schema.Config) ([]finance.Metered, error) {
	var out []finance.Metered
	for _, file := range files {
		b, err := readInput(file)
		if err != nil {
			return nil, fmt.Errorf("--usage: %w", err)
		}
		var probe struct {
			Kind  string          `json:"kind"`
			Usage json.RawMessage `json:"usage"`
		}
		if yaml.Unmarshal(b, &probe) == nil && probe.Kind == "" && probe.Usage != nil {
			m, err := readSlurmUsage(stderr, file, b, cfg)
			if err != nil {
				return nil, err
			}
			out = append(out, m...)
			continue
		}
		m, err := readTeamUsage(file, b)
		if err != nil {
			return nil, err
		}
		out = append(out, m...)
	}
	return out, nil
}

// readTeamUsage reads the Teams' metered use from a TeamList (b, read
// from file).
func readTeamUsage(file string, b []byte) ([]finance.Metered, error) {
	var list allotv1.TeamList
	if err := parseKubeList("--usage", file, b, "Team", "kubectl get teams.allot.dev -o yaml, or allot slurm usage -o json", &list); err != nil {
		return nil, err
	}
	var out []finance.Metered
	for i, t := range list.Items {
		if t.Status.MeteredAt == nil {
			continue
		}
		m := finance.Metered{Team: t.Name, WindowSeconds: int64(t.Status.MeteredAt.Sub(t.CreationTimestamp.Time).Seconds()), GPUSeconds: map[string]int64{}}
		for j, u := range t.Status.Metered {
			if u.GPUSeconds < 0 || m.GPUSeconds[u.Flavor] > math.MaxInt64-u.GPUSeconds {
				return nil, fmt.Errorf("--usage %s: items[%d] (Team %s): metered[%d]: %d GPU-seconds of %s: negative, or more than 63 bits in all",
					file, i, t.Name, j, u.GPUSeconds, u.Flavor)
			}
			m.GPUSeconds[u.Flavor] += u.GPUSeconds
		}
		out = append(out, m)
	}
	return out, nil
}

// readSlurmUsage reads the JSON of allot slurm usage (b, read from file)
// as cfg's teams' use.
func readSlurmUsage(stderr io.Writer, file string, b []byte, cfg *schema.Config) ([]finance.Metered, error) {
	var u slurmUsageFile
	if err := json.Unmarshal(b, &u); err != nil {
		return nil, fmt.Errorf("--usage %s: not the JSON of allot slurm usage: %w", file, err)
	}
	window := u.Until.Sub(u.Since)
	if u.Since.IsZero() || u.Until.IsZero() || window < time.Second {
		return nil, fmt.Errorf("--usage %s: since %s, until %s: want the window allot slurm usage reads, at least a second long",
			file, u.Since.Format(time.RFC3339), u.Until.Format(time.RFC3339))
	}
	if cfg == nil {
		return nil, nil // the report shows why the repository does not load
	}
	byGRES, byPartition := sim.SlurmFlavorMaps(cfg)
	byTeam := map[string]*finance.Metered{}
	var order []string
	var left []string
	for i, e := range u.Usage {
		secs := math.Round(e.GPUHours * 3600)
		if math.IsNaN(secs) || secs < 0 || secs > maxUsageGPUSeconds {
			return nil, fmt.Errorf("--usage %s: usage[%d] (account %q): %v GPU-hours: want a number from 0 to %.0f",
				file, i, e.Account, e.GPUHours, maxUsageGPUSeconds/3600)
		}
		flavor := workload.SlurmFlavor(e.GRESType, e.Partition, byGRES, byPartition)
		if cfg.Teams[schema.TeamName(e.Account)] == nil || flavor == "" {
			left = append(left, fmt.Sprintf("account %q, GRES type %q, partition %q (%.2f GPU-hours)", e.Account, e.GRESType, e.Partition, e.GPUHours))
			continue
		}
		m := byTeam[e.Account]
		if m == nil {
			m = &finance.Metered{Team: e.Account, WindowSeconds: int64(window.Seconds()), GPUSeconds: map[string]int64{}}
			byTeam[e.Account] = m
			order = append(order, e.Account)
		}
		m.GPUSeconds[flavor] += int64(secs) // each sum ≤ 2e17 before the check
		if m.GPUSeconds[flavor] > maxUsageGPUSeconds {
			return nil, fmt.Errorf("--usage %s: account %q: more than %.0f GPU-hours of %s in all", file, e.Account, maxUsageGPUSeconds/3600, flavor)
		}
	}
	const shown = 10
	for i, l := range left {
		if i == shown {
			fmt.Fprintf(stderr, "allot: --usage %s: %d more left out\n", file, len(left)-shown)
			break
		}
		fmt.Fprintf(stderr, "allot: --usage %s: %s is no team's use of a flavor of the repository: left out\n", file, l)
	}
	out := make([]finance.Metered, 0, len(order))
	for _, t := range order {
		out = append(out, *byTeam[t])
	}
	return out, nil
}
