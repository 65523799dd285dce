package main

import (
	"bytes"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

// testdata is absolute: some tests change directory.
var testdata, _ = filepath.Abs("testdata")

// allot runs the CLI in-process and returns its exit code, stdout and stderr.
func allot(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	if _, ok := env["GITHUB_ACTIONS"]; !ok {
		t.Setenv("GITHUB_ACTIONS", "")
	}
	if _, ok := env["SOURCE_DATE_EPOCH"]; !ok { // reports' provenance: goldens have none
		t.Setenv("SOURCE_DATE_EPOCH", "")
	}
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// copyExamples copies examples/ into a temporary directory and returns it.
func copyExamples(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	src := filepath.Join("..", "..", "examples")
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// edit replaces the first occurrence of old with new in dir/file; old must occur.
func edit(t *testing.T, dir, file, old, new string) {
	t.Helper()
	p := filepath.Join(dir, file)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s does not contain %q", file, old)
	}
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// lineOf returns the 1-based line of the first occurrence of s in dir/file.
func lineOf(t *testing.T, dir, file, s string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(b), s)
	if i < 0 {
		t.Fatalf("%s does not contain %q", file, s)
	}
	return strings.Count(string(b[:i]), "\n") + 1
}

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join(testdata, name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the output (run go test -update to accept):\n--- want\n%s\n--- got\n%s", p, want, got)
	}
}
