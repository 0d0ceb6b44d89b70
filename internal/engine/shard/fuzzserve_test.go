package shard_test

import (
	"context"
	"io"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/transcript"
)

// FuzzServe feeds Serve any bytes as a worker's stdout and checks what
// the coordinator does with them, whatever they are: Serve returns, every
// path it fetches is a clean path under transcripts/ of the worker's
// results, and it reports only planned trials of the shard, each at most
// once. Its seeds (testdata/fuzz/FuzzServe) are the worker sides of the
// protocol archives and lying workers' streams.
func FuzzServe(f *testing.F) {
	f.Add([]byte(`{"type":"hello","protocol":"mst.shard/v1","mstVersion":"test","shard":0,"os":"linux","arch":"amd64"}
{"type":"acquire","id":1,"key":{"case":"a","variant":"v","trial":1}}
{"type":"trial","acquire":1,"key":{"case":"a","variant":"v","trial":1},"status":"answered","path":"transcripts/v/a.t1.json"}
{"type":"done","counts":{"planned":1,"answered":1},"cleanupOk":true}
`))
	planned := map[transcript.Key]bool{}
	b := &shard.Bundle{}
	for _, c := range []string{"a", "b", "../x", "weather-today", "weather-tomorrow"} {
		for _, v := range []string{"v", "baseline"} {
			for n := 1; n <= 2; n++ {
				k := transcript.Key{Case: c, Variant: v, Trial: n}
				planned[k] = true
				b.Add(shard.Planned{Key: k})
			}
		}
	}
	f.Fuzz(func(t *testing.T, stream []byte) {
		var mu sync.Mutex
		var fetched []string
		fetch := func(ctx context.Context, path string) ([]byte, error) {
			mu.Lock()
			fetched = append(fetched, path)
			mu.Unlock()
			return []byte(`{}`), nil
		}
		ev := &trialEvents{}
		c := &shard.Coordinator{MSTVersion: "test", Events: ev, Logger: discardLogger(), Bundles: []*shard.Bundle{b}, Silence: time.Hour}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		c.Serve(ctx, 0, strings.NewReader(string(stream)), io.Discard, fetch)
		mu.Lock()
		defer mu.Unlock()
		for _, p := range fetched {
			if !fs.ValidPath(p) || !strings.HasPrefix(p, "transcripts/") || strings.ContainsAny(p, "\\\x00") {
				t.Errorf("Serve fetched %q, not a clean path under transcripts/", p)
			}
		}
		seen := map[transcript.Key]bool{}
		for _, m := range ev.got() {
			if !planned[m.Key] {
				t.Errorf("Serve reported %s, not a planned trial of the shard", m.Key)
			}
			if seen[m.Key] {
				t.Errorf("Serve reported %s twice", m.Key)
			}
			seen[m.Key] = true
		}
	})
}
