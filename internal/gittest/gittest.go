// Package gittest runs git in tests, as a fixed author and without the
// machine's system configuration, so that commits are the same everywhere.
package gittest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Run runs git with args in dir and returns its output; a failure fails t.
func Run(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// Hostile writes into the work tree top the files of a change that tries to
// make Git obey it when the capacity repository is the folder dir: a folder
// that looks like a bare repository (HEAD, config, objects, refs) whose config
// names programs (fsmonitor, pager, signature, diff, textconv, filters, ssh)
// and hooks, and refs of its own; attributes and a .gitmodules asking for
// them; and a folder origin/main at the top holding dir's files, as a base
// that asks nobody. Every program named writes marker.
func Hostile(t *testing.T, top, dir, marker string) {
	t.Helper()
	run := "touch " + marker + " #"
	files := map[string]string{
		dir + "/HEAD": "ref: refs/heads/main\n",
		dir + "/config": `[core]
	repositoryformatversion = 0
	bare = true
	fsmonitor = "` + run + `"
	hooksPath = hooks
	pager = "` + run + `"
	sshCommand = "` + run + `"
[log]
	showSignature = true
[gpg]
	program = "` + run + `"
[diff]
	external = "` + run + `"
[diff "evil"]
	textconv = "` + run + `"
[filter "evil"]
	clean = "` + run + `"
	smudge = "` + run + `"
	process = "` + run + `"
[uploadpack]
	packObjectsHook = "` + run + `"
`,
		dir + "/hooks/post-checkout":         "#!/bin/sh\ntouch " + marker + "\n",
		dir + "/hooks/reference-transaction": "#!/bin/sh\ntouch " + marker + "\n",
		dir + "/objects/info/alternates":     top + "/.git/objects\n",
		dir + "/refs/heads/main":             "0000000000000000000000000000000000000000\n",
		dir + "/refs/remotes/origin/main":    "0000000000000000000000000000000000000000\n",
		dir + "/.gitattributes":              "* diff=evil filter=evil\n",
		".gitattributes":                     "* diff=evil filter=evil\n",
		".gitmodules":                        "[submodule \"x\"]\n\tpath = x\n\turl = ext::" + run + "\n",
	}
	for name, data := range files {
		p := filepath.Join(top, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// origin/main at the top: the change's own files, as a base that asks
	// nobody.
	if err := os.CopyFS(filepath.Join(top, "origin", "main"), os.DirFS(filepath.Join(top, dir))); err != nil {
		t.Fatal(err)
	}
}
