package run

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/transcript"
)

// resolveGraders finishes the graders once the secrets are known: it
// parses them again in redacted space, then gives every setting the tools
// its graders name, for the readiness check.
func (p *Plan) resolveGraders(set *secrets.Set) error {
	if err := p.redactGraders(secrets.NewRedactor(set)); err != nil {
		return err
	}
	p.placeRefs()
	return nil
}

// redactGraders parses the graders again with every secret value in their
// specs replaced the way the store replaces it ([redacted:NAME]). Graders
// read stored transcripts, which hold the redacted text, so this is what
// lets a grader whose expected value is a secret match, and lets the grade
// made during the run agree with a later regrade of the stored run (whose
// graders and cases are stored redacted too). A Detail then never shows a
// secret either.
func (p *Plan) redactGraders(r *secrets.Redactor) error {
	redact := func(specs []json.RawMessage) ([]json.RawMessage, bool) {
		out := make([]json.RawMessage, len(specs))
		changed := false
		for i, s := range specs {
			out[i] = r.Bytes(s)
			changed = changed || !bytes.Equal(out[i], s)
		}
		return out, changed
	}
	global := p.Config.Graders
	globalSpecs, globalChanged := redact(global)
	var parsedGlobal []grade.Grader
	if globalChanged {
		gs, err := grade.ParseAllIn(p.gradeReg, globalSpecs)
		if err != nil {
			return fmt.Errorf("%s: graders%w (after redacting secret values from it)", p.Config.File, err)
		}
		parsedGlobal = gs
	}
	var bad []error
	for _, c := range p.Cases {
		specs, changed := redact(c.Expect)
		if !globalChanged && !changed {
			continue
		}
		gs := p.graders[c.ID]
		if globalChanged {
			gs = append(slices.Clip(parsedGlobal), gs[len(global):]...)
		}
		if changed {
			own, err := grade.ParseAllIn(p.gradeReg, specs)
			if err != nil {
				bad = append(bad, fmt.Errorf("%s: case %q: expect%w (after redacting secret values from it)", c.Source, c.ID, err))
				continue
			}
			gs = append(slices.Clip(gs[:len(global)]), own...)
		}
		p.graders[c.ID] = gs
	}
	return errors.Join(bad...)
}

// placeRefs gives each setting the tools named by the graders of the
// trials it runs: the eval's graders, and the expect graders of its cases.
func (p *Plan) placeRefs() {
	nGlobal := len(p.Config.Graders)
	seen := make([]map[grade.PlacedRef]bool, len(p.Settings))
	for _, c := range p.Cases {
		gs := p.graders[c.ID]
		for _, v := range p.Variants {
			i, set := p.Setting(transcript.Key{Case: c.ID, Variant: v})
			if seen[i] == nil {
				seen[i] = map[grade.PlacedRef]bool{}
			}
			for j, g := range gs {
				at := fmt.Sprintf("graders[%d]", j)
				if j >= nGlobal {
					at = fmt.Sprintf("%s: case %q: expect[%d]", c.Source, c.ID, j-nGlobal)
				}
				for _, ref := range grade.Refs([]grade.Grader{g}) {
					pr := grade.PlacedRef{At: at, Ref: ref}
					if !seen[i][pr] {
						seen[i][pr] = true
						set.GraderRefs = append(set.GraderRefs, pr)
					}
				}
			}
		}
	}
}
