package runner_test

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mst-eval/mst/runner"
)

// TestProcessesWorkerEnvironment: a worker of the processes runner gets
// PATH, HOME, the locale and where the cloud chains look (emulators,
// profiles, credential files) from the coordinator's environment, and none
// of the keys and other variables the user's shell holds (an AWS key pair
// in the environment included). The worker here is
// a shell printing its own /proc environ.
func TestProcessesWorkerEnvironment(t *testing.T) {
	canaries := map[string]string{
		"ANTHROPIC_API_KEY": "canary-anthropic-key-1", "OPENAI_API_KEY": "canary-openai-key-2",
		"GITHUB_TOKEN": "canary-github-token-3", "MY_SHELL_SECRET": "canary-shell-secret-4",
		"AWS_SECRET_ACCESS_KEY": "canary-aws-secret-5", "AWS_SESSION_TOKEN": "canary-aws-session-6",
		"AWS_ACCESS_KEY_ID": "canary-aws-key-id-7",
	}
	for k, v := range canaries {
		t.Setenv(k, v)
	}
	t.Setenv("LC_ALL", "C.UTF-8")
	// Where the cloud chains look, for a worker that writes into a bucket.
	t.Setenv("STORAGE_EMULATOR_HOST", "127.0.0.1:4443")
	t.Setenv("AWS_PROFILE", "evals")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/etc/mst/aws-credentials")
	r, err := runner.ProcessesDefinition().New(t.Context(), runner.Params{
		MST: []string{"/bin/sh"}, Options: map[string]string{"dir": filepath.Join(t.TempDir(), "shards")},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m, err := runner.CreateProcessesMachine(t.Context(), r, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := m.Exec(t.Context(), []string{"/bin/sh", "-c", "cat /proc/$$/environ"}, nil, &out, &errOut); err != nil {
		t.Fatalf("Exec = %v (%s)", err, errOut.String())
	}
	env := strings.Split(out.String(), "\x00")
	for k, v := range canaries {
		if strings.Contains(out.String(), v) {
			t.Errorf("the worker's environment has %s", k)
		}
	}
	for _, want := range []string{"PATH=", "HOME=", "LC_ALL=C.UTF-8", "STORAGE_EMULATOR_HOST=127.0.0.1:4443", "AWS_PROFILE=evals", "AWS_SHARED_CREDENTIALS_FILE=/etc/mst/aws-credentials"} {
		found := false
		for _, kv := range env {
			found = found || strings.HasPrefix(kv, want)
		}
		if !found {
			t.Errorf("the worker's environment lacks %s (it has %q)", want, env)
		}
	}
}
