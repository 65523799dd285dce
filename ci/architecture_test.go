package ci

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/scanner"
	gotoken "go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// pure lists the packages that decide: they take values and return values, with
// no clock, client, process or network inside (docs/architecture.md: the pure cores).
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
	"github.com/allot-dev/allot/schema/source":    true, // reads Git objects through git
	"github.com/allot-dev/allot/planner/tfrun":    true, // runs terraform
	"github.com/allot-dev/allot/scheduler/runner": true, // the in-cluster scheduler: informers and binds
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

// list runs go list on the module's patterns.
func list(t *testing.T, patterns ...string) []pkg {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-deps=false", "-json"}, patterns...)...)
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	for dec := json.NewDecoder(bytes.NewReader(out)); dec.More(); {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// isAdapter says whether a package is an adapter, or under one (its test
// fixtures, such as planner/tfrun/kwok).
func isAdapter(path string) bool {
	for a := range adapters {
		if path == a || strings.HasPrefix(path, a+"/") {
			return true
		}
	}
	return false
}

// layers orders the project's folders: a package imports only packages of its
// own layer or the ones below (docs/architecture.md). Test files may reach up.
var layers = [][]string{
	{"api", "schema", "internal"},
	{"fleet"},
	{"scheduler"},
	{"planner", "policies"},
	{"controllers"},
	{"cmd", "hack", "ci"},
}

// layerOf returns the layer of a package of the project, -1 when it is in none.
func layerOf(path string) int {
	rel, ok := strings.CutPrefix(path, "github.com/allot-dev/allot/")
	if !ok {
		return -1
	}
	top, _, _ := strings.Cut(rel, "/")
	for i, l := range layers {
		for _, name := range l {
			if top == name {
				return i
			}
		}
	}
	return -1
}

// TestLayers checks every package of the module against the layer order.
func TestLayers(t *testing.T) {
	pkgs := list(t, "./...")
	for _, p := range pkgs {
		own := layerOf(p.ImportPath)
		if own < 0 {
			t.Errorf("%s is in no layer: add its folder to layers", p.ImportPath)
			continue
		}
		for _, imp := range p.Imports {
			if l := layerOf(imp); l > own {
				t.Errorf("%s (layer %v) imports %s (layer %v), a layer above it", p.ImportPath, layers[own], imp, layers[l])
			}
		}
	}
	if len(pkgs) < 20 {
		t.Fatalf("checked only %d packages", len(pkgs))
	}
}

func TestArchitecture(t *testing.T) {
	n := 0
	for _, p := range list(t, pure...) {
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

// TestNoCgoOutsideTheAgent: the module (the CLI, the manager, every test) never
// links NVML, and the CLI builds with CGO_ENABLED=0 into a static binary. The
// agent, which needs cgo for NVML, is its own module (cmd/allot-agent).
func TestNoCgoOutsideTheAgent(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-test", "-f", "{{.ImportPath}}", "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/NVIDIA/go-nvml") {
			t.Errorf("the module depends on %s: NVML belongs to cmd/allot-agent alone", p)
		}
	}
	bin := filepath.Join(t.TempDir(), "allot")
	build := exec.Command("go", "build", "-o", bin, "./cmd/allot")
	build.Dir = ".."
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build ./cmd/allot: %v\n%s", err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("allot built with CGO_ENABLED=0 is dynamically linked (%v)", p.Type)
		}
	}
}

// contractPkg holds the names allot reads and writes on cluster objects
// (docs/contracts.md, "Names on nodes and pods").
const contractPkg = "github.com/allot-dev/allot/api/contract"

// TestContract: the contract package imports nothing, so every layer may
// import it, and no other Go source of the repository (nested modules
// included; tests, which pin the wire values, excepted) spells one of its
// label or annotation keys: a key has one definition.
func TestContract(t *testing.T) {
	pkgs := list(t, "./api/contract")
	if len(pkgs) != 1 {
		t.Fatalf("go list ./api/contract: %d packages", len(pkgs))
	}
	if imp := pkgs[0].Imports; len(imp) != 0 {
		t.Errorf("%s imports %v: the contract imports nothing", contractPkg, imp)
	}
	keys := map[string]string{} // value: constant
	fset := gotoken.NewFileSet()
	for _, f := range pkgs[0].GoFiles {
		file, err := parser.ParseFile(fset, filepath.Join(pkgs[0].Dir, f), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, v := range vs.Values {
				if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == gotoken.STRING {
					if val, err := strconv.Unquote(lit.Value); err == nil && strings.Contains(val, "allot.dev/") {
						keys[val] = vs.Names[i].Name
					}
				}
			}
			return true
		})
	}
	if len(keys) < 10 {
		t.Fatalf("found %d keys in %s: the parse is wrong", len(keys), contractPkg)
	}
	own, err := filepath.Abs(pkgs[0].Dir)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	err = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if abs, _ := filepath.Abs(path); abs == own || path != ".." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		checked++
		var s scanner.Scanner
		file := fset.AddFile(path, -1, len(src))
		s.Init(file, src, nil, 0)
		for {
			pos, tok, lit := s.Scan()
			if tok == gotoken.EOF {
				break
			}
			if tok != gotoken.STRING {
				continue
			}
			if val, err := strconv.Unquote(lit); err == nil && keys[val] != "" {
				t.Errorf("%s: spells %q: use contract.%s", fset.Position(pos), val, keys[val])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked only %d files", checked)
	}
}
