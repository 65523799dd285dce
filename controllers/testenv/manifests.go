package testenv

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// ManifestDocs splits a YAML file of the repository (rel to its root) into its
// documents.
func ManifestDocs(t testing.TB, rel string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(Root(), rel))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(b), "\n---\n")
}

// ApplyManifests creates the objects of YAML files of the repository, and the
// namespace allot-system their service accounts live in.
func ApplyManifests(t testing.TB, c client.Client, files ...string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "allot-system"}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		for _, doc := range ManifestDocs(t, f) {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			if err := c.Create(context.Background(), u); err != nil {
				t.Fatalf("%s: creating %s %s: %v", f, u.GetKind(), u.GetName(), err)
			}
		}
	}
}

// ServiceAccountToken creates a service account, binds it to clusterRole
// unless that is empty, and returns a token of it (TokenRequest API).
func ServiceAccountToken(t testing.TB, c client.Client, ns, name, clusterRole string) string {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := c.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	if clusterRole != "" {
		b := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + clusterRole},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}}}
		if err := c.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	return Token(t, c, ns, name)
}

// Token returns a token of the service account ns/name (TokenRequest API).
func Token(t testing.TB, c client.Client, ns, name string) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	tr := &authenticationv1.TokenRequest{}
	if err := c.SubResource("token").Create(context.Background(), sa, tr); err != nil {
		t.Fatalf("a token of %s/%s: %v", ns, name, err)
	}
	return tr.Status.Token
}

// MetricsRefused checks that url serves no metrics to a request without a
// token, to stranger's token (allowed nothing), to a token the API server does
// not know (it fails its TokenReview: controller-runtime's filter answers 500),
// nor over plain HTTP.
func MetricsRefused(t testing.TB, url, stranger string) {
	t.Helper()
	for who, want := range map[string]int{"": http.StatusUnauthorized, stranger: http.StatusForbidden, "not-a-token": http.StatusInternalServerError} {
		resp, err := Scrape(url, who)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want || strings.Contains(string(body), "allot_") {
			t.Errorf("scraping %s with token %.12q: %s, want %d and no metrics", url, who, resp.Status, want)
		}
	}
	if resp, err := http.Get("http" + strings.TrimPrefix(url, "https")); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("%s is served over plain HTTP", url)
		}
	}
}

// Scrape GETs url over TLS (a test server's self-signed certificate), with the
// bearer token unless it is empty.
func Scrape(url, token string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the test server's self-signed certificate
	return hc.Do(req)
}

// PodTemplate is the pod template of the Deployment or DaemonSet in a YAML
// file of the repository.
func PodTemplate(t testing.TB, rel string) corev1.PodTemplateSpec {
	t.Helper()
	var w struct {
		Spec struct{ Template corev1.PodTemplateSpec }
	}
	for _, doc := range ManifestDocs(t, rel) {
		if strings.Contains(doc, "kind: Deployment") || strings.Contains(doc, "kind: DaemonSet") {
			if err := yaml.Unmarshal([]byte(doc), &w); err != nil {
				t.Fatalf("%s: %v", rel, err)
			}
		}
	}
	if len(w.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("%s: want one Deployment or DaemonSet of one container", rel)
	}
	return w.Spec.Template
}
