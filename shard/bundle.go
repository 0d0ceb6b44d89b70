package shard

import (
	"encoding/json"
	"hash/fnv"
	"time"

	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/transcript"
)

// Bundle is everything a worker needs to run one shard, resolved by the
// coordinator: it never loads a dataset or a config itself.
type Bundle struct {
	Run      transcript.Run `json:"run"`
	Shard    int            `json:"shard"`
	Variants []Variant      `json:"variants"`
	// Cases are the shard's cases (whole cases: all their variants and
	// trials are in this shard).
	Cases []dataset.Case `json:"cases"`
	// Trials are the shard's trial keys, in the order to start them.
	Trials []transcript.Key `json:"trials"`
	// Concurrency is how many trials the worker runs at once.
	Concurrency int `json:"concurrency"`
}

// Variant is a variant resolved for a worker.
type Variant struct {
	Name    string           `json:"name"`
	Client  string           `json:"client"`
	Model   string           `json:"model"`
	Options json.RawMessage  `json:"options,omitempty"`
	Servers []servers.Server `json:"servers"`
	// Timeout is the trial timeout (0: none).
	Timeout time.Duration `json:"timeout,omitempty"`
	// Provider is the model's provider, for limits ("anthropic").
	Provider string `json:"provider,omitempty"`
}

// Assign returns the shard of a case among n: fnv64a(caseID) mod n. The
// rule is stable across versions, so a resumed run and a rerun agree on
// where each case goes, and a case's variants and trials stay together.
func Assign(caseID string, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(caseID))
	return int(h.Sum64() % uint64(n))
}
