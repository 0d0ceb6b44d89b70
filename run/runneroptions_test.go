package run_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/run"
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
