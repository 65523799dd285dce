package hub_test

import (
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/allot-dev/allot/api/contract"
	"github.com/allot-dev/allot/fleet/nodestate"
)

// fakeWorker is a worker's API server on a real TLS listener, as far as the
// hub's probes go (its version, one Ready 8-GPU node of flavor h100 in pool
// name, named name-0); every other request, and the probes too while
// probes is false, gets other's answer: an API server that throttles every
// client, or one that echoes what it was sent.
type fakeWorker struct {
	srv    *httptest.Server
	probes atomic.Bool
	// others counts the requests other answered.
	others atomic.Int64
}

func newFakeWorker(t *testing.T, name string, other http.HandlerFunc) *fakeWorker {
	t.Helper()
	node := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name + "-0", Labels: map[string]string{contract.LabelPool: name, contract.LabelFlavor: "h100"}}}
	gpus := corev1.ResourceList{nodestate.ResourceGPU: *resource.NewQuantity(8, resource.DecimalSI)}
	node.Status.Capacity, node.Status.Allocatable = gpus, gpus
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	nodes, err := json.Marshal(corev1.NodeList{TypeMeta: metav1.TypeMeta{Kind: "NodeList", APIVersion: "v1"}, Items: []corev1.Node{node}})
	if err != nil {
		t.Fatal(err)
	}
	v, err := json.Marshal(version.Info{Major: "1", Minor: "34", GitVersion: "v1.34.0"})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeWorker{}
	f.probes.Store(true)
	f.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.probes.Load() {
			switch r.URL.Path {
			case "/version":
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write(v)
				return
			case "/api/v1/nodes":
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write(nodes)
				return
			}
		}
		f.others.Add(1)
		other(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// kubeconfig reaches f with token.
func (f *fakeWorker) kubeconfig(t *testing.T, token string) []byte {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["w"] = &clientcmdapi.Cluster{Server: f.srv.URL, CertificateAuthorityData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.srv.Certificate().Raw})}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["w"] = &clientcmdapi.Context{Cluster: "w", AuthInfo: "u"}
	cfg.CurrentContext = "w"
	kc, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

// writeStatus answers code with a Kubernetes Status saying message.
func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Code: int32(code), Reason: reason, Message: message})
}
