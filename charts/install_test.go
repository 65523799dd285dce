package charts

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/kube"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// startAPIServer starts a real kube-apiserver and etcd (envtest, with the
// binaries make controlplane builds into bin/) with no CRD installed, and
// stops them when the test ends. Missing binaries fail the test.
func startAPIServer(t *testing.T) *rest.Config {
	t.Helper()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join("..", "bin")
	}
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(assets, b)); err != nil {
			t.Fatalf("%s not found in %s: run 'make controlplane' (or set KUBEBUILDER_ASSETS)", b, assets)
		}
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting the API server: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Logf("stopping the API server: %v", err)
		}
	})
	return cfg
}

// helmConfig is Helm's action configuration for the API server of cfg, as
// `helm --kubeconfig FILE -n allot-system` has it (releases in Secrets).
func helmConfig(t *testing.T, cfg *rest.Config) *action.Configuration {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	ac := &action.Configuration{}
	if err := ac.Init(kube.GetConfig(path, "", namespace), namespace, "secret", t.Logf); err != nil {
		t.Fatalf("helm: %v", err)
	}
	return ac
}

// TestInstallUninstall installs the chart with Helm's own library on a real
// API server, which validates every object, and finds each object the chart
// renders there (the CRDs established, the admission policies and their
// bindings in place, the CapacitySource of capacitySource accepted by its
// CRD); upgrades it (a new image, the hub on) and finds the change; then
// uninstalls it and finds every object gone but the CRDs, which Helm keeps,
// and no release record left.
func TestInstallUninstall(t *testing.T) {
	vals := map[string]any{"capacitySource": map[string]any{"create": true, "url": "https://github.com/acme/capacity.git", "ref": map[string]any{"branch": "main"}}}
	objs := mustRender(t, vals)
	cfg := startAPIServer(t)
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ac := helmConfig(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	inst := action.NewInstall(ac)
	inst.ReleaseName, inst.Namespace, inst.CreateNamespace = release, namespace, true
	inst.Timeout = 2 * time.Minute
	rel, err := inst.RunWithContext(ctx, loadChart(t), vals)
	if err != nil {
		t.Fatalf("helm install: %v", err)
	}
	if rel.Info.Status != "deployed" {
		t.Fatalf("release %s", rel.Info.Status)
	}
	policies := map[string]bool{}
	for _, want := range objs {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(want.GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKeyFromObject(want), got); err != nil {
			t.Errorf("%s after install: %v", keyOf(want), err)
			continue
		}
		switch want.GetKind() {
		case "CustomResourceDefinition":
			if !established(got) {
				t.Errorf("%s not Established", keyOf(want))
			}
		case "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			policies[keyOf(want).String()] = true
		}
	}
	for _, p := range []string{"allot-manager-pod-creation", "allot-pod-tenancy", "allot-pod-accounting", "allot-agent-node"} {
		for _, kind := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
			if !policies[key{kind, "", p}.String()] {
				t.Errorf("no %s %s in the cluster", kind, p)
			}
		}
	}

	// An upgrade (a new image, the hub on) changes the objects in place and
	// adds the hub's.
	up := action.NewUpgrade(ac)
	up.Namespace, up.Timeout = namespace, 2*time.Minute
	upVals := map[string]any{"image": map[string]any{"tag": "v2"}, "hub": map[string]any{"enabled": true}, "capacitySource": vals["capacitySource"]}
	if _, err := up.RunWithContext(ctx, release, loadChart(t), upVals); err != nil {
		t.Fatalf("helm upgrade: %v", err)
	}
	d := &unstructured.Unstructured{}
	d.SetAPIVersion("apps/v1")
	d.SetKind("Deployment")
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "allot-manager"}, d); err != nil {
		t.Fatal(err)
	}
	if ct := container(t, d); ct["image"] != configImage+":v2" || !slices.Contains(ct["args"].([]any), any("--hub=true")) {
		t.Errorf("after the upgrade the manager runs %v %v, want %s:v2 with --hub=true", ct["image"], ct["args"], configImage)
	}
	upgraded := mustRender(t, upVals)
	for _, want := range upgraded {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(want.GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKeyFromObject(want), got); err != nil {
			t.Errorf("%s after upgrade: %v", keyOf(want), err)
		}
	}
	objs = append(objs, upgraded...)

	un := action.NewUninstall(ac)
	un.Timeout = 2 * time.Minute
	if _, err := un.Run(release); err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
	for _, want := range objs {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(want.GroupVersionKind())
		err := c.Get(ctx, client.ObjectKeyFromObject(want), got)
		switch {
		case want.GetKind() == "CustomResourceDefinition":
			if err != nil {
				t.Errorf("%s after uninstall: %v (Helm keeps the CRDs of crds/)", keyOf(want), err)
			}
		case !apierrors.IsNotFound(err):
			t.Errorf("%s after uninstall: %v, want it gone", keyOf(want), err)
		}
	}
	secrets := &unstructured.UnstructuredList{}
	secrets.SetAPIVersion("v1")
	secrets.SetKind("SecretList")
	if err := c.List(ctx, secrets, client.InNamespace(namespace), client.MatchingLabels{"owner": "helm"}); err != nil {
		t.Fatal(err)
	}
	if len(secrets.Items) != 0 {
		t.Errorf("%d release records left after uninstall", len(secrets.Items))
	}
}

func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}
