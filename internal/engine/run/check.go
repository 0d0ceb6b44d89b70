package run

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/internal/engine/eval"
	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/protocol"
)

// Check makes sure an eval can run where it will run, before any client or
// server opens: every variant's client allows the OS of the machines that
// run its trials and is available there in this build, and every case
// override is one its clients honour, with a model they run and options
// their schemas and Checks accept. It returns every problem, one per line.
//
// What a variant asks of its client in the config itself (the model's
// provider, the client's Check of the model and options, MST's proxy) is
// checked by eval.Load, with the place in the file (eval.ClientCatalog,
// which Catalog is): cfg has passed those checks.
//
// Only the OS check depends on the machines. With goos empty (the
// runner's OS is unknown until each worker says it at hello), a client
// must run on some OS in this build, and the coordinator checks each
// machine's OS with CheckMachine; every other check runs the same.
//
// Each client's Check runs on every case's setting, whatever the runner.
// With preflight set (the trials run on this machine), each variant's
// client also checks what it needs here, such as an installed CLI.
func Check(cfg *eval.Config, cases []dataset.Case, reg *client.Registry, goos string, preflight bool) error {
	var errs []error
	for _, name := range cfg.VariantOrder {
		v := cfg.Variants[name]
		def, err := reg.Lookup(v.Client)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: variants.%s.client: %w", cfg.File, name, err))
			continue
		}
		if goos != "" {
			err = client.CheckOS(reg, v.Client, goos)
		} else {
			err = runsSomewhere(reg, def)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: variants.%s.client: %w", cfg.File, name, err))
			continue
		}
		if preflight && def.Preflight != nil {
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
				if err := eval.CheckModel(def, c.Model); err != nil {
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
			if len(problems) == 0 && err == nil && def.Check != nil {
				model := v.Model
				if c.Model != "" {
					model = c.Model
				}
				if err := def.Check(model, merged); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w (client %s, variant %s)", where, err, def.Name, name))
				}
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

// knownOS are the systems a client without an OS requirement may run on.
var knownOS = []string{"linux", "darwin", "windows"}

// runsSomewhere checks that some machine can run a client in this build:
// one of the systems it allows has it available. It returns the first
// system's error when none does.
func runsSomewhere(reg *client.Registry, def *client.Definition) error {
	oses := def.Requirements.OS
	if len(oses) == 0 {
		oses = knownOS
	}
	var first error
	for _, o := range oses {
		err := client.CheckOS(reg, def.Name, o)
		if err == nil {
			return nil
		}
		if first == nil {
			first = err
		}
	}
	return first
}

// CheckMachine is the part of Check that needs the machine: that the
// client of every variant of bundle b runs on goos, the OS a worker said
// at hello. file is the eval config's path, for the messages. A nil b
// checks nothing.
func CheckMachine(file string, reg *client.Registry, b *shard.Bundle, goos string) error {
	if b == nil || reg == nil {
		return nil
	}
	var errs []string
	seen := map[string]bool{}
	for _, set := range b.Settings {
		if seen[set.Variant] {
			continue
		}
		seen[set.Variant] = true
		if err := client.CheckOS(reg, set.Client, goos); err != nil {
			errs = append(errs, fmt.Sprintf("%s: variants.%s.client: %v", file, set.Variant, err))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return errors.New(strings.Join(errs, "\n") + "\nrun these variants on machines of an OS their clients allow (another --runner or image), or leave them out with --variant")
}

// HelloCheck returns the coordinator's CheckHello for a run of the eval
// config file: CheckMachine with the OS the worker's hello names.
func HelloCheck(file string, reg *client.Registry) func(*shard.Bundle, *protocol.Hello) error {
	return func(b *shard.Bundle, h *protocol.Hello) error {
		return CheckMachine(file, reg, b, h.OS)
	}
}

// ClientDefinition returns a client's definition (eval.ClientCatalog):
// Load checks each variant against it.
func (c Catalog) ClientDefinition(name string) (*client.Definition, error) {
	return c.Clients.Lookup(name)
}

var _ eval.ClientCatalog = Catalog{}
