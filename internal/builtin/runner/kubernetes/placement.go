package kubernetes

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// This file reads the options that say how a pod runs and where: its
// security profile and user, its resources, the nodes it may go to and the
// secrets its image is pulled with. They apply to the workers' pods and to
// a detached run's coordinator pod alike. Every option is a string (the
// runner's options are); lists are comma-separated, and each error quotes
// the option, says what is wrong and shows a value that works.

// Values of the podSecurity option: the names of the Pod Security
// Standards profiles a pod meets.
const (
	// PodSecurityRestricted runs the pods as a user other than root (the
	// runAsUser option, 65532 by default), with every capability dropped,
	// no privilege escalation and the runtime's default seccomp profile:
	// what a namespace labelled
	// pod-security.kubernetes.io/enforce=restricted admits.
	PodSecurityRestricted = "restricted"
	// PodSecurityBaseline leaves the user and capabilities to the image,
	// for images that must run as root; only privilege escalation is off.
	PodSecurityBaseline = "baseline"
)

// DefaultUser is the uid and gid the pods run as under the restricted
// profile when the runAsUser option gives none. MST's own worker image is
// FROM scratch and has no users, so it names none; 65532 is the "nonroot"
// user of the distroless images, which many clusters' policies expect. The
// pods' writable places (the work folder, /tmp, which is HOME, and
// /run/mst) are emptyDirs, which any uid may write.
const DefaultUser = 65532

// Resource names the requests and limits options take.
var resourceNames = []string{"cpu", "memory", "ephemeral-storage"}

// placement is what the placement options say, decoded.
type placement struct {
	// podSecurity is PodSecurityRestricted or PodSecurityBaseline.
	podSecurity string
	// runAsUser and runAsGroup are the uid and gid the runAsUser option
	// names, when hasUser is set; without it, restricted pods run as
	// DefaultUser and baseline ones as the image says.
	hasUser    bool
	runAsUser  int64
	runAsGroup int64
	// requests and limits map resource names to quantities.
	requests map[string]string
	limits   map[string]string
	// nodeSelector maps node labels to the values a node must have.
	nodeSelector map[string]string
	tolerations  []toleration
	// pullSecrets name the secrets in the namespace the nodes pull the
	// images with.
	pullSecrets []string
}

// parsePlacement reads the placement options.
func parsePlacement(options map[string]string) (placement, error) {
	p := placement{podSecurity: PodSecurityRestricted}
	switch v := options[OptionPodSecurity]; v {
	case "", PodSecurityRestricted:
	case PodSecurityBaseline:
		p.podSecurity = v
	default:
		return p, fmt.Errorf("kubernetes runner: --runner-option %s=%s: write %s (the default: the pods run as a user other than root, with no capabilities) or %s (for an image that must run as root)",
			OptionPodSecurity, v, PodSecurityRestricted, PodSecurityBaseline)
	}
	if v := options[OptionRunAsUser]; v != "" {
		uid, gid, err := parseUser(v)
		if err != nil {
			return p, fmt.Errorf("kubernetes runner: --runner-option %s=%s: %v: write a numeric uid, or uid:gid, such as %d or 1000:1000", OptionRunAsUser, v, err, DefaultUser)
		}
		if uid == 0 && p.podSecurity == PodSecurityRestricted {
			return p, fmt.Errorf("kubernetes runner: --runner-option %s=%s: under the %s profile the pods run as a user other than root: give another uid, or add --runner-option %s=%s for an image that must run as root",
				OptionRunAsUser, v, PodSecurityRestricted, OptionPodSecurity, PodSecurityBaseline)
		}
		p.hasUser, p.runAsUser, p.runAsGroup = true, uid, gid
	}
	var err error
	if p.requests, err = parseResources(OptionRequests, options[OptionRequests]); err != nil {
		return p, err
	}
	if p.limits, err = parseResources(OptionLimits, options[OptionLimits]); err != nil {
		return p, err
	}
	if p.nodeSelector, err = parseNodeSelector(options[OptionNodeSelector]); err != nil {
		return p, err
	}
	if p.tolerations, err = parseTolerations(options[OptionTolerations]); err != nil {
		return p, err
	}
	if p.pullSecrets, err = parsePullSecrets(options[OptionImagePullSecrets]); err != nil {
		return p, err
	}
	return p, nil
}

// parseUser reads "uid" or "uid:gid"; the gid is the uid when not given.
func parseUser(v string) (uid, gid int64, err error) {
	u, g, hasGroup := strings.Cut(v, ":")
	if uid, err = parseID(u); err != nil {
		return 0, 0, fmt.Errorf("the uid %q is not a number from 0 to 2147483647", u)
	}
	gid = uid
	if hasGroup {
		if gid, err = parseID(g); err != nil {
			return 0, 0, fmt.Errorf("the gid %q is not a number from 0 to 2147483647", g)
		}
	}
	return uid, gid, nil
}

func parseID(s string) (int64, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("not a number")
	}
	return strconv.ParseInt(s, 10, 32)
}

// items splits a comma-separated list, leaving out spaces and empty items.
func items(v string) []string {
	var out []string
	for _, it := range strings.Split(v, ",") {
		if it = strings.TrimSpace(it); it != "" {
			out = append(out, it)
		}
	}
	return out
}

// quantity is Kubernetes' syntax for an amount without a sign: a decimal
// number with an SI suffix (m, k, M, G…), a binary one (Ki, Mi, Gi…) or an
// exponent (e3).
var quantity = regexp.MustCompile(`^([0-9]+(\.[0-9]*)?|\.[0-9]+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|[eE][0-9]+)?$`)

// parseResources reads the requests or limits option (named option):
// NAME=QUANTITY pairs separated by commas, such as cpu=500m,memory=1Gi.
func parseResources(option, v string) (map[string]string, error) {
	if v == "" {
		return nil, nil
	}
	bad := func(why string) error {
		return fmt.Errorf("kubernetes runner: --runner-option %s=%s: %s: write NAME=QUANTITY pairs separated by commas, such as %s=cpu=500m,memory=1Gi (the names are %s)",
			option, v, why, option, strings.Join(resourceNames, ", "))
	}
	out := map[string]string{}
	for _, it := range items(v) {
		name, q, ok := strings.Cut(it, "=")
		name, q = strings.TrimSpace(name), strings.TrimSpace(q)
		switch {
		case !ok:
			return nil, bad(fmt.Sprintf("%q has no '='", it))
		case !slices.Contains(resourceNames, name):
			return nil, bad(fmt.Sprintf("%q is not a resource the runner sets", name))
		case out[name] != "":
			return nil, bad(fmt.Sprintf("%s is given twice", name))
		case !quantity.MatchString(q):
			return nil, bad(fmt.Sprintf("%s=%q is not a quantity (such as 250m or 2 for cpu, 512Mi or 4Gi for memory)", name, q))
		case name != "cpu" && strings.HasSuffix(q, "m"):
			// Valid, but a thousandth of a byte: always a slip for Mi.
			return nil, bad(fmt.Sprintf("%s=%s is %s thousandths of a byte; write %sMi for mebibytes", name, q, strings.TrimSuffix(q, "m"), strings.TrimSuffix(q, "m")))
		}
		out[name] = q
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// Label keys and values as Kubernetes takes them: a key is an optional
// DNS subdomain and '/' before a name of at most 63 letters, digits, '-',
// '_' and '.', starting and ending with a letter or digit; a value is such
// a name, or empty.
var labelName = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)

// labelKeyError says what is wrong with the label key k, or "".
func labelKeyError(k string) string {
	prefix, name, hasPrefix := strings.Cut(k, "/")
	if !hasPrefix {
		prefix, name = "", k
	}
	switch {
	case hasPrefix && (len(prefix) > 253 || !dnsSubdomain.MatchString(prefix)):
		return fmt.Sprintf("the prefix %q of the key %q is not a DNS subdomain (lower-case letters, digits, '-' and '.')", prefix, k)
	case len(name) > 63 || !labelName.MatchString(name):
		return fmt.Sprintf("the key %q is not a label key (at most 63 letters, digits, '-', '_' and '.', after an optional prefix and '/')", k)
	}
	return ""
}

// labelValueError says what is wrong with the label value v, or "".
func labelValueError(v string) string {
	if v != "" && (len(v) > 63 || !labelName.MatchString(v)) {
		return fmt.Sprintf("the value %q is not a label value (at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit)", v)
	}
	return ""
}

// parseNodeSelector reads the nodeSelector option: KEY=VALUE pairs
// separated by commas, the labels a node must have.
func parseNodeSelector(v string) (map[string]string, error) {
	if v == "" {
		return nil, nil
	}
	bad := func(why string) error {
		return fmt.Errorf("kubernetes runner: --runner-option %s=%s: %s: write the node labels as KEY=VALUE pairs separated by commas, such as %s=kubernetes.io/arch=amd64,pool=evals",
			OptionNodeSelector, v, why, OptionNodeSelector)
	}
	out := map[string]string{}
	for _, it := range items(v) {
		key, val, ok := strings.Cut(it, "=")
		if !ok {
			return nil, bad(fmt.Sprintf("%q has no '='", it))
		}
		if _, dup := out[key]; dup {
			return nil, bad(fmt.Sprintf("the key %s is given twice", key))
		}
		if why := labelKeyError(key) + labelValueError(val); why != "" {
			return nil, bad(why)
		}
		out[key] = val
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// toleration is one of a pod's tolerations, as its manifest holds it.
type toleration struct {
	Key      string `json:"key"`
	Operator string `json:"operator"`
	Value    string `json:"value,omitempty"`
	Effect   string `json:"effect,omitempty"`
}

// taintEffects are the effects a toleration may name.
var taintEffects = []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}

// parseTolerations reads the tolerations option: taints written as kubectl
// taint writes them, separated by commas. KEY=VALUE:EFFECT tolerates the
// taint with that value, KEY:EFFECT the key with any value, and without
// :EFFECT every effect of the key.
func parseTolerations(v string) ([]toleration, error) {
	if v == "" {
		return nil, nil
	}
	bad := func(why string) error {
		return fmt.Errorf("kubernetes runner: --runner-option %s=%s: %s: write the taints to tolerate as kubectl taint does, KEY[=VALUE][:EFFECT] separated by commas, such as %s=dedicated=evals:NoSchedule,gpu:NoExecute (EFFECT is %s; without it, every effect)",
			OptionTolerations, v, why, OptionTolerations, strings.Join(taintEffects, ", "))
	}
	var out []toleration
	for _, it := range items(v) {
		taint, effect, hasEffect := strings.Cut(it, ":")
		key, val, hasValue := strings.Cut(taint, "=")
		t := toleration{Key: key, Operator: "Exists"}
		if hasValue {
			t.Operator, t.Value = "Equal", val
		}
		if hasEffect {
			if !slices.Contains(taintEffects, effect) {
				return nil, bad(fmt.Sprintf("%q is not a taint's effect", effect))
			}
			t.Effect = effect
		}
		switch {
		case key == "":
			return nil, bad(fmt.Sprintf("%q names no key", it))
		case labelKeyError(key) != "":
			return nil, bad(labelKeyError(key))
		case labelValueError(val) != "":
			return nil, bad(labelValueError(val))
		}
		out = append(out, t)
	}
	return out, nil
}

// parsePullSecrets reads the imagePullSecrets option: names of secrets in
// the namespace, separated by commas.
func parsePullSecrets(v string) ([]string, error) {
	var out []string
	for _, name := range items(v) {
		if len(name) > 253 || !dnsSubdomain.MatchString(name) {
			return nil, fmt.Errorf("kubernetes runner: --runner-option %s=%s: %q is not a secret's name (lower-case letters, digits, '-' and '.'): name the docker-registry secrets of the namespace, separated by commas, such as %s=regcred,mirror-cred",
				OptionImagePullSecrets, v, name, OptionImagePullSecrets)
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out, nil
}
