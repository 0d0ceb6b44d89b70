package kubernetes

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// podSpec says which pod to create for a shard.
type podSpec struct {
	run     string
	shard   int
	attempt int
	// grade is set for a shard that grades: its pod's name says so.
	grade bool
	// suffix, when set, is added to the name because a kept pod of an
	// earlier attempt holds it.
	suffix string
	// deadline is how long the pod may live (runner.Params.Deadline):
	// Kubernetes ends it then, and its main process exits; zero, never.
	deadline time.Duration
}

var notNameChar = regexp.MustCompile(`[^a-z0-9-]+`)

// podName is mst-<run>-<shard>, with -a<attempt> on resumed runs, -grade
// for a shard that grades and the suffix when there is one, lower-cased, with every run of characters a
// pod name cannot hold replaced by '-', and cut to 63 characters (a pod's
// hostname is its name) keeping its end, which tells shards apart.
func podName(spec podSpec) string {
	tail := "-" + strconv.Itoa(spec.shard)
	if spec.attempt > 1 {
		tail += "-a" + strconv.Itoa(spec.attempt)
	}
	if spec.grade {
		tail += "-grade"
	}
	if spec.suffix != "" {
		tail += "-" + spec.suffix
	}
	head := "mst-" + strings.Trim(notNameChar.ReplaceAllString(strings.ToLower(spec.run), "-"), "-")
	if len(head)+len(tail) > 63 {
		head = strings.TrimRight(head[:63-len(tail)], "-")
	}
	return head + tail
}

var notLabelChar = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// labelValue makes s a valid label value: characters a label cannot hold
// become '-', it is cut to 63 characters, and it starts and ends with a
// letter or digit. LabelRun's value goes through it both when a pod is
// created and when Leftovers looks for a run's pods, so the two agree.
func labelValue(s string) string {
	v := notLabelChar.ReplaceAllString(s, "-")
	if len(v) > 63 {
		v = v[:63]
	}
	return strings.TrimFunc(v, func(r rune) bool { return r == '-' || r == '_' || r == '.' })
}

// imageDigestEnv is the variable that tells a worker the image its pod
// runs, pinned by digest (shard.ImageDigestEnv, which a runner cannot
// import); its hello carries it into run.json.
const imageDigestEnv = "MST_IMAGE_DIGEST"

// workerEnv is the environment of a worker pod's container: a home, how a
// missing client's program gets into the image, and, when the image's
// reference is pinned by digest already, the image (imageDigestEnv).
func workerEnv(image string) []envVar {
	env := []envVar{{Name: "HOME", Value: "/tmp"}, {Name: clientSetupEnv, Value: clientSetup}}
	if strings.Contains(image, "@") {
		env = append(env, envVar{Name: imageDigestEnv, Value: image})
	}
	return env
}

// Names of the pod's volumes.
const (
	volumeTokens = "mst-run"
	volumeWork   = "work"
	volumeTmp    = "tmp"
)

// clientSetupEnv is the variable that tells a worker how a client's
// program gets onto its machine (shard.ClientSetupEnv, which a runner
// cannot import), and clientSetup what a worker's pod says in it: the
// client's name stands for {client}.
const (
	clientSetupEnv = "MST_CLIENT_SETUP"
	clientSetup    = "this worker runs in a Kubernetes pod whose image lacks it: build a worker image that has it with " +
		"`mst runner setup docker --with {client}` (adding the names of the other programs the eval runs there), " +
		"push it where the cluster's nodes pull from, and pass it as --runner-option image=REF"
)

// TokensDir is where the pod mounts an in-memory emptyDir for the worker's
// tokens.
const TokensDir = "/run/mst"

// manifest is a Pod with only the fields the runner sets. Field order
// follows the Kubernetes documentation, so the JSON reads naturally.
type manifest struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Metadata   metadata `json:"metadata"`
	Spec       podBody  `json:"spec"`
}

type metadata struct {
	Name        string            `json:"name"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type podBody struct {
	RestartPolicy                 string              `json:"restartPolicy"`
	ActiveDeadlineSeconds         int64               `json:"activeDeadlineSeconds,omitempty"`
	ServiceAccountName            string              `json:"serviceAccountName,omitempty"`
	AutomountServiceAccountToken  bool                `json:"automountServiceAccountToken"`
	TerminationGracePeriodSeconds int                 `json:"terminationGracePeriodSeconds"`
	SecurityContext               *podSecurityContext `json:"securityContext,omitempty"`
	NodeSelector                  map[string]string   `json:"nodeSelector,omitempty"`
	Tolerations                   []toleration        `json:"tolerations,omitempty"`
	ImagePullSecrets              []objectName        `json:"imagePullSecrets,omitempty"`
	Containers                    []container         `json:"containers"`
	Volumes                       []volume            `json:"volumes"`
}

type container struct {
	Name            string          `json:"name"`
	Image           string          `json:"image"`
	Command         []string        `json:"command"`
	Env             []envVar        `json:"env"`
	Resources       *resources      `json:"resources,omitempty"`
	SecurityContext securityContext `json:"securityContext"`
	VolumeMounts    []volumeMount   `json:"volumeMounts"`
}

// podSecurityContext is the pod's user and seccomp profile.
type podSecurityContext struct {
	RunAsNonRoot   bool            `json:"runAsNonRoot,omitempty"`
	RunAsUser      *int64          `json:"runAsUser,omitempty"`
	RunAsGroup     *int64          `json:"runAsGroup,omitempty"`
	FSGroup        *int64          `json:"fsGroup,omitempty"`
	SeccompProfile *seccompProfile `json:"seccompProfile,omitempty"`
}

type seccompProfile struct {
	Type string `json:"type"`
}

type resources struct {
	Requests map[string]string `json:"requests,omitempty"`
	Limits   map[string]string `json:"limits,omitempty"`
}

type objectName struct {
	Name string `json:"name"`
}

type envVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type securityContext struct {
	AllowPrivilegeEscalation bool          `json:"allowPrivilegeEscalation"`
	Capabilities             *capabilities `json:"capabilities,omitempty"`
}

type capabilities struct {
	Drop []string `json:"drop"`
}

type volumeMount struct {
	Name      string `json:"name"`
	MountPath string `json:"mountPath"`
}

type volume struct {
	Name     string   `json:"name"`
	EmptyDir emptyDir `json:"emptyDir"`
}

type emptyDir struct {
	Medium string `json:"medium,omitempty"`
}

// podManifest is the Pod, as JSON for kubectl create -f -, that runs one
// shard's worker: named name, labelled with the run, shard and version,
// its one container running `mst runner idle` from image with no privilege
// escalation, an in-memory emptyDir at /run/mst for the tokens and
// emptyDirs at the work folder and /tmp (HOME), never restarted, and with
// no API token unless a service account is named; the placement options
// add its user, security profile, resources, node selector, tolerations
// and pull secrets (placement.apply).
func podManifest(name string, spec podSpec, set settings, image, version string) []byte {
	m := manifest{
		APIVersion: "v1",
		Kind:       "Pod",
		Metadata: metadata{
			Name: name,
			Labels: map[string]string{
				LabelRun:     labelValue(spec.run),
				LabelShard:   strconv.Itoa(spec.shard),
				LabelVersion: labelValue(version),
			},
			Annotations: map[string]string{AnnotationRun: spec.run},
		},
		Spec: podBody{
			RestartPolicy:                 "Never",
			ActiveDeadlineSeconds:         int64((spec.deadline + time.Second - 1) / time.Second),
			ServiceAccountName:            set.serviceAccount,
			AutomountServiceAccountToken:  set.serviceAccount != "",
			TerminationGracePeriodSeconds: 10,
			Containers: []container{{
				Name:            ContainerName,
				Image:           image,
				Command:         idleCommand(set.mst, spec.deadline),
				Env:             workerEnv(image),
				SecurityContext: securityContext{AllowPrivilegeEscalation: false},
				VolumeMounts: []volumeMount{
					{Name: volumeTokens, MountPath: TokensDir},
					{Name: volumeWork, MountPath: set.workDir},
					{Name: volumeTmp, MountPath: "/tmp"},
				},
			}},
			Volumes: []volume{
				{Name: volumeTokens, EmptyDir: emptyDir{Medium: "Memory"}},
				{Name: volumeWork},
				{Name: volumeTmp},
			},
		},
	}
	set.placement.apply(&m.Spec)
	b, err := json.Marshal(m)
	if err != nil {
		// The manifest holds only strings, numbers and booleans.
		panic(err)
	}
	return b
}

// idleCommand is a pod's main process: mst runner idle, until the
// deadline when there is one.
func idleCommand(mst string, deadline time.Duration) []string {
	if deadline <= 0 {
		return []string{mst, "runner", "idle"}
	}
	return []string{mst, "runner", "idle", "--deadline", deadline.String()}
}

// coordinatorManifest is the Pod, as JSON for kubectl create -f -, of a
// detached run's coordinator: named name, labelled with the detached run's
// id and the version, running as the coordinator's service account with
// its token mounted, its one container (named as a worker's, so the
// worker's exec and copies serve it) running `mst runner idle` from image
// until the deadline, with no privilege escalation and emptyDirs at the
// work folder and /tmp (HOME), and the placement options' fields as a
// worker's pod has them. Kubernetes ends it at the deadline by itself
// (activeDeadlineSeconds), and never restarts it.
func coordinatorManifest(name, id string, set settings, image, version string, deadline time.Duration) []byte {
	secs := int64((deadline + time.Second - 1) / time.Second)
	m := manifest{
		APIVersion: "v1",
		Kind:       "Pod",
		Metadata: metadata{
			Name: name,
			Labels: map[string]string{
				LabelCoordinator: labelValue(id),
				LabelVersion:     labelValue(version),
			},
			Annotations: map[string]string{AnnotationCoordinator: id},
		},
		Spec: podBody{
			RestartPolicy:                 "Never",
			ActiveDeadlineSeconds:         secs,
			ServiceAccountName:            set.coordinatorServiceAccount,
			AutomountServiceAccountToken:  true,
			TerminationGracePeriodSeconds: 10,
			Containers: []container{{
				Name:            ContainerName,
				Image:           image,
				Command:         []string{set.mst, "runner", "idle", "--deadline", time.Duration(secs * int64(time.Second)).String()},
				Env:             []envVar{{Name: "HOME", Value: "/tmp"}},
				SecurityContext: securityContext{AllowPrivilegeEscalation: false},
				VolumeMounts: []volumeMount{
					{Name: volumeWork, MountPath: set.workDir},
					{Name: volumeTmp, MountPath: "/tmp"},
				},
			}},
			Volumes: []volume{
				{Name: volumeWork},
				{Name: volumeTmp},
			},
		},
	}
	set.placement.apply(&m.Spec)
	b, err := json.Marshal(m)
	if err != nil {
		// The manifest holds only strings, numbers and booleans.
		panic(err)
	}
	return b
}

// apply sets the fields the placement options give on the pod body and its
// one container. Under the restricted profile (the default, also when
// podSecurity is "") the pod runs as the uid and gid, DefaultUser unless
// runAsUser names others (the gid also owns its emptyDirs, through
// fsGroup), as a user other than root, with the runtime's default seccomp profile, and its
// container with every capability dropped; under the baseline profile only
// a user the runAsUser option names is set.
func (pl placement) apply(body *podBody) {
	c := &body.Containers[0]
	restricted := pl.podSecurity != PodSecurityBaseline
	uid, gid, hasUser := pl.runAsUser, pl.runAsGroup, pl.hasUser
	if restricted && !hasUser {
		uid, gid, hasUser = DefaultUser, DefaultUser, true
	}
	if hasUser {
		body.SecurityContext = &podSecurityContext{RunAsUser: &uid, RunAsGroup: &gid, FSGroup: &gid}
	}
	if restricted {
		body.SecurityContext.RunAsNonRoot = true
		body.SecurityContext.SeccompProfile = &seccompProfile{Type: "RuntimeDefault"}
		c.SecurityContext.Capabilities = &capabilities{Drop: []string{"ALL"}}
	}
	if pl.requests != nil || pl.limits != nil {
		c.Resources = &resources{Requests: pl.requests, Limits: pl.limits}
	}
	body.NodeSelector = pl.nodeSelector
	body.Tolerations = pl.tolerations
	for _, n := range pl.pullSecrets {
		body.ImagePullSecrets = append(body.ImagePullSecrets, objectName{Name: n})
	}
}
