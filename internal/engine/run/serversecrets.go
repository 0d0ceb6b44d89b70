package run

import (
	"errors"
	"fmt"

	"github.com/mst-eval/mst/secrets"
)

// checkServerSecrets refuses a plan whose servers refer to a secret
// (${secret:NAME} in env or headers) that set does not hold, naming the
// config file, the place and the secret. The references stay references
// in the settings: the worker resolves them from the values the
// coordinator sends it. A nil set means the values are not known (mst
// validate without --secrets-file): then only the references' syntax is
// checked.
func (p *Plan) checkServerSecrets(set *secrets.Set, secretsFile string) error {
	var errs []error
	seen := map[string]bool{}
	for _, st := range p.Settings {
		for _, srv := range st.Servers {
			if seen[srv.Name] {
				continue
			}
			seen[srv.Name] = true
			refs, err := srv.SecretRefs()
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", p.Config.File, err))
				continue
			}
			if set == nil {
				continue
			}
			for _, ref := range refs {
				if _, ok := set.Get(ref.Name); ok {
					continue
				}
				how := "no --secrets-file was given: give one that sets it"
				if secretsFile != "" {
					how = fmt.Sprintf("the secrets file %s does not set it: add a line %s=...", secretsFile, ref.Name)
				}
				errs = append(errs, fmt.Errorf("%s: servers.%s.%s refers to the secret %s, and %s", p.Config.File, srv.Name, ref.Where, ref.Name, how))
			}
		}
	}
	return errors.Join(errs...)
}
