package run

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/eval"
	"github.com/mst-eval/mst/provider"
)

// Check makes sure an eval can run where it will run, before any client or
// server opens: every variant's client allows the OS of the machines that
// run its trials (goos; empty when the runner's OS is unknown, and then not
// guessed) and is available in this build, and every case override is one
// its clients honour, with options their schemas accept. It returns every
// problem, one per line.
//
// With preflight set (the trials run on this machine), each variant's
// client also checks what it needs here, such as an installed CLI.
func Check(cfg *eval.Config, cases []dataset.Case, reg *client.Registry, goos string, preflight bool) error {
	var errs []error
	for _, name := range cfg.VariantOrder {
		v := cfg.Variants[name]
		if goos == "" {
			continue
		}
		if err := reg.CheckOS(v.Client, goos); err != nil {
			errs = append(errs, fmt.Errorf("%s: variants.%s.client: %w", cfg.File, name, err))
			continue
		}
		if def, err := reg.Lookup(v.Client); err == nil {
			if err := checkModel(def, v.Model); err != nil {
				errs = append(errs, fmt.Errorf("%s: variants.%s.model: %w", cfg.File, name, err))
			}
		}
		if def, err := reg.Lookup(v.Client); err == nil && preflight && def.Preflight != nil {
			if err := def.Preflight(v.ClientOptions); err != nil {
				errs = append(errs, fmt.Errorf("%s: variants.%s: %w", cfg.File, name, err))
			}
		}
	}
	for _, c := range cases {
		if c.Model == "" && len(c.ClientOptions) == 0 {
			continue
		}
		where := fmt.Sprintf("%s: case %q", c.Source, c.ID)
		for _, name := range cfg.VariantOrder {
			v := cfg.Variants[name]
			def, err := reg.Lookup(v.Client)
			if err != nil {
				continue // reported with the variant
			}
			if c.Model != "" && !slices.Contains(def.CaseOverrides, "model") {
				errs = append(errs, fmt.Errorf("%s: model: client %s (variant %s) runs every case on the variant's model; remove the case's model, or run this case under a client that takes one per case", where, def.Name, name))
			} else if c.Model != "" {
				if err := checkModel(def, c.Model); err != nil {
					errs = append(errs, fmt.Errorf("%s: model: %w (variant %s)", where, err, name))
				}
			}
			if len(c.ClientOptions) == 0 {
				continue
			}
			if !slices.Contains(def.CaseOverrides, "clientOptions") {
				errs = append(errs, fmt.Errorf("%s: clientOptions: client %s (variant %s) takes its options from the variant only; move them to variants.%s.clientOptions", where, def.Name, name, name))
				continue
			}
			merged, err := mergeOptions(v.ClientOptions, c.ClientOptions)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: clientOptions: %w", where, err))
				continue
			}
			problems, err := eval.CheckOptions(def.Options, merged)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: clientOptions: %w", where, err))
			}
			for _, p := range problems {
				errs = append(errs, fmt.Errorf("%s: clientOptions.%s (client %s, variant %s)", where, p, def.Name, name))
			}
		}
	}
	if len(errs) == 0 {
		return nil
	}
	lines := make([]string, len(errs))
	for i, e := range errs {
		lines[i] = e.Error()
	}
	return errors.New(strings.Join(lines, "\n"))
}

// checkModel checks that a client can run a model's provider.
func checkModel(def *client.Definition, model string) error {
	if len(def.ModelProviders) == 0 || model == "" {
		return nil
	}
	p := provider.Of(model)
	if slices.Contains(def.ModelProviders, p) {
		return nil
	}
	return fmt.Errorf("client %s runs models of %s, not %q: write %s/MODEL", def.Name, strings.Join(def.ModelProviders, ", "), model, def.ModelProviders[0])
}
