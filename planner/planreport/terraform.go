package planreport

import (
	"fmt"
	"github.com/allot-dev/allot/internal/markdown"
	"io"
	"slices"
	"strings"

	"github.com/allot-dev/allot/planner/render/terraform"
	"github.com/allot-dev/allot/schema"
)

// TerraformCluster is what a speculative plan does to one cluster.
type TerraformCluster struct {
	Cluster schema.ClusterName `json:"cluster"`
	// Changes is false when Terraform has nothing to do.
	Changes bool                 `json:"changes"`
	Add     int                  `json:"add"`
	Change  int                  `json:"change"`
	Destroy int                  `json:"destroy"`
	Pools   []terraform.PoolPlan `json:"pools"`
	// Drift says how the state differs from what allot last applied.
	Drift string `json:"drift,omitempty"`
	// Error is why the cluster could not be planned.
	Error string `json:"error,omitempty"`
}

// TerraformPlan is the speculative Terraform plan of each cluster (plan
// --terraform), the "terraform" member of plan -o json.
type TerraformPlan struct {
	Workdir  string             `json:"workdir"`
	Clusters []TerraformCluster `json:"clusters"`
}

func terraformText(w io.Writer, p *TerraformPlan) {
	fmt.Fprintf(w, "Terraform (speculative plan against the state in %s):\n\n", p.Workdir)
	rows := [][]string{{"CLUSTER", "POOL", "NODES BEFORE", "NODES AFTER", "ADD", "CHANGE", "DESTROY"}}
	for _, c := range p.Clusters {
		for _, pc := range c.Pools {
			rows = append(rows, []string{string(c.Cluster), string(pc.Pool), fmt.Sprint(pc.NodesBefore), fmt.Sprint(pc.NodesAfter),
				fmt.Sprint(pc.Add), fmt.Sprint(pc.Change), fmt.Sprint(pc.Destroy)})
		}
	}
	width := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, cell := range r {
			width[i] = max(width[i], len(cell))
		}
	}
	for _, r := range rows {
		var line strings.Builder
		for i, cell := range r {
			if i < 2 { // names left, numbers right
				fmt.Fprintf(&line, "%-*s  ", width[i], cell)
			} else {
				fmt.Fprintf(&line, "%*s  ", width[i], cell)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(line.String(), " "))
	}
	fmt.Fprintln(w)
	for _, c := range p.Clusters {
		fmt.Fprintln(w, clusterVerdict(c))
	}
}

func terraformMarkdown(w io.Writer, p *TerraformPlan) {
	fmt.Fprintf(w, "#### Terraform\n\nSpeculative plan against the state in %s.\n\n", markdown.Code(p.Workdir))
	fmt.Fprintln(w, "| cluster | pool | nodes before | nodes after | add | change | destroy |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|")
	for _, c := range p.Clusters {
		for _, pc := range c.Pools {
			fmt.Fprintf(w, "| %s | %s | %d | %d | %d | %d | %d |\n", markdown.Text(string(c.Cluster)), markdown.Text(string(pc.Pool)), pc.NodesBefore, pc.NodesAfter, pc.Add, pc.Change, pc.Destroy)
		}
	}
	fmt.Fprintln(w)
	for _, c := range p.Clusters {
		mark := "-"
		if c.Error != "" || c.Drift != "" {
			mark = "- ⚠️"
		}
		// Terraform's error and the drift quote the repository: text.
		fmt.Fprintf(w, "%s %s\n", mark, markdown.Text(clusterVerdict(c)))
	}
}

// clusterVerdict is one line on what the plan of c does, or why it failed.
func clusterVerdict(c TerraformCluster) string {
	var s string
	switch {
	case c.Error != "":
		return fmt.Sprintf("cluster %s: not planned: %s", c.Cluster, c.Error)
	case c.Changes:
		s = fmt.Sprintf("cluster %s: %d to add, %d to change, %d to destroy", c.Cluster, c.Add, c.Change, c.Destroy)
	default:
		s = fmt.Sprintf("cluster %s: no changes", c.Cluster)
	}
	var resumed []string
	for _, pc := range c.Pools {
		if pc.Resumed > 0 {
			resumed = append(resumed, fmt.Sprintf("%s %d", pc.Pool, pc.Resumed))
		}
	}
	if len(resumed) > 0 {
		slices.Sort(resumed)
		s += "; node hooks resumed after a run cut short: " + strings.Join(resumed, ", ")
	}
	if c.Drift != "" {
		s += "; " + c.Drift
	}
	return s
}
