package run_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/secrets"
)

func TestParseRunnerOptions(t *testing.T) {
	t.Parallel()
	known := secrets.New()
	if err := known.Add("INTERNAL_KEY", "swordfish-2026"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		runner  *runner.Definition
		pairs   []string
		want    run.RunnerChoice
		wantErr string
	}{
		{runner: runner.LocalDefinition(), want: run.RunnerChoice{Options: map[string]string{}, Shards: 1, Keep: runner.KeepNever}},
		{runner: runner.ProcessesDefinition(), pairs: []string{"shards=3", "keep=failed", "dir=/tmp/shards"},
			want: run.RunnerChoice{Options: map[string]string{"dir": "/tmp/shards"}, Shards: 3, Keep: runner.KeepFailed}},
		{runner: runner.LocalDefinition(), pairs: []string{"shards=2"}, wantErr: "the local runner runs one shard; use --runner processes"},
		{runner: runner.ProcessesDefinition(), pairs: []string{"shards=0"}, wantErr: "shards is a whole number, 1 or more"},
		{runner: runner.ProcessesDefinition(), pairs: []string{"shards=100000"}, wantErr: "runs at most"},
		{runner: runner.ProcessesDefinition(), pairs: []string{"keep=sometimes"}, wantErr: "keep is never, failed or always"},
		{runner: runner.ProcessesDefinition(), pairs: []string{"dri=/tmp"}, wantErr: "dri"},
		{runner: runner.ProcessesDefinition(), pairs: []string{"dir"}, wantErr: "write key=value"},
		{runner: runner.ProcessesDefinition(), pairs: []string{"token=abc"}, wantErr: "put it in the secrets file"},
		{runner: runner.ProcessesDefinition(), pairs: []string{"dir=sk-ant-api03-abcdef"}, wantErr: "looks like a key or token"},
		{runner: runner.ProcessesDefinition(), pairs: []string{"dir=Zx81Qm4Lr2Tt9Vb7Nc3Kp6Wd"}, wantErr: "looks like a key or token"},
		{runner: runner.ProcessesDefinition(), pairs: []string{"dir=/keys/swordfish-2026"}, wantErr: "holds the secret INTERNAL_KEY"},
	}
	for _, tt := range tests {
		got, err := run.ParseRunnerOptions(tt.runner, tt.pairs, known)
		switch {
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("ParseRunnerOptions(%s, %q) = %v, want an error containing %q", tt.runner.Name, tt.pairs, err, tt.wantErr)
		case tt.wantErr == "" && err != nil:
			t.Errorf("ParseRunnerOptions(%s, %q) = %v", tt.runner.Name, tt.pairs, err)
		case tt.wantErr == "":
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseRunnerOptions(%s, %q) (-want +got):\n%s", tt.runner.Name, tt.pairs, diff)
			}
		}
	}
}

// TestRunnerOptionSecretsAnywhere plants secrets of each kind in each place
// of an option (alone, in a path, in a URL's user info or query, escaped, in
// the name, in a pair without =) and checks that each is refused, that the
// message names what it found and never quotes the secret, and that
// ordinary values pass.
func TestRunnerOptionSecretsAnywhere(t *testing.T) {
	t.Parallel()
	known := secrets.New()
	for name, v := range map[string]string{"FILE_KEY": "p@ss word/2026", "ENV_KEY": "q7-harbour-lantern", "RAW_KEY": "caf\xe9-\xff\xfe-key"} {
		if err := known.Add(name, v); err != nil {
			t.Fatal(err)
		}
	}
	planted := map[string]string{
		"known":           "q7-harbour-lantern",
		"known escaped":   url.PathEscape("p@ss word/2026"),
		"known raw bytes": "caf\xe9-\xff\xfe-key",
		"anthropic key":   "sk-ant-api03-AbCdEf0123456789",
		"github token":    "ghp_0123456789abcdefABCDEF",
		"aws key":         "AKIAIOSFODNN7EXAMPLE",
		"random run":      "Zx81Qm4Lr2Tt9Vb7Nc3Kp6Wd",
	}
	places := map[string]func(s string) string{
		"alone":       func(s string) string { return "dir=" + s },
		"in a path":   func(s string) string { return "dir=/home/me/keys/" + s + "/shards" },
		"after a dot": func(s string) string { return "dir=/tmp/x." + s },
		"in a query":  func(s string) string { return "host=https://example.com/p?x=" + s },
		"in the name": func(s string) string { return s + "=/tmp" },
		"without =":   func(s string) string { return "/tmp/" + s },
	}
	for what, secret := range planted {
		for where, put := range places {
			pair := put(secret)
			_, err := run.ParseRunnerOptions(runner.ProcessesDefinition(), []string{pair}, known)
			if err == nil {
				t.Errorf("%s %s: ParseRunnerOptions(%q) accepted it", what, where, pair)
				continue
			}
			msg := err.Error()
			if strings.Contains(msg, secret) || strings.Contains(msg, secret[:8]) {
				t.Errorf("%s %s: the error quotes the secret: %s", what, where, msg)
			}
			if !strings.Contains(msg, "holds") || !strings.Contains(msg, "--runner-option") {
				t.Errorf("%s %s: the error does not say which option and what it holds: %s", what, where, msg)
			}
		}
	}
	for _, pair := range []string{"dir=ssh://me:Hunter2hunter@build.example.com/x", "dir=me:hunter2@host", "dir=https://h/x?access_token=abc"} {
		_, err := run.ParseRunnerOptions(runner.ProcessesDefinition(), []string{pair}, known)
		if err == nil || strings.Contains(err.Error(), "unter2") || strings.Contains(err.Error(), "abc") {
			t.Errorf("ParseRunnerOptions(%q) = %v, want a refusal that does not quote the credential", pair, err)
		}
	}
	for _, ok := range []string{"/tmp/shards", "/home/me/.cache/mst-work_2026", "/srv/runs/123e4567-e89b-12d3-a456-426614174000", "/var/lib/mst.d/user@host", "/mnt/data:ro", "/tmp/TestSSHQuickstart3901495322/002/client/id_ed25519", "/srv/MyProjectBackupFolder2024Final/x"} {
		if _, err := run.ParseRunnerOptions(runner.ProcessesDefinition(), []string{"dir=" + ok}, known); err != nil {
			t.Errorf("ParseRunnerOptions(dir=%s) = %v, want it accepted", ok, err)
		}
	}
}
