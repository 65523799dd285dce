package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/allot-dev/allot/api/contract"
	"github.com/allot-dev/allot/controllers/hub"
	"github.com/allot-dev/allot/fleet/nodestate"
	"github.com/allot-dev/allot/internal/plaintext"
	"github.com/allot-dev/allot/scheduler"
	"github.com/allot-dev/allot/scheduler/sim"
)

func init() { commands = append(commands, newExplainCommand) }

func newExplainCommand() *cobra.Command {
	var kubeconfig, namespace, simFile string
	c := &cobra.Command{
		Use:   "explain [pod/]NAME | job/NAME | jobset/NAME | gang/NAME | slurm/JOBID",
		Short: "Say why a workload is pending (or where it runs), in plain words with the numbers",
		Long: `Explain a workload of the embedded scheduler: a pod, a Job's or a JobSet's pods
or the pods of an allot.dev/gang label, in the cluster (--kubeconfig, -n). It prints
where its pods run, or why they wait, with the scheduler's numbers and what would let
them run. On a fleet's hub, a Job or JobSet it routes is explained by its routing:
where it went and why, or why it waits, and what its worker's scheduler says of it.

slurm/JOBID explains a job of the Slurm cluster this host reaches (squeue and
scontrol; SLURM_CONF names its slurm.conf): Slurm's pending reason in allot's
words (AssocGrpGRES is a team's or cohort's quota, Resources busy nodes,
Priority work ordered first), with the limit, the use and what it asks for.

With --sim REPORT, explain a job of a simulation instead: REPORT is the output of
'allot sim -o json', and the argument is the job's id.

Exit status: 0 explained, 2 not found or bad usage.`,
		Example: `  allot explain job/llm-pretrain -n nlp              # on a hub: where it was routed and why
  allot explain gang/sweep-7 -n robotics --kubeconfig ~/.kube/config
  allot explain slurm/4211                          # on a Slurm head node
  allot sim examples --workload jobs.csv -o json > sim.json && allot explain --sim sim.json job-42`,
		Args: exactArgs(1, "WORKLOAD"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if simFile != "" {
				return explainSim(cmd.OutOrStdout(), simFile, args[0])
			}
			if id, ok := strings.CutPrefix(args[0], "slurm/"); ok {
				return explainSlurm(cmd.Context(), cmd.OutOrStdout(), id)
			}
			cfg, err := restConfig(kubeconfig)
			if err != nil {
				return reachError(err)
			}
			scheme := runtime.NewScheme()
			if err := clientgoscheme.AddToScheme(scheme); err != nil {
				return err
			}
			if err := jobsetv1.AddToScheme(scheme); err != nil {
				return err
			}
			c, err := client.New(cfg, client.Options{Scheme: scheme})
			if err != nil {
				return usageError{fmt.Errorf("reaching the cluster: %w", err)}
			}
			return explainCluster(cmd.Context(), cmd.OutOrStdout(), c, namespace, args[0])
		},
	}
	f := c.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, else in-cluster)")
	f.StringVarP(&namespace, "namespace", "n", "default", "namespace of the workload")
	f.StringVar(&simFile, "sim", "", "explain a job of this 'allot sim -o json' report instead")
	return c
}

// runnerAdvice explains the reasons the in-cluster scheduler adds to the core's.
var runnerAdvice = map[string]string{
	"WaitingForGang":  "A gang is placed only whole, and not all its pods exist yet (see allot.dev/gang-size, or the Job's parallelism).",
	"InvalidWorkload": "The pods do not make a workload the scheduler can take (see the message): fix the pod template's labels or GPU requests, or run it in its team's namespace.",
	"BindFailed":      "The API refused a binding of the gang (an admission policy on pods/binding?): it is retried with a doubling backoff once the cause is gone.",
}

func advice(code string) string {
	if a := scheduler.ReasonCode(code).Advice(); a != "" {
		return a
	}
	return runnerAdvice[code]
}

// explainCluster finds the workload's pods and says where they run or why
// they wait.
func explainCluster(ctx context.Context, out io.Writer, c client.Client, ns, ref string) error {
	kind, name, ok := strings.Cut(ref, "/")
	if !ok {
		kind, name = "pod", ref
	}
	var pods []corev1.Pod
	switch kind {
	case "pod":
		var p corev1.Pod
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p); err != nil {
			return usageError{fmt.Errorf("pod %s/%s: %w", ns, name, err)}
		}
		pods = []corev1.Pod{p}
	case "job", "jobset", "gang":
		switch kind {
		case "job":
			var j batchv1.Job
			err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &j)
			if err == nil && j.Spec.ManagedBy != nil && *j.Spec.ManagedBy == hub.ManagedBy {
				explainHubJob(out, kind, &j, fmt.Sprintf("%d active, %d succeeded, %d failed", j.Status.Active, j.Status.Succeeded, j.Status.Failed))
				return nil
			}
		case "jobset":
			// A cluster that does not serve JobSets has none: their pods are
			// looked for all the same.
			var js jobsetv1.JobSet
			err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &js)
			if err == nil && js.Spec.ManagedBy != nil && *js.Spec.ManagedBy == hub.ManagedBy {
				explainHubJob(out, kind, &js, jobSetStatus(&js.Status))
				return nil
			}
		}
		var list corev1.PodList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return usageError{fmt.Errorf("listing the pods of %s: %w", ns, err)}
		}
		for _, p := range list.Items {
			ctl := metav1.GetControllerOf(&p)
			if kind == "job" && ctl != nil && ctl.Kind == "Job" && ctl.Name == name ||
				kind == "jobset" && p.Labels[jobsetv1.JobSetNameKey] == name ||
				kind == "gang" && p.Labels[contract.LabelGang] == name {
				pods = append(pods, p)
			}
		}
	default:
		return usageError{fmt.Errorf("%q: want pod/NAME, job/NAME, jobset/NAME, gang/NAME or slurm/JOBID", ref)}
	}
	if len(pods) == 0 {
		return usageError{fmt.Errorf("%s in namespace %s has no pods", ref, ns)}
	}
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return cmp.Compare(a.Name, b.Name) })
	first := pods[0]
	fmt.Fprintf(out, "%s in namespace %s: team %s, tier %s, %d pod(s) of %d GPUs\n", ref, ns,
		orDash(first.Labels[contract.LabelTeam]), orDash(first.Labels[contract.LabelTier]), len(pods), podGPUCount(&first))
	if first.Spec.SchedulerName != contract.SchedulerName {
		fmt.Fprintf(out, "  it is scheduled by %q, not by allot\n", first.Spec.SchedulerName)
		return nil
	}
	var bound []string
	var waiting *corev1.Pod
	for i, p := range pods {
		switch {
		case p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed:
		case p.Spec.NodeName != "":
			bound = append(bound, p.Name+" on "+p.Spec.NodeName)
		case waiting == nil:
			waiting = &pods[i]
		}
	}
	events, err := podEvents(ctx, c, ns, pods)
	if err != nil {
		return err
	}
	if waiting == nil {
		fmt.Fprintf(out, "  running: %s\n", strings.Join(bound, ", "))
	} else {
		fmt.Fprintf(out, "  pending: %d of %d pods bound\n", len(bound), len(pods))
		msg, code := "", ""
		for _, cond := range waiting.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse {
				msg = cond.Message
			}
		}
		// The scheduler's event on the pod carries the reason's code.
		for _, e := range events {
			if e.Regarding.Name == waiting.Name && e.Reason == corev1.PodReasonUnschedulable {
				if c, m, ok := strings.Cut(e.Note, ": "); ok && (msg == "" || m == msg) {
					code, msg = c, m
				}
			}
		}
		if msg == "" {
			fmt.Fprintln(out, "  why:   the scheduler has not said yet (is allot manager running?)")
		} else {
			fmt.Fprintf(out, "  why:   %s\n", msg)
		}
		if a := advice(code); a != "" {
			fmt.Fprintf(out, "  what it means: %s\n", a)
		}
	}
	var history []string
	for _, e := range events {
		if e.Reason == "Preempted" || e.Reason == "NodeUnhealthy" || e.Reason == "GangTimeout" || e.Reason == "BindFailed" || e.Reason == "Unbound" {
			history = append(history, fmt.Sprintf("%s %s: %s", e.Regarding.Name, e.Reason, e.Note))
		}
	}
	if len(history) > 0 {
		fmt.Fprintln(out, "  history:")
		for _, h := range history {
			fmt.Fprintf(out, "    %s\n", h)
		}
	}
	return nil
}

// explainHubJob says where the hub routed a Job or JobSet (kind "job",
// "jobset") and why, or why it waits; status is its mirrored status.
func explainHubJob(out io.Writer, kind string, j client.Object, status string) {
	a := j.GetAnnotations()
	what := map[string]string{"job": "Job", "jobset": "JobSet"}[kind]
	fmt.Fprintf(out, "%s/%s in namespace %s: a %s of the fleet's hub (spec.managedBy %s)\n", kind, j.GetName(), j.GetNamespace(), what, hub.ManagedBy)
	switch cluster := a[hub.AnnotationCluster]; {
	case cluster != "":
		cluster = plaintext.Escape(cluster)
		fmt.Fprintf(out, "  routed to cluster %s (attempt %s), where it runs as a copy of this %s\n", cluster, plaintext.Escape(orDash(a[hub.AnnotationAttempt])), what)
		if w := a[hub.AnnotationWhy]; w != "" {
			fmt.Fprintf(out, "  why:   %s\n", plaintext.Escape(w))
		}
		if c := a[hub.AnnotationConflict]; c != "" {
			fmt.Fprintf(out, "  not running: %s\n", plaintext.Escape(c))
		}
		fmt.Fprintf(out, "  status (mirrored from %s): %s\n", cluster, status)
		if p := a[hub.AnnotationWorkerPending]; p != "" {
			fmt.Fprintf(out, "  waiting in %s: %s\n", cluster, plaintext.Escape(p))
			code, _, _ := strings.Cut(p, ":")
			if adv := advice(code); adv != "" {
				fmt.Fprintf(out, "  what it means: %s\n", adv)
			}
		}
		if evs := a[hub.AnnotationWorkerEvents]; evs != "" {
			fmt.Fprintf(out, "  %s's scheduler said (newest first):\n", cluster)
			for _, line := range strings.Split(evs, "\n") {
				fmt.Fprintf(out, "    %s\n", plaintext.Escape(line))
			}
		}
		fmt.Fprintf(out, "  its pods: allot explain %s/%s -n %s --kubeconfig <%s's kubeconfig>\n", kind, j.GetName(), j.GetNamespace(), cluster)
	case a[hub.AnnotationPending] != "":
		fmt.Fprintln(out, "  pending: not routed to any cluster yet")
		p := a[hub.AnnotationPending]
		fmt.Fprintf(out, "  why:   %s\n", plaintext.Escape(p))
		code, _, _ := strings.Cut(p, ":")
		if adv := advice(code); adv != "" {
			fmt.Fprintf(out, "  what it means: %s\n", adv)
		}
	default:
		fmt.Fprintln(out, "  pending: the hub has not routed it yet (is allot manager --hub running?)")
	}
	if n, _ := strconv.Atoi(a[hub.AnnotationAttempt]); n > 1 {
		fmt.Fprintf(out, "  history: routed %d times (each failover to another cluster routes it again)\n", n)
	}
}

// jobSetStatus sums a JobSet's Jobs by state, and says how it ended.
func jobSetStatus(st *jobsetv1.JobSetStatus) string {
	var active, ready, succeeded, failed int32
	for _, r := range st.ReplicatedJobsStatus {
		active, ready, succeeded, failed = active+r.Active, ready+r.Ready, succeeded+r.Succeeded, failed+r.Failed
	}
	s := fmt.Sprintf("Jobs: %d active (%d ready), %d succeeded, %d failed; %d restarts", active, ready, succeeded, failed, st.Restarts)
	if st.TerminalState != "" {
		s += "; " + plaintext.Escape(st.TerminalState)
	}
	return s
}

// podEvents returns the events about the pods, oldest first.
func podEvents(ctx context.Context, c client.Client, ns string, pods []corev1.Pod) ([]eventsv1.Event, error) {
	var list eventsv1.EventList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing events of %s: %w", ns, err)
	}
	names := map[string]bool{}
	for _, p := range pods {
		names[p.Name] = true
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if names[e.Regarding.Name] {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b eventsv1.Event) int { return a.EventTime.Time.Compare(b.EventTime.Time) })
	return out, nil
}

func podGPUCount(p *corev1.Pod) int64 {
	var n int64
	for _, c := range p.Spec.Containers {
		if q, ok := c.Resources.Limits[nodestate.ResourceGPU]; ok {
			n += q.Value()
		} else if q, ok := c.Resources.Requests[nodestate.ResourceGPU]; ok {
			n += q.Value()
		}
	}
	return n
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// jsonPos is file:line:col of a JSON decoding error in b, or file when the
// error has no offset.
func jsonPos(file string, b []byte, err error) string {
	var off int64
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	default:
		return file
	}
	before := b[:min(max(off, 0), int64(len(b)))]
	line := bytes.Count(before, []byte("\n")) + 1
	col := len(before) - bytes.LastIndexByte(before, '\n')
	return fmt.Sprintf("%s:%d:%d", file, line, col)
}

// explainSim explains one job of a simulation report.
func explainSim(out io.Writer, file, id string) error {
	b, err := readInput(file)
	if err != nil {
		return usageError{err}
	}
	var rep sim.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return usageError{fmt.Errorf("%s: not an 'allot sim -o json' report: %w", jsonPos(file, b, err), err)}
	}
	i := slices.IndexFunc(rep.Jobs, func(j sim.JobReport) bool { return j.ID == id })
	if i < 0 {
		return usageError{errors.New("job " + id + " is not in " + file)}
	}
	j := rep.Jobs[i]
	fmt.Fprintf(out, "job %s: team %s, tier %s, %d GPUs, submitted at %gs\n", j.ID, j.Team, j.Tier, j.GPUs, j.Submit)
	if j.Start == nil {
		fmt.Fprintln(out, "  never ran")
		if j.Reason != "" {
			fmt.Fprintf(out, "  why:   %s\n", j.Reason)
		}
		if a := advice(j.ReasonCode); a != "" {
			fmt.Fprintf(out, "  what it means: %s\n", a)
		}
	} else {
		where := strings.Join(j.Nodes, ", ")
		for _, level := range slices.Sorted(func(yield func(string) bool) {
			for k := range j.Domain {
				if !yield(k) {
					return
				}
			}
		}) {
			where += fmt.Sprintf(" (%s %s)", level, j.Domain[level])
		}
		wait := *j.Start - j.Submit // a report may leave wait_s out
		if j.WaitS != nil {
			wait = *j.WaitS
		}
		fmt.Fprintf(out, "  started at %gs after waiting %gs, on %s\n", *j.Start, wait, where)
		if j.End != nil {
			fmt.Fprintf(out, "  ended at %gs\n", *j.End)
		} else if j.Reason != "" {
			fmt.Fprintf(out, "  did not finish: %s\n", j.Reason)
		}
	}
	if j.Preempted > 0 {
		fmt.Fprintf(out, "  preempted or requeued %d time(s) on the way\n", j.Preempted)
	}
	return nil
}
