package slurm

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/planner/render"
	"github.com/allot-dev/allot/schema"
)

// Dir holds one directory of files per Slurm cluster, relative to the output.
const Dir = "slurm"

// File names of a cluster's directory.
const (
	FileClusterJSON = "cluster.json"
	FileAccounting  = "accounting.txt"
	FileSlurmConf   = "slurm.conf"
	FileGresConf    = "gres.conf"
	FileTopology    = "topology.conf"
)

// Render returns, for every Slurm cluster of cfg, slurm/<cluster>/ with the
// machine form (cluster.json), the accounting as the sacctmgr commands that
// create it (accounting.txt) and the slurm.conf, gres.conf and (with a
// topology) topology.conf fragments, sorted by path.
func Render(cfg *schema.Config, plan *planner.Plan) ([]render.File, error) {
	var out []render.File
	for _, c := range cfg.ClustersRunBy(schema.SchedulerSlurm) {
		cl, err := Build(cfg, plan, c)
		if err != nil {
			return nil, fmt.Errorf("rendering slurm cluster %s: %w", c, err)
		}
		files, err := cl.Files()
		if err != nil {
			return nil, fmt.Errorf("rendering slurm cluster %s: %w", c, err)
		}
		out = append(out, files...)
	}
	slices.SortFunc(out, func(a, b render.File) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// Files returns the cluster's files under slurm/<cluster>/.
func (c *Cluster) Files() ([]render.File, error) {
	js, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, err
	}
	dir := path.Join(Dir, string(c.Name))
	out := []render.File{
		{Path: path.Join(dir, FileAccounting), Data: []byte(c.accounting())},
		{Path: path.Join(dir, FileClusterJSON), Data: append(js, '\n')},
		{Path: path.Join(dir, FileGresConf), Data: []byte(c.gresConf())},
		{Path: path.Join(dir, FileSlurmConf), Data: []byte(c.slurmConf())},
	}
	if len(c.Switches) > 0 {
		out = append(out, render.File{Path: path.Join(dir, FileTopology), Data: []byte(c.topologyConf())})
	}
	return out, nil
}

func header(c *Cluster, what string) string {
	return fmt.Sprintf("# %s of Slurm cluster %s, rendered by allot from the capacity repository.\n# Do not edit: change the repository.\n", what, c.Name)
}

// slurmConf is the fragment of slurm.conf allot's limits need, and the nodes
// and partitions. CPUs, memory and the rest of each node come from the site.
func (c *Cluster) slurmConf() string {
	var b strings.Builder
	b.WriteString(header(c, "slurm.conf fragment"))
	b.WriteString(`# GPU limits are GrpTRES on GRES, which slurmctld must count. QOS preempt
# lower preemptible tiers by requeueing their jobs.
GresTypes=gpu
AccountingStorageTRES=` + strings.Join(c.TRES, ",") + `
AccountingStorageEnforce=associations,limits,qos,safe
PriorityType=priority/multifactor
PreemptType=preempt/qos
PreemptMode=REQUEUE

`)
	for _, n := range c.Nodes {
		fmt.Fprintf(&b, "# pool %s: flavor %s, %d nodes of %d GPUs\n", n.Pool, n.Flavor, n.Count, n.GPUs)
		fmt.Fprintf(&b, "NodeName=%s Gres=gpu:%s:%d Features=%s State=UNKNOWN\n", n.Names, n.GRESType, n.GPUs, n.Flavor)
	}
	b.WriteString("\n")
	for _, p := range c.Partitions {
		fmt.Fprintf(&b, "PartitionName=%s Nodes=%s State=UP\n", p.Name, strings.Join(p.Nodes, ","))
	}
	return b.String()
}

// gresConf names each pool's GPUs; the device files are NVIDIA's.
func (c *Cluster) gresConf() string {
	var b strings.Builder
	b.WriteString(header(c, "gres.conf fragment"))
	for _, n := range c.Nodes {
		fmt.Fprintf(&b, "NodeName=%s Name=gpu Type=%s File=/dev/nvidia[0-%d]\n", n.Names, n.GRESType, n.GPUs-1)
	}
	return b.String()
}

// topologyConf lays out the switches (topology/tree).
func (c *Cluster) topologyConf() string {
	var b strings.Builder
	b.WriteString(header(c, "topology.conf"))
	b.WriteString("# TopologyPlugin=topology/tree in slurm.conf reads it.\n")
	for _, s := range c.Switches {
		if s.Nodes != "" {
			fmt.Fprintf(&b, "SwitchName=%s Nodes=%s\n", s.Name, s.Nodes)
		} else {
			fmt.Fprintf(&b, "SwitchName=%s Switches=%s\n", s.Name, strings.Join(s.Switches, ","))
		}
	}
	return b.String()
}

// Commands are the sacctmgr commands (argv, never a shell line) that create
// the accounting from nothing, in the order they must run, each section
// after the one it names: the QOS, then which QOS each preempts (a QOS can
// name only QOS that exist), the accounts (parents first), then their
// limits, shares and QOS.
func (c *Cluster) Commands() []Section {
	out := []Section{{Title: "QOS, one per tier"}, {Title: "Which QOS preempt which"},
		{Title: "Accounts: cohorts and teams"}, {Title: "GPU limits, fair share and QOS"}}
	for _, q := range c.QOS {
		out[0].Argv = append(out[0].Argv, append([]string{"sacctmgr", "-i", "add", "qos", q.Name}, q.Settings()...))
		out[1].Argv = append(out[1].Argv, []string{"sacctmgr", "-i", "modify", "qos", "where", "name=" + q.Name, "set", "Preempt=" + orNone(q.Preempt)})
	}
	for _, a := range c.Accounts {
		out[2].Argv = append(out[2].Argv, append([]string{"sacctmgr", "-i", "add", "account", a.Name}, a.CreateSettings()...))
		out[3].Argv = append(out[3].Argv, append([]string{"sacctmgr", "-i", "modify", "account", "where", "name=" + a.Name, "set"}, a.Settings(c.TRES)...))
	}
	return out
}

// Section is a step of Commands.
type Section struct {
	Title string
	Argv  [][]string
}

// accounting is Commands as a file to read.
func (c *Cluster) accounting() string {
	var b strings.Builder
	b.WriteString(header(c, "Accounting"))
	b.WriteString("# The sacctmgr commands that create it: allot slurm apply runs the difference.\n")
	for _, sec := range c.Commands() {
		fmt.Fprintf(&b, "\n# %s\n", sec.Title)
		for _, argv := range sec.Argv {
			fmt.Fprintln(&b, command(argv...))
		}
	}
	return b.String()
}

// Settings are the QOS's sacctmgr key=value arguments but Preempt, which
// names other QOS.
func (q QOS) Settings() []string {
	return []string{"Description=" + q.Description, "Priority=" + strconv.FormatInt(q.Priority, 10), "PreemptMode=" + q.PreemptMode}
}

// CreateSettings are the arguments that create the account.
func (a Account) CreateSettings() []string {
	return []string{"Parent=" + a.Parent, "Description=" + a.Description, "Organization=" + a.Organization}
}

// Settings are the arguments that set the account's limits, share and QOS;
// its GrpTRES names every GPU TRES of the cluster (tres), so that a limit
// the repository no longer sets is cleared.
func (a Account) Settings(tres []string) []string {
	s := []string{"GrpTRES=" + FormatTRES(a.GrpTRES, tres), "Fairshare=" + strconv.FormatInt(a.Fairshare, 10)}
	if a.Team {
		s = append(s, "QOS="+orNone(a.QOS), "DefaultQOS="+a.DefaultQOS)
	}
	return s
}

// SplitList splits a Slurm list (a,b,c); the empty string is none.
func SplitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// ParseTRES reads a TRES list as sacctmgr prints it (gres/gpu:h100=8,
// gres/gpu=8), FormatTRES's inverse; an entry without a count is left out.
func ParseTRES(s string) map[string]int64 {
	m := map[string]int64{}
	for _, kv := range SplitList(s) {
		k, v, ok := strings.Cut(kv, "=")
		if n, err := strconv.ParseInt(v, 10, 64); ok && err == nil {
			m[k] = n
		}
	}
	return m
}

// FormatTRES writes limits as sacctmgr takes them, in names' order, -1 for
// a name without a limit (which clears it).
func FormatTRES(limits map[string]int64, names []string) string {
	parts := make([]string, 0, len(names))
	for _, n := range names {
		v, ok := limits[n]
		if !ok {
			v = -1
		}
		parts = append(parts, n+"="+strconv.FormatInt(v, 10))
	}
	return strings.Join(parts, ",")
}

func orNone(s []string) string { return strings.Join(s, ",") }

// command writes argv as a shell would read it: every argument is a Slurm
// name, a number or a fixed word, so only an empty value needs quotes.
func command(args ...string) string {
	words := make([]string, len(args))
	for i, a := range args {
		words[i] = a
		if strings.HasSuffix(a, "=") {
			words[i] = a + "''"
		}
	}
	return strings.Join(words, " ")
}
