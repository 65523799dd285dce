package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/api/contract"
	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/controllers/hub"
	"github.com/allot-dev/allot/controllers/testenv"
	"github.com/allot-dev/allot/fleet/nodestate"
)

// The fleet demo's clusters: two workers at two prices, and the team whose
// job moves between them.
var fleetWorkers = []struct {
	name, price string
	nodes       int
}{{"east", "20", 4}, {"west", "30", 4}}

const (
	fleetTeam     = "ml"
	fleetJob      = "train"
	fleetFailover = 5 * time.Second
	fleetNS       = "allot-system"
)

// fleetCluster is one of the fleet demo's control planes.
type fleetCluster struct {
	name string
	env  *testenv.Env
	stop func() error
	kc   string
	mgr  *manager
}

// fleetResult is what the fleet demo saw, for its test.
type fleetResult struct {
	// first and moved are the clusters the job ran in before and after the
	// cheap one was lost; nodes are the nodes its pods were bound to there.
	first, moved            string
	firstNodes, movedNodes  []string
	firstWhy, explainOutput string
	dir                     string
}

// runFleet is 'make demo-fleet': a hub and two worker clusters, each a real
// API server with its own allot manager; a Job submitted to the hub runs in
// the cheaper worker; that worker's API server stops, and after its
// failoverAfter the job runs in the other.
func runFleet(ctx context.Context, o options) (_ *fleetResult, err error) {
	d := &demo{o: o, started: time.Now()}
	res := &fleetResult{}
	ctrl.SetLogger(logr.Discard())
	defer d.stopAll(ctx, &err)
	if err := d.findBinary(); err != nil {
		return nil, err
	}
	fmt.Fprintln(o.out, "allot fleet demo: a hub routes a Job to the cheaper of two clusters, then moves it when that cluster is lost")
	if d.dir, err = os.MkdirTemp("", "allot-fleet-demo-"); err != nil {
		return nil, err
	}
	dir := d.dir
	res.dir = dir
	d.onCleanup(func() string { os.RemoveAll(dir); return "removed " + dir })

	d.header("Start three control planes: the hub, east ($20 per node-hour) and west ($30)")
	clusters := map[string]*fleetCluster{}
	for _, name := range []string{"hub", "east", "west"} {
		env, stop, err := testenv.StartMain()
		if err != nil {
			return nil, fmt.Errorf("control plane %s: %w", name, err)
		}
		fc := &fleetCluster{name: name, env: env, stop: stop, kc: filepath.Join(d.dir, name+".kubeconfig")}
		stopped := false
		fc.stop = func() error {
			if stopped {
				return nil
			}
			stopped = true
			return stop()
		}
		d.onCleanup(func() string {
			if err := fc.stop(); err != nil {
				return "stopping " + name + ": " + err.Error()
			}
			return "stopped " + name
		})
		if err := env.WriteKubeconfig(fc.kc); err != nil {
			return nil, err
		}
		clusters[name] = fc
		d.say("%-5s API server %s", name, env.Config.Host)
	}

	d.header("Apply the capacity repository's objects: pools and tiers, team " + fleetTeam + " with 64 H100 fleet-wide")
	hubC := clusters["hub"].env.Client
	objs := func(pools bool) []client.Object {
		o := []client.Object{
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fleetTeam}},
			&allotv1.Tier{ObjectMeta: metav1.ObjectMeta{Name: "research"}, Spec: allotv1.TierSpec{Priority: 100}},
			&allotv1.Team{ObjectMeta: metav1.ObjectMeta{Name: fleetTeam}, Spec: allotv1.TeamSpec{Quota: []allotv1.FlavorQuota{{Flavor: "h100", Nominal: 64}}}},
		}
		if pools {
			for _, w := range fleetWorkers {
				o = append(o, &allotv1.Pool{ObjectMeta: metav1.ObjectMeta{Name: w.name + "-h100"}, Spec: allotv1.PoolSpec{
					Cluster: w.name, Flavor: "h100", GPUsPerNode: 8, Nodes: allotv1.NodeBounds{Max: int64(w.nodes)}, NodesTarget: int64(w.nodes),
					Price: allotv1.Price{OnDemandPerNodeHour: allotv1.Decimal(w.price)}}})
			}
		}
		return o
	}
	for _, o := range append(objs(true), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fleetNS}}) {
		if err := hubC.Create(ctx, o); err != nil {
			return nil, fmt.Errorf("hub: %w", err)
		}
	}
	for _, w := range fleetWorkers {
		c := clusters[w.name].env.Client
		for _, o := range objs(true) {
			if p, ok := o.(*allotv1.Pool); ok && p.Spec.Cluster != w.name {
				continue
			}
			if err := c.Create(ctx, o); err != nil {
				return nil, fmt.Errorf("%s: %w", w.name, err)
			}
		}
		for i := range w.nodes {
			if _, err := testenv.CreateNode(ctx, c, fmt.Sprintf("%s-%d", w.name, i), 8, map[string]string{contract.LabelPool: w.name + "-h100"}); err != nil {
				return nil, err
			}
		}
		d.say("%s: %d nodes of 8 H100, pool %s-h100 at $%s per node-hour", w.name, w.nodes, w.name, w.price)
	}
	d.say("(the GitOps path that applies them is 'make demo'; each worker applies the teams' whole quotas: --quota-from-hub)")

	d.header("Start allot manager --hub on the hub, and allot manager --cluster NAME on each worker")
	starts := []struct {
		c    *fleetCluster
		args []string
	}{{clusters["hub"], []string{"--no-gitops", "--hub", "--hub-namespace", fleetNS}}}
	for _, w := range fleetWorkers {
		starts = append(starts, struct {
			c    *fleetCluster
			args []string
		}{clusters[w.name], []string{"--no-gitops", "--cluster", w.name, "--quota-from-hub"}})
	}
	for _, s := range starts {
		m, err := startManagerAs(d.bin, s.c.kc, d.dir, "manager-"+s.c.name, s.args...)
		if err != nil {
			return nil, err
		}
		s.c.mgr = m
		d.onCleanup(func() string { m.stop(); return "stopped " + s.c.name + "'s manager" })
		if err := d.waitUntil(ctx, managerReadyTimeout, s.c.name+"'s manager not ready", func(ctx context.Context) (bool, string, error) {
			return m.ready(ctx), "last log: " + m.lastLog(), m.gone()
		}); err != nil {
			return nil, err
		}
		d.say("%-5s allot manager %s (pid %d)", s.c.name, strings.Join(s.args, " "), m.cmd.Process.Pid)
	}

	d.header("Register the workers on the hub: a kubeconfig Secret and a Cluster each (failoverAfter 5s)")
	for _, w := range fleetWorkers {
		kc, err := clusters[w.name].env.Kubeconfig("")
		if err != nil {
			return nil, err
		}
		for _, o := range []client.Object{
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: fleetNS, Name: w.name}, Data: map[string][]byte{"kubeconfig": kc}},
			&allotv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: w.name}, Spec: allotv1.ClusterSpec{KubeconfigSecretRef: allotv1.SecretKeyRef{Name: w.name}, FailoverAfter: &metav1.Duration{Duration: fleetFailover}}},
		} {
			if err := hubC.Create(ctx, o); err != nil {
				return nil, err
			}
		}
	}
	for _, w := range fleetWorkers {
		var cl allotv1.Cluster
		if err := d.waitUntil(ctx, settleTimeout, w.name+" not Ready on the hub", func(ctx context.Context) (bool, string, error) {
			if err := hubC.Get(ctx, client.ObjectKey{Name: w.name}, &cl); err != nil {
				return false, "", err
			}
			return conditions.IsTrue(&cl, allotv1.ReadyCondition), conditions.GetMessage(&cl, allotv1.ReadyCondition), nil
		}); err != nil {
			return nil, err
		}
		d.say("Cluster %s: Ready, %s", w.name, conditions.GetMessage(&cl, allotv1.ReadyCondition))
	}

	d.header("Submit Job " + fleetTeam + "/" + fleetJob + " to the hub: 2 pods of 8 GPUs, spec.managedBy " + hub.ManagedBy)
	gpus := *resource.NewQuantity(8, resource.DecimalSI)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: fleetTeam, Name: fleetJob}, Spec: batchv1.JobSpec{
		ManagedBy: ptr.To(hub.ManagedBy), Parallelism: ptr.To[int32](2), Completions: ptr.To[int32](2),
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{SchedulerName: contract.SchedulerName, RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "train", Image: "trainer:demo", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{nodestate.ResourceGPU: gpus}, Limits: corev1.ResourceList{nodestate.ResourceGPU: gpus}}}}}},
	}}
	if err := hubC.Create(ctx, job); err != nil {
		return nil, err
	}
	if res.first, res.firstWhy, err = d.waitRouted(ctx, hubC, "1"); err != nil {
		return nil, err
	}
	d.say("%s", res.firstWhy)
	if res.firstNodes, err = d.runCopy(ctx, clusters[res.first]); err != nil {
		return nil, err
	}
	d.say("%s's scheduler bound its pods: %s", res.first, strings.Join(res.firstNodes, ", "))

	d.header("Lose " + res.first + ": its API server stops")
	lost := clusters[res.first]
	lost.mgr.stop()
	if err := lost.stop(); err != nil {
		return nil, err
	}
	d.say("the hub keeps the job there for failoverAfter (5s), then routes it again")
	var moved string
	if moved, _, err = d.waitRouted(ctx, hubC, "2"); err != nil {
		return nil, err
	}
	res.moved = moved
	var j batchv1.Job
	if err := hubC.Get(ctx, client.ObjectKeyFromObject(job), &j); err != nil {
		return nil, err
	}
	d.say("attempt 2 %s", j.Annotations[hub.AnnotationWhy])
	if res.movedNodes, err = d.runCopy(ctx, clusters[moved]); err != nil {
		return nil, err
	}
	d.say("%s's scheduler bound its pods: %s", moved, strings.Join(res.movedNodes, ", "))
	d.say("(were %s to come back, the hub would delete its stale copy first; its fence, %s, has passed, so its manager would not start it)",
		res.first, contract.AnnotationHubFence)

	d.header("allot explain job/" + fleetJob + " -n " + fleetTeam + " on the hub")
	cmd := exec.CommandContext(ctx, d.bin, "explain", "job/"+fleetJob, "-n", fleetTeam, "--kubeconfig", clusters["hub"].kc)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("allot explain: %v: %s", err, out.String())
	}
	res.explainOutput = out.String()
	for l := range strings.SplitSeq(strings.TrimRight(out.String(), "\n"), "\n") {
		d.say("%s", l)
	}
	fmt.Fprintf(o.out, "\n[%5.1fs] Done.\n", d.elapsed())
	return res, nil
}

// waitRouted waits until the hub's Job is routed as attempt, and returns the
// cluster and why.
func (d *demo) waitRouted(ctx context.Context, hubC client.Client, attempt string) (cluster, why string, err error) {
	err = d.waitUntil(ctx, settleTimeout, "the job not routed (attempt "+attempt+")", func(ctx context.Context) (bool, string, error) {
		var j batchv1.Job
		if err := hubC.Get(ctx, client.ObjectKey{Namespace: fleetTeam, Name: fleetJob}, &j); err != nil {
			return false, "", err
		}
		cluster, why = j.Annotations[hub.AnnotationCluster], j.Annotations[hub.AnnotationWhy]
		return cluster != "" && j.Annotations[hub.AnnotationAttempt] == attempt, "pending: " + j.Annotations[hub.AnnotationPending], nil
	})
	return cluster, why, err
}

// runCopy makes the pods of the hub's copy in the worker, as its Job
// controller would (none runs here), and waits until the worker's scheduler
// binds them.
func (d *demo) runCopy(ctx context.Context, fc *fleetCluster) ([]string, error) {
	if fc == nil {
		return nil, errors.New("routed to a cluster the demo does not know")
	}
	c := fc.env.Client
	var j batchv1.Job
	if err := d.waitUntil(ctx, settleTimeout, "no copy of the job in "+fc.name, func(ctx context.Context) (bool, string, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: fleetTeam, Name: fleetJob}, &j)
		return err == nil, fmt.Sprint(err), client.IgnoreNotFound(err)
	}); err != nil {
		return nil, err
	}
	names, err := testenv.CreateJobPods(ctx, c, fleetTeam, fleetJob)
	if err != nil {
		return nil, err
	}
	var nodes []string
	err = d.waitUntil(ctx, settleTimeout, "the copy's pods not bound in "+fc.name, func(ctx context.Context) (bool, string, error) {
		nodes = nodes[:0]
		for _, n := range names {
			var p corev1.Pod
			if err := c.Get(ctx, client.ObjectKey{Namespace: fleetTeam, Name: n}, &p); err != nil {
				return false, "", err
			}
			if p.Spec.NodeName == "" {
				return false, fmt.Sprintf("pod %s: %v", n, p.Status.Conditions), fc.mgr.gone()
			}
			nodes = append(nodes, p.Spec.NodeName)
		}
		return true, "", nil
	})
	return nodes, err
}
