package capacity_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/controllers/capacity"
	"github.com/allot-dev/allot/controllers/testenv"
	"github.com/allot-dev/allot/planner/render/terraform"
	"github.com/allot-dev/allot/planner/tfrun/statetest"
)

// The manager with Terraform (the real binary, the kwok module, its state in
// a remote http backend) meets a failed apply and a stale remote state lock:
//   - terraform's environment comes from a Secret, read at every run; with a
//     kubeconfig that does not work there, the node hooks fail, the apply
//     fails, and the Pool keeps its old target and the Team its old quota;
//     with the Secret fixed, the retry converges;
//   - a lock left by a run that died is reported, once older than the
//     configured age, in the StateUnlocked condition, and held: an annotation
//     naming another lock releases nothing; one naming it releases it, with
//     an event saying who asked, and the revision is applied.
func TestTerraformFailures(t *testing.T) {
	tenv := testenv.Start(t)
	c := tenv.Client
	ctx := context.Background()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := tenv.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	srv := statetest.New(t)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gitops"}}); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "gitops", Name: "tf-env"}, StringData: map[string]string{"KUBECONFIG": kubeconfig}}
	if err := c.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}

	startTerraform(t, tenv, &capacity.Terraform{
		EnvSecret:    client.ObjectKeyFromObject(secret),
		Options:      terraform.Options{Backend: srv.Backend()},
		StaleLockAge: 3 * time.Second, ReadyTimeout: 30 * time.Second,
	})

	repo := newGitRepo(t)
	repo.write("capacity.cue", kwokRepo(16))
	head := repo.commit("alpha: 16 GPUs")
	key := kwokSource(t, c, repo, head)
	if !strings.Contains(string(srv.State()), `"a-1"`) {
		t.Fatalf("the remote state lacks node a-1")
	}
	// in force checks the Pool's target, the Team's quota and the revision
	// applied.
	inForce := func(nodes, nominal int64, rev string) {
		t.Helper()
		var p allotv1.Pool
		var team allotv1.Team
		if err := c.Get(ctx, client.ObjectKey{Name: "a"}, &p); err != nil {
			t.Fatal(err)
		}
		if err := c.Get(ctx, client.ObjectKey{Name: "alpha"}, &team); err != nil {
			t.Fatal(err)
		}
		s := getSourceOf(t, c, key)
		if p.Spec.NodesTarget != nodes || team.Spec.Quota[0].Nominal != nominal || !strings.HasSuffix(s.Status.LastAppliedRevision, rev) {
			t.Errorf("in force: pool a %d nodes, alpha %d GPUs, revision %s; want %d, %d, %s",
				p.Spec.NodesTarget, team.Spec.Quota[0].Nominal, s.Status.LastAppliedRevision, nodes, nominal, rev)
		}
	}
	setSecret := func(kubeconfig string) {
		t.Helper()
		secret.StringData = map[string]string{"KUBECONFIG": kubeconfig}
		if err := c.Update(ctx, secret); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("a failed apply keeps the old targets", func(t *testing.T) {
		setSecret(filepath.Join(t.TempDir(), "no-such-kubeconfig"))
		good := head
		repo.write("capacity.cue", kwokRepo(32))
		head = repo.commit("alpha: 32 GPUs")
		eventually(t, 90*time.Second, "the grow failed", func() error {
			s := getSourceOf(t, c, key)
			msg := conditions.GetMessage(s, allotv1.ReadyCondition)
			if !strings.HasSuffix(s.Status.LastAttemptedRevision, head) || conditions.IsReady(s) ||
				conditions.GetReason(s, allotv1.ReadyCondition) != capacity.ReasonCapacityFailed || !strings.Contains(msg, "node hook failed") {
				return fmt.Errorf("%s: %s", conditions.GetReason(s, allotv1.ReadyCondition), msg)
			}
			return nil
		})
		inForce(2, 16, good)
		setSecret(kubeconfig)
		waitApplied(t, c, key, head)
		waitNodes(t, c, "a-0", "a-1", "a-2", "a-3")
		inForce(4, 32, head)
	})

	t.Run("a stale remote lock is reported and released only by the annotation", func(t *testing.T) {
		const lock = "9d4b6f0e-0000-4000-8000-00000000dead"
		srv.Lock(lock, "ci@runner-7", time.Now().Add(-time.Hour))
		good := head
		repo.write("capacity.cue", kwokRepo(40))
		head = repo.commit("alpha: 40 GPUs")
		var msg string
		eventually(t, 60*time.Second, "StateUnlocked=False", func() error {
			s := getSourceOf(t, c, key)
			msg = conditions.GetMessage(s, allotv1.StateUnlockedCondition)
			if !conditions.IsFalse(s, allotv1.StateUnlockedCondition) || conditions.GetReason(s, allotv1.StateUnlockedCondition) != capacity.ReasonStaleStateLock {
				return fmt.Errorf("StateUnlocked: %s; Ready: %s", msg, conditions.GetMessage(s, allotv1.ReadyCondition))
			}
			return nil
		})
		if want := capacity.AnnotationForceUnlock + "=" + lock; !strings.Contains(msg, want) {
			t.Errorf("StateUnlocked message %q does not say how to release it (%s)", msg, want)
		}
		if s := getSourceOf(t, c, key); conditions.IsReady(s) || conditions.GetReason(s, allotv1.ReadyCondition) != capacity.ReasonStaleStateLock {
			t.Errorf("Ready: %v %s", conditions.IsReady(s), conditions.GetReason(s, allotv1.ReadyCondition))
		}
		inForce(4, 32, good)

		annotate := func(v string) {
			t.Helper()
			s := getSourceOf(t, c, key)
			p := client.MergeFrom(s.DeepCopy())
			if s.Annotations == nil {
				s.Annotations = map[string]string{}
			}
			s.Annotations[capacity.AnnotationForceUnlock] = v
			if err := c.Patch(ctx, s, p, client.FieldOwner("kubectl-annotate")); err != nil {
				t.Fatal(err)
			}
		}
		// Another lock's ID releases nothing; nor does time.
		annotate("00000000-0000-0000-0000-000000000000")
		time.Sleep(5 * time.Second)
		if srv.Held() != lock {
			t.Fatalf("the stale lock was released without the annotation naming it: held %q", srv.Held())
		}
		inForce(4, 32, good)

		annotate(lock)
		waitApplied(t, c, key, head)
		if srv.Held() != "" {
			t.Errorf("lock %s held after the apply", srv.Held())
		}
		inForce(5, 40, head)
		if s := getSourceOf(t, c, key); !conditions.IsTrue(s, allotv1.StateUnlockedCondition) {
			t.Errorf("StateUnlocked after the release: %s", conditions.GetMessage(s, allotv1.StateUnlockedCondition))
		}
		eventually(t, 10*time.Second, "a StateForceUnlocked event", func() error {
			var evs eventsv1.EventList
			if err := c.List(ctx, &evs, client.InNamespace(key.Namespace)); err != nil {
				return err
			}
			for _, e := range evs.Items {
				if e.Reason == "StateForceUnlocked" && strings.Contains(e.Note, lock) && strings.Contains(e.Note, "field manager kubectl-annotate") {
					return nil
				}
			}
			return fmt.Errorf("%d events, none StateForceUnlocked naming the lock and who asked", len(evs.Items))
		})
	})
}

func getSourceOf(t *testing.T, c client.Client, key types.NamespacedName) *allotv1.CapacitySource {
	t.Helper()
	s := &allotv1.CapacitySource{}
	if err := c.Get(context.Background(), key, s); err != nil {
		t.Fatal(err)
	}
	return s
}
