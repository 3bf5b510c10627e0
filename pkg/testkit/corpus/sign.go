package corpus

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"unicode/utf8"

	"github.com/hookline/hookline/pkg/testkit/proctest"
)

// GitHubMethodsVersion is the version of @octokit/webhooks-methods (GitHub's
// signing library) that .ci/run installs under .node/ at the repository's
// top, and the one SignGitHub uses.
const GitHubMethodsVersion = "6.0.0"

// githubMethods is the library's module file, or why it cannot be used.
func githubMethods() (string, error) {
	if _, err := exec.LookPath("node"); err != nil {
		return "", fmt.Errorf("node is not installed")
	}
	dir := filepath.Join(proctest.RepoRoot(), ".node", "node_modules", "@octokit", "webhooks-methods")
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		return "", fmt.Errorf("@octokit/webhooks-methods is not installed (npm install --prefix .node @octokit/webhooks-methods@%s, as .ci/run does)", GitHubMethodsVersion)
	}
	var pkg struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(b, &pkg); err != nil || pkg.Version != GitHubMethodsVersion {
		return "", fmt.Errorf("@octokit/webhooks-methods under .node is version %q, want %s (as .ci/run installs it)", pkg.Version, GitHubMethodsVersion)
	}
	return filepath.Join(dir, "dist-node", "index.js"), nil
}

// SignGitHub signs each body with secret as GitHub does (X-Hub-Signature-256,
// "sha256=<hex>"), with GitHub's own library run by node: one process for
// every body. The error says why the library cannot be used (node or the
// package missing, another version) or that it failed. Bodies must be
// UTF-8 (the library signs a string). Cost: one node process.
func SignGitHub(secret string, bodies [][]byte) ([]string, error) {
	mod, err := githubMethods()
	if err != nil {
		return nil, err
	}
	strs := make([]string, len(bodies))
	for i, b := range bodies {
		if !utf8.Valid(b) {
			return nil, fmt.Errorf("body %d is not UTF-8: the library signs strings", i)
		}
		strs[i] = string(b)
	}
	in, err := json.Marshal(strs)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("node", filepath.Join(filepath.Dir(Dir()), "sign-github.mjs"), mod, secret)
	cmd.Stdin = bytes.NewReader(in)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("node sign-github.mjs: %w\n%s", err, errb.String())
	}
	var sigs []string
	if err := json.Unmarshal(out.Bytes(), &sigs); err != nil || len(sigs) != len(bodies) {
		return nil, fmt.Errorf("node sign-github.mjs: %d signatures for %d bodies (%v)", len(sigs), len(bodies), err)
	}
	return sigs, nil
}
