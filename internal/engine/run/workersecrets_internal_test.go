package run

import (
	"testing"

	"github.com/mst-eval/mst/secrets"
)

// TestWorkerSecrets: a worker gets its clients' keys, never a judge's key
// or a dataset source's credential, unless a client needs the same
// variable.
func TestWorkerSecrets(t *testing.T) {
	t.Parallel()
	set := secrets.New()
	for k, v := range map[string]string{
		"ANTHROPIC_API_KEY": "sk-client-canary-1",
		"JUDGE_KEY":         "sk-judge-canary-2",
		"ACMESQL_KEY":       "db-canary-3",
		"SHARED_KEY":        "shared-canary-4",
	} {
		if err := set.Add(k, v); err != nil {
			t.Fatal(err)
		}
	}
	p := &Plan{
		KeyVars:     []string{"ANTHROPIC_API_KEY", "SHARED_KEY"},
		judgeKeys:   []string{"JUDGE_KEY"},
		sourceCreds: []string{"ACMESQL_KEY", "SHARED_KEY"},
	}
	got := p.workerSecrets(set).Env()
	for _, k := range []string{"ANTHROPIC_API_KEY", "SHARED_KEY"} {
		if _, ok := got[k]; !ok {
			t.Errorf("workerSecrets dropped %s, which a client reads", k)
		}
	}
	for _, k := range []string{"JUDGE_KEY", "ACMESQL_KEY"} {
		if _, ok := got[k]; ok {
			t.Errorf("workerSecrets kept %s; a worker must never get it", k)
		}
	}
	// Without judges or sources, the set goes as it is.
	if q := (&Plan{}).workerSecrets(set); q != set {
		t.Error("workerSecrets copied a set it had nothing to drop from")
	}
}
