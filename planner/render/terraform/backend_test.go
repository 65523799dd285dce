package terraform

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Backend settings that may hold credentials never reach the module: they are
// handed to 'terraform init -backend-config' at run time.
func TestBackendCredentials(t *testing.T) {
	opts := Options{Backend: Backend{Type: "http", Config: map[string]string{
		"address":  "https://state.example/{cluster}",
		"username": "allot",
		"password": "hunter2-{cluster}",
	}}}
	for cluster, b := range render(t, configs["fleet"], opts) {
		if strings.Contains(string(b), "hunter2") {
			t.Errorf("the module of %s holds the backend password:\n%s", cluster, b)
		}
	}
	got := at(t, decoded(t, "dgx-pod", opts), "terraform", "backend")
	want := map[string]any{"http": map[string]any{"address": "https://state.example/dgx-pod", "username": "allot"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("backend (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"password=hunter2-dgx-pod"}, opts.Backend.InitConfig("dgx-pod")); diff != "" {
		t.Errorf("init settings (-want +got):\n%s", diff)
	}
	for key, want := range map[string]bool{
		"bucket": false, "prefix": false, "key": false, "region": false, "address": false,
		"password": true, "access_key": true, "secret_key": true, "credentials": true, "access_token": true,
		"sas_token": true, "client_secret": true, "sse_customer_key": true, "token": true,
	} {
		if got := Credential(key); got != want {
			t.Errorf("Credential(%q) = %v, want %v", key, got, want)
		}
	}
}
