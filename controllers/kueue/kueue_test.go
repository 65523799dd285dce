package kueue

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/controllers/testenv"
	"github.com/allot-dev/allot/planner"
	rkueue "github.com/allot-dev/allot/planner/render/kueue"
	allotschema "github.com/allot-dev/allot/schema"
)

var (
	clusterQueueGVK = schema.GroupVersionKind{Group: rkueue.Group, Version: rkueue.Version, Kind: "ClusterQueue"}
	localQueueGVK   = schema.GroupVersionKind{Group: rkueue.Group, Version: rkueue.Version, Kind: "LocalQueue"}
	workloadGVK     = schema.GroupVersionKind{Group: rkueue.Group, Version: rkueue.Version, Kind: "WorkloadList"}
)

// render loads the repository in dir and renders its Kueue objects.
func render(t testing.TB, dir string) []*rkueue.Objects {
	t.Helper()
	cfg, findings := allotschema.Load(os.DirFS(dir))
	if cfg == nil || findings.HasErrors() {
		t.Fatalf("loading %s: %v", dir, findings)
	}
	out, err := rkueue.Build(cfg, planner.Build(cfg))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func apply(t testing.TB, c client.Client, o *rkueue.Objects) {
	t.Helper()
	objs, err := o.Unstructured()
	if err != nil {
		t.Fatal(err)
	}
	// Server-side, as the CapacitySource reconciler applies them.
	for _, u := range objs {
		if err := c.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("allot"), client.ForceOwnership); err != nil {
			t.Fatalf("applying %s %s: %v", u.GetKind(), client.ObjectKeyFromObject(u), err)
		}
	}
}

// active waits until Kueue reports every ClusterQueue and LocalQueue of o Active.
func active(t testing.TB, c client.Client, o *rkueue.Objects) {
	t.Helper()
	ctx := context.Background()
	check := func(gvk schema.GroupVersionKind, key client.ObjectKey) func() error {
		return func() error {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(gvk)
			if err := c.Get(ctx, key, u); err != nil {
				return err
			}
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, cond := range conds {
				m, _ := cond.(map[string]any)
				if m["type"] == "Active" {
					if m["status"] == "True" {
						return nil
					}
					return fmt.Errorf("%s %s: Active %v: %v: %v", gvk.Kind, key, m["status"], m["reason"], m["message"])
				}
			}
			return fmt.Errorf("%s %s: no Active condition yet", gvk.Kind, key)
		}
	}
	for _, cq := range o.ClusterQueues {
		testenv.Eventually(t, 30*time.Second, "ClusterQueue "+cq.Name+" active", check(clusterQueueGVK, client.ObjectKey{Name: cq.Name}))
	}
	for _, lq := range o.LocalQueues {
		testenv.Eventually(t, 30*time.Second, "LocalQueue "+lq.Namespace+"/"+lq.Name+" active",
			check(localQueueGVK, client.ObjectKey{Namespace: lq.Namespace, Name: lq.Name}))
	}
}

// TestKueue runs the real Kueue on a test control plane: the rendered
// examples are accepted (every queue Active), and Kueue admits suspended Jobs
// as a rendered repository's quotas say.
//
// Each cluster of the examples runs its own Kueue, as in a fleet: one
// cluster's Topology and ResourceFlavor of a flavor differ from another's,
// and Kueue makes both immutable once a flavor names a topology. The
// admission and manager tests share the first cluster's (their names do not
// meet the examples').
func TestKueue(t *testing.T) {
	clusters := render(t, filepath.Join(testenv.Root(), "examples"))
	env := testenv.Start(t)
	testenv.StartKueue(t, env)
	for i, o := range clusters {
		t.Run("ExamplesAccepted/"+string(o.Cluster), func(t *testing.T) {
			here := env
			if i > 0 {
				here = testenv.Start(t)
				testenv.StartKueue(t, here)
			}
			apply(t, here.Client, o)
			active(t, here.Client, o)
		})
	}
	t.Run("Admission", func(t *testing.T) { testAdmission(t, env) })
	t.Run("Manager", func(t *testing.T) { testManager(t, env) })
	t.Run("SideBySide", func(t *testing.T) { testSideBySide(t, env) })
}

// lab is a one-cluster repository: two teams share 16 T4 GPUs in one cohort;
// alpha may borrow 4 above its nominal 8.
const lab = `package capacity

clusters: lab: {provider: "kwok"}
pools: t4: {
	cluster:     "lab"
	flavor:      "t4-16gb"
	gpusPerNode: 8
	nodes: {min: 2, max: 2}
	price: onDemandPerNodeHour: 1
}
tiers: {
	urgent: {priority: 1000}
	batch:  {priority: 10, preemptible: true}
}
cohorts: lab: {}
teams: alpha: {
	costCenter: "CC-1"
	owners: ["@alpha"]
	cohort: "lab"
	quota: "t4-16gb": {nominal: ALPHA, borrowingLimit: BORROW}
}
teams: beta: {
	costCenter: "CC-2"
	owners: ["@beta"]
	cohort: "lab"
	quota: "t4-16gb": {nominal: 8}
}
`

func writeLab(t *testing.T, dir string, alpha, borrow int) {
	t.Helper()
	s := strings.NewReplacer("ALPHA", fmt.Sprint(alpha), "BORROW", fmt.Sprint(borrow)).Replace(lab)
	if err := os.WriteFile(filepath.Join(dir, "capacity.cue"), []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// job creates a suspended Job of team's asking for gpus in tier, as Kueue's
// webhook would leave it.
func job(t *testing.T, c client.Client, team, name, tier string, gpus int64) {
	t.Helper()
	if err := c.Create(context.Background(), suspendedJob(team, name, team, tier, 1, gpus)); err != nil {
		t.Fatal(err)
	}
}

// suspendedJob is a Job in namespace ns for Kueue's LocalQueue queue and
// priority class tier, suspended as Kueue's webhook would leave it: pods pods
// of gpus GPUs each, which Kueue admits all together or not at all.
func suspendedJob(ns, name, queue, tier string, pods, gpus int64) *batchv1.Job {
	q := *resource.NewQuantity(gpus, resource.DecimalSI)
	n := int32(pods)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			rkueue.LabelQueueName: queue, rkueue.LabelPriorityClass: tier}},
		Spec: batchv1.JobSpec{
			Parallelism: &n, Completions: &n, Suspend: ptrTo(true),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "train", Image: "busybox",
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{rkueue.ResourceGPU: q},
						Limits:   corev1.ResourceList{rkueue.ResourceGPU: q}}}},
			}},
		},
	}
}

func ptrTo[T any](v T) *T { return &v }

// running reports whether Kueue has admitted the Job (unsuspended it).
func running(c client.Client, ns, name string) (bool, error) {
	j := &batchv1.Job{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, j); err != nil {
		return false, err
	}
	return j.Spec.Suspend != nil && !*j.Spec.Suspend, nil
}

func waitRunning(t *testing.T, c client.Client, ns, name string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, ns+"/"+name+" admitted", func() error {
		ok, err := running(c, ns, name)
		if err == nil && !ok {
			err = fmt.Errorf("still suspended")
		}
		return err
	})
}

// waitPending waits until the Job's Workload is pending for want of quota, and
// checks it is still suspended.
func waitPending(t *testing.T, c client.Client, ns, name string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, ns+"/"+name+" pending", func() error {
		wl, err := workload(c, ns, name)
		if err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(wl.Object, "status", "conditions")
		for _, cond := range conds {
			m, _ := cond.(map[string]any)
			if m["type"] == "QuotaReserved" && m["status"] == "False" && m["reason"] == "Pending" {
				return nil
			}
		}
		return fmt.Errorf("workload %s not pending: %v", wl.GetName(), conds)
	})
	// Give Kueue's scheduler more cycles: it must still not admit it.
	time.Sleep(2 * time.Second)
	if ok, err := running(c, ns, name); err != nil || ok {
		t.Fatalf("%s/%s admitted beyond the quota (err %v)", ns, name, err)
	}
}

// workload returns the Workload Kueue made for the Job ns/name.
func workload(c client.Client, ns, name string) (*unstructured.Unstructured, error) {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(workloadGVK)
	if err := c.List(context.Background(), l, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	for i := range l.Items {
		if slices.ContainsFunc(l.Items[i].GetOwnerReferences(), func(r metav1.OwnerReference) bool {
			return r.Kind == "Job" && r.Name == name
		}) {
			return &l.Items[i], nil
		}
	}
	return nil, fmt.Errorf("no workload for job %s/%s yet", ns, name)
}

// evicted reports whether the Job's Workload was preempted.
func evicted(c client.Client, ns, name string) bool {
	wl, err := workload(c, ns, name)
	if err != nil {
		return false
	}
	conds, _, _ := unstructured.NestedSlice(wl.Object, "status", "conditions")
	for _, cond := range conds {
		m, _ := cond.(map[string]any)
		if (m["type"] == "Preempted" || m["type"] == "Evicted") && m["status"] == "True" {
			return true
		}
	}
	return false
}

// usage returns the GPUs a ClusterQueue's admitted workloads use, and how many
// of them are borrowed.
func usage(t *testing.T, c client.Client, cq string) (total, borrowed int64) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(clusterQueueGVK)
	if err := c.Get(context.Background(), client.ObjectKey{Name: cq}, u); err != nil {
		t.Fatal(err)
	}
	flavors, _, _ := unstructured.NestedSlice(u.Object, "status", "flavorsUsage")
	for _, f := range flavors {
		res, _, _ := unstructured.NestedSlice(f.(map[string]any), "resources")
		for _, r := range res {
			m := r.(map[string]any)
			if m["name"] != string(rkueue.ResourceGPU) {
				continue
			}
			if s, ok := m["total"].(string); ok {
				q := resource.MustParse(s)
				total += q.Value()
			}
			if s, ok := m["borrowed"].(string); ok {
				q := resource.MustParse(s)
				borrowed += q.Value()
			}
		}
	}
	return total, borrowed
}

// waitUsage waits until the ClusterQueue cq's status (which follows admission
// asynchronously) says its workloads use total GPUs, borrowed of them borrowed.
func waitUsage(t *testing.T, c client.Client, cq string, total, borrowed int64) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, fmt.Sprintf("%s uses %d, %d borrowed", cq, total, borrowed), func() error {
		if tot, bor := usage(t, c, cq); tot != total || bor != borrowed {
			return fmt.Errorf("%s uses %d, %d borrowed", cq, tot, bor)
		}
		return nil
	})
}

// applyLab writes the lab repository with alpha's nominal and borrowing
// limit into dir, renders it, applies it and waits until Kueue reports its
// queues Active.
func applyLab(t *testing.T, c client.Client, dir string, nominal, borrow int) {
	t.Helper()
	writeLab(t, dir, nominal, borrow)
	o := render(t, dir)[0]
	apply(t, c, o)
	active(t, c, o)
}

func testAdmission(t *testing.T, env *testenv.Env) {
	c := env.Client
	dir := t.TempDir()
	applyLab(t, c, dir, 8, 4)

	// Within nominal: admitted.
	job(t, c, "alpha", "a1", "batch", 4)
	waitRunning(t, c, "alpha", "a1")
	// Over nominal, within the borrowing limit: admitted, 4 borrowed from beta's idle quota.
	job(t, c, "alpha", "a2", "batch", 8)
	waitRunning(t, c, "alpha", "a2")
	waitUsage(t, c, "alpha", 12, 4)
	// No further: one GPU more would borrow 5.
	job(t, c, "alpha", "a3", "batch", 1)
	waitPending(t, c, "alpha", "a3")

	// A higher tier preempts a lower one of the team.
	job(t, c, "alpha", "u1", "urgent", 4)
	waitRunning(t, c, "alpha", "u1")
	testenv.Eventually(t, 10*time.Second, "a batch job of alpha preempted for u1", func() error {
		if total, _ := usage(t, c, "alpha"); total > 12 {
			return fmt.Errorf("alpha uses %d, above its limit", total)
		}
		for _, name := range []string{"a1", "a2"} {
			if ok, err := running(c, "alpha", name); err == nil && (!ok || evicted(c, "alpha", name)) {
				return nil
			}
		}
		return fmt.Errorf("a1 and a2 both still run")
	})

	// beta, within its nominal, reclaims what alpha borrows: its whole nominal
	// runs although alpha had lent it out, and the two never exceed the pool.
	job(t, c, "beta", "b1", "batch", 8)
	waitRunning(t, c, "beta", "b1")
	testenv.Eventually(t, 10*time.Second, "beta runs its nominal, alpha within what is left", func() error {
		bt, bb := usage(t, c, "beta")
		at, ab := usage(t, c, "alpha")
		if bt != 8 || bb != 0 || at+bt > 16 || ab > 4 {
			return fmt.Errorf("beta uses %d (%d borrowed), alpha %d (%d borrowed)", bt, bb, at, ab)
		}
		return nil
	})

	// A quota lowered in the repository, re-rendered and applied, is enforced:
	// alpha at nominal 4 with no borrowing admits 4 GPUs and not 5.
	// (No garbage collector runs here: the Workloads go with their Jobs by hand.)
	for _, name := range []string{"a1", "a2", "a3", "u1"} {
		if wl, err := workload(c, "alpha", name); err == nil {
			if err := c.Delete(context.Background(), wl); client.IgnoreNotFound(err) != nil {
				t.Fatal(err)
			}
		}
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "alpha", Name: name}}
		if err := c.Delete(context.Background(), j); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 30*time.Second, "alpha's workloads gone", func() error {
		if total, _ := usage(t, c, "alpha"); total != 0 {
			return fmt.Errorf("alpha still uses %d", total)
		}
		return nil
	})
	applyLab(t, c, dir, 4, 0)
	job(t, c, "alpha", "c1", "urgent", 5)
	waitPending(t, c, "alpha", "c1")
	job(t, c, "alpha", "c2", "urgent", 4)
	waitRunning(t, c, "alpha", "c2")
	waitUsage(t, c, "alpha", 4, 0)
	// c1 stays pending: 5 GPUs are above the lowered nominal.
	waitPending(t, c, "alpha", "c1")
}
