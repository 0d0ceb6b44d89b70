package shard

import (
	"context"
	"slices"
	"sync"
)

// ImageDigestEnv names the variable a runner sets on the machines it makes
// (a container, a pod) to the image they run, pinned by digest
// (NAME@sha256:…). `mst collect` reads it into Worker.ImageDigest, and the
// worker's hello carries it into run.json. Runners cannot import this
// package, so each spells the name itself.
const ImageDigestEnv = "MST_IMAGE_DIGEST"

// clientVersions asks, for the hello, the version of the product each
// setting of the bundle drives: the program its options name
// (client.Definition.Version), or this MST for a client built into it. The
// settings are asked at once, each once; heartbeats go on meanwhile, so a
// slow program costs time, never the shard. A client whose variants all
// run the same version is recorded under its name; one whose variants run
// different versions (two CLIs given by path) under CLIENT@VARIANT for
// each variant. A version that cannot be found is left out and logged:
// the readiness check's preflight says what is wrong.
func (w *Worker) clientVersions(ctx context.Context, b *Bundle) map[string]string {
	type asked struct {
		client, variant, version string
	}
	// One entry per distinct setting, in the bundle's order; the asks
	// fill in their own entry (the slice never grows past its capacity,
	// so the entries stay where they are).
	found := make([]asked, 0, len(b.Settings))
	var wg sync.WaitGroup
	seen := map[string]bool{}
	for _, set := range b.Settings {
		id := set.Client + "\x00" + set.Variant + "\x00" + string(set.Options)
		if seen[id] {
			continue
		}
		seen[id] = true
		def, err := w.Clients.Lookup(set.Client)
		if err != nil {
			continue
		}
		found = append(found, asked{client: set.Client, variant: set.Variant})
		a := &found[len(found)-1]
		if def.Version == nil {
			a.version = w.MSTVersion
			continue
		}
		wg.Go(func() {
			v, err := def.Version(ctx, set.Options)
			if err != nil || v == "" {
				w.Logger.Warn("the client's version could not be found; run.json records none for it", "client", set.Client, "variant", set.Variant, "err", err)
				return
			}
			a.version = v
		})
	}
	wg.Wait()
	byClient := map[string][]asked{}
	for _, a := range found {
		if a.version != "" {
			byClient[a.client] = append(byClient[a.client], a)
		}
	}
	out := map[string]string{}
	for client, as := range byClient {
		if !slices.ContainsFunc(as, func(a asked) bool { return a.version != as[0].version }) {
			out[client] = as[0].version
			continue
		}
		// A variant's first setting stands for it (a case's own options
		// rarely name another program).
		for _, a := range as {
			if _, ok := out[client+"@"+a.variant]; !ok {
				out[client+"@"+a.variant] = a.version
			}
		}
	}
	return out
}

// builtinVersion is the version a transcript of client records when the
// client says none: this MST's for a client built into it (its definition
// has no Version), else "".
func (w *Worker) builtinVersion(client string) string {
	if def, err := w.Clients.Lookup(client); err == nil && def.Version == nil {
		return w.MSTVersion
	}
	return ""
}
