package run

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/internal/engine/shard"
)

// The names the eval config's schema allows (eval/schema.json): a plan
// made in Go is held to them too, since run.json, transcripts' paths and
// reports carry them.
var (
	variantNameRE = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	serverNameRE  = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
)

// Validate checks a plan before Execute starts anything (no runner, no
// server, no client): what NewPlan holds a config file, a dataset and a
// plugin's dataset source to, for a plan built or changed in Go. The
// cases go through the dataset checks (dataset.Check: ids and inputs not
// blank, ids unique); the variants must be named as a config names them,
// each once, and be the config's; every variant has a setting whose client
// is one of clients (when clients is not nil) and whose model is not blank; every setting has
// servers, each named and with a command or a URL, and exactly the ones
// its variant lists in the config. A plan built in Go (not by NewPlan)
// gives one setting per variant: settings for a case's overrides come
// from NewPlan only. Execute calls it first; every problem is reported,
// one per line, as an error that wraps ErrInvalid.
func (p *Plan) Validate(clients *client.Registry) error {
	if p == nil {
		return invalid(errors.New("the plan is nil: make one with NewPlan"))
	}
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if p.Config == nil {
		return invalid(errors.New("the plan has no eval config (Plan.Config): make it with NewPlan, or give it the config its variants come from"))
	}
	if p.Trials < 1 {
		add("plan: Trials is %d: each case runs at least once under each variant", p.Trials)
	}
	if err := dataset.Check("plan: Cases", p.Cases); err != nil {
		errs = append(errs, err)
	}
	if len(p.Variants) == 0 {
		add("plan: Variants is empty: name at least one variant of %s", p.configName())
	}
	seen := map[string]bool{}
	for i, v := range p.Variants {
		switch {
		case strings.TrimSpace(v) == "":
			add("plan: Variants[%d] is blank: a variant has a name", i)
		case !variantNameRE.MatchString(v):
			add("plan: Variants[%d] is %q: a variant name may hold only letters, digits, '.', '_' and '-'", i, v)
		case seen[v]:
			add("plan: Variants[%d]: variant %s is listed twice", i, v)
		default:
			if _, ok := p.Config.Variants[v]; !ok {
				add("plan: Variants[%d]: %s has no variant %s (it has: %s)", i, p.configName(), v, strings.Join(p.Config.VariantOrder, ", "))
			}
		}
		seen[v] = true
	}
	if len(p.Settings) == 0 && len(p.Variants) > 0 {
		add("plan: Settings is empty: every variant needs the setting its trials run with (NewPlan makes them)")
	}
	count := map[string]int{}
	for i := range p.Settings {
		set := &p.Settings[i]
		count[set.Variant]++
		errs = append(errs, p.validateSetting(i, set, clients)...)
	}
	for _, v := range p.Variants {
		switch {
		case strings.TrimSpace(v) == "" || len(p.Settings) == 0:
		case count[v] == 0:
			add("plan: variant %s has no setting in Settings", v)
		case p.settingOf == nil && count[v] > 1:
			add("plan: variant %s has %d settings: a plan built in Go gives one per variant (the settings of cases' overrides come from NewPlan)", v, count[v])
		}
	}
	if len(errs) == 0 {
		return nil
	}
	lines := make([]string, len(errs))
	for i, e := range errs {
		lines[i] = e.Error()
	}
	return invalid(errors.New(strings.Join(lines, "\n")))
}

// validateSetting checks one setting (Validate).
func (p *Plan) validateSetting(i int, set *shard.Setting, clients *client.Registry) []error {
	var errs []error
	at := fmt.Sprintf("plan: Settings[%d]", i)
	if set.Variant != "" {
		at += " (variant " + set.Variant + ")"
	}
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(at+": "+format, args...)) }
	switch {
	case strings.TrimSpace(set.Variant) == "":
		add("the variant is blank")
	case !slices.Contains(p.Variants, set.Variant):
		add("variant %s is not among the plan's Variants", set.Variant)
	}
	if strings.TrimSpace(set.Client) == "" {
		add("the client is blank")
	} else if clients != nil {
		if _, err := clients.Lookup(set.Client); err != nil {
			add("%v", err)
		}
	}
	if strings.TrimSpace(set.Model) == "" {
		add("the model is blank: name one such as anthropic/claude-sonnet-4-5, or offline")
	}
	if len(set.Servers) == 0 {
		add("no servers: a variant's trials need at least one MCP server")
	}
	names := map[string]bool{}
	for j, s := range set.Servers {
		switch {
		case strings.TrimSpace(s.Name) == "":
			add("Servers[%d] has a blank name", j)
		case !serverNameRE.MatchString(s.Name):
			add("Servers[%d] is named %q: a server name may hold only letters, digits, '_' and '-'", j, s.Name)
		case names[s.Name]:
			add("server %s is listed twice", s.Name)
		}
		names[s.Name] = true
		if strings.TrimSpace(s.Command) == "" && strings.TrimSpace(s.URL) == "" {
			add("server %s has neither a command nor a URL", s.Name)
		}
	}
	if v, ok := p.Config.Variants[set.Variant]; ok && len(set.Servers) > 0 {
		var got []string
		for _, s := range set.Servers {
			got = append(got, s.Name)
		}
		want := slices.Sorted(slices.Values(v.Servers))
		if slices.Sort(got); !slices.Equal(got, want) {
			add("its servers are %s, and variants.%s in %s uses %s", strings.Join(got, ", "), set.Variant, p.configName(), strings.Join(want, ", "))
		}
	}
	return errs
}

// configName names the plan's config in errors.
func (p *Plan) configName() string {
	if p.Config.File != "" {
		return p.Config.File
	}
	if p.Config.Name != "" {
		return "eval " + p.Config.Name
	}
	return "the eval config"
}

// indexSettings finds each variant's setting, for a plan built in Go
// (Validate has checked that each variant has exactly one).
func (p *Plan) indexSettings() {
	p.settingOf = make(map[settingKey]int, len(p.Settings))
	for i, set := range p.Settings {
		p.settingOf[settingKey{set.Variant, ""}] = i
	}
}
