package main

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/api/contract"
	"github.com/allot-dev/allot/fleet/nodestate"
)

// job is one workload of the demo: a single pod, or a gang of pods that run
// all together or not at all.
type job struct {
	name, team, tier string
	pods, gpus       int64
	flavor           string
	// require is a topology level all the pods must share.
	require string
	note    string
}

// workload is sized for the default four nodes per pool: 96 H100 and 48 A100
// GPUs, and the lab's two L4 nodes. Three gangs wait: platform's and the lab's
// over their quotas (until the change; the lab's needs its pool grown), and
// vision's opportunist gang, larger than the free A100s.
var workload = []job{
	{name: "rl-policy", team: "robotics", tier: "production", pods: 4, gpus: 8, flavor: "h100-80gb", require: "rack", note: "gang in one rack"},
	{name: "pretrain", team: "nlp", tier: "research", pods: 4, gpus: 8, flavor: "h100-80gb", note: "gang"},
	{name: "ranker", team: "search", tier: "critical", pods: 1, gpus: 4, flavor: "h100-80gb"},
	{name: "sweep-a", team: "robotics", tier: "opportunist", pods: 1, gpus: 1, flavor: "h100-80gb", note: "borrowOnly tier: counts as borrowed"},
	{name: "sweep-b", team: "robotics", tier: "opportunist", pods: 1, gpus: 1, flavor: "h100-80gb", note: "borrowOnly tier: counts as borrowed"},
	{name: "ctr", team: "ads", tier: "critical", pods: 1, gpus: 8, flavor: "a100-40gb"},
	{name: "asr", team: "speech", tier: "production", pods: 2, gpus: 8, flavor: "a100-40gb", note: "gang"},
	{name: "augment-a", team: "vision", tier: "research", pods: 1, gpus: 2, flavor: "a100-40gb"},
	{name: "augment-b", team: "vision", tier: "research", pods: 1, gpus: 2, flavor: "a100-40gb"},
	{name: "eval", team: "platform", tier: "production", pods: 3, gpus: 8, flavor: "h100-80gb", note: "gang over platform's 16-GPU quota"},
	{name: "video", team: "vision", tier: "opportunist", pods: 4, gpus: 8, flavor: "a100-40gb", note: "gang larger than the free A100s"},
	{name: "finetune", team: "lab", tier: "production", pods: 4, gpus: 8, flavor: "l4", note: "gang over lab's 16-GPU quota"},
}

// id names the workload as the summary does: <namespace>/<name>.
func (j job) id() string { return j.team + "/" + j.name }

// create submits the job's pods in its team's namespace: one pod named after
// the job, or pods <name>-<i> labelled as one gang.
func (j job) create(ctx context.Context, c client.Client) error {
	gpus := *resource.NewQuantity(j.gpus, resource.DecimalSI)
	for i := range j.pods {
		labels := map[string]string{contract.LabelTeam: j.team, contract.LabelTier: j.tier, contract.LabelFlavor: j.flavor}
		name := j.name
		if j.pods > 1 {
			labels[contract.LabelGang] = j.name
			labels[contract.LabelGangSize] = strconv.FormatInt(j.pods, 10)
			name = fmt.Sprintf("%s-%d", j.name, i)
		}
		if j.require != "" {
			labels[contract.LabelRequire] = j.require
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: j.team, Name: name, Labels: labels},
			Spec: corev1.PodSpec{
				SchedulerName: contract.SchedulerName,
				Containers: []corev1.Container{{
					Name: "train", Image: "trainer:demo",
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{nodestate.ResourceGPU: gpus},
						Limits:   corev1.ResourceList{nodestate.ResourceGPU: gpus},
					},
				}},
			},
		}
		if err := c.Create(ctx, pod); err != nil {
			return err
		}
	}
	return nil
}
