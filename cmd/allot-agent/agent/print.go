package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/allot-dev/allot/fleet/health"
	"github.com/allot-dev/allot/fleet/nodestate"
)

// DryRun publishes reports on a writer instead of the node: what the agent
// found, and what it would write. It needs no cluster.
type DryRun struct {
	Out io.Writer
	// Node names the node in the output.
	Node string
	// JSON prints one JSON object per poll instead of text.
	JSON bool
	// BootIDFile is read for the boot ID (the kernel's
	// /proc/sys/kernel/random/boot_id); empty: none.
	BootIDFile string
}

// Load reads the boot ID; the GPU count comes from --expected-gpus.
func (d *DryRun) Load(context.Context) (Facts, error) {
	if d.BootIDFile == "" {
		return Facts{}, nil
	}
	b, err := os.ReadFile(d.BootIDFile)
	if err != nil {
		return Facts{}, fmt.Errorf("reading the boot ID: %w", err)
	}
	return Facts{BootID: strings.TrimSpace(string(b))}, nil
}

// Finding is the dry run's JSON output.
type Finding struct {
	Node   string        `json:"node"`
	Report health.Report `json:"report"`
	// Would is what the agent would write on the node.
	Would Would `json:"would"`
}

// Would is the node state a report stands for.
type Would struct {
	Condition   string `json:"condition"`
	Reason      string `json:"reason"`
	HealthyGPUs string `json:"healthyGPUsAnnotation,omitempty"`
	Taint       string `json:"taint,omitempty"`
}

func would(rep health.Report) Would {
	w := Would{Condition: "True", Reason: rep.Reason}
	if !rep.Healthy {
		w.Condition = "False"
		w.HealthyGPUs = fmt.Sprint(rep.HealthyGPUs)
	}
	if rep.Fatal {
		w.Taint = nodestate.TaintGPUFault + ":NoSchedule"
	}
	return w
}

// Publish prints rep.
func (d *DryRun) Publish(_ context.Context, rep health.Report, _ health.State) error {
	if d.JSON {
		enc := json.NewEncoder(d.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(Finding{Node: d.Node, Report: rep, Would: would(rep)})
	}
	return PrintText(d.Out, d.Node, rep)
}

// PrintText writes rep for a human: a verdict, one row per GPU with a column
// per check, the faults with their details, the XIDs, and what would be written.
func PrintText(out io.Writer, node string, rep health.Report) error {
	w := would(rep)
	var b strings.Builder
	fmt.Fprintf(&b, "node %s at %s: GPUHealthy=%s (%s), %d of %d GPUs healthy\n", node, rep.Time.UTC().Format("2006-01-02T15:04:05Z"), w.Condition, rep.Reason, rep.HealthyGPUs, rep.GPUs)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "GPU\tUUID")
	for _, c := range health.Checks {
		if c != health.CheckGPUCount {
			fmt.Fprintf(tw, "\t%s", c)
		}
	}
	fmt.Fprintln(tw)
	rows := map[int]map[health.Check]health.Status{}
	uuids := map[int]string{}
	var order []int
	for _, r := range rep.Results {
		if r.GPU == health.NodeGPU {
			continue
		}
		if rows[r.GPU] == nil {
			rows[r.GPU] = map[health.Check]health.Status{}
			order = append(order, r.GPU)
		}
		rows[r.GPU][r.Check] = r.Status
		if r.UUID != "" {
			uuids[r.GPU] = r.UUID
		}
	}
	for _, g := range order {
		fmt.Fprintf(tw, "%d\t%s", g, uuids[g])
		for _, c := range health.Checks {
			if c == health.CheckGPUCount {
				continue
			}
			s, ok := rows[g][c]
			switch {
			case !ok:
				fmt.Fprint(tw, "\t-")
			case s == health.Fail:
				fmt.Fprint(tw, "\tFAIL")
			case s == health.Skipped:
				fmt.Fprint(tw, "\tn/a")
			default:
				fmt.Fprint(tw, "\tok")
			}
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rep.Results {
		if r.GPU == health.NodeGPU {
			fmt.Fprintf(&b, "node %s: %s %s\n", r.Check, r.Status, r.Detail)
		}
	}
	if len(rep.Faults) > 0 {
		b.WriteString("faults:\n")
		for _, f := range rep.Faults {
			who := "node"
			if f.GPU != health.NodeGPU {
				who = fmt.Sprintf("GPU %d", f.GPU)
			}
			fatal := ""
			if f.Fatal {
				fatal = ", fatal"
			}
			fmt.Fprintf(&b, "  %s %s: %s (%s%s)\n", who, f.Check, f.Detail, f.Phase, fatal)
		}
	}
	for _, x := range rep.XIDs {
		fatal := ""
		if x.Fatal {
			fatal = ", fatal"
		}
		fmt.Fprintf(&b, "XID %d on GPU %d: %s (%s%s)\n", x.Code, x.GPU, x.Description, x.Class, fatal)
	}
	fmt.Fprintf(&b, "would write: condition GPUHealthy=%s reason %s", w.Condition, w.Reason)
	if w.HealthyGPUs != "" {
		fmt.Fprintf(&b, ", annotation %s=%s", nodestate.AnnotationHealthyGPUs, w.HealthyGPUs)
	}
	if w.Taint != "" {
		fmt.Fprintf(&b, ", taint %s", w.Taint)
	}
	b.WriteString("\n")
	_, err := io.WriteString(out, b.String())
	return err
}
