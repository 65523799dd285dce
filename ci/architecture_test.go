package ci

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// pure lists the packages that decide: they take values and return values, with
// no clock, client, process or network inside (STYLE.md, "Functional core").
// A package pattern ending in /... covers its subpackages; adapters are listed in
// adapters and exempt.
var pure = []string{
	"github.com/allot-dev/allot/schema/...",
	"github.com/allot-dev/allot/policies/...",
	"github.com/allot-dev/allot/planner/...",
	"github.com/allot-dev/allot/fleet/...",
	"github.com/allot-dev/allot/scheduler/...",
}

var adapters = map[string]bool{
	"github.com/allot-dev/allot/schema/source": true, // reads Git objects through git
	"github.com/allot-dev/allot/fleet/agent":   true, // reads GPUs through NVML, writes its node
}

// forbidden anywhere in a pure package's dependencies.
var forbiddenDeps = []string{
	"k8s.io/client-go/",
	"sigs.k8s.io/controller-runtime",
	"github.com/NVIDIA/go-nvml",
	"github.com/hashicorp/terraform-exec",
}

// forbidden as a direct import of a pure package.
var forbiddenImports = []string{"os/exec", "net/http", "net"}

var timeNow = regexp.MustCompile(`\btime\.Now\(`)

type pkg struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Imports    []string
	Deps       []string
}

// isAdapter says whether a package is an adapter, or under one (its test
// fixtures, such as fleet/agent/nvmltest); every .../runner, and what is under
// it (planner/runner/kwok), is one too.
func isAdapter(path string) bool {
	for a := range adapters {
		if path == a || strings.HasPrefix(path, a+"/") {
			return true
		}
	}
	return strings.HasSuffix(path, "/runner") || strings.Contains(path, "/runner/")
}

func TestArchitecture(t *testing.T) {
	args := append([]string{"list", "-deps=false", "-json"}, pure...)
	cmd := exec.Command("go", args...)
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	n := 0
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if isAdapter(p.ImportPath) {
			continue
		}
		n++
		for _, imp := range p.Imports {
			for _, f := range forbiddenImports {
				if imp == f {
					t.Errorf("%s imports %s: pure packages do no I/O", p.ImportPath, imp)
				}
			}
		}
		for _, d := range p.Deps {
			for _, f := range forbiddenDeps {
				if strings.HasPrefix(d, f) {
					t.Errorf("%s depends on %s: pure packages stay free of clients", p.ImportPath, d)
				}
			}
		}
		for _, f := range p.GoFiles {
			b, err := os.ReadFile(filepath.Join(p.Dir, f))
			if err != nil {
				t.Fatal(err)
			}
			if timeNow.Match(b) {
				t.Errorf("%s/%s calls time.Now: pass the time in", p.ImportPath, f)
			}
		}
	}
	if n < 5 {
		t.Fatalf("checked only %d packages: the patterns are wrong", n)
	}
}
